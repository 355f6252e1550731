/* IPv4/IPv6 + UDP parse/write pair. See udpip.h. */
#include "stormpy/proto/udpip.h"

#include <string.h>

#include "stormpy/proto/ip.h"
#include "stormpy/proto/wire.h"

#include "stormpy/proto/csum.h"

#define PROTO_UDP 17

static bool parse_udp(const uint8_t *ip, size_t l4, size_t end, struct sp_udpip *u)
{
    if (l4 + SP_UDP_HEADER_LEN > end)
        return false;
    uint16_t ulen = sp_get16(ip + l4 + 4);
    if (ulen < SP_UDP_HEADER_LEN || l4 + ulen > end)
        return false;
    u->sport = sp_get16(ip + l4);
    u->dport = sp_get16(ip + l4 + 2);
    u->payload_off = l4 + SP_UDP_HEADER_LEN;
    u->payload_len = ulen - SP_UDP_HEADER_LEN;
    return true;
}

static inline __attribute__((always_inline)) bool
parse(const uint8_t *ip, size_t len, uint8_t want, struct sp_udpip *u)
{
    struct sp_ip h;
    return sp_ip_parse_as(ip, len, PROTO_UDP, &u->family, u->src, u->dst, &h, false, want) &&
           parse_udp(ip, h.l4, h.end, u);
}

bool sp_udpip_parse(const uint8_t *ip, size_t len, struct sp_udpip *u)
{
    return parse(ip, len, 0, u);
}

bool sp_udpip_parse_ipv4(const uint8_t *ip, size_t len, struct sp_udpip *u)
{
    return parse(ip, len, 4, u);
}

bool sp_udpip_parse_ipv6(const uint8_t *ip, size_t len, struct sp_udpip *u)
{
    return parse(ip, len, 6, u);
}

/* The pseudo-header's addresses' reduced sum (network order). */
static inline uint32_t addresses_sum(const struct sp_udpip *u)
{
    return sp_ip_addresses_sum(u->family, u->src, u->dst);
}

bool sp_udpip_headers_ok(const uint8_t *ip, const struct sp_udpip *u, bool l4_verified,
                         uint64_t *unchecked)
{
    size_t l4 = u->payload_off - SP_UDP_HEADER_LEN;
    *unchecked = 0;
    /* a right header sums to 0xffff, in either byte order */
    if (u->family == 4) {
        /* the IPv4 header is all before the UDP header: its length, parsed once */
        uint64_t acc = l4 == SP_IPV4_HEADER_LEN ? sp_csum_acc(ip, SP_IPV4_HEADER_LEN, 0)
                                                : sp_csum_acc(ip, l4, 0);   /* options */
        if (!sp_csum_acc_nonzero_is_ffff(acc))   /* version 4: not 0 */
            return false;
    }
    if (sp_get16(ip + l4 + 6) == 0)
        return u->family == 4;
    if (l4_verified)
        return true;
    /* the pseudo-header added up with the UDP header, in the machine's order: not 0,
     * as the protocol is not; the addresses below 2^33 and the rest below 2^25, the
     * header's word added with its carry */
    uint64_t udp;
    memcpy(&udp, ip + l4, SP_UDP_HEADER_LEN);
    *unchecked = sp_csum_acc_word(
        udp, sp_csum_acc_net(sp_ip_addresses_acc(u->family, u->src, u->dst),
                             PROTO_UDP + SP_UDP_HEADER_LEN + (uint64_t)u->payload_len));
    return true;
}

bool sp_udpip_partial_sum_ok(const uint8_t *ip, const struct sp_udpip *u)
{
    /* A sender on this host (a veth peer, a container) hands over CHECKSUM_PARTIAL
     * frames: the field holds only the pseudo-header sum, for a device that never
     * runs. The kernel trusts those; so do we. */
    uint32_t udp_len = (uint32_t)(SP_UDP_HEADER_LEN + u->payload_len);
    return sp_get16(ip + u->payload_off - SP_UDP_HEADER_LEN + 6) ==
           sp_csum_reduce(addresses_sum(u) + PROTO_UDP + udp_len);
}

bool sp_udpip_checksums_ok(const uint8_t *ip, const struct sp_udpip *u, bool l4_verified)
{
    uint64_t unchecked;
    if (!sp_udpip_headers_ok(ip, u, l4_verified, &unchecked))
        return false;
    return !unchecked ||
           sp_udpip_payload_ok(ip, u, unchecked, sp_csum_acc(ip + u->payload_off, u->payload_len, 0));
}

size_t sp_udpip_write_reply(uint8_t *out, const struct sp_udpip *req, size_t payload_len,
                            uint32_t payload_sum, uint8_t ttl)
{
    size_t ip_len = req->family == 4 ? SP_IPV4_HEADER_LEN : SP_IPV6_HEADER_LEN;
    uint16_t udp_len = (uint16_t)(SP_UDP_HEADER_LEN + payload_len);
    uint8_t *udp = out + ip_len;

    uint64_t addresses = sp_ip_addresses_acc(req->family, req->src, req->dst);
    sp_ip_write_reply_summed(out, req->family, req->dst, req->src, PROTO_UDP, udp_len, ttl,
                             addresses);
    sp_put16(udp, req->dport);
    sp_put16(udp + 2, req->sport);
    sp_put16(udp + 4, udp_len);

    /* Pseudo-header + UDP header + payload; swapping addresses and ports does not
     * change their sum, only the lengths are new (once in each header). The
     * network-order part below 2^33: no carry lost. */
    uint16_t check = sp_csum_acc_fold(sp_csum_acc_net(
        addresses, (uint64_t)PROTO_UDP + 2u * udp_len + req->sport + req->dport + payload_sum));
    if (!check)
        check = 0xffff;   /* 0 means "no checksum"; 0xffff is the same sum */
    memcpy(udp + 6, &check, 2);
    return ip_len + SP_UDP_HEADER_LEN;
}
