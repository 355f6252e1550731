/* The few protocols an owned interface must answer itself: ARP, ICMP echo, and
 * ICMPv6 echo and neighbor solicitation, for the configured addresses only. */
#ifndef STORMPY_PROTO_OWNSTACK_H
#define STORMPY_PROTO_OWNSTACK_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/engine/frame.h"

/* rx is a frame whose L2 header (l2 bytes, VLAN tag included) is already checked;
 * returns the reply frame's length in tx, or 0 when nothing is owed. */
size_t sp_ownstack_answer(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len,
                          size_t l2, uint16_t ethertype, uint8_t *tx, size_t cap);

#endif
