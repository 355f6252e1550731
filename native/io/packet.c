/* The AF_PACKET backend: TPACKET_V2 RX and TX rings with fanout. See stormpy/io/packet.h. */
#define _GNU_SOURCE
#include "stormpy/io/packet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gather.h"
#include "stormpy/app/dns/precopy.h"
#include "stormpy/engine/frame.h"

/* An RX slot holds the header, the sockaddr_ll, and the frame at tp_mac: a frame of
 * SP_FRAME_MAX bytes fits; a longer one arrives cut short and is skipped. */
#define RX_FRAME_SIZE (SP_FRAME_MAX + 256)
#define RX_BLOCK_SIZE (1u << 16)
#define RX_FRAMES (RX_BLOCK_SIZE / RX_FRAME_SIZE * 128)
#define TX_FRAME_SIZE (SP_FRAME_MAX + 64)
#define TX_FRAMES 1024
#define TX_BLOCK_SIZE (1u << 16)
/* TX data starts right after the aligned header (no PACKET_TX_HAS_OFF). */
#define HDR2_ALIGNED ((sizeof(struct tpacket2_hdr) + TPACKET_ALIGNMENT - 1) & ~(size_t)(TPACKET_ALIGNMENT - 1))
#define TX_DATA_OFFSET HDR2_ALIGNED

struct packet_io {
    struct sp_io io;
    int fd;
    int busy_poll;
    int promiscuous;
    int link_down;                   /* the socket said so once: look for the device again */
    unsigned ifindex;
    unsigned poll_ms;
    uint8_t *map;
    size_t map_len;
    uint8_t *rx_ring;
    uint8_t *tx_ring;
    unsigned rx_frames_per_block, tx_frames_per_block;
    /* RX: the next slot to read, and the slots read since the last release */
    unsigned rx_head;
    unsigned rx_taken;
    /* TX: the next frame to fill */
    unsigned tx_head;
    unsigned tx_frames;              /* the ring's real frame count (whole blocks) */
    unsigned tx_pending;
    uint64_t tx_rejected;            /* frames the kernel refused (WRONG_FORMAT) */
    /* precopy mode: no TX ring; copies and fallback buffers are private memory */
    struct sp_precopy *pool;
    uint8_t *pool_mem;
    uint8_t (*txbuf)[SP_FRAME_MAX];  /* [SP_IO_BATCH_MAX] */
    struct mmsghdr msgs[SP_IO_BATCH_MAX];
    struct iovec iov[SP_IO_BATCH_MAX];
    struct sp_gather_tx gather;      /* fd -1 when not opened */
};

static struct tpacket2_hdr *rx_frame(struct packet_io *p, unsigned i)
{
    unsigned block = i / p->rx_frames_per_block, slot = i % p->rx_frames_per_block;
    return (struct tpacket2_hdr *)(p->rx_ring + (size_t)block * RX_BLOCK_SIZE +
                                   (size_t)slot * RX_FRAME_SIZE);
}

static struct tpacket2_hdr *tx_frame(struct packet_io *p, unsigned i)
{
    unsigned block = i / p->tx_frames_per_block, slot = i % p->tx_frames_per_block;
    return (struct tpacket2_hdr *)(p->tx_ring + (size_t)block * TX_BLOCK_SIZE +
                                   (size_t)slot * (TX_FRAME_SIZE));
}

static int frame_ready(struct packet_io *p, unsigned i)
{
    return __atomic_load_n(&rx_frame(p, i)->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER;
}

/* The socket reported an error: the link went down, perhaps on its way out (a device
 * being deleted goes down first, and the socket says so only once). poll() would
 * report it again at once, so this is where a worker would spin. An interface that
 * is gone ends the backend (ENODEV); one that is down is waited for, and looked for
 * again at every empty poll until it is back. */
static void link_error(struct packet_io *p)
{
    int e = 0;
    socklen_t len = sizeof(e);
    getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &len);   /* reading it clears it */
    p->link_down = 1;
    struct timespec pause = {.tv_sec = p->poll_ms / 1000, .tv_nsec = (long)(p->poll_ms % 1000) * 1000000};
    nanosleep(&pause, NULL);
}

static void check_link(struct packet_io *p)
{
    char name[IF_NAMESIZE];
    if (!if_indextoname(p->ifindex, name)) {
        p->io.error = ENODEV;
        p->io.finished = 1;
    }
}

/* Why TPACKET_V2 and not V3's blocks: a V3 block reaches user space when it is full or
 * when its timer (1 ms at the least) retires it, so at light load every frame waited up
 * to a millisecond, which bounded a request-reply protocol (serve-http's TCP) at one
 * round per millisecond per connection. A V2 slot is ours as soon as it is written. */
static unsigned packet_rx_burst(struct sp_io *io, struct sp_frame *rx, unsigned max)
{
    struct packet_io *p = (struct packet_io *)io;
    unsigned i = (p->rx_head + p->rx_taken) % RX_FRAMES;
    if (!frame_ready(p, i)) {
        if (p->busy_poll || io->rx_nowait)
            return 0;
        struct pollfd pfd = {.fd = p->fd, .events = POLLIN | POLLERR};
        if (poll(&pfd, 1, (int)p->poll_ms) > 0 && (pfd.revents & (POLLERR | POLLNVAL)) &&
            !frame_ready(p, i)) {
            link_error(p);
            return 0;
        }
        if (!frame_ready(p, i)) {
            if (p->link_down)
                check_link(p);
            return 0;
        }
        p->link_down = 0;
    }
    unsigned n = 0;
    while (n < max && p->rx_taken < RX_FRAMES && frame_ready(p, i)) {
        struct tpacket2_hdr *h = rx_frame(p, i);
        const struct sockaddr_ll *ll = (const struct sockaddr_ll *)((uint8_t *)h + HDR2_ALIGNED);
        uint8_t *data = (uint8_t *)h + h->tp_mac;
        /* frames for other hosts (promiscuous devices, bridges, veth) are not ours,
         * unless every frame is (a forwarder); the kernel wrote the offsets, but
         * nothing may lead outside the slot, and a frame cut short is not answered */
        if ((p->promiscuous || ll->sll_pkttype != PACKET_OTHERHOST) &&
            ll->sll_pkttype != PACKET_OUTGOING && h->tp_snaplen == h->tp_len &&
            (size_t)h->tp_mac + h->tp_snaplen <= RX_FRAME_SIZE && h->tp_mac >= HDR2_ALIGNED) {
            rx[n].data = data;
            rx[n].len = h->tp_snaplen;
            rx[n].cap = h->tp_snaplen;
            rx[n].id = i;
            rx[n].l4_verified = (h->tp_status & (TP_STATUS_CSUM_VALID | TP_STATUS_CSUMNOTREADY)) != 0;
            n++;
        } else if (h->tp_snaplen != h->tp_len) {
            io->counters.rx_truncated++;
        }
        p->rx_taken++;
        i = (i + 1) % RX_FRAMES;
    }
    io->counters.rx_frames += n;
    return n;
}

/* Every slot read since the last release goes back, the skipped ones too. */
static void packet_rx_release(struct sp_io *io, struct sp_frame *rx, unsigned n)
{
    struct packet_io *p = (struct packet_io *)io;
    (void)rx, (void)n;
    for (unsigned k = 0; k < p->rx_taken; k++)
        __atomic_store_n(&rx_frame(p, (p->rx_head + k) % RX_FRAMES)->tp_status, TP_STATUS_KERNEL,
                         __ATOMIC_RELEASE);
    p->rx_head = (p->rx_head + p->rx_taken) % RX_FRAMES;
    p->rx_taken = 0;
}

static void packet_reclaim(struct sp_io *io)
{
    (void)io;   /* the kernel hands TX frames back by resetting their status */
}

static unsigned packet_tx_reserve(struct sp_io *io, struct sp_frame *tx, unsigned n)
{
    struct packet_io *p = (struct packet_io *)io;
    unsigned got = 0;
    while (got < n) {
        unsigned i = (p->tx_head + got) % p->tx_frames;
        struct tpacket2_hdr *h = tx_frame(p, i);
        uint32_t status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
        if (status == TP_STATUS_WRONG_FORMAT) {
            /* refused by the kernel (longer than the MTU): count it, reuse the frame */
            p->tx_rejected++;
            status = TP_STATUS_AVAILABLE;
        }
        if (status != TP_STATUS_AVAILABLE)
            break;
        tx[got].data = (uint8_t *)h + TX_DATA_OFFSET;
        tx[got].cap = (uint32_t)(TX_FRAME_SIZE - TX_DATA_OFFSET);
        tx[got].len = 0;
        tx[got].id = i;
        tx[got].pool = -1;
        got++;
    }
    return got;
}

static unsigned packet_tx_reserve_private(struct sp_io *io, struct sp_frame *tx, unsigned n)
{
    struct packet_io *p = (struct packet_io *)io;
    return sp_io_lend_buffers(tx, n, &p->txbuf[0][0], SP_FRAME_MAX);
}

static void packet_tx_submit(struct sp_io *io, struct sp_frame *tx, unsigned used,
                             struct sp_frame *unused, unsigned nunused)
{
    struct packet_io *p = (struct packet_io *)io;
    (void)unused, (void)nunused;   /* they stay available; the head only moves past used ones */
    for (unsigned i = 0; i < used; i++) {
        struct tpacket2_hdr *h = tx_frame(p, (unsigned)tx[i].id);
        h->tp_len = tx[i].len;
        h->tp_snaplen = tx[i].len;
        __atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
        io->counters.tx_frames++;
        io->counters.tx_bytes += tx[i].len;
    }
    p->tx_head = (p->tx_head + used) % p->tx_frames;
    p->tx_pending += used;
}

/* One sendmmsg() per batch: the kernel copies each frame into an skb before the call
 * returns, so every copy is idle again at once. A frame the kernel refuses (longer
 * than the MTU) is skipped; a full device queue loses the rest of the batch. */
static void packet_tx_submit_msgs(struct sp_io *io, struct sp_frame *tx, unsigned used,
                                  struct sp_frame *unused, unsigned nunused)
{
    struct packet_io *p = (struct packet_io *)io;
    (void)unused, (void)nunused;
    for (unsigned i = 0; i < used; i++) {
        p->iov[i].iov_base = tx[i].data;
        p->iov[i].iov_len = tx[i].len;
        memset(&p->msgs[i], 0, sizeof(p->msgs[i]));
        p->msgs[i].msg_hdr.msg_iov = &p->iov[i];
        p->msgs[i].msg_hdr.msg_iovlen = 1;
    }
    unsigned done = 0;
    while (done < used) {
        int r = sendmmsg(p->fd, p->msgs + done, used - done, MSG_DONTWAIT);
        if (r > 0) {
            for (unsigned i = done; i < done + (unsigned)r; i++) {
                io->counters.tx_frames++;
                io->counters.tx_bytes += tx[i].len;
            }
            done += (unsigned)r;
        } else if (r < 0 && (errno == EMSGSIZE || errno == EINVAL)) {
            p->tx_rejected++;
            done++;
        } else {
            io->counters.tx_ring_full += used - done;   /* EAGAIN, ENOBUFS: the queue is full */
            break;
        }
    }
    if (done)
        io->counters.kicks++;
    for (unsigned i = 0; i < used; i++)
        if (tx[i].pool >= 0)
            sp_precopy_complete(p->pool, (uint32_t)tx[i].pool);
}

static int packet_pool_open(struct sp_io *io, struct sp_precopy *pool, char *err, size_t errlen)
{
    struct packet_io *p = (struct packet_io *)io;
    unsigned n = sp_precopy_frames(pool);
    if (!p->txbuf || p->pool) {
        snprintf(err, errlen, "AF_PACKET: precopy needs a socket opened for it (no TX ring)");
        return -1;
    }
    p->pool_mem = sp_precopy_lend_heap(pool);
    if (!p->pool_mem) {
        snprintf(err, errlen, "AF_PACKET: no memory for %u pool frames", n);
        return -1;
    }
    p->pool = pool;
    return 0;
}

static void packet_kick(struct sp_io *io)
{
    struct packet_io *p = (struct packet_io *)io;
    if (!p->tx_pending)
        return;
    send(p->fd, NULL, 0, MSG_DONTWAIT);
    p->tx_pending = 0;
    io->counters.kicks++;
}

static void packet_tx_gather(struct sp_io *io, const struct sp_gather *g, unsigned n)
{
    struct packet_io *p = (struct packet_io *)io;
    sp_gather_tx_send(&p->gather, g, n, &io->counters);
}

static void packet_close(struct sp_io *io)
{
    struct packet_io *p = (struct packet_io *)io;
    sp_gather_tx_close(&p->gather);
    if (p->map && p->map != MAP_FAILED)
        munmap(p->map, p->map_len);
    if (p->fd >= 0)
        close(p->fd);
    free(p->pool_mem);
    free(p->txbuf);
    free(p);
}

static const struct sp_io_ops packet_ops = {
    .name = "packet",
    .rx_burst = packet_rx_burst,
    .reclaim = packet_reclaim,
    .tx_reserve = packet_tx_reserve,
    .tx_submit = packet_tx_submit,
    .rx_release = packet_rx_release,
    .kick = packet_kick,
    .close = packet_close,
    .tx_gather = packet_tx_gather,
};

static const struct sp_io_ops packet_precopy_ops = {
    .name = "packet",
    .rx_burst = packet_rx_burst,
    .reclaim = packet_reclaim,
    .tx_reserve = packet_tx_reserve_private,
    .tx_submit = packet_tx_submit_msgs,
    .rx_release = packet_rx_release,
    .kick = packet_kick,
    .close = packet_close,
    .pool_open = packet_pool_open,
    .tx_gather = packet_tx_gather,
};

static struct sp_io *fail(struct packet_io *p, char *err, size_t errlen, const char *what)
{
    int e = errno;
    const char *hint = (e == EPERM || e == EACCES) ? " (AF_PACKET needs CAP_NET_RAW: run as root)" : "";
    snprintf(err, errlen, "AF_PACKET: %s: %s%s", what, strerror(e), hint);
    packet_close(&p->io);
    return NULL;
}

struct sp_io *sp_packet_io_open(const struct sp_packet_config *cfg, char *err, size_t errlen)
{
    struct packet_io *p = calloc(1, sizeof(*p));
    if (!p) {
        snprintf(err, errlen, "AF_PACKET: out of memory");
        return NULL;
    }
    p->io.ops = cfg->precopy ? &packet_precopy_ops : &packet_ops;
    p->fd = -1;
    p->gather.fd = -1;
    if (cfg->precopy) {
        p->txbuf = calloc(SP_IO_BATCH_MAX, SP_FRAME_MAX);
        if (!p->txbuf) {
            snprintf(err, errlen, "AF_PACKET: out of memory");
            packet_close(&p->io);
            return NULL;
        }
    }
    p->busy_poll = cfg->busy_poll;
    p->poll_ms = cfg->poll_ms ? cfg->poll_ms : 100;
    p->promiscuous = cfg->promiscuous;
    unsigned ifindex = if_nametoindex(cfg->ifname);
    p->ifindex = ifindex;
    if (!ifindex) {
        snprintf(err, errlen, "AF_PACKET: no interface named %s", cfg->ifname);
        packet_close(&p->io);
        return NULL;
    }
    /* protocol 0: nothing arrives before bind() names the interface */
    p->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (p->fd < 0)
        return fail(p, err, errlen, "socket");
    int version = TPACKET_V2, one = 1;
    if (setsockopt(p->fd, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) < 0)
        return fail(p, err, errlen, "TPACKET_V2");
    p->rx_frames_per_block = RX_BLOCK_SIZE / RX_FRAME_SIZE;
    struct tpacket_req rx = {
        .tp_block_size = RX_BLOCK_SIZE, .tp_block_nr = RX_FRAMES / p->rx_frames_per_block,
        .tp_frame_size = RX_FRAME_SIZE, .tp_frame_nr = RX_FRAMES,
    };
    p->tx_frames_per_block = TX_BLOCK_SIZE / (TX_FRAME_SIZE);
    struct tpacket_req tx = {
        .tp_block_size = TX_BLOCK_SIZE,
        .tp_block_nr = (TX_FRAMES + p->tx_frames_per_block - 1) / p->tx_frames_per_block,
        .tp_frame_size = TX_FRAME_SIZE, .tp_frame_nr = TX_FRAMES,
    };
    tx.tp_frame_nr = tx.tp_block_nr * p->tx_frames_per_block;
    p->tx_frames = tx.tp_frame_nr;
    if (setsockopt(p->fd, SOL_PACKET, PACKET_RX_RING, &rx, sizeof(rx)) < 0)
        return fail(p, err, errlen, "RX ring");
    if (!cfg->precopy && setsockopt(p->fd, SOL_PACKET, PACKET_TX_RING, &tx, sizeof(tx)) < 0)
        return fail(p, err, errlen, "TX ring");
    /* our own replies must not come back as input */
    setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
    setsockopt(p->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
    size_t rx_len = (size_t)RX_BLOCK_SIZE * rx.tp_block_nr;
    p->map_len = rx_len + (cfg->precopy ? 0 : (size_t)TX_BLOCK_SIZE * tx.tp_block_nr);
    p->map = mmap(NULL, p->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
    if (p->map == MAP_FAILED)
        return fail(p, err, errlen, "mmap");
    p->rx_ring = p->map;
    p->tx_ring = cfg->precopy ? NULL : p->map + rx_len;
    struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
                             .sll_ifindex = (int)ifindex};
    if (bind(p->fd, (struct sockaddr *)&ll, sizeof(ll)) < 0)
        return fail(p, err, errlen, "bind");
    /* without it (a kernel older than PACKET_VNET_HDR) TCP goes a frame a segment */
    char ignored[128];
    if (!cfg->promiscuous && sp_gather_tx_open(&p->gather, ifindex, ignored, sizeof(ignored)))
        p->io.gather = 1;
    if (cfg->promiscuous) {
        struct packet_mreq mr = {.mr_ifindex = (int)ifindex, .mr_type = PACKET_MR_PROMISC};
        if (setsockopt(p->fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0)
            return fail(p, err, errlen, "promiscuous mode");
        return &p->io;
    }
    int fanout = cfg->fanout_group | (PACKET_FANOUT_HASH << 16);
    if (setsockopt(p->fd, SOL_PACKET, PACKET_FANOUT, &fanout, sizeof(fanout)) < 0)
        return fail(p, err, errlen, "PACKET_FANOUT");
    return &p->io;
}
