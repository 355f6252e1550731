/* Prepackaged-response table: builder, hash index, flat copies. See table.h; the
 * rendering is table_render.c. */
#include "stormpy/engine/table.h"

#include <stdlib.h>
#include <string.h>

#include "stormpy/proto/csum.h"
#include "table_layout.h"

static bool grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    uint64_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return false;
    *p = q;
    *cap = n;
    return true;
}

struct sp_table_builder *sp_table_builder_new(void)
{
    return calloc(1, sizeof(struct sp_table_builder));
}

static void table_release(struct sp_table *t)
{
    free(t->arena);
    free(t->responses);
    free(t->patches);
    free(t->added);
    free(t->slots);
}

void sp_table_builder_free(struct sp_table_builder *b)
{
    if (!b)
        return;
    table_release(&b->t);
    free(b);
}

static bool append_arena(struct sp_table_builder *b, const uint8_t *p, uint32_t n, uint32_t *off)
{
    if (b->t.arena_len + n > UINT32_MAX)
        return false;
    if (!grow((void **)&b->t.arena, &b->cap_arena, b->t.arena_len + n, 1))
        return false;
    *off = (uint32_t)b->t.arena_len;
    if (n && p)
        memcpy(b->t.arena + b->t.arena_len, p, n);
    b->t.arena_len += n;
    return true;
}

/* Patches are checked once here so that rendering only checks request lengths. */
static bool patches_valid(const struct sp_patch *p, uint16_t n, uint32_t len, int *insert)
{
    *insert = -1;
    for (uint16_t i = 0; i < n; i++) {
        if (p[i].field >= SP_FIELDS)
            return false;
        if (p[i].op == SP_PATCH_INSERT) {
            if (*insert >= 0 || p[i].dst > len)
                return false;
            *insert = i;
        }
    }
    uint32_t at = *insert >= 0 ? p[*insert].dst : len;
    for (uint16_t i = 0; i < n; i++) {
        uint32_t span;
        switch (p[i].op) {
        case SP_PATCH_INSERT:
            continue;
        case SP_PATCH_COPY:
            span = p[i].len;
            break;
        case SP_PATCH_COPY_BITS:
            span = 1;
            break;
        case SP_PATCH_SHIFT:    /* a pointer after the splice, to a shifted place */
            if (*insert < 0 || p[i].field != p[*insert].field || p[i].dst < at)
                return false;
            span = 2;
            break;
        default:
            return false;
        }
        if (span == 0 || p[i].dst + span > len)
            return false;
        if (p[i].dst < at && p[i].dst + span > at)  /* must not straddle the splice */
            return false;
    }
    /* A COPY_BITS byte stays out of every COPY range, so the incremental checksum
     * can take the stored byte as the one it replaces. */
    for (uint16_t i = 0; i < n; i++)
        for (uint16_t j = 0; j < n && p[i].op == SP_PATCH_COPY_BITS; j++)
            if (p[j].op == SP_PATCH_COPY &&
                p[i].dst >= p[j].dst && p[i].dst < p[j].dst + p[j].len)
                return false;
    return true;
}

/* Whether the patches are the echoed head (table.h), with any SHIFTs after them, and
 * its masks. */
static bool is_echo_head(const struct sp_patch *p, uint16_t n, int insert, uint32_t len,
                         uint8_t mask[2])
{
    unsigned seen = 0;   /* bit 0: the COPY; bits 2 and 3: the COPY_BITS of those bytes */
    uint16_t head = 3 + (insert >= 0);
    for (uint16_t i = head; i < n; i++)
        if (p[i].op != SP_PATCH_SHIFT)
            return false;
    if (n < head || len < 4 || (insert >= 0 && p[insert].dst < 4))
        return false;
    for (uint16_t i = 0; i < head; i++) {
        if (p[i].op == SP_PATCH_INSERT)
            continue;
        if (p[i].field != 0 || p[i].src != p[i].dst)
            return false;
        if (p[i].op == SP_PATCH_COPY && p[i].dst == 0 && p[i].len == 2)
            seen |= 1;
        else if (p[i].op == SP_PATCH_COPY_BITS && (p[i].dst == 2 || p[i].dst == 3))
            seen |= 1u << p[i].dst, mask[p[i].dst - 2] = p[i].mask;
        else
            return false;
    }
    return seen == 0xd;
}

int64_t sp_table_add_response(struct sp_table_builder *b, const uint8_t *bytes, uint32_t len,
                              const struct sp_patch *patches, uint16_t npatch, uint32_t user)
{
    int insert;
    if ((len > SP_RESPONSE_MAX && (npatch || len > SP_BLOB_MAX)) ||
        !patches_valid(patches, npatch, len, &insert))
        return -1;
    struct sp_table *t = &b->t;
    if (!grow((void **)&t->responses, &b->cap_responses, t->nresponses + 1, sizeof(*t->responses)))
        return -1;

    struct sp_response *r = &t->responses[t->nresponses];
    memset(r, 0, sizeof(*r));
    if (!append_arena(b, bytes, len, &r->bytes_off))
        return -1;

    bool same = b->last_npatch == npatch && npatch &&
                memcmp(t->patches + b->last_patch_off, patches, npatch * sizeof(*patches)) == 0;
    if (!same && b->first_npatch == npatch && npatch &&
        memcmp(t->patches + b->first_patch_off, patches, npatch * sizeof(*patches)) == 0) {
        b->last_patch_off = b->first_patch_off;
        b->last_npatch = npatch;
        same = true;
    }
    if (!same) {
        if (!b->first_npatch && npatch) {
            b->first_patch_off = (uint32_t)t->npatches;
            b->first_npatch = npatch;
        }
        if (!grow((void **)&t->patches, &b->cap_patches, t->npatches + npatch, sizeof(*patches)))
            return -1;
        if (npatch)
            memcpy(t->patches + t->npatches, patches, npatch * sizeof(*patches));
        b->last_patch_off = (uint32_t)t->npatches;
        b->last_npatch = npatch;
        t->npatches += npatch;
    }
    r->patch_off = npatch ? b->last_patch_off : 0;
    r->npatch = npatch;
    r->len = len;
    r->user = user;
    t->longest = len > t->longest ? len : t->longest;
    /* a blob past 16-bit offsets keeps its whole sum in sum_tail */
    r->insert_at = (uint16_t)(insert >= 0 ? patches[insert].dst : len > UINT16_MAX ? 0 : len);
    r->insert_field = insert >= 0 ? patches[insert].field : SP_NO_INSERT;
    r->echo_head = is_echo_head(patches, npatch, insert, len, r->echo_mask);
    r->sum_head = head_sum(bytes, r);
    r->sum_tail = sp_csum_partial(bytes + r->insert_at, len - r->insert_at, 0);
    return (int64_t)t->nresponses++;
}

/* Room for n bytes at the arena's end, after zeros up to a multiple of ENTRY_ALIGN. */
static bool reserve_aligned(struct sp_table_builder *b, uint32_t n, uint32_t *off)
{
    static const uint8_t zeros[ENTRY_ALIGN];
    uint32_t pad = (uint32_t)(-b->t.arena_len & (ENTRY_ALIGN - 1));
    uint32_t unused;
    return append_arena(b, zeros, pad, &unused) && append_arena(b, NULL, n, off);
}

int sp_table_add_key(struct sp_table_builder *b, uint64_t tag, const uint8_t *key,
                     uint32_t key_len, uint32_t response)
{
    struct sp_table *t = &b->t;
    if (response >= t->nresponses || key_len > SP_KEY_MAX || t->nentries >= UINT32_MAX - 1)
        return -1;
    if (!grow((void **)&t->added, &b->cap_added, b->nadded + 1, sizeof(*t->added)))
        return -1;
    bool shared = t->nentries && key_len == b->last_key_len &&
                  memcmp(t->arena + b->last_key_off, key, key_len) == 0;
    uint64_t arena_len = t->arena_len;   /* put back on failure: no unwritten bytes kept */
    uint32_t at;
    struct entry e = {.tag = tag, .key_len = key_len, .response = response,
                      .bytes_hint = t->responses[response].bytes_off,
                      .key_off = b->last_key_off};
    if (!reserve_aligned(b, sizeof(struct entry), &at) ||
        (!shared && !append_arena(b, key, key_len, &e.key_off))) {
        t->arena_len = arena_len;
        return -1;
    }
    memcpy(t->arena + at, &e, sizeof(e));
    b->last_key_off = e.key_off;
    b->last_key_len = key_len;
    t->added[b->nadded++] = at / ENTRY_ALIGN + 1;
    t->nentries++;
    return 0;
}

int sp_table_set_program(struct sp_table_builder *b, const void *program, uint32_t len)
{
    uint32_t off;   /* 8-byte aligned in the arena, whose start is aligned in both layouts */
    if (b->t.program_len || !len || !reserve_aligned(b, len, &off))
        return -1;
    memcpy(b->t.arena + off, program, len);
    b->t.program_off = off;
    b->t.program_len = len;
    return 0;
}

const void *sp_table_program(const struct sp_table *t, size_t *len)
{
    *len = t->program_len;
    return t->program_len ? t->arena + t->program_off : NULL;
}

uint32_t sp_table_longest_response(const struct sp_table *t)
{
    return t->longest;
}

const struct sp_response *sp_table_response(const struct sp_table *t, uint32_t index)
{
    return index < t->nresponses ? &t->responses[index] : NULL;
}

/* The entry (a slot value) into the index, its key's hash h; a key given twice keeps its
 * later answer. */
static void index_entry(struct sp_table *t, uint32_t entry_plus1, uint64_t h)
{
    const struct entry *e = entry_at(t, entry_plus1);
    for (uint64_t s = h & t->mask;; s = (s + 1) & t->mask) {
        struct slot *sl = &t->slots[s];
        if (!sl->entry_plus1) {
            sl->hash = (uint32_t)(h >> 32);
            sl->entry_plus1 = entry_plus1;
            return;
        }
        if (sl->hash == (uint32_t)(h >> 32) &&
            entry_matches(t, entry_at(t, sl->entry_plus1), e->tag, t->arena + e->key_off,
                          e->key_len)) {
            sl->entry_plus1 = entry_plus1;
            return;
        }
    }
}

/* Indexes the n entries of list. Each insert is a cache miss in a big index: hash AHEAD
 * entries in advance and prefetch their slots, so the misses overlap (a million-name
 * zone: -0.2 s). */
static void index_entries(struct sp_table *t, const uint32_t *list, uint64_t n)
{
    enum { AHEAD = 16 };
    uint64_t ahead[AHEAD];
    for (uint64_t i = 0; i < n + AHEAD; i++) {
        if (i >= AHEAD)
            index_entry(t, list[i - AHEAD], ahead[i % AHEAD]);
        if (i < n) {
            ahead[i % AHEAD] = entry_hash(t, entry_at(t, list[i]));
            __builtin_prefetch(&t->slots[ahead[i % AHEAD] & t->mask], 1);
        }
    }
}

/* A new index of nslots holding the entries t's index holds (none for a new table; an
 * edit's when it outgrew its index). */
static bool reindex(struct sp_table *t, uint64_t nslots)
{
    struct slot *old = t->slots;
    uint64_t old_n = old ? t->mask + 1 : 0, kept = 0;
    uint32_t *list = old_n ? malloc(old_n * sizeof(*list)) : NULL;
    t->slots = calloc(nslots, sizeof(*t->slots));
    if (!t->slots || (old_n && !list)) {
        free(list);
        free(t->slots);
        t->slots = old;
        return false;
    }
    for (uint64_t s = 0; s < old_n; s++)
        if (old[s].entry_plus1)
            list[kept++] = old[s].entry_plus1;
    free(old);
    t->mask = nslots - 1;
    index_entries(t, list, kept);
    free(list);
    return true;
}

struct sp_table *sp_table_builder_finish(struct sp_table_builder *b)
{
    struct sp_table *t = &b->t;
    static const uint8_t pad[ARENA_PAD];
    uint32_t pad_off;
    if ((t->arena_len == 0 || t->arena_len != b->padded_len) &&
        !append_arena(b, pad, ARENA_PAD, &pad_off)) {
        sp_table_builder_free(b);
        return NULL;
    }
    uint64_t nslots = MIN_SLOTS;
    while (nslots < t->nentries * 2)   /* load factor at most 1/2 */
        nslots *= 2;
    if ((!t->slots || nslots > t->mask + 1) && !reindex(t, nslots)) {
        sp_table_builder_free(b);
        return NULL;
    }
    index_entries(t, t->added, b->nadded);
    free(t->added);
    t->added = NULL;
    struct sp_table *out = malloc(sizeof(*out));
    if (!out) {
        sp_table_builder_free(b);
        return NULL;
    }
    *out = *t;
    free(b);
    return out;
}

void sp_table_free(struct sp_table *t)
{
    if (!t || t->flat)
        return;
    table_release(t);
    free(t);
}

/* The probe sequence for a key whose whole hash is h. padded: the key is readable in
 * whole words (sp_table_find_hashed()), so it is compared a word at a time; inlined
 * with padded a constant. */
static inline __attribute__((always_inline)) const struct sp_response *
probe(const struct sp_table *t, uint64_t h, uint64_t tag, const uint8_t *key, size_t key_len,
      bool padded)
{
    uint32_t h32 = (uint32_t)(h >> 32);
    for (uint64_t s = h & t->mask;; s = (s + 1) & t->mask) {
        const struct slot *sl = &t->slots[s];
        if (!sl->entry_plus1)
            return NULL;
        if (sl->hash != h32)
            continue;
        const struct entry *e = entry_at(t, sl->entry_plus1);
        if (padded ? e->tag == tag && e->key_len == key_len &&
                         sp_words_equal(t->arena + e->key_off, key, key_len)
                   : entry_matches(t, e, tag, key, key_len))
            return &t->responses[e->response];
    }
}

const struct sp_response *sp_table_find(const struct sp_table *t, uint64_t tag,
                                        const uint8_t *key, size_t key_len)
{
    return probe(t, hash_key(tag, key, key_len), tag, key, key_len, false);
}

const struct sp_response *sp_table_find_hashed(const struct sp_table *t, uint64_t tag,
                                               uint64_t key_hash, const uint8_t *key,
                                               size_t key_len)
{
    return probe(t, hash_tagged(key_hash, tag), tag, key, key_len, true);
}

/* The hint is the entry of the first slot from the home slot on whose stored hash is
 * the key's: when it is the key, the probe would have returned it too. */
const struct sp_response *sp_table_find_tagged(const struct sp_table *t, uint64_t tag,
                                               uint64_t tagged_hash, const uint8_t *key,
                                               size_t key_len, const struct sp_table_hint *hint)
{
    const struct entry *e = (const struct entry *)hint;
    if (e && e->tag == tag && e->key_len == key_len &&
        sp_words_equal(t->arena + e->key_off, key, key_len))
        return &t->responses[e->response];
    return probe(t, tagged_hash, tag, key, key_len, true);
}

#define FLAT_ALIGN 64u

static inline size_t flat_round(size_t n)
{
    return (n + FLAT_ALIGN - 1) / FLAT_ALIGN * FLAT_ALIGN;
}

size_t sp_table_flat_size(const struct sp_table *t)
{
    return flat_round(sizeof(*t)) + flat_round(t->arena_len) +
           flat_round(t->nresponses * sizeof(struct sp_response)) +
           flat_round(t->npatches * sizeof(struct sp_patch)) +
           flat_round((t->mask + 1) * sizeof(struct slot));
}

/* Places n bytes of src at *at and advances it; an empty array gets a valid pointer. */
static void *flat_put(uint8_t **at, const void *src, size_t n)
{
    void *dst = *at;
    if (n)
        memcpy(dst, src, n);
    memset(*at + n, 0, flat_round(n) - n);    /* the block may be reused, not zeroed */
    *at += flat_round(n);
    return dst;
}

struct sp_table *sp_table_flatten(const struct sp_table *t, void *mem)
{
    uint8_t *at = mem;
    struct sp_table *out = flat_put(&at, t, sizeof(*t));
    out->arena = flat_put(&at, t->arena, t->arena_len);
    out->responses = flat_put(&at, t->responses, t->nresponses * sizeof(struct sp_response));
    out->patches = flat_put(&at, t->patches, t->npatches * sizeof(struct sp_patch));
    out->added = NULL;
    out->slots = flat_put(&at, t->slots, (t->mask + 1) * sizeof(struct slot));
    out->flat = true;
    return out;
}

struct sp_table *sp_table_flat_rebase(void *mem, size_t len)
{
    if (len < sizeof(struct sp_table) || ((uintptr_t)mem % FLAT_ALIGN) != 0)
        return NULL;
    struct sp_table *t = mem;
    if (!t->flat || ((t->mask + 1) & t->mask) != 0 || t->mask < MIN_SLOTS - 1 || t->mask >= len ||
        t->nentries >= len ||
        t->nresponses >= len || t->npatches >= len || t->arena_len >= len ||
        t->program_off + t->program_len > t->arena_len ||
        sp_table_flat_size(t) != len)
        return NULL;
    /* the same layout sp_table_flatten() wrote, from this block's own base */
    uint8_t *at = (uint8_t *)mem + flat_round(sizeof(*t));
    t->arena = at;
    at += flat_round(t->arena_len);
    t->responses = (struct sp_response *)at;
    at += flat_round(t->nresponses * sizeof(struct sp_response));
    t->patches = (struct sp_patch *)at;
    at += flat_round(t->npatches * sizeof(struct sp_patch));
    t->added = NULL;
    t->slots = (struct slot *)at;
    return t;
}

bool sp_table_is_flat(const struct sp_table *t)
{
    return t->flat;
}

void sp_table_get_info(const struct sp_table *t, struct sp_table_info *info)
{
    info->keys = t->nentries;
    info->responses = t->nresponses;
    info->patches = t->npatches;
    info->arena_bytes = t->arena_len;
    info->slots = t->mask + 1;
    info->longest_response = t->longest;
    info->memory_bytes = t->arena_len + t->nresponses * sizeof(struct sp_response) +
                         t->npatches * sizeof(struct sp_patch) +
                         (t->mask + 1) * sizeof(struct slot);
}
