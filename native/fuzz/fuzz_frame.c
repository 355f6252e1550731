/* The whole fast path: one raw Ethernet frame (VLAN, IPv4, IPv6, UDP, DNS, and
 * ARP/ICMP/NDP with the own stack on) against a compiled zone; and, without the own
 * stack, in a group answered in stages (sp_dns_frame_answer_group), and through a
 * precopy pool twice (a fill, then a hit): byte for byte memcpy's reply. */
#include <stdint.h>

#include "fuzz_common.h"
#include "stormpy/app/dns/answer.h"
#include "stormpy/app/dns/precopy.h"
#include "stormpy/engine/frame.h"
#include "stormpy/proto/csum.h"
#include "stormpy/proto/eth.h"
#include "stormpy/proto/ip.h"
#include "stormpy/proto/udpip.h"

static const uint8_t MAC[6] = {2, 0, 0, 0, 0, 1};

/* A UDP reply's IPv4 header and UDP checksums, summed over in full: its composed sums
 * must be what they stand for. */
static void check_sums(const uint8_t *tx, size_t n)
{
    uint16_t type;
    size_t l2 = sp_eth_parse(tx, n, &type);
    struct sp_udpip u;
    if (!l2 || (type != SP_ETHERTYPE_IPV4 && type != SP_ETHERTYPE_IPV6) ||
        !sp_udpip_parse(tx + l2, n - l2, &u))
        return;                                   /* the own stack's ARP, ICMP, NDP */
    const uint8_t *ip = tx + l2;
    if (u.family == 4 && sp_csum_partial(ip, SP_IPV4_HEADER_LEN, 0) != 0xffff)
        __builtin_trap();
    size_t udp_len = SP_UDP_HEADER_LEN + u.payload_len;
    uint32_t pseudo = sp_ip_addresses_sum(u.family, u.src, u.dst) + 17 + (uint32_t)udp_len;
    const uint8_t *udp = ip + u.payload_off - SP_UDP_HEADER_LEN;
    if (sp_csum_reduce(sp_csum_partial(udp, udp_len, 0) + pseudo) != 0xffff)
        __builtin_trap();
}

static void answer(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len,
                   struct sp_rrl *rrl)
{
    static struct sp_dns_worker dns = {.cfg = {.max_udp = 1232}};
    dns.rrl = rrl;
    dns.now_s++;
    struct sp_frame_counters c = {0};
    static const size_t caps[] = {0, 60, 600, SP_FRAME_MAX};
    for (unsigned i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        uint8_t *tx = malloc(caps[i] ? caps[i] : 1);
        /* odd rounds: as a NIC that verified the checksum marks the frame */
        struct sp_frame frame = {.data = (uint8_t *)rx, .len = (uint32_t)len, .l4_verified = i & 1};
        size_t n = sp_dns_frame_answer(fuzz_table(), &dns, cfg, &frame, tx, caps[i], &c);
        if (n > caps[i])
            __builtin_trap();
        if (n && (n < SP_ETH_HEADER_LEN || (tx[0] & 1)))
            __builtin_trap();                     /* never to a group MAC */
        if (n && cfg->mtu && n > SP_ETH_HEADER_LEN + SP_VLAN_TAG_LEN + cfg->mtu)
            __builtin_trap();
        if (n)
            check_sums(tx, n);
        free(tx);
    }
}

/* The frame twice in a group, between TX buffers of two sizes: at most one reply each,
 * within its buffer. */
static void group(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len)
{
    static struct sp_dns_worker dns = {.cfg = {.max_udp = 1232}};
    struct sp_frame_counters c = {0};
    static uint8_t small[600], large[SP_FRAME_MAX];
    struct sp_frame in[2] = {{.data = (uint8_t *)rx, .len = (uint32_t)len},
                             {.data = (uint8_t *)rx, .len = (uint32_t)len}};
    struct sp_frame tx[2] = {{.data = small, .cap = sizeof(small)},
                             {.data = large, .cap = sizeof(large)}};
    unsigned n = sp_dns_frame_answer_group(fuzz_table(), &dns, cfg, in, 2, tx, &c);
    if (n > 2)
        __builtin_trap();
    for (unsigned i = 0; i < n; i++)
        if (tx[i].len > tx[i].cap || tx[i].len < SP_ETH_HEADER_LEN)
            __builtin_trap();
}

/* Every answer copied (no minimum); each reply's bytes and length are memcpy's. */
static void pooled(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len)
{
    static struct sp_precopy *pool;
    static uint8_t *mem;
    static struct sp_dns_worker dns = {.cfg = {.max_udp = 1232}};
    static struct sp_dns_worker plain = {.cfg = {.max_udp = 1232}};
    static uint8_t want[SP_FRAME_MAX], txbuf[SP_FRAME_MAX];
    if (!pool) {
        pool = sp_precopy_new(64);
        mem = sp_precopy_lend_heap(pool);
        sp_precopy_set_min_len(pool, 0);
    }
    sp_precopy_begin(pool, fuzz_table(), 1);   /* copies made for earlier inputs hit too */
    struct sp_frame_counters c = {0};
    const struct sp_frame *frame = &(struct sp_frame){.data = (uint8_t *)rx, .len = (uint32_t)len};
    size_t n = sp_dns_frame_answer(fuzz_table(), &plain, cfg, frame, want, sizeof(want), &c);
    for (int round = 0; round < 2; round++) {
        struct sp_frame tx = {.data = txbuf, .cap = sizeof(txbuf), .pool = -1}, out = {0};
        size_t m = sp_precopy_answer(pool, fuzz_table(), &dns, cfg, frame, &tx, &out, &c);
        if (m != n || (m && (out.len != m || memcmp(out.data, want, m) != 0)))
            __builtin_trap();
        if (m && out.pool >= 0)
            sp_precopy_complete(pool, (uint32_t)out.pool);
    }
    (void)mem;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *rx = fuzz_copy(data, size);
    struct sp_frame_config cfg = {.port = 53, .ttl = 64};
    answer(&cfg, rx, size, NULL);                 /* a socket-like view: no identity */
    group(&cfg, rx, size);
    pooled(&cfg, rx, size);

    memcpy(cfg.mac, MAC, 6);                      /* an owned interface: ARP, ping, NDP */
    cfg.check_dst = 1, cfg.mtu = 1500, cfg.own_stack = 1;
    cfg.nv4 = cfg.nv6 = 1, cfg.has_ipv4 = cfg.has_ipv6 = 1;
    const uint8_t v4[4] = {198, 18, 0, 1};
    const uint8_t v6[16] = {0x20, 0x01, 0, 2, [15] = 1};
    memcpy(cfg.v4[0], v4, 4), memcpy(cfg.ipv4, v4, 4);
    memcpy(cfg.v6[0], v6, 16), memcpy(cfg.ipv6, v6, 16);
    static struct sp_rrl *rrl;                    /* and rate limited: drops and slips too */
    if (!rrl) {
        struct sp_rrl_config rc = {.rate = 1, .slip = 2, .v4_prefix = 24, .v6_prefix = 56};
        rrl = sp_rrl_init(calloc(1, sp_rrl_size(64)), 64, &rc);
    }
    answer(&cfg, rx, size, rrl);
    answer(&cfg, rx, size, NULL);
    free(rx);
    return 0;
}
