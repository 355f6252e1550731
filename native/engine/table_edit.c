/* A built table edited into a new one: see table.h (sp_table_builder_edit). */
#include "stormpy/engine/table.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "stormpy/proto/csum.h"
#include "table_layout.h"

#define HUGE_PAGE (2u << 20)

/* n items of p in a new array with room to grow by an eighth. A large one (a big
 * zone's table, edited for every IXFR) in transparent huge pages where the kernel
 * gives them on request: its first touch costs a fault per 2 MiB, not per 4 KiB. */
static void *copy(const void *p, uint64_t n, size_t item, uint64_t *cap)
{
    *cap = n + n / 8 + 64;
    size_t bytes = *cap * item;
    void *q = NULL;
    if (bytes >= 4 * HUGE_PAGE) {
        bytes = (bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
        if (posix_memalign(&q, HUGE_PAGE, bytes) == 0)
            madvise(q, bytes, MADV_HUGEPAGE);     /* a hint: refused, 4 KiB pages */
        else
            q = NULL;
    } else {
        q = malloc(bytes);
    }
    if (q != NULL && n)
        memcpy(q, p, n * item);
    return q;
}

struct sp_table_builder *sp_table_builder_edit(const struct sp_table *t)
{
    struct sp_table_builder *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    struct sp_table *n = &b->t;
    uint64_t slots_cap;
    n->arena = copy(t->arena, t->arena_len, 1, &b->cap_arena);
    n->responses = copy(t->responses, t->nresponses, sizeof(*t->responses), &b->cap_responses);
    n->patches = copy(t->patches, t->npatches, sizeof(*t->patches), &b->cap_patches);
    n->slots = copy(t->slots, t->mask + 1, sizeof(*t->slots), &slots_cap);
    if (!n->arena || !n->responses || !n->patches || !n->slots) {
        sp_table_builder_free(b);
        return NULL;
    }
    n->mask = t->mask;
    n->nentries = t->nentries;
    n->nresponses = t->nresponses;
    n->npatches = t->npatches;
    n->arena_len = b->padded_len = t->arena_len;
    n->program_off = t->program_off;
    n->program_len = t->program_len;
    n->longest = t->longest;
    return b;
}

int sp_table_remove_key(struct sp_table_builder *b, uint64_t tag, const uint8_t *key,
                        uint32_t key_len)
{
    struct sp_table *t = &b->t;
    if (t->slots == NULL)
        return 1;
    uint64_t h = hash_key(tag, key, key_len), s = h & t->mask;
    for (;; s = (s + 1) & t->mask) {
        const struct slot *sl = &t->slots[s];
        if (!sl->entry_plus1)
            return 1;
        if (sl->hash == (uint32_t)(h >> 32) &&
            entry_matches(t, entry_at(t, sl->entry_plus1), tag, key, key_len))
            break;
    }
    /* Linear probing's deletion: each later entry of the cluster moves back into the
     * hole unless its home slot lies cyclically in (hole, where it is]. */
    uint64_t hole = s;
    for (uint64_t j = (s + 1) & t->mask; t->slots[j].entry_plus1; j = (j + 1) & t->mask) {
        uint64_t home = entry_hash(t, entry_at(t, t->slots[j].entry_plus1)) & t->mask;
        bool stays = hole < j ? home > hole && home <= j : home > hole || home <= j;
        if (!stays) {
            t->slots[hole] = t->slots[j];
            hole = j;
        }
    }
    t->slots[hole] = (struct slot){0, 0};
    return 0;
}

int sp_table_rewrite(struct sp_table_builder *b, uint32_t index, uint32_t at,
                     const uint8_t *bytes, uint32_t len)
{
    struct sp_table *t = &b->t;
    if (index >= t->nresponses)
        return -1;
    struct sp_response *r = &t->responses[index];
    if (at > r->len || len > r->len - at)
        return -1;
    uint8_t *p = t->arena + r->bytes_off;
    memcpy(p + at, bytes, len);
    r->sum_head = head_sum(p, r);
    r->sum_tail = sp_csum_partial(p + r->insert_at, r->len - r->insert_at, 0);
    return 0;
}
