/*
 * The AF_PACKET backend: the fallback where AF_XDP is unavailable. One packet
 * socket per worker with a TPACKET_V2 RX ring and TX ring mapped together; the
 * workers of one interface join one PACKET_FANOUT group so the kernel spreads
 * flows across them. The kernel's own stack still sees every frame, so the
 * control plane keeps a never-read UDP socket on the served port: otherwise the
 * kernel would answer each query with ICMP port unreachable.
 *
 * Precopy mode (precopy.h) opens the socket without a TX ring: the ring's slots are
 * fixed buffers in the mapping, and a TX slot cannot point at a copy kept elsewhere.
 * Replies, copies and fallback buffers alike, go out with one sendmmsg() per batch.
 * To be clear about what this saves: user space copies nothing for a hit, but the
 * kernel still copies every frame into an skb inside sendmmsg(), which the TX ring
 * path does too; the copies are idle again as soon as the call returns. The gain is
 * the rendering skipped on hits, not a zero-copy send.
 *
 * TCP answers may also go out up to 64 KB at a time (io.h's sp_gather), through a
 * second, TX-only socket, and the kernel or the NIC cuts them into segments: one skb
 * for what would be 45 frames.
 */
#ifndef STORMPY_IO_PACKET_H
#define STORMPY_IO_PACKET_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/io.h"

struct sp_packet_config {
    const char *ifname;
    uint16_t fanout_group;   /* shared by the workers of one interface */
    int busy_poll;           /* 1: spin on the ring; 0: poll() with a timeout */
    unsigned poll_ms;        /* the longest a worker waits before it checks its stop flag */
    int precopy;             /* 1: no TX ring, sendmmsg() per batch (see above) */
    int promiscuous;         /* 1: every frame on the link, other hosts' too, and no
                              * fanout group (a forwarder, app/impair) */
};

/* Opens one worker's socket and rings. NULL with a one-line reason in err. */
struct sp_io *sp_packet_io_open(const struct sp_packet_config *cfg, char *err, size_t errlen);

#endif
