/* A table's response rendered for one request, and the Internet checksum of that
 * rendering from the stored sums (see table.h): the per-request half of the table. */
#include "stormpy/engine/table.h"

#include <string.h>

#include "stormpy/proto/csum.h"
#include "table_layout.h"

static inline size_t shifted(const struct sp_response *r, uint16_t dst, size_t ins_len)
{
    return dst >= r->insert_at ? dst + ins_len : dst;
}

size_t sp_response_render_prefix(const struct sp_table *t, const struct sp_response *r,
                                 const struct sp_request *req, size_t stored_len, uint8_t *out,
                                 size_t cap)
{
    const uint8_t *b = t->arena + r->bytes_off;
    size_t ins_len = 0;
    const uint8_t *ins = NULL;
    uint8_t f = r->insert_field;
    if (stored_len > r->len)
        stored_len = r->len;
    if (f != SP_NO_INSERT && r->insert_at <= stored_len) {
        ins = req->field[f];
        ins_len = req->field_len[f];
    }
    size_t head = r->insert_at < stored_len ? r->insert_at : stored_len;
    size_t total = stored_len + ins_len;
    if (total > cap)
        return 0;
    sp_copy_short(out, b, head);
    if (ins_len)
        sp_copy_short(out + head, ins, ins_len);
    sp_copy_short(out + head + ins_len, b + head, stored_len - head);

    if (r->echo_head && stored_len >= 4) {   /* the usual patch list, without the loop */
        if (req->field_len[0] < 4)
            return 0;
        sp_echo_head(r, req->field[0], out);
        if (r->npatch > SP_ECHO_PATCHES(r))
            sp_response_shift(t, r, ins_len, stored_len, out);
        return total;
    }
    const struct sp_patch *p = t->patches + r->patch_off;
    for (uint16_t i = 0; i < r->npatch; i++) {
        const uint8_t *src = req->field[p[i].field];
        uint16_t src_len = req->field_len[p[i].field];
        size_t at = shifted(r, p[i].dst, ins_len);
        switch (p[i].op) {
        case SP_PATCH_COPY:
            if (p[i].dst + (size_t)p[i].len > stored_len)
                break;
            if ((size_t)p[i].src + p[i].len > src_len)
                return 0;
            sp_copy_short(out + at, src + p[i].src, p[i].len);
            break;
        case SP_PATCH_COPY_BITS:
            if (p[i].dst >= stored_len)
                break;
            if (p[i].src >= src_len)
                return 0;
            out[at] = (uint8_t)((out[at] & ~p[i].mask) | (src[p[i].src] & p[i].mask));
            break;
        case SP_PATCH_SHIFT:
            if (p[i].dst + 2u > stored_len)
                break;
            sp_put16(out + at, sp_shifted_pointer(b + p[i].dst, ins_len, p[i].len));
            break;
        default:
            break;
        }
    }
    return total;
}

size_t sp_response_len(const struct sp_table *t, const struct sp_response *r,
                       const struct sp_request *req)
{
    (void)t;
    return r->len + (r->insert_field != SP_NO_INSERT ? req->field_len[r->insert_field] : 0u);
}

size_t sp_response_render(const struct sp_table *t, const struct sp_response *r,
                          const struct sp_request *req, uint8_t *out, size_t cap)
{
    return sp_response_render_prefix(t, r, req, r->len, out, cap);
}

/* Partial sum of a region that lands at offset `at` in the output. */
static inline uint32_t sum_at(const uint8_t *p, size_t len, size_t at)
{
    uint32_t s = sp_csum_partial(p, len, 0);
    return (at & 1) ? sp_csum_swap(s) : s;
}

/* The patches' change to the sum, one patch at a time. */
static uint32_t patches_sum(const struct sp_table *t, const struct sp_response *r,
                            const struct sp_request *req, size_t ins_len, uint32_t sum)
{
    const uint8_t *b = t->arena + r->bytes_off;
    const struct sp_patch *p = t->patches + r->patch_off;
    for (uint16_t i = 0; i < r->npatch; i++) {
        const uint8_t *src = req->field[p[i].field];
        size_t at = shifted(r, p[i].dst, ins_len);
        if (p[i].op == SP_PATCH_COPY) {
            if ((size_t)p[i].src + p[i].len > req->field_len[p[i].field])
                continue;
            sum = sp_csum_sub(sum, sum_at(b + p[i].dst, p[i].len, at));
            sum = sp_csum_add(sum, sum_at(src + p[i].src, p[i].len, at));
        } else if (p[i].op == SP_PATCH_COPY_BITS) {
            if (p[i].src >= req->field_len[p[i].field])
                continue;
            /* Earlier COPY patches never touch a COPY_BITS byte (validated layouts
             * keep them apart), so the stored byte is the one being replaced. */
            uint8_t old = b[p[i].dst];
            uint8_t new = (uint8_t)((old & ~p[i].mask) | (src[p[i].src] & p[i].mask));
            sum = sp_csum_sub(sum, sum_at(&old, 1, at));
            sum = sp_csum_add(sum, sum_at(&new, 1, at));
        } else if (p[i].op == SP_PATCH_SHIFT) {
            uint8_t new[2];
            sp_put16(new, sp_shifted_pointer(b + p[i].dst, ins_len, p[i].len));
            sum = sp_csum_sub(sum, sum_at(b + p[i].dst, 2, at));
            sum = sp_csum_add(sum, sum_at(new, 2, at));
        }
    }
    return sum;
}

uint32_t sp_response_sum_with(const struct sp_table *t, const struct sp_response *r,
                              const struct sp_request *req, uint32_t insert_sum)
{
    /* a handful of reduced (16-bit) sums added up in 32 bits, reduced once at the end */
    size_t ins_len = 0;
    uint32_t sum = sp_csum_reduce(r->sum_head);
    uint8_t f = r->insert_field;
    if (f != SP_NO_INSERT) {
        ins_len = req->field_len[f];
        sum += r->insert_at & 1 ? sp_csum_swap(insert_sum) : sp_csum_reduce(insert_sum);
    }
    sum += (r->insert_at + ins_len) & 1 ? sp_csum_swap(r->sum_tail) : sp_csum_reduce(r->sum_tail);
    const uint8_t *b = t->arena + r->bytes_off;
    if (!r->echo_head || req->field_len[0] < 4) {
        if (r->echo_head)   /* the patches change the stored head: its sum first */
            sum += sp_get16(b) + sp_get16(b + 2);
        return sp_csum_reduce(patches_sum(t, r, req, ins_len, sum));
    }
    /* the echoed head: its first 4 bytes, before any insert, are the request's (sum_head
     * leaves them out) */
    uint8_t head[4] = {b[0], b[1], b[2], b[3]};
    sp_echo_head(r, req->field[0], head);
    if (r->npatch > SP_ECHO_PATCHES(r))
        sum = sp_response_shift_sum(t, r, ins_len, sum);
    return sp_csum_reduce(sum + sp_get16(head) + sp_get16(head + 2));
}

/* Out of line: a few answers (NXDOMAIN, a wildcard's) move pointers, and inlined, the loop
 * took its registers from the functions every answer runs through. */
__attribute__((noinline)) void
sp_response_shift(const struct sp_table *t, const struct sp_response *r, size_t ins_len,
                  size_t stored_len, uint8_t *out)
{
    const uint8_t *b = t->arena + r->bytes_off;
    const struct sp_patch *p = t->patches + r->patch_off, *end = p + r->npatch;
    p += SP_ECHO_PATCHES(r);
    if (stored_len >= r->len) {    /* every pointer inside: validated when added */
        for (; p < end; p++) {
            /* one 16-bit store, not two byte stores, which compilers leave apart here */
            uint16_t v = sp_shifted_pointer(b + p->dst, ins_len, p->len);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            v = __builtin_bswap16(v);
#endif
            memcpy(out + p->dst + ins_len, &v, 2);
        }
        return;
    }
    for (; p < end; p++)
        if (p->dst + 2u <= stored_len)
            sp_put16(out + p->dst + ins_len, sp_shifted_pointer(b + p->dst, ins_len, p->len));
}

/* A sum is kept modulo 0xffff (2^16 is 1 there), where a word's bytes swapped, as a
 * word at an odd offset adds them, are the word times 256: so each pointer's change,
 * new less old, is added as it is or times 256, all in one integer, reduced once. */
__attribute__((noinline)) uint32_t
sp_response_shift_sum(const struct sp_table *t, const struct sp_response *r, size_t ins_len,
                      uint32_t sum)
{
    const uint8_t *b = t->arena + r->bytes_off;
    const struct sp_patch *p = t->patches + r->patch_off, *end = p + r->npatch;
    int64_t change = 0;
    for (p += SP_ECHO_PATCHES(r); p < end; p++) {
        int64_t d = (int64_t)sp_shifted_pointer(b + p->dst, ins_len, p->len) - sp_get16(b + p->dst);
        change += (p->dst + ins_len) & 1 ? d * 256 : d;
    }
    change %= 0xffff;
    return sum + (uint32_t)(change < 0 ? change + 0xffff : change);
}

uint32_t sp_response_sum(const struct sp_table *t, const struct sp_response *r,
                         const struct sp_request *req)
{
    uint8_t f = r->insert_field;
    return sp_response_sum_with(t, r, req, f == SP_NO_INSERT ? 0 :
                                sp_csum_partial(req->field[f], req->field_len[f], 0));
}

const uint8_t *sp_response_bytes(const struct sp_table *t, const struct sp_response *r)
{
    return t->arena + r->bytes_off;
}

const struct sp_patch *sp_response_patches(const struct sp_table *t, const struct sp_response *r)
{
    return t->patches + r->patch_off;
}
