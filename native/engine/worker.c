/* The run-to-completion worker. See worker.h. */
#include "stormpy/engine/worker.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* vDSO: no system call */
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* UDP payloads: the socket backend, where the kernel keeps the headers. */
static unsigned answer_datagrams(struct sp_frame_worker *w, const struct sp_table *t,
                                 const struct sp_frame *rx, unsigned n, struct sp_frame *tx,
                                 unsigned reserved)
{
    unsigned used = 0;
    for (unsigned i = 0; i < n; i++) {
        if (used == reserved) {
            w->io->counters.tx_ring_full += n - i;
            break;
        }
        w->counters.frames++;
        struct sp_dns_query *q = &w->scratch.query;
        enum sp_dns_verdict v = sp_dns_parse(rx[i].data, rx[i].len, q);
        const struct sp_response *r = v == SP_DNS_LOOKUP ? sp_dns_lookup(t, q) : NULL;
        if (w->scratch.rrl &&
            !sp_frame_rrl(&w->scratch, rx[i].src_family, rx[i].src, &v, r, &w->counters))
            continue;
        size_t len = sp_dns_answer_parsed(t, &w->cfg.dns, rx[i].data, rx[i].len, false,
                                          tx[used].data, tx[used].cap, q, v, r,
                                          &w->counters.dns);
        if (len) {
            tx[used].len = (uint32_t)len;
            tx[used++].id = rx[i].id;      /* the reply goes to this request's peer */
        }
    }
    return used;
}

/* memcpy mode: every reply rendered into a TX buffer. Returns the frames used. */
static unsigned answer_memcpy(struct sp_frame_worker *w, const struct sp_table *t,
                              struct sp_frame *rx, unsigned n, struct sp_frame *tx,
                              unsigned reserved)
{
    unsigned used = 0;
    for (unsigned i = 0; i < n; i++) {
        if (used == reserved) {          /* counted here only, not in the backends */
            w->io->counters.tx_ring_full += n - i;
            break;
        }
        size_t len = sp_frame_answer(t, &w->cfg, rx[i].data, rx[i].len, tx[used].data,
                                     tx[used].cap, &w->scratch, &w->counters);
        if (len)
            tx[used++].len = (uint32_t)len;
    }
    return used;
}

/* A custom responder: rules answer what they can; the rest is collected in slow for
 * the handler, each keeping a TX buffer free for its reply. Returns the TX used. */
static unsigned answer_responder(struct sp_frame_worker *w, const struct sp_table *t,
                                 struct sp_frame *rx, unsigned n, struct sp_frame *tx,
                                 unsigned reserved, struct sp_slow_packet *slow, unsigned *nslow)
{
    unsigned used = 0, k = 0;
    bool datagrams = w->io->datagrams;
    const struct sp_rules *rules = sp_rules_of(t);
    struct sp_responder_counters *rc = &w->responder_counters;
    for (unsigned i = 0; i < n; i++) {
        if (used + k == reserved) {
            w->io->counters.tx_ring_full += n - i;
            break;
        }
        bool to_slow, replied;
        size_t len = datagrams
            ? sp_responder_datagram(t, rules, &w->cfg, rx[i].data, rx[i].len, tx[used].data,
                                    tx[used].cap, &w->scratch, &w->counters, rc, &to_slow,
                                    &replied)
            : sp_responder_frame(t, rules, &w->cfg, w->responder_all, rx[i].data, rx[i].len,
                                 tx[used].data, tx[used].cap, &w->scratch, &w->counters, rc,
                                 &slow[k], &to_slow);
        if (datagrams ? replied : len != 0) {
            tx[used].len = (uint32_t)len;
            if (datagrams)
                tx[used].id = rx[i].id;      /* the reply goes to this request's peer */
            used++;
        } else if (to_slow) {
            if (!w->slow_path) {
                rc->unanswered++;
                continue;
            }
            slow[k].frame = &rx[i];
            slow[k].dport = w->cfg.port;
            if (datagrams)
                slow[k].udp = 1;      /* the frame path set it; a datagram is UDP */
            k++;
        }
    }
    rc->slow_path += k;
    *nslow = k;
    return used;
}

/* precopy mode: replies from the pool where they can be, else from TX buffers. Every
 * reply takes a TX ring slot, so there are at most `reserved` of them. Returns the
 * replies in out; *used is how many TX buffers they took. */
static unsigned answer_precopy(struct sp_frame_worker *w, const struct sp_table *t,
                               struct sp_frame *rx, unsigned n, struct sp_frame *tx,
                               unsigned reserved, struct sp_frame *out, unsigned *used)
{
    unsigned sent = 0, taken = 0;
    sp_precopy_begin(w->precopy, t,
                     __atomic_load_n(&w->ref->slot[w->index].seen, __ATOMIC_RELAXED));
    for (unsigned i = 0; i < n; i++) {
        if (sent == reserved) {
            w->io->counters.tx_ring_full += n - i;
            break;
        }
        size_t len = sp_precopy_answer(w->precopy, t, &w->cfg, rx[i].data, rx[i].len,
                                       &tx[taken], &out[sent], &w->scratch, &w->counters);
        if (!len)
            continue;
        taken += out[sent].pool < 0;
        sent++;
    }
    *used = taken;
    return sent;
}

uint64_t sp_frame_worker_run(struct sp_frame_worker *w)
{
    struct sp_io *io = w->io;
    const struct sp_io_ops *ops = io->ops;
    struct sp_frame rx[SP_IO_BATCH_MAX], tx[SP_IO_BATCH_MAX], out[SP_IO_BATCH_MAX];
    unsigned batch = w->batch < 1 ? 1 : w->batch > SP_IO_BATCH_MAX ? SP_IO_BATCH_MAX : w->batch;
    uint64_t start = w->batches;
    uint64_t last_kick = 0;
    int unkicked = 0;

    io->counters = w->io_counters;           /* a restarted worker continues its counts */
    struct sp_precopy_counters base = w->precopy_counters;
    while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
        io->rx_nowait = unkicked;
        unsigned n = ops->rx_burst(io, rx, batch);
        if (n == 0) {
            ops->rx_release(io, rx, 0);     /* an empty or fully skipped block goes back too */
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
        unsigned reserved = ops->tx_reserve(io, tx, n);
        unsigned used, sent;
        if (w->scratch.rrl)
            w->scratch.now_s = (uint32_t)(now_ns() / 1000000000u);
        const struct sp_table *t = sp_table_ref_enter(w->ref, w->index);
        if (w->responder) {
            struct sp_slow_packet slow[SP_IO_BATCH_MAX];
            unsigned k;
            used = answer_responder(w, t, rx, n, tx, reserved, slow, &k);
            sp_table_ref_leave(w->ref, w->index);   /* Python may take its time */
            if (k)
                used += w->slow_path(w->slow_ctx, slow, k, tx + used, reserved - used);
            sent = used;
            ops->tx_submit(io, tx, used, tx + used, reserved - used);
        } else if (w->precopy) {
            sent = answer_precopy(w, t, rx, n, tx, reserved, out, &used);
            sp_table_ref_leave(w->ref, w->index);
            ops->tx_submit(io, out, sent, tx + used, reserved - used);
        } else {
            sent = used = io->datagrams ? answer_datagrams(w, t, rx, n, tx, reserved)
                                        : answer_memcpy(w, t, rx, n, tx, reserved);
            sp_table_ref_leave(w->ref, w->index);
            ops->tx_submit(io, tx, used, tx + used, reserved - used);
        }
        ops->rx_release(io, rx, n);
        unkicked |= sent != 0;
        if (unkicked) {
            uint64_t now = w->tx_flush_ns ? now_ns() : 0;
            if (now - last_kick >= w->tx_flush_ns) {
                ops->kick(io);
                last_kick = now;
                unkicked = 0;
            }
        }
        w->batches++;
        w->batch_hist[sp_hist_bucket(n)]++;
        w->io_counters = io->counters;
        if (w->precopy) {
            const struct sp_precopy_counters *pc = sp_precopy_get_counters(w->precopy);
            w->precopy_counters.hits = base.hits + pc->hits;
            w->precopy_counters.fills = base.fills + pc->fills;
            w->precopy_counters.fallbacks = base.fallbacks + pc->fallbacks;
        }
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
    w->precopy = NULL;
    w->slow_path = NULL;
    w->slow_ctx = NULL;
}

/* Switches a worker that is not running to precopy mode with a pool of `frames`
 * copies lent by its backend (see precopy.h). 0, or -1 with a one-line reason. */
static int set_precopy(struct sp_frame_worker *w, unsigned frames, char *err, size_t errlen)
{
    if (!w->io->ops->pool_open) {
        snprintf(err, errlen, "%s: precopy mode is not supported by this backend "
                 "(use --mode memcpy)", w->io->ops->name);
        return -1;
    }
    struct sp_precopy *p = sp_precopy_new(frames);
    if (!p) {
        snprintf(err, errlen, "precopy: a pool of %u frames is not possible (%u to %u)", frames,
                 SP_PRECOPY_WAYS, SP_PRECOPY_MAX_FRAMES);
        return -1;
    }
    if (w->io->ops->pool_open(w->io, p, err, errlen) != 0) {
        sp_precopy_free(p);
        return -1;
    }
    w->precopy = p;
    return 0;
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
    w->cfg.dns.max_udp = cfg->max_udp;
    w->scratch.rrl = cfg->rrl;
    w->responder = 0;
    w->responder_all = 0;
    if (cfg->precopy_frames && set_precopy(w, cfg->precopy_frames, err, errlen) != 0) {
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
    sp_precopy_free(w->precopy);   /* after the backend, which may still complete copies */
    w->precopy = NULL;
}
