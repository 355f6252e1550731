/* The response table's memory layout, private to the engine's table files (table.c
 * builds and reads it, table_prefetch.c fetches ahead of lookups). See table.h. */
#ifndef STORMPY_ENGINE_TABLE_LAYOUT_H
#define STORMPY_ENGINE_TABLE_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "stormpy/engine/table.h"
#include "stormpy/proto/csum.h"

/* Zero bytes after the arena's last key and response: keys are compared a whole word
 * at a time, and answers' tails copied in whole pieces (SP_RESPONSE_READ_PAST). */
#define ARENA_PAD SP_RESPONSE_READ_PAST

/* A key's entry. It lives in the arena, 8-byte aligned, where sp_table_add_key() was
 * called: after the bytes of the response added last (a zone's compiler adds each
 * answer, then its keys) and before its key's bytes (a name's later keys share the
 * first one's bytes), so that a lookup's entry, key and answer bytes are neighbouring
 * lines, not three lines far apart. */
struct entry {
    uint64_t tag;
    uint32_t key_off;
    uint32_t key_len;
    uint32_t response;
    /* The response's bytes_off, so that the prefetch stages fetch the answer's bytes with
     * the key and the response, not a stage later; a hint only. */
    uint32_t bytes_hint;
};
#define ENTRY_ALIGN 8u
_Static_assert(sizeof(struct entry) == 24 && _Alignof(struct entry) <= ENTRY_ALIGN,
               "an entry: 24 bytes, at any multiple of ENTRY_ALIGN");

/* Open addressing, linear probing; a slot keeps 32 bits of the hash so most
 * probes are rejected without touching the entry. */
struct slot {
    uint32_t hash;
    uint32_t entry_plus1;   /* the entry's offset in the arena / ENTRY_ALIGN, plus 1; 0: empty */
};
/* An index has this many slots at least: whole cache lines of them, which the prefetch
 * stages read a line at a time. */
#define MIN_SLOTS 16u

struct sp_table {
    uint8_t *arena;
    struct sp_response *responses;
    struct sp_patch *patches;
    uint32_t *added;            /* a builder's keys not yet indexed: their slot values */
    struct slot *slots;
    uint64_t mask;
    uint64_t nentries, nresponses, npatches, arena_len;   /* nentries: keys ever added */
    uint64_t program_off, program_len;   /* in the arena; len 0: none */
    uint32_t longest;           /* the longest response's stored length */
    bool flat;                  /* one block the caller owns (sp_table_flatten) */
};

/* The tag mixed into a key's hash (table.h: the bytes are hashed apart from it, and
 * mixed already). One multiply carries the tag's low bits into the high half; the
 * slot is chosen by the low bits, which the shift folds the high half into, and the
 * slot's filter is the high half. */
static inline uint64_t hash_tagged(uint64_t key_hash, uint64_t tag)
{
    uint64_t h = (key_hash ^ tag) * 0xd6e8feb86659fd93ULL;
    return h ^ (h >> 32);
}

struct sp_table_builder {
    struct sp_table t;
    uint64_t cap_arena, cap_responses, cap_patches, cap_added;
    uint64_t nadded;           /* keys in t.added */
    /* Patch lists stored once while they repeat; the first one (a protocol's usual
     * list) is looked at too, so one response with its own list between two with the
     * usual one does not store it twice. */
    uint32_t last_patch_off, first_patch_off;
    uint16_t last_npatch, first_npatch;
    /* A name's keys (one per kind of question) come one after another: its bytes are
     * stored once, which at a million names is tens of MiB. */
    uint32_t last_key_off, last_key_len;
    /* The arena's length where it ends with its padding (an edited table's): finishing
     * adds none again unless something was added since. */
    uint64_t padded_len;
};

/* The entry a slot names. */
static inline struct entry *entry_at(const struct sp_table *t, uint32_t entry_plus1)
{
    return (struct entry *)(void *)(t->arena + (size_t)(entry_plus1 - 1) * ENTRY_ALIGN);
}

static inline uint64_t hash_key(uint64_t tag, const uint8_t *k, size_t n)
{
    uint64_t h = sp_key_hash_start(n), v = 0;   /* as sp_key_hash_padded() (table.h) */
    if (n < 8) {
        memcpy(&v, k, n);
        return hash_tagged(sp_key_hash_word(h, v), tag);
    }
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&v, k + i, 8);
        h = sp_key_hash_word(h, v);
    }
    memcpy(&v, k + n - 8, 8);
    return hash_tagged(sp_key_hash_word(h, v), tag);
}

/* The whole hash of e's key, as the index placed it. */
static inline uint64_t entry_hash(const struct sp_table *t, const struct entry *e)
{
    return hash_key(e->tag, t->arena + e->key_off, e->key_len);
}

static inline bool entry_matches(const struct sp_table *t, const struct entry *e, uint64_t tag,
                                 const uint8_t *key, size_t key_len)
{
    return e->tag == tag && e->key_len == key_len &&
           memcmp(t->arena + e->key_off, key, key_len) == 0;
}

/* A response's sum_head (table.h) over its stored bytes, once echo_head and insert_at
 * are set. The echoed head's 4 bytes start at 0, so the rest starts at an even offset. */
static inline uint32_t head_sum(const uint8_t *bytes, const struct sp_response *r)
{
    size_t from = r->echo_head ? 4 : 0;
    return sp_csum_partial(bytes + from, r->insert_at - from, 0);
}

#endif
