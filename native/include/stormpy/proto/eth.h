/*
 * Ethernet II with an optional 802.1Q or 802.1ad tag: the link header of every frame
 * backend. Header-only, so the frame path inlines it.
 */
#ifndef STORMPY_PROTO_ETH_H
#define STORMPY_PROTO_ETH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stormpy/proto/wire.h"

#define SP_ETH_HEADER_LEN 14
#define SP_VLAN_TAG_LEN 4

#define SP_ETHERTYPE_IPV4 0x0800
#define SP_ETHERTYPE_ARP 0x0806
#define SP_ETHERTYPE_IPV6 0x86dd
#define SP_ETHERTYPE_VLAN 0x8100
#define SP_ETHERTYPE_QINQ 0x88a8

/* The link header's length, the tag included, with the ethertype of what follows in
 * *type; 0 when the frame is too short to hold it. */
static inline size_t sp_eth_parse(const uint8_t *frame, size_t len, uint16_t *type)
{
    if (len < SP_ETH_HEADER_LEN)
        return 0;
    uint16_t t = sp_get16(frame + 12);
    if (t == SP_ETHERTYPE_IPV4) {   /* most frames: one test */
        *type = t;
        return SP_ETH_HEADER_LEN;
    }
    if (t == SP_ETHERTYPE_VLAN || t == SP_ETHERTYPE_QINQ) {
        if (len < SP_ETH_HEADER_LEN + SP_VLAN_TAG_LEN)
            return 0;
        *type = sp_get16(frame + 16);
        return SP_ETH_HEADER_LEN + SP_VLAN_TAG_LEN;
    }
    *type = t;
    return SP_ETH_HEADER_LEN;
}

/* A reply's link header, l2 bytes: to dst from src, with the ethertype and the VLAN
 * tag of the request it answers. */
static inline void sp_eth_write_reply(uint8_t *tx, const uint8_t *dst, const uint8_t *src,
                                      const uint8_t *request, size_t l2)
{
    memcpy(tx, dst, 6);
    memcpy(tx + 6, src, 6);
    if (l2 == SP_ETH_HEADER_LEN)   /* constant lengths: no call to libc */
        memcpy(tx + 12, request + 12, 2);
    else
        memcpy(tx + 12, request + 12, SP_VLAN_TAG_LEN + 2);
}

/* sp_eth_write_reply() back to the sender of request, from the address it was sent to:
 * the two MACs in two 8-byte copies, the second overwriting the first's 2 bytes too many
 * (both inside the request's l2 >= SP_ETH_HEADER_LEN bytes), for half the moves. */
static inline void sp_eth_write_back(uint8_t *tx, const uint8_t *request, size_t l2)
{
    uint64_t sender, receiver;
    memcpy(&sender, request + 6, 8);
    memcpy(&receiver, request, 8);
    memcpy(tx, &sender, 8);
    memcpy(tx + 6, &receiver, 8);
    if (l2 == SP_ETH_HEADER_LEN)
        memcpy(tx + 12, request + 12, 2);
    else
        memcpy(tx + 12, request + 12, SP_VLAN_TAG_LEN + 2);
}

#endif
