/*
 * The AF_XDP frame backend (Linux): one UMEM and one XSK socket per NIC queue,
 * behind the same struct sp_io as every frame backend (see io.h), driven by the
 * run-to-completion frame worker (engine/worker.h), one worker per queue. The
 * interface's XDP program (xdp_program.h) steers the queue's traffic to it; the
 * socket is registered in the program's XSKMAP while it is open.
 *
 *   io = sp_xdp_io_open(prog, queue, &cfg, err, sizeof(err));   (one per queue)
 *   ... sp_frame_worker_run() in a thread per queue ...
 *   io->ops->close(io);                                         (before detaching prog)
 *
 * Why it is built this way:
 *  - Zero-copy is tried first, copy mode second (cfg->copy_mode overrides): most
 *    drivers and every virtual device (veth) can only copy.
 *  - The UMEM is split once: RX frames live in the fill ring, the RX ring or the
 *    worker's current batch, and there are exactly as many as the fill ring holds,
 *    so giving a batch back to the fill ring can never fail; TX frames live on a free
 *    stack, the TX ring or the completion ring; precopy copies (pool_frames) follow
 *    and go back to the worker's pool when the completion ring returns them.
 *    Nothing is allocated per packet.
 *  - Every descriptor the kernel hands back (RX and completion) is checked against
 *    the UMEM and the frame size before it is used.
 *  - System calls only when the rings ask for them (XDP_USE_NEED_WAKEUP): the
 *    kick is a sendto() only when the TX ring's need-wakeup flag is set.
 *
 * Errors are one short line in err; nothing here prints. Without -DSP_WITH_XDP
 * sp_xdp_io_open() says the backend is not compiled in.
 */
#ifndef STORMPY_IO_XDP_SOCKET_H
#define STORMPY_IO_XDP_SOCKET_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/io.h"
#include "stormpy/io/xdp_program.h"

enum sp_xdp_copy_mode {
    SP_XDP_COPY_AUTO = 0,       /* zero-copy, else copy */
    SP_XDP_COPY_ALWAYS = 1,     /* XDP_COPY */
    SP_XDP_ZEROCOPY = 2,        /* XDP_ZEROCOPY or fail */
};

/* How rx_burst waits when its RX ring is empty. */
enum sp_xdp_poll {
    SP_XDP_POLL_BLOCK = 0,      /* sleep in poll() (the kernel's softirq fills the ring) */
    SP_XDP_POLL_SPIN = 1,       /* spin on the ring: a core per queue, lowest latency */
    SP_XDP_POLL_NAPI = 2,       /* the kernel's preferred busy polling: each empty round runs
                                 * the queue's NAPI in this thread (SO_PREFER_BUSY_POLL,
                                 * SO_BUSY_POLL, SO_BUSY_POLL_BUDGET); after SP_XDP_NAPI_IDLE
                                 * empty rounds it sleeps in poll() until frames come. Wants
                                 * the interface's napi_defer_hard_irqs and gro_flush_timeout
                                 * set, or interrupts keep running NAPI in softirq. */
};
#define SP_XDP_NAPI_IDLE 64
#define SP_XDP_NAPI_BUSY_US 20    /* SO_BUSY_POLL: only its being nonzero counts here */

/* Zero fields take the default shown. Ring sizes are powers of two. */
struct sp_xdp_config {
    uint32_t frame_size;        /* UMEM frame: 2048 or 4096 (default 2048, a TX cap of 2048
                                 * fits SP_FRAME_MAX; RX frames lose XDP's 256-byte headroom) */
    uint32_t rx_size;           /* RX ring (default 2048) */
    uint32_t fill_size;         /* fill ring = RX frames, >= rx_size (default 2 * rx_size,
                                 * so the NIC still has frames while a batch is out) */
    uint32_t tx_size;           /* TX ring = TX frames (default 2048) */
    uint32_t comp_size;         /* completion ring, >= tx_size (default tx_size) */
    int copy_mode;              /* enum sp_xdp_copy_mode */
    int poll;                   /* enum sp_xdp_poll (default SP_XDP_POLL_BLOCK) */
    int poll_timeout_ms;        /* poll() timeout, so the worker sees its stop flag (100) */
    uint32_t pool_frames;       /* precopy copies kept in the UMEM past the TX frames, lent
                                 * by pool_open (0: none, memcpy mode only) */
    uint32_t tx_limit;          /* bytes on the TX ring not yet completed, at most: replies
                                 * wait and no RX is taken at the limit (io/tx_limit.h;
                                 * 0: no limit) */
};

/* Open queue queue_id of the program's interface. cfg NULL: every default. The
 * returned io belongs to one worker thread; prog must outlive it. */
#ifdef SP_WITH_XDP
struct sp_io *sp_xdp_io_open(struct sp_xdp_prog *prog, uint32_t queue_id,
                             const struct sp_xdp_config *cfg, char *err, size_t errlen);
#endif

/* Beyond io->counters: what this backend and the kernel saw. */
struct sp_xdp_stats {
    int zerocopy;               /* 1: bound XDP_ZEROCOPY, 0: copy mode */
    uint64_t bad_desc;          /* RX/completion descriptors outside the UMEM or frame */
    uint64_t rx_wakeups;        /* recvfrom() calls that woke the driver (need_wakeup on the
                                 * fill ring: zero-copy drivers only) */
    uint64_t tx_kick_errors;    /* sendto() failures other than EAGAIN/EBUSY/ENOBUFS */
    /* the kernel's XDP_STATISTICS for this socket */
    uint64_t rx_dropped;
    uint64_t rx_invalid_descs;
    uint64_t tx_invalid_descs;
    uint64_t rx_ring_full;
    uint64_t rx_fill_ring_empty_descs;
    uint64_t tx_ring_empty_descs;
};
/* Fill stats for an io from sp_xdp_io_open(); 0, or -1 when the kernel's part failed. */
int sp_xdp_io_stats(struct sp_io *io, struct sp_xdp_stats *stats);

#ifndef SP_WITH_XDP
static inline struct sp_io *sp_xdp_io_open(struct sp_xdp_prog *prog, uint32_t queue_id,
                                           const struct sp_xdp_config *cfg, char *err, size_t errlen)
{
    (void)prog, (void)queue_id, (void)cfg;
    snprintf(err, errlen, SP_XDP_NOT_BUILT);
    return NULL;
}
#endif

#endif
