/*
 * The AF_XDP frame backend (Linux): one UMEM and one XSK socket per NIC queue,
 * behind the same struct sp_io as every frame backend (see io.h), driven by the
 * run-to-completion frame worker (worker.h), one worker per queue.
 *
 * Two objects, because their lifetimes differ:
 *
 *   struct sp_xdp_prog  one per interface: the XDP program (native/bpf/steer.bpf.c)
 *                       that sends UDP to the served port to the queue's socket and
 *                       everything else to the kernel, and its XSKMAP.
 *   struct sp_io        one per queue: the UMEM, its four rings and the socket,
 *                       registered in the program's XSKMAP while it is open.
 *
 *   prog = sp_xdp_prog_attach("eth0", 53, SP_XDP_ATTACH_AUTO, err, sizeof(err));
 *   io   = sp_xdp_io_open(prog, queue, &cfg, err, sizeof(err));   (one per queue)
 *   ... sp_frame_worker_run() in a thread per queue ...
 *   io->ops->close(io);                                           (every queue first)
 *   sp_xdp_prog_detach(prog);
 *
 * Why it is built this way:
 *  - The program is attached through a BPF link where the kernel has them (5.9+):
 *    the link belongs to this process, so a crash, kill -9 included, detaches it
 *    and no stale program keeps eating port-53 traffic. A kernel without XDP links
 *    gets the classic netlink attach; a stormpy program left from such an attach is
 *    recognised by its name (stormpy_steer) and detached first. Another program on
 *    the interface (or a live stormpy's link) is an error, never replaced.
 *  - Native (driver) mode is tried first, generic (SKB) mode second: every
 *    interface can do generic mode, native mode is what makes it fast.
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
 * Errors are one short line in err (e.g. "AF_XDP: interface veth0 not found");
 * nothing here prints. libbpf's own messages are captured while this file calls
 * libbpf and the last one is appended to a load error; that capture swaps the
 * process-wide libbpf print function, so attach from one thread at a time.
 *
 * The whole backend is compiled only with -DSP_WITH_XDP (and linked with -lxdp
 * -lbpf); without it xdp.c is empty, so a build without libxdp keeps working.
 */
#ifndef STORMPY_XDP_IO_H
#define STORMPY_XDP_IO_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/io.h"

enum sp_xdp_attach_mode {
    SP_XDP_ATTACH_AUTO = 0,     /* native, else generic */
    SP_XDP_ATTACH_NATIVE = 1,   /* driver mode only */
    SP_XDP_ATTACH_GENERIC = 2,  /* SKB mode only (any interface, slower) */
};

enum sp_xdp_copy_mode {
    SP_XDP_COPY_AUTO = 0,       /* zero-copy, else copy */
    SP_XDP_COPY_ALWAYS = 1,     /* XDP_COPY */
    SP_XDP_ZEROCOPY = 2,        /* XDP_ZEROCOPY or fail */
};

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
    int poll_busy;              /* nonzero: rx_burst spins on the RX ring (a core per queue,
                                 * lowest latency); zero: it sleeps in poll() */
    int poll_timeout_ms;        /* poll() timeout, so the worker sees its stop flag (100) */
    uint32_t pool_frames;       /* precopy copies kept in the UMEM past the TX frames, lent
                                 * by pool_open (0: none, memcpy mode only) */
};

struct sp_xdp_prog;

/* Load the embedded steer.bpf.o (built into xdp.c with -DSP_XDP_BPF_OBJ="path"), set
 * the served port (0: steer every frame, for a responder that answers ARP and ICMP
 * itself), and attach it to ifname. NULL with err set on failure. */
#ifdef SP_WITH_XDP
struct sp_xdp_prog *sp_xdp_prog_attach(const char *ifname, uint16_t port,
                                       enum sp_xdp_attach_mode mode, char *err, size_t errlen);
#endif
/* The same from an object file (obj_path NULL: the embedded one). */
struct sp_xdp_prog *sp_xdp_prog_attach_file(const char *obj_path, const char *ifname,
                                            uint16_t port, enum sp_xdp_attach_mode mode,
                                            char *err, size_t errlen);
/* Detach the program (only if it is still ours) and free prog. Close every queue's
 * sp_io first. NULL is ignored. */
#ifdef SP_WITH_XDP
void sp_xdp_prog_detach(struct sp_xdp_prog *prog);
#endif

/* How the program ended up attached: SP_XDP_ATTACH_NATIVE or SP_XDP_ATTACH_GENERIC. */
#ifdef SP_WITH_XDP
enum sp_xdp_attach_mode sp_xdp_prog_mode(const struct sp_xdp_prog *prog);
#endif
/* Whether a BPF link holds it (1), or a netlink attach (0). */
int sp_xdp_prog_uses_link(const struct sp_xdp_prog *prog);
/* The number of receive queues the interface has (queue ids are 0..n-1). */
#ifdef SP_WITH_XDP
unsigned sp_xdp_prog_queues(const struct sp_xdp_prog *prog);
#endif

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
/* Built without libxdp: the same calls, each saying so, so callers need no #ifdef. */
#include <stdio.h>
#define SP_XDP_NOT_BUILT "AF_XDP: not compiled in (build with libxdp-dev, libbpf-dev and clang)"
static inline struct sp_xdp_prog *sp_xdp_prog_attach(const char *ifname, uint16_t port,
                                                     enum sp_xdp_attach_mode mode, char *err,
                                                     size_t errlen)
{
    (void)ifname, (void)port, (void)mode;
    snprintf(err, errlen, SP_XDP_NOT_BUILT);
    return NULL;
}
static inline void sp_xdp_prog_detach(struct sp_xdp_prog *prog)
{
    (void)prog;
}
static inline enum sp_xdp_attach_mode sp_xdp_prog_mode(const struct sp_xdp_prog *prog)
{
    (void)prog;
    return SP_XDP_ATTACH_AUTO;
}
static inline unsigned sp_xdp_prog_queues(const struct sp_xdp_prog *prog)
{
    (void)prog;
    return 0;
}
static inline struct sp_io *sp_xdp_io_open(struct sp_xdp_prog *prog, uint32_t queue_id,
                                           const struct sp_xdp_config *cfg, char *err, size_t errlen)
{
    (void)prog, (void)queue_id, (void)cfg;
    snprintf(err, errlen, SP_XDP_NOT_BUILT);
    return NULL;
}
#endif

static inline int sp_have_xdp(void)
{
#ifdef SP_WITH_XDP
    return 1;
#else
    return 0;
#endif
}

#endif
