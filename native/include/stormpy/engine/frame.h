/*
 * Whole Ethernet frames in and out, for backends that own the frame (AF_XDP,
 * AF_PACKET, netmap, the memory backend): the L2-L4 part every application shares.
 *
 * sp_frame_parse() takes one received frame (Ethernet, an optional 802.1Q/802.1ad
 * tag, IPv4 or IPv6, UDP to the served port) and hands the application its payload;
 * sp_frame_write_headers() then writes the reply's headers in front of the payload
 * the application wrote: MAC and IP addresses and ports swapped, the VLAN tag kept,
 * fresh IP and UDP checksums. Every length read from the frame is checked against
 * the received length. Frames that are not UDP to the served port are "not ours" (a
 * backend passes them to the kernel or ignores them, unless the own stack answers
 * them); datagrams from sources that must never be answered (broadcast or multicast
 * addresses, port 0) are dropped. An application's answer to a whole frame (DNS:
 * app/dns/answer.h) is parse -> payload_cap -> its payload -> write_headers.
 */
#ifndef STORMPY_ENGINE_FRAME_H
#define STORMPY_ENGINE_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stormpy/proto/eth.h"
#include "stormpy/proto/udpip.h"

struct sp_frame;             /* io.h: a received frame */

#define SP_FRAME_MAX 2048    /* the largest reply frame: payloads are capped below this */
#define SP_FRAME_ADDRS 8     /* addresses per family that check_dst accepts */

struct sp_frame_config {
    uint16_t port;           /* the served UDP port */
    uint8_t ttl;             /* IPv4 TTL / IPv6 hop limit of replies */
    /* The interface MTU: the room for a reply's payload stops there, so that the
     * application makes it fit (DNS: truncated, TC) instead of the device refusing
     * it (0: no limit). */
    uint16_t mtu;
    /* Answer only frames sent to mac and to one of these addresses: a promiscuous
     * device, a bridge or a router also delivers other hosts' traffic. */
    int check_dst;
    uint8_t nv4, nv6;
    uint8_t v4[SP_FRAME_ADDRS][4];
    uint8_t v6[SP_FRAME_ADDRS][16];
    uint8_t mac[6];
    /* Where stormpy owns the interface (netmap), it answers ARP and ICMP echo for
     * ipv4, and ICMPv6 echo and neighbor solicitations for ipv6, itself. */
    int own_stack;
    int has_ipv4, has_ipv6;
    uint8_t ipv4[4];
    uint8_t ipv6[16];
};

struct sp_frame_counters {
    uint64_t frames;
    uint64_t not_ours;       /* not UDP to the served port: ARP, ICMP, other ports */
    uint64_t bad_source;     /* broadcast, multicast or port-0 sources: never answered */
    uint64_t malformed;      /* truncated or inconsistent L2-L4 headers */
    uint64_t stack_replies;  /* ARP, ICMP echo and NDP answered with own_stack */
};

/* A frame sp_frame_parse() found to be UDP to the port. */
struct sp_frame_query {
    size_t l2;               /* Ethernet header, with the VLAN tag if any */
    size_t headers;          /* l2 + IP + UDP headers of the reply */
    struct sp_udpip u;
    /* From sp_frame_parse_unchecked(), when not 0: the UDP checksum is still to be
     * checked, by sp_frame_payload_checked(), before the frame is answered (the sum
     * the payload's completes: sp_udpip_headers_ok()). */
    uint64_t unchecked;
};

/* What sp_frame_parse() found in a frame. */
enum sp_frame_kind {
    SP_FRAME_DROPPED = 0,    /* damaged, or from a source never to be answered */
    SP_FRAME_QUERY,          /* UDP to the port: fq is filled */
    SP_FRAME_NOT_OURS,       /* ARP, ICMP, other ports...: the kernel's, or the own stack's
                              * reply of *stack bytes already written to tx */
};

/* Whether a frame is for this host (always, without cfg->check_dst): its MAC, and
 * one of its addresses. Inline: every frame asks. */
static inline bool sp_frame_for_us(const struct sp_frame_config *cfg, const uint8_t *rx,
                                   uint8_t family, const uint8_t *dst)
{
    if (!cfg->check_dst)
        return true;
    if (memcmp(rx, cfg->mac, 6) != 0)
        return false;
    if (family == 4) {
        for (unsigned i = 0; i < cfg->nv4; i++)
            if (memcmp(dst, cfg->v4[i], 4) == 0)
                return true;
        return false;
    }
    for (unsigned i = 0; i < cfg->nv6; i++)
        if (memcmp(dst, cfg->v6[i], 16) == 0)
            return true;
    return false;
}

/* Sources a reply must never go to (broadcast or multicast, port 0, loopback,
 * "this network"): reflecting to them would amplify or flood. */
static inline bool sp_frame_source_refused(uint8_t family, const uint8_t *src,
                                           const uint8_t *dst, uint16_t sport,
                                           const uint8_t *eth_src)
{
    if ((eth_src[0] & 1) || sport == 0)
        return true;
    if (family == 4) {
        uint8_t a = src[0];
        return a == 0 || a >= 224 || (a == 127) ||
               (dst[0] >= 224);      /* multicast, broadcast, "this network", loopback */
    }
    static const uint8_t unspecified[16];
    return src[0] == 0xff || dst[0] == 0xff || memcmp(src, unspecified, 16) == 0;
}

/* The same for a datagram a kernel socket received, where loopback is a real client
 * and the kernel has checked the rest: port 0, multicast and broadcast (which a reply
 * cannot reach; 127.255.255.255 too), "this network". */
static inline bool sp_datagram_source_refused(uint8_t family, const uint8_t *src, uint16_t sport)
{
    if (sport == 0)
        return true;
    if (family == 4)
        return src[0] == 0 || src[0] >= 224 ||
               (src[0] == 127 && src[1] == 255 && src[2] == 255 && src[3] == 255);
    static const uint8_t unspecified[16];
    return src[0] == 0xff || memcmp(src, unspecified, 16) == 0;
}

/* L2-L4 checks and counters, for the received frame rx (its data, len and
 * l4_verified). */
enum sp_frame_kind sp_frame_parse(const struct sp_frame_config *cfg, const struct sp_frame *rx,
                                  uint8_t *tx, size_t cap, struct sp_frame_query *fq,
                                  size_t *stack, struct sp_frame_counters *c);
/* sp_frame_parse() with the UDP checksum left to the caller, which reads the payload
 * anyway and can add it up on the way (DNS's question): when fq->unchecked, the frame
 * is not answered before sp_frame_payload_checked() says it may be... */
enum sp_frame_kind sp_frame_parse_unchecked(const struct sp_frame_config *cfg,
                                            const struct sp_frame *rx, uint8_t *tx,
                                            size_t cap, struct sp_frame_query *fq,
                                            size_t *stack, struct sp_frame_counters *c);
/* ...given payload_acc, sp_csum_acc() of the UDP payload as at an even offset: false
 * (counted malformed, dropped as the kernel drops it) when the checksum is wrong
 * (sp_udpip_payload_ok()). */
bool sp_frame_payload_checked(const uint8_t *rx, const struct sp_frame_query *fq,
                              uint64_t payload_acc, struct sp_frame_counters *c);
/* The room for the payload in a reply frame of cap bytes (MTU applied); 0: none. */
size_t sp_frame_payload_cap(const struct sp_frame_config *cfg, const struct sp_frame_query *fq,
                            size_t cap);
/* The reply's Ethernet, IP and UDP headers in front of a payload already in place. */
void sp_frame_write_headers(const struct sp_frame_config *cfg, const uint8_t *rx,
                            const struct sp_frame_query *fq, uint8_t *tx, size_t payload_len,
                            uint32_t payload_sum);

#endif
