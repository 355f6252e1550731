/* AF_XDP sockets, one per NIC queue. See stormpy/io/xdp_socket.h. */
#ifdef SP_WITH_XDP

#include "stormpy/io/xdp_socket.h"

#include "gather.h"
#include "stormpy/app/dns/precopy.h"
#include "xdp_internal.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/if_xdp.h>

#include <bpf/bpf.h>
#include <xdp/xsk.h>

#include "tx_limit.h"

#ifndef SO_PREFER_BUSY_POLL                /* headers before Linux 5.11 */
#define SO_PREFER_BUSY_POLL 69
#define SO_BUSY_POLL_BUDGET 70
#endif

#define SP_XDP_KICK_MAX 16                 /* sendto() calls per kick, at most */

struct xdp_io {
    struct sp_io io;
    struct xsk_ring_cons rx, comp;
    struct xsk_ring_prod tx, fill;
    struct xsk_umem *umem;
    struct xsk_socket *xsk;
    struct sp_xdp_prog *prog;
    uint32_t queue_id;
    int fd;
    int poll, timeout_ms;
    uint32_t idle_rounds;     /* SP_XDP_POLL_NAPI: empty busy polls in a row */
    uint8_t *area;
    uint64_t area_len;        /* RX [0, rx_end), TX [rx_end, tx_end), pool [tx_end, area_len) */
    uint64_t rx_end;
    uint64_t tx_end;
    uint32_t npool;           /* precopy frames in the UMEM (cfg.pool_frames) */
    struct sp_precopy *pool;
    uint64_t frame_mask;      /* ~(frame_size - 1) */
    uint32_t frame_size;
    uint32_t ntx;             /* TX frames */
    uint32_t nfree;           /* TX frames on the free stack */
    uint32_t nstash;          /* RX frames waiting for room in the fill ring */
    uint64_t *free_tx;        /* [ntx] */
    uint64_t *stash;          /* [fill ring size] */
    struct sp_xdp_stats stats;
    struct sp_tx_limit limit;  /* cfg.tx_limit: limit.limit 0 when off */
    /* TCP answers of up to 64 KB go through the kernel's segmentation offload: in copy
     * mode each XSK frame costs the kernel an skb, a gathered one skb for 44 segments */
    struct sp_gather_tx gather;
};

/* RX frames the fill ring had no room for (it always has: see stormpy/io/xdp_socket.h) go back now. */
static void flush_stash(struct xdp_io *x)
{
    uint32_t idx;
    uint32_t n = xsk_prod_nb_free(&x->fill, x->nstash);
    if (n > x->nstash)
        n = x->nstash;
    if (!n || xsk_ring_prod__reserve(&x->fill, n, &idx) != n)
        return;
    for (uint32_t i = 0; i < n; i++)
        *xsk_ring_prod__fill_addr(&x->fill, idx + i) = x->stash[--x->nstash];
    xsk_ring_prod__submit(&x->fill, n);
}

static void wake_rx(struct xdp_io *x)
{
    /* zero-copy drivers stop taking fill-ring frames until woken */
    if (xsk_ring_prod__needs_wakeup(&x->fill)) {
        recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
        x->stats.rx_wakeups++;
    }
}

static uint32_t tx_unsent(const struct xdp_io *x)
{
    return *x->tx.producer - __atomic_load_n(x->tx.consumer, __ATOMIC_ACQUIRE);
}

/* Make the kernel send what is on the TX ring, when the ring says it needs telling.
 * Copy mode sends a limited number per sendto() and answers EAGAIN for the rest, so
 * it is called again while that makes progress; zero-copy only needs waking once. */
static void kick_tx(struct xdp_io *x)
{
    for (int i = 0; i < SP_XDP_KICK_MAX; i++) {
        uint32_t before = tx_unsent(x);
        if (!before || !xsk_ring_prod__needs_wakeup(&x->tx))
            return;
        x->io.counters.kicks++;
        if (sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0) {
            if (x->stats.zerocopy)
                return;
        } else if (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS && errno != EINTR) {
            x->stats.tx_kick_errors++;   /* ENETDOWN, ENXIO: the device went away */
            return;
        }
        if (x->stats.zerocopy || tx_unsent(x) >= before)
            return;   /* no progress: the next batch or idle poll tries again */
    }
}

static void xdp_reclaim(struct sp_io *io);

/* The waiting replies that fit under the TX byte limit, onto the TX ring. */
static void send_released(struct xdp_io *x)
{
    struct sp_tx_waiting w[SP_IO_BATCH_MAX];
    uint32_t idx;
    for (;;) {
        unsigned n = xsk_prod_nb_free(&x->tx, SP_IO_BATCH_MAX);
        n = sp_tx_limit_release(&x->limit, w, n < SP_IO_BATCH_MAX ? n : SP_IO_BATCH_MAX);
        if (!n || xsk_ring_prod__reserve(&x->tx, n, &idx) != n)
            break;   /* the reserve cannot fail: nb_free saw the slots, one producer */
        for (unsigned i = 0; i < n; i++)
            *xsk_ring_prod__tx_desc(&x->tx, idx + i) = (struct xdp_desc){w[i].addr, w[i].len, 0};
        xsk_ring_prod__submit(&x->tx, n);
    }
    x->io.counters.tx_inflight_peak = x->limit.peak;
}

/* With a TX byte limit: while replies wait or the bytes in flight reach it, the
 * worker takes no RX frames, so the backlog waits in the RX ring (as packets wait in
 * the qdisc while BQL stops a device queue) and not as delay on the TX ring. */
static bool tx_limit_holds_rx(struct xdp_io *x)
{
    for (int round = 0; round < 2 && sp_tx_limit_full(&x->limit); round++) {
        xdp_reclaim(&x->io);
        send_released(x);
        kick_tx(x);   /* copy mode completes frames in the sendto() itself */
    }
    return sp_tx_limit_full(&x->limit);
}

static unsigned xdp_rx_burst(struct sp_io *io, struct sp_frame *rx, unsigned max)
{
    struct xdp_io *x = (struct xdp_io *)io;
    uint32_t idx;
    if (x->nstash)
        flush_stash(x);
    if (x->limit.limit && tx_limit_holds_rx(x))
        return 0;
    unsigned n = xsk_ring_cons__peek(&x->rx, max, &idx);
    if (n == 0) {
        if (tx_unsent(x))
            kick_tx(x);
        if (x->poll == SP_XDP_POLL_SPIN) {
            wake_rx(x);
            return 0;
        }
        if (x->poll == SP_XDP_POLL_NAPI && x->idle_rounds < SP_XDP_NAPI_IDLE) {
            /* with SO_PREFER_BUSY_POLL this runs the queue's NAPI here, once */
            recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
            n = xsk_ring_cons__peek(&x->rx, max, &idx);
            if (n == 0) {
                x->idle_rounds++;
                return 0;
            }
        } else {
            /* poll() also wakes the driver (zero-copy) and drives TX (copy mode) */
            struct pollfd pfd = {.fd = x->fd, .events = POLLIN};
            if (poll(&pfd, 1, x->timeout_ms) <= 0)
                return 0;
            n = xsk_ring_cons__peek(&x->rx, max, &idx);
            if (n == 0)
                return 0;
        }
    }
    x->idle_rounds = 0;
    unsigned got = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct xdp_desc *d = xsk_ring_cons__rx_desc(&x->rx, idx + i);
        uint64_t addr = d->addr;
        uint32_t len = d->len;
        uint64_t base = addr & x->frame_mask;
        if (base >= x->rx_end || len == 0 || addr - base + len > x->frame_size) {
            x->stats.bad_desc++;
            if (base < x->rx_end && x->nstash < x->rx_end / x->frame_size)
                x->stash[x->nstash++] = base;   /* our frame, bad length: reuse it */
            continue;
        }
        /* no checksum verdict reaches an AF_XDP socket: l4_verified 0 */
        rx[got++] = (struct sp_frame){.data = x->area + addr, .len = len, .cap = len, .id = base,
                                      .pool = -1};
    }
    /* The descriptors are copied out, so the slots go back now; the frames stay
     * ours until rx_release. */
    xsk_ring_cons__release(&x->rx, n);
    io->counters.rx_frames += got;
    return got;
}

static void xdp_reclaim(struct sp_io *io)
{
    struct xdp_io *x = (struct xdp_io *)io;
    uint32_t idx;
    unsigned n = xsk_ring_cons__peek(&x->comp, x->ntx, &idx);
    if (x->limit.limit)
        for (unsigned i = 0; i < n; i++)
            sp_tx_limit_completed(&x->limit, *xsk_ring_cons__comp_addr(&x->comp, idx + i) &
                                                 x->frame_mask);
    for (unsigned i = 0; i < n; i++) {
        uint64_t base = *xsk_ring_cons__comp_addr(&x->comp, idx + i) & x->frame_mask;
        if (base >= x->tx_end && base < x->area_len && x->pool) {
            sp_precopy_complete(x->pool, (uint32_t)((base - x->tx_end) / x->frame_size));
            continue;   /* a copy the NIC is done with: it may be rewritten now */
        }
        if (base < x->rx_end || base >= x->tx_end || x->nfree == x->ntx) {
            x->stats.bad_desc++;
            continue;
        }
        x->free_tx[x->nfree++] = base;
    }
    if (n)
        xsk_ring_cons__release(&x->comp, n);
}

static unsigned xdp_tx_reserve(struct sp_io *io, struct sp_frame *tx, unsigned n)
{
    struct xdp_io *x = (struct xdp_io *)io;
    uint32_t slots = xsk_prod_nb_free(&x->tx, n);
    if (n > slots)
        n = slots;
    if (n > x->nfree)
        n = x->nfree;
    for (unsigned i = 0; i < n; i++) {
        uint64_t addr = x->free_tx[--x->nfree];
        tx[i].data = x->area + addr;
        tx[i].cap = x->frame_size;
        tx[i].len = 0;
        tx[i].id = addr;
        tx[i].pool = -1;
    }
    return n;
}

static void xdp_tx_submit(struct sp_io *io, struct sp_frame *tx, unsigned used,
                          struct sp_frame *unused, unsigned nunused)
{
    struct xdp_io *x = (struct xdp_io *)io;
    uint32_t idx;
    if (used && x->limit.limit) {   /* they wait their turn under the byte limit */
        for (unsigned i = 0; i < used; i++) {
            sp_tx_limit_queue(&x->limit, tx[i].id, tx[i].len);
            io->counters.tx_bytes += tx[i].len;
        }
        io->counters.tx_frames += used;
        send_released(x);
        io->counters.tx_held += x->limit.nwaiting < used ? x->limit.nwaiting : used;
    /* tx_reserve saw at least as many free slots as frames, pool copies included,
     * and only this thread produces */
    } else if (used && xsk_ring_prod__reserve(&x->tx, used, &idx) == used) {
        for (unsigned i = 0; i < used; i++) {
            struct xdp_desc *d = xsk_ring_prod__tx_desc(&x->tx, idx + i);
            d->addr = tx[i].id;
            d->len = tx[i].len;
            d->options = 0;
            io->counters.tx_bytes += tx[i].len;
        }
        xsk_ring_prod__submit(&x->tx, used);
        io->counters.tx_frames += used;
    } else if (used) {
        io->counters.tx_ring_full += used;   /* cannot happen; never lose the frames */
        for (unsigned i = 0; i < used; i++) {
            if (tx[i].pool >= 0)
                sp_precopy_complete(x->pool, (uint32_t)tx[i].pool);
            else
                x->free_tx[x->nfree++] = tx[i].id;
        }
    }
    for (unsigned i = 0; i < nunused; i++)
        x->free_tx[x->nfree++] = unused[i].id;
}

/* The copies live in the UMEM past the TX frames, so a TX descriptor can point at
 * them; the NIC (or the kernel, in copy mode) reads them in place. */
static int xdp_pool_open(struct sp_io *io, struct sp_precopy *pool, char *err, size_t errlen)
{
    struct xdp_io *x = (struct xdp_io *)io;
    unsigned n = sp_precopy_frames(pool);
    if (x->pool || n > x->npool) {
        sp_xdp_set_err(err, errlen, "AF_XDP: %u pool frames asked, the UMEM has %u", n, x->npool);
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        uint64_t addr = x->tx_end + (uint64_t)i * x->frame_size;
        sp_precopy_set_frame(pool, i, x->area + addr, x->frame_size, addr);
    }
    x->pool = pool;
    return 0;
}

static void xdp_rx_release(struct sp_io *io, struct sp_frame *rx, unsigned n)
{
    struct xdp_io *x = (struct xdp_io *)io;
    uint32_t idx;
    if (!n)
        return;
    if (!x->nstash && xsk_ring_prod__reserve(&x->fill, n, &idx) == n) {
        for (unsigned i = 0; i < n; i++)
            *xsk_ring_prod__fill_addr(&x->fill, idx + i) = rx[i].id;
        xsk_ring_prod__submit(&x->fill, n);
    } else {
        for (unsigned i = 0; i < n; i++)
            x->stash[x->nstash++] = rx[i].id;
        flush_stash(x);
    }
    wake_rx(x);
}

static void xdp_kick(struct sp_io *io)
{
    kick_tx((struct xdp_io *)io);
}

static void xdp_close(struct sp_io *io)
{
    struct xdp_io *x = (struct xdp_io *)io;
    if (!x)
        return;
    struct sp_xdp_quiet q = sp_xdp_quiet_begin();
    if (x->xsk) {
        uint32_t key = x->queue_id;
        bpf_map_delete_elem(x->prog->map_fd, &key);   /* the kernel would too, on close */
        xsk_socket__delete(x->xsk);
    }
    if (x->umem)
        xsk_umem__delete(x->umem);
    sp_xdp_quiet_end(q);
    if (x->area)
        munmap(x->area, x->area_len);
    sp_gather_tx_close(&x->gather);
    sp_tx_limit_free(&x->limit);
    free(x);
}

static void xdp_tx_gather(struct sp_io *io, const struct sp_gather *g, unsigned n)
{
    struct xdp_io *x = (struct xdp_io *)io;
    sp_gather_tx_send(&x->gather, g, n, &io->counters);
}

static const struct sp_io_ops xdp_ops = {
    .name = "af_xdp",
    .rx_burst = xdp_rx_burst,
    .reclaim = xdp_reclaim,
    .tx_reserve = xdp_tx_reserve,
    .tx_submit = xdp_tx_submit,
    .rx_release = xdp_rx_release,
    .kick = xdp_kick,
    .close = xdp_close,
    .pool_open = xdp_pool_open,
    .tx_gather = xdp_tx_gather,
};

static int pow2(uint32_t v)
{
    return v && !(v & (v - 1));
}

/* SP_XDP_POLL_NAPI's socket options: 0 or an errno. */
static int prefer_busy_poll(int fd, uint32_t rx_size)
{
    int on = 1, usec = SP_XDP_NAPI_BUSY_US, budget = rx_size < 64 ? (int)rx_size : 64;
    if (setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &on, sizeof(on)) ||
        setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &usec, sizeof(usec)) ||
        setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget, sizeof(budget)))
        return errno;
    return 0;
}

/* One UMEM + socket in one copy mode. 0 or -errno; on failure nothing is left. */
static int bind_queue(struct xdp_io *x, const struct sp_xdp_config *c, int zerocopy,
                      const char **step)
{
    struct xsk_umem_config uc = {
        .fill_size = c->fill_size,
        .comp_size = c->comp_size,
        .frame_size = c->frame_size,
        .frame_headroom = 0,
        .flags = 0,
    };
    *step = "the UMEM";
    int r = xsk_umem__create(&x->umem, x->area, x->area_len, &x->fill, &x->comp, &uc);
    if (r) {
        x->umem = NULL;
        return r;
    }
    struct xsk_socket_config sc = {
        .rx_size = c->rx_size,
        .tx_size = c->tx_size,
        .libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,   /* our program, not libxdp's */
        .xdp_flags = 0,
        .bind_flags = (uint16_t)(XDP_USE_NEED_WAKEUP | (zerocopy ? XDP_ZEROCOPY : XDP_COPY)),
    };
    *step = zerocopy ? "zero-copy" : "copy mode";
    r = xsk_socket__create(&x->xsk, x->prog->ifname, x->queue_id, x->umem, &x->rx, &x->tx, &sc);
    if (r) {
        x->xsk = NULL;
        xsk_umem__delete(x->umem);
        x->umem = NULL;
        return r;
    }
    return 0;
}

struct sp_io *sp_xdp_io_open(struct sp_xdp_prog *prog, uint32_t queue_id,
                             const struct sp_xdp_config *cfg, char *err, size_t errlen)
{
    struct sp_xdp_config c = {0};
    if (cfg)
        c = *cfg;
    if (!prog) {
        sp_xdp_set_err(err, errlen, "AF_XDP: no program attached");
        return NULL;
    }
    if (!c.frame_size)
        c.frame_size = 2048;
    if (!c.rx_size)
        c.rx_size = XSK_RING_CONS__DEFAULT_NUM_DESCS;
    if (!c.fill_size)
        c.fill_size = 2 * c.rx_size;
    if (!c.tx_size)
        c.tx_size = XSK_RING_PROD__DEFAULT_NUM_DESCS;
    if (!c.comp_size)
        c.comp_size = c.tx_size;
    if (!c.poll_timeout_ms)
        c.poll_timeout_ms = 100;
    if ((c.frame_size != 2048 && c.frame_size != 4096) || !pow2(c.rx_size) ||
        !pow2(c.fill_size) || !pow2(c.tx_size) || !pow2(c.comp_size) ||
        c.fill_size < c.rx_size || c.comp_size < c.tx_size || c.fill_size > (1u << 20) ||
        c.tx_size > (1u << 20) || c.pool_frames > (1u << 20) || c.poll_timeout_ms < 0 ||
        c.copy_mode < SP_XDP_COPY_AUTO || c.copy_mode > SP_XDP_ZEROCOPY ||
        c.poll < SP_XDP_POLL_BLOCK || c.poll > SP_XDP_POLL_NAPI) {
        sp_xdp_set_err(err, errlen, "AF_XDP: bad configuration (frame size 2048/4096, ring sizes "
                             "powers of two, fill >= rx, completion >= tx)");
        return NULL;
    }
    if (prog->queues && queue_id >= prog->queues) {
        sp_xdp_set_err(err, errlen, "AF_XDP: %s has no queue %u (it has %u)", prog->ifname, queue_id,
                prog->queues);
        return NULL;
    }
    if (queue_id >= prog->map_entries) {
        sp_xdp_set_err(err, errlen, "AF_XDP: queue %u is beyond the program's %u", queue_id,
                prog->map_entries);
        return NULL;
    }

    struct xdp_io *x = calloc(1, sizeof(*x) + sizeof(uint64_t) * ((size_t)c.tx_size + c.fill_size));
    if (!x) {
        sp_xdp_set_err(err, errlen, "AF_XDP: out of memory");
        return NULL;
    }
    x->io.ops = &xdp_ops;
    x->gather.fd = -1;
    x->prog = prog;
    x->queue_id = queue_id;
    x->poll = c.poll;
    x->timeout_ms = c.poll_timeout_ms;
    x->frame_size = c.frame_size;
    x->frame_mask = ~(uint64_t)(c.frame_size - 1);
    x->ntx = c.tx_size;
    x->rx_end = (uint64_t)c.fill_size * c.frame_size;
    x->tx_end = x->rx_end + (uint64_t)c.tx_size * c.frame_size;
    x->npool = c.pool_frames;
    x->area_len = x->tx_end + (uint64_t)c.pool_frames * c.frame_size;
    x->free_tx = (uint64_t *)(x + 1);
    x->stash = x->free_tx + c.tx_size;
    x->fd = -1;
    if (sp_tx_limit_init(&x->limit, c.tx_limit, x->rx_end, c.frame_size,
                         c.tx_size + c.pool_frames)) {
        sp_xdp_set_err(err, errlen, "AF_XDP: out of memory");
        free(x);
        return NULL;
    }

    void *area = mmap(NULL, x->area_len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (area == MAP_FAILED) {
        sp_xdp_set_err(err, errlen, "AF_XDP: cannot map %llu MiB for the UMEM: %s",
                (unsigned long long)(x->area_len >> 20), strerror(errno));
        sp_tx_limit_free(&x->limit);
        free(x);
        return NULL;
    }
    x->area = area;

    int tries[2], ntries = 0;
    if (c.copy_mode != SP_XDP_COPY_ALWAYS)
        tries[ntries++] = 1;
    if (c.copy_mode != SP_XDP_ZEROCOPY)
        tries[ntries++] = 0;
    struct sp_xdp_quiet q = sp_xdp_quiet_begin();
    int r = -EINVAL, zc = 0;
    const char *step = "";
    for (int i = 0; i < ntries; i++) {
        zc = tries[i];
        r = bind_queue(x, &c, zc, &step);
        if (r == 0 || sp_xdp_is_perm(-r) || r == -EBUSY)
            break;   /* done, or copy mode would fail the same way */
    }
    sp_xdp_quiet_end(q);
    if (r) {
        if (sp_xdp_is_perm(-r))
            sp_xdp_set_err(err, errlen, SP_XDP_PERM_MSG);
        else if (r == -EBUSY)
            sp_xdp_set_err(err, errlen, "AF_XDP: queue %u of %s is in use by another AF_XDP socket",
                    queue_id, prog->ifname);
        else if (r == -ENOBUFS || r == -ENOMEM)
            sp_xdp_set_err(err, errlen, "AF_XDP: kernel refused %s on %s queue %u: %s "
                    "(RLIMIT_MEMLOCK? CAP_IPC_LOCK lifts it)", step, prog->ifname, queue_id,
                    strerror(-r));
        else
            sp_xdp_set_err(err, errlen, "AF_XDP: kernel refused %s on %s queue %u: %s", step,
                    prog->ifname, queue_id, strerror(-r));
        xdp_close(&x->io);
        return NULL;
    }
    x->fd = xsk_socket__fd(x->xsk);
    fcntl(x->fd, F_SETFD, FD_CLOEXEC);   /* libxdp 1.3 does not: keep it from exec'd children */
    char ignored[128];                   /* without it, TCP goes a frame a segment */
    if (sp_gather_tx_open(&x->gather, (unsigned)prog->ifindex, ignored, sizeof(ignored)))
        x->io.gather = 1;
    if (c.poll == SP_XDP_POLL_NAPI && (r = prefer_busy_poll(x->fd, c.rx_size)) != 0) {
        sp_xdp_set_err(err, errlen, "AF_XDP: kernel refused busy polling on %s queue %u: %s "
                "(SO_PREFER_BUSY_POLL needs Linux 5.11 and CAP_NET_ADMIN)", prog->ifname,
                queue_id, strerror(r));
        xdp_close(&x->io);
        return NULL;
    }
    struct xdp_options opt = {0};
    socklen_t optlen = sizeof(opt);
    if (getsockopt(x->fd, SOL_XDP, XDP_OPTIONS, &opt, &optlen) == 0)
        x->stats.zerocopy = (opt.flags & XDP_OPTIONS_ZEROCOPY) != 0;
    else
        x->stats.zerocopy = zc;   /* a kernel before 5.3: trust the bind flag */

    /* every RX frame into the fill ring (it has exactly that many slots) */
    uint32_t idx;
    if (xsk_ring_prod__reserve(&x->fill, c.fill_size, &idx) != c.fill_size) {
        sp_xdp_set_err(err, errlen, "AF_XDP: fill ring of %s queue %u is not empty", prog->ifname,
                queue_id);
        xdp_close(&x->io);
        return NULL;
    }
    for (uint32_t i = 0; i < c.fill_size; i++)
        *xsk_ring_prod__fill_addr(&x->fill, idx + i) = (uint64_t)i * c.frame_size;
    xsk_ring_prod__submit(&x->fill, c.fill_size);
    for (uint32_t i = 0; i < c.tx_size; i++)   /* low addresses on top of the stack */
        x->free_tx[i] = x->rx_end + (uint64_t)(c.tx_size - 1 - i) * c.frame_size;
    x->nfree = c.tx_size;

    /* last: the program starts redirecting this queue only now */
    r = bpf_map_update_elem(prog->map_fd, &queue_id, &x->fd, BPF_ANY);
    if (r) {
        r = errno;
        sp_xdp_set_err(err, errlen, "AF_XDP: kernel refused to register queue %u of %s: %s", queue_id,
                prog->ifname, strerror(r));
        xdp_close(&x->io);
        return NULL;
    }
    return &x->io;
}

int sp_xdp_io_stats(struct sp_io *io, struct sp_xdp_stats *s)
{
    struct xdp_io *x = (struct xdp_io *)io;
    *s = x->stats;
    struct xdp_statistics k;
    socklen_t len = sizeof(k);
    memset(&k, 0, sizeof(k));
    if (getsockopt(x->fd, SOL_XDP, XDP_STATISTICS, &k, &len))
        return -1;
    s->rx_dropped = k.rx_dropped;
    s->rx_invalid_descs = k.rx_invalid_descs;
    s->tx_invalid_descs = k.tx_invalid_descs;
    s->rx_ring_full = k.rx_ring_full;
    s->rx_fill_ring_empty_descs = k.rx_fill_ring_empty_descs;
    s->tx_ring_empty_descs = k.tx_ring_empty_descs;
    return 0;
}

#else
/* Built without -DSP_WITH_XDP (no libxdp): the backend is left out. */
typedef int sp_xdp_socket_not_built;
#endif
