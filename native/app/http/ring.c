/* stormpy's own TCP for serve-http on the rings. See stormpy/app/http/ring.h. */
#include "ring_internal.h"

#include <stddef.h>
#include <string.h>
#include <time.h>

#include "stormpy/engine/clock.h"
#include "stormpy/proto/ownstack.h"

/* The next answer, once the last is acknowledged whole: from the requests received. */
static void take_request(struct sp_http_ring *r, struct tcb *c, const struct sp_table *t,
                         const struct sp_http_site *site, uint64_t gen, struct sp_table_pins *pins,
                         struct sp_http_counters *k)
{
    if (c->has_reply) {
        if (c->snd_una != c->reply_seq + (uint32_t)c->reply.len)
            return;                      /* still in flight */
        sp_table_unpin(pins, c->gen);
        c->has_reply = false;
    }
    while (c->discard && c->in_len) {
        uint64_t n = c->discard < c->in_len ? c->discard : c->in_len;
        memmove(c->in, c->in + n, c->in_len - n);
        c->in_len -= (uint32_t)n;
        c->discard -= n;
    }
    if (c->fin_queued || c->discard || !c->in_len || !site)
        return;
    size_t used = sp_http_parse_request(c->in, c->in_len, &r->req);
    if (used == 0 && c->in_len < IN_CAP)
        return;
    c->gen = sp_table_pin(pins, gen);
    c->has_reply = true;
    c->reply_seq = c->snd_max;
    if (used == 0) {
        sp_http_answer_error(t, site, 431, false, &r->date, &c->reply);
        used = c->in_len;
    } else {
        sp_http_answer(t, site, &r->req, &r->date, &c->reply);
        if (r->req.body == SP_HTTP_LENGTH)
            c->discard = r->req.content_length;
        else if (r->req.body == SP_HTTP_CHUNKED)
            c->reply.close = true;
    }
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= (uint32_t)used;
    c->request_since_ns = c->in_len ? c->clock_ns : 0;
    if (c->reply.close) {
        c->fin_queued = true;
        c->fin_seq = c->reply_seq + (uint32_t)c->reply.len;
    }
    k->requests++;
    k->status[c->reply.status / 100 < 6 ? c->reply.status / 100 : 0]++;
}

static void close_gracefully(struct tcb *c)
{
    if (!c->fin_queued) {
        c->fin_queued = true;
        c->fin_seq = c->has_reply ? c->reply_seq + (uint32_t)c->reply.len : c->snd_max;
    }
}

/* The SYN-ACK, again when it was lost: MSS, and window scale (ours 0) and SACK
 * when the client offered them. */
static void send_syn_ack(struct tcb *c, struct sp_batch *b, unsigned *used)
{
    struct sp_tcp_options syn = {.has_mss = true, .mss = c->mss, .wscale = 0,
                                 .has_wscale = c->peer.opt.has_wscale, .sack_permitted = c->sack_ok};
    ring_emit(c, b, used, c->iss, SP_TCP_SYN | SP_TCP_ACK, 0, ring_rcv_window(c), &syn);
}

/* The MSS of a connection: theirs, at most what our MTU carries. */
static uint16_t path_mss(const struct sp_tcpip *t, const struct sp_batch *b, uint32_t theirs)
{
    size_t ip_tcp = (t->family == 4 ? SP_IPV4_HEADER_LEN : SP_IPV6_HEADER_LEN) + SP_TCP_HEADER_LEN;
    uint32_t mtu = b->cfg->mtu ? b->cfg->mtu : 1500;
    uint32_t ours = mtu - (uint32_t)ip_tcp;
    uint32_t mss = ours < theirs ? ours : theirs;
    return (uint16_t)(mss < 64 ? 64 : mss);
}

/* A connection for the flow of t (ring_take): the client's ISN isn, ours iss, the
 * options both agreed on. NULL when the table is full. */
static struct tcb *open_tcb(struct sp_http_ring *r, const struct sp_tcpip *t, const uint8_t *rx,
                            size_t l2, const struct cookie_opts *o, uint32_t isn, uint32_t iss,
                            uint64_t now, struct sp_table_pins *pins, struct sp_http_counters *k)
{
    struct tcb *c = ring_take(r, t, pins, k);
    if (!c)
        return NULL;
    c->l2_len = (uint8_t)l2;
    sp_eth_write_reply(c->l2, rx + 6, rx, rx, l2);
    c->mss = o->mss;
    c->wscale = o->has_wscale ? o->wscale : 0;
    c->sack_ok = o->sack;
    c->rcv_nxt = isn + 1;
    c->last_ns = c->clock_ns = now;
    c->iss = iss;
    c->snd_una = c->iss;
    c->snd_nxt = c->snd_max = c->recover = c->iss + 1;
    c->reply_seq = c->iss + 1;
    c->snd_wnd = t->window;              /* a SYN's window is never scaled */
    c->cwnd = INIT_CWND_SEGMENTS * (uint32_t)c->mss;
    c->ssthresh = UINT32_MAX;
    c->rto_ms = RTO_INITIAL_MS;
    c->request_since_ns = now;
    c->pool = r->pool;
    return c;
}

/* A SYN for a new connection: its SYN-ACK, from a connection in SYN_RCVD or, when
 * the table is full or half of it half-open, from a cookie (ring_cookie.c). */
static void accept_syn(struct sp_http_ring *r, const struct sp_tcpip *t, const uint8_t *rx,
                       size_t l2, struct sp_batch *b, unsigned *used, struct sp_table_pins *pins,
                       struct sp_http_counters *k)
{
    struct cookie_opts o = {.mss = path_mss(t, b, t->opt.has_mss ? t->opt.mss : 536),
                            .wscale = t->opt.wscale, .has_wscale = t->opt.has_wscale,
                            .sack = t->opt.sack_permitted};
    uint64_t now = sp_now_ns();
    if (!ring_has_room(r) || r->half_open >= (r->cfg.max_connections + 1) / 2) {
        struct tcb tmp;                  /* only to write the SYN-ACK: nothing stays */
        memset(&tmp, 0, offsetof(struct tcb, reply));
        tmp.in_len = 0;
        tmp.peer = *t;
        tmp.l2_len = (uint8_t)l2;
        sp_eth_write_reply(tmp.l2, rx + 6, rx, rx, l2);
        tmp.iss = cookie_make(r->secret, t, o.mss, now);
        tmp.mss = o.mss;
        tmp.sack_ok = o.sack;
        tmp.rcv_nxt = t->seq + 1;
        send_syn_ack(&tmp, b, used);
        r->cookie_sent_ns = now;
        k->cookies_sent++;
        return;
    }
    uint32_t iss = (uint32_t)ring_mix(r->secret ^ ((uint64_t)ring_flow_hash(t) << 32) ^ t->seq ^
                                      now / 4000);
    struct tcb *c = open_tcb(r, t, rx, l2, &o, t->seq, iss, now, pins, k);
    c->state = SYN_RCVD;
    r->half_open++;
    c->rto_at_ns = now + (uint64_t)RTO_INITIAL_MS * 1000000;
    sp_wheel_arm(&r->wheel, &c->timer, c->rto_at_ns);
    send_syn_ack(c, b, used);
}

/* A reset for a segment that belongs to no connection (RFC 9293 3.10.7.1). */
static void refuse(const struct sp_tcpip *t, const uint8_t *rx, size_t l2, struct sp_batch *b,
                   unsigned *used)
{
    if ((t->flags & SP_TCP_RST) || *used >= b->reserved)
        return;
    struct tcb tmp;
    memset(&tmp, 0, offsetof(struct tcb, reply));
    tmp.peer = *t;
    tmp.l2_len = (uint8_t)l2;
    sp_eth_write_reply(tmp.l2, rx + 6, rx, rx, l2);
    uint32_t seq = (t->flags & SP_TCP_ACK) ? t->ack : 0;
    tmp.rcv_nxt = t->seq + (uint32_t)t->payload_len + ((t->flags & SP_TCP_SYN) ? 1 : 0) +
                  ((t->flags & SP_TCP_FIN) ? 1 : 0);
    ring_emit(&tmp, b, used, seq, (t->flags & SP_TCP_ACK) ? SP_TCP_RST : SP_TCP_RST | SP_TCP_ACK,
              0, 0, NULL);
}

/* One segment of an existing connection. Returns false when it is gone. */
static bool on_segment(struct sp_http_ring *r, struct tcb *c, const struct sp_tcpip *t,
                       const uint8_t *ip, struct sp_batch *b, unsigned *used,
                       struct sp_table_pins *pins, struct sp_http_counters *k)
{
    c->last_ns = c->clock_ns = sp_now_ns();
    if (t->flags & SP_TCP_RST) {
        /* RFC 5961 3.2: only an exact RST resets; one elsewhere in the window gets a
         * challenge ACK, which a real peer answers with the exact one */
        if (t->seq == c->rcv_nxt) {
            ring_release(r, c, pins, k);
            return false;
        }
        if (SEQ_LT(c->rcv_nxt, t->seq) && SEQ_LT(t->seq, c->rcv_nxt + ring_rcv_window(c) + 1))
            c->ack_owed = true;
        return true;
    }
    if (c->state == TIME_WAIT) {
        /* a new SYN above what the old connection saw may take the flow at once
         * (RFC 9293 3.6.1); a repeated FIN is acknowledged again */
        if ((t->flags & SP_TCP_SYN) && SEQ_LT(c->rcv_nxt, t->seq)) {
            ring_release(r, c, pins, k);
            return false;
        }
        c->ack_owed |= (t->flags & SP_TCP_FIN) != 0;
        return true;
    }
    if (t->flags & SP_TCP_SYN) {         /* the SYN again: our SYN-ACK was lost */
        if (c->state == SYN_RCVD)
            send_syn_ack(c, b, used);
        return true;
    }
    if (!(t->flags & SP_TCP_ACK))
        return true;
    if (c->state == SYN_RCVD) {
        if (t->ack != c->iss + 1) {
            refuse(t, ip - c->l2_len, c->l2_len, b, used);
            return true;
        }
        c->state = ESTABLISHED;
        r->half_open--;
        c->snd_una = t->ack;
        c->snd_wnd = (uint32_t)t->window << c->wscale;
        c->rto_at_ns = 0;
        c->retries = 0;
    } else {
        ring_on_ack(c, t, b, used, k);
    }
    /* in-order bytes only; what overlaps the last ones is trimmed */
    bool ack_now = false;
    uint32_t len = (uint32_t)t->payload_len;
    const uint8_t *data = ip + t->payload_off;
    if (len || (t->flags & SP_TCP_FIN)) {
        uint32_t off = c->rcv_nxt - t->seq;
        if (SEQ_LEQ(t->seq, c->rcv_nxt) && off <= len) {
            uint32_t n = len - off, room = IN_CAP - c->in_len;
            n = n < room ? n : room;
            if (n && !c->peer_fin) {
                if (!c->in_len && !c->discard)
                    c->request_since_ns = c->last_ns;
                memcpy(c->in + c->in_len, data + off, n);
                c->in_len += n;
                c->rcv_nxt += n;
            }
            if ((t->flags & SP_TCP_FIN) && off + n == len && !c->peer_fin) {
                c->peer_fin = true;
                c->closed_first = c->fin_queued && SEQ_LT(c->fin_seq, c->snd_max);
                c->rcv_nxt++;
            }
        }
        ack_now = true;                  /* every data segment and FIN, at once */
    }
    c->ack_owed |= ack_now;
    return true;
}

/* An ACK for no connection that completes a handshake answered with a cookie: the
 * connection, established, and what came with the ACK (the request, often). False
 * when it is no such ACK. */
static bool accept_cookie(struct sp_http_ring *r, const struct sp_tcpip *t, const uint8_t *rx,
                          size_t l2, struct sp_batch *b, unsigned *used,
                          struct sp_table_pins *pins, struct sp_http_counters *k)
{
    struct cookie_opts o;
    uint64_t now = sp_now_ns();
    /* only while cookies were given out lately (as Linux does): a stray ACK then is
     * not one more 2^-25 chance to open a connection */
    if ((t->flags & (SP_TCP_SYN | SP_TCP_ACK | SP_TCP_RST)) != SP_TCP_ACK || !r->cookie_sent_ns ||
        now - r->cookie_sent_ns > COOKIE_VALID_NS || !cookie_check(r->secret, t, now, &o))
        return false;
    o.mss = path_mss(t, b, o.mss);
    struct tcb *c = open_tcb(r, t, rx, l2, &o, t->seq - 1, t->ack - 1, now, pins, k);
    if (!c) {
        k->refused++;
        return true;                     /* no room even so: its retransmission may find some */
    }
    c->state = ESTABLISHED;
    c->snd_una = t->ack;
    c->snd_wnd = (uint32_t)t->window << c->wscale;
    k->cookies_accepted++;
    if (on_segment(r, c, t, rx + l2, b, used, pins, k))
        ring_ready(r, c);
    return true;
}

/* Answers, timers and sending for one connection; false when it is gone. */
static bool run_connection(struct sp_http_ring *r, struct tcb *c, const struct sp_table *t,
                           const struct sp_http_site *site, uint64_t gen,
                           struct sp_table_pins *pins, struct sp_batch *b, unsigned *used,
                           struct sp_http_counters *k, uint64_t now)
{
    c->clock_ns = now;
    if (c->state == TIME_WAIT) {
        if (c->ack_owed && ring_send_ack(c, b, used))
            c->ack_owed = false;
        return now < c->tw_until_ns;
    }
    if (c->state == SYN_RCVD) {
        if (c->rto_at_ns && now >= c->rto_at_ns) {
            if (++c->retries > SYNACK_RETRIES)
                return false;
            c->rto_ms = c->rto_ms * 2 < RTO_MAX_MS ? c->rto_ms * 2 : RTO_MAX_MS;
            c->rto_at_ns = now + (uint64_t)c->rto_ms * 1000000;
            send_syn_ack(c, b, used);
        }
        return true;
    }
    take_request(r, c, t, site, gen, pins, k);
    if (c->rto_at_ns && now >= c->rto_at_ns && !ring_on_timeout(c, k))
        return false;
    if (c->probe_at_ns && now >= c->probe_at_ns) {
        if (c->sack_ok && sack_on_probe(c, b, used, k)) {
            ;                            /* the holes go from ring_send_more() */
        } else if (!c->recovery) {
            uint32_t last = c->snd_max - c->snd_una > c->mss ? c->snd_max - c->mss : c->snd_una;
            ring_send_at(c, b, used, last, c->snd_max - last, k);
            c->probe_at_ns = 0;          /* once per flight: then the timer */
        } else {
            c->probe_at_ns = 0;          /* NewReno recovery: the ACKs and the timer repair */
        }
    }
    uint64_t ms = 1000000;
    if (!c->has_reply && !c->fin_queued && c->in_len && c->request_since_ns && site &&
        now - c->request_since_ns > r->cfg.request_timeout_ms * ms) {
        c->gen = sp_table_pin(pins, gen);   /* a request began and never ended: 408 */
        c->has_reply = true;
        c->reply_seq = c->snd_max;
        sp_http_answer_error(t, site, 408, false, &r->date, &c->reply);
        c->in_len = 0;
        close_gracefully(c);
        k->timeouts++;
    }
    if (c->peer_fin && !c->has_reply)
        close_gracefully(c);             /* nothing more will be asked */
    if (!c->has_reply && !c->in_len && !c->fin_queued && now - c->last_ns > r->cfg.idle_timeout_ms * ms)
        close_gracefully(c);
    if (c->fin_queued && SEQ_LT(c->fin_seq, c->snd_una) &&
        (c->peer_fin || now - c->last_ns > r->cfg.idle_timeout_ms * ms)) {
        if (!c->peer_fin || !c->closed_first)
            return false;                /* the peer's FIN never came, or came first */
        if (c->ack_owed && ring_send_ack(c, b, used))
            c->ack_owed = false;         /* the last ACK, for the peer's FIN (or in TIME_WAIT) */
        ring_time_wait(r, c, pins, now + (uint64_t)TIME_WAIT_MS * ms);
        return true;
    }
    if (ring_send_more(c, b, used, k))
        c->ack_owed = false;
    if (c->ack_owed && ring_send_ack(c, b, used))
        c->ack_owed = false;
    return true;
}

/* When the connection has to run again if nothing arrives: its earliest timer,
 * and at the latest when it has been idle too long. */
static uint64_t next_due(const struct sp_http_ring *r, const struct tcb *c)
{
    const uint64_t ms = 1000000;
    if (c->state == TIME_WAIT)
        return c->tw_until_ns;
    uint64_t due = c->last_ns + r->cfg.idle_timeout_ms * ms;
    if (c->rto_at_ns && c->rto_at_ns < due)
        due = c->rto_at_ns;
    if (c->probe_at_ns && c->probe_at_ns < due)
        due = c->probe_at_ns;
    if (c->request_since_ns && c->in_len && !c->has_reply &&
        c->request_since_ns + r->cfg.request_timeout_ms * ms + ms < due)
        due = c->request_since_ns + r->cfg.request_timeout_ms * ms + ms;
    return due;
}

/* Where stormpy owns the interface (netmap): ARP, ICMP echo and NDP for its
 * addresses, answered here since the kernel does not see the frames. */
static bool own_stack(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len, size_t l2,
                      uint16_t type, struct sp_batch *b, unsigned *used)
{
    if (*used >= b->reserved)
        return false;
    struct sp_frame *tx = ring_tx_next(b, *used);
    size_t n = sp_ownstack_answer(cfg, rx, len, l2, type, tx->data, tx->cap);
    if (n)
        ring_tx_commit(b, used, (uint32_t)n);
    return n != 0;
}

static void tick_date(struct sp_http_ring *r)
{
    int64_t second = (int64_t)time(NULL);
    if (second != r->date_second) {
        r->date_second = second;
        sp_http_date_set(&r->date, second);
    }
}

void sp_http_ring_batch(struct sp_http_ring *r, const struct sp_table *t, uint64_t gen,
                        struct sp_table_pins *pins, struct sp_batch *b,
                        struct sp_http_counters *k)
{
    const struct sp_frame_config *cfg = b->cfg;
    struct sp_frame_counters *fc = b->counters;
    const struct sp_http_site *site = sp_http_site_of(t);
    unsigned used = 0;
    if (r->cfg.no_gather)
        b->gather = NULL;
    tick_date(r);
    if (r->pool && b->spare) {           /* precopy: pool frames and TX buffers, listed in out */
        b->out = b->spare;
        sp_precopy_begin(r->pool, t, gen);
    }
    for (unsigned i = 0; i < b->n; i++) {
        const uint8_t *rx = b->rx[i].data;
        size_t len = b->rx[i].len;
        uint16_t type;
        struct sp_tcpip tp;
        fc->frames++;
        size_t l2 = sp_eth_parse(rx, len, &type);
        if (!l2 || l2 > L2_MAX) {
            fc->malformed++;
            continue;
        }
        if ((type != SP_ETHERTYPE_IPV4 && type != SP_ETHERTYPE_IPV6) ||
            !sp_tcpip_parse(rx + l2, len - l2, &tp) ||
            tp.family != (type == SP_ETHERTYPE_IPV4 ? 4 : 6) || tp.dport != cfg->port ||
            !sp_frame_for_us(cfg, rx, tp.family, tp.dst)) {
            if (!cfg->own_stack || !own_stack(cfg, rx, len, l2, type, b, &used))
                fc->not_ours++;
            else
                fc->stack_replies++;
            continue;
        }
        if (!sp_tcpip_checksums_ok(rx + l2, &tp)) {
            fc->malformed++;
            continue;
        }
        if (sp_frame_source_refused(tp.family, tp.src, tp.dst, tp.sport, rx + 6)) {
            fc->bad_source++;
            continue;
        }
        struct tcb *c = ring_find(r, &tp);
        if (c) {
            if (on_segment(r, c, &tp, rx + l2, b, &used, pins, k))
                ring_ready(r, c);
            else if ((tp.flags & (SP_TCP_SYN | SP_TCP_ACK | SP_TCP_RST)) == SP_TCP_SYN)
                accept_syn(r, &tp, rx, l2, b, &used, pins, k);   /* it ended a TIME_WAIT */
        } else if ((tp.flags & (SP_TCP_SYN | SP_TCP_ACK | SP_TCP_RST)) == SP_TCP_SYN)
            accept_syn(r, &tp, rx, l2, b, &used, pins, k);
        else if (!accept_cookie(r, &tp, rx, l2, b, &used, pins, k))
            refuse(&tp, rx, l2, b, &used);
    }
    uint64_t now = sp_now_ns();
    for (struct sp_wheel_timer *w = sp_wheel_expire(&r->wheel, now), *next; w; w = next) {
        next = w->next;
        ring_ready(r, (struct tcb *)((char *)w - offsetof(struct tcb, timer)));
    }
    /* the connections with something to do, and only those; one that runs out of
     * TX buffers goes again next round, before the ones ready then */
    r->round++;
    for (struct tcb *c; (c = r->ready) && c->ready_round != r->round && !ring_tx_full(b, used);) {
        ring_unready(r, c);
        if (!run_connection(r, c, t, site, gen, pins, b, &used, k, now)) {
            ring_release(r, c, pins, k);
            continue;
        }
        if (ring_tx_full(b, used))
            ring_ready(r, c);
        sp_wheel_arm(&r->wheel, &c->timer, next_due(r, c));
    }
    b->sent = used;
    if (b->out == b->tx)
        b->used = used;
}
