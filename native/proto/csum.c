/* Internet checksum (RFC 1071): see csum.h. */
#include "stormpy/proto/csum.h"

#include <string.h>

uint32_t sp_csum_partial(const void *data, size_t len, uint32_t sum)
{
    const uint8_t *p = data;
    uint64_t acc = sum;
    while (len >= 4) {
        acc += ((uint32_t)p[0] << 8 | p[1]) + ((uint32_t)p[2] << 8 | p[3]);
        p += 4;
        len -= 4;
    }
    if (len >= 2) {
        acc += (uint32_t)p[0] << 8 | p[1];
        p += 2;
        len -= 2;
    }
    if (len)
        acc += (uint32_t)p[0] << 8;
    while (acc >> 32)
        acc = (acc & 0xffffffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    return (uint32_t)((acc & 0xffff) + (acc >> 16));
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
