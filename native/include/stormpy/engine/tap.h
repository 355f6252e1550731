/*
 * The tap: copies of the frames a ring worker receives and sends, for `stormpy tap`.
 *
 * AF_XDP takes frames before the kernel's packet taps see them, so tcpdump shows
 * nothing of what the workers answer. Instead each worker copies its frames into a
 * ring of its own in the tap region, a file (under /dev/shm) the server maps before
 * its workers fork and `stormpy tap` maps too. The workers copy only while a tap is
 * attached: the worker loop asks sp_tap_ring_on() once per batch, and with no tap
 * that is one load and one branch, no per-frame cost at all.
 *
 * The tap attaches by writing its session (its pid) into `attached`, and shows it
 * is alive by writing its monotonic clock into `heartbeat_ns` at least every
 * SP_TAP_HEARTBEAT_NS. A tap that dies (even by SIGKILL) stops the copying by
 * itself: a worker that finds the heartbeat older than SP_TAP_STALE_NS detaches
 * the session and copies nothing.
 *
 * Each ring has one producer (its worker) and one consumer (the tap). head and tail
 * count bytes from the start, never wrapping; a record is a struct sp_tap_record
 * and the frame's first caplen bytes, padded to SP_TAP_ALIGN. A record that would
 * cross the ring's end is preceded by a skip record (dir SP_TAP_SKIP) filling the
 * rest of the lap. A frame that does not fit in the free room is dropped and counted.
 */
#ifndef STORMPY_ENGINE_TAP_H
#define STORMPY_ENGINE_TAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stormpy/io.h"

#define SP_TAP_MAGIC 0x31307061747073ull       /* "sptap01" */
#define SP_TAP_ALIGN 32u
#define SP_TAP_HEARTBEAT_NS 100000000ull       /* the tap writes its heartbeat this often */
#define SP_TAP_STALE_NS 2000000000ull          /* a tap silent this long is gone */

enum sp_tap_dir { SP_TAP_SKIP = 0, SP_TAP_RX = 1, SP_TAP_TX = 2 };

struct sp_tap_region {
    uint64_t magic;
    uint32_t rings;                  /* one per worker */
    uint32_t snaplen;                /* bytes kept of a frame */
    uint64_t ring_bytes;             /* data bytes per ring: a power of two */
    uint32_t attached;               /* the tap's session, 0 for none: __atomic */
    uint32_t pad0;
    uint64_t heartbeat_ns;           /* the tap's CLOCK_MONOTONIC: __atomic */
    char pad[64 - 4 * sizeof(uint64_t)];
};

struct sp_tap_ring {
    uint64_t head;                   /* written by the worker (release) */
    char pad0[56];
    uint64_t tail;                   /* written by the tap (release) */
    char pad1[56];
    uint64_t records;                /* frames copied, by the worker */
    uint64_t drops;                  /* frames that found the ring full */
    char pad2[48];
    /* ring_bytes of records follow */
};

struct sp_tap_record {
    uint32_t size;                   /* the whole record, padding included */
    uint32_t caplen;                 /* frame bytes that follow */
    uint32_t len;                    /* the frame's length on the wire */
    uint16_t dir;                    /* enum sp_tap_dir */
    uint16_t pad;
    uint64_t ts_ns;                  /* CLOCK_MONOTONIC when the batch was taken */
    uint64_t pad1;
};

/* The region's size for `rings` rings of ring_bytes each. */
static inline size_t sp_tap_region_size(uint32_t rings, uint64_t ring_bytes)
{
    return sizeof(struct sp_tap_region) + (size_t)rings * (sizeof(struct sp_tap_ring) + ring_bytes);
}

static inline struct sp_tap_ring *sp_tap_ring_at(struct sp_tap_region *r, uint32_t index)
{
    return (struct sp_tap_ring *)((char *)(r + 1) +
                                  (size_t)index * (sizeof(struct sp_tap_ring) + r->ring_bytes));
}

/* Lays out a zeroed region of sp_tap_region_size() bytes. -1 for a ring size that
 * is not a power of two of at least 64 KiB. */
int sp_tap_region_init(struct sp_tap_region *r, uint32_t rings, uint64_t ring_bytes,
                       uint32_t snaplen);

/* A tap is attached and alive: the ring of worker `index`, and *now the time. */
struct sp_tap_ring *sp_tap_ring_live(struct sp_tap_region *r, int index, uint64_t *now);

/* Once per batch in the worker: the ring to copy this batch's frames into, or NULL
 * when there is no tap (the fast path: one load and one branch). */
static inline struct sp_tap_ring *sp_tap_ring_on(struct sp_tap_region *r, int index,
                                                 uint64_t *now)
{
    if (__builtin_expect(r == NULL || !__atomic_load_n(&r->attached, __ATOMIC_RELAXED), 1))
        return NULL;
    return sp_tap_ring_live(r, index, now);
}

/* Copies frames f[0, n) into ring (dir: SP_TAP_RX or SP_TAP_TX), stamped now. */
void sp_tap_copy(struct sp_tap_region *r, struct sp_tap_ring *ring, const struct sp_frame *f,
                 unsigned n, int dir, uint64_t now);
/* Copies sent frames gathered from pieces (io.h), each as the one frame of up to 64 KB
 * that the kernel or the NIC then cuts into segments: what tcpdump shows of a kernel
 * TCP's sends with TSO. */
void sp_tap_copy_gathered(struct sp_tap_region *r, struct sp_tap_ring *ring,
                          const struct sp_gather *g, unsigned n, uint64_t now);

/* The tap's side. Attaches session (nonzero) unless another live tap holds the
 * region: 0, or the session holding it. */
uint32_t sp_tap_attach(struct sp_tap_region *r, uint32_t session, uint64_t now);
/* The tap is alive: written at least every SP_TAP_HEARTBEAT_NS. */
void sp_tap_heartbeat(struct sp_tap_region *r, uint64_t now);
/* The live tap's session, or 0 (none, or one silent for SP_TAP_STALE_NS). */
uint32_t sp_tap_session(struct sp_tap_region *r, uint64_t now);
/* Detaches session if it is still the attached one. */
void sp_tap_detach(struct sp_tap_region *r, uint32_t session);
/* The next record of ring (skips taken), or NULL when it is empty; sp_tap_consume()
 * then gives its bytes back to the worker. */
const struct sp_tap_record *sp_tap_peek(struct sp_tap_region *r, struct sp_tap_ring *ring);
void sp_tap_consume(struct sp_tap_ring *ring, const struct sp_tap_record *rec);

#endif
