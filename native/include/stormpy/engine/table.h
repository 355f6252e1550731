/*
 * The prepackaged-response table: stormpy's protocol-neutral fast path.
 *
 * A table maps keys to responses built ahead of time. Each key is a byte string
 * plus a 64-bit tag that namespaces it (DNS packs lookup kind, class and type in
 * the tag and puts the lower-cased wire name in the bytes; an HTTP responder would
 * use the method and the path). Each response is the complete payload to send,
 * plus a short list of patches that make it the answer to one particular request:
 *
 *   SP_PATCH_COPY      copy len bytes from a request field into the response
 *                      (a DNS ID, a transaction ID at a fixed offset);
 *   SP_PATCH_COPY_BITS copy the bits in mask of one byte (DNS RD and CD);
 *   SP_PATCH_INSERT    splice a whole request field into the response (the DNS
 *                      question, echoed with the client's own letter case);
 *   SP_PATCH_SHIFT     add the inserted field's length less len to the 14-bit
 *                      offset of a DNS compression pointer after the splice: a
 *                      response stored for a question len bytes long, compressed
 *                      throughout, answers a longer one ending the same way.
 *
 * Requests are described by up to SP_FIELDS byte ranges ("fields"): field 0 is the
 * received payload, the others are views a protocol parser prepared (for DNS,
 * field 1 is the decompressed question). Offsets in patches refer to the stored
 * response; a response has at most one INSERT and bytes after it shift by the
 * inserted length.
 *
 * A built table is immutable: workers read it without locks, and a reload builds a
 * new table and swaps a pointer (see table_ref.h). Nothing here allocates after
 * sp_table_builder_finish().
 */
#ifndef STORMPY_ENGINE_TABLE_H
#define STORMPY_ENGINE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stormpy/proto/wire.h"

#define SP_FIELDS 4
#define SP_KEY_MAX 1024
#define SP_RESPONSE_MAX 65535
/* A response without patches is a blob sent by reference (an HTTP body), never
 * rendered into a packet, so it may be larger. */
#define SP_BLOB_MAX (1u << 30)

enum sp_patch_op {
    SP_PATCH_COPY = 1,
    SP_PATCH_COPY_BITS = 2,
    SP_PATCH_INSERT = 3,
    SP_PATCH_SHIFT = 4,
};

struct sp_patch {
    uint8_t op;
    uint8_t field;  /* request field the bytes come from */
    uint8_t mask;   /* COPY_BITS only */
    uint8_t pad;
    uint16_t dst;   /* offset in the stored response */
    uint16_t src;   /* offset in the field (COPY, COPY_BITS) */
    uint16_t len;   /* COPY: bytes; SHIFT: the stored question's length */
};

/* SP_PATCH_SHIFT's value: a stored compression pointer (two bytes) for a question of
 * `stored` bytes, moved for one of ins_len bytes, as its target moved. Kept to 14 bits
 * (compilers leave room below 0x4000 for the longest question). */
static inline uint16_t sp_shifted_pointer(const uint8_t *stored_ptr, size_t ins_len, uint16_t stored)
{
    uint16_t v = sp_get16(stored_ptr);
    return (uint16_t)(0xc000u | ((v + ins_len - stored) & 0x3fffu));
}

struct sp_request {
    const uint8_t *field[SP_FIELDS];
    uint16_t field_len[SP_FIELDS];
};

struct sp_response {
    uint32_t bytes_off;   /* into the table's byte arena */
    uint32_t len;         /* stored length, before any INSERT */
    uint32_t patch_off;   /* into the table's patch array */
    uint16_t npatch;
    uint16_t insert_at;   /* offset of the INSERT, or len when there is none */
    /* reduced partial checksum (sp_csum_partial()) of bytes[0, insert_at); with an echoed
     * head, of bytes[4, insert_at): those 4 are the request's in every rendering */
    uint32_t sum_head;
    uint32_t sum_tail;    /* reduced partial checksum of bytes[insert_at, len) */
    uint32_t user;        /* opaque to the table; DNS keeps the rcode here */
    uint8_t insert_field; /* the field spliced in at insert_at, or SP_NO_INSERT */
    /* 1 when the patches are the echoed head (below), then any SHIFTs (their bytes all
     * after the INSERT): rendered without the patch loop */
    uint8_t echo_head;
    uint8_t echo_mask[2]; /* the echoed head's masks for bytes 2 and 3 */
};

#define SP_NO_INSERT 0xff

/* The echoed head: a request/response protocol's transaction ID and flag bits (DNS's
 * patch list, and many others'). Exactly COPY field 0 [0, 2) to 0, COPY_BITS byte 2
 * and byte 3 of field 0 to the same bytes, and at most one INSERT at 4 or beyond. */

/* The echoed head applied to a rendering's first 4 bytes at out (its stored bytes, or
 * an earlier request's): the request's ID and masked flag bits from m (field 0, at least
 * 4 bytes), in one word. */
static inline void sp_echo_head(const struct sp_response *r, const uint8_t *m, uint8_t *out)
{
    const uint8_t mask_bytes[4] = {0xff, 0xff, r->echo_mask[0], r->echo_mask[1]};
    uint32_t mask, stored, asked;
    memcpy(&mask, mask_bytes, 4);
    memcpy(&stored, out, 4);
    memcpy(&asked, m, 4);
    stored = (stored & ~mask) | (asked & mask);
    memcpy(out, &stored, 4);
}

struct sp_table;          /* opaque, immutable once built */
struct sp_table_builder;  /* opaque */

/* Builder: collect responses and keys, then finish into an immutable table.
 * Identical patch lists are stored once. Returns NULL on allocation failure. */
struct sp_table_builder *sp_table_builder_new(void);
void sp_table_builder_free(struct sp_table_builder *b);

/* Add a response; returns its index, or -1 (bad patch list or out of memory).
 * Patches are validated here, so rendering needs no checks beyond field lengths. */
int64_t sp_table_add_response(struct sp_table_builder *b, const uint8_t *bytes, uint32_t len,
                              const struct sp_patch *patches, uint16_t npatch, uint32_t user);

/* Map (tag, key) to a response index. A key added twice keeps the last response.
 * Returns 0, or -1 for a bad index, an oversized key or out of memory. */
int sp_table_add_key(struct sp_table_builder *b, uint64_t tag, const uint8_t *key,
                     uint32_t key_len, uint32_t response);

/* Attach a program: bytes the table keeps for the protocol layer that reads it and
 * never interprets (a custom responder's rule list, rules.h). Keeping it in the
 * table means one swap replaces rules and responses together. At most one; it is
 * 8-byte aligned in the table. 0, or -1 (a second program, empty, out of memory). */
int sp_table_set_program(struct sp_table_builder *b, const void *program, uint32_t len);

/* A builder holding a copy of t, index and all, so that a small change (a secondary's
 * IXFR) costs a copy of the table and the change, not a rebuild: remove keys, add
 * responses and keys, rewrite bytes of responses, then finish() indexes only what
 * was added (every key, when the index must grow). t is left as it was (workers may be reading it). A removed key's bytes
 * and a response no key uses any more stay in the copy until a table is built
 * afresh. NULL when out of memory. */
struct sp_table_builder *sp_table_builder_edit(const struct sp_table *t);
/* Take (tag, key) out; 0, or 1 when the table has no such key. */
int sp_table_remove_key(struct sp_table_builder *b, uint64_t tag, const uint8_t *key,
                        uint32_t key_len);
/* len bytes at offset at of response index replaced (its length kept, its sums
 * recomputed). 0, or -1 when they do not fit. */
int sp_table_rewrite(struct sp_table_builder *b, uint32_t index, uint32_t at,
                     const uint8_t *bytes, uint32_t len);

/* Build the hash index. The builder is consumed (freed) in every case. */
struct sp_table *sp_table_builder_finish(struct sp_table_builder *b);
/* Frees a table built by sp_table_builder_finish(); a flat table is left alone. */
void sp_table_free(struct sp_table *t);

/* A table as one self-contained block, for memory the caller manages (the region
 * shared with worker processes, see shm.h). flat_size is the block's length;
 * mem must be 64-byte aligned. The copy is freed with its memory, never with
 * sp_table_free(). */
size_t sp_table_flat_size(const struct sp_table *t);
struct sp_table *sp_table_flatten(const struct sp_table *t, void *mem);
bool sp_table_is_flat(const struct sp_table *t);
/* A flat table's bytes copied elsewhere (a file this build wrote, for tests and
 * fuzzing): points it at its new place. Checks the sizes, not the contents, so
 * it is no way to load tables from strangers. NULL when the sizes disagree. */
struct sp_table *sp_table_flat_rebase(void *mem, size_t len);

/* The table's program and its length, or NULL when it has none. */
const void *sp_table_program(const struct sp_table *t, size_t *len);
/* The stored length of the table's longest response (0: no response), so that a mode
 * that pays only for long answers can know ahead that a table has none. */
uint32_t sp_table_longest_response(const struct sp_table *t);
/* Response number `index` as sp_table_add_response() returned it; NULL past the end. */
const struct sp_response *sp_table_response(const struct sp_table *t, uint32_t index);

/* Look up a key given as one byte string; NULL when absent. */
const struct sp_response *sp_table_find(const struct sp_table *t, uint64_t tag,
                                        const uint8_t *key, size_t key_len);

/* The hash of a key's bytes, made 8 bytes at a time, so that a parser that walks a
 * key anyway (DNS's question name) hashes it on the way: sp_key_hash_start(), then
 * sp_key_hash_word() for each whole word before the key's last byte, and last the 8
 * bytes that end the key (overlapping the word before: loaded in bounds, nothing to
 * mask). A key shorter than 8 bytes is one word, its first bytes kept (sp_keep_bytes()).
 * The tag is mixed in per lookup, so one name's hash serves every tag it is looked up
 * under. */
#define SP_KEY_HASH_MUL 0x9e3779b97f4a7c15ULL

static inline uint64_t sp_key_hash_start(size_t len)
{
    return len;
}

/* The product's high half is its well-mixed one: rotated down, it is what the next
 * word's multiply spreads upward again (one instruction, where a shift and an xor
 * took two). */
static inline uint64_t sp_key_hash_word(uint64_t h, uint64_t word)
{
    h = (h ^ word) * SP_KEY_HASH_MUL;
    return h >> 29 | h << 35;
}

/* The hash of a key in a buffer readable in whole words (up to key_len rounded up to
 * 8 bytes), without a call. */
static inline uint64_t sp_key_hash_padded(const uint8_t *key, size_t key_len)
{
    uint64_t h = sp_key_hash_start(key_len), w;
    if (key_len < 8) {
        memcpy(&w, key, 8);
        return sp_key_hash_word(h, sp_keep_bytes(w, key_len));
    }
    for (size_t i = 0; i + 8 < key_len; i += 8) {
        memcpy(&w, key + i, 8);
        h = sp_key_hash_word(h, w);
    }
    memcpy(&w, key + key_len - 8, 8);
    return sp_key_hash_word(h, w);
}

/* sp_table_find() for a key whose hash is known (sp_key_hash_*), in a buffer readable
 * in whole words as for sp_key_hash_padded(): compared 8 bytes at a time. */
const struct sp_response *sp_table_find_hashed(const struct sp_table *t, uint64_t tag,
                                               uint64_t key_hash, const uint8_t *key,
                                               size_t key_len);

/* Prefetches for lookups a batch makes together (DPDK's way: the whole batch waits for
 * memory at once, not one miss after another). A lookup of a large table misses the
 * cache three times in a chain: the slot, the entry it names (its key's bytes usually
 * beside it), and then the response and its bytes. Each stage below reads only what the stage before fetched, so
 * running stage 1 over the batch, then stage 2, then stage 3, overlaps every frame's
 * misses. sp_table_prefetch_slot() returns the tagged hash stage 2 and the lookup take;
 * stage 2 returns the hint stage 3 and the lookup take. Prefetches and hints change the
 * way to an answer, never the answer: sp_table_find_tagged() finds what
 * sp_table_find_hashed() finds. */
/* Whether t's index outgrows a core's own caches, so that lookups miss and the stages
 * pay for themselves; below that they cost only their instructions. */
bool sp_table_worth_prefetching(const struct sp_table *t);
uint64_t sp_table_prefetch_slot(const struct sp_table *t, uint64_t tag, uint64_t key_hash);
/* Stage 2 returns what stage 3 and the lookup take: the entry the lookup's probe will
 * compare first, or NULL (a hint: stage 3 fetches its key, the lookup compares it first
 * and probes only when it is not the key). */
struct sp_table_hint;
const struct sp_table_hint *sp_table_prefetch_entry(const struct sp_table *t, uint64_t tagged_hash);
void sp_table_prefetch_key(const struct sp_table *t, const struct sp_table_hint *hint);
/* sp_table_find_hashed() with the hash sp_table_prefetch_slot() returned for tag, and
 * the hint stage 2 returned for it. */
const struct sp_response *sp_table_find_tagged(const struct sp_table *t, uint64_t tag,
                                               uint64_t tagged_hash, const uint8_t *key,
                                               size_t key_len, const struct sp_table_hint *hint);
/* ... and a found response's stored bytes, before rendering it. */
void sp_response_prefetch(const struct sp_table *t, const struct sp_response *r);

/* Render a response for one request into out. Returns the length written, or 0
 * when it does not fit in cap or a patch reads past a request field. */
size_t sp_response_render(const struct sp_table *t, const struct sp_response *r,
                          const struct sp_request *req, uint8_t *out, size_t cap);

/* The length sp_response_render() writes for this request (0 is a valid, empty
 * response: render's 0 alone cannot tell it from a failure). */
size_t sp_response_len(const struct sp_table *t, const struct sp_response *r,
                       const struct sp_request *req);

/* Render only the first stored_len stored bytes (patches beyond them are
 * skipped): a response whose tail is optional, such as DNS additional records. */
size_t sp_response_render_prefix(const struct sp_table *t, const struct sp_response *r,
                                 const struct sp_request *req, size_t stored_len, uint8_t *out,
                                 size_t cap);

/* Partial checksum of what sp_response_render() wrote, computed from the stored
 * sums and the patched bytes only (RFC 1624), never from the whole payload. */
uint32_t sp_response_sum(const struct sp_table *t, const struct sp_response *r,
                         const struct sp_request *req);

/* sp_response_sum() when the inserted field's partial sum is known (a parser summed
 * it on the way): only the patched bytes are read. */
uint32_t sp_response_sum_with(const struct sp_table *t, const struct sp_response *r,
                              const struct sp_request *req, uint32_t insert_sum);

/* Stored bytes of a response (for tests and tools). They may be read up to
 * SP_RESPONSE_READ_PAST bytes past their end (the table's arena is padded), so that a
 * short answer is copied in whole pieces of a fixed count, not by a loop. */
const uint8_t *sp_response_bytes(const struct sp_table *t, const struct sp_response *r);
#define SP_RESPONSE_READ_PAST 64u

/* An echoed head's patches (the head's, and the INSERT's); SHIFTs follow them. */
#define SP_ECHO_PATCHES(r) (3u + ((r)->insert_field != SP_NO_INSERT))
/* An echoed-head response's SHIFTs applied to out, its rendering for an INSERT of
 * ins_len bytes (those stored before stored_len); and their change to a sum of it. */
void sp_response_shift(const struct sp_table *t, const struct sp_response *r, size_t ins_len,
                       size_t stored_len, uint8_t *out);
uint32_t sp_response_shift_sum(const struct sp_table *t, const struct sp_response *r,
                               size_t ins_len, uint32_t sum);
const struct sp_patch *sp_response_patches(const struct sp_table *t, const struct sp_response *r);

struct sp_table_info {
    uint64_t keys, responses, patches, arena_bytes, slots, memory_bytes;
    uint64_t longest_response;   /* sp_table_longest_response() */
};
void sp_table_get_info(const struct sp_table *t, struct sp_table_info *info);

#endif
