/* Prefetch stages for a batch's lookups. See table.h. */
#include "stormpy/engine/table.h"

#include "table_layout.h"

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

/* The entry the lookup's probe will compare first: the first slot from its home on with
 * the same stored hash, within PROBE_AHEAD slots and the home slot's cache line (the one
 * stage 1 fetched; a collision only loses the hint). NULL when the probe ends on an
 * empty slot first. */
#define PROBE_AHEAD 4
#define LINE 64u

static inline const struct entry *first_entry(const struct sp_table *t, uint64_t h)
{
    uint32_t h32 = (uint32_t)(h >> 32);
    const struct slot *sl = &t->slots[h & t->mask], *end = t->slots + t->mask + 1;
    for (unsigned i = 0; i < PROBE_AHEAD; i++) {
        if (!sl->entry_plus1)
            return NULL;
        if (sl->hash == h32)
            return entry_at(t, sl->entry_plus1);
        if (++sl == end || (uintptr_t)sl % LINE == 0)
            return NULL;
    }
    return NULL;
}

const struct sp_table_hint *sp_table_prefetch_entry(const struct sp_table *t, uint64_t tagged_hash)
{
    const struct entry *e = first_entry(t, tagged_hash);
    if (e)
        __builtin_prefetch(e);
    return (const struct sp_table_hint *)e;
}

void sp_table_prefetch_key(const struct sp_table *t, const struct sp_table_hint *hint)
{
    const struct entry *e = (const struct entry *)hint;
    if (e) {
        __builtin_prefetch(t->arena + e->key_off);
        __builtin_prefetch(&t->responses[e->response]);
        __builtin_prefetch(t->arena + e->bytes_hint);
    }
}

void sp_response_prefetch(const struct sp_table *t, const struct sp_response *r)
{
    __builtin_prefetch(t->arena + r->bytes_off);
}
