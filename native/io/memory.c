/* The memory backend: frames replayed from a buffer, replies captured. See io.h. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stormpy/app/dns/precopy.h"
#include "stormpy/engine/frame.h"
#include "stormpy/io.h"
#include "stormpy/proto/wire.h"

/* What rx_burst fills in a received frame (data to l4_verified), and tx_reserve in a
 * lent one: copied whole from frames made once, a few moves where each field was
 * worked out and stored per frame. */
#define FRAME_HEAD offsetof(struct sp_frame, src)

struct mem_io {
    struct sp_io io;
    /* Each record of the input as a received frame, its length checked once, at open:
     * the input is immutable, and replayed rounds times. */
    struct sp_frame *index;
    size_t count, next;
    uint64_t rounds_left;
    uint8_t *capture;
    size_t capture_len, capture_max;
    struct sp_precopy *pool;
    uint8_t *pool_mem;           /* private memory: nothing here is a device's */
    struct sp_frame lent[SP_IO_BATCH_MAX];   /* tx_pool's buffers as tx_reserve lends them */
    uint8_t tx_pool[SP_IO_BATCH_MAX][SP_FRAME_MAX];
};

/* n frames' heads, four a round (a quarter of the loop's tests); returns to + n. */
static inline struct sp_frame *copy_heads(struct sp_frame *to, const struct sp_frame *from,
                                          size_t n)
{
    for (; n >= 4; n -= 4, to += 4, from += 4) {
        memcpy(to, from, FRAME_HEAD);
        memcpy(to + 1, from + 1, FRAME_HEAD);
        memcpy(to + 2, from + 2, FRAME_HEAD);
        memcpy(to + 3, from + 3, FRAME_HEAD);
    }
    for (; n; n--)
        memcpy(to++, from++, FRAME_HEAD);
    return to;
}

static unsigned mem_rx_burst(struct sp_io *io, struct sp_frame *rx, unsigned max)
{
    struct mem_io *m = (struct mem_io *)io;
    /* the cursor in locals: stores to rx[] could alias m's fields, and would reload them */
    const struct sp_frame *index = m->index;
    size_t count = m->count, next = m->next;
    unsigned n = 0;
    while (n < max) {
        if (next == count) {                 /* end of the input: next round */
            if (m->rounds_left <= 1 || count == 0) {
                io->finished = n == 0;
                break;
            }
            m->rounds_left--;
            next = 0;
            continue;
        }
        size_t k = count - next < max - n ? count - next : max - n;
        rx = copy_heads(rx, index + next, k);
        next += k;
        n += (unsigned)k;
    }
    m->next = next;
    io->counters.rx_frames += n;
    return n;
}

static void mem_reclaim(struct sp_io *io)
{
    (void)io;
}

static unsigned mem_tx_reserve(struct sp_io *io, struct sp_frame *tx, unsigned n)
{
    struct mem_io *m = (struct mem_io *)io;
    if (n > SP_IO_BATCH_MAX)
        n = SP_IO_BATCH_MAX;
    copy_heads(tx, m->lent, n);
    return n;
}

/* Captured and pool frames: out of line, so that the benchmark's loop saves no
 * registers for them. */
static __attribute__((noinline)) void submit_kept(struct mem_io *m, struct sp_frame *tx,
                                                  unsigned used)
{
    for (unsigned i = 0; i < used; i++) {
        if (m->capture && m->capture_len + 2 + tx[i].len <= m->capture_max) {
            sp_put16(m->capture + m->capture_len, (uint16_t)tx[i].len);
            memcpy(m->capture + m->capture_len + 2, tx[i].data, tx[i].len);
            m->capture_len += 2 + tx[i].len;
        }
        if (tx[i].pool >= 0)
            sp_precopy_complete(m->pool, (uint32_t)tx[i].pool);   /* "sent": copied away */
    }
}

static void mem_tx_submit(struct sp_io *io, struct sp_frame *tx, unsigned used,
                          struct sp_frame *unused, unsigned nunused)
{
    struct mem_io *m = (struct mem_io *)io;
    (void)unused, (void)nunused;
    /* "sent" at submit: a frame waiting for a kick lives in the ring, not here */
    io->counters.tx_frames += used;
    /* four frames a round: a quarter of the loop's tests */
    uint64_t b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    const struct sp_frame *f = tx, *end = tx + used;
    for (; end - f >= 4; f += 4) {
        b0 += f[0].len;
        b1 += f[1].len;
        b2 += f[2].len;
        b3 += f[3].len;
    }
    for (; f < end; f++)
        b0 += f->len;
    io->counters.tx_bytes += b0 + b1 + b2 + b3;
    if (m->capture || m->pool)
        submit_kept(m, tx, used);
}

static int mem_pool_open(struct sp_io *io, struct sp_precopy *pool, char *err, size_t errlen)
{
    struct mem_io *m = (struct mem_io *)io;
    unsigned n = sp_precopy_frames(pool);
    if (m->pool_mem) {
        snprintf(err, errlen, "memory: the pool is already open");
        return -1;
    }
    m->pool_mem = sp_precopy_lend_heap(pool);
    if (!m->pool_mem) {
        snprintf(err, errlen, "memory: no memory for %u pool frames", n);
        return -1;
    }
    m->pool = pool;
    return 0;
}

static void mem_rx_release(struct sp_io *io, struct sp_frame *rx, unsigned n)
{
    (void)io, (void)rx, (void)n;
}

static void mem_kick(struct sp_io *io)
{
    io->counters.kicks++;
}

static void mem_close(struct sp_io *io)
{
    struct mem_io *m = (struct mem_io *)io;
    free(m->index);
    free(m->capture);
    free(m->pool_mem);
    free(m);
}

static const struct sp_io_ops mem_ops = {
    .name = "memory",
    .rx_burst = mem_rx_burst,
    .reclaim = mem_reclaim,
    .tx_reserve = mem_tx_reserve,
    .tx_submit = mem_tx_submit,
    .rx_release = mem_rx_release,
    .kick = mem_kick,
    .close = mem_close,
    .pool_open = mem_pool_open,
};

/* The records of frames up to the first that runs past len (then *truncated), each as
 * a received frame into index when not NULL; returns their count. */
static size_t index_records(const uint8_t *frames, size_t len, struct sp_frame *index,
                            int *truncated)
{
    size_t count = 0, pos = 0;
    *truncated = 0;
    while (pos + 2 <= len) {
        size_t flen = sp_get16(frames + pos);
        if (pos + 2 + flen > len) {          /* a record past the end ends the input */
            *truncated = 1;
            break;
        }
        if (index) {
            struct sp_frame *f = &index[count];
            /* RX frames are read-only for the fast path; the cast keeps one frame type. */
            f->data = (uint8_t *)(uintptr_t)(frames + pos + 2);
            f->len = (uint32_t)flen;
            f->cap = (uint32_t)flen;
            f->id = pos;
            f->pool = -1;
            f->l4_verified = 0;
        }
        count++;
        pos += 2 + flen;
    }
    return count;
}

struct sp_io *sp_mem_io_open(const uint8_t *frames, size_t len, uint64_t rounds,
                             size_t capture_max)
{
    struct mem_io *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->io.ops = &mem_ops;
    int truncated;
    m->count = index_records(frames, len, NULL, &truncated);
    m->index = calloc(m->count ? m->count : 1, sizeof(*m->index));
    if (!m->index) {
        free(m);
        return NULL;
    }
    index_records(frames, len, m->index, &truncated);
    /* a record past the end: what came before it is played once */
    m->rounds_left = truncated && rounds > 1 ? 1 : rounds;
    sp_io_lend_buffers(m->lent, SP_IO_BATCH_MAX, &m->tx_pool[0][0], SP_FRAME_MAX);
    if (capture_max) {
        m->capture = malloc(capture_max);
        if (!m->capture) {
            free(m->index);
            free(m);
            return NULL;
        }
        m->capture_max = capture_max;
    }
    return &m->io;
}

void sp_mem_io_set_l4_verified(struct sp_io *io, int verified)
{
    struct mem_io *m = (struct mem_io *)io;
    for (size_t i = 0; i < m->count; i++)
        m->index[i].l4_verified = verified != 0;
}

const uint8_t *sp_mem_io_captured(const struct sp_io *io, size_t *len)
{
    const struct mem_io *m = (const struct mem_io *)io;
    *len = m->capture_len;
    return m->capture;
}
