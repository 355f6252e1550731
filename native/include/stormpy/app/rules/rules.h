/*
 * Custom responders: the prepackaged-response table serving a protocol other
 * than DNS, with Python for whatever the table cannot answer.
 *
 * A responder serves one UDP port. Its rules are the table's program
 * (sp_table_set_program), so a swap replaces rules, templates and keys at once.
 * For each UDP payload to the port the rules are tried in order; a rule matches
 * when the payload is at least min_len bytes long and has its match bytes at
 * match_off (a prefix when match_off is 0). A matching rule answers with its
 * response, or, when it is keyed, with the response stored under the key cut out
 * of the payload (in the rule's own tag namespace), or with its miss response
 * when the key is absent. The response is rendered against three request fields:
 *
 *   SP_RULE_FIELD_PAYLOAD  the whole payload (COPY patches: an ID at an offset)
 *   SP_RULE_FIELD_ECHO     payload[echo_off, echo_end): the slice an INSERT echoes
 *   SP_RULE_FIELD_KEY      the key
 *
 * No rule, or a miss with no miss response, means the slow path: the worker
 * hands the frame to the responder's Python handler with the rest of its batch.
 * With `dns` set the port serves DNS from the same table instead of rules, and a
 * name whose response carries SP_RESPONSE_SLOW_PATH goes to the slow path.
 *
 * Everything read from the payload is bounds-checked against its length; a rule
 * list is validated once (sp_rules_check) before any worker reads it.
 */
#ifndef STORMPY_APP_RULES_RULES_H
#define STORMPY_APP_RULES_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stormpy/engine/batch.h"
#include "stormpy/engine/frame.h"
#include "stormpy/engine/table.h"
#include "stormpy/io.h"

#define SP_RULES_MAGIC 0x55525053u   /* "SPRU" */
#define SP_RULES_MAX 64
#define SP_RULE_MATCH_MAX 32
#define SP_RULE_STOPS 4
#define SP_RULE_NO_RESPONSE UINT32_MAX
#define SP_RULE_TO_END UINT16_MAX
/* A response's user word with this bit set is answered by the slow path (DNS
 * keeps rcodes in the low byte and a length in the high 16 bits). */
#define SP_RESPONSE_SLOW_PATH 0x8000u

struct sp_dns_worker;        /* app/dns/worker.h: what a DNS responder answers with */

enum sp_rule_field {
    SP_RULE_FIELD_PAYLOAD = 0,
    SP_RULE_FIELD_ECHO = 1,
    SP_RULE_FIELD_KEY = 2,
};

struct sp_rule {
    uint16_t min_len;        /* match, key start, echo start and COPY sources fit in it */
    uint16_t match_off;
    uint8_t match_len;
    uint8_t nstops;          /* the key ends at the first of stops[] (after key_off) */
    uint8_t keyed;
    uint8_t pad;
    uint8_t match[SP_RULE_MATCH_MAX];
    uint8_t stops[SP_RULE_STOPS];
    uint16_t key_off, key_end;     /* key: payload[key_off, min(key_end, len)) */
    uint16_t echo_off, echo_end;   /* echo field: payload[echo_off, min(echo_end, len)) */
    uint32_t response;       /* the answer (keyed: to an absent key); NO_RESPONSE: slow path */
    uint32_t pad2;
    uint64_t tag;            /* keyed: the key namespace */
};

struct sp_rules {
    uint32_t magic;
    uint16_t nrules;
    uint16_t dns;            /* 1: DNS from the table instead of rules */
    struct sp_rule rule[];
};

/* The tag namespace of rule i's keys: apart from every DNS tag (dns.h). */
static inline uint64_t sp_rule_tag(unsigned i)
{
    return 0x5250ull << 48 | i;
}

/* The rule list a table carries, or NULL (a table built for serve-dns). */
const struct sp_rules *sp_rules_of(const struct sp_table *t);

/* Checks a rule list against the table it goes with (sizes, offsets, response
 * indices). 0, or -1 with a one-line reason. */
int sp_rules_check(const struct sp_table *t, char *err, size_t errlen);

/* The response a rule gives this payload, with req filled to render it; NULL for
 * the slow path. */
const struct sp_response *sp_rules_find(const struct sp_table *t, const struct sp_rules *rules,
                                        const uint8_t *payload, size_t len,
                                        struct sp_request *req);

/* Counters of a responder worker (worker.h), next to sp_frame_counters. */
struct sp_responder_counters {
    uint64_t rule_answers;   /* answered by a rule's template */
    uint64_t rule_unsent;    /* a rule's answer did not fit the frame (or the MTU) */
    uint64_t unanswered;     /* for the slow path, but the responder has no handler */
    uint64_t slow_path;      /* frames handed to the Python handler */
    uint64_t slow_replies;   /* replies it returned and stormpy sent */
    uint64_t handler_errors; /* batches whose handler raised */
    uint64_t bad_replies;    /* replies it returned that could not be sent (type, size) */
};

/* One frame of a responder worker, with t's rules (sp_rules_of, once per batch).
 * Returns the reply's length in tx (0: none); *to_slow says the frame goes to the
 * slow path (slow->fq filled). With all set, frames that are not UDP to the port
 * (ARP, ICMP, other ports) go there too. */
size_t sp_responder_frame(const struct sp_table *t, const struct sp_rules *rules,
                          const struct sp_frame_config *cfg, bool all, const struct sp_frame *rx,
                          uint8_t *tx, size_t cap, struct sp_dns_worker *dns,
                          struct sp_frame_counters *c, struct sp_responder_counters *rc,
                          struct sp_slow_packet *slow, bool *to_slow);

/* The same for a UDP payload from a socket (the kernel keeps the headers). An
 * empty datagram is a reply too, so *replied says whether there is one. */
size_t sp_responder_datagram(const struct sp_table *t, const struct sp_rules *rules,
                             const uint8_t *rx, size_t len, uint8_t *tx, size_t cap,
                             struct sp_dns_worker *dns, struct sp_frame_counters *c,
                             struct sp_responder_counters *rc, bool *to_slow, bool *replied);

/* A slow-path reply: payload sent back over UDP to the packet's sender (addresses
 * and ports swapped, checksums computed). Written to tx (tx->len: on sockets the
 * payload's, which may be 0: an empty datagram); false when it does not fit (the
 * frame's room and the MTU) or the packet is not UDP. */
bool sp_responder_reply(const struct sp_frame_config *cfg, bool datagrams,
                        const struct sp_slow_packet *p, const uint8_t *payload, size_t len,
                        struct sp_frame *tx);

/* A slow-path reply given as a whole Ethernet frame (ARP, ICMP), copied to tx as
 * it is. Its length, or 0: too short, over the MTU, or a socket backend. */
size_t sp_responder_raw(const struct sp_frame_config *cfg, bool datagrams, const uint8_t *frame,
                        size_t len, struct sp_frame *tx);

#endif
