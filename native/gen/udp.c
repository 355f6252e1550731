/* DNS queries and echo datagrams over connected UDP sockets: one sendmmsg and one
 * recvmmsg per batch, requests in flight in one window per socket (window.h). */
#define _GNU_SOURCE
#include "window.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "stormpy/engine/clock.h"

#define RX_BUF 4096u             /* a DNS answer over UDP is at most 4096 bytes here */

struct udp {
    struct gen_window *windows;  /* one per socket */
    uint32_t next_sock;
    struct mmsghdr *tx, *rx;
    struct iovec *tx_iov, *rx_iov;
    uint8_t **tx_bufs;
    uint32_t *tx_lens;
    uint8_t *tx_buf, *rx_buf;
};

static void udp_free(struct sp_gen *g)
{
    struct udp *u = g->state;
    gen_windows_free(u->windows, g->cfg.nfds);
    free(u->tx);
    free(u->rx);
    free(u->tx_iov);
    free(u->rx_iov);
    free(u->tx_bufs);
    free(u->tx_lens);
    free(u->tx_buf);
    free(u->rx_buf);
    free(u);
    g->state = NULL;
}

static bool udp_init(struct sp_gen *g)
{
    uint32_t n = g->cfg.batch;
    struct udp *u = g->state = calloc(1, sizeof(*u));
    if (!u)
        return false;
    u->tx = calloc(n, sizeof(*u->tx));
    u->rx = calloc(n, sizeof(*u->rx));
    u->tx_iov = calloc(n, sizeof(*u->tx_iov));
    u->rx_iov = calloc(n, sizeof(*u->rx_iov));
    u->tx_bufs = calloc(n, sizeof(*u->tx_bufs));
    u->tx_lens = calloc(n, sizeof(*u->tx_lens));
    u->tx_buf = malloc((size_t)n * SP_GEN_MAX_REQUEST);
    u->rx_buf = malloc((size_t)n * RX_BUF);
    if (!gen_windows_new(&u->windows, g->cfg.nfds) || !u->tx || !u->rx || !u->tx_iov ||
        !u->rx_iov || !u->tx_bufs || !u->tx_lens || !u->tx_buf || !u->rx_buf)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        u->tx_bufs[i] = u->tx_buf + (size_t)i * SP_GEN_MAX_REQUEST;
        u->tx_iov[i].iov_base = u->tx_bufs[i];
        u->tx[i].msg_hdr.msg_iov = &u->tx_iov[i];
        u->tx[i].msg_hdr.msg_iovlen = 1;
        u->rx_iov[i] = (struct iovec){ u->rx_buf + (size_t)i * RX_BUF, RX_BUF };
        u->rx[i].msg_hdr.msg_iov = &u->rx_iov[i];
        u->rx[i].msg_hdr.msg_iovlen = 1;
    }
    return true;
}

static uint32_t udp_send(struct sp_gen *g, struct sp_gen_counters *c, uint32_t n, uint64_t now)
{
    struct udp *u = g->state;
    uint32_t fi;
    struct gen_window *w = gen_window_pick(u->windows, g->cfg.nfds, &u->next_sock, &fi);
    if (!w) {
        gen_add(&c->window_full, 1);
        return 0;
    }
    n = gen_window_fill(g, w, n, u->tx_bufs, u->tx_lens);
    for (uint32_t i = 0; i < n; i++)
        u->tx_iov[i].iov_len = u->tx_lens[i];
    int sent = sendmmsg(g->cfg.fds[fi], u->tx, n, MSG_DONTWAIT);
    if (sent < 0) {
        /* what was not sent goes next round (the requests in turn skip a few). A short
         * count is no error: the message after the last sent one fails next time. */
        if (errno == ECONNREFUSED)          /* an earlier datagram's ICMP, reported now */
            gen_add(&c->refused, 1);
        else if (errno == EAGAIN || errno == ENOBUFS)
            gen_add(&c->would_block, 1);
        else
            gen_add(&c->send_errors, 1);
        return 0;
    }
    gen_window_sent(g, c, w, (uint32_t)sent, now);
    return (uint32_t)sent;
}

static void udp_ready(struct sp_gen *g, struct sp_gen_counters *c, uint32_t i, short revents)
{
    (void)revents;
    struct udp *u = g->state;
    int n = recvmmsg(g->cfg.fds[i], u->rx, g->cfg.batch, MSG_DONTWAIT, NULL);
    uint64_t now = sp_now_ns();
    if (n < 0) {
        if (errno == ECONNREFUSED)
            gen_add(&c->refused, 1);
        return;
    }
    for (int k = 0; k < n; k++)
        gen_window_reply(g, c, &u->windows[i], u->rx_iov[k].iov_base, u->rx[k].msg_len, now);
}

static void udp_expire(struct sp_gen *g, struct sp_gen_counters *c, uint64_t now, bool all)
{
    gen_windows_expire(g, c, ((struct udp *)g->state)->windows, g->cfg.nfds, now, all);
}

const struct gen_kind sp_gen_udp_kind = { udp_init, udp_send, udp_ready, udp_expire, udp_free,
                                          gen_poll };
