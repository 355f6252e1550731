/* SYN cookies for serve-http's own TCP (RFC 4987 3.6): when the connection table is
 * full or half of it is half-open, a SYN is answered with a SYN-ACK whose initial
 * sequence number carries everything the connection needs, and nothing is stored.
 *
 * The ISS, from the high bit down: 25 bits of MAC, SACK permitted (1 bit), the
 * peer's window scale shift (4 bits, 15 for none), an MSS index (2 bits). The MAC is
 * SipHash-2-4 (keyed by the ring's secret) over the 4-tuple, the client's ISN, those
 * 7 bits and a 64-second time slot; a cookie is good in its slot and the next, so for
 * 64 to 128 s. Window scaling and SACK survive the cookie (our own shift is always
 * 0, so only the peer's needs remembering); timestamps are never offered anyway. */
#include "ring_internal.h"

#include <string.h>

#define COOKIE_SLOT_NS (64ull * 1000000000ull)
#define DATA_BITS 7
#define DATA_MASK ((1u << DATA_BITS) - 1)
#define NO_WSCALE 15

/* The MSS a cookie can say: the usual ones (RFC 879's minimum, IPv6 and IPv4 paths
 * with a 1280, 1500 and a tunnel's MTU). */
static const uint16_t mss_table[4] = {536, 1220, 1440, 1460};

static uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

#define SIPROUND(v0, v1, v2, v3)                                      \
    do {                                                              \
        v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);     \
        v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;                        \
        v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;                        \
        v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);     \
    } while (0)

/* SipHash-2-4 (Aumasson and Bernstein) of n whole 64-bit words. */
static uint64_t siphash(uint64_t k0, uint64_t k1, const uint64_t *m, unsigned n)
{
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
    for (unsigned i = 0; i <= n; i++) {
        uint64_t w = i < n ? m[i] : (uint64_t)(n * 8) << 56;   /* the length block */
        v3 ^= w;
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        v0 ^= w;
    }
    v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

uint32_t cookie_mac(uint64_t secret, const struct sp_tcpip *t, uint32_t isn, uint32_t data,
                    uint64_t slot)
{
    uint64_t m[6];
    memcpy(&m[0], t->src, 16);
    memcpy(&m[2], t->dst, 16);
    m[4] = (uint64_t)t->sport << 48 | (uint64_t)t->dport << 32 | isn;
    m[5] = slot << 16 | (uint64_t)t->family << 8 | (data & DATA_MASK);
    /* two key halves from one secret: k1 is a fixed function of it, the secret alone
     * is what an attacker lacks */
    return (uint32_t)siphash(secret, secret ^ 0x9e3779b97f4a7c15ull, m, 6);
}

uint32_t cookie_make(uint64_t secret, const struct sp_tcpip *syn, uint16_t mss, uint64_t now_ns)
{
    unsigned idx = 0;
    while (idx + 1 < 4 && mss_table[idx + 1] <= mss)
        idx++;
    uint32_t data = idx | (uint32_t)(syn->opt.has_wscale ? syn->opt.wscale : NO_WSCALE) << 2 |
                    (uint32_t)syn->opt.sack_permitted << 6;
    uint32_t mac = cookie_mac(secret, syn, syn->seq, data, now_ns / COOKIE_SLOT_NS);
    return (mac & ~DATA_MASK) | data;
}

bool cookie_check(uint64_t secret, const struct sp_tcpip *ack, uint64_t now_ns,
                  struct cookie_opts *out)
{
    uint32_t iss = ack->ack - 1, data = iss & DATA_MASK;
    uint64_t slot = now_ns / COOKIE_SLOT_NS;
    for (uint64_t back = 0; back < 2 && back <= slot; back++) {   /* this slot and the last */
        if ((cookie_mac(secret, ack, ack->seq - 1, data, slot - back) ^ iss) & ~DATA_MASK)
            continue;
        uint8_t ws = (data >> 2) & 15;
        out->mss = mss_table[data & 3];
        out->has_wscale = ws != NO_WSCALE;
        out->wscale = out->has_wscale ? ws : 0;
        out->sack = (data >> 6) & 1;
        return true;
    }
    return false;
}
