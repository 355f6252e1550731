/* ARP, ICMP echo and IPv6 neighbor discovery for an interface stormpy owns
 * (netmap): the kernel no longer sees its frames, so nobody else would answer. */
#include "stormpy/proto/ownstack.h"

#include <string.h>

#include "stormpy/proto/csum.h"
#include "stormpy/proto/eth.h"
#include "stormpy/proto/wire.h"

#define ETH_MIN 60
#define ARP_LEN 28
#define ICMP6_ECHO_REQUEST 128
#define ICMP6_ECHO_REPLY 129
#define ICMP6_NEIGHBOR_SOLICIT 135
#define ICMP6_NEIGHBOR_ADVERT 136

static size_t pad(uint8_t *tx, size_t n, size_t cap)
{
    if (n < ETH_MIN && cap >= ETH_MIN) {
        memset(tx + n, 0, ETH_MIN - n);
        return ETH_MIN;
    }
    return n;
}

static size_t arp_reply(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len,
                        size_t l2, uint8_t *tx, size_t cap)
{
    const uint8_t *a = rx + l2;
    if (len < l2 + ARP_LEN || cap < l2 + ARP_LEN || !cfg->has_ipv4)
        return 0;
    /* Ethernet/IPv4 request for our address only */
    if (sp_get16(a) != 1 || sp_get16(a + 2) != SP_ETHERTYPE_IPV4 || a[4] != 6 || a[5] != 4 ||
        sp_get16(a + 6) != 1 || memcmp(a + 24, cfg->ipv4, 4) != 0)
        return 0;
    if (a[8] & 1)                          /* a group address as sender: never answered */
        return 0;
    sp_eth_write_reply(tx, a + 8, cfg->mac, rx, l2);   /* to the sender's hardware address */
    uint8_t *r = tx + l2;
    memcpy(r, a, 6);
    sp_put16(r + 6, 2);                    /* reply */
    memcpy(r + 8, cfg->mac, 6);
    memcpy(r + 14, cfg->ipv4, 4);
    memcpy(r + 18, a + 8, 10);             /* target = the sender */
    return pad(tx, l2 + ARP_LEN, cap);
}

static size_t icmp4_echo(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len,
                         size_t l2, uint8_t *tx, size_t cap)
{
    const uint8_t *ip = rx + l2;
    if (!cfg->has_ipv4 || len < l2 + 20 || (ip[0] >> 4) != 4)
        return 0;
    size_t ihl = (size_t)(ip[0] & 0x0f) * 4, total = sp_get16(ip + 2);
    if (ihl < 20 || total < ihl + 8 || l2 + total > len || l2 + total > cap || ip[9] != 1 ||
        (sp_get16(ip + 6) & 0x3fff) || memcmp(ip + 16, cfg->ipv4, 4) != 0 ||
        ip[ihl] != 8 || ip[ihl + 1] != 0)
        return 0;
    if ((ip[12] >= 224) || ip[12] == 0)      /* never to multicast, broadcast or 0.0.0.0 */
        return 0;
    sp_eth_write_reply(tx, rx + 6, cfg->mac, rx, l2);
    uint8_t *r = tx + l2;
    memcpy(r, ip, total);
    memcpy(r + 12, ip + 16, 4);
    memcpy(r + 16, ip + 12, 4);
    r[8] = cfg->ttl;
    sp_put16(r + 10, 0);
    sp_put16(r + 10, sp_csum_fold(sp_csum_partial(r, ihl, 0)));
    r[ihl] = 0;                            /* echo reply: only the type word changes */
    sp_put16(r + ihl + 2, sp_csum_update16(sp_get16(ip + ihl + 2), 0x0800, 0x0000));
    return pad(tx, l2 + total, cap);
}

static uint16_t icmp6_checksum(const uint8_t *ip6, const uint8_t *icmp, size_t len)
{
    uint32_t sum = sp_csum_partial(ip6 + 8, 32, 0);   /* source and destination */
    sum += (uint32_t)len + 58;
    return sp_csum_fold(sp_csum_partial(icmp, len, sum));
}

static size_t icmp6(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len, size_t l2,
                    uint8_t *tx, size_t cap)
{
    const uint8_t *ip = rx + l2;
    if (!cfg->has_ipv6 || len < l2 + 48 || (ip[0] >> 4) != 6 || ip[6] != 58)
        return 0;
    size_t plen = sp_get16(ip + 4);
    if (plen < 8 || l2 + 40 + plen > len)
        return 0;
    const uint8_t *icmp = ip + 40;
    static const uint8_t unspecified[16];
    if (ip[8] == 0xff || memcmp(ip + 8, unspecified, 16) == 0)   /* no multicast, no DAD probe */
        return 0;
    sp_eth_write_reply(tx, rx + 6, cfg->mac, rx, l2);
    uint8_t *r = tx + l2;
    if (icmp[0] == ICMP6_ECHO_REQUEST && icmp[1] == 0 && memcmp(ip + 24, cfg->ipv6, 16) == 0) {
        if (l2 + 40 + plen > cap)
            return 0;
        memcpy(r, ip, 40 + plen);
        memcpy(r + 8, ip + 24, 16);
        memcpy(r + 24, ip + 8, 16);
        r[7] = cfg->ttl;
        r[40] = ICMP6_ECHO_REPLY;
        sp_put16(r + 42, sp_csum_update16(sp_get16(icmp + 2), ICMP6_ECHO_REQUEST << 8,
                                          ICMP6_ECHO_REPLY << 8));
        return pad(tx, l2 + 40 + plen, cap);
    }
    if (icmp[0] == ICMP6_NEIGHBOR_SOLICIT && icmp[1] == 0 && plen >= 24 &&
        memcmp(icmp + 8, cfg->ipv6, 16) == 0 && ip[7] == 255) {
        size_t nlen = 32;                  /* header, target, target link-layer option */
        if (l2 + 40 + nlen > cap)
            return 0;
        memcpy(r, ip, 8);
        sp_put16(r + 4, (uint16_t)nlen);
        r[7] = 255;                        /* NDP must arrive with hop limit 255 */
        memcpy(r + 8, cfg->ipv6, 16);
        memcpy(r + 24, ip + 8, 16);
        uint8_t *na = r + 40;
        memset(na, 0, nlen);
        na[0] = ICMP6_NEIGHBOR_ADVERT;
        na[4] = 0x60;                      /* solicited, override */
        memcpy(na + 8, cfg->ipv6, 16);
        na[24] = 2;                        /* target link-layer address */
        na[25] = 1;
        memcpy(na + 26, cfg->mac, 6);
        sp_put16(na + 2, icmp6_checksum(r, na, nlen));
        return pad(tx, l2 + 40 + nlen, cap);
    }
    return 0;
}

size_t sp_ownstack_answer(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len,
                          size_t l2, uint16_t ethertype, uint8_t *tx, size_t cap)
{
    if (cap < l2 || (rx[6] & 1))           /* a frame "from" a group MAC is forged */
        return 0;
    switch (ethertype) {
    case SP_ETHERTYPE_ARP:
        return arp_reply(cfg, rx, len, l2, tx, cap);
    case SP_ETHERTYPE_IPV4:
        return icmp4_echo(cfg, rx, len, l2, tx, cap);
    case SP_ETHERTYPE_IPV6:
        return icmp6(cfg, rx, len, l2, tx, cap);
    default:
        return 0;
    }
}
