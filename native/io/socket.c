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

struct sock_io {
    struct sp_io io;
    int fd;
    unsigned batch;
    uint16_t tx_max;
    struct mmsghdr rx[SP_IO_BATCH_MAX];
    struct mmsghdr tx[SP_IO_BATCH_MAX];
    struct iovec rx_iov[SP_IO_BATCH_MAX];
    struct iovec tx_iov[SP_IO_BATCH_MAX];
    struct sockaddr_storage peer[SP_IO_BATCH_MAX];
    socklen_t peer_len[SP_IO_BATCH_MAX];
    uint8_t *rx_buf;   /* batch * SP_SOCK_RX_MAX */
    uint8_t *tx_buf;   /* batch * tx_max */
};

static unsigned sock_rx_burst(struct sp_io *io, struct sp_frame *rx, unsigned max)
{
    struct sock_io *s = (struct sock_io *)io;
    if (max > s->batch)
        max = s->batch;
    for (unsigned i = 0; i < max; i++) {
        s->rx[i].msg_hdr.msg_namelen = sizeof(s->peer[i]);
        s->rx[i].msg_hdr.msg_flags = 0;
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
    if (!s->rx_buf || !s->tx_buf) {
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
        s->tx_iov[i].iov_base = s->tx_buf + (size_t)i * s->tx_max;
        s->tx[i].msg_hdr.msg_iov = &s->tx_iov[i];
        s->tx[i].msg_hdr.msg_iovlen = 1;
    }
    return &s->io;
}
