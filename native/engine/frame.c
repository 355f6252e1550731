/* Ethernet frame in, reply frame out. See frame.h. */
#include "stormpy/engine/frame.h"

#include <string.h>

#include "stormpy/proto/eth.h"
#include "stormpy/proto/ownstack.h"
#include "stormpy/io.h"
#include "stormpy/proto/udpip.h"

/* A reply never exceeds the interface MTU (plus its link header). */
static inline size_t mtu_cap(const struct sp_frame_config *cfg, size_t l2, size_t cap)
{
    return cfg->mtu && cap > l2 + cfg->mtu ? l2 + cfg->mtu : cap;
}

/* sp_frame_parse(), and sp_frame_parse_unchecked() when defer (a constant: inlined). */
static inline __attribute__((always_inline)) enum sp_frame_kind
parse(const struct sp_frame_config *cfg, const struct sp_frame *frame, uint8_t *tx, size_t cap,
      struct sp_frame_query *fq, size_t *stack, struct sp_frame_counters *c, bool defer)
{
    const uint8_t *rx = frame->data;
    size_t len = frame->len;
    *stack = 0;
    c->frames++;
    uint16_t type;
    size_t l2 = sp_eth_parse(rx, len, &type);
    if (!l2) {
        c->malformed++;
        return SP_FRAME_DROPPED;
    }
    struct sp_udpip *u = &fq->u;
    if (!(type == SP_ETHERTYPE_IPV4   ? sp_udpip_parse_ipv4(rx + l2, len - l2, u)
          : type == SP_ETHERTYPE_IPV6 ? sp_udpip_parse_ipv6(rx + l2, len - l2, u)
                                      : false) ||
        u->dport != cfg->port) {
        /* ARP, ICMP, other ports, fragments, damage: the kernel's, unless we own the port */
        if (cfg->own_stack) {
            size_t n = sp_ownstack_answer(cfg, rx, len, l2, type, tx, mtu_cap(cfg, l2, cap));
            if (n) {
                c->stack_replies++;
                *stack = n;
                return SP_FRAME_NOT_OURS;
            }
        }
        c->not_ours++;
        return SP_FRAME_NOT_OURS;
    }
    if (!sp_frame_for_us(cfg, rx, u->family, u->dst)) {
        c->not_ours++;
        return SP_FRAME_NOT_OURS;
    }
    /* what the kernel drops */
    if (defer ? !sp_udpip_headers_ok(rx + l2, u, frame->l4_verified, &fq->unchecked)
              : !sp_udpip_checksums_ok(rx + l2, u, frame->l4_verified)) {
        c->malformed++;
        return SP_FRAME_DROPPED;
    }
    if (sp_frame_source_refused(u->family, u->src, u->dst, u->sport, rx + 6)) {
        c->bad_source++;
        return SP_FRAME_DROPPED;
    }
    fq->l2 = l2;
    fq->headers = l2 + sp_udpip_header_len(u->family);
    return SP_FRAME_QUERY;
}

enum sp_frame_kind sp_frame_parse(const struct sp_frame_config *cfg, const struct sp_frame *frame,
                                  uint8_t *tx, size_t cap, struct sp_frame_query *fq,
                                  size_t *stack, struct sp_frame_counters *c)
{
    fq->unchecked = 0;
    return parse(cfg, frame, tx, cap, fq, stack, c, false);
}

enum sp_frame_kind sp_frame_parse_unchecked(const struct sp_frame_config *cfg,
                                            const struct sp_frame *frame, uint8_t *tx,
                                            size_t cap, struct sp_frame_query *fq,
                                            size_t *stack, struct sp_frame_counters *c)
{
    return parse(cfg, frame, tx, cap, fq, stack, c, true);
}

bool sp_frame_payload_checked(const uint8_t *rx, const struct sp_frame_query *fq,
                              uint64_t payload_acc, struct sp_frame_counters *c)
{
    if (sp_udpip_payload_ok(rx + fq->l2, &fq->u, fq->unchecked, payload_acc))
        return true;
    c->malformed++;
    return false;
}

size_t sp_frame_payload_cap(const struct sp_frame_config *cfg, const struct sp_frame_query *fq,
                            size_t cap)
{
    cap = mtu_cap(cfg, fq->l2, cap);
    return cap > fq->headers ? cap - fq->headers : 0;
}

void sp_frame_write_headers(const struct sp_frame_config *cfg, const uint8_t *rx,
                            const struct sp_frame_query *fq, uint8_t *tx, size_t payload_len,
                            uint32_t payload_sum)
{
    sp_eth_write_back(tx, rx, fq->l2);
    sp_udpip_write_reply(tx + fq->l2, &fq->u, payload_len, payload_sum, cfg->ttl);
}
