/* SHA-1 for NSEC3 owner names; see sha1.h. */
#include "stormpy/proto/sha1.h"

#include <string.h>

#include "stormpy/proto/wire.h"

static inline uint32_t rol(uint32_t x, int n)
{
    return x << n | x >> (32 - n);
}

static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)sp_get16(p) << 16 | sp_get16(p + 2);
}

static void sha1_block(uint32_t h[5], const uint8_t *block)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = get32(block + 4 * i);
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5a827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ed9eba1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8f1bbcdc;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void sp_sha1(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen, uint8_t out[SP_SHA1_LEN])
{
    uint8_t msg[2 * 255 + 72];
    size_t n = alen + blen, padded = (n + 8) / 64 * 64 + 64;
    memcpy(msg, a, alen);
    memcpy(msg + alen, b, blen);
    memset(msg + n, 0, padded - n);
    msg[n] = 0x80;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++)
        msg[padded - 1 - i] = (uint8_t)(bits >> (8 * i));
    uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
    for (size_t off = 0; off < padded; off += 64)
        sha1_block(h, msg + off);
    for (int i = 0; i < 5; i++) {
        sp_put16(out + 4 * i, (uint16_t)(h[i] >> 16));
        sp_put16(out + 4 * i + 2, (uint16_t)h[i]);
    }
}

void sp_nsec3_hash(const uint8_t *name, size_t len, const uint8_t *salt, size_t salt_len,
                   unsigned iterations, uint8_t out[SP_SHA1_LEN])
{
    sp_sha1(name, len, salt, salt_len, out);
    for (unsigned i = 0; i < iterations; i++)
        sp_sha1(out, SP_SHA1_LEN, salt, salt_len, out);
}
