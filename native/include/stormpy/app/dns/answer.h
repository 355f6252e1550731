/*
 * One DNS query answered on the frame path (engine/frame.h): the whole reply frame
 * written from the received one, with the DNS answer from the table, response rate
 * limiting, and the worker's DNS counters (worker.h). Or one datagram from a socket,
 * where the kernel keeps the headers.
 *
 * sp_dns_frame_answer() is exactly
 *   sp_frame_parse_unchecked -> sp_frame_payload_cap -> sp_dns_parse_summed/sp_dns_lookup
 *   -> sp_dns_rate_limit -> sp_dns_payload_checked -> sp_dns_frame_reply;
 * precopy mode (precopy.h), which decides where a reply goes only after it has seen
 * the query, and the DNS responder (app/rules) take the steps one by one.
 */
#ifndef STORMPY_APP_DNS_ANSWER_H
#define STORMPY_APP_DNS_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stormpy/app/dns/dns.h"
#include "stormpy/app/dns/worker.h"
#include "stormpy/engine/frame.h"
#include "stormpy/engine/table.h"
#include "stormpy/io.h"
#include "stormpy/proto/csum.h"

/* sp_dns_payload_checked() the long way: the payload summed again, for a message the
 * parse did not sum (a compressed name, a message cut short) or whose total was wrong
 * (then a damaged frame, or a CHECKSUM_PARTIAL one). One call out of line for all of
 * them: the usual frame's registers were worth 20 instructions more than the rare
 * frame's second sum. */
bool sp_dns_payload_rechecked(const uint8_t *rx, const struct sp_frame_query *fq,
                              struct sp_frame_counters *c);

/* The query's UDP checksum where sp_frame_parse_unchecked() left it, from the sum
 * sp_dns_parse_summed() made of the message on its way: false (counted malformed)
 * when wrong, and the frame is not answered. Checked just before the reply is written:
 * here the check costs the fewest registers, and a damaged frame has been looked up
 * (which writes nothing) and, at worst, counted by rate limiting, as a sender that
 * computes its checksums could have it counted anyway. */
static inline bool sp_dns_payload_checked(const uint8_t *rx, const struct sp_frame_query *fq,
                                          const struct sp_dns_query *q,
                                          struct sp_frame_counters *c)
{
    return !fq->unchecked ||
           (q->message_summed &&
            sp_csum_acc_nonzero_is_ffff(sp_csum_acc_word(fq->unchecked, q->message_acc))) ||
           sp_dns_payload_rechecked(rx, fq, c);
}

/* The reply to the received frame rx: its length written to tx (at most cap), or 0
 * for no reply. */
size_t sp_dns_frame_answer(const struct sp_table *t, struct sp_dns_worker *d,
                           const struct sp_frame_config *cfg, const struct sp_frame *rx,
                           uint8_t *tx, size_t cap, struct sp_frame_counters *c);

/* sp_dns_frame_answer() for rx[0, n), one after another in one loop: the replies go to
 * tx[0, returned), in the frames' order, each needing at most its tx[].cap. */
unsigned sp_dns_frames_answer(const struct sp_table *t, struct sp_dns_worker *d,
                              const struct sp_frame_config *cfg, const struct sp_frame *rx,
                              unsigned n, struct sp_frame *tx, struct sp_frame_counters *c);

/* Frames sp_dns_frame_answer_group() answers together: enough lookups waiting for
 * memory at once to cover a cache miss, few enough that their queries stay in L1. */
#define SP_DNS_GROUP 16

/* sp_dns_frame_answer() for rx[0, n) (n <= SP_DNS_GROUP) in stages, DPDK's way: every
 * frame parsed and its name hashed, then the lookups' memory fetched ahead for all of
 * them (table.h's prefetch stages), then each looked up and answered in order. The
 * replies go to tx[0, returned), byte for byte sp_dns_frame_answer()'s, in the frames'
 * order; frame j's reply needs at most tx[j].cap. Not for cfg->own_stack, whose replies
 * sp_frame_parse() writes while it parses. */
unsigned sp_dns_frame_answer_group(const struct sp_table *t, struct sp_dns_worker *d,
                                   const struct sp_frame_config *cfg, const struct sp_frame *rx,
                                   unsigned n, struct sp_frame *tx, struct sp_frame_counters *c);

/* sp_dns_frame_answer_group() in precopy mode: each reply from the pool where it can be
 * (precopy.h's sp_precopy_reply), listed in out[0, returned); those rendered into TX
 * buffers use tx[0, *taken). */
unsigned sp_precopy_answer_group(struct sp_precopy *p, const struct sp_table *t,
                                 struct sp_dns_worker *d, const struct sp_frame_config *cfg,
                                 const struct sp_frame *rx, unsigned n, const struct sp_frame *tx,
                                 struct sp_frame *out, unsigned *taken,
                                 struct sp_frame_counters *c);

/* The reply to a datagram (its payload alone), written to tx; its length, or 0 for
 * no reply. Counted as a frame in c. */
size_t sp_dns_datagram_answer(const struct sp_table *t, struct sp_dns_worker *d,
                              const struct sp_frame *rx, uint8_t *tx, size_t cap,
                              struct sp_frame_counters *c);

/* The whole reply frame for the parsed query q (the worker's d->query, or one of a
 * group's), written to tx; its length or 0. */
size_t sp_dns_frame_reply(const struct sp_table *t, struct sp_dns_worker *d,
                          struct sp_dns_query *q, const struct sp_frame_config *cfg,
                          const uint8_t *rx, const struct sp_frame_query *fq,
                          enum sp_dns_verdict verdict, const struct sp_response *r,
                          uint8_t *tx, size_t cap);

/* Response rate limiting (rrl.h) for a decided answer to a source: false to drop it;
 * a slip turns *verdict into SP_DNS_SLIP. Only when d->rrl is set. */
bool sp_dns_rate_limit(struct sp_dns_worker *d, uint8_t family, const uint8_t *src,
                       enum sp_dns_verdict *verdict, const struct sp_response *r);

#endif
