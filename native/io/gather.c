/* TCP frames sent from pieces, segmented by the kernel or the NIC. See gather.h. */
#define _GNU_SOURCE
#include "gather.h"

#include <errno.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct sp_gather_msgs {
    struct mmsghdr msgs[SP_GATHER_BATCH];
    struct iovec iov[SP_GATHER_BATCH][SP_GATHER_IOV + 2];
    uint8_t vnet[SP_GATHER_BATCH][sizeof(struct virtio_net_hdr)];
};

bool sp_gather_tx_open(struct sp_gather_tx *g, unsigned ifindex, char *err, size_t errlen)
{
    g->msgs = calloc(1, sizeof(*g->msgs));
    g->fd = g->msgs ? socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0) : -1;
    int one = 1;
    struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_protocol = 0,
                             .sll_ifindex = (int)ifindex};
    const char *what = !g->msgs ? "out of memory" : g->fd < 0 ? "socket"
        : setsockopt(g->fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) < 0 ? "PACKET_VNET_HDR"
        : bind(g->fd, (struct sockaddr *)&ll, sizeof(ll)) < 0 ? "bind" : NULL;
    if (what) {
        snprintf(err, errlen, "segmentation offload socket: %s: %s", what, strerror(errno));
        sp_gather_tx_close(g);
        return false;
    }
    /* not PACKET_QDISC_BYPASS, as the rings have: its direct transmit drops a frame
     * that must be cut in software (a device without TSO), where the queue's path
     * cuts it and sends the segments */
    return true;
}

static void vnet_header(uint8_t *out, const struct sp_gather *f)
{
    struct virtio_net_hdr h = {
        .flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
        .gso_type = !f->gso_size ? VIRTIO_NET_HDR_GSO_NONE
                    : f->ipv6 ? VIRTIO_NET_HDR_GSO_TCPV6 : VIRTIO_NET_HDR_GSO_TCPV4,
        .hdr_len = f->head_len,
        .gso_size = f->gso_size,
        .csum_start = f->l4_at,
        .csum_offset = 16,               /* the TCP checksum field */
    };
    memcpy(out, &h, sizeof(h));          /* host order: the socket is not a virtio device */
}

void sp_gather_tx_send(struct sp_gather_tx *g, const struct sp_gather *f, unsigned n,
                       struct sp_io_counters *k)
{
    struct sp_gather_msgs *m = g->msgs;
    n = n < SP_GATHER_BATCH ? n : SP_GATHER_BATCH;
    for (unsigned i = 0; i < n; i++) {
        struct iovec *iov = m->iov[i];
        vnet_header(m->vnet[i], &f[i]);
        iov[0] = (struct iovec){m->vnet[i], sizeof(struct virtio_net_hdr)};
        iov[1] = (struct iovec){(void *)f[i].head, f[i].head_len};
        unsigned niov = f[i].niov < SP_GATHER_IOV ? f[i].niov : SP_GATHER_IOV;
        memcpy(iov + 2, f[i].iov, niov * sizeof(*iov));
        memset(&m->msgs[i], 0, sizeof(m->msgs[i]));
        m->msgs[i].msg_hdr.msg_iov = iov;
        m->msgs[i].msg_hdr.msg_iovlen = 2 + niov;
    }
    unsigned done = 0;
    while (done < n) {
        int r = sendmmsg(g->fd, m->msgs + done, n - done, MSG_DONTWAIT);
        if (r > 0) {
            for (unsigned i = done; i < done + (unsigned)r; i++) {
                unsigned mss = f[i].gso_size ? f[i].gso_size : f[i].len;
                k->tx_frames += mss ? (f[i].len + mss - 1) / mss : 1;
                k->tx_bytes += f[i].head_len + f[i].len;
                k->tx_gathered++;
            }
            done += (unsigned)r;
            k->kicks++;
        } else if (r < 0 && (errno == EMSGSIZE || errno == EINVAL)) {
            k->tx_errors++;
            done++;
        } else {
            k->tx_ring_full += n - done;   /* EAGAIN, ENOBUFS: the queue is full */
            break;
        }
    }
}

void sp_gather_tx_close(struct sp_gather_tx *g)
{
    if (g->fd >= 0)
        close(g->fd);
    free(g->msgs);
    g->fd = -1;
    g->msgs = NULL;
}
