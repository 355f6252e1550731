/* The load generator's driver: the schedule, the wait, the end. See stormpy/gen/gen.h;
 * the kinds of request are in udp.c (DNS, echo) and http.c. */
#define _GNU_SOURCE
#include "loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "stormpy/engine/clock.h"

#define MAX_WAIT_NS 10000000u    /* stop() is seen within 10 ms */
#define RETRY_NS 20000u          /* after a socket refused a send for now */

struct sp_gen *sp_gen_new(const struct sp_gen_config *cfg)
{
    if (!cfg->nfds || cfg->nfds > SP_GEN_MAX_SOCKETS || (cfg->ring && (cfg->nfds != 1 ||
        cfg->kind == SP_GEN_HTTP)) || (!cfg->ring && !cfg->fds) || !cfg->nrequests || !cfg->batch ||
        cfg->batch > SP_GEN_MAX_BATCH || (!cfg->rate && !cfg->outstanding) || !cfg->timeout_ns)
        return NULL;
    struct sp_gen *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->cfg = *cfg;
    g->kind = cfg->ring ? &sp_gen_ring_kind :
              cfg->kind == SP_GEN_HTTP ? &sp_gen_http_kind : &sp_gen_udp_kind;
    g->latency = sp_latency_new();
    g->pfds = calloc(cfg->nfds, sizeof(*g->pfds));
    if (!g->latency || !g->pfds || !g->kind->init(g)) {
        sp_gen_free(g);
        return NULL;
    }
    return g;
}

void sp_gen_free(struct sp_gen *g)
{
    if (!g)
        return;
    if (g->state)
        g->kind->free(g);
    sp_latency_free(g->latency);
    free(g->pfds);
    free(g);
}

void sp_gen_stop(struct sp_gen *g)
{
    __atomic_store_n(&g->stop, 1, __ATOMIC_RELEASE);
}

void sp_gen_snapshot(const struct sp_gen_counters *c, struct sp_gen_counters *out)
{
    const uint64_t *from = (const uint64_t *)c;
    uint64_t *to = (uint64_t *)out;
    for (size_t i = 0; i < sizeof(*c) / sizeof(uint64_t); i++)
        to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

const struct sp_latency *sp_gen_latency(const struct sp_gen *g)
{
    return g->latency;
}

static bool sending(struct sp_gen *g, uint64_t now)
{
    const struct sp_gen_config *cfg = &g->cfg;
    return !__atomic_load_n(&g->stop, __ATOMIC_ACQUIRE) && g->alive &&
           (!cfg->count || g->issued < cfg->count) &&
           (!cfg->duration_ns || now < g->start_ns + cfg->duration_ns);
}

/* How many requests to send now, at most a batch. */
static uint32_t due(const struct sp_gen *g, uint64_t now)
{
    const struct sp_gen_config *cfg = &g->cfg;
    uint64_t n;
    if (cfg->rate) {
        /* requests k with start + k/rate <= now: floor((now - start) * rate) + 1 of them */
        uint64_t upto = (uint64_t)((unsigned __int128)(now - g->start_ns) * cfg->rate /
                                   1000000000u) + 1;
        n = upto > g->issued ? upto - g->issued : 0;
    } else {
        n = g->inflight < cfg->outstanding ? cfg->outstanding - g->inflight : 0;
    }
    if (cfg->count && n > cfg->count - g->issued)
        n = cfg->count - g->issued;
    return n < cfg->batch ? (uint32_t)n : cfg->batch;
}

/* How long the loop may sleep in poll() before the next request is due. */
static uint64_t wait_ns(const struct sp_gen *g, bool more, uint64_t now)
{
    const struct sp_gen_config *cfg = &g->cfg;
    uint64_t wait = MAX_WAIT_NS;
    if (more) {
        if (!cfg->rate)
            return g->inflight < cfg->outstanding ? 0 : wait;
        uint64_t next = gen_scheduled_ns(g, g->issued);
        wait = next <= now ? 0 : next - now < wait ? next - now : wait;
    }
    return wait;
}

int gen_poll(struct sp_gen *g, struct sp_gen_counters *c, uint64_t wait)
{
    struct timespec ts = { .tv_sec = (time_t)(wait / 1000000000u),
                           .tv_nsec = (long)(wait % 1000000000u) };
    int n = ppoll(g->pfds, g->cfg.nfds, &ts, NULL);
    if (n < 0)
        return errno == EINTR ? 0 : errno;
    for (uint32_t i = 0; i < g->cfg.nfds && n > 0; i++) {
        if (g->pfds[i].revents) {
            n--;
            g->kind->ready(g, c, i, g->pfds[i].revents);
        }
    }
    return 0;
}

int sp_gen_run(struct sp_gen *g, struct sp_gen_counters *c)
{
    const struct sp_gen_config *cfg = &g->cfg;
    /* poll()'s default slack of 50 us would be our own latency, in every reply */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    for (uint32_t i = 0; i < cfg->nfds; i++)
        g->pfds[i] = (struct pollfd){ .fd = cfg->ring ? -1 : cfg->fds[i], .events = POLLIN };
    g->alive = cfg->nfds;
    g->start_ns = sp_now_ns();
    __atomic_store_n(&c->started_ns, g->start_ns, __ATOMIC_RELAXED);
    int err = 0;
    for (;;) {
        uint64_t now = sp_now_ns();
        bool more = sending(g, now);
        if (!more) {
            if (!c->send_end_ns)
                __atomic_store_n(&c->send_end_ns, now, __ATOMIC_RELAXED);
            if (!g->inflight || now >= c->send_end_ns + cfg->timeout_ns)
                break;
        }
        g->kind->expire(g, c, now, false);
        uint32_t n = more ? due(g, now) : 0;
        uint32_t went = n ? g->kind->send(g, c, n, now) : 0;
        /* something sent: more may be due, and replies are read without waiting; a
         * socket that took nothing (its buffer full) is tried again shortly */
        err = g->kind->wait(g, c, went ? 0 : n ? RETRY_NS : wait_ns(g, more, sp_now_ns()));
        if (err)
            break;
    }
    g->kind->expire(g, c, sp_now_ns(), true);
    __atomic_store_n(&c->ended_ns, sp_now_ns(), __ATOMIC_RELAXED);
    return err;
}
