/* The memory backend's replay (io/memory.c): frames, offsets and lengths as the
 * records give them, rounds, a record past the end, the checksum mark; TX buffers
 * lent and the bytes counted. Its records are indexed once, when it opens: these
 * checks hold it to what reading them per burst gave. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stormpy/engine/frame.h"
#include "stormpy/io.h"

/* A blob of records of the given lengths (bytes k+1 for the k-th), with `tail` more
 * bytes after them; the records' offsets in off. */
static size_t make_blob(uint8_t *blob, const unsigned *lens, unsigned n, size_t tail,
                        size_t *off)
{
    size_t len = 0;
    for (unsigned k = 0; k < n; k++) {
        off[k] = len;
        blob[len] = (uint8_t)(lens[k] >> 8);
        blob[len + 1] = (uint8_t)lens[k];
        memset(blob + len + 2, k + 1, lens[k]);
        len += 2 + lens[k];
    }
    memset(blob + len, 0xee, tail);
    return len + tail;
}

/* Every frame the backend replays, in bursts of at most max, into got[] (at most
 * cap); returns how many, and checks that finished comes with the first empty burst
 * and not before. */
static unsigned replay(struct sp_io *io, unsigned max, struct sp_frame *got, unsigned cap)
{
    struct sp_frame rx[SP_IO_BATCH_MAX];
    unsigned total = 0;
    for (int calls = 0; calls < 10000; calls++) {
        unsigned n = io->ops->rx_burst(io, rx, max);
        CHECK(n <= max);
        if (n == 0) {
            CHECK(io->finished);
            break;
        }
        CHECK(!io->finished);
        for (unsigned i = 0; i < n && total < cap; i++)
            got[total++] = rx[i];
    }
    CHECK_EQ(io->counters.rx_frames, total);
    return total;
}

static void test_rounds_and_bursts(void)
{
    static const unsigned lens[] = { 5, 0, 7, 60, 1, 300 };
    const unsigned n = sizeof(lens) / sizeof(lens[0]);
    uint8_t blob[1024];
    size_t off[8];
    for (size_t tail = 0; tail < 2; tail++) {      /* a lone byte after them: no record */
        size_t len = make_blob(blob, lens, n, tail, off);
        for (unsigned rounds = 0; rounds <= 4; rounds++) {
            for (unsigned max = 1; max <= 8; max++) {
                struct sp_io *io = sp_mem_io_open(blob, len, rounds, 0);
                CHECK(io != NULL);
                if (!io)
                    return;
                if (max == 3)
                    sp_mem_io_set_l4_verified(io, 1);
                struct sp_frame got[64];
                unsigned total = replay(io, max, got, 64);
                unsigned want = n * (rounds ? rounds : 1);
                CHECK_EQ(total, want);
                for (unsigned i = 0; i < total && i < want; i++) {
                    unsigned k = i % n;
                    CHECK(got[i].data == blob + off[k] + 2);
                    CHECK_EQ(got[i].len, lens[k]);
                    CHECK_EQ(got[i].cap, lens[k]);
                    CHECK_EQ(got[i].id, off[k]);
                    CHECK_EQ(got[i].l4_verified, max == 3);
                }
                io->ops->close(io);
            }
        }
    }
}

/* A record whose length runs past the end ends the input: what came before it is
 * replayed once, whatever the rounds. */
static void test_record_past_the_end(void)
{
    static const unsigned lens[] = { 10, 20, 30 };
    uint8_t blob[256];
    size_t off[4];
    size_t len = make_blob(blob, lens, 3, 0, off);
    for (size_t cut = 1; cut < 30; cut += 7) {
        for (unsigned rounds = 1; rounds <= 3; rounds++) {
            struct sp_io *io = sp_mem_io_open(blob, len - cut, rounds, 0);
            CHECK(io != NULL);
            if (!io)
                return;
            struct sp_frame got[16];
            CHECK_EQ(replay(io, 4, got, 16), 2);
            CHECK(got[1].data == blob + off[1] + 2);
            io->ops->close(io);
        }
    }
    struct sp_io *io = sp_mem_io_open(blob, 0, 3, 0);   /* nothing at all */
    struct sp_frame got[4];
    CHECK_EQ(replay(io, 4, got, 4), 0);
    io->ops->close(io);
}

static void test_tx_buffers_and_bytes(void)
{
    uint8_t blob[4] = { 0, 2, 1, 2 };
    struct sp_io *io = sp_mem_io_open(blob, sizeof(blob), 1, 0);
    struct sp_frame tx[SP_IO_BATCH_MAX + 4];
    memset(tx, 0x5a, sizeof(tx));
    CHECK_EQ(io->ops->tx_reserve(io, tx, SP_IO_BATCH_MAX + 4), SP_IO_BATCH_MAX);
    for (unsigned i = 0; i < SP_IO_BATCH_MAX; i++) {
        CHECK(i == 0 || tx[i].data == tx[i - 1].data + SP_FRAME_MAX);
        CHECK_EQ(tx[i].cap, SP_FRAME_MAX);
        CHECK_EQ(tx[i].len, 0);
        CHECK_EQ(tx[i].id, i);
        CHECK_EQ(tx[i].pool, -1);
    }
    CHECK_EQ(tx[SP_IO_BATCH_MAX].len, 0x5a5a5a5a);   /* nothing past what was lent */
    uint64_t frames = 0, bytes = 0;
    for (unsigned used = 0; used <= 11; used++) {
        CHECK_EQ(io->ops->tx_reserve(io, tx, used), used);
        for (unsigned i = 0; i < used; i++) {
            tx[i].len = 40 + i * 3 + used;
            bytes += tx[i].len;
        }
        frames += used;
        io->ops->tx_submit(io, tx, used, tx + used, 0);
        CHECK_EQ(io->counters.tx_frames, frames);
        CHECK_EQ(io->counters.tx_bytes, bytes);
    }
    io->ops->close(io);
}

int main(void)
{
    test_rounds_and_bursts();
    test_record_past_the_end();
    test_tx_buffers_and_bytes();
    return check_report("test_memory");
}
