/* The memory backend: frames replayed from a buffer, replies captured. See io.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stormpy/app/dns/precopy.h"
#include "stormpy/engine/frame.h"
#include "stormpy/io.h"
#include "stormpy/proto/wire.h"

struct mem_io {
    struct sp_io io;
    const uint8_t *frames;
    size_t len, pos;
    uint64_t rounds_left;
    uint8_t *capture;
    size_t capture_len, capture_max;
    struct sp_precopy *pool;
    uint8_t *pool_mem;           /* private memory: nothing here is a device's */
    uint8_t l4_verified;         /* every frame as a NIC that verified its checksum */
    uint8_t tx_pool[SP_IO_BATCH_MAX][SP_FRAME_MAX];
};

static unsigned mem_rx_burst(struct sp_io *io, struct sp_frame *rx, unsigned max)
{
    struct mem_io *m = (struct mem_io *)io;
    /* the cursor in locals: stores to rx[] could alias m's fields, and would reload them */
    const uint8_t *frames = m->frames;
    size_t len = m->len, pos = m->pos;
    uint8_t l4_verified = m->l4_verified;
    unsigned n = 0;
    while (n < max) {
        if (pos + 2 > len) {                 /* end of the buffer: next round */
            if (m->rounds_left <= 1 || len == 0) {
                io->finished = n == 0;
                break;
            }
            m->rounds_left--;
            pos = 0;
            continue;
        }
        size_t flen = sp_get16(frames + pos);
        if (pos + 2 + flen > len) {          /* a record past the end ends the input */
            pos = len;
            m->rounds_left = 0;
            io->finished = n == 0;
            break;
        }
        /* RX frames are read-only for the fast path; the cast keeps one frame type. */
        rx->data = (uint8_t *)(uintptr_t)(frames + pos + 2);
        rx->len = (uint32_t)flen;
        rx->cap = (uint32_t)flen;
        rx->id = pos;
        rx->l4_verified = l4_verified;
        rx++;
        pos += 2 + flen;
        n++;
    }
    m->pos = pos;
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
    return sp_io_lend_buffers(tx, n, &m->tx_pool[0][0], SP_FRAME_MAX);
}

static void mem_tx_submit(struct sp_io *io, struct sp_frame *tx, unsigned used,
                          struct sp_frame *unused, unsigned nunused)
{
    struct mem_io *m = (struct mem_io *)io;
    (void)unused, (void)nunused;
    /* "sent" at submit: a frame waiting for a kick lives in the ring, not here */
    io->counters.tx_frames += used;
    uint64_t bytes = 0;
    if (!m->capture && !m->pool) {           /* the benchmark's loop: nothing but bytes */
        for (unsigned i = 0; i < used; i++)
            bytes += tx[i].len;
        io->counters.tx_bytes += bytes;
        return;
    }
    for (unsigned i = 0; i < used; i++) {
        bytes += tx[i].len;
        if (m->capture && m->capture_len + 2 + tx[i].len <= m->capture_max) {
            sp_put16(m->capture + m->capture_len, (uint16_t)tx[i].len);
            memcpy(m->capture + m->capture_len + 2, tx[i].data, tx[i].len);
            m->capture_len += 2 + tx[i].len;
        }
        if (tx[i].pool >= 0)
            sp_precopy_complete(m->pool, (uint32_t)tx[i].pool);   /* "sent": copied away */
    }
    io->counters.tx_bytes += bytes;
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

struct sp_io *sp_mem_io_open(const uint8_t *frames, size_t len, uint64_t rounds,
                             size_t capture_max)
{
    struct mem_io *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->io.ops = &mem_ops;
    m->frames = frames;
    m->len = len;
    m->rounds_left = rounds;
    if (capture_max) {
        m->capture = malloc(capture_max);
        if (!m->capture) {
            free(m);
            return NULL;
        }
        m->capture_max = capture_max;
    }
    return &m->io;
}

void sp_mem_io_set_l4_verified(struct sp_io *io, int verified)
{
    ((struct mem_io *)io)->l4_verified = verified != 0;
}

const uint8_t *sp_mem_io_captured(const struct sp_io *io, size_t *len)
{
    const struct mem_io *m = (const struct mem_io *)io;
    *len = m->capture_len;
    return m->capture;
}
