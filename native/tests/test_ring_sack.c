/* The SACK scoreboard and SACK-based loss recovery of serve-http's own TCP
 * (app/http/ring_sack.c), on the board alone and on a connection sending a flight. */
#include <string.h>

#include "check.h"
#include "../app/http/ring_internal.h"

static struct sp_tcp_options blocks(unsigned n, const uint32_t (*e)[2])
{
    struct sp_tcp_options o;
    memset(&o, 0, sizeof(o));
    for (unsigned i = 0; i < n; i++) {
        o.sack[i][0] = e[i][0];
        o.sack[i][1] = e[i][1];
    }
    o.nsack = (uint8_t)n;
    return o;
}

static int board_is(const struct sack_board *s, unsigned n, const uint32_t (*e)[2])
{
    if (s->n != n)
        return 0;
    for (unsigned i = 0; i < n; i++)
        if (s->edge[i][0] != e[i][0] || s->edge[i][1] != e[i][1])
            return 0;
    return 1;
}

static void board(uint32_t base)
{
    struct sack_board s = {0};
    uint32_t una = base, max = base + 20000;
    const uint32_t in[][2] = {{base + 5000, base + 6000}, {base + 2000, base + 3000},
                              {base + 8000, base + 30000}, {base - 10, base + 100}};
    struct sp_tcp_options o = blocks(4, in);
    sack_update(&s, una, max, &o);       /* past snd_max: ignored; below una: clipped */
    const uint32_t want1[][2] = {{base, base + 100}, {base + 2000, base + 3000},
                                 {base + 5000, base + 6000}};
    CHECK(board_is(&s, 3, want1));
    const uint32_t more[][2] = {{base + 3000, base + 4000}, {base + 4500, base + 5001},
                                {base + 9000, base + 9000}, {base + 7000, base + 6000}};
    o = blocks(4, more);                 /* touching and overlapping merge; empty, reversed: no */
    sack_update(&s, una, max, &o);
    const uint32_t want2[][2] = {{base, base + 100}, {base + 2000, base + 4000},
                                 {base + 4500, base + 6000}};
    CHECK(board_is(&s, 3, want2));
    o = blocks(0, NULL);
    sack_update(&s, base + 2500, max, &o);   /* the cumulative ACK moves up */
    const uint32_t want3[][2] = {{base + 2500, base + 4000}, {base + 4500, base + 6000}};
    CHECK(board_is(&s, 2, want3));
    const uint32_t bridge[][2] = {{base + 3900, base + 4600}};
    o = blocks(1, bridge);
    sack_update(&s, base + 2500, max, &o);
    const uint32_t want4[][2] = {{base + 2500, base + 6000}};
    CHECK(board_is(&s, 1, want4));
    o = blocks(0, NULL);
    sack_update(&s, base + 6000, max, &o);
    CHECK_EQ(s.n, 0);

    /* more ranges than fit: the highest are forgotten, never merged */
    memset(&s, 0, sizeof(s));
    for (uint32_t i = 1; i <= SACK_RANGES + 2; i++) {
        const uint32_t one[][2] = {{base + i * 1000, base + i * 1000 + 10}};
        o = blocks(1, one);
        sack_update(&s, una, max, &o);
    }
    CHECK_EQ(s.n, SACK_RANGES);
    CHECK_EQ(s.edge[SACK_RANGES - 1][0], base + SACK_RANGES * 1000);
    const uint32_t low[][2] = {{base + 500, base + 510}};
    o = blocks(1, low);
    sack_update(&s, una, max, &o);
    CHECK_EQ(s.n, SACK_RANGES);
    CHECK_EQ(s.edge[0][0], base + 500);
    CHECK_EQ(s.edge[SACK_RANGES - 1][0], base + (SACK_RANGES - 1) * 1000);
    for (unsigned i = 1; i < s.n; i++)
        CHECK(SEQ_LT(s.edge[i - 1][1], s.edge[i][0]));
}

static void lost_pipe_holes(uint32_t base)
{
    const uint32_t mss = 1000;
    struct sack_board s = {0};
    uint32_t una = base, max = base + 10000;
    const uint32_t a[][2] = {{base + 3000, base + 5000}};
    struct sp_tcp_options o = blocks(1, a);
    sack_update(&s, una, max, &o);
    CHECK_EQ(sack_lost_edge(&s, una, mss), una);      /* 2 MSS SACKed: not more than 2 */
    const uint32_t b[][2] = {{base + 1000, base + 2000}};
    o = blocks(1, b);
    sack_update(&s, una, max, &o);
    uint32_t lost = sack_lost_edge(&s, una, mss);
    CHECK_EQ(lost - base, 1000);         /* [0, 1000) has 3000 SACKed above; [2000, 3000) 2000 */
    /* in the network: the un-SACKed [2000, 3000) and [5000, 10000); once
     * retransmitted, [0, 1000) counts again */
    CHECK_EQ(sack_pipe(&s, una, max, una, lost), 6000);
    CHECK_EQ(sack_pipe(&s, una, max, base + 1000, lost), 7000);
    CHECK_EQ(sack_pipe(&s, una, max, base + 2500, lost), 7500);

    uint32_t seq = 0, len = 0;
    CHECK(sack_hole(&s, una, lost, &seq, &len));
    CHECK_EQ(seq - base, 0);
    CHECK_EQ(len, 1000);
    CHECK(!sack_hole(&s, base + 1000, lost, &seq, &len));    /* rule (1) is done */
    CHECK(sack_hole(&s, base + 1000, base + 5000, &seq, &len));
    CHECK_EQ(seq - base, 2000);          /* it skips the SACKed range to the next hole */
    CHECK_EQ(len, 1000);
    CHECK(sack_hole(&s, base + 3500, max, &seq, &len));
    CHECK_EQ(seq - base, 5000);
    CHECK_EQ(len, 5000);
    CHECK(!sack_hole(&s, base + 3500, base + 5000, &seq, &len));

    /* three ranges above a byte make it lost however small they are */
    memset(&s, 0, sizeof(s));
    const uint32_t c[][2] = {{base + 100, base + 101}, {base + 200, base + 201},
                             {base + 300, base + 301}};
    o = blocks(3, c);
    sack_update(&s, una, max, &o);
    CHECK_EQ(sack_lost_edge(&s, una, mss) - base, 100);
}

/* A connection with a 100 KB answer, segments of 1000 bytes, a SACKing peer. */
static uint8_t answer[100000];
static uint8_t bufs[64][2048];
static struct sp_frame tx[64];
static struct sp_frame_config fcfg = {.ttl = 64, .mtu = 1500};
static struct sp_batch batch = {.tx = tx, .reserved = 64, .cfg = &fcfg};
static struct sp_http_counters k;

static void new_batch(void)
{
    for (unsigned i = 0; i < 64; i++)
        tx[i] = (struct sp_frame){.data = bufs[i], .cap = sizeof(bufs[i])};
}

static uint32_t seq_of(unsigned i)
{
    const uint8_t *h = tx[i].data + 14 + 20;
    return (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
}

static uint32_t len_of(unsigned i)
{
    return tx[i].len - 14 - 40;
}

static void ack(struct tcb *c, uint32_t a, unsigned n, const uint32_t (*e)[2], unsigned *used)
{
    struct sp_tcpip t;
    memset(&t, 0, sizeof(t));
    t.family = 4;
    t.flags = SP_TCP_ACK;
    t.ack = a;
    t.window = 65535;
    t.opt = blocks(n, e);
    ring_on_ack(c, &t, &batch, used, &k);
}

static void setup(struct tcb *c, bool sack, uint32_t iss)
{
    memset(c, 0, sizeof(*c));
    for (unsigned i = 0; i < sizeof(answer); i++)
        answer[i] = (uint8_t)i;
    c->state = ESTABLISHED;
    c->sack_ok = sack;
    c->peer.family = 4;
    c->l2_len = 14;
    c->mss = 1000;
    c->iss = iss;
    c->snd_una = c->snd_nxt = c->snd_max = c->reply_seq = c->recover = c->iss + 1;
    c->snd_wnd = 65535;
    c->cwnd = 20000;
    c->ssthresh = UINT32_MAX;
    c->rto_ms = 1000;
    c->clock_ns = 1000000000;
    c->has_reply = true;
    c->reply.iov[0].iov_base = answer;
    c->reply.iov[0].iov_len = sizeof(answer);
    c->reply.niov = 1;
    c->reply.len = sizeof(answer);
}

/* The probe timer: a hole at the flight's tail with one SACK above it, then a
 * retransmission that is lost too. */
static void probe(void)
{
    static struct tcb c;
    setup(&c, true, 7);
    uint32_t s0 = c.reply_seq;
    c.cwnd = 5000;
    unsigned used = 0;
    new_batch();
    ring_send_more(&c, &batch, &used, &k);
    CHECK_EQ(used, 5);
    used = 0;
    new_batch();
    const uint32_t r1[][2] = {{s0 + 4000, s0 + 5000}};
    ack(&c, s0 + 3000, 1, r1, &used);
    CHECK(!c.recovery);                  /* too little SACKed for IsLost() */
    CHECK(c.probe_at_ns > c.clock_ns);
    CHECK(sack_on_probe(&c, &batch, &used, &k));
    CHECK(c.recovery);
    CHECK_EQ(used, 1);
    CHECK_EQ(seq_of(0) - s0, 3000);
    CHECK_EQ(len_of(0), 1000);
    uint64_t armed = c.probe_at_ns;
    CHECK(armed > c.clock_ns);
    /* duplicate ACKs that move nothing do not defer the probe */
    c.clock_ns += 1000000;
    ack(&c, s0 + 3000, 1, r1, &used);
    CHECK_EQ(c.probe_at_ns, armed);
    ring_send_more(&c, &batch, &used, &k);
    unsigned before = used;
    CHECK(sack_on_probe(&c, &batch, &used, &k));   /* the retransmission was lost too */
    CHECK(ring_send_more(&c, &batch, &used, &k));
    CHECK(used > before);
    CHECK_EQ(seq_of(before) - s0, 3000);
    ack(&c, s0 + 5000, 0, NULL, &used);
    ring_send_more(&c, &batch, &used, &k);
    CHECK(!c.recovery);                  /* the whole flight at recovery's start is through */
    /* no SACKs, no recovery: the probe is the tail loss probe's */
    setup(&c, true, 7);
    used = 0;
    new_batch();
    ring_send_more(&c, &batch, &used, &k);
    CHECK(!sack_on_probe(&c, &batch, &used, &k));
}

/* A small flight with its first segment lost: while the duplicate ACKs report the
 * rest, the pipe shrinks and new data keeps the ACK clock going, so the flight is not
 * empty when recovery ends. */
static void small_flight(void)
{
    static struct tcb c;
    setup(&c, true, 100);
    uint32_t s0 = c.reply_seq;
    c.cwnd = 8000;
    unsigned used = 0;
    new_batch();
    ring_send_more(&c, &batch, &used, &k);
    CHECK_EQ(used, 8);
    unsigned fresh = 0;
    for (uint32_t i = 1; i < 8; i++) {
        used = 0;
        new_batch();
        const uint32_t r[][2] = {{s0 + 1000, s0 + 1000 + 1000 * i}};
        ack(&c, s0, 1, r, &used);
        ring_send_more(&c, &batch, &used, &k);
        for (unsigned j = 0; j < used; j++)
            fresh += !SEQ_LT(seq_of(j), s0 + 8000);
        if (i == 3)
            CHECK(c.recovery);
    }
    CHECK(fresh >= 2);
    CHECK(SEQ_LT(s0 + 8000, c.recover));  /* new data went before recovery, too */
    ack(&c, c.recover, 0, NULL, &used);
    CHECK(!c.recovery);
    CHECK(c.snd_max - c.snd_una >= 1000);
}

static void recovery(int sack)
{
    static struct tcb c;
    setup(&c, sack, 0xfffff000);         /* the flight wraps */
    uint32_t s0 = c.reply_seq;

    unsigned used = 0;
    new_batch();
    CHECK(ring_send_more(&c, &batch, &used, &k));
    CHECK_EQ(used, 20);                  /* cwnd: 20 segments */
    CHECK_EQ(seq_of(19) - s0, 19000);
    CHECK_EQ(memcmp(tx[3].data + 54, answer + 3000, 1000), 0);

    /* segments 0 and 2 are lost; 1 and 3..6 arrive */
    used = 0;
    new_batch();
    const uint32_t r1[][2] = {{s0 + 1000, s0 + 2000}};
    const uint32_t r2[][2] = {{s0 + 3000, s0 + 4000}, {s0 + 1000, s0 + 2000}};
    const uint32_t r3[][2] = {{s0 + 3000, s0 + 7000}, {s0 + 1000, s0 + 2000}};
    ack(&c, s0, 1, r1, &used);
    ack(&c, s0, 2, r2, &used);
    CHECK(!c.recovery);
    CHECK_EQ(used, 0);
    ack(&c, s0, 2, r3, &used);
    CHECK(c.recovery);
    CHECK_EQ(used, 1);                   /* the first hole at once */
    CHECK_EQ(seq_of(0) - s0, 0);
    CHECK_EQ(len_of(0), 1000);
    if (!sack) {
        CHECK_EQ(k.retransmits, 1);
        return;
    }
    CHECK_EQ(c.cwnd, 10000);             /* half the flight, not inflated */
    CHECK_EQ(c.high_rxt - s0, 1000);
    /* the pipe: [2000,3000) is lost (4000 SACKed above), [7000, 20000) in flight,
     * [0, 1000) retransmitted: 14000 > cwnd, nothing more may go yet */
    CHECK(!ring_send_more(&c, &batch, &used, &k));
    /* the retransmission arrives: a partial ACK, more SACKed */
    const uint32_t r4[][2] = {{s0 + 3000, s0 + 12000}};
    ack(&c, s0 + 2000, 1, r4, &used);
    CHECK(c.recovery);
    CHECK(ring_send_more(&c, &batch, &used, &k));
    CHECK_EQ(seq_of(1) - s0, 2000);      /* the next hole, never a SACKed byte */
    CHECK_EQ(len_of(1), 1000);
    for (unsigned i = 2; i < used; i++)  /* then only new data */
        CHECK(!SEQ_LT(seq_of(i), s0 + 20000));
    CHECK_EQ(k.retransmits, 2);
    /* the timer clears the board; going back over the flight skips what is SACKed
     * again after it */
    CHECK(ring_on_timeout(&c, &k));
    CHECK_EQ(c.sack.n, 0);
    CHECK(!c.recovery);
    uint32_t top = c.snd_max;
    const uint32_t r5[][2] = {{s0 + 3000, s0 + 12000}};
    used = 0;
    new_batch();
    ack(&c, s0 + 2000, 1, r5, &used);
    c.cwnd = 3000;
    CHECK(ring_send_more(&c, &batch, &used, &k));
    CHECK_EQ(used, 3);
    CHECK_EQ(seq_of(0) - s0, 2000);
    CHECK_EQ(seq_of(1) - s0, 12000);
    CHECK(SEQ_LT(seq_of(2), top));
    /* the whole flight acknowledged: recovery over, board empty */
    ack(&c, c.snd_max, 0, NULL, &used);
    CHECK_EQ(c.sack.n, 0);
    CHECK(!c.recovery);
}

/* Sender silly-window avoidance: a cwnd that is not a whole number of segments sends
 * whole segments only while ACKs are due, and the rest once the flight is empty. */
static void whole_segments(void)
{
    static struct tcb c;
    setup(&c, false, 300);
    uint32_t s0 = c.reply_seq;
    c.cwnd = 3500;
    unsigned used = 0;
    new_batch();
    ring_send_more(&c, &batch, &used, &k);
    CHECK_EQ(used, 3);
    CHECK_EQ(len_of(2), 1000);
    CHECK_EQ(c.snd_nxt - s0, 3000);
    /* the flight empties with no more room than before: half a segment goes */
    c.snd_wnd = 500;
    used = 0;
    new_batch();
    ack(&c, s0 + 3000, 0, NULL, &used);
    c.snd_wnd = 500;
    c.cwnd = 3500;
    ring_send_more(&c, &batch, &used, &k);
    CHECK_EQ(used, 1);
    CHECK_EQ(len_of(0), 500);
}

int main(void)
{
    board(1000);
    board(0xffffff00);                   /* sequence numbers wrap inside the board */
    lost_pipe_holes(77);
    lost_pipe_holes(0xfffffc00);
    recovery(1);
    probe();
    small_flight();
    whole_segments();
    memset(&k, 0, sizeof(k));
    recovery(0);
    return check_report("test_ring_sack");
}
