/* The response table's memory layout, private to the engine's table files (table.c
 * builds and reads it, table_prefetch.c fetches ahead of lookups). See table.h. */
#ifndef STORMPY_ENGINE_TABLE_LAYOUT_H
#define STORMPY_ENGINE_TABLE_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "stormpy/engine/table.h"

/* Zero bytes after the arena's last key: keys are compared a whole word at a time. */
#define ARENA_PAD 8u

struct entry {
    uint64_t tag;
    uint32_t key_off;
    uint32_t key_len;
    uint32_t response;
};

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

#endif
