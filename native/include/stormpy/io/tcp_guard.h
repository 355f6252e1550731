/*
 * The TCP guard (Linux): keeps the kernel's TCP from answering the served port's
 * segments on an interface where AF_PACKET workers run stormpy's own TCP. AF_PACKET
 * shares every frame with the kernel; with no socket on the port, the kernel would
 * answer the client's SYN and data with RST. A tc ingress program
 * (native/bpf/guard.bpf.c) drops them after the packet taps have their copy.
 *
 *   guard = sp_tcp_guard_attach("eth0", 80, err, sizeof(err));
 *   ... AF_PACKET workers (packet.h) ...
 *   sp_tcp_guard_detach(guard);
 *
 * Attached through a tcx BPF link where the kernel has them (6.6+): the link is the
 * process's, so a crash detaches it. Older kernels get a clsact qdisc filter
 * (netlink), which outlives a crash: the next start replaces it (same handle and
 * priority), and `tc filter del dev IF ingress` removes it by hand.
 *
 * Compiled with -DSP_WITH_XDP (libbpf); without it the attach says so.
 */
#ifndef STORMPY_IO_TCP_GUARD_H
#define STORMPY_IO_TCP_GUARD_H

#include <stddef.h>
#include <stdint.h>

struct sp_tcp_guard;

/* NULL with a one-line reason in err. */
struct sp_tcp_guard *sp_tcp_guard_attach(const char *ifname, uint16_t port, char *err,
                                         size_t errlen);
/* Detaches and frees; NULL is ignored. */
void sp_tcp_guard_detach(struct sp_tcp_guard *guard);
/* 1: held by a tcx link; 0: a clsact filter. */
int sp_tcp_guard_uses_link(const struct sp_tcp_guard *guard);

#endif
