/* The TX byte limit (io/tx_limit.c) against a simulated device that completes frames
 * in order, a random number at a time: the bytes in flight never go over the limit
 * (but for one frame larger than the whole limit, alone), they always equal the sum
 * of what is on the wire, replies leave in the order they came, precopy frames in
 * flight several times at once are counted each time, and everything leaves. */
#include <stdlib.h>

#include "check.h"
#include "../io/tx_limit.h"

#define FRAME 2048u
#define BASE (1u << 20)          /* TX frames start past the RX frames, as in the UMEM */
#define NTX 256u
#define NPOOL 16u
#define STEPS 20000

static struct sp_tx_waiting wire[NTX * 8];   /* released, not completed, in order */
static unsigned wire_head, wire_n;
static uint64_t free_tx[NTX];
static unsigned nfree;
static uint32_t pool_len[NPOOL];

static uint64_t on_wire_bytes(void)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < wire_n; i++)
        sum += wire[(wire_head + i) % (NTX * 8)].len;
    return sum;
}

static void release(struct sp_tx_limit *t, uint64_t *next_out, uint64_t *order)
{
    struct sp_tx_waiting out[32];
    unsigned n;
    while ((n = sp_tx_limit_release(t, out, 32))) {
        for (unsigned i = 0; i < n; i++) {
            CHECK_EQ(out[i].addr, order[(*next_out)++ % (NTX * 8)]);
            wire[(wire_head + wire_n++) % (NTX * 8)] = out[i];
        }
    }
}

static void complete(struct sp_tx_limit *t, unsigned n)
{
    for (; n && wire_n; n--, wire_n--) {
        struct sp_tx_waiting w = wire[wire_head];
        wire_head = (wire_head + 1) % (NTX * 8);
        sp_tx_limit_completed(t, w.addr);
        if (w.addr < BASE + NTX * FRAME)
            free_tx[nfree++] = w.addr;
    }
}

static void random_traffic(uint64_t limit)
{
    struct sp_tx_limit t;
    static uint64_t order[NTX * 8];
    uint64_t queued = 0, next_out = 0, held_back = 0;
    CHECK_EQ(sp_tx_limit_init(&t, limit, BASE, FRAME, NTX + NPOOL), 0);
    wire_head = wire_n = nfree = 0;
    for (unsigned i = 0; i < NTX; i++)
        free_tx[nfree++] = BASE + (uint64_t)i * FRAME;
    for (unsigned i = 0; i < NPOOL; i++)
        pool_len[i] = 60 + (uint32_t)(rand() % 400);
    for (int step = 0; step < STEPS; step++) {
        if (!sp_tx_limit_full(&t)) {                 /* the worker takes a batch */
            unsigned batch = 1 + (unsigned)(rand() % 64);
            for (unsigned i = 0; i < batch && nfree; i++) {
                uint64_t addr;
                uint32_t len;
                if (rand() % 4 == 0) {               /* a precopy frame, maybe in flight already */
                    unsigned p = (unsigned)(rand() % NPOOL);
                    addr = BASE + (uint64_t)(NTX + p) * FRAME;
                    len = pool_len[p];
                } else {
                    addr = free_tx[--nfree];
                    len = rand() % 50 == 0 ? FRAME : 60 + (uint32_t)(rand() % 1440);
                }
                sp_tx_limit_queue(&t, addr, len);
                order[queued++ % (NTX * 8)] = addr;
            }
        } else {
            held_back++;
        }
        release(&t, &next_out, order);
        uint64_t bytes = on_wire_bytes();
        CHECK_EQ(t.inflight, bytes);
        if (bytes > limit) {                         /* only a frame larger than the limit, alone */
            CHECK_EQ(wire_n, 1);
            CHECK(wire[wire_head].len > limit);
        }
        complete(&t, (unsigned)(rand() % 48));
        if (checks_failed)
            break;
    }
    while (t.nwaiting || wire_n) {                   /* the device drains: everything leaves */
        complete(&t, 1000);
        release(&t, &next_out, order);
    }
    CHECK_EQ(next_out, queued);
    CHECK_EQ(t.inflight, 0);
    CHECK(t.peak <= (limit > FRAME ? limit : FRAME));
    CHECK(held_back > 0);                            /* the limit did hold the worker back */
    sp_tx_limit_free(&t);
}

static void off_by_default(void)
{
    struct sp_tx_limit t;
    CHECK_EQ(sp_tx_limit_init(&t, 0, BASE, FRAME, NTX), 0);
    CHECK(t.sent_len == NULL && t.waiting == NULL && t.limit == 0);
    sp_tx_limit_free(&t);
}

int main(void)
{
    srand(13);
    off_by_default();
    random_traffic(1500);      /* less than some frames: those go alone */
    random_traffic(4096);
    random_traffic(65536);
    return check_report("test_tx_limit");
}
