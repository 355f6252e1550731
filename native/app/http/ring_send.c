/* The sender of serve-http's own TCP: segments cut from the answer, the ACK clock,
 * congestion control (RFC 5681, byte counting per RFC 3465) and loss recovery (NewReno,
 * RFC 6582, for peers without SACK; ring_sack.c for the others; the retransmission
 * timer, RFC 6298; tail loss probes). See ring.h. */
#include "ring_internal.h"

#include <string.h>

#include "stormpy/proto/csum.h"

/* A segment of body bytes from the pool: a copy of it kept from an earlier send gets
 * its headers written, else a free way is filled; false when every way is in flight
 * (or the segment is not all body). */
static bool emit_precopy(const struct tcb *c, struct sp_batch *b, struct sp_frame *out,
                         const struct sp_tcp_segment *seg, size_t hl, uint64_t off, uint32_t len)
{
    const struct sp_http_reply *r = &c->reply;
    if (!len || r->body_iov < 0 || off < r->body_at ||
        off + len > r->body_at + r->iov[r->body_iov].iov_len)
        return false;
    /* the tag: the body bytes (their place in the table) and the frame's layout */
    uint64_t key0 = (uint64_t)(uintptr_t)((const uint8_t *)r->iov[r->body_iov].iov_base +
                                          (off - r->body_at));
    uint64_t key1 = (uint64_t)sp_precopy_epoch(c->pool) << 32 | (uint64_t)len << 8 | hl;
    int fill, i = sp_precopy_get(c->pool, key0, key1, hl + len, &fill);
    if (i < 0 && fill < 0)
        return false;
    uint32_t sum;
    uint8_t *data;
    if (i >= 0) {
        data = sp_precopy_frame(c->pool, i, &sum);   /* the payload is there already */
    } else {
        i = fill;
        data = sp_precopy_frame(c->pool, i, &sum);
        sum = sp_http_reply_copy(r, off, len, data + hl);
    }
    memcpy(data, c->l2, c->l2_len);
    sp_tcpip_write_reply(data + c->l2_len, &c->peer, seg, len, sum, b->cfg->ttl);
    sp_precopy_take(c->pool, i, key0, key1, (uint32_t)(hl + len), sum, out);
    return true;
}

/* Payload as one frame of the answer's own bytes, cut into segments by the kernel or
 * the NIC; false when the pieces do not fit (the caller sends a frame instead). */
static bool emit_gather(const struct tcb *c, struct sp_batch *b, const struct sp_tcp_segment *seg,
                        uint64_t off, uint32_t len)
{
    struct sp_gather *g = &b->gather[b->ngather];
    g->niov = (uint8_t)sp_http_reply_slice(&c->reply, off, len, g->iov, SP_GATHER_IOV);
    if (!g->niov)
        return false;
    memcpy(g->head, c->l2, c->l2_len);
    size_t hl = sp_tcpip_write_offload(g->head + c->l2_len, &c->peer, seg, len, b->cfg->ttl);
    g->head_len = (uint16_t)(c->l2_len + hl);
    g->l4_at = (uint16_t)(c->l2_len + (c->peer.family == 4 ? SP_IPV4_HEADER_LEN : SP_IPV6_HEADER_LEN));
    g->gso_size = len > c->mss ? c->mss : 0;
    g->ipv6 = c->peer.family == 6;
    g->len = len;
    b->ngather++;
    return true;
}

bool ring_emit(const struct tcb *c, struct sp_batch *b, unsigned *sent, uint32_t seq, uint8_t flags,
               uint32_t len, uint32_t window, const struct sp_tcp_options *syn)
{
    if (ring_tx_full(b, *sent))
        return false;
    struct sp_tcp_segment seg = {.seq = seq, .ack = c->rcv_nxt, .flags = flags,
                                 .window = (uint16_t)window, .syn = syn};
    if (b->gather && len) {
        if (emit_gather(c, b, &seg, seq - c->reply_seq, len))
            return true;
        if (len > c->mss)
            return false;                /* more than a frame holds */
    }
    size_t hl = c->l2_len + sp_tcpip_header_len(c->peer.family, &seg);
    bool precopy = b->out && b->out != b->tx;   /* (a batch made by hand may leave out NULL) */
    if (precopy && c->pool && emit_precopy(c, b, &b->out[*sent], &seg, hl, seq - c->reply_seq, len)) {
        (*sent)++;
        return true;
    }
    struct sp_frame *tx = ring_tx_next(b, *sent);
    uint32_t sum = sp_http_reply_copy(&c->reply, seq - c->reply_seq, len, tx->data + hl);
    memcpy(tx->data, c->l2, c->l2_len);
    sp_tcpip_write_reply(tx->data + c->l2_len, &c->peer, &seg, len, sum, b->cfg->ttl);
    ring_tx_commit(b, sent, (uint32_t)(hl + len));
    return true;
}

struct sp_frame *ring_tx_next(struct sp_batch *b, unsigned sent)
{
    bool precopy = b->out && b->out != b->tx;
    return &b->tx[precopy ? b->used : sent];
}

void ring_tx_commit(struct sp_batch *b, unsigned *sent, uint32_t len)
{
    bool precopy = b->out && b->out != b->tx;
    struct sp_frame *tx = ring_tx_next(b, *sent);
    tx->len = len;
    tx->pool = -1;
    if (precopy) {                       /* listed in out after the pool frames */
        b->out[*sent] = *tx;
        b->used++;
    }
    (*sent)++;
}

uint32_t ring_rcv_window(const struct tcb *c)
{
    uint32_t room = IN_CAP - c->in_len;
    return room < WINDOW_MAX ? room : WINDOW_MAX;
}

/* A tail loss probe (after RFC 8985 7): when ACKs stop while data is out, the last
 * segment goes again after two round trips, so a lost tail is repaired by the
 * ACKs it draws instead of by the retransmission timer. */
void ring_arm_probe(struct tcb *c)
{
    uint64_t pto_us = c->srtt_us ? 2 * (uint64_t)c->srtt_us : 10000;
    pto_us = pto_us < 5000 ? 5000 : pto_us;
    c->probe_at_ns = c->snd_una == c->snd_max ? 0 : c->clock_ns + pto_us * 1000;
}

/* Sends one segment at seq (a retransmission when seq is before snd_nxt). */
bool ring_send_at(struct tcb *c, struct sp_batch *b, unsigned *used, uint32_t seq,
                    uint32_t limit, struct sp_http_counters *k)
{
    if (ring_tx_full(b, *used))
        return false;
    uint32_t end = c->reply_seq + (c->has_reply ? (uint32_t)c->reply.len : 0);
    uint32_t len = SEQ_LT(seq, end) ? end - seq : 0;
    uint32_t most = b->gather ? SP_GATHER_PAYLOAD_MAX / c->mss * c->mss : c->mss;
    len = len < most ? len : most;
    len = len < limit ? len : limit;
    if (len > c->mss && seq + len != end)
        len -= len % c->mss;             /* whole segments, but for the answer's last */
    uint8_t flags = SP_TCP_ACK;
    if (len && seq + len == end)
        flags |= SP_TCP_PSH;
    if (c->fin_queued && seq + len == c->fin_seq && (len || seq == c->fin_seq))
        flags |= SP_TCP_FIN;
    if (!len && !(flags & SP_TCP_FIN))
        return false;
    if (!ring_emit(c, b, used, seq, flags, len, ring_rcv_window(c), NULL))
        return false;                    /* nothing queued: nothing to account */
    k->bytes += len;
    uint32_t next = seq + len + ((flags & SP_TCP_FIN) ? 1 : 0);
    if (SEQ_LT(c->snd_max, next)) {
        c->snd_max = next;
        if (!c->rtt_timing) {                /* Karn: time new data only */
            c->rtt_timing = true;
            c->rtt_seq = seq;
            c->rtt_start_ns = c->clock_ns;
        }
    } else {
        k->retransmits++;
        c->rtt_timing = false;
    }
    if (SEQ_LT(c->snd_nxt, next))
        c->snd_nxt = next;
    if (!c->rto_at_ns)
        c->rto_at_ns = c->clock_ns + (uint64_t)c->rto_ms * 1000000;
    if (!c->recovery || !c->sack_ok)     /* SACK recovery: only progress defers it */
        ring_arm_probe(c);
    return true;
}

/* New data and the FIN, within min(cwnd, the peer's window). */
bool ring_send_more(struct tcb *c, struct sp_batch *b, unsigned *used, struct sp_http_counters *k)
{
    if (c->recovery && c->sack_ok)
        return sack_send(c, b, used, k);
    bool sent = false;
    for (;;) {
        uint32_t wnd = c->cwnd < c->snd_wnd ? c->cwnd : c->snd_wnd;
        uint32_t flight = c->sack.n ? sack_unsacked(&c->sack, c->snd_una, c->snd_nxt)
                                    : c->snd_nxt - c->snd_una;
        if (flight >= wnd && !(c->snd_wnd == 0 && flight == 0))
            break;
        uint32_t room = flight < wnd ? wnd - flight : 1;   /* a zero window gets a probe */
        bool hole = false;
        if (c->sack.n && SEQ_LT(c->snd_nxt, c->snd_max)) {
            /* going back over the flight after a timeout: what the peer SACKed since
             * stays where it is */
            uint32_t seq, len;
            c->snd_nxt = sack_hole(&c->sack, c->snd_nxt, c->snd_max, &seq, &len) ? seq : c->snd_max;
            hole = SEQ_LT(c->snd_nxt, c->snd_max);
            if (hole)
                room = room < len ? room : len;
        }
        /* Sender silly-window avoidance (RFC 9293 3.8.6.2.1): while ACKs are due, wait
         * for room for a whole segment. It also keeps segments on the same boundaries in
         * every download of a file, which is what lets precopy find its copies again. */
        uint32_t end = c->reply_seq + (c->has_reply ? (uint32_t)c->reply.len : 0);
        if (!hole && room < c->mss && flight && SEQ_LT(c->snd_nxt + room, end))
            break;
        if (!ring_send_at(c, b, used, c->snd_nxt, room, k))
            break;
        sent = true;
    }
    return sent;
}

bool ring_send_ack(struct tcb *c, struct sp_batch *b, unsigned *used)
{
    return ring_emit(c, b, used, c->snd_nxt, SP_TCP_ACK, 0, ring_rcv_window(c), NULL);
}

static void ring_rtt_sample(struct tcb *c, uint64_t now_ns)
{
    uint32_t rtt = (uint32_t)((now_ns - c->rtt_start_ns) / 1000);
    if (!c->srtt_us) {
        c->srtt_us = rtt;
        c->rttvar_us = rtt / 2;
    } else {
        uint32_t err = rtt > c->srtt_us ? rtt - c->srtt_us : c->srtt_us - rtt;
        c->rttvar_us = (3 * c->rttvar_us + err) / 4;
        c->srtt_us = (7 * c->srtt_us + rtt) / 8;
    }
    uint32_t rto = (c->srtt_us + 4 * c->rttvar_us) / 1000;
    c->rto_ms = rto < RTO_MIN_MS ? RTO_MIN_MS : rto > RTO_MAX_MS ? RTO_MAX_MS : rto;
}

/* An acceptable ACK: the window, RFC 5681 growth, NewReno recovery (RFC 6582). */
void ring_on_ack(struct tcb *c, const struct sp_tcpip *t, struct sp_batch *b, unsigned *used,
                   struct sp_http_counters *k)
{
    uint32_t wnd = (uint32_t)t->window << c->wscale;
    if (SEQ_LT(c->snd_max, t->ack) || SEQ_LT(t->ack, c->snd_una))
        return;                          /* acks what was never sent, or old */
    if (c->sack_ok)
        sack_update(&c->sack, t->ack, c->snd_max, &t->opt);
    if (t->ack == c->snd_una) {
        /* RFC 5681 also asks for an unchanged window; a receiver that reads as data
         * arrives moves its window in nearly every ACK, and without SACK the duplicate
         * ACKs are all there is to go on. A SACKing receiver says what it got. */
        bool dup = !t->payload_len && !(t->flags & (SP_TCP_SYN | SP_TCP_FIN)) &&
                   c->snd_una != c->snd_max && (!c->sack_ok || t->opt.nsack);
        c->snd_wnd = wnd;
        if (!dup)
            return;
        if (c->dupacks < UINT8_MAX)
            c->dupacks++;
        if (c->sack_ok) {
            sack_on_ack(c, b, used, k);
            return;
        }
        if (c->dupacks == 3 && !c->recovery) {
            uint32_t flight = c->snd_max - c->snd_una;
            c->ssthresh = flight / 2 > 2u * c->mss ? flight / 2 : 2u * c->mss;
            c->recover = c->snd_max;
            c->recovery = true;
            ring_send_at(c, b, used, c->snd_una, c->mss, k);
            c->cwnd = c->ssthresh + 3u * c->mss;
        } else if (c->recovery) {
            c->cwnd += c->mss;
        }
        return;
    }
    uint32_t acked = t->ack - c->snd_una;
    c->snd_una = t->ack;
    c->snd_wnd = wnd;
    c->dupacks = 0;
    c->retries = 0;
    if (SEQ_LT(c->snd_nxt, c->snd_una))
        c->snd_nxt = c->snd_una;
    if (c->rtt_timing && SEQ_LT(c->rtt_seq, t->ack)) {
        c->rtt_timing = false;
        ring_rtt_sample(c, c->clock_ns);
    }
    if (c->recovery) {
        if (SEQ_LEQ(c->recover, t->ack)) {   /* full ACK: recovery is over */
            c->recovery = false;
            c->cwnd = c->ssthresh;
        } else if (c->sack_ok) {
            ;                            /* the holes go from sack_send() */
        } else {                         /* partial ACK: the next hole, at once */
            ring_send_at(c, b, used, c->snd_una, c->mss, k);
            c->cwnd = c->cwnd > acked ? c->cwnd - acked + c->mss : c->mss;
        }
    } else if (c->cwnd < c->ssthresh) {        /* byte counting (RFC 3465): receivers */
        c->cwnd += acked < 2u * c->mss ? acked : 2u * c->mss;   /* ACK every second segment */
    } else {
        c->cwnd += (uint32_t)((uint64_t)c->mss * acked / c->cwnd) + 1;
    }
    c->rto_at_ns = c->snd_una == c->snd_max ? 0 : c->clock_ns + (uint64_t)c->rto_ms * 1000000;
    ring_arm_probe(c);
    if (c->sack_ok)
        sack_on_ack(c, b, used, k);
}

/* The retransmission timer went off: everything unacknowledged goes again from
 * snd_una, one segment first (RFC 5681 3.1, RFC 6298 5.5-5.7). */
bool ring_on_timeout(struct tcb *c, struct sp_http_counters *k)
{
    if (++c->retries > RETRIES_MAX) {
        k->timeouts++;
        return false;
    }
    uint32_t flight = c->snd_max - c->snd_una;
    c->ssthresh = flight / 2 > 2u * c->mss ? flight / 2 : 2u * c->mss;
    c->cwnd = c->mss;
    c->recover = c->snd_max;
    c->snd_nxt = c->snd_una;
    c->recovery = false;
    c->dupacks = 0;
    c->sack.n = 0;                       /* the receiver may have reneged (RFC 6675 5.1) */
    c->lost_to = c->snd_una;
    c->rtt_timing = false;
    c->rto_ms = c->rto_ms * 2 < RTO_MAX_MS ? c->rto_ms * 2 : RTO_MAX_MS;
    c->rto_at_ns = 0;
    return true;
}
