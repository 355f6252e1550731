/* Internet checksum (RFC 1071): see csum.h. */
#include "stormpy/proto/csum.h"

#include <string.h>

uint32_t sp_csum_partial(const void *data, size_t len, uint32_t sum)
{
    return sp_csum_acc_done(sp_csum_acc(data, len, sp_csum_native(sp_csum_reduce(sum))));
}

size_t sp_csum_prefix(const void *data, size_t len, size_t stride, uint16_t *out)
{
    const uint8_t *p = data;
    size_t k = 0;
    uint32_t sum = 0;
    out[k++] = 0;
    for (size_t at = 0; at < len; at += stride) {
        size_t n = len - at < stride ? len - at : stride;
        /* stride is even, so every block starts at an even offset */
        sum = sp_csum_reduce(sp_csum_partial(p + at, n, sum));
        out[k++] = (uint16_t)sum;
    }
    return k;
}
