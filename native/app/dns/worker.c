/* DNS's batch loops and its part of a worker's life. See worker.h. */
#include "stormpy/app/dns/worker.h"

#include <stdio.h>

#include "stormpy/app/dns/answer.h"
#include "stormpy/engine/clock.h"

/* Datagrams from a socket: every reply rendered into a TX buffer. */
static void answer_datagrams(struct sp_dns_worker *d, const struct sp_table *t, struct sp_batch *b)
{
    struct sp_frame_counters *c = b->counters;
    const struct sp_frame *rx = b->rx;
    struct sp_frame *tx = b->tx;
    unsigned used = 0, n = b->n;
    for (unsigned i = 0; i < n; i++) {
        if (sp_batch_full(b, i, used))
            break;
        size_t len = sp_dns_datagram_answer(t, d, &rx[i], tx[used].data, tx[used].cap, c);
        if (len) {
            tx[used].len = (uint32_t)len;
            tx[used].id = rx[i].id;      /* the reply goes to this request's peer */
            used++;
        }
    }
    b->sent = b->used = used;
}

/* memcpy mode on whole frames: every reply rendered into a TX buffer, no more frames at
 * a time than TX buffers are left (one reply at most per frame). With a table larger
 * than the cache, in groups answered in stages, so that their lookups wait for memory
 * together (answer.h); else one by one. */
static void answer_frames(struct sp_dns_worker *d, const struct sp_table *t, struct sp_batch *b,
                          bool groups)
{
    unsigned used = 0, n = b->n;
    for (unsigned i = 0; i < n;) {
        if (sp_batch_full(b, i, used))
            break;
        unsigned g = n - i, room = b->reserved - used;
        g = g < room ? g : room;
        if (groups) {
            g = g < SP_DNS_GROUP ? g : SP_DNS_GROUP;
            used += sp_dns_frame_answer_group(t, d, b->cfg, &b->rx[i], g, &b->tx[used],
                                              b->counters);
        } else {
            used += sp_dns_frames_answer(t, d, b->cfg, &b->rx[i], g, &b->tx[used], b->counters);
        }
        i += g;
    }
    b->sent = b->used = used;
}

/* precopy mode: replies from the pool where they can be, else from TX buffers. Every
 * reply takes a TX ring slot, so there are at most `reserved` of them; they are
 * listed in out, and `used` counts the TX buffers among them. A table larger than the
 * cache is answered in groups, as in memcpy mode. */
static void answer_precopy(struct sp_dns_worker *d, const struct sp_table *t, struct sp_batch *b)
{
    struct sp_precopy *p = d->precopy;
    const struct sp_frame *rx = b->rx;
    const struct sp_frame *tx = b->tx;
    struct sp_frame *out = b->out;
    unsigned sent = 0, taken = 0, n = b->n;
    bool groups = !b->cfg->own_stack && sp_table_worth_prefetching(t);
    sp_precopy_begin(p, t, b->generation);
    for (unsigned i = 0; i < n;) {
        if (sp_batch_full(b, i, sent))
            break;
        unsigned g = n - i, room = b->reserved - sent, used = 0;
        g = g < room ? g : room;
        if (groups) {
            g = g < SP_DNS_GROUP ? g : SP_DNS_GROUP;
            sent += sp_precopy_answer_group(p, t, d, b->cfg, &rx[i], g, &tx[taken], &out[sent],
                                            &used, b->counters);
        } else {
            sent += sp_precopy_frames_answer(p, t, d, b->cfg, &rx[i], g, &tx[taken], &out[sent],
                                             &used, b->counters);
        }
        taken += used;
        i += g;
    }
    b->sent = sent;
    b->used = taken;
    sp_dns_worker_count_precopy(d);
}

void sp_dns_worker_count_precopy(struct sp_dns_worker *d)
{
    const struct sp_precopy_counters *pc = sp_precopy_get_counters(d->precopy);
    d->precopy_counters.hits = d->precopy_base.hits + pc->hits;
    d->precopy_counters.fills = d->precopy_base.fills + pc->fills;
    d->precopy_counters.fallbacks = d->precopy_base.fallbacks + pc->fallbacks;
}

void sp_dns_worker_batch(struct sp_dns_worker *d, const struct sp_table *t, struct sp_batch *b)
{
    if (d->rrl)
        d->now_s = (uint32_t)(sp_now_ns() / 1000000000u);
    if (d->precopy && sp_precopy_may_copy(d->precopy, t)) {
        b->out = b->spare;
        answer_precopy(d, t, b);
    } else if (b->datagrams) {
        answer_datagrams(d, t, b);
    } else {
        /* one by one for a table in the cache, or the own stack, which replies while
         * frames are parsed */
        answer_frames(d, t, b, !b->cfg->own_stack && sp_table_worth_prefetching(t));
    }
}

/* Precopy mode with a pool of `frames` copies lent by the backend (see precopy.h). */
static int open_pool(struct sp_dns_worker *d, struct sp_io *io, unsigned frames, char *err,
                     size_t errlen)
{
    if (!io->ops->pool_open) {
        snprintf(err, errlen, "%s: precopy mode is not supported by this backend "
                 "(use --mode memcpy)", io->ops->name);
        return -1;
    }
    struct sp_precopy *p = sp_precopy_new(frames);
    if (!p) {
        snprintf(err, errlen, "precopy: a pool of %u frames is not possible (%u to %u)", frames,
                 SP_PRECOPY_WAYS, SP_PRECOPY_MAX_FRAMES);
        return -1;
    }
    if (io->ops->pool_open(io, p, err, errlen) != 0) {
        sp_precopy_free(p);
        return -1;
    }
    d->precopy = p;
    d->precopy_base = d->precopy_counters;
    return 0;
}

int sp_dns_worker_init(struct sp_dns_worker *d, struct sp_io *io,
                       const struct sp_dns_worker_config *cfg, char *err, size_t errlen)
{
    d->cfg.max_udp = cfg->max_udp;
    d->cfg.nsid_len = 0;                 /* none until the server gives one */
    d->cfg.handoff_fd = cfg->handoff_fd;
    d->rrl = cfg->rrl;
    d->precopy = NULL;
    return cfg->precopy_frames ? open_pool(d, io, cfg->precopy_frames, err, errlen) : 0;
}

int sp_dns_worker_init_stream(struct sp_dns_worker *d, const struct sp_dns_stream_config *cfg,
                              char *err, size_t errlen)
{
    d->cfg = cfg->dns;
    d->rrl = NULL;                       /* TCP is where rate limiting sends clients */
    d->precopy = NULL;
    d->stream = sp_dns_stream_open(cfg, err, errlen);
    return d->stream ? 0 : -1;
}

void sp_dns_worker_rearm(struct sp_dns_worker *d)
{
    d->precopy = NULL;
    d->stream = NULL;
}

void sp_dns_worker_close(struct sp_dns_worker *d)
{
    sp_precopy_free(d->precopy);
    d->precopy = NULL;
    sp_dns_stream_close(d->stream);
    d->stream = NULL;
}
