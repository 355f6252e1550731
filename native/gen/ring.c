/* DNS queries and echo datagrams over a frame backend (io.h: AF_PACKET, AF_XDP): the
 * same window as over sockets (window.h), with the frames' headers written here and
 * the replies picked out of what the backend receives. One indirect call per batch. */
#include "window.h"

#include <stdlib.h>
#include <string.h>

#include "stormpy/engine/clock.h"
#include "stormpy/io.h"
#include "stormpy/proto/csum.h"
#include "stormpy/proto/eth.h"
#include "stormpy/proto/udpip.h"

#define NOWAIT_BELOW_NS 1000000u     /* the backend's poll waits 1 ms at the least */

struct ring {
    struct gen_window *window;
    uint32_t next;
    struct sp_udpip as_reply;    /* the headers to write: a "reply" from the server to us
                                  * has our address and port as its source */
    size_t head_len;             /* Ethernet + IP + UDP */
    struct sp_frame tx[SP_IO_BATCH_MAX], rx[SP_IO_BATCH_MAX];
    uint8_t *bufs[SP_IO_BATCH_MAX];
    uint32_t lens[SP_IO_BATCH_MAX];
};

static void ring_free(struct sp_gen *g)
{
    struct ring *r = g->state;
    gen_windows_free(r->window, 1);
    free(r);
    g->state = NULL;
}

static bool ring_init(struct sp_gen *g)
{
    const struct sp_gen_ring *cfg = g->cfg.ring;
    struct ring *r = g->state = calloc(1, sizeof(*r));
    if (!r || !gen_windows_new(&r->window, 1) || g->cfg.batch > SP_IO_BATCH_MAX)
        return false;
    size_t alen = cfg->family == 4 ? 4 : 16;
    r->as_reply.family = cfg->family;
    memcpy(r->as_reply.src, cfg->dst, alen);
    memcpy(r->as_reply.dst, cfg->src, alen);
    r->as_reply.sport = cfg->dport;
    r->as_reply.dport = cfg->sport;
    r->head_len = SP_ETH_HEADER_LEN + sp_udpip_header_len(cfg->family);
    return true;
}

static uint32_t ring_send(struct sp_gen *g, struct sp_gen_counters *c, uint32_t n, uint64_t now)
{
    struct ring *r = g->state;
    const struct sp_gen_ring *cfg = g->cfg.ring;
    struct sp_io *io = cfg->io;
    uint32_t index;
    struct gen_window *w = gen_window_pick(r->window, 1, &r->next, &index);
    if (!w) {
        gen_add(&c->window_full, 1);
        return 0;
    }
    io->ops->reclaim(io);
    unsigned got = io->ops->tx_reserve(io, r->tx, n);
    unsigned room = 0;
    while (room < got && r->tx[room].cap >= r->head_len + SP_GEN_MAX_REQUEST) {
        r->bufs[room] = r->tx[room].data + r->head_len;
        room++;
    }
    uint32_t m = room ? gen_window_fill(g, w, room, r->bufs, r->lens) : 0;
    for (uint32_t i = 0; i < m; i++) {
        uint8_t *f = r->tx[i].data;
        memcpy(f, cfg->dst_mac, 6);
        memcpy(f + 6, cfg->src_mac, 6);
        sp_put16(f + 12, cfg->family == 4 ? SP_ETHERTYPE_IPV4 : SP_ETHERTYPE_IPV6);
        sp_udpip_write_reply(f + SP_ETH_HEADER_LEN, &r->as_reply, r->lens[i],
                             sp_csum_partial(r->bufs[i], r->lens[i], 0), cfg->ttl);
        r->tx[i].len = (uint32_t)(r->head_len + r->lens[i]);
    }
    io->ops->tx_submit(io, r->tx, m, r->tx + m, got - m);
    io->ops->kick(io);
    if (m < n)                               /* the TX ring had no room for the rest */
        gen_add(&c->would_block, 1);
    gen_window_sent(g, c, w, m, now);
    return m;
}

/* A received frame's UDP payload when it comes from the server's port to ours. */
static const uint8_t *reply_payload(const struct sp_gen_ring *cfg, const struct sp_frame *f,
                                    uint32_t *len)
{
    uint16_t type;
    size_t l2 = sp_eth_parse(f->data, f->len, &type);
    struct sp_udpip u;
    if (!l2 || !sp_udpip_parse(f->data + l2, f->len - l2, &u) || u.family != cfg->family ||
        u.sport != cfg->dport || u.dport != cfg->sport ||
        memcmp(u.src, cfg->dst, cfg->family == 4 ? 4 : 16) != 0)
        return NULL;
    *len = (uint32_t)u.payload_len;
    return f->data + l2 + u.payload_off;
}

static int ring_wait(struct sp_gen *g, struct sp_gen_counters *c, uint64_t wait_ns)
{
    struct ring *r = g->state;
    const struct sp_gen_ring *cfg = g->cfg.ring;
    struct sp_io *io = cfg->io;
    io->rx_nowait = wait_ns < NOWAIT_BELOW_NS;
    unsigned n = io->ops->rx_burst(io, r->rx, g->cfg.batch);
    uint64_t now = sp_now_ns();
    for (unsigned i = 0; i < n; i++) {
        uint32_t len;
        const uint8_t *payload = reply_payload(cfg, &r->rx[i], &len);
        if (payload)
            gen_window_reply(g, c, r->window, payload, len, now);
    }
    io->ops->rx_release(io, r->rx, n);
    return io->error;
}

static void ring_expire(struct sp_gen *g, struct sp_gen_counters *c, uint64_t now, bool all)
{
    gen_windows_expire(g, c, ((struct ring *)g->state)->window, 1, now, all);
}

static void ring_ready(struct sp_gen *g, struct sp_gen_counters *c, uint32_t i, short revents)
{
    (void)g, (void)c, (void)i, (void)revents;    /* no fds: ring_wait reads the backend */
}

const struct gen_kind sp_gen_ring_kind = { ring_init, ring_send, ring_ready, ring_expire,
                                           ring_free, ring_wait };
