/* What the generator's driver (gen.c) shares with its kinds of request (udp.c,
 * http.c): the state, the counters' writes and the calls the driver makes. */
#ifndef STORMPY_GEN_LOOP_H
#define STORMPY_GEN_LOOP_H

#include <poll.h>
#include <stdbool.h>

#include "stormpy/gen/gen.h"

struct sp_gen;

/* One kind of request. The driver calls each once per round of its loop. */
struct gen_kind {
    /* Allocates g->state; false when out of memory. */
    bool (*init)(struct sp_gen *g);
    /* Sends up to n requests due now; returns how many left (or were queued). */
    uint32_t (*send)(struct sp_gen *g, struct sp_gen_counters *c, uint32_t n, uint64_t now);
    /* fds[i] polled ready with `revents`: read its replies. */
    void (*ready)(struct sp_gen *g, struct sp_gen_counters *c, uint32_t i, short revents);
    /* Counts as lost what has waited timeout_ns (everything in flight when `all`). */
    void (*expire)(struct sp_gen *g, struct sp_gen_counters *c, uint64_t now, bool all);
    void (*free)(struct sp_gen *g);
    /* Waits up to wait_ns for replies and reads them; 0 or an errno that ends the run.
     * Kinds on sockets use gen_poll; ring.c reads its backend. */
    int (*wait)(struct sp_gen *g, struct sp_gen_counters *c, uint64_t wait_ns);
};

struct sp_gen {
    struct sp_gen_config cfg;
    const struct gen_kind *kind;
    void *state;                 /* the kind's */
    struct sp_latency *latency;
    struct pollfd *pfds;         /* one per fd; a kind may add POLLOUT or set fd -1 */
    int stop;                    /* __atomic access */
    uint64_t start_ns;
    uint64_t issued;             /* requests sent, or failed to send: the schedule's index */
    uint64_t inflight;
    uint32_t alive;              /* fds still usable (HTTP connections not closed) */
    uint32_t next_request;       /* cfg.requests are sent in turn */
};

extern const struct gen_kind sp_gen_udp_kind, sp_gen_http_kind, sp_gen_ring_kind;

/* poll() on every fd, then ready() for each one that is. */
int gen_poll(struct sp_gen *g, struct sp_gen_counters *c, uint64_t wait_ns);

/* A counter other threads may read while run() writes it (single writer). */
static inline void gen_add(uint64_t *counter, uint64_t n)
{
    __atomic_store_n(counter, *counter + n, __ATOMIC_RELAXED);
}

/* When request k was due: its timestamp in open loop. */
static inline uint64_t gen_scheduled_ns(const struct sp_gen *g, uint64_t k)
{
    return g->start_ns + (uint64_t)((unsigned __int128)k * 1000000000u / g->cfg.rate);
}

/* The timestamp of the request about to be counted sent, which takes the schedule's
 * next place: its due time in open loop, `now` in closed loop. */
static inline uint64_t gen_stamp(struct sp_gen *g, struct sp_gen_counters *c, uint64_t now)
{
    uint64_t k = g->issued++;
    g->inflight++;
    gen_add(&c->sent, 1);
    if (!g->cfg.rate)
        return now;
    uint64_t due = gen_scheduled_ns(g, k);
    if (now > due && now - due > c->max_lag_ns)
        __atomic_store_n(&c->max_lag_ns, now - due, __ATOMIC_RELAXED);
    return due;
}

/* The request to send next, in turn: its bytes and length. */
static inline const uint8_t *gen_next_request(struct sp_gen *g, uint32_t *len)
{
    uint32_t i = g->next_request;
    g->next_request = i + 1 == g->cfg.nrequests ? 0 : i + 1;
    *len = g->cfg.offsets[i + 1] - g->cfg.offsets[i];
    return g->cfg.requests + g->cfg.offsets[i];
}

/* A reply matched: its latency from the request's timestamp. */
static inline void gen_answered(struct sp_gen *g, struct sp_gen_counters *c, uint64_t sent_ns,
                                uint64_t now, unsigned code)
{
    sp_latency_record(g->latency, now > sent_ns ? now - sent_ns : 0);
    gen_add(&c->received, 1);
    gen_add(&c->codes[code < 8 ? code : 7], 1);
    g->inflight--;
}

#endif
