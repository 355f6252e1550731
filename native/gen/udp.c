/* DNS queries and echo datagrams over connected UDP sockets: one sendmmsg and one
 * recvmmsg per batch. Each socket keeps its requests in flight in a window indexed
 * by sequence number, so a reply is matched with one array access: by its DNS ID
 * (the sequence's low 16 bits) or by the echo's sequence number. */
#define _GNU_SOURCE
#include "loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "stormpy/engine/clock.h"

#define WINDOW 65536u            /* DNS IDs; an echo window of the same size */
#define RX_BUF 4096u             /* a DNS answer over UDP is at most 4096 bytes here */

enum { FREE, LIVE, LOST };

struct flight {
    uint64_t sent_ns;            /* the request's timestamp (gen_stamp) */
    uint64_t seq;
    uint8_t state;
};

struct usock {
    uint64_t head, tail;         /* sequence numbers: next to send, oldest not settled */
    struct flight *window;
};

struct udp {
    struct usock *socks;
    uint32_t next_sock;
    struct mmsghdr *tx, *rx;
    struct iovec *tx_iov, *rx_iov;
    uint8_t *tx_buf, *rx_buf;
};

static void udp_free(struct sp_gen *g)
{
    struct udp *u = g->state;
    if (u->socks)
        for (uint32_t i = 0; i < g->cfg.nfds; i++)
            free(u->socks[i].window);
    free(u->socks);
    free(u->tx);
    free(u->rx);
    free(u->tx_iov);
    free(u->rx_iov);
    free(u->tx_buf);
    free(u->rx_buf);
    free(u);
    g->state = NULL;
}

static bool udp_init(struct sp_gen *g)
{
    uint32_t n = g->cfg.batch, nfds = g->cfg.nfds;
    struct udp *u = g->state = calloc(1, sizeof(*u));
    if (!u)
        return false;
    u->socks = calloc(nfds, sizeof(*u->socks));
    u->tx = calloc(n, sizeof(*u->tx));
    u->rx = calloc(n, sizeof(*u->rx));
    u->tx_iov = calloc(n, sizeof(*u->tx_iov));
    u->rx_iov = calloc(n, sizeof(*u->rx_iov));
    u->tx_buf = malloc((size_t)n * SP_GEN_MAX_REQUEST);
    u->rx_buf = malloc((size_t)n * RX_BUF);
    if (!u->socks || !u->tx || !u->rx || !u->tx_iov || !u->rx_iov || !u->tx_buf || !u->rx_buf)
        return false;
    for (uint32_t i = 0; i < nfds; i++)   /* calloc'd pages are touched only when used */
        if (!(u->socks[i].window = calloc(WINDOW, sizeof(struct flight))))
            return false;
    for (uint32_t i = 0; i < n; i++) {
        u->tx_iov[i].iov_base = u->tx_buf + (size_t)i * SP_GEN_MAX_REQUEST;
        u->tx[i].msg_hdr.msg_iov = &u->tx_iov[i];
        u->tx[i].msg_hdr.msg_iovlen = 1;
        u->rx_iov[i] = (struct iovec){ u->rx_buf + (size_t)i * RX_BUF, RX_BUF };
        u->rx[i].msg_hdr.msg_iov = &u->rx_iov[i];
        u->rx[i].msg_hdr.msg_iovlen = 1;
    }
    return true;
}

/* The next socket in turn with room in its window, or NULL. */
static struct usock *pick(struct sp_gen *g, uint32_t *fd_index)
{
    struct udp *u = g->state;
    for (uint32_t tries = 0; tries < g->cfg.nfds; tries++) {
        uint32_t i = u->next_sock;
        u->next_sock = i + 1 == g->cfg.nfds ? 0 : i + 1;
        struct usock *s = &u->socks[i];
        if (s->head - s->tail < WINDOW) {
            *fd_index = i;
            return s;
        }
    }
    return NULL;
}

/* Writes the request's sequence number where its reply will carry it back. */
static void number(int kind, uint8_t *req, uint64_t seq)
{
    if (kind == SP_GEN_DNS) {
        req[0] = (uint8_t)(seq >> 8);
        req[1] = (uint8_t)seq;
    } else {
        memcpy(req, &seq, sizeof(seq));
    }
}

static uint32_t udp_send(struct sp_gen *g, struct sp_gen_counters *c, uint32_t n, uint64_t now)
{
    struct udp *u = g->state;
    uint32_t fi;
    struct usock *s = pick(g, &fi);
    if (!s) {
        gen_add(&c->window_full, 1);
        return 0;
    }
    if (n > WINDOW - (s->head - s->tail))
        n = (uint32_t)(WINDOW - (s->head - s->tail));
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len;
        const uint8_t *req = gen_next_request(g, &len);
        memcpy(u->tx_iov[i].iov_base, req, len);
        u->tx_iov[i].iov_len = len;
        number(g->cfg.kind, u->tx_iov[i].iov_base, s->head + i);
    }
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
    for (int i = 0; i < sent; i++, s->head++) {
        struct flight *f = &s->window[s->head % WINDOW];
        *f = (struct flight){ .sent_ns = gen_stamp(g, c, now), .seq = s->head, .state = LIVE };
    }
    return (uint32_t)sent;
}

/* One reply: the request it answers, by DNS ID or echo sequence number. */
static void match(struct sp_gen *g, struct sp_gen_counters *c, struct usock *s,
                  const uint8_t *reply, uint32_t len, uint64_t now)
{
    uint64_t seq;
    unsigned code = 0;
    if (g->cfg.kind == SP_GEN_DNS) {
        if (len < 12 || !(reply[2] & 0x80)) {        /* a header with QR set */
            gen_add(&c->bad_replies, 1);
            return;
        }
        seq = (uint64_t)reply[0] << 8 | reply[1];
        code = reply[3] & 0x0f;
    } else {
        if (len < sizeof(seq)) {
            gen_add(&c->bad_replies, 1);
            return;
        }
        memcpy(&seq, reply, sizeof(seq));
    }
    struct flight *f = &s->window[seq % WINDOW];
    bool same = g->cfg.kind == SP_GEN_DNS ? f->seq % WINDOW == seq : f->seq == seq;
    if (same && f->state == LIVE) {
        f->state = FREE;
        gen_answered(g, c, f->sent_ns, now, code);
    } else if (same && f->state == LOST) {
        f->state = FREE;
        gen_add(&c->late, 1);
    } else {
        gen_add(&c->unmatched, 1);
    }
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
        match(g, c, &u->socks[i], u->rx_iov[k].iov_base, u->rx[k].msg_len, now);
}

static void udp_expire(struct sp_gen *g, struct sp_gen_counters *c, uint64_t now, bool all)
{
    struct udp *u = g->state;
    uint64_t timeout = g->cfg.timeout_ns;
    for (uint32_t i = 0; i < g->cfg.nfds; i++) {
        struct usock *s = &u->socks[i];
        for (; s->tail < s->head; s->tail++) {
            struct flight *f = &s->window[s->tail % WINDOW];
            if (f->state != LIVE)
                continue;
            if (!all && f->sent_ns + timeout > now)
                break;
            f->state = LOST;
            g->inflight--;
            gen_add(&c->lost, 1);
        }
    }
}

const struct gen_kind sp_gen_udp_kind = { udp_init, udp_send, udp_ready, udp_expire, udp_free };
