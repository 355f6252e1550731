/*
 * Sending sp_gather frames (io.h) through a packet socket of their own: TX only
 * (protocol 0, so nothing is ever queued to it), PACKET_VNET_HDR, so each frame goes
 * with a virtio-net header that tells the kernel where its checksum is and how to cut
 * it. The kernel builds one skb a frame: the device segments it (TSO), or the kernel
 * does in software just before the device when the device cannot, and a veth hands
 * it to its peer whole, as it does a kernel TCP's. Shared by the backends that bind
 * to an interface (AF_PACKET, AF_XDP).
 */
#ifndef STORMPY_IO_GATHER_H
#define STORMPY_IO_GATHER_H

#include <stdbool.h>

#include "stormpy/io.h"

struct sp_gather_msgs;

struct sp_gather_tx {
    int fd;                          /* -1: not open */
    struct sp_gather_msgs *msgs;     /* one batch's messages, built per send */
};

/* Opens the socket on interface ifindex; false with a one-line reason in err (and
 * g->fd -1, so close is safe either way). */
bool sp_gather_tx_open(struct sp_gather_tx *g, unsigned ifindex, char *err, size_t errlen);

/* Sends g[0, n) in order with one sendmmsg(); counts them in k. A frame the kernel
 * refuses counts as a TX error, a full queue loses the rest (the sender's
 * retransmission timer covers both, as for a frame lost on the wire). */
void sp_gather_tx_send(struct sp_gather_tx *g, const struct sp_gather *f, unsigned n,
                       struct sp_io_counters *k);

void sp_gather_tx_close(struct sp_gather_tx *g);

#endif
