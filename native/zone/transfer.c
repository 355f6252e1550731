/* Zones in C sent to other servers: see transfer.h. */
#include "stormpy/zone/transfer.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { TYPE_SOA = 6, CLASS_IN = 1, RR_FIXED = 10 };   /* type, class, TTL, rdlength */

static inline uint8_t *put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

/* Where a message holds an owner written already, for the next record at the same name. */
struct owner_seen {
    uint32_t name;
    size_t at;             /* message offset; past 0x3FFF no pointer can reach it */
};

static size_t owner_size(const struct sp_zone *z, uint32_t name, const struct owner_seen *seen)
{
    if (name == seen->name && seen->at < 0x4000)
        return 2;
    return z->names[name].len - z->names[z->origin].len + 2u;
}

/* The record (rrset, k) at out (message offset at): its owner a pointer to the same
 * name written before, else its labels above the origin and a pointer to the origin. */
static void put_record(const struct sp_zone *z, uint32_t rrset, uint32_t k, uint8_t *out,
                       size_t at, uint16_t origin_at, struct owner_seen *seen)
{
    const struct sp_zone_rrset *s = &z->rrsets[rrset];
    const struct sp_zone_rdata *d = &z->rdatas[s->first + k];
    uint8_t *p;
    if (s->name == seen->name && seen->at < 0x4000) {
        p = put16(out, (uint16_t)(0xC000 | seen->at));
    } else {
        size_t prefix = z->names[s->name].len - z->names[z->origin].len;
        memcpy(out, sp_zone_name_wire(z, s->name), prefix);
        p = put16(out + prefix, (uint16_t)(0xC000 | origin_at));
        *seen = (struct owner_seen){.name = s->name, .at = prefix ? at : origin_at};
    }
    p = put16(p, s->type);
    p = put16(p, CLASS_IN);
    p = put16(put16(p, (uint16_t)(s->ttl >> 16)), (uint16_t)s->ttl);
    p = put16(p, d->len);
    memcpy(p, z->rdata_arena + d->off, d->len);
}

/* Past the record w stands at: the SOA, then each record of every RRset but the SOA. */
static void advance(const struct sp_zone *z, struct sp_zone_walk *w)
{
    switch (w->phase) {
    case SP_ZONE_WALK_OPENING_SOA:
        w->phase = SP_ZONE_WALK_RRSETS;
        w->rrset = w->rdata = 0;
        break;
    case SP_ZONE_WALK_RRSETS:
        if (++w->rdata < z->rrsets[w->rrset].count)
            return;
        w->rrset++;
        w->rdata = 0;
        break;
    default:
        w->phase = SP_ZONE_WALK_DONE;
        return;
    }
    if (w->rrset == z->soa)
        w->rrset++;
    if (w->rrset >= z->nrrsets)
        w->phase = SP_ZONE_WALK_CLOSING_SOA;
}

size_t sp_zone_walk_write(const struct sp_zone *z, struct sp_zone_walk *w, uint8_t *out,
                          size_t cap, size_t budget, uint16_t origin_at, uint16_t section_at,
                          uint16_t *count)
{
    size_t used = 0;
    struct owner_seen seen = {.name = SP_ZONE_NONE};
    *count = 0;
    while (w->phase != SP_ZONE_WALK_DONE && *count < UINT16_MAX) {
        bool soa = w->phase != SP_ZONE_WALK_RRSETS;
        uint32_t rrset = soa ? z->soa : w->rrset, k = soa ? 0 : w->rdata;
        size_t size = owner_size(z, z->rrsets[rrset].name, &seen) + RR_FIXED
                      + z->rdatas[z->rrsets[rrset].first + k].len;
        if (size > cap - used || (used && used + size > budget))
            break;
        put_record(z, rrset, k, out + used, section_at + used, origin_at, &seen);
        used += size;
        (*count)++;
        advance(z, w);
    }
    return used;
}

static bool same_records(const struct sp_zone *a, uint32_t na, const struct sp_zone *b,
                         uint32_t nb)
{
    const struct sp_zone_name *x = &a->names[na], *y = &b->names[nb];
    if (x->nrrsets != y->nrrsets)
        return false;
    for (uint32_t i = 0; i < x->nrrsets; i++) {
        const struct sp_zone_rrset *s = &a->rrsets[x->first_rrset + i];
        const struct sp_zone_rrset *t = &b->rrsets[y->first_rrset + i];
        if (s->type != t->type || s->ttl != t->ttl || s->count != t->count)
            return false;
        for (uint32_t k = 0; k < s->count; k++) {
            const struct sp_zone_rdata *d = &a->rdatas[s->first + k];
            const struct sp_zone_rdata *e = &b->rdatas[t->first + k];
            if (d->len != e->len
                || memcmp(a->rdata_arena + d->off, b->rdata_arena + e->off, d->len) != 0)
                return false;
        }
    }
    return true;
}

static bool keep(uint32_t id, uint32_t **out, size_t *count, size_t *cap)
{
    if (*count == *cap) {
        size_t more = *cap ? *cap * 2 : 64;
        uint32_t *grown = realloc(*out, more * sizeof(**out));
        if (grown == NULL)
            return false;
        *out = grown;
        *cap = more;
    }
    (*out)[(*count)++] = id;
    return true;
}

int sp_zone_difference(const struct sp_zone *old, const struct sp_zone *now, size_t limit,
                       uint32_t **out, size_t *count)
{
    size_t cap = 0;
    *out = NULL;
    *count = 0;
    for (uint32_t id = 0; id < now->nnames; id++) {
        const struct sp_zone_name *n = &now->names[id];
        if (n->nrrsets == 0)
            continue;       /* what old held here is found from old's side */
        uint32_t was = sp_zone_find(old, sp_zone_name_wire(now, id), n->len);
        if (was != SP_ZONE_NONE && same_records(old, was, now, id))
            continue;
        if (*count >= limit)
            return SP_ZONE_DECLINED;
        if (!keep(id, out, count, &cap))
            return SP_ZONE_NOMEM;
    }
    for (uint32_t id = 0; id < old->nnames; id++) {
        const struct sp_zone_name *n = &old->names[id];
        if (n->nrrsets == 0)
            continue;
        uint32_t is = sp_zone_find(now, sp_zone_name_wire(old, id), n->len);
        if (is != SP_ZONE_NONE && now->names[is].nrrsets)
            continue;       /* held by both: compared above */
        if (*count >= limit)
            return SP_ZONE_DECLINED;
        if (!keep(is != SP_ZONE_NONE ? is : id | SP_ZONE_FROM_OLD, out, count, &cap))
            return SP_ZONE_NOMEM;
    }
    return SP_ZONE_OK;
}
