/*
 * Pre-copy mode (the paper's "pre-copy", against "memcpy"): ready-made reply frames
 * kept in the backend's own packet memory and sent from there, so a repeated answer
 * costs a rewrite of its per-client bytes instead of a copy of the whole frame.
 *
 * A worker's pool is a set-associative cache of frame buffers (SP_PRECOPY_WAYS per
 * set, a power-of-two number of sets). The tag of a copy names everything its bytes
 * depend on apart from the per-client ones: the table (an epoch that changes when
 * the worker sees a new table), the table response, the L2 layout (VLAN tag or not),
 * the IP family, the inserted question's length, EDNS and the DO bit. The worker's
 * configuration (port, TTL, max_udp) is fixed for the pool's life.
 *
 * Per query, after the same parse and lookup as memcpy mode:
 *   hit       an idle copy with the tag: rewrite MACs, VLAN tag, IP addresses, ports
 *             and the table's patches (DNS ID, RD/CD, the question with the client's
 *             letter case, overwritten at the same length); the IPv4 header checksum
 *             is recomputed over its 20 bytes and the UDP checksum composed from
 *             sp_response_sum() and the sum of what the DNS layer adds (the OPT
 *             record and its ARCOUNT), kept in the slot: the payload is neither
 *             copied nor summed again;
 *   fill      no such copy, but a way that is not in flight: render the whole frame
 *             into it once, as memcpy mode would, and send it from there;
 *   fallback  every way of the set is in flight: render into the TX buffer.
 * Only a whole table response with DNS's patch list (sp_dns_copy_len) and at least
 * the pool's minimum length qualifies: shorter answers, truncated answers, answers
 * without their additional section, answers completed per name (DNAME, NSEC3),
 * answers made on the spot (errors, REFUSED) and own-stack replies always go the
 * memcpy way and count as none of the three.
 *
 * A copy handed to the backend is "in flight" and is never rewritten until the
 * backend calls sp_precopy_complete() (AF_XDP: its address is back on the completion
 * ring; the memory backend and AF_PACKET's sendmmsg: once sent). Every reply frame is
 * byte for byte what sp_dns_frame_answer() (answer.h) writes for the same query.
 *
 * One pool per worker thread; nothing here locks or allocates after sp_precopy_new().
 */
#ifndef STORMPY_APP_DNS_PRECOPY_H
#define STORMPY_APP_DNS_PRECOPY_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/app/dns/dns.h"
#include "stormpy/engine/frame.h"
#include "stormpy/engine/table.h"
#include "stormpy/io.h"

#define SP_PRECOPY_WAYS 8
#define SP_PRECOPY_DEFAULT_FRAMES 4096
#define SP_PRECOPY_MAX_FRAMES (1u << 20)
/* Answers (DNS payload bytes) shorter than this go the memcpy way by default: a copy
 * saves the answer's copy but touches a pool frame the cache may not hold, and below
 * about this size the copy is the cheaper of the two (docs/PERFORMANCE.md section 4). */
#define SP_PRECOPY_DEFAULT_MIN_LEN 384

struct sp_dns_worker;        /* worker.h: the worker's DNS scratch space and counters */

struct sp_precopy_counters {
    uint64_t hits;
    uint64_t fills;
    uint64_t fallbacks;
};

struct sp_precopy;

/* A pool of `frames` copies, rounded down to a power-of-two number of sets of
 * SP_PRECOPY_WAYS. NULL when frames is below SP_PRECOPY_WAYS or above
 * SP_PRECOPY_MAX_FRAMES, or out of memory. Its frames come from the backend. */
struct sp_precopy *sp_precopy_new(unsigned frames);
void sp_precopy_free(struct sp_precopy *p);
unsigned sp_precopy_frames(const struct sp_precopy *p);
/* DNS answers shorter than len bytes (the DNS payload) go the memcpy way and count as
 * none of hit, fill or fallback (a new pool: SP_PRECOPY_DEFAULT_MIN_LEN); 0 copies
 * every answer that qualifies. */
void sp_precopy_set_min_len(struct sp_precopy *p, size_t len);

/* The backend lends frame i (0 <= i < sp_precopy_frames): cap bytes at data, which it
 * knows as id (a UMEM address). A pool is usable once every frame is lent. */
void sp_precopy_set_frame(struct sp_precopy *p, unsigned i, uint8_t *data, uint32_t cap,
                          uint64_t id);

/* For a backend that sends from any buffer (the memory backend, AF_PACKET's
 * sendmmsg): lends every frame, SP_FRAME_MAX bytes each, from one heap block, which
 * the backend free()s once the pool is done with. NULL when out of memory. */
uint8_t *sp_precopy_lend_heap(struct sp_precopy *p);

/* Whether any answer from t can reach the pool's minimum: its longest response with
 * the longest question and an OPT record. When none can, every answer would go the
 * memcpy way, so the worker answers the batch as memcpy mode does, without the
 * pool's reply list and its code around the same work (docs/PERFORMANCE.md §4). */
bool sp_precopy_may_copy(const struct sp_precopy *p, const struct sp_table *t);

/* Once per batch, with the table of the batch and the generation the worker
 * announced in sp_table_ref_enter(): a different pair forgets every copy (copies in
 * flight are forgotten when they complete). The pair, not the pointer alone: a new
 * table may be allocated where a freed one was. */
void sp_precopy_begin(struct sp_precopy *p, const struct sp_table *t, uint64_t generation);

/* Answer one received frame. Returns the reply's length, 0 for no reply. The reply
 * is described in *out: a pool frame (out->pool >= 0, now in flight) or *tx, the TX
 * buffer from tx_reserve (out->pool < 0), which the caller counts as used. */
size_t sp_precopy_answer(struct sp_precopy *p, const struct sp_table *t, struct sp_dns_worker *d,
                         const struct sp_frame_config *cfg, const struct sp_frame *rx,
                         const struct sp_frame *tx, struct sp_frame *out,
                         struct sp_frame_counters *c);

/* sp_precopy_answer() for rx[0, n), one after another in one loop: the replies listed
 * in out[0, returned), those rendered into TX buffers using tx[0, *taken). */
unsigned sp_precopy_frames_answer(struct sp_precopy *p, const struct sp_table *t,
                                  struct sp_dns_worker *d, const struct sp_frame_config *cfg,
                                  const struct sp_frame *rx, unsigned n, const struct sp_frame *tx,
                                  struct sp_frame *out, unsigned *taken,
                                  struct sp_frame_counters *c);

/* sp_precopy_answer() after the parse, lookup and rate limiting, for the query q in
 * frame rx (fq): the reply from the pool, or rendered into *tx. For answers in groups
 * (answer.h's sp_precopy_answer_group). */
size_t sp_precopy_reply(struct sp_precopy *p, const struct sp_table *t, struct sp_dns_worker *d,
                        struct sp_dns_query *q, const struct sp_frame_config *cfg,
                        const uint8_t *rx, const struct sp_frame_query *fq,
                        enum sp_dns_verdict v, const struct sp_response *r,
                        const struct sp_frame *tx, struct sp_frame *out);

/* For an application that keeps copies of its own in the pool (serve-http's TCP
 * segments), between sp_precopy_begin() and the batch's submit. A tag's key1 must
 * hold sp_precopy_epoch() in its upper 32 bits, as the DNS tags do, so that a copy
 * of an older table is never idle again.
 *   sp_precopy_get    the index of the idle copy tagged (key0, key1), counted as a
 *                     hit; else -1, with *fill a way of at least flen bytes that may be
 *                     filled (a fill) or -1 (every way in flight: a fallback);
 *   sp_precopy_frame  frame i's bytes, and in *sum the sum stored with it;
 *   sp_precopy_take   tags frame i (len bytes, sum) and hands it out in flight, as
 *                     sp_precopy_answer() does. */
uint32_t sp_precopy_epoch(const struct sp_precopy *p);
int sp_precopy_get(struct sp_precopy *p, uint64_t key0, uint64_t key1, size_t flen, int *fill);
uint8_t *sp_precopy_frame(struct sp_precopy *p, int i, uint32_t *sum);
void sp_precopy_take(struct sp_precopy *p, int i, uint64_t key0, uint64_t key1, uint32_t len,
                     uint32_t sum, struct sp_frame *out);

/* The backend is done with pool frame `index` (sent, or refused): it may be reused. */
void sp_precopy_complete(struct sp_precopy *p, uint32_t index);

const struct sp_precopy_counters *sp_precopy_get_counters(const struct sp_precopy *p);
/* Copies in flight (for tests). */
unsigned sp_precopy_in_flight(const struct sp_precopy *p);

#endif
