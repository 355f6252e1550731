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
