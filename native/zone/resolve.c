/* The answer to one question, deciding exactly as compiler.py's ZoneIndex.resolve;
 * see zone.h. */
#include "stormpy/zone/zone.h"

#include <string.h>

enum { TYPE_A = 1, TYPE_NS = 2, TYPE_CNAME = 5, TYPE_MX = 15, TYPE_AAAA = 28, TYPE_SRV = 33,
       TYPE_DNAME = 39, TYPE_DS = 43, TYPE_RRSIG = 46, TYPE_NSEC = 47, TYPE_SVCB = 64,
       TYPE_HTTPS = 65, TYPE_ANY = 255,
       RCODE_NXDOMAIN = 3, RCODE_YXDOMAIN = 6 };

/* The name being looked up: one the zone holds (id), or one it does not (id NONE,
 * closest encloser ce), written out (wire) or the question's own (wire NULL). */
struct cursor {
    const uint8_t *wire;
    size_t len;
    uint32_t id, ce;
};

static void lower_copy(uint8_t *dst, const uint8_t *src, size_t len)
{
    for (size_t i = 0; i < len; i++)
        dst[i] = src[i] >= 'A' && src[i] <= 'Z' ? src[i] + 32 : src[i];
}

static const uint8_t *origin_wire(const struct sp_zone *z, size_t *len)
{
    *len = z->names[z->origin].len;
    return sp_zone_name_wire(z, z->origin);
}

static struct sp_zone_rref rref(const struct sp_zone *z, uint32_t rrset, const struct cursor *at)
{
    struct sp_zone_rref r = {.rrset = rrset, .ttl = z->rrsets[rrset].ttl};
    if (at == NULL || at->id != SP_ZONE_NONE) {      /* its own name */
        uint32_t name = z->rrsets[rrset].name;
        r.owner = sp_zone_name_wire(z, name);
        r.owner_len = z->names[name].len;
    } else {                                         /* a wildcard's, renamed */
        r.owner = at->wire;
        r.owner_len = (uint8_t)at->len;
    }
    return r;
}

static struct sp_zone_point point(const struct cursor *c)
{
    return (struct sp_zone_point){.wire = c->wire, .id = c->id, .len = (uint8_t)c->len};
}

/* NXDOMAIN (owner: the closest encloser) or NODATA (owner: the node answering). */
static void negative(const struct sp_zone *z, struct sp_zone_answer *a, uint8_t rcode,
                     const struct cursor *c, uint32_t owner)
{
    a->denial = rcode ? SP_ZONE_NXDOMAIN : SP_ZONE_NODATA;
    a->denied = point(c);
    a->denial_owner = owner;
    a->rcode = rcode;
    a->ns[0] = rref(z, z->soa, NULL);
    a->ns[0].ttl = z->negative_ttl;
    a->nns = 1;
}

/* Whether any (a name as written, any letter case) is lower (lower-cased). */
static bool same_lower(const uint8_t *lower, const uint8_t *any, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (lower[i] != (any[i] >= 'A' && any[i] <= 'Z' ? any[i] + 32 : any[i]))
            return false;
    return true;
}

/* The wildcard matching name (lower-cased, in the zone), a name the zone does not
 * hold: its closest encloser's '*' child (RFC 4592), or NONE. */
static uint32_t wildcard_matching(const struct sp_zone *z, const uint8_t *name, size_t len)
{
    uint32_t ce = SP_ZONE_NONE;
    for (size_t i = 0; ce == SP_ZONE_NONE && name[i]; ) {    /* ends at the origin */
        i += 1 + name[i];
        ce = sp_zone_lookup(z, name + i, len - i);
    }
    return ce == SP_ZONE_NONE ? SP_ZONE_NONE : z->names[ce].wildcard;
}

/* What the in-zone targets of NS, MX, SRV, SVCB and HTTPS records add, as Knot adds
 * it (compiler.py's additional.py): their A and AAAA, and an SVCB or HTTPS target's own
 * RRset of that type too (RFC 9460 4.1), one level only. A target the zone does not
 * hold adds what a wildcard matching it holds, as Knot 3.2.6 does (below a cut too):
 * renamed to the target (as written) for NS, MX and SRV, under the wildcard's own
 * name for SVCB and HTTPS, once. */
static int addresses(const struct sp_zone *z, const struct sp_zone_rref *from, uint16_t n,
                     struct sp_zone_answer *a)
{
    const uint8_t *seen[SP_ZONE_ADDITIONAL_MAX];
    size_t seen_len[SP_ZONE_ADDITIONAL_MAX], nseen = 0, olen;
    const uint8_t *origin = origin_wire(z, &olen);
    for (uint16_t i = 0; i < n; i++) {
        const struct sp_zone_rrset *s = &z->rrsets[from[i].rrset];
        bool svcb = s->type == TYPE_SVCB || s->type == TYPE_HTTPS;
        size_t skip = s->type == TYPE_NS ? 0 : s->type == TYPE_MX || svcb ? 2
                      : s->type == TYPE_SRV ? 6 : 9999;
        const uint16_t added[3] = {TYPE_A, TYPE_AAAA, s->type};
        for (uint16_t k = 0; skip != 9999 && k < s->count; k++) {
            const struct sp_zone_rdata *d = &z->rdatas[s->first + k];
            if (d->len <= skip)
                continue;
            uint8_t target[SP_ZONE_NAME_MAX];
            size_t len = sp_zone_wire_len(z->rdata_arena + d->off + skip, d->len - skip);
            if (len == 0)
                continue;
            const uint8_t *written = z->rdata_arena + d->off + skip;
            lower_copy(target, written, len);
            bool dup = false;
            for (size_t j = 0; j < nseen && !dup; j++)
                dup = seen_len[j] == len && same_lower(target, seen[j], len);
            if (dup || !sp_zone_is_subdomain(target, len, origin, olen))
                continue;
            uint32_t id = sp_zone_lookup(z, target, len);
            const uint8_t *renamed = NULL;       /* a wildcard's RRsets' owner, if not its own */
            bool matched = id == SP_ZONE_NONE;   /* by a wildcard */
            if (matched) {
                id = wildcard_matching(z, target, len);
                if (id == SP_ZONE_NONE)
                    continue;  /* no node there, so nothing to add, now or on a repeat */
                if (!svcb)
                    renamed = written;
                for (size_t j = 0; svcb && j < nseen && !dup; j++)
                    dup = seen_len[j] == z->names[id].len &&
                          same_lower(sp_zone_name_wire(z, id), seen[j], seen_len[j]);
                if (dup)
                    continue;
            }
            if (nseen + 1 + (matched && svcb) > SP_ZONE_ADDITIONAL_MAX)
                return -1;
            seen[nseen] = written;
            seen_len[nseen++] = len;
            if (matched && svcb) {               /* its RRsets under its own name, once */
                seen[nseen] = sp_zone_name_wire(z, id);
                seen_len[nseen++] = z->names[id].len;
            }
            for (int t = 0; t < (svcb ? 3 : 2); t++) {
                uint32_t set = sp_zone_find_rrset(z, id, added[t]);
                if (set == SP_ZONE_NONE)
                    continue;
                if (a->nad == SP_ZONE_ADDITIONAL_MAX)
                    return -1;
                a->ad[a->nad] = rref(z, set, NULL);
                if (renamed != NULL) {
                    a->ad[a->nad].owner = renamed;
                    a->ad[a->nad].owner_len = (uint8_t)len;
                }
                a->nad++;
            }
        }
    }
    return 0;
}

/* The delegation at cut: in-domain glue first (it must fit, or TC), then sibling glue,
 * which may be left out (RFC 9471); each kind in the order addresses() found it. */
int sp_zone_referral(const struct sp_zone *z, uint32_t cut, struct sp_zone_answer *a)
{
    a->aa = a->nan > 0;
    a->referral = true;
    a->ns[0] = rref(z, sp_zone_find_rrset(z, cut, TYPE_NS), NULL);
    a->nns = 1;
    if (addresses(z, a->ns, 1, a) < 0)
        return -1;
    struct sp_zone_rref sibling[2 * SP_ZONE_ADDITIONAL_MAX];
    uint16_t nsibling = 0, kept = 0;
    const uint8_t *top = sp_zone_name_wire(z, cut);
    for (uint16_t i = 0; i < a->nad; i++) {
        uint32_t owner = z->rrsets[a->ad[i].rrset].name;
        if (sp_zone_is_subdomain(sp_zone_name_wire(z, owner), z->names[owner].len, top,
                                 z->names[cut].len))
            a->ad[kept++] = a->ad[i];
        else
            sibling[nsibling++] = a->ad[i];
    }
    memcpy(a->ad + kept, sibling, nsibling * sizeof(*sibling));
    a->nad_required = kept;
    return 0;
}

/* ANY's RRset: the lowest type, RRSIGs apart (a query for RRSIG gets those). */
static uint32_t lowest_type(const struct sp_zone *z, uint32_t node)
{
    const struct sp_zone_name *n = &z->names[node];
    for (uint32_t i = n->first_rrset; i < n->first_rrset + n->nrrsets; i++)
        if (z->rrsets[i].type != TYPE_RRSIG)
            return i;
    return SP_ZONE_NONE;
}

uint32_t sp_zone_dname_above(const struct sp_zone *z, uint32_t from)
{
    uint32_t found = SP_ZONE_NONE;
    for (uint32_t n = from; n != SP_ZONE_NONE; n = z->names[n].parent) {
        if (sp_zone_find_rrset(z, n, TYPE_DNAME) != SP_ZONE_NONE)
            found = n;
        if (n == z->origin)
            break;
    }
    return found;
}

/* RFC 6672: the DNAME, and a CNAME from the name to the name with the DNAME's owner
 * replaced by its target (not followed further); YXDOMAIN when that is too long. For
 * a BELOW key's asked name the CNAME is a template: dns.c completes it per name. */
static void synthesize(const struct sp_zone *z, struct sp_zone_answer *a, const struct cursor *c,
                       uint32_t dname)
{
    uint32_t set = sp_zone_find_rrset(z, dname, TYPE_DNAME);
    a->an[a->nan++] = rref(z, set, NULL);
    const struct sp_zone_rdata *d = &z->rdatas[z->rrsets[set].first];
    const uint8_t *target = z->rdata_arena + d->off;
    size_t len = sp_zone_wire_len(target, d->len), owner = z->names[dname].len;
    /* the labels in front of the owner: the asked name's, or (BELOW) compiler.py's
     * sample's, which is what a too long name is judged by */
    size_t prefix = c->wire != NULL ? c->len - owner : owner + 16 <= SP_ZONE_NAME_MAX ? 16 : 2;
    if (len == 0 || prefix + len > SP_ZONE_NAME_MAX) {
        a->rcode = RCODE_YXDOMAIN;
        return;
    }
    a->synthesized = true;
    a->template = c->wire == NULL;
    uint8_t *out = a->synthesized_target;
    if (!a->template)
        memcpy(out, c->wire, prefix);
    else
        prefix = 0;
    memcpy(out + prefix, target, len);
    a->synthesized_len = (uint8_t)(prefix + len);
    struct sp_zone_rref cname = {.rrset = SP_ZONE_SYNTHESIZED, .ttl = z->rrsets[set].ttl,
                                 .owner = c->wire, .owner_len = (uint8_t)c->len};
    a->an[a->nan++] = cname;
}

/* Point the cursor at a CNAME's target (lower-cased into buf). */
static void move_to(const struct sp_zone *z, struct cursor *c, const uint8_t *target, size_t len)
{
    c->wire = target;
    c->len = len;
    c->id = sp_zone_lookup(z, target, len);
    c->ce = c->id;
    for (size_t i = 0; c->ce == SP_ZONE_NONE && target[i]; ) {   /* ends at the origin */
        i += 1 + target[i];
        c->ce = sp_zone_lookup(z, target + i, len - i);
    }
}

int sp_zone_resolve(const struct sp_zone *z, uint32_t name, uint32_t below, uint16_t qtype,
                    struct sp_zone_answer *a)
{
    memset(a, 0, offsetof(struct sp_zone_answer, an));
    a->aa = true;
    struct cursor c = {.id = name, .ce = name != SP_ZONE_NONE ? name : below};
    if (name != SP_ZONE_NONE) {
        c.wire = sp_zone_name_wire(z, name);
        c.len = z->names[name].len;
    }
    size_t olen;
    const uint8_t *origin = origin_wire(z, &olen);
    for (;;) {
        uint32_t cut = z->names[c.ce].cut_top;   /* at or above: c is no cut when not held */
        if (cut != SP_ZONE_NONE && !(qtype == TYPE_DS && c.id == cut))
            return sp_zone_referral(z, cut, a);
        uint32_t above = c.id == SP_ZONE_NONE ? c.ce : z->names[c.id].parent;
        uint32_t dname = z->dnames && above != SP_ZONE_NONE ? sp_zone_dname_above(z, above)
                                                              : SP_ZONE_NONE;
        if (dname != SP_ZONE_NONE) {
            synthesize(z, a, &c, dname);
            return 0;
        }
        uint32_t node = c.id;
        if (node == SP_ZONE_NONE) {
            node = z->names[c.ce].wildcard;
            if (node == SP_ZONE_NONE) {
                negative(z, a, RCODE_NXDOMAIN, &c, c.ce);
                return 0;
            }
        }
        /* an empty non-terminal, or a wildcard that is one: it exists, so it matches and
         * has no RRset of any type (RFC 4592 2.2.1) */
        if (z->names[node].nrrsets == 0) {
            negative(z, a, 0, &c, node);
            return 0;
        }
        if (node != c.id) {
            a->expanded[a->nexpanded].name = point(&c);
            a->expanded[a->nexpanded++].wildcard = node;
        }
        uint32_t set = qtype == TYPE_ANY ? lowest_type(z, node) : sp_zone_find_rrset(z, node, qtype);
        if (set != SP_ZONE_NONE) {           /* ANY: one RRset, the lowest type (RFC 8482) */
            a->an[a->nan++] = rref(z, set, &c);
            break;
        }
        /* Knot DNS and BIND answer NSEC and RRSIG at the alias itself */
        set = qtype == TYPE_NSEC || qtype == TYPE_RRSIG ? SP_ZONE_NONE
                                                        : sp_zone_find_rrset(z, node, TYPE_CNAME);
        if (set == SP_ZONE_NONE) {
            negative(z, a, 0, &c, node);
            return 0;
        }
        if (a->nan == SP_ZONE_MAX_CHAIN)     /* the chain stops here, as in Knot DNS */
            break;
        a->an[a->nan++] = rref(z, set, &c);
        const struct sp_zone_rdata *d = &z->rdatas[z->rrsets[set].first];
        size_t len = sp_zone_wire_len(z->rdata_arena + d->off, d->len);
        uint8_t *target = a->names[a->nan - 1];
        lower_copy(target, z->rdata_arena + d->off, len);
        bool loop = len == 0 || !sp_zone_is_subdomain(target, len, origin, olen);
        for (uint16_t i = 0; i < a->nan && !loop; i++) {     /* the names followed so far */
            const struct sp_zone_rref *r = &a->an[i];
            loop = r->owner != NULL && r->owner_len == len && memcmp(r->owner, target, len) == 0;
        }
        if (loop)
            break;
        move_to(z, &c, target, len);
    }
    return addresses(z, a->an, a->nan, a);
}
