/*
 * IPv4/IPv6 + UDP headers for backends that own the whole frame (rings, the
 * memory backend). Parse/write pair: sp_udpip_parse() validates a received
 * IP packet and finds the UDP payload; sp_udpip_write_reply() writes the reply
 * headers (addresses and ports swapped) with the UDP checksum composed from the
 * payload's partial sum, which the response table keeps up to date incrementally.
 */
#ifndef STORMPY_PROTO_UDPIP_H
#define STORMPY_PROTO_UDPIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stormpy/proto/csum.h"

#include "stormpy/proto/ip.h"

#define SP_UDP_HEADER_LEN 8

struct sp_udpip {
    uint8_t family;          /* 4 or 6 */
    uint8_t src[16], dst[16];   /* IPv4: the first 4 bytes (sp_udpip_parse()) */
    uint16_t sport, dport;
    size_t payload_off;      /* from the start of the IP header */
    size_t payload_len;
};

/* Parses an IP packet (no link header). False when truncated, not UDP, a
 * fragment, or lengths disagree with len. IPv4 options are skipped. An IPv4
 * address fills the first 4 bytes of src or dst only: every reader takes 4 by the
 * family, and clearing the other 12 cost every frame 4 stores. */
bool sp_udpip_parse(const uint8_t *ip, size_t len, struct sp_udpip *u);
/* sp_udpip_parse() of a packet that must be IPv4, or IPv6 (its link header's type):
 * false for the other family too, in the version check that is made anyway. */
bool sp_udpip_parse_ipv4(const uint8_t *ip, size_t len, struct sp_udpip *u);
bool sp_udpip_parse_ipv6(const uint8_t *ip, size_t len, struct sp_udpip *u);

/* True when the IPv4 header checksum and the UDP checksum of a packet that
 * sp_udpip_parse() accepted are right. An IPv4 UDP checksum of 0 means "none";
 * over IPv6 it is not allowed (RFC 8200 section 8.1). The kernel drops such
 * packets; a ring backend must too, since nothing checked them before. A
 * field holding just the pseudo-header sum (CHECKSUM_PARTIAL, sent from this
 * host through a veth) is accepted, as the kernel accepts it. l4_verified: the
 * kernel or the NIC checked the UDP checksum (sp_frame.l4_verified); the IPv4
 * header's and the zero checksum's rules still apply. */
bool sp_udpip_checksums_ok(const uint8_t *ip, const struct sp_udpip *u, bool l4_verified);

/* sp_udpip_checksums_ok() in steps, for a caller that reads the payload anyway and
 * adds it up on the way (DNS): the checks but the UDP sum's. *unchecked is 0, or the
 * sum the payload's completes (the pseudo-header's and UDP header's, as sp_csum_acc()
 * adds up): then the datagram is right when sp_csum_acc_is_ffff() of the two added,
 * or sp_udpip_partial_sum_ok(). */
bool sp_udpip_headers_ok(const uint8_t *ip, const struct sp_udpip *u, bool l4_verified,
                         uint64_t *unchecked);
/* A checksum field holding the pseudo-header's sum alone (CHECKSUM_PARTIAL), which
 * sp_udpip_checksums_ok() accepts. */
bool sp_udpip_partial_sum_ok(const uint8_t *ip, const struct sp_udpip *u);
/* The rule itself, given sp_udpip_headers_ok()'s *unchecked and the payload's sum
 * (sp_csum_acc() of it, as at an even offset). */
static inline bool sp_udpip_payload_ok(const uint8_t *ip, const struct sp_udpip *u,
                                       uint64_t unchecked, uint64_t payload_acc)
{
    return !unchecked || sp_csum_acc_nonzero_is_ffff(sp_csum_acc_word(unchecked, payload_acc)) ||
           sp_udpip_partial_sum_ok(ip, u);
}

/* Header length of a reply for this family. */
static inline size_t sp_udpip_header_len(uint8_t family)
{
    return (family == 4 ? SP_IPV4_HEADER_LEN : SP_IPV6_HEADER_LEN) + SP_UDP_HEADER_LEN;
}

/* Writes reply headers to `out` for a payload of payload_len bytes whose partial
 * checksum is payload_sum, replying to the request described by req. Returns the
 * header length. */
size_t sp_udpip_write_reply(uint8_t *out, const struct sp_udpip *req, size_t payload_len,
                            uint32_t payload_sum, uint8_t ttl);

#endif
