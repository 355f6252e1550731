/* Prefetch stages for a batch's lookups. See table.h. */
#include "stormpy/engine/table.h"

#include "table_layout.h"

/* Half a typical L2 cache (512 KB to 1 MB a core on current x86 and Arm servers): the
 * slots and entries a lookup reads, the responses and the rest of the arena aside. */
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
 * the same stored hash, within PROBE_AHEAD slots (a collision only loses the hint).
 * NULL when the probe ends on an empty slot first. */
#define PROBE_AHEAD 4

static inline const struct entry *first_entry(const struct sp_table *t, uint64_t h)
{
    uint32_t h32 = (uint32_t)(h >> 32);
    uint64_t s = h & t->mask;
    for (unsigned i = 0; i < PROBE_AHEAD; i++, s = (s + 1) & t->mask) {
        const struct slot *sl = &t->slots[s];
        if (!sl->entry_plus1)
            return NULL;
        if (sl->hash == h32)
            return entry_at(t, sl->entry_plus1);
    }
    return NULL;
}

void sp_table_prefetch_entry(const struct sp_table *t, uint64_t tagged_hash)
{
    const struct entry *e = first_entry(t, tagged_hash);
    if (e)
        __builtin_prefetch(e);
}

void sp_table_prefetch_key(const struct sp_table *t, uint64_t tagged_hash)
{
    const struct entry *e = first_entry(t, tagged_hash);
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
