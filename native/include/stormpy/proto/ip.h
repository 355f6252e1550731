/*
 * The IP layer under udpip.h and tcpip.h: an IPv4 or IPv6 header checked against the
 * received length and the transport protocol expected. Inline: it is on every
 * frame's path.
 */
#ifndef STORMPY_PROTO_IP_H
#define STORMPY_PROTO_IP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stormpy/proto/csum.h"
#include "stormpy/proto/wire.h"

#define SP_IPV4_HEADER_LEN 20
#define SP_IPV6_HEADER_LEN 40

/* Where the transport header starts (from the start of the IP header) and where the
 * packet ends by its own length field (never past the received length; below l4 for
 * an IPv4 total shorter than its header, which a transport header cannot fit). */
struct sp_ip {
    size_t l4;
    size_t end;
};

/* False when truncated, not `proto`, a fragment (IPv4 MF or offset), with IPv6
 * extension headers, or when the length fields disagree with len. IPv4 options are
 * skipped. Writes *family (4 or 6) and the addresses into src and dst (16 bytes each;
 * IPv4 in the first 4, the rest zero unless !zero_rest: then left as they were, for a
 * caller that never reads them), the caller's own fields. want: 4 or 6 for a packet
 * that must be of that family (its link header's type said so), 0 for either. */
/* An IPv4 header's first 8 bytes as memcpy() loads them, masked to the version, the
 * header length and the fragment bits (MF, offset): the usual header, without options
 * and not a fragment, in one compare. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SP_IPV4_USUAL_MASK 0xff3f0000000000ffull
#define SP_IPV4_USUAL 0x45ull
#else
#define SP_IPV4_USUAL_MASK 0xff00000000003fffull
#define SP_IPV4_USUAL 0x4500000000000000ull
#endif

/* sp_ip_parse_as()'s IPv4 header of ihl bytes and `total` in all, checked. */
static inline __attribute__((always_inline)) bool
sp_ipv4_take(const uint8_t *ip, uint8_t *family, uint8_t *src, uint8_t *dst,
             struct sp_ip *out, bool zero_rest, size_t ihl, size_t total)
{
    *family = 4;
    if (zero_rest) {
        memset(src, 0, 16);
        memset(dst, 0, 16);
    }
    memcpy(src, ip + 12, 4);
    memcpy(dst, ip + 16, 4);
    out->l4 = ihl;
    out->end = total;
    return true;
}

static inline __attribute__((always_inline)) bool
sp_ip_parse_as(const uint8_t *ip, size_t len, uint8_t proto, uint8_t *family, uint8_t *src,
               uint8_t *dst, struct sp_ip *out, bool zero_rest, uint8_t want)
{
    if (len < 1)
        return false;
    if (want != 6 && len >= SP_IPV4_HEADER_LEN) {
        uint64_t head;
        memcpy(&head, ip, 8);
        if ((head & SP_IPV4_USUAL_MASK) == SP_IPV4_USUAL) {
            /* a total below the header's 20 bytes is left to the transport's own check
             * (UDP's and TCP's header past end), which refuses it */
            size_t total = sp_get16(ip + 2);
            if (total > len || ip[9] != proto)
                return false;
            return sp_ipv4_take(ip, family, src, dst, out, zero_rest, SP_IPV4_HEADER_LEN, total);
        }
    }
    if ((ip[0] >> 4) == 4 && want != 6) {   /* with options, or a fragment */
        if (len < SP_IPV4_HEADER_LEN)
            return false;
        size_t ihl = (size_t)(ip[0] & 0x0f) * 4;
        size_t total = sp_get16(ip + 2);
        if (ihl < SP_IPV4_HEADER_LEN || total < ihl || total > len)
            return false;
        if ((sp_get16(ip + 6) & 0x3fff) != 0 || ip[9] != proto)
            return false;
        return sp_ipv4_take(ip, family, src, dst, out, zero_rest, ihl, total);
    }
    if ((ip[0] >> 4) == 6 && want != 4) {
        if (len < SP_IPV6_HEADER_LEN)
            return false;
        size_t total = SP_IPV6_HEADER_LEN + (size_t)sp_get16(ip + 4);
        if (total > len || ip[6] != proto)
            return false;
        *family = 6;
        memcpy(src, ip + 8, 16);
        memcpy(dst, ip + 24, 16);
        out->l4 = SP_IPV6_HEADER_LEN;
        out->end = total;
        return true;
    }
    return false;
}

static inline bool sp_ip_parse(const uint8_t *ip, size_t len, uint8_t proto, uint8_t *family,
                               uint8_t *src, uint8_t *dst, struct sp_ip *out)
{
    return sp_ip_parse_as(ip, len, proto, family, src, dst, out, true, 0);
}

/* The addresses of a family added up as sp_csum_acc() adds them (the pseudo-header's,
 * and the IPv4 header's, in either order), below 2^33: room for a few more words without
 * an end-around carry. Constant lengths, so that each is a few additions. */
static inline __attribute__((always_inline)) uint64_t sp_ip_addresses_acc(uint8_t family, const uint8_t *a, const uint8_t *b)
{
    if (family == 4) {
        uint32_t x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        return (uint64_t)x + y;
    }
    uint64_t acc = sp_csum_acc(b, 16, sp_csum_acc(a, 16, 0));
    return (acc & 0xffffffff) + (acc >> 32);
}

/* sp_ip_addresses_acc() as a reduced partial sum (network order). */
static inline __attribute__((always_inline)) uint32_t sp_ip_addresses_sum(uint8_t family, const uint8_t *a, const uint8_t *b)
{
    return sp_csum_acc_done(sp_ip_addresses_acc(family, a, b));
}

/* sp_ip_write_reply() where the caller has the addresses added up (sp_ip_addresses_acc()),
 * as a UDP or TCP reply does for its pseudo-header: the IPv4 header's checksum is
 * composed from them and the constant fields, not summed over the header. */
static inline size_t sp_ip_write_reply_summed(uint8_t *out, uint8_t family, const uint8_t *from,
                                              const uint8_t *to, uint8_t proto, size_t l4_len,
                                              uint8_t ttl, uint64_t addresses_acc)
{
    if (family == 4) {
        uint16_t total = (uint16_t)(SP_IPV4_HEADER_LEN + l4_len);
        out[0] = 0x45;
        out[1] = 0;
        sp_put16(out + 2, total);
        sp_put16(out + 4, 0);
        sp_put16(out + 6, 0x4000);   /* DF: path MTU discovery */
        out[8] = ttl;
        out[9] = proto;
        memcpy(out + 12, from, 4);
        memcpy(out + 16, to, 4);
        /* the fields in network order, below 2^19 */
        uint16_t check = sp_csum_acc_fold(sp_csum_acc_net(
            addresses_acc, 0x4500u + total + 0x4000u + ((uint32_t)ttl << 8 | proto)));
        memcpy(out + 10, &check, 2);
        return SP_IPV4_HEADER_LEN;
    }
    sp_put16(out, 0x6000);
    sp_put16(out + 2, 0);
    sp_put16(out + 4, (uint16_t)l4_len);
    out[6] = proto;
    out[7] = ttl;
    memcpy(out + 8, from, 16);
    memcpy(out + 24, to, 16);
    return SP_IPV6_HEADER_LEN;
}

/* Writes the IP header of a reply from `from` to `to` carrying l4_len bytes of protocol
 * proto (IPv4 with DF and its header checksum); returns its length. */
static inline size_t sp_ip_write_reply(uint8_t *out, uint8_t family, const uint8_t *from,
                                       const uint8_t *to, uint8_t proto, size_t l4_len,
                                       uint8_t ttl)
{
    uint64_t addresses = family == 4 ? sp_ip_addresses_acc(4, from, to) : 0;
    return sp_ip_write_reply_summed(out, family, from, to, proto, l4_len, ttl, addresses);
}

#endif
