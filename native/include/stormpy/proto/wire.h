/* Big-endian field access for wire formats. Callers check lengths first. */
#ifndef STORMPY_PROTO_WIRE_H
#define STORMPY_PROTO_WIRE_H

#include <stdint.h>

static inline uint16_t sp_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void sp_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

#endif
