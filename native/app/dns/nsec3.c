/* NSEC3 proofs that depend on the name asked (RFC 5155 section 7.2): an NXDOMAIN, a
 * wildcard's answer or NODATA below an ancestor needs the NSEC3 covering the asked
 * name's next closer name, which is the hash of that name. The compiler stores the
 * rest of such an answer's DNSSEC form and a descriptor (dns.h, SP_DNS_USER_NSEC3);
 * here the next closer name is hashed (SHA-1, the zone's salt and iterations), the
 * zone's NSEC3 chain searched, and its covering record spliced into the authority
 * section. Nothing is signed: the records and their RRSIGs are the zone's. */
#include "stormpy/app/dns/dns.h"

#include <string.h>

#include "stormpy/proto/sha1.h"
#include "stormpy/proto/wire.h"

static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)sp_get16(p) << 16 | sp_get16(p + 2);
}

/* The chain (a table blob): iterations (16 bits), salt length, salt, the number of
 * records, then per record in hash order: its hash, and the offset (32 bits), length
 * and RR count (16 bits each) of its NSEC3 and RRSIG records' wire form in the blob. */
#define CHAIN_ENTRY (SP_SHA1_LEN + 8u)

static bool same_name(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t x = a[i] >= 'A' && a[i] <= 'Z' ? a[i] + 32 : a[i];
        if (x != b[i])
            return false;
    }
    return true;
}

/* The cover's records (its NSEC3, then its RRSIGs: count in all, len bytes), each
 * owned by the hashed name, written at out + at compressed as Knot writes them: the
 * first owner as its label and a pointer to the zone's origin at the question's end
 * (the asked name's last olen bytes), the others as a pointer to the first. Never
 * longer than len (the root's one byte stays). 0 when the records are not laid out
 * so: then they go as stored. out NULL: the length only. */
static size_t put_cover(uint8_t *out, size_t at, const uint8_t *rr, size_t len, size_t count,
                        const struct sp_dns_query *q)
{
    size_t i = 0, o = at, first = at, olen = 0;
    for (size_t k = 0; k < count; k++) {
        size_t label = i < len ? rr[i] : 0;
        if (k == 0) {       /* the hashed label, then the origin: the question's end */
            size_t end = i + 1 + label;
            while (end < len && rr[end] && end + 1 + rr[end] < len)
                end += 1 + rr[end];
            olen = end + 1 - (i + 1 + label);
            if (!label || end >= len || rr[end] || olen < 2 || olen > q->name_len ||
                !same_name(rr + i + 1 + label, q->name_lower + q->name_len - olen, olen) ||
                at + 12 > 0x3fff)
                return 0;
            if (out) {
                memcpy(out + o, rr + i, 1 + label);
                sp_put16(out + o + 1 + label,
                         (uint16_t)(0xc000 | (SP_DNS_HEADER_LEN + q->name_len - olen)));
            }
            o += 1 + label;
        } else {            /* the same name again */
            if (len - i < 1 + label + olen || memcmp(rr + i, rr, 1 + label + olen))
                return 0;
            if (out)
                sp_put16(out + o, (uint16_t)(0xc000 | first));
        }
        o += 2;
        i += 1 + label + olen;
        if (len - i < 10 || len - i - 10 < sp_get16(rr + i + 8))
            return 0;
        size_t fixed = 10 + (size_t)sp_get16(rr + i + 8);
        if (out)
            memcpy(out + o, rr + i, fixed);
        o += fixed;
        i += fixed;
    }
    return i == len ? o - at : 0;
}

/* The descriptor: the form's header (so a truncated answer or a slip can be made from
 * the descriptor as from any response), the form's response index, the chain's, the
 * form's stored offset where the authority section ends, the ancestor's wire length,
 * and the chain records the form holds already (a count, then their indices), which
 * are not added twice. */
#define DESC_AT SP_DNS_HEADER_LEN
#define DESC_FIXED (DESC_AT + 14u)

size_t sp_dns_nsec3_render(const struct sp_table *t, const struct sp_response *desc,
                           const uint8_t *msg, const struct sp_dns_query *q, uint8_t *out,
                           size_t cap)
{
    if (desc->len < DESC_FIXED)
        return 0;
    const uint8_t *d = sp_response_bytes(t, desc) + DESC_AT;
    const struct sp_response *form = sp_table_response(t, get32(d));
    const struct sp_response *chain = sp_table_response(t, get32(d + 4));
    size_t insert = get32(d + 8), ancestor = d[12], present = d[13];
    if (!form || !chain || desc->len < DESC_FIXED + 4 * present || ancestor >= q->name_len)
        return 0;
    const uint8_t *c = sp_response_bytes(t, chain);
    size_t salt = c[2];
    if (chain->len < 7u + salt)
        return 0;
    size_t iterations = sp_get16(c), count = get32(c + 3 + salt);
    const uint8_t *entries = c + 7 + salt;
    if (!count || chain->len < 7u + salt + count * CHAIN_ENTRY)
        return 0;

    /* the next closer name: the asked name from its label just below the ancestor */
    size_t off = 0;
    while (off < q->name_len && q->name_len - off - 1 - q->name_lower[off] > ancestor)
        off += 1 + (size_t)q->name_lower[off];
    uint8_t h[SP_SHA1_LEN];
    sp_nsec3_hash(q->name_lower + off, q->name_len - off, c + 3, salt, (unsigned)iterations, h);

    /* the covering record: the last hash below h, or the last of all (the chain wraps) */
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (memcmp(entries + mid * CHAIN_ENTRY, h, SP_SHA1_LEN) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t cover = lo ? lo - 1 : count - 1;
    const uint8_t *e = entries + cover * CHAIN_ENTRY;
    size_t rr_off = get32(e + SP_SHA1_LEN), rr_len = sp_get16(e + SP_SHA1_LEN + 4);
    size_t rr_count = sp_get16(e + SP_SHA1_LEN + 6);
    for (size_t i = 0; i < present; i++)
        if (get32(d + 14 + 4 * i) == cover)
            rr_len = rr_count = 0;                 /* already in the form */
    if (rr_off + rr_len > chain->len)
        return 0;
    const uint8_t *rr = c + rr_off;

    /* the form whole, or without its additional section when that makes it fit */
    const uint8_t *f = sp_response_bytes(t, form);
    size_t stored = form->len, qlen = q->question_len;
    size_t packed = put_cover(NULL, qlen + insert, rr, rr_len, rr_count, q);
    size_t cover_len = packed ? packed : rr_len;
    if (stored + qlen + cover_len > cap) {
        stored = SP_DNS_USER_DROPPABLE(form->user);
        if (!stored || stored + qlen + cover_len > cap)
            return 0;
    }
    if (insert < SP_DNS_HEADER_LEN || insert > stored)
        return 0;
    memcpy(out, f, SP_DNS_HEADER_LEN);
    memcpy(out, msg, 2);
    out[2] = (uint8_t)((out[2] & ~0x01) | (msg[2] & 0x01));
    out[3] = (uint8_t)((out[3] & ~0x10) | (msg[3] & 0x10));
    sp_put16(out + 8, (uint16_t)(sp_get16(out + 8) + rr_count));
    if (stored != form->len)
        sp_put16(out + 10, sp_dns_additional_before(f, form->len, stored));
    uint8_t *p = out + SP_DNS_HEADER_LEN;
    memcpy(p, q->question, qlen);
    p += qlen;
    memcpy(p, f + SP_DNS_HEADER_LEN, insert - SP_DNS_HEADER_LEN);
    /* the form's pointers before the proof's place, moved with the question (the
     * compiler leaves what follows that place uncompressed) */
    const struct sp_patch *pt = sp_response_patches(t, form);
    for (uint16_t i = 0; i < form->npatch; i++)
        if (pt[i].op == SP_PATCH_SHIFT && pt[i].dst + 2u <= insert)
            sp_put16(p + pt[i].dst - SP_DNS_HEADER_LEN,
                     sp_shifted_pointer(f + pt[i].dst, qlen, pt[i].len));
    p += insert - SP_DNS_HEADER_LEN;
    if (packed)
        put_cover(out, (size_t)(p - out), rr, rr_len, rr_count, q);
    else
        memcpy(p, rr, rr_len);
    p += cover_len;
    memcpy(p, f + insert, stored - insert);
    return (size_t)(p + (stored - insert) - out);
}
