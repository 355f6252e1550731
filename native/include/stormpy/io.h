/*
 * One I/O interface for every backend (sockets, memory, AF_PACKET, AF_XDP, netmap).
 *
 * A backend is a `struct sp_io` whose first member points to its function table.
 * The worker calls each function once per batch, never per packet:
 *
 *   n = rx_burst(io, rx, batch)        frames received (buffers stay the backend's)
 *   reclaim(io)                        take back buffers the NIC has finished sending
 *   m = tx_reserve(io, tx, n)          up to n free TX buffers
 *   ... answer rx[i] into tx[j] ...
 *   tx_submit(io, sent, k, unused, u)  queue the k frames in sent, return the u unused
 *   rx_release(io, rx, n)              give the RX buffers back (refill)
 *   kick(io)                           one system call, only when the ring needs it
 *   tx_gather(io, g, n)                frames sent from pieces, each cut into segments
 *                                      by the kernel or the NIC (GSO/TSO); NULL where
 *                                      the backend cannot, and io->gather says whether
 *                                      it is on
 *
 * In precopy mode (see precopy.h) the worker also calls pool_open() once, before it
 * runs: the backend lends the worker's pool frames of its own packet memory, so a
 * reply can be sent straight from a ready-made copy. `sent` then mixes pool frames
 * (pool >= 0) with TX buffers from tx_reserve; `unused` holds only TX buffers. The
 * backend calls sp_precopy_complete() when it no longer needs a pool frame (sent,
 * or refused), never before: the worker rewrites idle copies only.
 *
 * Each backend has its own constructor; close() undoes it.
 *
 * Most backends carry whole Ethernet frames. The socket backend carries UDP
 * payloads instead (io->datagrams): the kernel owns the headers, so a reply
 * names the request it answers by copying the request's id into its own
 * (tx[j].id = rx[i].id) and the backend sends it to that request's peer.
 */
#ifndef STORMPY_IO_H
#define STORMPY_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define SP_IO_BATCH_MAX 256

struct sp_frame {
    uint8_t *data;
    uint32_t len;
    uint32_t cap;
    uint64_t id;     /* the backend's buffer identity (UMEM address, ring slot) */
    int32_t pool;    /* the precopy pool frame's index, or -1: a buffer from tx_reserve */
    /* RX: the kernel vouches for the UDP/TCP checksum (AF_PACKET's TP_STATUS_CSUM_VALID:
     * the NIC verified it; TP_STATUS_CSUMNOTREADY: sent from this host, not summed
     * yet), so the frame path does not sum the datagram again. 0: verify it. */
    uint8_t l4_verified;
    const uint8_t *src;   /* datagrams only: the sender's address (4 or 16 bytes) */
    uint8_t src_family;   /* 4 or 6 */
    uint16_t src_port;    /* datagrams only: the sender's port */
    const uint8_t *dst;   /* datagrams on a wildcard socket: the address asked (src_family's
                           * length); NULL: the socket's own address */
};

/* tx_reserve for a backend whose TX buffers are its own memory (the memory backend,
 * AF_PACKET in precopy mode): up to n of the SP_IO_BATCH_MAX buffers of `size`
 * bytes at `base`, every one free again by the next batch. */
static inline unsigned sp_io_lend_buffers(struct sp_frame *tx, unsigned n, uint8_t *base,
                                          uint32_t size)
{
    if (n > SP_IO_BATCH_MAX)
        n = SP_IO_BATCH_MAX;
    for (unsigned i = 0; i < n; i++) {
        tx[i].data = base + (size_t)i * size;
        tx[i].cap = size;
        tx[i].len = 0;
        tx[i].id = i;
        tx[i].pool = -1;
    }
    return n;
}

struct sp_io_counters {
    uint64_t rx_frames;
    uint64_t tx_frames;
    uint64_t tx_bytes;
    uint64_t tx_ring_full;   /* answers lost because no TX buffer was free */
    uint64_t kicks;
    uint64_t rx_truncated;   /* datagrams larger than the receive buffer (dropped) */
    uint64_t tx_errors;      /* replies the kernel refused */
    uint64_t tx_gathered;    /* frames sent by tx_gather (each counted in tx_frames as
                              * the segments it is cut into) */
    uint64_t tx_held;        /* replies that waited for the TX byte limit (AF_XDP --tx-limit) */
    uint64_t tx_inflight_peak;   /* the most TX bytes in flight at once under that limit
                                  * (a maximum, not a count) */
};

/*
 * A TCP frame sent from pieces: its headers here, its payload where it lies (the
 * table), up to 64 KB of it, which the kernel or the NIC cuts into segments of
 * gso_size payload bytes, each with the headers copied, the sequence number moved
 * on, and its checksum finished (the TCP checksum field holds the pseudo-header's
 * sum: sp_tcpip_write_offload). One send instead of one frame per segment: this is
 * what a kernel TCP gets from TSO, and what made large files cheap for it.
 */
#define SP_GATHER_HEAD_MAX 128
#define SP_GATHER_IOV 8
#define SP_GATHER_BATCH 32
#define SP_GATHER_PAYLOAD_MAX 65000   /* an IPv4 total length stays below 65,536 */

struct sp_gather {
    uint8_t head[SP_GATHER_HEAD_MAX];   /* link, IP and TCP headers */
    uint16_t head_len;
    uint16_t l4_at;          /* the TCP header's offset in head */
    uint16_t gso_size;       /* payload bytes a segment; 0: sent as it is */
    uint8_t ipv6;
    uint8_t niov;
    uint32_t len;            /* payload bytes in iov */
    struct iovec iov[SP_GATHER_IOV];
};

struct sp_io;
struct sp_precopy;

struct sp_io_ops {
    const char *name;
    unsigned (*rx_burst)(struct sp_io *io, struct sp_frame *rx, unsigned max);
    void (*reclaim)(struct sp_io *io);
    unsigned (*tx_reserve)(struct sp_io *io, struct sp_frame *tx, unsigned n);
    void (*tx_submit)(struct sp_io *io, struct sp_frame *sent, unsigned nsent,
                      struct sp_frame *unused, unsigned nunused);
    void (*rx_release)(struct sp_io *io, struct sp_frame *rx, unsigned n);
    void (*kick)(struct sp_io *io);
    void (*close)(struct sp_io *io);
    /* Lend the pool its frames (sp_precopy_set_frame for each). NULL: the backend
     * cannot send from arbitrary buffers. 0, or -1 with a one-line reason in err. */
    int (*pool_open)(struct sp_io *io, struct sp_precopy *pool, char *err, size_t errlen);
    /* Send g[0, n) now, in order (before the batch's tx_submit). */
    void (*tx_gather)(struct sp_io *io, const struct sp_gather *g, unsigned n);
};

struct sp_io {
    const struct sp_io_ops *ops;
    struct sp_io_counters counters;
    int finished;    /* no input will ever come again (the memory backend's end) */
    int rx_nowait;   /* set by the worker while replies wait for a kick: rx_burst must
                      * not block, so an idle ring flushes them at once */
    int datagrams;   /* frames are UDP payloads, not Ethernet frames (sockets) */
    int error;       /* an errno that ends the worker: the backend cannot go on */
    int gather;      /* tx_gather may be called */
};

/*
 * The memory backend: RX replays frames from a buffer (`rounds` times), TX keeps
 * count and, up to capture_max bytes, a copy of every frame sent. For tests,
 * benchmarks and labs; no kernel involved.
 * frames: concatenated records of a 2-byte big-endian length and the frame.
 */
struct sp_io *sp_mem_io_open(const uint8_t *frames, size_t len, uint64_t rounds,
                             size_t capture_max);
/* Every replayed frame marked as a NIC marks those whose checksum it verified
 * (sp_frame.l4_verified): what the frame path costs with checksum offload. */
void sp_mem_io_set_l4_verified(struct sp_io *io, int verified);
/* The captured TX frames, in the same record format. */
const uint8_t *sp_mem_io_captured(const struct sp_io *io, size_t *len);

#endif
