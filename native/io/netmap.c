/* The netmap backend: one NIC ring pair per worker. See stormpy/io/netmap.h. */
#define _GNU_SOURCE
#define NETMAP_WITH_LIBS
#include "stormpy/io/netmap.h"

#include "stormpy/app/dns/precopy.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

/* nm_open() reports failures on stderr through D(); ours go back in err instead. */
#define D(...) ((void)0)
#include <net/netmap_user.h>

#define NO_POOL UINT32_MAX

struct netmap_io {
    struct sp_io io;
    struct nm_desc *desc;
    struct netmap_ring *rx;
    struct netmap_ring *tx;
    int busy_poll;
    unsigned poll_ms;
    uint32_t rx_next;        /* the slot after the last one handed out */
    unsigned tx_pending;
    /* precopy: the pool, its extra buffers, and per TX slot the copy it holds and
     * the slot's own buffer parked meanwhile */
    struct sp_precopy *pool;
    uint32_t *extra;         /* the extra buffers' indices, nextra of them */
    unsigned nextra;
    uint32_t *pool_of;       /* per TX slot: a pool frame, or NO_POOL */
    uint32_t *parked;
    uint32_t tx_seen;        /* TX slots before this one have been checked for copies */
};

/* After a TX sync: the slots the tail passed are sent; a copy among them is free
 * again and its slot takes back its own buffer. */
static void complete_copies(struct netmap_io *p)
{
    struct netmap_ring *ring = p->tx;
    if (!p->pool)
        return;
    for (uint32_t s = p->tx_seen; s != ring->tail; s = nm_ring_next(ring, s)) {
        if (p->pool_of[s] == NO_POOL)
            continue;
        sp_precopy_complete(p->pool, p->pool_of[s]);
        ring->slot[s].buf_idx = p->parked[s];
        ring->slot[s].flags |= NS_BUF_CHANGED;
        p->pool_of[s] = NO_POOL;
    }
    p->tx_seen = ring->tail;
}

static unsigned netmap_rx_burst(struct sp_io *io, struct sp_frame *rx, unsigned max)
{
    struct netmap_io *p = (struct netmap_io *)io;
    struct netmap_ring *ring = p->rx;
    if (nm_ring_empty(ring) && !io->rx_nowait) {
        if (p->busy_poll) {
            ioctl(p->desc->fd, NIOCRXSYNC, NULL);
        } else {
            struct pollfd pfd = {.fd = p->desc->fd, .events = POLLIN};
            poll(&pfd, 1, (int)p->poll_ms);
        }
    }
    uint32_t space = nm_ring_space(ring);
    unsigned n = 0;
    uint32_t i = ring->cur;
    while (n < max && space) {
        struct netmap_slot *slot = &ring->slot[i];
        if (slot->len <= ring->nr_buf_size) {      /* a slot never overstates its buffer */
            rx[n].data = (uint8_t *)NETMAP_BUF(ring, slot->buf_idx);
            rx[n].len = slot->len;
            rx[n].cap = slot->len;
            rx[n].id = i;
            rx[n].l4_verified = 0;
            n++;
        }
        i = nm_ring_next(ring, i);
        space--;
    }
    p->rx_next = i;
    io->counters.rx_frames += n;
    return n;
}

static void netmap_rx_release(struct sp_io *io, struct sp_frame *rx, unsigned n)
{
    struct netmap_io *p = (struct netmap_io *)io;
    (void)rx, (void)n;
    p->rx->head = p->rx->cur = p->rx_next;   /* published once per batch */
}

static void netmap_reclaim(struct sp_io *io)
{
    struct netmap_io *p = (struct netmap_io *)io;
    if (nm_ring_empty(p->tx)) {              /* only then is a sync worth its cost */
        ioctl(p->desc->fd, NIOCTXSYNC, NULL);
        complete_copies(p);
    }
}

static unsigned netmap_tx_reserve(struct sp_io *io, struct sp_frame *tx, unsigned n)
{
    struct netmap_io *p = (struct netmap_io *)io;
    struct netmap_ring *ring = p->tx;
    uint32_t space = nm_ring_space(ring), i = ring->cur;
    unsigned got = 0;
    while (got < n && space) {
        tx[got].data = (uint8_t *)NETMAP_BUF(ring, ring->slot[i].buf_idx);
        tx[got].cap = ring->nr_buf_size;
        tx[got].len = 0;
        tx[got].id = i;
        tx[got].pool = -1;
        got++;
        space--;
        i = nm_ring_next(ring, i);
    }
    return got;
}

static void netmap_tx_submit(struct sp_io *io, struct sp_frame *tx, unsigned used,
                             struct sp_frame *unused, unsigned nunused)
{
    struct netmap_io *p = (struct netmap_io *)io;
    struct netmap_ring *ring = p->tx;
    (void)unused, (void)nunused;   /* slots past cur stay free */
    uint32_t i = ring->cur;
    if (p->pool) {
        /* Replies take slots from cur in order. Rendered ones sit in the buffers of
         * the first reserved slots; copies bring their own, and the slots they take
         * park the reserved buffers nobody used. */
        uint32_t own[SP_IO_BATCH_MAX], spare[SP_IO_BATCH_MAX];
        unsigned nown = 0, nspare = 0;
        for (unsigned k = 0; k < used; k++)
            if (tx[k].pool < 0)
                own[nown++] = ring->slot[(uint32_t)tx[k].id].buf_idx;
        uint32_t s = ring->cur;
        for (unsigned k = 0; k < used; k++, s = nm_ring_next(ring, s))
            if (k >= nown)
                spare[nspare++] = ring->slot[s].buf_idx;
        unsigned o = 0, q = 0;
        for (unsigned k = 0; k < used; k++, i = nm_ring_next(ring, i)) {
            struct netmap_slot *slot = &ring->slot[i];
            uint32_t buf = tx[k].pool < 0 ? own[o++] : (uint32_t)tx[k].id;
            if (tx[k].pool >= 0) {
                p->parked[i] = spare[q++];
                p->pool_of[i] = (uint32_t)tx[k].pool;
            }
            if (slot->buf_idx != buf) {
                slot->buf_idx = buf;
                slot->flags |= NS_BUF_CHANGED;
            }
            slot->len = (uint16_t)tx[k].len;
            io->counters.tx_frames++;
            io->counters.tx_bytes += tx[k].len;
        }
        if (used) {
            ring->head = ring->cur = i;
            p->tx_pending += used;
        }
        return;
    }
    for (unsigned k = 0; k < used; k++) {
        ring->slot[(uint32_t)tx[k].id].len = (uint16_t)tx[k].len;
        io->counters.tx_frames++;
        io->counters.tx_bytes += tx[k].len;
        i = nm_ring_next(ring, (uint32_t)tx[k].id);
    }
    if (used) {
        ring->head = ring->cur = i;
        p->tx_pending += used;
    }
}

static void netmap_kick(struct sp_io *io)
{
    struct netmap_io *p = (struct netmap_io *)io;
    if (!p->tx_pending)
        return;
    ioctl(p->desc->fd, NIOCTXSYNC, NULL);
    complete_copies(p);
    p->tx_pending = 0;
    io->counters.kicks++;
}

/* The copies are the extra buffers netmap granted at open. */
static int netmap_pool_open(struct sp_io *io, struct sp_precopy *pool, char *err, size_t errlen)
{
    struct netmap_io *p = (struct netmap_io *)io;
    unsigned n = sp_precopy_frames(pool);
    if (n > p->nextra) {
        snprintf(err, errlen, "netmap: %u extra buffers for the precopy pool, netmap granted %u",
                 n, p->nextra);
        return -1;
    }
    uint32_t slots = p->tx->num_slots;
    p->pool_of = malloc(slots * sizeof(*p->pool_of));
    p->parked = malloc(slots * sizeof(*p->parked));
    if (!p->pool_of || !p->parked) {
        snprintf(err, errlen, "netmap: out of memory");
        return -1;
    }
    for (uint32_t s = 0; s < slots; s++)
        p->pool_of[s] = NO_POOL;
    for (unsigned i = 0; i < n; i++)
        sp_precopy_set_frame(pool, i, (uint8_t *)NETMAP_BUF(p->tx, p->extra[i]),
                             p->tx->nr_buf_size, p->extra[i]);
    p->pool = pool;
    p->tx_seen = p->tx->tail;
    return 0;
}

static void netmap_close(struct sp_io *io)
{
    struct netmap_io *p = (struct netmap_io *)io;
    if (p->desc) {
        if (p->pool) {                       /* slots holding copies take their own back */
            for (uint32_t s = 0; s < p->tx->num_slots; s++)
                if (p->pool_of[s] != NO_POOL)
                    p->tx->slot[s].buf_idx = p->parked[s];
        }
        /* netmap frees the extra buffers linked from ni_bufs_head at close */
        uint32_t head = 0;
        for (unsigned i = p->nextra; i-- > 0;) {
            *(uint32_t *)NETMAP_BUF(p->tx, p->extra[i]) = head;
            head = p->extra[i];
        }
        p->desc->nifp->ni_bufs_head = head;
        nm_close(p->desc);
    }
    free(p->extra);
    free(p->pool_of);
    free(p->parked);
    free(p);
}

static const struct sp_io_ops netmap_ops = {
    .name = "netmap",
    .rx_burst = netmap_rx_burst,
    .reclaim = netmap_reclaim,
    .tx_reserve = netmap_tx_reserve,
    .tx_submit = netmap_tx_submit,
    .rx_release = netmap_rx_release,
    .kick = netmap_kick,
    .close = netmap_close,
    .pool_open = netmap_pool_open,
};

struct sp_io *sp_netmap_io_open(const struct sp_netmap_config *cfg, char *err, size_t errlen)
{
    struct netmap_io *p = calloc(1, sizeof(*p));
    if (!p) {
        snprintf(err, errlen, "netmap: out of memory");
        return NULL;
    }
    char port[96];
    snprintf(port, sizeof(port), "netmap:%s-%u", cfg->ifname, cfg->queue);
    struct nmreq req;
    memset(&req, 0, sizeof(req));
    req.nr_arg3 = cfg->pool_frames;          /* extra buffers for the precopy pool */
    p->desc = nm_open(port, &req, 0, NULL);
    if (!p->desc) {
        int e = errno;
        snprintf(err, errlen, "netmap: cannot open %s: %s%s", port, strerror(e),
                 e == ENOENT ? " (is the netmap kernel module loaded? /dev/netmap)" : "");
        free(p);
        return NULL;
    }
    p->io.ops = &netmap_ops;
    p->busy_poll = cfg->busy_poll;
    p->poll_ms = cfg->poll_ms ? cfg->poll_ms : 100;
    p->rx = NETMAP_RXRING(p->desc->nifp, p->desc->first_rx_ring);
    p->tx = NETMAP_TXRING(p->desc->nifp, p->desc->first_tx_ring);
    p->rx_next = p->rx->cur;
    /* the granted extra buffers are a list through their first word */
    p->nextra = p->desc->req.nr_arg3;
    p->extra = calloc(p->nextra ? p->nextra : 1, sizeof(*p->extra));
    if (!p->extra) {
        p->nextra = 0;
        netmap_close(&p->io);
        snprintf(err, errlen, "netmap: out of memory");
        return NULL;
    }
    uint32_t idx = p->desc->nifp->ni_bufs_head;
    unsigned got = 0;
    while (idx && got < p->nextra) {
        p->extra[got++] = idx;
        idx = *(const uint32_t *)NETMAP_BUF(p->tx, idx);
    }
    p->nextra = got;
    p->desc->nifp->ni_bufs_head = 0;         /* ours until close links them back */
    return &p->io;
}
