/* The socket backend: recvmmsg/sendmmsg behind the I/O interface. See stormpy/io/socket.h. */
#define _GNU_SOURCE
#include "stormpy/io/socket.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Where a query to a wildcard socket was sent, from its IP_PKTINFO or IPV6_PKTINFO
 * control message; family 0 when the message carried none. */
struct sock_dst {
    uint8_t family;        /* 0, 4 or 6 */
    union {
        struct in_pktinfo v4;
        struct in6_pktinfo v6;
    } info;
};

/* One message's control data: room for one pktinfo, aligned for cmsghdr. */
union sock_ctl {
    struct cmsghdr align;
    uint8_t buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
};

struct sock_io {
    struct sp_io io;
    int fd;
    unsigned batch;
    uint16_t tx_max;
    uint8_t pktinfo;       /* 4 or 6: a wildcard socket with pktinfo on; 0: bound to one address */
    union sock_ctl *rx_ctl, *tx_ctl;   /* batch each, only with pktinfo */
    struct sock_dst *dst;              /* batch, only with pktinfo */
    struct mmsghdr rx[SP_IO_BATCH_MAX];
    struct mmsghdr tx[SP_IO_BATCH_MAX];
    struct iovec rx_iov[SP_IO_BATCH_MAX];
    struct iovec tx_iov[SP_IO_BATCH_MAX];
    struct sockaddr_storage peer[SP_IO_BATCH_MAX];
    socklen_t peer_len[SP_IO_BATCH_MAX];
    uint8_t *rx_buf;   /* batch * SP_SOCK_RX_MAX */
    uint8_t *tx_buf;   /* batch * tx_max */
};

/* The destination in m's control data, bounds-checked against what the kernel wrote
 * (CMSG_FIRSTHDR alone does not check the first header's length). */
static void sock_read_dst(const struct msghdr *m, uint8_t family, struct sock_dst *dst)
{
    const uint8_t *end = (const uint8_t *)m->msg_control + m->msg_controllen;
    dst->family = 0;
    if (!m->msg_control || m->msg_controllen > sizeof(union sock_ctl))
        return;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
        if (c->cmsg_len < CMSG_LEN(0) || c->cmsg_len > (size_t)(end - (const uint8_t *)c))
            return;
        if (family == 4 && c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo))) {
            memcpy(&dst->info.v4, CMSG_DATA(c), sizeof(dst->info.v4));
            dst->family = 4;
            return;
        }
        if (family == 6 && c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct in6_pktinfo))) {
            memcpy(&dst->info.v6, CMSG_DATA(c), sizeof(dst->info.v6));
            dst->family = 6;
            return;
        }
    }
}

/* The reply's source: the address the query was sent to. The interface index is left
 * to routing (as Knot does), except for an IPv6 link-local address, which needs it. */
static void sock_set_source(struct msghdr *m, union sock_ctl *ctl, const struct sock_dst *dst)
{
    if (!dst->family) {
        m->msg_control = NULL;
        m->msg_controllen = 0;
        return;
    }
    memset(ctl, 0, sizeof(*ctl));
    m->msg_control = ctl->buf;
    struct cmsghdr *c = (struct cmsghdr *)ctl->buf;
    if (dst->family == 4) {
        struct in_pktinfo info = {.ipi_spec_dst = dst->info.v4.ipi_addr};
        m->msg_controllen = CMSG_SPACE(sizeof(info));
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(info));
        memcpy(CMSG_DATA(c), &info, sizeof(info));
    } else {
        struct in6_pktinfo info = {.ipi6_addr = dst->info.v6.ipi6_addr};
        if (IN6_IS_ADDR_LINKLOCAL(&info.ipi6_addr))
            info.ipi6_ifindex = dst->info.v6.ipi6_ifindex;
        m->msg_controllen = CMSG_SPACE(sizeof(info));
        c->cmsg_level = IPPROTO_IPV6;
        c->cmsg_type = IPV6_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(info));
        memcpy(CMSG_DATA(c), &info, sizeof(info));
    }
}

static unsigned sock_rx_burst(struct sp_io *io, struct sp_frame *rx, unsigned max)
{
    struct sock_io *s = (struct sock_io *)io;
    if (max > s->batch)
        max = s->batch;
    for (unsigned i = 0; i < max; i++) {
        s->rx[i].msg_hdr.msg_namelen = sizeof(s->peer[i]);
        s->rx[i].msg_hdr.msg_flags = 0;
        if (s->pktinfo)
            s->rx[i].msg_hdr.msg_controllen = sizeof(union sock_ctl);
    }
    int n = recvmmsg(s->fd, s->rx, max, io->rx_nowait ? MSG_DONTWAIT : MSG_WAITFORONE, NULL);
    if (n <= 0) {
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            io->error = errno;
            io->finished = 1;
        }
        return 0;
    }
    unsigned kept = 0;
    for (unsigned i = 0; i < (unsigned)n; i++) {
        if (s->rx[i].msg_hdr.msg_flags & MSG_TRUNC) {
            io->counters.rx_truncated++;
            continue;
        }
        s->peer_len[i] = s->rx[i].msg_hdr.msg_namelen;
        rx[kept].data = s->rx_iov[i].iov_base;
        rx[kept].len = s->rx[i].msg_len;
        rx[kept].cap = SP_SOCK_RX_MAX;
        rx[kept].id = i;
        rx[kept].l4_verified = 1;     /* the kernel's UDP checked it */
        rx[kept].dst = NULL;
        if (s->pktinfo) {
            sock_read_dst(&s->rx[i].msg_hdr, s->pktinfo, &s->dst[i]);
            if (s->dst[i].family == 4)
                rx[kept].dst = (const uint8_t *)&s->dst[i].info.v4.ipi_addr;
            else if (s->dst[i].family == 6)
                rx[kept].dst = (const uint8_t *)&s->dst[i].info.v6.ipi6_addr;
        }
        if (s->peer[i].ss_family == AF_INET6) {
            rx[kept].src = (const uint8_t *)&((struct sockaddr_in6 *)&s->peer[i])->sin6_addr;
            rx[kept].src_family = 6;
            rx[kept].src_port = ntohs(((struct sockaddr_in6 *)&s->peer[i])->sin6_port);
        } else {
            rx[kept].src = (const uint8_t *)&((struct sockaddr_in *)&s->peer[i])->sin_addr;
            rx[kept].src_family = 4;
            rx[kept].src_port = ntohs(((struct sockaddr_in *)&s->peer[i])->sin_port);
        }
        kept++;
    }
    io->counters.rx_frames += (unsigned)n;
    return kept;
}

static void sock_reclaim(struct sp_io *io)
{
    (void)io;
}

static unsigned sock_tx_reserve(struct sp_io *io, struct sp_frame *tx, unsigned n)
{
    struct sock_io *s = (struct sock_io *)io;
    return sp_io_lend_buffers(tx, n < s->batch ? n : s->batch, s->tx_buf, s->tx_max);
}

/* Sends at once: a socket has no ring to wait in. A datagram the kernel refuses
 * is counted and skipped so one bad peer cannot stall the others. */
static void sock_tx_submit(struct sp_io *io, struct sp_frame *tx, unsigned used,
                           struct sp_frame *unused, unsigned nunused)
{
    struct sock_io *s = (struct sock_io *)io;
    (void)unused, (void)nunused;
    for (unsigned j = 0; j < used; j++) {
        uint64_t peer = tx[j].id < s->batch ? tx[j].id : 0;
        s->tx_iov[j].iov_len = tx[j].len;
        s->tx[j].msg_hdr.msg_name = &s->peer[peer];
        s->tx[j].msg_hdr.msg_namelen = s->peer_len[peer];
        if (s->pktinfo)
            sock_set_source(&s->tx[j].msg_hdr, &s->tx_ctl[j], &s->dst[peer]);
    }
    unsigned done = 0;
    while (done < used) {
        int sent = sendmmsg(s->fd, s->tx + done, used - done, 0);
        if (sent > 0) {
            for (unsigned j = done; j < done + (unsigned)sent; j++)
                io->counters.tx_bytes += tx[j].len;
            done += (unsigned)sent;
            io->counters.tx_frames += (unsigned)sent;
        } else if (sent < 0 && errno == EINTR) {
            continue;
        } else {
            io->counters.tx_errors++;
            done++;
        }
    }
}

static void sock_rx_release(struct sp_io *io, struct sp_frame *rx, unsigned n)
{
    (void)io, (void)rx, (void)n;
}

static void sock_kick(struct sp_io *io)
{
    (void)io;   /* submit already sent everything */
}

static void sock_close(struct sp_io *io)
{
    struct sock_io *s = (struct sock_io *)io;
    if (s->fd >= 0)
        close(s->fd);
    free(s->rx_buf);
    free(s->tx_buf);
    free(s->rx_ctl);
    free(s->tx_ctl);
    free(s->dst);
    free(s);
}

static const struct sp_io_ops sock_ops = {
    .name = "socket",
    .rx_burst = sock_rx_burst,
    .reclaim = sock_reclaim,
    .tx_reserve = sock_tx_reserve,
    .tx_submit = sock_tx_submit,
    .rx_release = sock_rx_release,
    .kick = sock_kick,
    .close = sock_close,
};

/* 4 or 6 when fd has IP_PKTINFO or IPV6_RECVPKTINFO on (the control plane sets it on
 * wildcard sockets, before bind), else 0. */
static uint8_t sock_pktinfo_family(int fd)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof(a);
    int on = 0;
    socklen_t on_len = sizeof(on);
    if (getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return 0;
    if (a.ss_family == AF_INET)
        return getsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, &on_len) == 0 && on ? 4 : 0;
    if (a.ss_family == AF_INET6)
        return getsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, &on_len) == 0 && on ? 6 : 0;
    return 0;
}

struct sp_io *sp_sock_io_open(int fd, unsigned batch, uint16_t tx_max)
{
    struct sock_io *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->io.ops = &sock_ops;
    s->io.datagrams = 1;
    s->fd = fd;
    s->batch = batch < 1 ? 1 : batch > SP_IO_BATCH_MAX ? SP_IO_BATCH_MAX : batch;
    s->tx_max = tx_max < 512 ? 512 : tx_max;
    s->rx_buf = malloc((size_t)s->batch * SP_SOCK_RX_MAX);
    s->tx_buf = malloc((size_t)s->batch * s->tx_max);
    s->pktinfo = sock_pktinfo_family(fd);
    if (s->pktinfo) {
        s->rx_ctl = calloc(s->batch, sizeof(*s->rx_ctl));
        s->tx_ctl = calloc(s->batch, sizeof(*s->tx_ctl));
        s->dst = calloc(s->batch, sizeof(*s->dst));
    }
    if (!s->rx_buf || !s->tx_buf || (s->pktinfo && (!s->rx_ctl || !s->tx_ctl || !s->dst))) {
        s->fd = -1;          /* the caller still owns fd when open fails */
        sock_close(&s->io);
        return NULL;
    }
    for (unsigned i = 0; i < s->batch; i++) {
        s->rx_iov[i].iov_base = s->rx_buf + (size_t)i * SP_SOCK_RX_MAX;
        s->rx_iov[i].iov_len = SP_SOCK_RX_MAX;
        s->rx[i].msg_hdr.msg_iov = &s->rx_iov[i];
        s->rx[i].msg_hdr.msg_iovlen = 1;
        s->rx[i].msg_hdr.msg_name = &s->peer[i];
        if (s->pktinfo)
            s->rx[i].msg_hdr.msg_control = s->rx_ctl[i].buf;
        s->tx_iov[i].iov_base = s->tx_buf + (size_t)i * s->tx_max;
        s->tx[i].msg_hdr.msg_iov = &s->tx_iov[i];
        s->tx[i].msg_hdr.msg_iovlen = 1;
    }
    return &s->io;
}
