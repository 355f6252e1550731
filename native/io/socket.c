/* The socket backend: recvmmsg/sendmmsg worker loop. See socket_io.h. */
#define _GNU_SOURCE
#include "stormpy/socket_io.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sp_sock_worker {
    int fd;
    int index;
    int batch;
    int stop;   /* written by the control thread: __atomic access only */
    struct sp_table_ref *ref;
    struct sp_dns_config cfg;
    struct sp_worker_counters counters;
    struct sp_dns_query scratch;
    struct mmsghdr rx[SP_SOCK_BATCH_MAX];
    struct mmsghdr tx[SP_SOCK_BATCH_MAX];
    struct iovec rx_iov[SP_SOCK_BATCH_MAX];
    struct iovec tx_iov[SP_SOCK_BATCH_MAX];
    struct sockaddr_storage peer[SP_SOCK_BATCH_MAX];
    uint8_t *rx_buf;   /* batch * SP_SOCK_RX_MAX */
    uint8_t *tx_buf;   /* batch * cfg.max_udp */
};

struct sp_sock_worker *sp_sock_worker_new(int fd, int index, int batch, struct sp_table_ref *ref,
                                          const struct sp_dns_config *cfg)
{
    if (index < 0 || index >= SP_MAX_WORKERS)
        return NULL;
    struct sp_sock_worker *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->fd = fd;
    w->index = index;
    w->batch = batch < 1 ? 1 : batch > SP_SOCK_BATCH_MAX ? SP_SOCK_BATCH_MAX : batch;
    w->ref = ref;
    w->cfg = *cfg;
    w->rx_buf = malloc((size_t)w->batch * SP_SOCK_RX_MAX);
    w->tx_buf = malloc((size_t)w->batch * cfg->max_udp);
    if (!w->rx_buf || !w->tx_buf) {
        sp_sock_worker_free(w);
        return NULL;
    }
    for (int i = 0; i < w->batch; i++) {
        w->rx_iov[i].iov_base = w->rx_buf + (size_t)i * SP_SOCK_RX_MAX;
        w->rx_iov[i].iov_len = SP_SOCK_RX_MAX;
        w->rx[i].msg_hdr.msg_iov = &w->rx_iov[i];
        w->rx[i].msg_hdr.msg_iovlen = 1;
        w->rx[i].msg_hdr.msg_name = &w->peer[i];
        w->tx_iov[i].iov_base = w->tx_buf + (size_t)i * cfg->max_udp;
        w->tx[i].msg_hdr.msg_iovlen = 1;
    }
    return w;
}

void sp_sock_worker_free(struct sp_sock_worker *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    free(w->rx_buf);
    free(w->tx_buf);
    free(w);
}

void sp_sock_worker_stop(struct sp_sock_worker *w)
{
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
}

/* Sends what remains of the batch; a datagram the kernel refuses is counted and
 * skipped so one bad peer cannot stall the others. */
static void send_all(struct sp_sock_worker *w, unsigned n)
{
    unsigned done = 0;
    while (done < n) {
        int sent = sendmmsg(w->fd, w->tx + done, n - done, 0);
        if (sent > 0) {
            done += (unsigned)sent;
            w->counters.tx += (unsigned)sent;
        } else if (sent < 0 && errno == EINTR) {
            continue;
        } else {
            w->counters.tx_errors++;
            done++;
        }
    }
}

int sp_sock_worker_run(struct sp_sock_worker *w)
{
    struct sp_worker_counters *c = &w->counters;
    while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
        for (int i = 0; i < w->batch; i++) {
            w->rx[i].msg_hdr.msg_namelen = sizeof(w->peer[i]);
            w->rx[i].msg_hdr.msg_flags = 0;
        }
        int n = recvmmsg(w->fd, w->rx, (unsigned)w->batch, MSG_WAITFORONE, NULL);
        if (n <= 0) {
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return -errno;
            continue;
        }
        const struct sp_table *t = sp_table_ref_enter(w->ref, w->index);
        unsigned out = 0;
        for (int i = 0; i < n; i++) {
            struct msghdr *h = &w->rx[i].msg_hdr;
            if (h->msg_flags & MSG_TRUNC) {
                c->rx_truncated++;
                continue;
            }
            size_t len = sp_dns_answer(t, &w->cfg, h->msg_iov->iov_base, w->rx[i].msg_len, false,
                                       w->tx_iov[out].iov_base, w->cfg.max_udp, &w->scratch,
                                       &c->dns);
            if (!len)
                continue;
            w->tx_iov[out].iov_len = len;
            w->tx[out].msg_hdr.msg_iov = &w->tx_iov[out];
            w->tx[out].msg_hdr.msg_name = h->msg_name;
            w->tx[out].msg_hdr.msg_namelen = h->msg_namelen;
            out++;
        }
        sp_table_ref_leave(w->ref, w->index);
        c->rx += (unsigned)n;
        c->batches++;
        c->batch_hist[sp_hist_bucket((unsigned)n)]++;
        if (out)
            send_all(w, out);
    }
    return 0;
}

void sp_sock_worker_counters(const struct sp_sock_worker *w, struct sp_worker_counters *out)
{
    const uint64_t *src = (const uint64_t *)&w->counters;
    uint64_t *dst = (uint64_t *)out;
    for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}
