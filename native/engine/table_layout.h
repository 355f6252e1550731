/* The response table's memory layout, private to the engine's table files (table.c
 * builds and reads it, table_prefetch.c fetches ahead of lookups). See table.h. */
#ifndef STORMPY_ENGINE_TABLE_LAYOUT_H
#define STORMPY_ENGINE_TABLE_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "stormpy/engine/table.h"

/* Zero bytes after the arena's last key: keys are compared a whole word at a time. */
#define ARENA_PAD 8u

struct entry {
    uint64_t tag;
    uint32_t key_off;
    uint32_t key_len;
    uint32_t response;
    /* The response's bytes_off, so that the prefetch stages fetch the answer's bytes with
     * the key and the response, not a stage later; a hint only (in what was padding). */
    uint32_t bytes_hint;
};
_Static_assert(sizeof(struct entry) == 24, "an entry: three to a 64-byte line and a bit");

/* Open addressing, linear probing; a slot keeps 32 bits of the hash so most
 * probes are rejected without touching the entry. */
struct slot {
    uint32_t hash;
    uint32_t entry_plus1;   /* 0: empty */
};

struct sp_table {
    uint8_t *arena;
    struct sp_response *responses;
    struct sp_patch *patches;
    struct entry *entries;
    struct slot *slots;
    uint64_t mask;
    uint64_t nentries, nresponses, npatches, arena_len;
    uint64_t program_off, program_len;   /* in the arena; len 0: none */
    bool flat;                  /* one block the caller owns (sp_table_flatten) */
};

/* The tag mixed into a key's hash (table.h: the bytes are hashed apart from it). */
static inline uint64_t hash_tagged(uint64_t key_hash, uint64_t tag)
{
    uint64_t h = (key_hash ^ tag) * 0xd6e8feb86659fd93ULL;
    h ^= h >> 32;
    h *= SP_KEY_HASH_MUL;
    return h ^ (h >> 32);
}

struct sp_table_builder {
    struct sp_table t;
    uint64_t cap_arena, cap_responses, cap_patches, cap_entries;
    uint64_t indexed;          /* entries already in t.slots (an edit's copy) */
    /* Patch lists stored once while they repeat; the first one (a protocol's usual
     * list) is looked at too, so one response with its own list between two with the
     * usual one does not store it twice. */
    uint32_t last_patch_off, first_patch_off;
    uint16_t last_npatch, first_npatch;
    /* A name's keys (one per kind of question) come one after another: its bytes are
     * stored once, which at a million names is tens of MiB. */
    uint32_t last_key_off, last_key_len;
};

/* An entry an edit removed: out of the index, its bytes left in place. */
#define REMOVED UINT32_MAX

static inline uint64_t hash_key(uint64_t tag, const uint8_t *k, size_t n)
{
    uint64_t h = sp_key_hash_start(n), v;
    for (; n >= 8; k += 8, n -= 8) {
        memcpy(&v, k, 8);
        h = sp_key_hash_word(h, v);
    }
    if (n) {
        v = 0;
        memcpy(&v, k, n);
        h = sp_key_hash_word(h, v);
    }
    return hash_tagged(h, tag);
}

static inline bool entry_matches(const struct sp_table *t, const struct entry *e, uint64_t tag,
                                 const uint8_t *key, size_t key_len)
{
    return e->tag == tag && e->key_len == key_len &&
           memcmp(t->arena + e->key_off, key, key_len) == 0;
}

/* Entry i into the index (its key's hash h); a key given twice keeps its later answer. */
void sp_table_index_entry(struct sp_table *t, uint64_t i, uint64_t h);

#endif
