/* HTTP/1.1 GETs over kept-alive TCP connections the caller opened. Each connection
 * keeps the timestamps of its requests in flight in order (up to cfg.pipeline of
 * them): a response answers the oldest. Responses are read by their heads' status
 * and Content-Length; their bodies are counted and thrown away. */
#include "loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stormpy/engine/clock.h"

#define PIPELINE_MAX 64u
#define IN_BUF 65536u            /* a response head must fit */

struct conn {
    bool dead;
    bool in_body;                /* reading a response's body, not a head */
    unsigned status;             /* of the response being read */
    uint32_t nq, first;          /* requests in flight; the oldest one's place in times */
    uint64_t times[PIPELINE_MAX];
    uint64_t body_left;
    uint32_t in_len, out_len, out_off;
    uint8_t *in, *out;
};

struct http {
    struct conn *conns;
    uint32_t next_conn;
    uint32_t out_cap;
};

static void http_free(struct sp_gen *g)
{
    struct http *h = g->state;
    if (h->conns)
        for (uint32_t i = 0; i < g->cfg.nfds; i++) {
            free(h->conns[i].in);
            free(h->conns[i].out);
        }
    free(h->conns);
    free(h);
    g->state = NULL;
}

static bool http_init(struct sp_gen *g)
{
    if (!g->cfg.pipeline || g->cfg.pipeline > PIPELINE_MAX)
        return false;
    struct http *h = g->state = calloc(1, sizeof(*h));
    if (!h || !(h->conns = calloc(g->cfg.nfds, sizeof(*h->conns))))
        return false;
    h->out_cap = g->cfg.pipeline * SP_GEN_MAX_REQUEST;
    for (uint32_t i = 0; i < g->cfg.nfds; i++)
        if (!(h->conns[i].in = malloc(IN_BUF)) || !(h->conns[i].out = malloc(h->out_cap)))
            return false;
    return true;
}

/* A connection that cannot go on: what it had in flight is lost. The caller closes
 * the socket; poll() skips it from now on. */
static void drop(struct sp_gen *g, struct sp_gen_counters *c, uint32_t i)
{
    struct conn *k = &((struct http *)g->state)->conns[i];
    if (k->dead)
        return;
    k->dead = true;
    shutdown(g->cfg.fds[i], SHUT_RDWR);
    g->pfds[i].fd = -1;
    g->alive--;
    g->inflight -= k->nq;
    gen_add(&c->lost, k->nq);
    gen_add(&c->closed, 1);
    k->nq = 0;
}

/* Writes what the connection has queued; POLLOUT asked for while some is left. */
static void flush(struct sp_gen *g, struct sp_gen_counters *c, uint32_t i)
{
    struct conn *k = &((struct http *)g->state)->conns[i];
    while (k->out_off < k->out_len) {
        ssize_t n = send(g->cfg.fds[i], k->out + k->out_off, k->out_len - k->out_off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN) {
                gen_add(&c->would_block, 1);
                break;
            }
            gen_add(&c->send_errors, 1);
            drop(g, c, i);
            return;
        }
        k->out_off += (uint32_t)n;
    }
    /* what is left moves to the front: the buffer holds requests in flight only */
    memmove(k->out, k->out + k->out_off, k->out_len - k->out_off);
    k->out_len -= k->out_off;
    k->out_off = 0;
    g->pfds[i].events = k->out_len ? POLLIN | POLLOUT : POLLIN;
}

static uint32_t http_send(struct sp_gen *g, struct sp_gen_counters *c, uint32_t n, uint64_t now)
{
    struct http *h = g->state;
    uint32_t queued = 0, nfds = g->cfg.nfds;
    for (uint32_t tries = 0; queued < n && tries < nfds; tries++) {
        uint32_t i = h->next_conn;
        h->next_conn = i + 1 == nfds ? 0 : i + 1;
        struct conn *k = &h->conns[i];
        if (k->dead || k->nq >= g->cfg.pipeline)
            continue;
        /* a connection takes one request a round, so they share the load evenly */
        uint32_t len;
        const uint8_t *req = gen_next_request(g, &len);
        memcpy(k->out + k->out_len, req, len);
        k->out_len += len;
        k->times[(k->first + k->nq++) % PIPELINE_MAX] = gen_stamp(g, c, now);
        queued++;
        tries = 0;
    }
    for (uint32_t i = 0; i < nfds; i++)      /* one send() a connection for the round */
        if (!h->conns[i].dead && h->conns[i].out_len && !(g->pfds[i].events & POLLOUT))
            flush(g, c, i);
    return queued;
}

/* The length of a head ending in a blank line, or 0 while it is incomplete. */
static uint32_t head_length(const uint8_t *p, uint32_t len)
{
    for (uint32_t i = 3; i < len; i++)
        if (p[i] == '\n' && p[i - 1] == '\r' && p[i - 2] == '\n' && p[i - 3] == '\r')
            return i + 1;
    return 0;
}

/* A head's status and Content-Length; false for a head this reader cannot follow
 * (not HTTP/1.x, chunked or close-delimited bodies). */
static bool parse_head(const uint8_t *p, uint32_t len, unsigned *status, uint64_t *body)
{
    if (len < 12 || memcmp(p, "HTTP/1.", 7) || p[8] != ' ')
        return false;
    *status = 0;
    for (int d = 9; d < 12; d++) {
        if (p[d] < '0' || p[d] > '9')
            return false;
        *status = *status * 10 + (p[d] - '0');
    }
    bool sized = *status == 204 || *status == 304 || *status < 200;
    *body = 0;
    static const char name[] = "\r\ncontent-length:";
    for (uint32_t i = 0; i + sizeof(name) - 1 < len; i++) {
        if (p[i] != '\r' || strncasecmp((const char *)p + i, name, sizeof(name) - 1))
            continue;
        uint32_t j = i + sizeof(name) - 1;
        while (j < len && p[j] == ' ')
            j++;
        for (*body = 0; j < len && p[j] >= '0' && p[j] <= '9'; j++)
            *body = *body * 10 + (uint64_t)(p[j] - '0');
        sized = true;
    }
    return sized;
}

/* A whole response: it answers the connection's oldest request. */
static void answered(struct sp_gen *g, struct sp_gen_counters *c, struct conn *k, uint64_t now)
{
    if (!k->nq) {
        gen_add(&c->unmatched, 1);
        return;
    }
    gen_answered(g, c, k->times[k->first], now, k->status / 100);
    k->first = (k->first + 1) % PIPELINE_MAX;
    k->nq--;
}

static void http_ready(struct sp_gen *g, struct sp_gen_counters *c, uint32_t i, short revents)
{
    struct conn *k = &((struct http *)g->state)->conns[i];
    if (revents & POLLOUT)
        flush(g, c, i);
    if (k->dead || !(revents & (POLLIN | POLLHUP | POLLERR)))
        return;
    ssize_t got = recv(g->cfg.fds[i], k->in + k->in_len, IN_BUF - k->in_len, MSG_DONTWAIT);
    if (got < 0 && errno == EAGAIN)
        return;
    if (got <= 0) {                                   /* closed, or reset */
        drop(g, c, i);
        return;
    }
    uint64_t now = sp_now_ns();
    k->in_len += (uint32_t)got;
    uint32_t pos = 0;
    for (;;) {
        if (k->in_body) {
            uint64_t take = k->in_len - pos < k->body_left ? k->in_len - pos : k->body_left;
            pos += (uint32_t)take;
            if ((k->body_left -= take))
                break;
            k->in_body = false;
            answered(g, c, k, now);
            continue;
        }
        uint32_t head = head_length(k->in + pos, k->in_len - pos);
        if (!head) {
            if (pos == 0 && k->in_len == IN_BUF)
                goto bad;                             /* a head longer than the buffer */
            break;
        }
        if (!parse_head(k->in + pos, head, &k->status, &k->body_left))
            goto bad;
        pos += head;
        k->in_body = true;                            /* perhaps of 0 bytes */
    }
    memmove(k->in, k->in + pos, k->in_len - pos);
    k->in_len -= pos;
    return;
bad:
    gen_add(&c->bad_replies, 1);
    drop(g, c, i);
}

static void http_expire(struct sp_gen *g, struct sp_gen_counters *c, uint64_t now, bool all)
{
    struct http *h = g->state;
    for (uint32_t i = 0; i < g->cfg.nfds; i++) {
        struct conn *k = &h->conns[i];
        if (!k->nq)
            continue;
        if (all) {                   /* the end: what is in flight is lost */
            g->inflight -= k->nq;
            gen_add(&c->lost, k->nq);
            k->nq = 0;
        } else if (k->times[k->first] + g->cfg.timeout_ns <= now) {
            drop(g, c, i);           /* a late response would answer the wrong request */
        }
    }
}

const struct gen_kind sp_gen_http_kind = { http_init, http_send, http_ready, http_expire,
                                           http_free, gen_poll };
