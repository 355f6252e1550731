/* Counter helpers shared by every worker type. */
#ifndef STORMPY_ENGINE_COUNTERS_H
#define STORMPY_ENGINE_COUNTERS_H

#define SP_HIST_BUCKETS 10   /* batch sizes 1, 2-3, 4-7, ... 256+ */

/* The batch-size histogram bucket for a batch of n: floor(log2(n)), capped. */
static inline unsigned sp_hist_bucket(unsigned n)
{
    unsigned b = 0;
    while (n > 1 && b < SP_HIST_BUCKETS - 1) {
        n >>= 1;
        b++;
    }
    return b;
}

#endif
