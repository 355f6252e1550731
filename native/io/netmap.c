/* The netmap backend: one NIC ring pair per worker. See netmap_io.h. */
#define _GNU_SOURCE
#define NETMAP_WITH_LIBS
#include "stormpy/netmap_io.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

/* nm_open() reports failures on stderr through D(); ours go back in err instead. */
#define D(...) ((void)0)
#include <net/netmap_user.h>

struct netmap_io {
    struct sp_io io;
    struct nm_desc *desc;
    struct netmap_ring *rx;
    struct netmap_ring *tx;
    int busy_poll;
    unsigned poll_ms;
    uint32_t rx_next;        /* the slot after the last one handed out */
    unsigned tx_pending;
};

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
    if (nm_ring_empty(p->tx))                /* only then is a sync worth its cost */
        ioctl(p->desc->fd, NIOCTXSYNC, NULL);
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
    p->tx_pending = 0;
    io->counters.kicks++;
}

static void netmap_close(struct sp_io *io)
{
    struct netmap_io *p = (struct netmap_io *)io;
    if (p->desc)
        nm_close(p->desc);
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
    /* No precopy: sending a copy would mean swapping its buffer into the TX slot
     * (NS_BUF_CHANGED) and tracking it until the slot comes back; not done, and
     * untestable without netmap, so the worker refuses the mode with a reason. */
    .pool_open = NULL,
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
    p->desc = nm_open(port, NULL, 0, NULL);
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
    return &p->io;
}
