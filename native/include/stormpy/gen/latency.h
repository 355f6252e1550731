/*
 * A latency histogram in HdrHistogram's layout: log-linear buckets that keep three
 * significant decimal digits over the whole range. Values (nanoseconds) below 2048
 * are counted exactly; above, each power of two is cut into 1,024 equal sub-buckets,
 * so a value is known within 1/1024 (0.1%) of itself, up to 2^41 ns (36 minutes).
 * Larger values are counted in the last sub-bucket; max() stays exact.
 *
 * Recording is one index computation and one increment: no allocation, no search.
 * A percentile is answered as HdrHistogram answers it: the highest value equivalent
 * to the bucket in which the cumulative count reaches the share, capped at max().
 *
 *   struct sp_latency *h = sp_latency_new();
 *   sp_latency_record(h, latency_ns);
 *   sp_latency_percentile(h, 99.9);
 *   sp_latency_free(h);
 */
#ifndef STORMPY_GEN_LATENCY_H
#define STORMPY_GEN_LATENCY_H

#include <stdint.h>

#define SP_LATENCY_SUB_BITS 10                          /* 1,024 sub-buckets a power of two */
#define SP_LATENCY_EXACT (2u << SP_LATENCY_SUB_BITS)       /* values below 2048 are exact */
#define SP_LATENCY_BUCKETS 31                           /* powers of two above 2^11 */
#define SP_LATENCY_SLOTS (SP_LATENCY_EXACT + (SP_LATENCY_BUCKETS - 1) * (1u << SP_LATENCY_SUB_BITS))

struct sp_latency {
    uint64_t total, min, max;
    double sum;
    uint64_t counts[SP_LATENCY_SLOTS];
};

/* NULL when out of memory. */
struct sp_latency *sp_latency_new(void);
void sp_latency_free(struct sp_latency *h);
void sp_latency_reset(struct sp_latency *h);

/* The slot a value is counted in, and the highest value that slot stands for. */
static inline uint32_t sp_latency_slot(uint64_t v)
{
    if (v < SP_LATENCY_EXACT)
        return (uint32_t)v;
    uint32_t shift = 63u - (uint32_t)__builtin_clzll(v) - SP_LATENCY_SUB_BITS;   /* >= 1 */
    if (shift > SP_LATENCY_BUCKETS - 1)
        return SP_LATENCY_SLOTS - 1;
    uint32_t sub = (uint32_t)(v >> shift) - (1u << SP_LATENCY_SUB_BITS);      /* 0..1023 */
    return SP_LATENCY_EXACT + (shift - 1) * (1u << SP_LATENCY_SUB_BITS) + sub;
}

uint64_t sp_latency_slot_highest(uint32_t slot);

static inline void sp_latency_record(struct sp_latency *h, uint64_t v)
{
    h->counts[sp_latency_slot(v)]++;
    if (h->total == 0 || v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    h->total++;
    h->sum += (double)v;
}

/* The value at `pct` percent (0 < pct <= 100) of what was recorded; 0 when empty. */
uint64_t sp_latency_percentile(const struct sp_latency *h, double pct);

#endif
