/*
 * The answer stage of steer.bpf.c (stormpy/io/xdp_answer.h says what and why): a
 * query the table holds a small answer for becomes its reply in place (XDP_TX).
 * Everything here returns SP_ANSWER_UP for a frame it leaves to the socket, before
 * it has changed a byte of it.
 *
 * All sums are in host numbers of big-endian 16-bit words (what ntohs gives), added
 * in 32 bits and folded once: the largest frame here sums well below 2^32.
 */
#include "stormpy/io/xdp_answer.h"

#define SP_ANSWER_UP (-1)
#define SP_DNS_HEADER 12
#define SP_OPT_LEN 11
#define SP_OPT_DATA_MAX 64    /* EDNS option bytes walked (a COOKIE's are 12, or 28 to 44) */
#define SP_OPT_MAX 8          /* options walked, at most */
#define SP_FIXED_HEADERS (14 + 20 + 8)   /* untagged Ethernet, IPv4 without options, UDP */

struct sp_answer_map {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, 1);               /* each generation is created with its own size */
    /* sizes, not __type(): clang leaves an inner map's types as declarations only */
    __uint(key_size, sizeof(struct sp_xdp_answer_key));
    __uint(value_size, sizeof(struct sp_xdp_answer));
};

/* Slot 0: the generation serving. Empty until userspace publishes one. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
    __uint(max_entries, 1);
    __type(key, __u32);
    __array(values, struct sp_answer_map);
} sp_answers SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct sp_xdp_answer_config);
} sp_answer_config SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, SP_XDP_STATS);
    __type(key, __u32);
    __type(value, __u64);
} sp_answer_stats SEC(".maps");

/* The query and the key built from it, per CPU: the key is too large for the stack
 * beside everything else. */
struct sp_answer_scratch {
    struct sp_xdp_answer_key key;
    __u8 lower[SP_XDP_NAME_MAX + 1];   /* the asked name lower-cased, for its ancestors' keys */
    __u8 labels[128];                  /* where each label starts, the root's last */
    __u32 nlen, nlabels, found, span;
    __u32 options_len;                 /* see sp_options_sum */
    __u8 front[SP_FIXED_HEADERS + SP_DNS_HEADER + SP_XDP_NAME_MAX + 4 + 1];   /* see sp_grow */
    __u8 options[SP_OPT_DATA_MAX + 4];  /* the OPT record's options (+4: a masked read's room) */
};
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct sp_answer_scratch);
} sp_answer_scratch SEC(".maps");

static __always_inline void sp_answer_count(__u32 which)
{
    __u64 *c = bpf_map_lookup_elem(&sp_answer_stats, &which);
    if (c)
        *c += 1;
}

static __always_inline __u32 sp_fold(__u32 sum)
{
    sum = (sum & 0xffff) + (sum >> 16);
    return (sum & 0xffff) + (sum >> 16);
}

/* A byte's part of a sum, at offset `at` from an even start. */
static __always_inline __u32 sp_byte_sum(__u8 c, __u32 at)
{
    return (__u32)c << (((at & 1) ^ 1) << 3);   /* no branch: see the name's loops */
}

static __always_inline __u32 sp_word(const __u8 *p)
{
    return (__u32)p[0] << 8 | p[1];
}

/* The source checks of sp_frame_source_refused(): a reply never goes to broadcast,
 * multicast, port 0, loopback or "this network". */
static __always_inline int sp_source_refused(const struct ethhdr *eth, const struct iphdr *ip,
                                             const struct udphdr *udp)
{
    __u8 src = ((const __u8 *)&ip->saddr)[0], dst = ((const __u8 *)&ip->daddr)[0];
    return (eth->h_source[0] & 1) || udp->source == 0 || src == 0 || src >= 224 ||
           src == 127 || dst >= 224;
}

static __always_inline int sp_for_us(const struct sp_xdp_answer_config *cfg,
                                     const struct ethhdr *eth, const struct iphdr *ip)
{
    for (int i = 0; i < 6; i++)
        if (eth->h_dest[i] != cfg->mac[i])
            return 0;
    int ours = 0;
    for (int i = 0; i < SP_XDP_ADDRS; i++)
        if (i < cfg->naddrs && *(const __u32 *)cfg->addrs[i] == ip->daddr)
            ours = 1;
    return ours;
}

static __always_inline __u32 sp_addresses_sum(const struct iphdr *ip)
{
    const __u8 *a = (const __u8 *)&ip->saddr;   /* saddr, then daddr */
    return sp_word(a) + sp_word(a + 2) + sp_word(a + 4) + sp_word(a + 6);
}

/* Types a query's own key must answer: a missing one is not the name's NODATA. */
static __always_inline int sp_special_type(__u32 qtype)
{
    return qtype == 41 || qtype == 43 || (qtype >= 46 && qtype <= 51) || qtype >= 249;
}

/* The below entry of the asked name's closest held ancestor, at most SP_XDP_DEPTH labels
 * up, with s->key left as its key; NULL: none within reach. The lookup is done again
 * after the loop, so the verifier checks what follows once, not once per label. */
static __always_inline struct sp_xdp_answer *sp_below(void *gen, struct sp_answer_scratch *s,
                                                      __u32 nlen)
{
    __u32 nlabels = *(volatile __u32 *)&s->nlabels;
    s->found = 0;
    for (__u32 k = 1; k <= SP_XDP_DEPTH; k++) {
        if (k > nlabels)
            break;
        __u32 off = s->labels[k & 127];
        for (__u32 i = 0; i < SP_XDP_NAME_MAX; i++) {
            __u32 from = i + off;
            __u32 inside = ((from - nlen) >> 31) & 1;
            s->key.name[i] = s->lower[from & 0xff] & (__u8)(0 - inside);
        }
        s->key.qtype = bpf_htons(SP_XDP_BELOW);
        if (bpf_map_lookup_elem(gen, &s->key)) {
            s->found = 1;
            break;
        }
    }
    if (!*(volatile __u32 *)&s->found)
        return NULL;
    return bpf_map_lookup_elem(gen, &s->key);
}

/* The frame made `delta` bytes longer, its first `keep` bytes (headers and question)
 * where they were; 0, or -1 with the frame unchanged. Room past the end comes first;
 * a frame with little of it (a veth's, built on a small skb) grows at the head
 * instead, its first bytes moved there, so that the new room lies at the end. */
static __always_inline int sp_grow(struct xdp_md *ctx, struct sp_answer_scratch *s, int delta,
                                   __u32 keep)
{
    if (bpf_xdp_adjust_tail(ctx, delta) == 0)
        return 0;
    asm volatile("" : "+r"(keep));
    keep &= 0x1ff;
    if (delta <= 0 || keep < SP_FIXED_HEADERS || keep > sizeof(s->front) ||
        bpf_xdp_load_bytes(ctx, 0, s->front, keep) || bpf_xdp_adjust_head(ctx, -delta))
        return -1;
    if (bpf_xdp_store_bytes(ctx, 0, s->front, keep)) {
        bpf_xdp_adjust_head(ctx, delta);   /* cannot be: keep bytes lie within the frame */
        return -1;
    }
    return 0;
}

/* The OPT record's options, rdlen bytes (1 to SP_OPT_DATA_MAX) at `offset` in the
 * frame, `at` in the question's count: the workers skip every option but NSID (no
 * cookie is answered), so the driver's reply is theirs whatever the others say, as long
 * as they are well-formed, which the workers check. Their bytes' sum, or -1: malformed
 * (the workers answer FORMERR), an NSID asked for (the workers send the server's), or
 * more than it walks. A global function, so the verifier checks it once, not once for
 * every way into the rest of the program. */
__attribute__((noinline)) int sp_options_sum(struct xdp_md *ctx, __u32 offset, __u32 at,
                                             __u32 rdlen)
{
    __u32 zero = 0;
    struct sp_answer_scratch *s = bpf_map_lookup_elem(&sp_answer_scratch, &zero);
    __u32 n = rdlen & 0x7f;           /* what the verifier sees bound the copy */
    if (!s || n == 0 || n != rdlen || n > SP_OPT_DATA_MAX ||
        bpf_xdp_load_bytes(ctx, offset, s->options, n))
        return -1;
    __u32 o = 0;                      /* each option: code, length, data */
    for (__u32 k = 0; k < SP_OPT_MAX && o < n; k++) {
        if (o + 4 > n)
            return -1;
        __u32 idx = o & (SP_OPT_DATA_MAX - 1);
        if (((__u32)s->options[idx] << 8 | s->options[idx + 1]) == 3)   /* NSID */
            return -1;
        o += 4 + ((__u32)s->options[idx + 2] << 8 | s->options[idx + 3]);
        if (o > n)
            return -1;
    }
    if (o != n)
        return -1;
    /* read back from memory: the walk's paths split on n, the sum's must not */
    s->options_len = n;
    n = *(volatile __u32 *)&s->options_len;
    __u32 sum = 0;
    for (__u32 j = 0; j < SP_OPT_DATA_MAX; j++) {
        __u32 inside = ((j - n) >> 31) & 1;   /* what is past them is the last query's */
        sum += sp_byte_sum(s->options[j], at + j) * inside;
    }
    return (int)sum;
}

static __always_inline int sp_answer_query(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct iphdr *ip = (void *)(eth + 1);
    struct udphdr *udp = (void *)(ip + 1);
    __u8 *dns = (void *)(udp + 1);
    __u32 zero = 0;

    if ((void *)(dns + SP_DNS_HEADER) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
        return SP_ANSWER_UP;
    if (ip->version != 4 || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
        (ip->frag_off & bpf_htons(SP_IP_MF_OFFSET)) || udp->dest != bpf_htons(sp_port))
        return SP_ANSWER_UP;
    struct sp_xdp_answer_config *cfg = bpf_map_lookup_elem(&sp_answer_config, &zero);
    struct sp_answer_scratch *s = bpf_map_lookup_elem(&sp_answer_scratch, &zero);
    if (!cfg || !s || !sp_for_us(cfg, eth, ip) || sp_source_refused(eth, ip, udp))
        return SP_ANSWER_UP;

    /* the IPv4 header's checksum, and lengths that agree with each other */
    const __u8 *iph = (const __u8 *)ip;
    __u32 sum = 0;
    for (int i = 0; i < 20; i += 2)
        sum += sp_word(iph + i);
    __u32 ulen = bpf_ntohs(udp->len);
    if (sp_fold(sum) != 0xffff || bpf_ntohs(ip->tot_len) != 20 + ulen)
        return SP_ANSWER_UP;

    /* a plain QUERY with one question and nothing else but perhaps an OPT */
    __u32 qflags = sp_word(dns + 2);
    if ((qflags & 0xf800) || sp_word(dns + 4) != 1 || sp_word(dns + 6) || sp_word(dns + 8) ||
        sp_word(dns + 10) > 1)
        return SP_ANSWER_UP;
    __u32 edns = sp_word(dns + 10);

    /* The name: the bytes it may span loaded into the key in one call, its labels
     * walked there, then every byte of the key lower-cased (a length byte, at most 63,
     * is never in A-Z), the name's summed, and the rest cleared. No loop touches the
     * packet or branches on the name's length: either would multiply the states the
     * verifier checks past its limit. */
    struct sp_xdp_answer_key *key = &s->key;
    __builtin_memset(key, 0, sizeof(*key));
    const __u8 *q = dns + SP_DNS_HEADER;
    __u64 frame = bpf_xdp_get_buff_len(ctx);
    if (frame < SP_FIXED_HEADERS + SP_DNS_HEADER + 5)
        return SP_ANSWER_UP;
    frame -= SP_FIXED_HEADERS + SP_DNS_HEADER;
    __u32 span = frame > SP_XDP_NAME_MAX ? SP_XDP_NAME_MAX : (__u32)frame;
    asm volatile("" : "+r"(span));
    span &= 0xff;                      /* what the verifier sees bound the copy: 5 to 255 */
    if (span < 5 || bpf_xdp_load_bytes(ctx, SP_FIXED_HEADERS + SP_DNS_HEADER, key->name, span))
        return SP_ANSWER_UP;
    __u32 at = 0;
    s->nlen = 0;
    for (__u32 k = 0; k < 128; k++) {
        __u32 idx = at;
        asm volatile("" : "+r"(idx));   /* keep the mask: the verifier needs to see it */
        __u8 len = key->name[idx & 0xff];
        s->labels[k] = (__u8)at;
        if (len == 0) {
            s->nlen = at + 1;
            s->nlabels = k;
            break;
        }
        if (len > 63)
            return SP_ANSWER_UP;   /* a pointer or a reserved label type */
        at += len + 1;
        if (at >= span)
            return SP_ANSWER_UP;
    }
    /* read back from memory: whichever label it ended at, the states from here are one */
    __u32 nlen = *(volatile __u32 *)&s->nlen;
    if (nlen == 0 || nlen > SP_XDP_NAME_MAX)
        return SP_ANSWER_UP;
    __u32 qsum = 0;
    s->span = span;
    for (__u32 i = 0; i < SP_XDP_NAME_MAX; i++) {
        if (i >= span)
            break;                 /* past the bytes loaded the key is zero already */
        __u8 c = key->name[i];
        __u32 inside = ((i - nlen) >> 31) & 1;
        qsum += sp_byte_sum(c, i) * inside;
        __u32 upper = ((__u32)(__u8)(c - 'A') - 26) >> 31;
        key->name[i] = (__u8)(c + (upper << 5)) & (__u8)(0 - inside);
        s->lower[i] = key->name[i];
    }
    const __u8 *t = q + nlen;
    if ((void *)(t + 4) > data_end || sp_word(t + 2) != 1)   /* class IN */
        return SP_ANSWER_UP;
    key->qtype = *(const __u16 *)t;
    for (__u32 j = 0; j < 4; j++)
        qsum += sp_byte_sum(t[j], nlen + j);

    __u32 dns_len = SP_DNS_HEADER + nlen + 4;
    __u32 rest = 0;
    if (edns) {
        const __u8 *o = t + 4;
        if ((void *)(o + SP_OPT_LEN) > data_end)
            return SP_ANSWER_UP;
        /* root owner, type OPT, room for 512, version 0, DO clear */
        if (o[0] != 0 || sp_word(o + 1) != 41 || sp_word(o + 3) < 512 || o[6] != 0 ||
            (o[7] & 0x80))
            return SP_ANSWER_UP;
        for (__u32 j = 0; j < SP_OPT_LEN; j++)
            rest += sp_byte_sum(o[j], nlen + 4 + j);
        __u32 rdlen = sp_word(o + 9);
        if (rdlen > SP_OPT_DATA_MAX)
            return SP_ANSWER_UP;
        if (rdlen) {
            int options = sp_options_sum(ctx, SP_FIXED_HEADERS + SP_DNS_HEADER + nlen + 4 +
                                         SP_OPT_LEN, nlen + 4 + SP_OPT_LEN, rdlen);
            if (options < 0)
                return SP_ANSWER_UP;
            rest += (__u32)options;
        }
        dns_len += SP_OPT_LEN + rdlen;
    }
    if (ulen != 8 + dns_len)
        return SP_ANSWER_UP;

    /* the query's UDP checksum, as sp_udpip_checksums_ok() takes it */
    __u32 check = bpf_ntohs(udp->check);
    if (check == 0)
        return SP_ANSWER_UP;
    __u32 pseudo = sp_addresses_sum(ip) + IPPROTO_UDP + ulen;
    __u32 header = 0;
    for (int i = 0; i < SP_DNS_HEADER; i += 2)
        header += sp_word(dns + i);
    __u32 whole = pseudo + bpf_ntohs(udp->source) + bpf_ntohs(udp->dest) + ulen + check +
                  header + qsum + rest;
    if (sp_fold(whole) != 0xffff && check != sp_fold(pseudo))
        return SP_ANSWER_UP;

    void *gen = bpf_map_lookup_elem(&sp_answers, &zero);
    __u32 qtype = bpf_ntohs(key->qtype), shift = 0;
    if (!gen || qtype == SP_XDP_OTHER_TYPES || qtype == SP_XDP_BELOW)
        return SP_ANSWER_UP;
    struct sp_xdp_answer *a = bpf_map_lookup_elem(gen, key);
    if (!a) {
        if (sp_special_type(qtype))
            return SP_ANSWER_UP;
        key->qtype = bpf_htons(SP_XDP_OTHER_TYPES);
        a = bpf_map_lookup_elem(gen, key);
        if (!a) {                        /* not held: its closest held ancestor answers */
            a = sp_below(gen, s, nlen);
            if (!a || a->probe_len > nlen)
                return SP_ANSWER_UP;
            shift = nlen - a->probe_len;
        }
    }
    __u32 tail_len = edns ? a->edns_len : a->plain_len;
    __u32 tail_sum = edns ? a->edns_sum : a->plain_sum;
    __u32 npatch = a->npatch;
    if (tail_len == 0 || tail_len > SP_XDP_TAIL_MAX || npatch > SP_XDP_PATCHES)
        return SP_ANSWER_UP;
    for (__u32 i = 0; i < SP_XDP_PATCHES; i++)    /* the moved pointers' part of the sum */
        if (i < npatch)
            tail_sum += (a->patch[i] & 1) ? shift << 8 : shift;

    /* everything the reply takes from the query, before the tail moves */
    __u8 mac_to[6], mac_from[6];
    __builtin_memcpy(mac_to, eth->h_source, 6);
    __builtin_memcpy(mac_from, eth->h_dest, 6);
    __be32 to = ip->saddr, from = ip->daddr;
    __be16 to_port = udp->source, from_port = udp->dest;
    __u32 id = sp_word(dns);
    __u32 flags = bpf_ntohs(a->flags) | (qflags & 0x0110);   /* RD and CD */
    __u32 zone = a->zone & (SP_XDP_ZONE_SLOTS - 1);
    __u32 an = bpf_ntohs(a->an), ns = bpf_ntohs(a->ns), ar = bpf_ntohs(a->ar) + edns;
    __u32 addresses = sp_addresses_sum(ip);
    __u32 question_at = SP_DNS_HEADER + nlen + 4;   /* where the tail starts in the message */

    __u32 new_ulen = 8 + question_at + tail_len;
    int delta = (int)(SP_FIXED_HEADERS - 8 + new_ulen) - (int)(data_end - data);
    if (sp_grow(ctx, s, delta, SP_FIXED_HEADERS + question_at))
        return SP_ANSWER_UP;
    data = (void *)(long)ctx->data;
    data_end = (void *)(long)ctx->data_end;
    eth = data;
    ip = (void *)(eth + 1);
    udp = (void *)(ip + 1);
    dns = (void *)(udp + 1);
    if ((void *)(dns + SP_DNS_HEADER) > data_end)
        return XDP_DROP;           /* cannot be: the frame only grew past its headers */

    __builtin_memcpy(eth->h_dest, mac_to, 6);
    __builtin_memcpy(eth->h_source, mac_from, 6);
    __u32 tot = 20 + new_ulen;
    __u32 ip_sum = 0x4500 + tot + 0x4000 + ((__u32)cfg->ttl << 8 | IPPROTO_UDP) + addresses;
    ip->tos = 0;
    ip->tot_len = bpf_htons(tot);
    ip->id = 0;
    ip->frag_off = bpf_htons(0x4000);   /* DF, as the fast path's replies */
    ip->ttl = cfg->ttl;
    ip->check = bpf_htons(~sp_fold(ip_sum) & 0xffff);
    ip->saddr = from;
    ip->daddr = to;
    udp->source = from_port;
    udp->dest = to_port;
    udp->len = bpf_htons(new_ulen);
    __u16 *h = (__u16 *)dns;
    h[1] = bpf_htons(flags);
    h[3] = bpf_htons(an);
    h[4] = bpf_htons(ns);
    h[5] = bpf_htons(ar);

    /* the tail's stored sum, byte-swapped where it starts at an odd offset */
    __u32 tail = sp_fold(tail_sum);
    if (question_at & 1)
        tail = ((tail & 0xff) << 8) | (tail >> 8);
    __u32 udp_sum = addresses + IPPROTO_UDP + 2 * new_ulen + bpf_ntohs(from_port) +
                    bpf_ntohs(to_port) + id + flags + 1 + an + ns + ar + qsum + tail;
    __u16 udp_check = ~sp_fold(udp_sum) & 0xffff;
    udp->check = bpf_htons(udp_check ? udp_check : 0xffff);

    if (bpf_xdp_store_bytes(ctx, SP_FIXED_HEADERS + question_at, a->tail, tail_len))
        return XDP_DROP;           /* cannot be: adjust_tail made the room */
    data = (void *)(long)ctx->data;
    data_end = (void *)(long)ctx->data_end;
    for (__u32 i = 0; i < SP_XDP_PATCHES; i++) {
        if (i >= npatch)
            break;
        __u32 where = (SP_FIXED_HEADERS + question_at + a->patch[i]) & 0x3ff;
        __u8 *p = data + where;
        if ((void *)(p + 2) > data_end)
            return XDP_DROP;       /* cannot be: the patches lie in the tail */
        __u32 pointer = sp_word(p) + shift;
        p[0] = pointer >> 8;
        p[1] = pointer & 0xff;
    }
    sp_answer_count(SP_XDP_RCODES + (flags & 0xf));
    sp_answer_count(SP_XDP_ZONES + zone);
    return XDP_TX;
}

/* The floor of `stormpy bench cpu`: every UDP datagram to the port goes back to its
 * sender with QR set, whatever it holds. No server can answer for less on this path.
 * Swapping addresses and ports keeps both checksums; QR changes the UDP one (RFC 1624). */
static __always_inline int sp_reflect_query(struct xdp_md *ctx)
{
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct iphdr *ip = (void *)(eth + 1);
    struct udphdr *udp = (void *)(ip + 1);
    __u8 *dns = (void *)(udp + 1);

    if ((void *)(dns + SP_DNS_HEADER) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) ||
        ip->ihl != 5 || ip->protocol != IPPROTO_UDP || udp->dest != bpf_htons(sp_port))
        return SP_ANSWER_UP;
    __u8 mac[6];
    __builtin_memcpy(mac, eth->h_source, 6);
    __builtin_memcpy(eth->h_source, eth->h_dest, 6);
    __builtin_memcpy(eth->h_dest, mac, 6);
    __be32 addr = ip->saddr;
    ip->saddr = ip->daddr;
    ip->daddr = addr;
    __be16 port = udp->source;
    udp->source = udp->dest;
    udp->dest = port;
    if (!(dns[2] & 0x80)) {
        dns[2] |= 0x80;
        if (udp->check) {
            __u32 sum = (~bpf_ntohs(udp->check) & 0xffff) + 0x8000;
            __u16 check = ~sp_fold(sum) & 0xffff;
            udp->check = bpf_htons(check ? check : 0xffff);
        }
    }
    return XDP_TX;
}
