/*
 * DNS's part of a worker (engine/worker.h): its configuration, scratch space and
 * counters, the precopy pool, and the batch function the worker loop calls.
 *
 * The state lives in the worker struct, so in the region shared with the supervisor
 * (engine/shm.h), which reads the counters there; `precopy` points into the worker
 * process's own memory. A worker set up again on the same state continues the
 * counters.
 *
 *   sp_dns_worker_init(d, io, &cfg, err, sizeof(err));   with the worker's backend
 *   sp_dns_worker_batch(d, t, &batch);                    once per batch, in the table
 *   sp_dns_worker_close(d);                               after the backend is closed
 */
#ifndef STORMPY_APP_DNS_WORKER_H
#define STORMPY_APP_DNS_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/app/dns/dns.h"
#include "stormpy/app/dns/precopy.h"
#include "stormpy/app/dns/rrl.h"
#include "stormpy/app/dns/stream.h"
#include "stormpy/engine/batch.h"
#include "stormpy/engine/table.h"
#include "stormpy/io.h"

struct sp_dns_worker {
    struct sp_dns_config cfg;
    struct sp_rrl *rrl;      /* response rate limiting, or NULL (shared by the workers) */
    uint32_t now_s;          /* the worker's clock for rrl, set once per batch */
    struct sp_dns_query query;     /* the query being answered */
    struct sp_dns_counters counters;
    uint64_t rrl_dropped;    /* answers rate limiting held back */
    uint64_t rrl_slipped;    /* ... and those it sent truncated instead */
    struct sp_precopy *precopy;    /* NULL: memcpy mode */
    /* The pool's counters, continued by a worker set up again */
    struct sp_precopy_counters precopy_counters;
    struct sp_precopy_counters precopy_base;   /* precopy_counters when the pool was made */
    /* A TCP worker's (no backend, no frame loop): the stream server of its process */
    struct sp_dns_stream *stream;
    struct sp_dns_tcp_counters tcp;
};

/* How sp_dns_worker_init() sets DNS up. */
struct sp_dns_worker_config {
    uint16_t max_udp;        /* the largest DNS reply over UDP */
    struct sp_rrl *rrl;      /* response rate limiting, or NULL */
    unsigned precopy_frames; /* precopy mode with a pool this large, lent by io; 0: memcpy */
    int handoff_fd;          /* NOTIFY goes up this socket (handoff.h); 0: answered NOTAUTH */
};

/* Sets d up for a worker on io; the counters stay. 0, or -1 with a one-line reason
 * (precopy mode the backend cannot do, or a pool size out of range). */
int sp_dns_worker_init(struct sp_dns_worker *d, struct sp_io *io,
                       const struct sp_dns_worker_config *cfg, char *err, size_t errlen);

/* Makes d a TCP worker: a stream server on cfg->listen_fd (stream.h) instead of a
 * backend. 0, or -1 with a one-line reason in err; sp_dns_worker_close() undoes it. */
int sp_dns_worker_init_stream(struct sp_dns_worker *d, const struct sp_dns_stream_config *cfg,
                              char *err, size_t errlen);

/* Forgets the pool and the stream server without freeing them: their process is
 * gone (engine/worker.h, rearm). */
void sp_dns_worker_rearm(struct sp_dns_worker *d);

/* Frees the pool, once the backend that could still complete its copies is closed,
 * and closes the stream server. */
void sp_dns_worker_close(struct sp_dns_worker *d);

/* Answers the batch from t: whole frames (memcpy or precopy mode) or datagrams. */
void sp_dns_worker_batch(struct sp_dns_worker *d, const struct sp_table *t, struct sp_batch *b);

/* precopy_counters from the pool's, after a batch that used the pool (DNS's, or an
 * application's that shares it: serve-http's TCP segments). */
void sp_dns_worker_count_precopy(struct sp_dns_worker *d);

#endif
