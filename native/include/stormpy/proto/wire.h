/* Big-endian field access for wire formats, and short copies. Callers check lengths
 * first. */
#ifndef STORMPY_PROTO_WIRE_H
#define STORMPY_PROTO_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t sp_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void sp_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* The first n (< 8) bytes of a word as loaded, the others zero. */
static inline uint64_t sp_keep_bytes(uint64_t word, size_t n)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return word & ((1ULL << (8 * n)) - 1);
#else
    return n ? word & ~((1ULL << (64 - 8 * n)) - 1) : 0;
#endif
}

/* Whether n bytes are the same, both sides readable in whole 8-byte words. */
static inline bool sp_words_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    uint64_t x, y, x2, y2;
    for (; n >= 16; a += 16, b += 16, n -= 16) {   /* two words a round: half the loop's count */
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        memcpy(&x2, a + 8, 8);
        memcpy(&y2, b + 8, 8);
        if ((x ^ y) | (x2 ^ y2))
            return false;
    }
    if (n >= 8) {
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return false;
        a += 8;
        b += 8;
        n -= 8;
    }
    if (!n)
        return true;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    return sp_keep_bytes(x ^ y, n) == 0;
}

/* Copies n bytes without a call to libc, whose dispatch costs more than the copy for
 * the few dozen bytes of a header, a question or a small answer: whole 16- or 8-byte
 * pieces, the last one overlapping the one before; longer copies go to memcpy. */
static inline __attribute__((always_inline)) void sp_copy_short(uint8_t *dst, const uint8_t *src,
                                                            size_t n)
{
    if (n > 128) {
        memcpy(dst, src, n);
    } else if (n >= 16) {     /* in 16-byte pieces: one vector register's load on x86-64 and Arm */
        uint8_t piece[16];
        for (size_t i = 0; i + 16 < n; i += 16) {
            memcpy(piece, src + i, 16);
            memcpy(dst + i, piece, 16);
        }
        memcpy(piece, src + n - 16, 16);
        memcpy(dst + n - 16, piece, 16);
    } else if (n >= 8) {
        uint64_t w;
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&w, src + i, 8);
            memcpy(dst + i, &w, 8);
        }
        memcpy(&w, src + n - 8, 8);
        memcpy(dst + n - 8, &w, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else if (n) {
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

#endif
