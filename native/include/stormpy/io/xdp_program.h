/*
 * The XDP program of the AF_XDP backend (Linux): one per interface, it sends UDP to
 * the served port to the AF_XDP socket of the queue it arrived on (xdp_socket.h) and
 * everything else to the kernel. Its XSKMAP is where each queue's socket registers.
 *
 *   prog = sp_xdp_prog_attach("eth0", 53, SP_XDP_ATTACH_AUTO, err, sizeof(err));
 *   ... one sp_xdp_io_open(prog, queue, ...) per queue (xdp_socket.h) ...
 *   sp_xdp_prog_detach(prog);                   (after every queue's io is closed)
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
 *
 * Errors are one short line in err (e.g. "AF_XDP: interface veth0 not found");
 * nothing here prints. libbpf's own messages are captured while the backend calls
 * libbpf and the last one is appended to a load error; that capture swaps the
 * process-wide libbpf print function, so attach from one thread at a time.
 *
 * The backend is compiled only with -DSP_WITH_XDP (and linked with -lxdp -lbpf);
 * without it its files are empty and the calls below say so, so a build without
 * libxdp keeps working and callers need no #ifdef.
 */
#ifndef STORMPY_IO_XDP_PROGRAM_H
#define STORMPY_IO_XDP_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sp_xdp_attach_mode {
    SP_XDP_ATTACH_AUTO = 0,     /* native, else generic */
    SP_XDP_ATTACH_NATIVE = 1,   /* driver mode only */
    SP_XDP_ATTACH_GENERIC = 2,  /* SKB mode only (any interface, slower) */
};

struct sp_xdp_prog;

/* What the program does with a query to the port before steering it (bits). */
enum sp_xdp_stage {
    SP_XDP_STEER = 0,
    SP_XDP_ANSWER = 1,
    SP_XDP_REFLECT = 2,
};

/* Load the embedded steer.bpf.o (built into xdp_program.c with -DSP_XDP_BPF_OBJ="path"),
 * set the served port (0: steer every frame, for a responder that answers ARP and
 * ICMP itself) and its protocol (UDP, or TCP with tcp set: serve-http's own TCP), and
 * attach it to ifname. stages: SP_XDP_ANSWER answers the UDP queries the answer map
 * holds in the driver (xdp_answer.h); SP_XDP_REFLECT sends every query back as its
 * own reply (a benchmark's floor). NULL with err set on failure. */
#ifdef SP_WITH_XDP
struct sp_xdp_prog *sp_xdp_prog_attach(const char *ifname, uint16_t port, bool tcp, unsigned stages,
                                       enum sp_xdp_attach_mode mode, char *err, size_t errlen);
#endif
/* The same from an object file (obj_path NULL: the embedded one). */
struct sp_xdp_prog *sp_xdp_prog_attach_file(const char *obj_path, const char *ifname,
                                            uint16_t port, bool tcp, unsigned stages,
                                            enum sp_xdp_attach_mode mode, char *err,
                                            size_t errlen);
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

#ifndef SP_WITH_XDP
/* Built without libxdp: the same calls, each saying so. */
#include <stdio.h>
#define SP_XDP_NOT_BUILT "AF_XDP: not compiled in (build with libxdp-dev, libbpf-dev and clang)"
static inline struct sp_xdp_prog *sp_xdp_prog_attach(const char *ifname, uint16_t port,
                                                     bool tcp, unsigned stages,
                                                     enum sp_xdp_attach_mode mode,
                                                     char *err, size_t errlen)
{
    (void)ifname, (void)port, (void)tcp, (void)stages, (void)mode;
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
