/*
 * What the worker loop (worker.h) hands an application once per batch, and what the
 * application hands back: the received frames, the TX buffers reserved for them,
 * and the replies to send. The worker calls its application's batch function with
 * a switch (never an indirect call per frame), between entering and leaving the
 * table, and then submits the replies itself.
 *
 * Replies go to tx[0, used), and out is tx. An application that also sends from
 * buffers of its own (DNS precopy) lists every reply in spare[0, sent) and sets out
 * to spare; used then counts the TX buffers among them. tx[used, reserved) goes back
 * to the backend.
 *
 * A TCP application may also send frames from pieces (gather, io.h), up to 64 KB
 * each, which the kernel or the NIC cuts into segments; the worker sends them before
 * the replies in out.
 *
 * Frames the application cannot answer may go to a slow path: a handler of the
 * worker's process (Python's), called once per batch after the worker has left the
 * table, which writes its replies to tx after the application's.
 */
#ifndef STORMPY_ENGINE_BATCH_H
#define STORMPY_ENGINE_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "stormpy/engine/frame.h"
#include "stormpy/io.h"

/* A frame for the slow path: the received frame and, for UDP, its parsed headers. */
struct sp_slow_packet {
    const struct sp_frame *frame;
    struct sp_frame_query fq;
    uint16_t dport;          /* datagrams: the socket's port */
    uint8_t udp;             /* fq is valid: UDP to the served port */
};

/* The slow path: writes replies for p[0, n) to tx, at most ntx, and returns how many. */
typedef unsigned (*sp_slow_path_fn)(void *ctx, const struct sp_slow_packet *p, unsigned n,
                                    struct sp_frame *tx, unsigned ntx);

struct sp_batch {
    /* Set by the worker */
    struct sp_frame *rx;
    unsigned n;
    struct sp_frame *tx;
    unsigned reserved;       /* TX buffers in tx: at most one reply per buffer */
    bool datagrams;          /* UDP payloads from a socket, not whole frames (io.h) */
    uint64_t generation;     /* the table generation the worker announced on entering */
    const struct sp_frame_config *cfg;
    struct sp_frame_counters *counters;
    struct sp_frame *spare;  /* room for n frames, for an application's own list of replies */
    struct sp_slow_packet *slow;   /* room for n frames for the slow path */
    bool slow_path;          /* the worker has a slow path to hand them to */
    struct sp_gather *gather;   /* room for gather_cap frames sent from pieces (io.h),
                                 * NULL where the backend cannot */
    unsigned gather_cap;
    /* Set by the application */
    struct sp_frame *out;    /* the replies: tx unless the application says otherwise */
    unsigned sent;           /* replies in out */
    unsigned used;           /* TX buffers the replies took, tx[0, used) */
    unsigned nslow;          /* frames in slow for the slow path */
    unsigned unserved;       /* frames left unanswered for want of a TX buffer */
    unsigned ngather;        /* frames in gather, sent before out */
};

/* For an application's loop over rx, before frame i: whether the replies so far
 * (taken) fill the reserved TX buffers. Then frames i to n go unserved: a reply
 * might need a buffer, and none is left. */
static inline bool sp_batch_full(struct sp_batch *b, unsigned i, unsigned taken)
{
    if (taken < b->reserved)
        return false;
    b->unserved = b->n - i;
    return true;
}

#endif
