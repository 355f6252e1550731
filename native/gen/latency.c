/* HdrHistogram-style latency histogram. See stormpy/gen/latency.h. */
#include "stormpy/gen/latency.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sp_latency *sp_latency_new(void)
{
    return calloc(1, sizeof(struct sp_latency));
}

void sp_latency_free(struct sp_latency *h)
{
    free(h);
}

void sp_latency_reset(struct sp_latency *h)
{
    memset(h, 0, sizeof(*h));
}

uint64_t sp_latency_slot_highest(uint32_t slot)
{
    if (slot < SP_LATENCY_EXACT)
        return slot;
    uint32_t above = slot - SP_LATENCY_EXACT;
    uint32_t shift = above / (1u << SP_LATENCY_SUB_BITS) + 1;
    uint64_t sub = above % (1u << SP_LATENCY_SUB_BITS) + (1u << SP_LATENCY_SUB_BITS);
    return (sub << shift) + (1ull << shift) - 1;
}

uint64_t sp_latency_percentile(const struct sp_latency *h, double pct)
{
    if (h->total == 0)
        return 0;
    if (pct > 100)
        pct = 100;
    /* the rank whose value is asked, counted from 1: the nearest-rank definition */
    uint64_t rank = (uint64_t)ceil(pct / 100.0 * (double)h->total);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (uint32_t slot = 0; slot < SP_LATENCY_SLOTS; slot++) {
        seen += h->counts[slot];
        if (seen >= rank) {
            uint64_t v = sp_latency_slot_highest(slot);
            return v > h->max ? h->max : v < h->min ? h->min : v;
        }
    }
    return h->max;
}
