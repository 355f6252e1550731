/* Response rate limiting. See rrl.h. */
#include "stormpy/app/dns/rrl.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>

size_t sp_rrl_size(uint64_t buckets)
{
    return sizeof(struct sp_rrl) + buckets * sizeof(struct sp_rrl_bucket);
}

struct sp_rrl *sp_rrl_init(void *mem, uint64_t buckets, const struct sp_rrl_config *cfg)
{
    if (!buckets || (buckets & (buckets - 1)) || cfg->v4_prefix > 32 || cfg->v6_prefix > 128 ||
        cfg->nallow > SP_RRL_ALLOW_MAX)
        return NULL;
    for (uint32_t i = 0; i < cfg->nallow; i++)
        if ((cfg->allow[i].family != 4 && cfg->allow[i].family != 6) ||
            cfg->allow[i].len > (cfg->allow[i].family == 4 ? 32 : 128))
            return NULL;
    struct sp_rrl *r = mem;
    r->cfg = *cfg;
    r->mask = buckets - 1;
    if (getrandom(&r->secret, sizeof(r->secret), GRND_NONBLOCK) != sizeof(r->secret)) {
        struct timespec ts;       /* no entropy yet (early boot): unpredictable enough */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r->secret = (uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec ^ (uintptr_t)mem;
    }
    return r;
}

static int prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;
    if (memcmp(a, b, whole) != 0)
        return 0;
    return !rest || ((a[whole] ^ b[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

/* The first bits (0..64) of w, read as a big-endian number; the rest zeroed. */
static inline uint64_t high_bits(uint64_t w, unsigned bits)
{
    return bits >= 64 ? w : bits ? w & ~(~0ULL >> bits) : 0;
}

/* 8 bytes at p as a big-endian number. */
static inline uint64_t load_be64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 31);
}

enum sp_rrl_action sp_rrl_check(struct sp_rrl *r, uint8_t family, const uint8_t *src,
                                uint64_t kind, uint32_t now_s)
{
    const struct sp_rrl_config *cfg = &r->cfg;
    for (uint32_t i = 0; i < cfg->nallow; i++)
        if (cfg->allow[i].family == family && prefix_match(src, cfg->allow[i].addr, cfg->allow[i].len))
            return SP_RRL_SEND;
    /* the source's prefix, the rest zeroed, names the bucket with the kind; read in two
     * words, not copied out by a call of variable length */
    uint64_t lo, hi = 0;
    if (family == 4) {
        uint32_t a;
        memcpy(&a, src, 4);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        a = __builtin_bswap32(a);
#endif
        lo = high_bits((uint64_t)a << 32, cfg->v4_prefix);
    } else {
        unsigned bits = cfg->v6_prefix;
        lo = high_bits(load_be64(src), bits);
        hi = high_bits(load_be64(src + 8), bits > 64 ? bits - 64 : 0);
    }
    uint64_t h = mix(mix(mix(mix(r->secret, family), lo), hi), kind ^ r->secret);
    uint32_t tag = (uint32_t)(h >> 32) | 1;
    uint64_t ways = r->mask ? 2 : 1;
    struct sp_rrl_bucket *set = &r->bucket[h & r->mask & ~(ways - 1)], *b = NULL;
    for (uint64_t i = 0; i < ways && !b; i++)
        if (__atomic_load_n(&set[i].tag, __ATOMIC_RELAXED) == tag &&
            __atomic_load_n(&set[i].second, __ATOMIC_RELAXED) == now_s)
            b = &set[i];
    for (uint64_t i = 0; i < ways && !b; i++)
        if (__atomic_load_n(&set[i].second, __ATOMIC_RELAXED) != now_s) {
            b = &set[i];                      /* free this second: ours from now on */
            __atomic_store_n(&b->tag, tag, __ATOMIC_RELAXED);
            __atomic_store_n(&b->second, now_s, __ATOMIC_RELAXED);
            __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        }
    if (!b)
        return SP_RRL_SEND;                   /* both counting others this second */
    uint32_t n = __atomic_add_fetch(&b->count, 1, __ATOMIC_RELAXED);
    if (n <= cfg->rate)
        return SP_RRL_SEND;
    return cfg->slip && (n - cfg->rate) % cfg->slip == 0 ? SP_RRL_SLIP : SP_RRL_DROP;
}
