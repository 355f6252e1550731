/*
 * stormpy's XDP steering program: UDP to the served port goes to the AF_XDP socket
 * of the receiving queue; everything else (ARP, ICMP, TCP, other ports, fragments,
 * IPv6 extension headers, frames with two VLAN tags) goes on to the kernel, so ping,
 * neighbour discovery and the TCP side of DNS keep working next to the fast path.
 *
 * Built with `clang -O2 -g -target bpf` (the -g gives the BTF that userspace uses to
 * find sp_port). Loaded by native/io/xdp_program.c, never by hand.
 *
 * Why the choices:
 *  - The port is a `const volatile` global in .rodata. Userspace writes it into the
 *    map's initial value before load, the kernel freezes the map, and the verifier
 *    sees a constant: no map lookup per packet, and no way to change the port of a
 *    running program (a new port means a new attach, which stormpy does anyway).
 *  - The program is named stormpy_steer (13 characters: kernel program names keep 15)
 *    so that userspace can tell a copy left behind by a crash from somebody else's
 *    XDP program and detach only its own.
 *  - The XSKMAP is looked up before the redirect: a queue without a socket (a worker
 *    not started yet, or already stopped) passes its packets to the kernel instead of
 *    dropping them. bpf_redirect_map() gets XDP_PASS as its fallback too.
 *  - One VLAN tag (802.1Q or 802.1ad), like sp_frame_parse(); IPv4 options are
 *    allowed (the header length is read from IHL), fragments are not (only the first
 *    fragment has a UDP header, and the fast path answers whole datagrams only).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define SP_ETH_P_8021Q 0x8100
#define SP_ETH_P_8021AD 0x88a8
#define SP_IP_MF_OFFSET 0x3fff   /* the More Fragments bit and the fragment offset */

/* The served UDP port in host byte order; set by userspace before load. 0 steers
 * every frame: a custom responder that answers ARP and ICMP itself owns the queue. */
const volatile __u16 sp_port = 53;
/* 1: the port is TCP's, not UDP's (serve-http's own TCP on the rings). The ports of
 * both sit 2 bytes into their headers, so one check reads either. */
const volatile __u8 sp_tcp = 0;
/* 1: queries the answer map holds are answered here (answer.h); set before load. */
const volatile __u8 sp_answer = 0;
/* 1: every query to the port is sent back as its own reply (answer.h's floor, for
 * `stormpy bench cpu`); set before load. */
const volatile __u8 sp_reflect = 0;

/* Queue index -> AF_XDP socket. Userspace sets max_entries to the number of
 * receive queues before load. */
struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u32);
} sp_xsks SEC(".maps");

#include "answer.h"

SEC("xdp")
int stormpy_steer(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct udphdr *udp;
    __u16 proto;
    void *l3;

    if ((void *)(eth + 1) > data_end)
        return XDP_PASS;
    if (sp_port == 0)
        goto steer;
    proto = eth->h_proto;
    l3 = eth + 1;
    if (proto == bpf_htons(SP_ETH_P_8021Q) || proto == bpf_htons(SP_ETH_P_8021AD)) {
        /* the tag: 2 bytes TCI, then the inner ethertype */
        if (l3 + 4 > data_end)
            return XDP_PASS;
        proto = *(__u16 *)(l3 + 2);
        l3 += 4;
    }

    if (proto == bpf_htons(ETH_P_IP)) {
        struct iphdr *ip = l3;
        if ((void *)(ip + 1) > data_end)
            return XDP_PASS;
        if (ip->version != 4 || ip->ihl < 5 || ip->protocol != (sp_tcp ? IPPROTO_TCP : IPPROTO_UDP))
            return XDP_PASS;
        if (ip->frag_off & bpf_htons(SP_IP_MF_OFFSET))
            return XDP_PASS;
        udp = l3 + ip->ihl * 4;
    } else if (proto == bpf_htons(ETH_P_IPV6)) {
        struct ipv6hdr *ip6 = l3;
        if ((void *)(ip6 + 1) > data_end)
            return XDP_PASS;
        if (ip6->version != 6 || ip6->nexthdr != (sp_tcp ? IPPROTO_TCP : IPPROTO_UDP))
            return XDP_PASS;
        udp = (void *)(ip6 + 1);
    } else {
        return XDP_PASS;
    }

    if ((void *)(udp + 1) > data_end)
        return XDP_PASS;
    if (udp->dest != bpf_htons(sp_port))
        return XDP_PASS;
    if (sp_reflect) {
        int reflected = sp_reflect_query(ctx);
        if (reflected != SP_ANSWER_UP)
            return reflected;
    }
    if (sp_answer) {
        int answered = sp_answer_query(ctx);
        sp_answer_count(answered == SP_ANSWER_UP ? SP_XDP_PASSED : SP_XDP_ANSWERED);
        if (answered != SP_ANSWER_UP)
            return answered;
    }

steer:;
    __u32 queue = ctx->rx_queue_index;
    if (!bpf_map_lookup_elem(&sp_xsks, &queue))
        return XDP_PASS;
    return bpf_redirect_map(&sp_xsks, queue, XDP_PASS);
}

/* BSD-2-Clause like the rest of stormpy; "Dual BSD/GPL" is how the kernel spells a
 * GPL-compatible permissive licence (the program uses no GPL-only helper). */
char _license[] SEC("license") = "Dual BSD/GPL";
