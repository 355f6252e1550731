/* The run-to-completion worker. See worker.h. */
#include "stormpy/engine/worker.h"

#include <string.h>

#include "stormpy/engine/clock.h"

/* The application's answers to a batch, in the table t. */
static void answer_batch(struct sp_frame_worker *w, const struct sp_table *t, struct sp_batch *b)
{
    switch (w->app) {
    case SP_APP_HTTP:
        sp_http_ring_batch(w->http.ring, t, b->generation, &w->pins, b, &w->http.counters);
        if (w->dns.precopy)
            sp_dns_worker_count_precopy(&w->dns);
        break;
    case SP_APP_RULES:
        sp_rules_worker_batch(&w->rules, &w->dns, t, b);
        break;
    case SP_APP_DNS:
    default:
        sp_dns_worker_batch(&w->dns, t, b);
        break;
    }
}

/* A function of its own, by its own name, even where the build inlines and clones across
 * files (-flto): callgrind counts inside it (stormpy bench fastpath, test_instructions). */
#ifdef __clang__
#define MEASURED __attribute__((noinline))
#else
#define MEASURED __attribute__((noinline, noclone))
#endif

MEASURED uint64_t sp_frame_worker_run(struct sp_frame_worker *w)
{
    if (w->app == SP_APP_HTTP && w->http.stream) {
        sp_http_stream_run(w->http.stream, w->ref, w->index, &w->stop, &w->http.counters);
        return 0;
    }
    if (w->app == SP_APP_DNS_TCP) {
        sp_dns_stream_run(w->dns.stream, w->ref, w->index, &w->stop, &w->dns.counters,
                          &w->dns.tcp);
        return 0;
    }
    struct sp_io *io = w->io;
    const struct sp_io_ops *ops = io->ops;
    struct sp_frame rx[SP_IO_BATCH_MAX], tx[SP_IO_BATCH_MAX], spare[SP_IO_BATCH_MAX];
    struct sp_slow_packet slow[SP_IO_BATCH_MAX];
    struct sp_gather gather[SP_GATHER_BATCH];
    unsigned batch = w->batch < 1 ? 1 : w->batch > SP_IO_BATCH_MAX ? SP_IO_BATCH_MAX : w->batch;
    uint64_t start = w->batches;
    uint64_t last_kick = 0;
    int unkicked = 0;

    io->counters = w->io_counters;           /* a restarted worker continues its counts */
    /* HTTP's own TCP has timers and data to send whether frames come or not */
    bool every_round = w->app == SP_APP_HTTP;
    bool pending = false;                    /* TX ran out with segments still to send */
    while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
        io->rx_nowait = unkicked || pending;
        unsigned n = ops->rx_burst(io, rx, batch);
        if (n == 0 && !(every_round && !io->finished)) {
            ops->rx_release(io, rx, 0);     /* skipped frames (or an empty block) go back too */
            if (unkicked) {                 /* idle: nothing may wait for the next burst */
                ops->kick(io);
                unkicked = 0;
            }
            w->io_counters = io->counters;
            if (io->finished)
                break;
            continue;   /* rx_burst waited its poll interval: look at the stop flag */
        }
        ops->reclaim(io);
        struct sp_batch b = {
            .rx = rx, .n = n, .tx = tx, .reserved = ops->tx_reserve(io, tx, every_round ? SP_IO_BATCH_MAX : n),
            .datagrams = io->datagrams, .cfg = &w->cfg, .counters = &w->counters,
            .spare = spare, .slow = slow, .slow_path = w->slow_path != NULL, .out = tx,
            .gather = io->gather && ops->tx_gather ? gather : NULL, .gather_cap = SP_GATHER_BATCH,
        };
        uint64_t tap_now;                       /* a tap's copies: none unless attached */
        struct sp_tap_ring *tap = sp_tap_ring_on(w->tap, w->index, &tap_now);
        if (tap)
            sp_tap_copy(w->tap, tap, rx, n, SP_TAP_RX, tap_now);   /* before any is answered */
        const struct sp_table *t = sp_table_ref_enter_pinned(w->ref, w->index, &w->pins,
                                                             &b.generation);
        answer_batch(w, t, &b);
        pending = every_round && (b.used == b.reserved || b.ngather == SP_GATHER_BATCH);
        if (b.ngather) {                     /* a connection's data before its FIN */
            if (tap)
                sp_tap_copy_gathered(w->tap, tap, gather, b.ngather, tap_now);
            ops->tx_gather(io, gather, b.ngather);
        }
        sp_table_ref_leave_pinned(w->ref, w->index, &w->pins);   /* the slow path may take its time */
        if (b.nslow) {                          /* its replies follow the others in tx */
            unsigned k = w->slow_path(w->slow_ctx, slow, b.nslow, tx + b.used,
                                      b.reserved - b.used);
            b.used += k;
            b.sent += k;
        }
        io->counters.tx_ring_full += b.unserved;    /* counted here only, not in the backends */
        if (tap)
            sp_tap_copy(w->tap, tap, b.out, b.sent, SP_TAP_TX, tap_now);
        ops->tx_submit(io, b.out, b.sent, tx + b.used, b.reserved - b.used);
        ops->rx_release(io, rx, n);
        unkicked |= b.sent != 0;
        if (unkicked) {
            uint64_t now = w->tx_flush_ns ? sp_now_ns() : 0;
            if (now - last_kick >= w->tx_flush_ns) {
                ops->kick(io);
                last_kick = now;
                unkicked = 0;
            }
        }
        w->batches++;
        w->batch_hist[sp_hist_bucket(n)]++;
        w->io_counters = io->counters;
    }
    if (unkicked)
        ops->kick(io);                      /* stopping: what was answered still goes out */
    w->io_counters = io->counters;
    return w->batches - start;
}

void sp_frame_worker_stop(struct sp_frame_worker *w)
{
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
}

/* What lived in the worker's process: a worker started on state a dead one left
 * must not touch it. */
static void forget_process(struct sp_frame_worker *w)
{
    w->io = NULL;
    w->slow_path = NULL;
    w->slow_ctx = NULL;
    memset(&w->pins, 0, sizeof(w->pins));
    sp_dns_worker_rearm(&w->dns);
    sp_http_worker_rearm(&w->http);
}

int sp_frame_worker_init(struct sp_frame_worker *w, const struct sp_frame_worker_config *cfg,
                         char *err, size_t errlen)
{
    forget_process(w);
    w->io = cfg->io;
    w->ref = cfg->ref;
    w->index = cfg->index;
    w->batch = cfg->batch;
    w->tx_flush_ns = cfg->tx_flush_ns;
    memset(&w->cfg, 0, sizeof(w->cfg));
    w->cfg.port = cfg->port;
    w->cfg.ttl = cfg->ttl;
    w->app = cfg->app;
    sp_rules_worker_init(&w->rules, cfg->all_frames);
    if (w->app == SP_APP_HTTP && !w->io) {
        if (sp_http_worker_init(&w->http, &cfg->http, err, errlen) != 0)
            return -1;
        return 0;
    }
    if (w->app == SP_APP_DNS_TCP)
        return sp_dns_worker_init_stream(&w->dns, &cfg->dns_tcp, err, errlen);
    if (sp_dns_worker_init(&w->dns, w->io, &cfg->dns, err, errlen) != 0) {
        sp_frame_worker_close(w);
        return -1;
    }
    return 0;
}

void sp_frame_worker_rearm(struct sp_frame_worker *w)
{
    __atomic_store_n(&w->stop, 0, __ATOMIC_RELEASE);
    forget_process(w);
}

void sp_frame_worker_close(struct sp_frame_worker *w)
{
    if (w->io)
        w->io->ops->close(w->io);
    w->io = NULL;
    sp_dns_worker_close(&w->dns);   /* after the backend, which may still complete copies */
    sp_http_worker_close(&w->http);
}
