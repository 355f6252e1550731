/* DNS over the kernel's TCP. See stormpy/app/dns/stream.h. */
#define _GNU_SOURCE
#include "stormpy/app/dns/stream.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stormpy/app/dns/handoff.h"
#include "stormpy/engine/conn_pool.h"

#define IN_CAP (2 + SP_DNS_TCP_QUERY_MAX)
#define OUT_INLINE 512                   /* an unsent rest this short needs no allocation */
#define SCRATCH (2 * (2 + 65535))        /* a wake-up's answers to one connection */
#define ACCEPTS_PER_WAKE 256             /* a flood of connects must not fill the backlog */
#define EVENTS 64

enum timer_list { T_IDLE, T_IO, T_LISTS };

struct conn {
    struct sp_conn base;                 /* first: the pool's and the timers' */
    uint32_t source;                     /* its address's slot in the source table */
    bool peer_done;                      /* the client sent its FIN */
    bool took;                           /* a query was taken since the last settle() */
    uint16_t in_len;
    uint32_t out_len, out_sent;          /* an answer (or its rest) not yet sent */
    uint8_t *out;                        /* out_inline, or allocated for a long rest */
    uint8_t in[IN_CAP];
    uint8_t out_inline[OUT_INLINE];
};

/* Connections per source address: open addressing, deleted by shifting back. */
struct source {
    uint64_t hi, lo;                     /* IPv4 mapped into IPv6; IPv6 cut to its /64 */
    uint32_t count;                      /* 0: empty */
};

struct sp_dns_stream {
    struct sp_conn_pool pool;            /* first: sp_conn_server_new() */
    uint32_t max_per_source;
    uint32_t idle_timeout_ms, io_timeout_ms;
    struct sp_timer_list timers[T_LISTS];
    struct source *sources;
    uint32_t source_mask;
    uint64_t now_ms;
    struct sp_dns_config dns_cfg;
    const struct sp_table *t;            /* entered for this wake-up */
    struct sp_dns_counters *dns;
    struct sp_dns_tcp_counters *c;
    struct sp_dns_query query;           /* scratch for the answer function */
    uint8_t scratch[SCRATCH];
};

/* -- source addresses ------------------------------------------------------------ */

static void source_key(const struct sockaddr_storage *ss, uint64_t *hi, uint64_t *lo)
{
    uint8_t a[16] = {0};
    if (ss->ss_family == AF_INET6) {
        memcpy(a, &((const struct sockaddr_in6 *)ss)->sin6_addr, 8);   /* its /64 */
        if (memcmp(&((const struct sockaddr_in6 *)ss)->sin6_addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff",
                   12) == 0)
            memcpy(a, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    } else {
        a[10] = a[11] = 0xff;
        memcpy(a + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    }
    memcpy(hi, a, 8);
    memcpy(lo, a + 8, 8);
}

static uint32_t source_home(const struct sp_dns_stream *s, uint64_t hi, uint64_t lo)
{
    uint64_t h = (hi ^ (lo * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
    return (uint32_t)(h >> 32) & s->source_mask;
}

/* The slot holding this address's count (count 0: a free slot for it). The table
 * has twice as many slots as there are connections, so one is always free. */
static uint32_t source_find(const struct sp_dns_stream *s, uint64_t hi, uint64_t lo)
{
    uint32_t i = source_home(s, hi, lo);
    while (s->sources[i].count && (s->sources[i].hi != hi || s->sources[i].lo != lo))
        i = (i + 1) & s->source_mask;
    return i;
}

static void source_release(struct sp_dns_stream *s, uint32_t i)
{
    if (--s->sources[i].count)
        return;
    /* shift later members of the run back, so no lookup stops early at the hole */
    for (uint32_t j = (i + 1) & s->source_mask; s->sources[j].count; j = (j + 1) & s->source_mask) {
        uint32_t home = source_home(s, s->sources[j].hi, s->sources[j].lo);
        if (((j - home) & s->source_mask) >= ((j - i) & s->source_mask)) {
            s->sources[i] = s->sources[j];
            s->sources[j].count = 0;
            i = j;
        }
    }
}

/* -- connections ----------------------------------------------------------------- */

static void conn_free(struct sp_dns_stream *s, struct conn *c)
{
    if (c->out != c->out_inline)
        free(c->out);
    c->out = c->out_inline;
    c->out_len = c->out_sent = 0;
    source_release(s, c->source);
    sp_conn_release(&s->pool, &c->base, s->timers);
    s->c->open--;
}

static void set_events(struct sp_dns_stream *s, struct conn *c, uint32_t events)
{
    sp_conn_set_events(&s->pool, &c->base, events);
}

static void timer_start(struct sp_dns_stream *s, struct conn *c, int list)
{
    sp_timer_start(s->timers, &c->base.timed, list, s->now_ms);
}

/* Sends what c holds; false when the connection is gone. */
static bool flush(struct sp_dns_stream *s, struct conn *c)
{
    while (c->out_sent < c->out_len) {
        ssize_t n = send(c->base.fd, c->out + c->out_sent, c->out_len - c->out_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return true;
            if (errno == EINTR)
                continue;
            conn_free(s, c);
            return false;
        }
        c->out_sent += (uint32_t)n;
        timer_start(s, c, T_IO);   /* progress */
    }
    if (c->out != c->out_inline)
        free(c->out);
    c->out = c->out_inline;
    c->out_len = c->out_sent = 0;
    return true;
}

/* Sends len bytes of answers from the scratch buffer, keeping what the socket does
 * not take; false when the connection is gone. */
static bool send_answers(struct sp_dns_stream *s, struct conn *c, size_t len)
{
    size_t sent = 0;
    while (sent < len) {
        ssize_t n = send(c->base.fd, s->scratch + sent, len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            conn_free(s, c);
            return false;
        }
        sent += (size_t)n;
    }
    size_t rest = len - sent;
    if (rest == 0)
        return true;
    uint8_t *out = rest <= OUT_INLINE ? c->out_inline : malloc(rest);
    if (!out) {
        conn_free(s, c);
        return false;
    }
    memcpy(out, s->scratch + sent, rest);
    c->out = out;
    c->out_len = (uint32_t)rest;
    c->out_sent = 0;
    timer_start(s, c, T_IO);   /* it must leave in time */
    return true;
}

/* What the server process answers (handoff.h): an AXFR, an IXFR or a NOTIFY (Knot
 * sends it over TCP) that the fast path just answered NOTAUTH. */
static bool handed_up(const struct sp_dns_query *q, const uint8_t *answer)
{
    return q->has_question && (answer[3] & 0x0f) == SP_RCODE_NOTAUTH &&
           (q->opcode == SP_DNS_OPCODE_NOTIFY || q->qtype == SP_DNS_TYPE_AXFR ||
            q->qtype == SP_DNS_TYPE_IXFR);
}

/* The connection goes up with what it sent from `used` on; it is no longer ours. */
static void hand_off(struct sp_dns_stream *s, struct conn *c, size_t used)
{
    if (!sp_dns_handoff_stream(s->dns_cfg.handoff_fd, c->base.fd, c->in + used,
                               c->in_len - used))
        s->c->refused++;
    conn_free(s, c);
}

/* Answers the complete queries in c->in (none while an answer waits to leave);
 * false when the connection is gone. */
static bool answer_queries(struct sp_dns_stream *s, struct conn *c)
{
    size_t used = 0, out = 0;
    while (c->out_len == 0 && c->in_len - used >= 2) {
        size_t len = (size_t)c->in[used] << 8 | c->in[used + 1];
        if (len == 0 || len > SP_DNS_TCP_QUERY_MAX) {
            s->c->malformed++;
            conn_free(s, c);
            return false;
        }
        if (c->in_len - used < 2 + len)
            break;
        if (SCRATCH - out < 2 + 65535) {
            if (!send_answers(s, c, out))
                return false;
            out = 0;
            continue;
        }
        size_t n = sp_dns_answer(s->t, &s->dns_cfg, c->in + used + 2, len, true,
                                 s->scratch + out + 2, 65535, &s->query, s->dns);
        if (s->dns_cfg.handoff_fd && n && handed_up(&s->query, s->scratch + out + 2)) {
            if (out) {                   /* the answers before it leave first */
                if (!send_answers(s, c, out))
                    return false;
                out = 0;
                if (c->out_len)
                    break;               /* on_writable comes back to it */
            }
            hand_off(s, c, used);
            return false;
        }
        used += 2 + len;
        if (n) {
            s->scratch[out] = (uint8_t)(n >> 8);
            s->scratch[out + 1] = (uint8_t)n;
            out += 2 + n;
        }
    }
    if (used) {
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len = (uint16_t)(c->in_len - used);
        c->took = true;
    }
    return out == 0 || send_answers(s, c, out);
}

/* After c was read or written: its timer and what it waits for. */
static void settle(struct sp_dns_stream *s, struct conn *c)
{
    if (c->out_len) {                    /* T_IO started when the answer got stuck */
        set_events(s, c, EPOLLOUT);
        return;
    }
    if (c->peer_done) {                  /* answered what came before the FIN */
        conn_free(s, c);
        return;
    }
    /* a message is timed from its first byte, which came after the last one taken */
    if (c->in_len == 0)
        timer_start(s, c, T_IDLE);
    else if (c->base.timed.list != T_IO || c->took)
        timer_start(s, c, T_IO);
    c->took = false;
    set_events(s, c, EPOLLIN | EPOLLRDHUP);
}

static void on_readable(struct sp_dns_stream *s, struct conn *c)
{
    if (c->out_len == 0 && !c->peer_done && c->in_len < IN_CAP) {
        ssize_t n = recv(c->base.fd, c->in + c->in_len, IN_CAP - c->in_len, MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            conn_free(s, c);
            return;
        }
        if (n == 0)
            c->peer_done = true;
        else if (n > 0)
            c->in_len = (uint16_t)(c->in_len + n);
    }
    if (answer_queries(s, c))
        settle(s, c);
}

static void on_writable(struct sp_dns_stream *s, struct conn *c)
{
    if (!flush(s, c))
        return;
    if (c->out_len == 0 && !answer_queries(s, c))   /* the queries held back meanwhile */
        return;
    settle(s, c);
}

/* -- accepting ------------------------------------------------------------------- */

/* Room for one more: a full pool closes its oldest idle connection, else the one
 * whose message has taken longest (a slow-loris: a real client sends a query within
 * a round trip). Connections whose answer is leaving are not cut for room. */
static struct conn *take_conn(struct sp_dns_stream *s)
{
    if (!s->pool.free_list) {
        struct sp_timed *victim = s->timers[T_IDLE].head;
        for (struct sp_timed *e = s->timers[T_IO].head; !victim && e; e = e->next)
            if (((struct conn *)e)->out_len == 0)
                victim = e;
        if (!victim)
            return NULL;
        conn_free(s, (struct conn *)victim);
        s->c->evicted++;
    }
    return (struct conn *)sp_conn_take(&s->pool);
}

static void accept_some(struct sp_dns_stream *s)
{
    for (int k = 0; k < ACCEPTS_PER_WAKE; k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(s->pool.listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        uint64_t hi, lo;
        source_key(&ss, &hi, &lo);
        uint32_t slot = source_find(s, hi, lo);
        if (s->max_per_source && s->sources[slot].count >= s->max_per_source) {
            close(fd);
            s->c->source_limited++;
            continue;
        }
        struct conn *c = take_conn(s);
        if (!c) {
            close(fd);
            s->c->refused++;
            continue;
        }
        slot = source_find(s, hi, lo);  /* an eviction may have moved the slots */
        s->sources[slot].hi = hi;
        s->sources[slot].lo = lo;
        s->sources[slot].count++;
        int one = 1;                     /* an answer never waits for the one before's ACK */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->peer_done = c->took = false;
        c->in_len = 0;
        c->out = c->out_inline;
        c->out_len = c->out_sent = 0;
        if (sp_conn_add(&s->pool, &c->base, fd, EPOLLIN | EPOLLRDHUP) != 0) {
            source_release(s, slot);
            continue;
        }
        c->source = slot;
        s->c->open++;
        s->c->connections++;
        timer_start(s, c, T_IDLE);
    }
}

/* -- the loop -------------------------------------------------------------------- */

/* The idle timeout for how full the pool is: all of it up to half full, then less in
 * proportion to the room left, down to the I/O timeout. */
static uint32_t idle_timeout_now(const struct sp_dns_stream *s)
{
    uint64_t open = s->c->open, n = s->pool.count, half = n / 2 + 1;
    uint64_t ms = s->idle_timeout_ms;
    if (open > half)
        ms = ms * (n > open ? n - open : 0) / (n - half + 1);
    return ms > s->io_timeout_ms ? (uint32_t)ms : s->io_timeout_ms;
}

static void expire(struct sp_dns_stream *s)
{
    s->timers[T_IDLE].timeout_ms = idle_timeout_now(s);
    struct sp_timed *due;
    while ((due = sp_timer_due(s->timers, T_IDLE, s->now_ms))) {
        s->c->idle_timeouts++;
        conn_free(s, (struct conn *)due);
    }
    while ((due = sp_timer_due(s->timers, T_IO, s->now_ms))) {
        s->c->io_timeouts++;
        conn_free(s, (struct conn *)due);
    }
}

int sp_dns_stream_run(struct sp_dns_stream *s, struct sp_table_ref *ref, int index,
                      const int *stop, struct sp_dns_counters *dns,
                      struct sp_dns_tcp_counters *tcp)
{
    struct epoll_event ev[EVENTS];
    int error = 0;
    s->dns = dns;
    s->c = tcp;
    tcp->open = 0;
    while (!__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
        s->now_ms = sp_monotonic_ms();
        /* the stop flag is looked at every 100 ms at least */
        uint32_t wait_ms = sp_timer_next_wake(s->timers, T_LISTS, s->now_ms, 100);
        int n = epoll_wait(s->pool.epoll_fd, ev, EVENTS, (int)wait_ms);
        if (n < 0 && errno != EINTR) {
            error = errno;
            break;
        }
        s->t = sp_table_ref_enter(ref, index);
        s->now_ms = sp_monotonic_ms();
        bool accepting = false;
        for (int i = 0; i < n; i++) {
            struct conn *c = ev[i].data.ptr;
            if (c == NULL) {
                accepting = true;        /* after the others: a slot evicted for a new
                                          * connection may still have events below */
                continue;
            }
            if (c->base.fd < 0)
                continue;                /* closed earlier in this wake-up */
            if (ev[i].events & EPOLLOUT && c->out_len)
                on_writable(s, c);
            else if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                on_readable(s, c);
        }
        if (accepting)
            accept_some(s);
        expire(s);
        sp_table_ref_leave(ref, index);
    }
    return error;
}

struct sp_dns_stream *sp_dns_stream_open(const struct sp_dns_stream_config *cfg, char *err,
                                         size_t errlen)
{
    struct sp_dns_stream *s = sp_conn_server_new(sizeof(*s), cfg->listen_fd, cfg->max_connections,
                                                 sizeof(struct conn), err, errlen);
    if (!s)
        return NULL;
    uint32_t slots = 2;                  /* twice the connections: one is always free */
    while (slots < 2 * s->pool.count)
        slots <<= 1;
    s->sources = calloc(slots, sizeof(struct source));
    if (!s->sources) {
        snprintf(err, errlen, "out of memory for %u TCP connections", s->pool.count);
        sp_dns_stream_close(s);
        return NULL;
    }
    s->source_mask = slots - 1;
    s->max_per_source = cfg->max_per_source;
    s->io_timeout_ms = cfg->io_timeout_ms ? cfg->io_timeout_ms : 500;
    s->idle_timeout_ms = cfg->idle_timeout_ms;
    s->dns_cfg = cfg->dns;
    for (uint32_t i = 0; i < s->pool.count; i++) {
        struct conn *c = (struct conn *)sp_conn_at(&s->pool, i);
        c->out = c->out_inline;
    }
    s->timers[T_IDLE].timeout_ms = s->idle_timeout_ms;
    s->timers[T_IO].timeout_ms = s->io_timeout_ms;
    return s;
}

void sp_dns_stream_close(struct sp_dns_stream *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; s->pool.conns && i < s->pool.count; i++) {
        struct conn *c = (struct conn *)sp_conn_at(&s->pool, i);
        if (c->out != c->out_inline)
            free(c->out);
    }
    sp_conn_pool_close(&s->pool);
    free(s->sources);
    free(s);
}
