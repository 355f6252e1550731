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

#define SP_TCP_GUARD_ADDRS 8

/* The addresses served (network byte order, as in a packet): only TCP to them and to
 * the port is kept from the kernel. */
struct sp_tcp_guard_addrs {
    unsigned nv4, nv6;
    uint8_t v4[SP_TCP_GUARD_ADDRS][4];
    uint8_t v6[SP_TCP_GUARD_ADDRS][16];
};

/* NULL with a one-line reason in err. */
struct sp_tcp_guard *sp_tcp_guard_attach(const char *ifname, uint16_t port,
                                         const struct sp_tcp_guard_addrs *addrs, char *err,
                                         size_t errlen);
/* Detaches and frees; NULL is ignored. */
void sp_tcp_guard_detach(struct sp_tcp_guard *guard);
/* 1: held by a tcx link; 0: a clsact filter. */
int sp_tcp_guard_uses_link(const struct sp_tcp_guard *guard);

#endif
