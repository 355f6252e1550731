/* Which names' keys a patch can change (sp_zone_affected, zone.h): the work of an
 * incremental compile after a secondary's IXFR, found without resolving every name. */
#include "stormpy/zone/zone.h"

#include <stdlib.h>

enum { TYPE_NS = 2, TYPE_CNAME = 5, TYPE_MX = 15, TYPE_SRV = 33, TYPE_SVCB = 64, TYPE_HTTPS = 65 };

uint64_t sp_zone_ns_hash(const struct sp_zone *z, uint32_t name)
{
    uint32_t set = z->names[name].dead ? SP_ZONE_NONE : sp_zone_find_rrset(z, name, TYPE_NS);
    if (set == SP_ZONE_NONE)
        return 0;
    const struct sp_zone_rrset *s = &z->rrsets[set];
    uint64_t h = s->count;
    for (uint32_t k = 0; k < s->count; k++) {
        const struct sp_zone_rdata *d = &z->rdatas[s->first + k];
        h = sp_zone_hash(z->rdata_arena + d->off, d->len, h);
    }
    return h | 1;
}

static bool is_wildcard(const struct sp_zone *z, uint32_t id)
{
    const uint8_t *w = sp_zone_name_wire(z, id);
    return w[0] == 1 && w[1] == '*';
}

/* The id of name's parent, dead or alive (NONE at the origin or above it). */
static uint32_t parent_of(const struct sp_zone *z, uint32_t id)
{
    const uint8_t *w = sp_zone_name_wire(z, id);
    size_t len = z->names[id].len;
    if (id == z->origin || len <= z->names[z->origin].len)
        return SP_ZONE_NONE;
    return sp_zone_find(z, w + 1 + w[0], len - 1u - w[0]);
}

struct walk {
    const struct sp_zone *z;
    uint8_t *mark;
    uint32_t count, subtrees;
};

/* Past this many cuts changed, a whole compile is cheaper than a pass over the names each. */
#define SUBTREES_MAX 8

static void affect(struct walk *k, uint32_t id, uint8_t bits)
{
    if (!(k->mark[id] & SP_ZONE_AFFECTED))
        k->count++;
    k->mark[id] |= bits | SP_ZONE_AFFECTED;
}

/* A name whose answers change: a wildcard's parent answers for it below itself. */
static void changed(struct walk *k, uint32_t id)
{
    affect(k, id, SP_ZONE_CHANGED);
    uint32_t p = is_wildcard(k->z, id) ? parent_of(k->z, id) : SP_ZONE_NONE;
    if (p != SP_ZONE_NONE)
        affect(k, p, SP_ZONE_WILD_PARENT);
}

/* Every name at or below top: a cut's referral answers for all of them. */
static void subtree(struct walk *k, uint32_t top)
{
    const struct sp_zone *z = k->z;
    if (++k->subtrees > SUBTREES_MAX)
        return;
    const uint8_t *t = sp_zone_name_wire(z, top);
    size_t tlen = z->names[top].len;
    for (uint32_t id = 0; id < z->nnames; id++)
        if (!(k->mark[id] & SP_ZONE_AFFECTED) && z->names[id].len >= tlen &&
            sp_zone_is_subdomain(sp_zone_name_wire(z, id), z->names[id].len, t, tlen))
            changed(k, id);
}

/* Whether an answer that looks up target (lower-cased) can differ now: the target
 * changed or holds a changed name below it (an empty non-terminal made or unmade),
 * or a name above it changed (a cut, a wildcard). */
static bool reaches_change(struct walk *k, const uint8_t *target, size_t len)
{
    const struct sp_zone *z = k->z;
    size_t olen = z->names[z->origin].len;
    uint32_t id = sp_zone_find(z, target, len);
    if (id != SP_ZONE_NONE && (k->mark[id] & (SP_ZONE_CHANGED | SP_ZONE_ABOVE | SP_ZONE_WILD_PARENT)))
        return true;
    for (size_t i = 1u + target[0]; i < len && len - i >= olen; i += 1u + target[i]) {
        uint8_t bits = len - i == olen ? SP_ZONE_WILD_PARENT   /* the apex changes each time */
                                       : SP_ZONE_CHANGED | SP_ZONE_WILD_PARENT;
        id = sp_zone_find(z, target + i, len - i);
        if (id != SP_ZONE_NONE && (k->mark[id] & bits))
            return true;
    }
    return false;
}

/* One pass over the records that point at names; whether it affected another. */
static bool follow_targets(struct walk *k)
{
    const struct sp_zone *z = k->z;
    const uint8_t *origin = sp_zone_name_wire(z, z->origin);
    size_t olen = z->names[z->origin].len;
    bool more = false;
    for (uint32_t i = 0; i < z->nrrsets; i++) {
        const struct sp_zone_rrset *s = &z->rrsets[i];
        size_t skip = s->type == TYPE_NS || s->type == TYPE_CNAME ? 0
                      : s->type == TYPE_MX || s->type == TYPE_SVCB || s->type == TYPE_HTTPS ? 2
                      : s->type == TYPE_SRV ? 6 : 9999;
        if (skip == 9999 || (k->mark[s->name] & SP_ZONE_CHANGED))
            continue;
        for (uint32_t r = 0; r < s->count; r++) {
            const struct sp_zone_rdata *d = &z->rdatas[s->first + r];
            uint8_t target[SP_ZONE_NAME_MAX];
            size_t len = d->len > skip ? sp_zone_wire_len(z->rdata_arena + d->off + skip,
                                                           d->len - skip) : 0;
            for (size_t c = 0; c < len; c++) {
                uint8_t ch = z->rdata_arena[d->off + skip + c];
                target[c] = ch >= 'A' && ch <= 'Z' ? ch + 32 : ch;
            }
            if (len == 0 || !sp_zone_is_subdomain(target, len, origin, olen) ||
                !reaches_change(k, target, len))
                continue;
            changed(k, s->name);
            if (z->names[s->name].is_cut)
                subtree(k, s->name);
            more = true;
            break;
        }
    }
    return more;
}

uint32_t sp_zone_affected(const struct sp_zone *z, uint8_t *mark)
{
    struct walk k = {.z = z, .mark = mark};
    for (uint32_t i = 0; i < z->nchanged; i++) {
        const struct sp_zone_changed *c = &z->changed[i];
        changed(&k, c->name);
        for (uint32_t p = parent_of(z, c->name); p != SP_ZONE_NONE; p = parent_of(z, p)) {
            affect(&k, p, SP_ZONE_ABOVE);
            /* a wildcard made or unmade an empty non-terminal: its parent answers below
             * itself NODATA where it answered NXDOMAIN, or the other way */
            uint32_t wild_parent = is_wildcard(z, p) ? parent_of(z, p) : SP_ZONE_NONE;
            if (wild_parent != SP_ZONE_NONE)
                affect(&k, wild_parent, SP_ZONE_WILD_PARENT);
        }
    }
    for (uint32_t i = 0; i < z->nchanged; i++) {
        const struct sp_zone_changed *c = &z->changed[i];
        if (c->old_ns != sp_zone_ns_hash(z, c->name) ||
            c->was_cut != (!z->names[c->name].dead && z->names[c->name].is_cut))
            subtree(&k, c->name);
    }
    /* a chain of CNAMEs moves the change one link a pass (Knot follows 5) */
    for (int pass = 0; pass <= SP_ZONE_MAX_CHAIN + 1 && follow_targets(&k); pass++)
        ;
    return k.subtrees > SUBTREES_MAX ? UINT32_MAX : k.count;
}
