/*
 * A byte limit on what a ring backend keeps in flight on its TX ring, after the
 * kernel's byte queue limits (BQL, seeds/004_*): a reply waits here, in order, while
 * the bytes handed to the device and not yet completed would go over the limit, and
 * the worker takes no new RX frames meanwhile, so a backlog stays in the RX ring (and
 * is dropped there once it is full) instead of turning into queueing delay on TX.
 * A frame larger than the whole limit still goes, alone. Frames are numbered by
 * their UMEM address: index = (addr - base) / frame_size. Used by AF_XDP, whose
 * completion ring says what left; one worker thread only.
 */
#ifndef STORMPY_IO_TX_LIMIT_H
#define STORMPY_IO_TX_LIMIT_H

#include <stdbool.h>
#include <stdint.h>

struct sp_tx_waiting {
    uint64_t addr;
    uint32_t len;
};

struct sp_tx_limit {
    uint64_t limit;                  /* bytes in flight at most; 0: no limit, never held */
    uint64_t inflight;               /* bytes given to the device, not yet completed */
    uint64_t peak;                   /* the most that was ever in flight at once */
    uint64_t base;                   /* address of frame 0 */
    uint32_t frame_shift;            /* log2(frame size) */
    uint32_t nframes;
    uint32_t *sent_len;              /* [nframes]: bytes each frame in flight carries */
    struct sp_tx_waiting *waiting;   /* [nframes], a FIFO: head, count */
    uint32_t head, nwaiting;
};

/* limit 0 leaves t unused (and free() safe); -1 when out of memory. frame_size is a
 * power of two. */
int sp_tx_limit_init(struct sp_tx_limit *t, uint64_t limit, uint64_t base, uint32_t frame_size,
                     uint32_t nframes);
void sp_tx_limit_free(struct sp_tx_limit *t);

/* A reply for the device, queued behind any that wait. */
void sp_tx_limit_queue(struct sp_tx_limit *t, uint64_t addr, uint32_t len);

/* The waiting replies that fit under the limit now, at most max of them, in order,
 * into out[]: they count as in flight from here on. */
unsigned sp_tx_limit_release(struct sp_tx_limit *t, struct sp_tx_waiting *out, unsigned max);

/* The device is done with the frame at addr. */
void sp_tx_limit_completed(struct sp_tx_limit *t, uint64_t addr);

/* True while replies wait or the limit is reached: take no more work. */
static inline bool sp_tx_limit_full(const struct sp_tx_limit *t)
{
    return t->nwaiting || t->inflight >= t->limit;
}

#endif
