/* An answer in wire format, as compiler.py's encode_fixed and encode_variable make
 * it; see zone.h. Names are compared case-blind for compression, as dnspython does,
 * and compressed inside the rdata of the types dnspython compresses (RFC 3597 4). */
#include "stormpy/zone/zone.h"

#include <string.h>

#define MESSAGE_MAX 65535u
#define ENTRIES_MAX 2048u
#define OPT_ROOM 11u           /* compiler.py's answer.py OPT_ROOM */
#define QUESTION_MAX (255u + 4u)

enum { TYPE_CNAME = 5, TYPE_SOA = 6, TYPE_MX = 15 };

struct writer {
    uint8_t *out;           /* the stored response: header, then what follows the question */
    size_t len;
    size_t shift;           /* message offset minus stored offset past the header */
    size_t limit;           /* targets from here on may not be pointed at */
    size_t max;             /* the message's most bytes (less a filled answer's room) */
    bool compress, overflow;
    bool fill;              /* additional RRsets past max are left out (zone.h) */
    uint16_t left_out;
    struct sp_zone_shifts *shifts;      /* a variable response's pointers, or NULL */
    struct sp_zone_soa_place *soa;
    uint16_t nentries;
    struct { const uint8_t *name; uint8_t len; uint16_t offset; } entry[ENTRIES_MAX];
};

static bool same_name(const uint8_t *a, const uint8_t *b, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        uint8_t x = a[i], y = b[i];
        x = x >= 'A' && x <= 'Z' ? x + 32 : x;
        y = y >= 'A' && y <= 'Z' ? y + 32 : y;
        if (x != y)
            return false;
    }
    return true;
}

static void put(struct writer *w, const void *bytes, size_t n)
{
    if (w->len + n + w->shift > w->max) {
        w->overflow = true;
        return;
    }
    memcpy(w->out + w->len, bytes, n);
    w->len += n;
}

static void put16(struct writer *w, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    put(w, b, 2);
}

/* The suffixes of name at its labels before `upto` (a pointer follows there), each
 * for later names to point at. */
static void remember(struct writer *w, const uint8_t *name, size_t len, size_t offset, size_t upto)
{
    for (size_t i = 0; i < upto && name[i] && w->nentries < ENTRIES_MAX && offset + i < w->limit;
         i += 1 + name[i])
        w->entry[w->nentries++] = (typeof(w->entry[0])){name + i, (uint8_t)(len - i),
                                                         (uint16_t)(offset + i)};
}

static void put_name(struct writer *w, const uint8_t *name, size_t len)
{
    size_t at = w->len + w->shift;
    bool room = !w->shifts || w->shifts->n < SP_ZONE_SHIFTS_MAX;
    for (size_t i = 0; w->compress && room && name[i]; i += 1 + name[i]) {
        for (uint16_t e = 0; e < w->nentries; e++) {
            if (w->entry[e].len != len - i || !same_name(w->entry[e].name, name + i, len - i))
                continue;
            put(w, name, i);
            if (w->shifts && !w->overflow)
                w->shifts->at[w->shifts->n++] = (uint16_t)w->len;
            put16(w, 0xc000 | w->entry[e].offset);
            remember(w, name, len, at, i);
            return;
        }
    }
    put(w, name, len);
    if (w->compress)
        remember(w, name, len, at, len);
}

/* The rdata, its names compressed where dnspython compresses them. */
static void put_rdata(struct writer *w, uint16_t type, const uint8_t *d, size_t len)
{
    size_t before = 0, names = 0;
    switch (type) {
    case 2: case 3: case 4: case 5: case 7: case 8: case 9: case 12:   /* NS CNAME PTR ... */
        names = 1;
        break;
    case TYPE_MX:
        before = 2, names = 1;
        break;
    case TYPE_SOA:
        names = 2;
        break;
    }
    if (!w->compress || len <= before)
        names = 0;
    put(w, d, before);
    size_t i = before;
    for (size_t k = 0; k < names; k++) {
        size_t n = sp_zone_wire_len(d + i, len - i);
        if (n == 0)
            break;
        put_name(w, d + i, n);
        i += n;
    }
    put(w, d + i, len - i);
}

static void put_owner(struct writer *w, const struct sp_zone_rref *r)
{
    if (r->owner == NULL)
        put16(w, 0xc00c);            /* the question's name */
    else
        put_name(w, r->owner, r->owner_len);
}

/* A DNAME's synthesized CNAME (its target as resolve.c made it). */
static void put_synthesized(struct writer *w, const struct sp_zone_answer *a,
                            const struct sp_zone_rref *r)
{
    put_owner(w, r);
    uint8_t fixed[8] = {0, TYPE_CNAME, 0, 1, (uint8_t)(r->ttl >> 24), (uint8_t)(r->ttl >> 16),
                        (uint8_t)(r->ttl >> 8), (uint8_t)r->ttl};
    put(w, fixed, 8);
    size_t at = w->len;
    put16(w, 0);
    put_rdata(w, TYPE_CNAME, a->synthesized_target, a->synthesized_len);
    if (!w->overflow) {
        w->out[at] = (uint8_t)((w->len - at - 2) >> 8);
        w->out[at + 1] = (uint8_t)(w->len - at - 2);
    }
}

/* additional: in a filled answer, an RRset that does not fit is taken back and left
 * out, and the next one tried (Knot DNS does the same). */
static uint16_t put_section(struct writer *w, const struct sp_zone *z,
                            const struct sp_zone_answer *a, const struct sp_zone_rref *rrs,
                            uint16_t n, bool authority, bool additional)
{
    uint16_t count = 0;
    for (uint16_t i = 0; i < n; i++) {
        if (rrs[i].rrset == SP_ZONE_SYNTHESIZED) {
            put_synthesized(w, a, &rrs[i]);
            count++;
            continue;
        }
        size_t len = w->len;
        uint16_t entries = w->nentries, counted = count, shifted = w->shifts ? w->shifts->n : 0;
        const struct sp_zone_rrset *s = &z->rrsets[rrs[i].rrset];
        for (uint16_t k = 0; k < s->count; k++) {
            const struct sp_zone_rdata *d = &z->rdatas[s->first + k];
            put_owner(w, &rrs[i]);
            uint8_t fixed[8] = {(uint8_t)(s->type >> 8), (uint8_t)s->type, 0, 1,
                                (uint8_t)(rrs[i].ttl >> 24), (uint8_t)(rrs[i].ttl >> 16),
                                (uint8_t)(rrs[i].ttl >> 8), (uint8_t)rrs[i].ttl};
            size_t ttl_at = w->len + 4;
            put(w, fixed, 8);
            size_t at = w->len;
            put16(w, 0);
            put_rdata(w, s->type, z->rdata_arena + d->off, d->len);
            if (!w->overflow) {
                size_t rdlen = w->len - at - 2;
                w->out[at] = (uint8_t)(rdlen >> 8);
                w->out[at + 1] = (uint8_t)rdlen;
                if (rrs[i].rrset == z->soa && w->soa != NULL && rdlen >= 20)
                    *w->soa = (struct sp_zone_soa_place){.ttl_at = (uint16_t)ttl_at,
                        .tail_at = (uint16_t)(w->len - 20), .negative = authority};
            }
            count++;
        }
        if (w->overflow && w->fill && additional) {
            w->len = len, w->nentries = entries, count = counted, w->overflow = false;
            if (w->shifts)
                w->shifts->n = shifted;
            w->left_out++;
        }
    }
    return count;
}

/* One try at the answer: whole (fill false), or filled; 0 when it does not fit. */
static size_t encode_pass(struct writer *w, const struct sp_zone *z, const struct sp_zone_answer *a,
                          const uint8_t *qname, size_t qlen, uint32_t *droppable,
                          struct sp_zone_shifts *shifts, bool fill)
{
    if (w->soa != NULL)
        w->soa->ttl_at = 0;
    w->len = 12;
    w->overflow = false;
    w->fill = fill;
    w->left_out = 0;
    w->nentries = 0;
    w->compress = qname != NULL;
    w->shifts = qname != NULL ? shifts : NULL;
    w->limit = 0x4000;
    /* a fixed response's offsets count the question; a variable one's count a question
     * of one label more than `below` (qname), as compiler.py's; uncompressed, it leaves
     * room for the longest question (len + 255 + 4 <= 65535) */
    w->shift = w->shifts ? 2 + qlen + 4 : qname != NULL ? qlen + 4 : QUESTION_MAX;
    /* filled, a variable answer leaves room for the longest question and the OPT */
    w->max = MESSAGE_MAX - (fill ? OPT_ROOM + (w->shifts ? QUESTION_MAX - w->shift : 0) : 0);
    if (w->shifts) {         /* the asker's ancestors that all its askers have */
        size_t anchor = shifts->anchor <= qlen ? shifts->anchor : qlen;
        w->shifts->question = (uint16_t)(2 + qlen + 4);
        w->shifts->n = 0;
        w->limit = 0x4000 - (QUESTION_MAX - w->shifts->question);
        remember(w, qname + qlen - anchor, anchor, 12 + 2 + qlen - anchor, anchor);
    } else if (qname != NULL) {
        remember(w, qname, qlen, 12, qlen);
    }
    uint16_t an = put_section(w, z, a, a->an, a->nan, false, false);
    uint16_t ns = put_section(w, z, a, a->ns, a->nns, true, false);
    size_t additional = w->len;
    if (w->shifts && w->shifts->plain_additional) {
        w->compress = false;
        w->shifts->additional_at = (uint32_t)additional;
    }
    uint16_t ad = put_section(w, z, a, a->ad, a->nad_required, false, true);
    bool tc = w->left_out != 0;            /* in-domain glue left out */
    size_t optional = w->len;
    ad += put_section(w, z, a, a->ad + a->nad_required, a->nad - a->nad_required, false, true);
    if (w->overflow || (w->shifts && w->len + QUESTION_MAX > MESSAGE_MAX))
        return 0;
    uint8_t head[12] = {0, 0, (uint8_t)(0x80 | (a->aa ? 0x04 : 0) | (tc ? 0x02 : 0)),
                        a->rcode & 0x0f, 0, 1, (uint8_t)(an >> 8), (uint8_t)an, (uint8_t)(ns >> 8),
                        (uint8_t)ns, (uint8_t)(ad >> 8), (uint8_t)ad};
    memcpy(w->out, head, 12);
    *droppable = a->nad > a->nad_required ? (uint32_t)optional : 0;
    return w->len;
}

size_t sp_zone_encode(const struct sp_zone *z, const struct sp_zone_answer *a,
                      const uint8_t *qname, size_t qlen, uint8_t *out, uint32_t *droppable,
                      struct sp_zone_soa_place *soa, struct sp_zone_shifts *shifts)
{
    static __thread struct writer w;
    w.soa = soa;
    w.out = out;
    size_t len = encode_pass(&w, z, a, qname, qlen, droppable, shifts, false);
    if (len == 0)
        len = encode_pass(&w, z, a, qname, qlen, droppable, shifts, true);
    if (len != 0)
        return len;
    static const uint8_t servfail[12] = {0, 0, 0x80, 2, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(out, servfail, sizeof(servfail));
    *droppable = 0;
    if (soa != NULL)
        soa->ttl_at = 0;
    if (shifts != NULL && qname != NULL)
        shifts->n = 0;
    return sizeof(servfail);
}
