/* What ldns reads more leniently than dnspython, the reference reader (read.c).
 * Private to the C zone reader. */
#ifndef STORMPY_ZONE_READ_CHECK_H
#define STORMPY_ZONE_READ_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ldns/ldns.h>

/* A TTL as dnspython reads one: digits, or digits each followed by a unit (w d h m
 * s), at most 2^32 - 1 in all. */
bool sp_zone_ttl_valid(const char *text, size_t len, uint32_t *ttl);

/* Whether a master file's field of n bytes is a class (IN, CH, HS, CLASSn). */
bool sp_zone_is_class(const char *p, size_t n);

/* Why dnspython would refuse the record ldns read as rr from text (a record line
 * with the TTL before the class), its rdata in wire form; NULL when it would not.
 * ldns keeps the low bits of a number too wide for its field, pads odd hex digits
 * and leaves lengths and SVCB's rules unchecked: it would serve what an operator
 * mistyped. A record found here is declined, so the Python loader names the error. */
const char *sp_zone_record_refused(const char *text, const ldns_rr *rr, const uint8_t *rdata,
                                   size_t len);

#endif
