/* Loss recovery of serve-http's own TCP with a peer that SACKs: the scoreboard
 * (RFC 2018) and a simplified RFC 6675 recovery driven by a pipe estimate. Peers
 * without SACK keep NewReno (ring_send.c). See ring.h. */
#include "ring_internal.h"

#define DUP_THRESH 3

static uint32_t seq_max(uint32_t a, uint32_t b)
{
    return SEQ_LT(a, b) ? b : a;
}

static uint32_t seq_min(uint32_t a, uint32_t b)
{
    return SEQ_LT(a, b) ? a : b;
}

static void board_remove(struct sack_board *s, unsigned i)
{
    for (; i + 1 < s->n; i++) {
        s->edge[i][0] = s->edge[i + 1][0];
        s->edge[i][1] = s->edge[i + 1][1];
    }
    s->n--;
}

/* Keeps the ranges sorted, disjoint and not touching, so a hole is simply the gap
 * between two neighbours. */
static void board_insert(struct sack_board *s, uint32_t l, uint32_t r)
{
    for (unsigned i = 0; i < s->n;) {
        if (SEQ_LT(r, s->edge[i][0]) || SEQ_LT(s->edge[i][1], l)) {
            i++;
            continue;
        }
        l = seq_min(l, s->edge[i][0]);
        r = seq_max(r, s->edge[i][1]);
        board_remove(s, i);
    }
    unsigned pos = 0;
    while (pos < s->n && SEQ_LT(s->edge[pos][0], l))
        pos++;
    if (s->n == SACK_RANGES) {
        /* Forgetting a range is safe (its bytes may go again); merging two would claim
         * the hole between them arrived. The ranges nearest snd_una decide what is
         * retransmitted next, so the highest one goes. */
        if (pos == s->n)
            return;
        s->n--;
    }
    for (unsigned i = s->n; i > pos; i--) {
        s->edge[i][0] = s->edge[i - 1][0];
        s->edge[i][1] = s->edge[i - 1][1];
    }
    s->edge[pos][0] = l;
    s->edge[pos][1] = r;
    s->n++;
}

void sack_update(struct sack_board *s, uint32_t una, uint32_t max, const struct sp_tcp_options *o)
{
    for (unsigned i = 0; i < s->n;) {     /* the cumulative ACK covers what is below una */
        if (SEQ_LEQ(s->edge[i][1], una)) {
            board_remove(s, i);
            continue;
        }
        if (SEQ_LT(s->edge[i][0], una))
            s->edge[i][0] = una;
        i++;
    }
    for (unsigned k = 0; k < o->nsack && k < SP_TCP_SACK_BLOCKS; k++) {
        uint32_t l = o->sack[k][0], r = o->sack[k][1];
        /* a block must be non-empty and within what was sent; below una it is a
         * D-SACK (RFC 2883) or old, and says nothing about holes */
        if (!SEQ_LT(l, r) || SEQ_LT(max, r) || SEQ_LEQ(r, una))
            continue;
        board_insert(s, seq_max(l, una), r);
    }
}

uint32_t sack_lost_edge(const struct sack_board *s, uint32_t una, uint32_t mss)
{
    /* RFC 6675 IsLost(): DupThresh ranges, or more than (DupThresh - 1) * SMSS bytes,
     * SACKed above a byte. Between two ranges that count is the same for every byte,
     * so the answer is a range's left edge: the highest one that qualifies. */
    uint32_t bytes = 0;
    for (unsigned i = s->n; i-- > 0;) {
        bytes += s->edge[i][1] - s->edge[i][0];
        if (bytes > (DUP_THRESH - 1) * mss || s->n - i >= DUP_THRESH)
            return s->edge[i][0];
    }
    return una;
}

uint32_t sack_unsacked(const struct sack_board *s, uint32_t a, uint32_t b)
{
    if (!SEQ_LT(a, b))
        return 0;
    uint32_t n = b - a;
    for (unsigned i = 0; i < s->n; i++) {
        uint32_t l = seq_max(s->edge[i][0], a), r = seq_min(s->edge[i][1], b);
        if (SEQ_LT(l, r))
            n -= r - l;
    }
    return n;
}

uint32_t sack_pipe(const struct sack_board *s, uint32_t una, uint32_t max, uint32_t high_rxt,
                   uint32_t lost)
{
    /* RFC 6675 SetPipe(): an un-SACKed byte counts once if it is not lost (still in
     * the network) and once more if it was retransmitted */
    return sack_unsacked(s, seq_max(lost, una), max) + sack_unsacked(s, una, seq_min(seq_max(high_rxt, una), max));
}

bool sack_hole(const struct sack_board *s, uint32_t from, uint32_t limit, uint32_t *seq,
               uint32_t *len)
{
    uint32_t x = from, end = limit;
    for (unsigned i = 0; i < s->n; i++) {
        if (SEQ_LEQ(s->edge[i][1], x))
            continue;
        if (SEQ_LEQ(s->edge[i][0], x)) {
            x = s->edge[i][1];
            continue;
        }
        end = seq_min(s->edge[i][0], limit);
        break;
    }
    if (!SEQ_LT(x, end))
        return false;
    *seq = x;
    *len = end - x;
    return true;
}

/* A retransmission of up to one segment of the hole at seq; HighRxt moves past it. */
static bool resend(struct tcb *c, struct sp_batch *b, unsigned *used, uint32_t seq, uint32_t len,
                   struct sp_http_counters *k)
{
    len = len < c->mss ? len : c->mss;
    if (!ring_send_at(c, b, used, seq, len, k))
        return false;
    c->high_rxt = seq_min(seq + len, c->snd_max);
    return true;
}

/* IsLost() by the SACKs, or further by the probe timer (see sack_on_probe) */
static uint32_t lost_edge(const struct tcb *c)
{
    uint32_t lost = sack_lost_edge(&c->sack, c->snd_una, c->mss);
    return SEQ_LT(lost, c->lost_to) && SEQ_LEQ(c->lost_to, c->snd_max) ? c->lost_to : lost;
}

/* RFC 6675 5 (4): half the flight, no inflation: the pipe estimate decides what may
 * go, and the first hole goes at once. */
static void enter(struct tcb *c, struct sp_batch *b, unsigned *used, struct sp_http_counters *k)
{
    uint32_t flight = c->snd_max - c->snd_una;
    c->ssthresh = flight / 2 > 2u * c->mss ? flight / 2 : 2u * c->mss;
    c->cwnd = c->ssthresh;
    c->recover = c->snd_max;
    c->recovery = true;
    c->high_rxt = c->snd_una;
    ring_arm_probe(c);
    uint32_t seq, len;
    if (sack_hole(&c->sack, c->snd_una, c->snd_max, &seq, &len))
        resend(c, b, used, seq, len, k);
}

/* After a timeout, not before the flight it went back over is acknowledged (RFC 6675
 * 5.1): its duplicates would start a recovery of their own. */
static bool may_enter(const struct tcb *c)
{
    return !c->recovery && c->snd_una != c->snd_max && !SEQ_LT(c->snd_una, c->recover);
}

void sack_on_ack(struct tcb *c, struct sp_batch *b, unsigned *used, struct sp_http_counters *k)
{
    if (c->recovery) {
        c->high_rxt = seq_max(c->high_rxt, c->snd_una);
        return;
    }
    c->lost_to = c->snd_una;
    if (may_enter(c) &&
        (c->dupacks >= DUP_THRESH || SEQ_LT(c->snd_una, sack_lost_edge(&c->sack, c->snd_una, c->mss))))
        enter(c, b, used, k);
}

bool sack_on_probe(struct tcb *c, struct sp_batch *b, unsigned *used, struct sp_http_counters *k)
{
    if (!c->recovery && (!c->sack.n || !may_enter(c)))
        return false;
    /* After RFC 8985 (RACK): no ACK has moved snd_una for two round trips although
     * the peer holds data above the holes, so every hole below the highest SACKed
     * range is lost, and so is what was retransmitted into them. Without this a
     * hole with too few SACKs above it (the flight's tail) or a lost retransmission
     * would wait for the retransmission timer. */
    uint32_t top = c->sack.n ? c->sack.edge[c->sack.n - 1][0] : c->snd_una + c->mss;
    c->lost_to = seq_min(top, c->snd_max);
    if (!c->recovery) {
        enter(c, b, used, k);
        return true;
    }
    c->high_rxt = c->snd_una;
    ring_arm_probe(c);
    return true;
}

bool sack_send(struct tcb *c, struct sp_batch *b, unsigned *used, struct sp_http_counters *k)
{
    bool sent = false;
    while (!ring_tx_full(b, *used)) {    /* each turn sends a segment or stops */
        uint32_t lost = lost_edge(c);
        uint32_t pipe = sack_pipe(&c->sack, c->snd_una, c->snd_max, c->high_rxt, lost);
        if (pipe >= c->cwnd)
            break;                       /* counted in segments, as RFC 6675 allows */
        uint32_t from = seq_max(c->high_rxt, c->snd_una), seq, len;
        if (sack_hole(&c->sack, from, lost, &seq, &len)) {   /* (1) a lost hole */
            if (!resend(c, b, used, seq, len, k))
                break;
        } else if (c->snd_nxt - c->snd_una < c->snd_wnd &&
                   ring_send_at(c, b, used, c->snd_nxt, c->snd_una + c->snd_wnd - c->snd_nxt, k)) {
            ;                            /* (2) new data */
        } else if (c->sack.n && sack_hole(&c->sack, from, c->sack.edge[c->sack.n - 1][1], &seq, &len)) {
            if (!resend(c, b, used, seq, len, k))   /* (3) a hole not yet known lost */
                break;
        } else {
            break;
        }
        sent = true;
    }
    return sent;
}
