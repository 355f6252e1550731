/*
 * Internet checksum helpers (RFC 1071) and incremental updates (RFC 1624).
 *
 * Prepackaged responses carry the one's-complement sum of their stored bytes.
 * Per request only a few fields change (addresses, ports, the DNS ID, the echoed
 * question), so the IP and UDP checksums are adjusted from the stored sums instead
 * of being recomputed over the payload.
 *
 * Sums are kept unfolded in 32 bits as "partial" sums of big-endian 16-bit words;
 * sp_csum_fold() turns a partial sum into the 16-bit checksum field value.
 */
#ifndef STORMPY_PROTO_CSUM_H
#define STORMPY_PROTO_CSUM_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Partial sum of len bytes, as if they started at an even offset, reduced to 16 bits
 * (network order); sum is any partial sum to start from. */
uint32_t sp_csum_partial(const void *data, size_t len, uint32_t sum);

/* Prefix sums of a blob, for summing any range of it without reading it all
 * (serve-http's stored segment sums): out[k] is the reduced partial sum of
 * data[0, min(k * stride, len)), for k = 0 .. ceil(len / stride). stride must be even.
 * Returns the number written (ceil(len / stride) + 1); out must hold that many. */
size_t sp_csum_prefix(const void *data, size_t len, size_t stride, uint16_t *out);

/* Fold a partial sum to 16 bits and complement it: the value for the header field
 * (host byte order). */
static inline uint16_t sp_csum_fold(uint32_t sum)
{
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

/* Reduce a partial sum to 16 bits without complementing. */
static inline uint32_t sp_csum_reduce(uint32_t sum)
{
    sum = (sum & 0xffff) + (sum >> 16);
    return (sum & 0xffff) + (sum >> 16);
}

/* A reduced sum (16 bits) between network order and the order this machine loads
 * 16-bit words in: a byte swap on little-endian machines, nothing on big-endian ones. */
static inline uint32_t sp_csum_native(uint32_t s16)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return ((s16 & 0xff) << 8) | (s16 >> 8);
#else
    return s16;
#endif
}

/* One's-complement addition is the same in either byte order (RFC 1071 section 2
 * (B)): sp_csum_acc() adds the words as the machine loads them, 8 bytes at a time with
 * the carry wrapped around, and sp_csum_acc_done() puts the sum in network order once
 * at the end. Inline, for the few short sums of every frame (an IPv4 header, a UDP
 * datagram), where a call would cost as much as the sum. acc starts at 0, or at
 * sp_csum_native() of a reduced partial sum. */
/* One 64-bit word (or any smaller value) added to an accumulator, the carry wrapped
 * around. */
static inline __attribute__((always_inline)) uint64_t sp_csum_acc_word(uint64_t acc, uint64_t v)
{
    acc += v;
    return acc + (acc < v);
}

static inline __attribute__((always_inline)) uint64_t sp_csum_acc(const void *data, size_t len, uint64_t acc)
{
    const uint8_t *p = data;
    uint64_t v;
    for (; len >= 8; p += 8, len -= 8) {
        memcpy(&v, p, 8);
        acc = sp_csum_acc_word(acc, v);
    }
    uint64_t rest = 0;
    if (len >= 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        rest = w;
        p += 4;
        len -= 4;
    }
    if (len >= 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        rest += w;
        p += 2;
        len -= 2;
    }
    if (len)   /* the high byte of a word in network order */
        rest += sp_csum_native((uint32_t)p[0] << 8);
    return sp_csum_acc_word(acc, rest);
}

/* What sp_csum_acc() added up, reduced to 16 bits in the machine's order. */
static inline __attribute__((always_inline)) uint32_t sp_csum_acc_reduce(uint64_t acc)
{
    acc = (acc & 0xffffffff) + (acc >> 32);
    return sp_csum_reduce((uint32_t)acc + (uint32_t)(acc >> 32));
}

/* The reduced partial sum (network order) of what sp_csum_acc() added up. */
static inline __attribute__((always_inline)) uint32_t sp_csum_acc_done(uint64_t acc)
{
    return sp_csum_native(sp_csum_acc_reduce(acc));
}

/* Whether what sp_csum_acc() added up is a right checksum's total: 0xffff, the same in
 * either byte order, so no conversion. Folding keeps a sum's value modulo 0xffff
 * (2^16 is 1 there) and makes a sum that is not 0 one of 1 to 0xffff, of which only
 * 0xffff is 0 modulo 0xffff: a test of divisibility, which compilers make a multiply
 * and a comparison, instead of the fold. */
static inline __attribute__((always_inline)) bool sp_csum_acc_is_ffff(uint64_t acc)
{
    return acc != 0 && acc % 0xffff == 0;
}

/* A partial sum in network order (below 2^40) added to an accumulator whose words are in
 * the machine's order: a byte swap is a multiplication by 256 modulo 0xffff, so on a
 * little-endian machine it is a shift, and the sum's bytes need not be swapped. The
 * caller keeps acc below 2^63 (a few words' sum, not one sp_csum_acc() wrapped). */
static inline __attribute__((always_inline)) uint64_t sp_csum_acc_net(uint64_t acc, uint64_t net)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return acc + (net << 8);
#else
    return acc + net;
#endif
}

/* The checksum field (complemented) for what sp_csum_acc() added up, in the machine's
 * order: for a 16-bit store, no byte swap. Each half added to the other by a rotation,
 * whose carry out of the low half lands in the high one: the end-around carry, in four
 * instructions a fold. */
static inline __attribute__((always_inline)) uint16_t sp_csum_acc_fold(uint64_t acc)
{
    uint32_t h = (uint32_t)((acc + (acc >> 32 | acc << 32)) >> 32);
    return (uint16_t)~((h + (h >> 16 | h << 16)) >> 16);
}

/* sp_csum_acc_is_ffff() of what is known not to be 0, without the test: a sum with a
 * word that is not 0 (the end-around carry never makes 0 of it). */
static inline __attribute__((always_inline)) bool sp_csum_acc_nonzero_is_ffff(uint64_t acc)
{
    return acc % 0xffff == 0;
}

/* Add two partial sums without losing carries. */
static inline __attribute__((always_inline)) uint32_t sp_csum_add(uint32_t a, uint32_t b)
{
    return sp_csum_reduce(a) + sp_csum_reduce(b);
}

/* One's-complement subtraction: sum of a block minus the sum of a sub-block. */
static inline __attribute__((always_inline)) uint32_t sp_csum_sub(uint32_t a, uint32_t b)
{
    return sp_csum_reduce(a) + (uint16_t)~sp_csum_reduce(b);
}

/* The sum of a block moved by an odd number of bytes is the byte-swapped sum. */
static inline __attribute__((always_inline)) uint32_t sp_csum_swap16(uint32_t s16)
{
    return ((s16 & 0xff) << 8) | (s16 >> 8);
}

/* sp_csum_swap16() of any partial sum, reduced first. */
static inline __attribute__((always_inline)) uint32_t sp_csum_swap(uint32_t sum)
{
    return sp_csum_swap16(sp_csum_reduce(sum));
}

/* RFC 1624 eqn. 3: new checksum field after one 16-bit word of the covered data
 * changed from old_word to new_word (all host order). */
static inline uint16_t sp_csum_update16(uint16_t check, uint16_t old_word, uint16_t new_word)
{
    uint32_t sum = (uint16_t)~check;
    sum += (uint16_t)~old_word;
    sum += new_word;
    return sp_csum_fold(sum);
}

#endif
