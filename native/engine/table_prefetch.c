/* Prefetch stages for a batch's lookups. See table.h. */
#include "stormpy/engine/table.h"

#include "table_layout.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Half a typical L2 cache (512 KB to 1 MB a core on current x86 and Arm servers): the
 * slots and entries a lookup reads (the entries counted at their own size, though they
 * lie among the keys and answers in the arena), the responses aside. */
#define CACHED_INDEX_BYTES (256u * 1024)

bool sp_table_worth_prefetching(const struct sp_table *t)
{
    return (t->mask + 1) * sizeof(struct slot) + t->nentries * sizeof(struct entry) >
           CACHED_INDEX_BYTES;
}

uint64_t sp_table_prefetch_slot(const struct sp_table *t, uint64_t tag, uint64_t key_hash)
{
    uint64_t h = hash_tagged(key_hash, tag);
    __builtin_prefetch(&t->slots[h & t->mask]);
    return h;
}

/* Stage 2's hint: the entry the lookup's probe will compare first, the first slot from
 * its home on with the same stored hash, within the home slot's line of SLOTS_PER_LINE
 * slots (the line stage 1 fetched; a collision only loses the hint). NULL when the probe
 * ends on an empty slot first, or leaves the line. Whether a name is in the table is
 * the workload's coin toss, so the slots are compared all at once and the hint chosen
 * by masks: branches on it here mispredicted 1.2 times a frame. */
#define SLOTS_PER_LINE (64u / sizeof(struct slot))

/* a when c, else b: by masks, as GCC made a branch of `?:` here */
static inline uintptr_t either(bool c, uintptr_t a, uintptr_t b)
{
    uintptr_t m = 0 - (uintptr_t)c;
    return (a & m) | (b & ~m);
}

/* Bit 2i: slot i of the line has hash h32; bit 2i + 1: slot i is empty. */
static inline unsigned line_bits(const struct slot *line, uint32_t h32)
{
#if defined(__SSE2__)
    const __m128i want = _mm_set_epi32(0, (int)h32, 0, (int)h32);
    const __m128i *v = (const __m128i *)(const void *)line;
    __m128i lo = _mm_packs_epi32(_mm_cmpeq_epi32(_mm_loadu_si128(v), want),
                                 _mm_cmpeq_epi32(_mm_loadu_si128(v + 1), want));
    __m128i hi = _mm_packs_epi32(_mm_cmpeq_epi32(_mm_loadu_si128(v + 2), want),
                                 _mm_cmpeq_epi32(_mm_loadu_si128(v + 3), want));
    return (unsigned)_mm_movemask_epi8(_mm_packs_epi16(lo, hi));
#else
    unsigned bits = 0;
    for (unsigned i = 0; i < SLOTS_PER_LINE; i++)
        bits |= (unsigned)(line[i].hash == h32) << 2 * i |
                (unsigned)(line[i].entry_plus1 == 0) << (2 * i + 1);
    return bits;
#endif
}

const struct sp_table_hint *sp_table_prefetch_entry(const struct sp_table *t, uint64_t tagged_hash)
{
    uint64_t home = tagged_hash & t->mask;
    /* an index has MIN_SLOTS at least, so the whole line is in it */
    const struct slot *line = &t->slots[home & ~(uint64_t)(SLOTS_PER_LINE - 1)];
    unsigned bits = line_bits(line, (uint32_t)(tagged_hash >> 32)) &
                    (0xffffu << 2 * (home % SLOTS_PER_LINE));    /* from the home slot on */
    unsigned match = bits & 0x5555u, empty = (bits >> 1) & 0x5555u;
    match &= (empty & (0u - empty)) - 1;   /* only slots before the first empty one */
    unsigned first = (unsigned)__builtin_ctz(match | 0x4000u) / 2;
    /* entry_at() as an integer: the slot may be empty, the address is then not used */
    uintptr_t e = (uintptr_t)t->arena + ((uintptr_t)line[first].entry_plus1 - 1) * ENTRY_ALIGN;
    uintptr_t hint = either(match != 0, e, 0);
    __builtin_prefetch((const void *)either(match != 0, e, (uintptr_t)t));
    return (const struct sp_table_hint *)hint;
}

/* What stage 3 prefetches for no entry: the same few lines every time, which stay
 * cached, so that it need not branch on the coin either. */
static const struct entry no_entry;

void sp_table_prefetch_key(const struct sp_table *t, const struct sp_table_hint *hint)
{
    const struct entry *e =
        (const struct entry *)either(hint != NULL, (uintptr_t)hint, (uintptr_t)&no_entry);
    __builtin_prefetch(t->arena + e->key_off);
    __builtin_prefetch(&t->responses[e->response]);
    __builtin_prefetch(t->arena + e->bytes_hint);
}

void sp_response_prefetch(const struct sp_table *t, const struct sp_response *r)
{
    __builtin_prefetch(t->arena + r->bytes_off);
}
