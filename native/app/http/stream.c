/* HTTP over the kernel's TCP. See stormpy/app/http/stream.h. */
#define _GNU_SOURCE
#include "stormpy/app/http/stream.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "stormpy/app/http/reply.h"
#include "stormpy/engine/conn_pool.h"

#define PIPELINE 8                       /* answers queued per connection */
#define IN_CAP (SP_HTTP_HEAD_MAX + 1024) /* a head past SP_HTTP_HEAD_MAX is refused */
#define SEND_IOV 64
#define ACCEPTS_PER_WAKE 64
#define LINGER_MS 2000                   /* reading what a closed connection still sends */

enum timer_list { T_IDLE, T_READING, T_WRITING, T_LINGER, T_LISTS };

struct conn {
    struct sp_conn base;                 /* first: the pool's and the timers' */
    bool closing;                        /* no more requests: close once answers are out */
    bool lingering;
    bool suspect;                        /* the client may still be sending: linger on close */
    bool nodelay;                        /* TCP_NODELAY set: it stays open for more answers */
    bool peer_done;                      /* the client sent its FIN: answer what is here, close */
    const struct sp_table *table;        /* what queued answers point into */
    uint64_t gen;                        /* its generation (or an older one) */
    uint64_t discard;                    /* request body bytes still to skip */
    uint64_t sent;                       /* bytes of the first answer already sent */
    unsigned out_head, nout;
    uint32_t in_len;
    struct sp_http_reply out[PIPELINE];
    uint8_t in[IN_CAP];
};

struct sp_http_stream {
    struct sp_conn_pool pool;            /* first: sp_conn_server_new() */
    struct sp_timer_list timers[T_LISTS];
    struct sp_table_pins pins;          /* tables queued answers point into */
    uint64_t now_ms;
    int64_t date_second;
    struct sp_http_date date;
    const struct sp_table *t;            /* entered for this wake-up */
    const struct sp_http_site *site;
    uint64_t gen;
    struct sp_http_counters *c;
    struct sp_http_request req;          /* scratch: it holds a whole path */
};

static void timer_remove(struct sp_http_stream *s, struct conn *c)
{
    sp_timer_remove(s->timers, &c->base.timed);
}

static void timer_start(struct sp_http_stream *s, struct conn *c, int list)
{
    sp_timer_start(s->timers, &c->base.timed, list, s->now_ms);
}

static void enter(struct sp_http_stream *s, struct sp_table_ref *ref, int index)
{
    s->t = sp_table_ref_enter_pinned(ref, index, &s->pins, &s->gen);
    s->site = sp_http_site_of(s->t);
}

static void conn_free(struct sp_http_stream *s, struct conn *c)
{
    timer_remove(s, c);
    if (c->nout)
        sp_table_unpin(&s->pins, c->gen);
    sp_conn_release(&s->pool, &c->base, NULL);
    s->c->open--;
}

static void set_events(struct sp_http_stream *s, struct conn *c, uint32_t events)
{
    sp_conn_set_events(&s->pool, &c->base, events);
}

/* Answers are out and no more will come. A client that may still be sending (a
 * pipelined request after a Connection: close, a body, a malformed head) gets a
 * lingering close: closing with unread bytes would reset the connection and could
 * destroy the answer in flight. Any other is closed at once, as nginx does. */
static void finish(struct sp_http_stream *s, struct conn *c)
{
    if (!c->suspect && !c->in_len && !c->discard) {
        conn_free(s, c);
        return;
    }
    shutdown(c->base.fd, SHUT_WR);
    c->lingering = true;
    c->in_len = 0;
    set_events(s, c, EPOLLIN);
    timer_start(s, c, T_LINGER);
}

/* Whether c may queue an answer from the table entered now: answers in one queue all
 * point into one table, which stays pinned while they are. */
static bool can_queue(struct sp_http_stream *s, struct conn *c)
{
    if (c->nout)
        return c->table == s->t && c->nout < PIPELINE;
    c->table = s->t;
    c->gen = sp_table_pin(&s->pins, s->gen);
    return true;
}

/* Queues an answer; can_queue() said yes. */
static void queue_reply(struct sp_http_stream *s, struct conn *c, const struct sp_http_request *req,
                        uint16_t status)
{
    struct sp_http_reply *r = &c->out[(c->out_head + c->nout) % PIPELINE];
    if (req)
        sp_http_answer(s->t, s->site, req, &s->date, r);
    else
        sp_http_answer_error(s->t, s->site, status, false, &s->date, r);
    c->nout++;
    c->closing |= r->close;
    c->suspect |= r->close && r->status >= 400;
    if (!r->close && !c->nodelay) {      /* a close sends its last segment with the FIN */
        int one = 1;
        setsockopt(c->base.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->nodelay = true;
    }
    s->c->requests++;
    s->c->status[r->status / 100 < 6 ? r->status / 100 : 0]++;
}

/* Sends what is queued; false when the connection is gone. */
static bool flush(struct sp_http_stream *s, struct conn *c)
{
    if (c->nout && c->base.timed.list != T_WRITING)
        timer_start(s, c, T_WRITING);
    while (c->nout) {
        struct iovec iov[SEND_IOV];
        int n = 0;
        uint64_t skip = c->sent;
        for (unsigned k = 0; k < c->nout && n < SEND_IOV; k++) {
            const struct sp_http_reply *r = &c->out[(c->out_head + k) % PIPELINE];
            for (int i = 0; i < r->niov && n < SEND_IOV; i++) {
                if (skip >= r->iov[i].iov_len) {
                    skip -= r->iov[i].iov_len;
                    continue;
                }
                iov[n].iov_base = (uint8_t *)r->iov[i].iov_base + skip;
                iov[n].iov_len = r->iov[i].iov_len - skip;
                skip = 0;
                n++;
            }
        }
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t sent = sendmsg(c->base.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            conn_free(s, c);
            return false;
        }
        s->c->bytes += (uint64_t)sent;
        uint64_t left = (uint64_t)sent;
        while (c->nout) {
            const struct sp_http_reply *r = &c->out[c->out_head];
            if (c->sent + left < r->len) {
                c->sent += left;
                break;
            }
            left -= r->len - c->sent;
            c->sent = 0;
            c->out_head = (c->out_head + 1) % PIPELINE;
            if (--c->nout == 0)
                sp_table_unpin(&s->pins, c->gen);
        }
        timer_start(s, c, T_WRITING);    /* progress: the send timer starts again */
    }
    return true;
}

/* Queues answers to the complete requests in c->in, as many as the pipeline takes. */
static void take_requests(struct sp_http_stream *s, struct conn *c)
{
    while (!c->closing) {
        if (c->discard) {
            uint64_t k = c->discard < c->in_len ? c->discard : c->in_len;
            memmove(c->in, c->in + k, c->in_len - k);
            c->in_len -= (uint32_t)k;
            c->discard -= k;
            if (c->discard)
                return;
        }
        if (c->in_len == 0)
            return;
        size_t used = sp_http_parse_request(c->in, c->in_len, &s->req);
        if (used == 0 && c->in_len < IN_CAP)
            return;
        if (!can_queue(s, c))
            return;
        if (used == 0) {                 /* full, and still no head: the parser's limits */
            queue_reply(s, c, NULL, 431);
            c->closing = true;
            return;
        }
        queue_reply(s, c, &s->req, 0);
        if (s->req.body == SP_HTTP_LENGTH)
            c->discard = s->req.content_length;
        else if (s->req.body == SP_HTTP_CHUNKED)
            c->closing = c->suspect = true;   /* where it ends is not looked for */
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len -= (uint32_t)used;
    }
}

/* Answers what c->in holds and sends, until sending or the client holds it up. */
static void serve(struct sp_http_stream *s, struct conn *c)
{
    for (;;) {
        take_requests(s, c);
        unsigned queued = c->nout;
        bool blocked = !c->closing && c->in_len && (queued == PIPELINE || c->table != s->t);
        if (!flush(s, c))
            return;
        if (!blocked || c->nout == queued)   /* room again: take the requests already here */
            break;
    }
    if (c->nout == 0 && (c->closing || c->peer_done)) {
        finish(s, c);                    /* a partial request after the FIN never completes */
        return;
    }
    if (c->nout == 0) {                  /* else flush started the send timer */
        if (!c->in_len && !c->discard)
            timer_start(s, c, T_IDLE);
        else if (c->base.timed.list != T_READING)
            timer_start(s, c, T_READING);    /* a request is timed from when it could come */
    }
    /* Only ask for what will be acted on: a level-triggered event that is not (a FIN
     * already seen, a full buffer) would wake this loop for ever. */
    bool reading = !c->closing && !c->peer_done && c->in_len < IN_CAP && c->nout < PIPELINE;
    set_events(s, c, (reading ? EPOLLIN | EPOLLRDHUP : 0) | (c->nout ? EPOLLOUT : 0));
}

static void on_readable(struct sp_http_stream *s, struct conn *c)
{
    if (c->lingering) {
        uint8_t sink[4096];
        ssize_t n = recv(c->base.fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            conn_free(s, c);
        return;
    }
    if (c->in_len < IN_CAP && !c->closing && !c->peer_done) {
        ssize_t n = recv(c->base.fd, c->in + c->in_len, IN_CAP - c->in_len, MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            conn_free(s, c);
            return;
        }
        if (n == 0)
            c->peer_done = true;         /* answer the requests already here, then close */
        else if (n > 0)
            c->in_len += (uint32_t)n;
    }
    serve(s, c);
}

static struct conn *take_conn(struct sp_http_stream *s)
{
    /* A full pool makes room: a closing connection first, then the oldest idle one,
     * then the one whose request has taken longest to arrive (a slow-loris: a real
     * client sends its request within a round trip). Connections receiving an
     * answer are never cut for room. */
    if (!s->pool.free_list) {
        struct sp_timed *victim = s->timers[T_LINGER].head;
        if (!victim)
            victim = s->timers[T_IDLE].head ? s->timers[T_IDLE].head : s->timers[T_READING].head;
        if (!victim)
            return NULL;
        conn_free(s, (struct conn *)victim);
        s->c->evicted++;
    }
    return (struct conn *)sp_conn_take(&s->pool);
}

static void accept_some(struct sp_http_stream *s)
{
    for (int k = 0; k < ACCEPTS_PER_WAKE; k++) {
        int fd = accept4(s->pool.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct conn *c = take_conn(s);
        if (!c) {
            close(fd);
            s->c->refused++;
            continue;
        }
        c->nodelay = false;
        c->closing = c->lingering = c->suspect = c->peer_done = false;
        c->in_len = 0;
        c->discard = c->sent = 0;
        c->out_head = c->nout = 0;
        if (sp_conn_add(&s->pool, &c->base, fd, EPOLLIN | EPOLLRDHUP) != 0)
            continue;
        s->c->open++;
        s->c->connections++;
        timer_start(s, c, T_READING);    /* the first request is timed from the connect */
    }
}

static void expire(struct sp_http_stream *s)
{
    for (int l = 0; l < T_LISTS; l++) {
        struct sp_timed *due;
        while ((due = sp_timer_due(s->timers, l, s->now_ms))) {
            struct conn *c = (struct conn *)due;
            if (l != T_LINGER && l != T_IDLE)
                s->c->timeouts++;
            if (l == T_READING && s->site && c->in_len &&
                sp_http_parse_request(c->in, c->in_len, &s->req)) {
                timer_remove(s, c);              /* whole, and held back: answer it now */
                serve(s, c);
                continue;
            }
            if (l == T_READING && c->in_len && s->site && can_queue(s, c)) {
                queue_reply(s, c, NULL, 408);    /* a request began and never ended */
                c->closing = true;
                timer_remove(s, c);
                if (flush(s, c) && c->nout == 0)
                    finish(s, c);
                else if (c->base.fd >= 0 && c->nout)
                    set_events(s, c, EPOLLOUT);
                continue;
            }
            conn_free(s, c);
        }
    }
}

static void tick(struct sp_http_stream *s)
{
    s->now_ms = sp_monotonic_ms();
    int64_t second = (int64_t)time(NULL);
    if (second != s->date_second) {      /* Date changes once a second, never per request */
        s->date_second = second;
        sp_http_date_set(&s->date, second);
    }
}

int sp_http_stream_run(struct sp_http_stream *s, struct sp_table_ref *ref, int index,
                       const int *stop, struct sp_http_counters *counters)
{
    struct epoll_event ev[64];
    int error = 0;
    s->c = counters;
    counters->open = 0;
    while (!__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
        tick(s);
        sp_table_ref_leave_pinned(ref, index, &s->pins);
        /* the stop flag is looked at every 100 ms at least */
        uint32_t wait_ms = sp_timer_next_wake(s->timers, T_LISTS, s->now_ms, 100);
        int n = epoll_wait(s->pool.epoll_fd, ev, 64, (int)wait_ms);
        if (n < 0 && errno != EINTR) {
            error = errno;
            break;
        }
        enter(s, ref, index);
        tick(s);
        bool accepting = false;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr == NULL) {
                accepting = true;        /* after the others: a slot evicted for a new
                                          * connection may still have events below */
                continue;
            }
            struct conn *c = ev[i].data.ptr;
            if (c->base.fd < 0)
                continue;                /* closed earlier in this wake-up */
            if (!s->site) {              /* no site in this table: nothing to answer with */
                conn_free(s, c);
                continue;
            }
            if (ev[i].events & EPOLLOUT && c->nout && !flush(s, c))
                continue;
            if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                on_readable(s, c);
            else
                serve(s, c);             /* room in the pipeline again */
        }
        if (accepting)
            accept_some(s);
        expire(s);
    }
    sp_table_ref_leave_pinned(ref, index, &s->pins);
    return error;
}

struct sp_http_stream *sp_http_stream_open(const struct sp_http_stream_config *cfg, char *err,
                                           size_t errlen)
{
    struct sp_http_stream *s = sp_conn_server_new(sizeof(*s), cfg->listen_fd,
                                                  cfg->max_connections, sizeof(struct conn),
                                                  err, errlen);
    if (!s)
        return NULL;
    s->timers[T_IDLE].timeout_ms = cfg->idle_timeout_ms;
    s->timers[T_READING].timeout_ms = cfg->request_timeout_ms;
    s->timers[T_WRITING].timeout_ms = cfg->send_timeout_ms;
    s->timers[T_LINGER].timeout_ms = LINGER_MS;
    s->date_second = -1;
    return s;
}

void sp_http_stream_close(struct sp_http_stream *s)
{
    if (!s)
        return;
    sp_conn_pool_close(&s->pool);
    free(s);
}
