/*
 * An AXFR (RFC 5936) read into a zone in C, message by message as the primary sends
 * them: a secondary's first transfer of a zone of millions of records never passes
 * its records through Python (dnspython takes about 40 s to parse a million, and 50 s
 * more to build its zone).
 *
 * Each message is parsed by ldns and checked as dnspython checks a transfer: the
 * query's ID, QR, NOERROR, the question (the first message's must be there), the
 * TSIG (RFC 8945: the key's algorithm, the MAC chained from the query's and then from
 * the message before, the time within its fudge, no error), every record IN and in
 * the zone, the SOA first and again, with the same serial, as the last record of the
 * last message. What it cannot check as dnspython does (an unsigned message between
 * signed ones, an algorithm ldns lacks, a class other than IN) is declined, with the
 * transfer's failures: the caller then makes the transfer again with dnspython, whose
 * checks and messages decide (stormpy/dns/secondary.py). So this side only has to be
 * right when it accepts.
 *
 * The records go in with sp_zone_add_record(); after the last message, the caller
 * groups them with sp_zone_finish(). Built with ldns only (read.c's build).
 */
#ifndef STORMPY_ZONE_AXFR_H
#define STORMPY_ZONE_AXFR_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/zone/zone.h"

enum { SP_ZONE_AXFR_DONE = 2 };   /* sp_zone_axfr_message(): the closing SOA came */

struct sp_zone_axfr_config {
    const uint8_t *origin;       /* the zone's name, wire */
    size_t origin_len;
    uint16_t id;                 /* the query's */
    const char *key_name;        /* TSIG key (text), or NULL: the query was not signed */
    const char *key_secret;      /* base64 */
    const char *algorithm;       /* e.g. "hmac-sha256." */
    const uint8_t *request_mac;  /* the query's MAC */
    size_t request_mac_len;
};

struct sp_zone_axfr;

/* A transfer into z (empty). NULL when out of memory, or declined (z->why). */
struct sp_zone_axfr *sp_zone_axfr_new(struct sp_zone *z, const struct sp_zone_axfr_config *cfg);
/* One message, now the time in seconds since the epoch (for the TSIG): SP_ZONE_OK when
 * more are to come, SP_ZONE_AXFR_DONE after the last, SP_ZONE_DECLINED (z->why says
 * why) or SP_ZONE_NOMEM. After anything but SP_ZONE_OK, no more messages. */
int sp_zone_axfr_message(struct sp_zone_axfr *a, const uint8_t *wire, size_t len, uint64_t now);
void sp_zone_axfr_free(struct sp_zone_axfr *a);

#endif
