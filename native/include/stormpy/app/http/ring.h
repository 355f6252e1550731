/*
 * serve-http on an interface's rings: stormpy's own TCP, run to completion in the
 * frame worker (engine/worker.h), answering from the same compiled site as the
 * kernel-TCP server (stream.h).
 *
 * Per worker, a bounded table of connections (no locks: the steering program and
 * the NIC's RSS keep a flow on one queue). A connection holds the request bytes that
 * arrived in order, and one answer at a time: the iovecs sp_http_answer() made,
 * pointing into the table (pinned, see table_ref.h), sent as segments cut at the
 * connection's MSS. Sending is clocked by ACKs within min(cwnd, the peer's window);
 * a loss is repaired by SACK-based recovery (RFC 2018, RFC 6675) with a client that
 * SACKs, by NewReno fast retransmit and recovery (RFC 6582) with one that does not,
 * or by the retransmission timer (RFC 6298), each time from the answer's bytes: there
 * is no retransmission buffer. When the table is full or half of it half-open, SYNs
 * are answered with SYN cookies (RFC 4987 3.6) and no state.
 *
 * Every batch also runs the timers, so the worker calls it on empty batches too.
 */
#ifndef STORMPY_APP_HTTP_RING_H
#define STORMPY_APP_HTTP_RING_H

#include <stdint.h>

#include "stormpy/app/http/stream.h"
#include "stormpy/engine/batch.h"
#include "stormpy/engine/table.h"
#include "stormpy/engine/table_ref.h"

struct sp_http_ring_config {
    uint32_t max_connections;        /* 0: 1024 */
    uint32_t request_timeout_ms;
    uint32_t idle_timeout_ms;
    uint32_t send_timeout_ms;        /* no ACK progress for this long: the connection goes */
    bool no_gather;                  /* one frame a segment even where the backend could
                                      * send 64 KB frames for the kernel or NIC to cut */
};

struct sp_http_ring;
struct sp_precopy;

struct sp_http_ring *sp_http_ring_open(const struct sp_http_ring_config *cfg);
/* Precopy mode: body segments are sent from copies kept in pool (the worker's, which
 * its backend lends frames; app/dns/precopy.h), so a segment sent again, to this
 * client or another, costs its headers only. NULL: memcpy mode. */
void sp_http_ring_set_pool(struct sp_http_ring *r, struct sp_precopy *pool);
void sp_http_ring_close(struct sp_http_ring *r);

/* Takes the batch's frames (TCP to b->cfg->port for this host; the rest is left as
 * not ours), answers from t (generation gen, pinned in pins while an answer points
 * into it), and sends what every connection may send now, into b->tx. */
void sp_http_ring_batch(struct sp_http_ring *r, const struct sp_table *t, uint64_t gen,
                        struct sp_table_pins *pins, struct sp_batch *b,
                        struct sp_http_counters *c);

#endif
