/* The sender of stormpy's own TCP (app/http/ring_send.c, ring_sack.c) driven by
 * whatever ACKs a peer may send: cumulative ACKs anywhere, SACK blocks with any
 * edges, timeouts and probes in any order. After every step the scoreboard must be
 * sorted, disjoint and within (snd_una, snd_max], the send pointers in order, and
 * every segment sent must carry the answer's own bytes at its sequence number and,
 * in SACK recovery, none the board holds. */
#include <stdint.h>
#include <string.h>

#include "../app/http/ring_internal.h"

#define CHECK(cond)                  \
    do {                             \
        if (!(cond))                 \
            __builtin_trap();        \
    } while (0)

#define TX 16

static uint8_t answer[70000];
static uint8_t bufs[TX][2048];
static struct sp_frame tx[TX];
static struct sp_frame_config fcfg = {.ttl = 64, .mtu = 1500};
static struct sp_batch batch = {.tx = tx, .reserved = TX, .cfg = &fcfg};
static struct sp_http_counters k;
static struct tcb c;

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void check_board(void)
{
    const struct sack_board *s = &c.sack;
    CHECK(s->n <= SACK_RANGES);
    for (unsigned i = 0; i < s->n; i++) {
        CHECK(SEQ_LT(s->edge[i][0], s->edge[i][1]));
        CHECK(SEQ_LEQ(c.snd_una, s->edge[i][0]) && SEQ_LEQ(s->edge[i][1], c.snd_max));
        if (i)
            CHECK(SEQ_LT(s->edge[i - 1][1], s->edge[i][0]));
    }
    CHECK(SEQ_LEQ(c.snd_una, c.snd_nxt) && SEQ_LEQ(c.snd_nxt, c.snd_max));
}

/* The segments in tx[from, used): the answer's bytes, and none SACKed before. */
static void check_sent(unsigned from, unsigned used, const struct sack_board *before,
                       bool recovery)
{
    CHECK(used <= TX);
    for (unsigned i = from; i < used; i++) {
        const uint8_t *h = tx[i].data + 14 + 20;
        uint32_t seq = get32(h + 4), len = tx[i].len - 14 - 40;
        CHECK(len <= c.mss);
        if (!len)
            continue;
        uint32_t off = seq - c.reply_seq;
        CHECK(off < sizeof(answer) && len <= sizeof(answer) - off);
        CHECK(memcmp(h + 20, answer + off, len) == 0);
        if (!recovery)
            continue;
        for (unsigned j = 0; j < before->n; j++)
            CHECK(!(SEQ_LT(seq, before->edge[j][1]) && SEQ_LT(before->edge[j][0], seq + len)));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    for (unsigned i = 0; i < sizeof(answer); i++)
        answer[i] = (uint8_t)(i * 7 + (i >> 8));
    memset(&c, 0, sizeof(c));
    c.state = ESTABLISHED;
    c.sack_ok = data[0] & 1;
    c.peer.family = 4;
    c.l2_len = 14;
    c.mss = (uint16_t)(536 + (data[1] % 4) * 308);
    c.iss = get32((const uint8_t[4]){data[0], data[1], 0xff, 0xf0});
    c.snd_una = c.snd_nxt = c.snd_max = c.reply_seq = c.recover = c.lost_to = c.iss + 1;
    c.snd_wnd = 65535;
    c.cwnd = 10u * c.mss;
    c.ssthresh = UINT32_MAX;
    c.rto_ms = 200;
    c.clock_ns = 1000000000;
    c.has_reply = true;
    c.reply.iov[0].iov_base = answer;
    c.reply.iov[0].iov_len = sizeof(answer);
    c.reply.niov = 1;
    c.reply.len = sizeof(answer);
    for (size_t at = 2; at < size;) {
        for (unsigned i = 0; i < TX; i++)
            tx[i] = (struct sp_frame){.data = bufs[i], .cap = sizeof(bufs[i])};
        unsigned used = 0;
        struct sack_board before = c.sack;
        bool recovery = c.recovery && c.sack_ok;
        uint8_t op = data[at++];
        switch (op % 5) {
        case 0:
            ring_send_more(&c, &batch, &used, &k);
            check_sent(0, used, &before, recovery);
            break;
        case 1: {                        /* an ACK: 4 bytes of ack offset, then blocks */
            if (size - at < 5)
                return 0;
            struct sp_tcpip t;
            memset(&t, 0, sizeof(t));
            t.family = 4;
            t.flags = SP_TCP_ACK;
            t.window = (uint16_t)(get32(data + at) >> 16 | 0x400);
            t.ack = c.snd_una + (get32(data + at) & 0x1ffff) - 0x1000;
            at += 4;
            unsigned n = data[at++] % (SP_TCP_SACK_BLOCKS + 1);
            for (unsigned i = 0; i < n && size - at >= 4; i++, at += 4) {
                t.opt.sack[i][0] = c.snd_una + ((get32(data + at) >> 16) << 2) - 0x2000;
                t.opt.sack[i][1] = t.opt.sack[i][0] + (get32(data + at) & 0xffff);
                t.opt.nsack = (uint8_t)(i + 1);
            }
            ring_on_ack(&c, &t, &batch, &used, &k);
            check_sent(0, used, &before, recovery);
            break;
        }
        case 2:
            ring_on_timeout(&c, &k);
            c.retries = 0;
            break;
        case 3:
            sack_on_probe(&c, &batch, &used, &k);
            check_sent(0, used, &before, true);
            break;
        default:
            c.clock_ns += (uint64_t)op * 100000;
            break;
        }
        check_board();
        CHECK(c.cwnd >= c.mss || c.cwnd == 0);
    }
    return 0;
}
