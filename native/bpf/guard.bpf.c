/*
 * stormpy's TCP guard: a tc ingress program that drops TCP segments to the served
 * port before the kernel's TCP sees them, on an interface whose AF_PACKET workers
 * run stormpy's own TCP (serve-http --backend packet).
 *
 * Why it works: an AF_PACKET socket bound to ETH_P_ALL is a tap, and the kernel
 * hands every frame to its taps before tc ingress runs (__netif_receive_skb_core),
 * so the workers still get the segment and only the kernel's stack loses it.
 * Without the guard the kernel, which has no socket on the port, answers every SYN
 * and every data segment with a RST and tears the client's connection down.
 *
 * Built like steer.bpf.c (clang -O2 -g -target bpf) and loaded by
 * native/io/tcp_guard.c. Headers are read with bpf_skb_load_bytes(), so a segment
 * whose headers are not in the skb's linear part is dropped like any other.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define SP_ETH_P_8021Q 0x8100
#define SP_ETH_P_8021AD 0x88a8
#define SP_IP_OFFSET 0x1fff
#define SP_GUARD_ADDRS 8          /* as SP_TCP_GUARD_ADDRS in tcp_guard.h */

/* The served TCP port in host byte order, and the addresses served (the workers'
 * identity): set by userspace before load. A segment to another address is another
 * host's (forwarded, or for an address added since) and goes on to the kernel. */
const volatile __u16 sp_port = 80;
const volatile __u32 sp_nv4 = 0, sp_nv6 = 0;
const volatile __u32 sp_v4[SP_GUARD_ADDRS] = {0};
const volatile __u64 sp_v6[SP_GUARD_ADDRS][2] = {{0}};

static __always_inline int served_v4(__u32 dst)
{
#pragma unroll
    for (int i = 0; i < SP_GUARD_ADDRS; i++)
        if (i < sp_nv4 && sp_v4[i] == dst)
            return 1;
    return 0;
}

static __always_inline int served_v6(const __u64 dst[2])
{
#pragma unroll
    for (int i = 0; i < SP_GUARD_ADDRS; i++)
        if (i < sp_nv6 && sp_v6[i][0] == dst[0] && sp_v6[i][1] == dst[1])
            return 1;
    return 0;
}

SEC("tc")
int stormpy_guard(struct __sk_buff *skb)
{
    __u16 proto, dport, frag;
    __u8 b[2];
    __u32 l3 = ETH_HLEN, l4, dst4;
    __u64 dst6[2];

    if (bpf_skb_load_bytes(skb, 12, &proto, 2))
        return TC_ACT_OK;
    if (proto == bpf_htons(SP_ETH_P_8021Q) || proto == bpf_htons(SP_ETH_P_8021AD)) {
        if (bpf_skb_load_bytes(skb, 16, &proto, 2))
            return TC_ACT_OK;
        l3 += 4;
    }
    if (proto == bpf_htons(ETH_P_IP)) {
        if (bpf_skb_load_bytes(skb, l3, b, 1) || (b[0] >> 4) != 4)
            return TC_ACT_OK;
        l4 = l3 + (b[0] & 15) * 4;
        if (bpf_skb_load_bytes(skb, l3 + 9, b, 1) || b[0] != IPPROTO_TCP)
            return TC_ACT_OK;
        /* a later fragment has no port to read; without its first fragment, which
         * has, the kernel reassembles nothing */
        if (bpf_skb_load_bytes(skb, l3 + 6, &frag, 2) || (frag & bpf_htons(SP_IP_OFFSET)))
            return TC_ACT_OK;
        if (bpf_skb_load_bytes(skb, l3 + 16, &dst4, 4) || !served_v4(dst4))
            return TC_ACT_OK;
    } else if (proto == bpf_htons(ETH_P_IPV6)) {
        if (bpf_skb_load_bytes(skb, l3 + 6, b, 1) || b[0] != IPPROTO_TCP)
            return TC_ACT_OK;
        if (bpf_skb_load_bytes(skb, l3 + 24, dst6, 16) || !served_v6(dst6))
            return TC_ACT_OK;
        l4 = l3 + 40;
    } else {
        return TC_ACT_OK;
    }
    if (bpf_skb_load_bytes(skb, l4 + 2, &dport, 2))
        return TC_ACT_OK;
    return dport == bpf_htons(sp_port) ? TC_ACT_SHOT : TC_ACT_OK;
}

/* BSD-2-Clause like the rest of stormpy (see steer.bpf.c). */
char _license[] SEC("license") = "Dual BSD/GPL";
