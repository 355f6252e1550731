/* The DNSSEC form of an answer in a signed zone, deciding exactly as
 * stormpy/dns/dnssec.py's Signed.sign (the reference); see zone.h.
 *
 * NSEC proofs need the zone's names in canonical order (RFC 4034 section 6.1). That
 * order is a walk of the name tree with each name's children sorted by label, so the
 * index below sorts children once and numbers the names in one walk: the NSEC covering
 * any name, held or not, is then a lookup, not a search through owners. */
#define _GNU_SOURCE
#include "stormpy/zone/zone.h"

#include <stdlib.h>
#include <string.h>

enum { TYPE_NS = 2, TYPE_DS = 43, TYPE_RRSIG = 46, TYPE_NSEC = 47 };

struct sp_zone_dnssec {
    const struct sp_zone *z;
    uint32_t *kids;          /* live names but the origin, by parent then label */
    uint32_t *kids_at;       /* per name: its first child in kids */
    uint32_t *nkids;         /* per name: how many */
    uint32_t *rank;          /* per name: its place in canonical order */
    uint32_t *last;          /* per name: the rank of the last name of its subtree */
    uint32_t *cover;         /* per rank: the NSEC RRset at or before it (NONE: none yet) */
    uint32_t nlive;
    struct sp_zone_nsec3 *nsec3;  /* an NSEC3 zone's chain (then none of the above) */
};

/* RFC 4034 section 6.1: lower-case octet strings, a prefix first. Length-prefixed. */
static int label_cmp(const uint8_t *a, const uint8_t *b)
{
    size_t n = a[0] < b[0] ? a[0] : b[0];
    int c = memcmp(a + 1, b + 1, n);
    return c ? c : (int)a[0] - (int)b[0];
}

static int kid_order(const void *pa, const void *pb, void *arg)
{
    const struct sp_zone *z = arg;
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    if (z->names[a].parent != z->names[b].parent)
        return z->names[a].parent < z->names[b].parent ? -1 : 1;
    return label_cmp(sp_zone_name_wire(z, a), sp_zone_name_wire(z, b));
}

/* Number the names in canonical order: depth first, children by label. */
static int walk(struct sp_zone_dnssec *d)
{
    const struct sp_zone *z = d->z;
    struct { uint32_t name, next; } stack[SP_ZONE_NAME_MAX / 2 + 2];
    uint32_t depth = 0, rank = 0;
    stack[0].name = z->origin;
    stack[0].next = 0;
    d->rank[z->origin] = rank++;
    while (depth != UINT32_MAX) {
        uint32_t name = stack[depth].name;
        if (stack[depth].next == d->nkids[name]) {
            d->last[name] = rank - 1;
            depth--;
            continue;
        }
        uint32_t kid = d->kids[d->kids_at[name] + stack[depth].next++];
        if (depth + 1 >= sizeof(stack) / sizeof(stack[0]))
            return SP_ZONE_NOMEM;
        d->rank[kid] = rank++;
        stack[++depth] = (typeof(stack[0])){kid, 0};
    }
    d->nlive = rank;
    return SP_ZONE_OK;
}

void sp_zone_dnssec_free(struct sp_zone_dnssec *d)
{
    if (d == NULL)
        return;
    free(d->kids);
    free(d->kids_at);
    free(d->nkids);
    free(d->rank);
    free(d->last);
    free(d->cover);
    sp_zone_nsec3_free(d->nsec3);
    free(d);
}

static struct sp_zone_dnssec *nsec_index(const struct sp_zone *z);

int sp_zone_dnssec_new(struct sp_zone *z, struct sp_zone_dnssec **out)
{
    if (!z->nsec3)
        return (*out = nsec_index(z)) != NULL ? SP_ZONE_OK : SP_ZONE_NOMEM;
    struct sp_zone_dnssec *d = calloc(1, sizeof(*d));
    *out = NULL;
    if (d == NULL)
        return SP_ZONE_NOMEM;
    d->z = z;
    int rc = sp_zone_nsec3_new(z, &d->nsec3);
    if (rc != SP_ZONE_OK) {
        free(d);
        return rc;
    }
    *out = d;
    return SP_ZONE_OK;
}

struct sp_zone_nsec3 *sp_zone_dnssec_nsec3(const struct sp_zone_dnssec *d)
{
    return d->nsec3;
}

static struct sp_zone_dnssec *nsec_index(const struct sp_zone *z)
{
    struct sp_zone_dnssec *d = calloc(1, sizeof(*d));
    size_t n = (size_t)z->nnames + 1;
    if (d == NULL)
        return NULL;
    d->z = z;
    d->kids = malloc(n * sizeof(uint32_t));
    d->kids_at = calloc(n, sizeof(uint32_t));
    d->nkids = calloc(n, sizeof(uint32_t));
    d->rank = calloc(n, sizeof(uint32_t));
    d->last = calloc(n, sizeof(uint32_t));
    d->cover = malloc(n * sizeof(uint32_t));
    if (!d->kids || !d->kids_at || !d->nkids || !d->rank || !d->last || !d->cover) {
        sp_zone_dnssec_free(d);
        return NULL;
    }
    uint32_t count = 0;
    for (uint32_t id = 0; id < z->nnames; id++)
        if (!z->names[id].dead && id != z->origin)
            d->kids[count++] = id;
    qsort_r(d->kids, count, sizeof(uint32_t), kid_order, (void *)z);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t parent = z->names[d->kids[i]].parent;
        if (d->nkids[parent]++ == 0)
            d->kids_at[parent] = i;
    }
    if (walk(d) != SP_ZONE_OK) {
        sp_zone_dnssec_free(d);
        return NULL;
    }
    uint32_t *by_rank = malloc(n * sizeof(uint32_t));
    if (by_rank == NULL) {
        sp_zone_dnssec_free(d);
        return NULL;
    }
    for (uint32_t id = 0; id < z->nnames; id++)
        if (!z->names[id].dead)
            by_rank[d->rank[id]] = id;
    uint32_t cover = SP_ZONE_NONE;
    for (uint32_t r = 0; r < d->nlive; r++) {
        uint32_t nsec = sp_zone_find_rrset(z, by_rank[r], TYPE_NSEC);
        d->cover[r] = cover = nsec != SP_ZONE_NONE ? nsec : cover;
    }
    free(by_rank);
    return d;
}

/* The child of `parent` whose label is the last at or before label; NONE: none is. */
static uint32_t child_before(const struct sp_zone_dnssec *d, uint32_t parent, const uint8_t *label,
                             bool *equal)
{
    const uint32_t *kids = d->kids + d->kids_at[parent];
    uint32_t lo = 0, hi = d->nkids[parent];
    *equal = false;
    while (lo < hi) {        /* the first child after label */
        uint32_t mid = lo + (hi - lo) / 2;
        int c = label_cmp(sp_zone_name_wire(d->z, kids[mid]), label);
        if (c == 0)
            *equal = true;
        if (c <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? kids[lo - 1] : SP_ZONE_NONE;
}

/* The NSEC at name, or at the last owner before it in canonical order (before them
 * all: the last, as dnssec.py's bisect wraps). */
static uint32_t nsec_covering(const struct sp_zone_dnssec *d, const uint8_t *wire, size_t len)
{
    const struct sp_zone *z = d->z;
    uint32_t rank = SP_ZONE_NONE, id = sp_zone_lookup(z, wire, len);
    if (id != SP_ZONE_NONE) {
        rank = d->rank[id];
    } else {
        size_t label = 0;          /* the label right below the closest encloser */
        for (size_t i = 0; i < len && wire[i]; i += 1 + wire[i]) {
            uint32_t ce = sp_zone_lookup(z, wire + i + 1 + wire[i], len - i - 1 - wire[i]);
            if (ce == SP_ZONE_NONE)
                continue;
            label = i;
            bool equal;
            uint32_t before = child_before(d, ce, wire + label, &equal);
            rank = before != SP_ZONE_NONE ? d->last[before] : d->rank[ce];
            break;
        }
    }
    uint32_t nsec = rank != SP_ZONE_NONE ? d->cover[rank] : SP_ZONE_NONE;
    return nsec != SP_ZONE_NONE || d->nlive == 0 ? nsec : d->cover[d->nlive - 1];
}

/* The signed form as it is built: each RRset once (dnssec.py's `seen`). */
struct form {
    const struct sp_zone_dnssec *d;
    struct sp_zone_answer *out;
    const struct sp_zone_point *asked;
    struct seen { uint32_t rrset; const uint8_t *owner; uint8_t len; } seen[2 * SP_ZONE_ADDITIONAL_MAX + 64];
    uint32_t nseen;
    bool overflow;
    bool left_out;         /* NSEC3: the asked name's next closer cover, for dns.c */
};

static bool same_owner(const uint8_t *a, uint8_t alen, const uint8_t *b, uint8_t blen)
{
    return a == b || (a && b && alen == blen && memcmp(a, b, alen) == 0);
}

/* Whether (rrset, owner) is new; it is seen from now on. */
static bool first_sight(struct form *f, uint32_t rrset, const uint8_t *owner, uint8_t len)
{
    for (uint32_t i = 0; i < f->nseen; i++)
        if (f->seen[i].rrset == rrset && same_owner(f->seen[i].owner, f->seen[i].len, owner, len))
            return false;
    if (f->nseen == sizeof(f->seen) / sizeof(f->seen[0])) {
        f->overflow = true;
        return false;
    }
    f->seen[f->nseen++] = (struct seen){rrset, owner, len};
    return true;
}

static void put(struct form *f, struct sp_zone_rref *dst, uint16_t *n, uint16_t cap,
                struct sp_zone_rref r)
{
    if (!first_sight(f, r.rrset, r.owner, r.owner_len))
        return;
    if (*n == cap)
        f->overflow = true;
    else
        dst[(*n)++] = r;
}

/* Each RRset and the RRSIGs covering it, owned and timed as the RRset is served; an
 * expanded wildcard's RRset also counts as seen at the wildcard. */
static void signed_section(struct form *f, const struct sp_zone_rref *from, uint16_t n,
                           struct sp_zone_rref *dst, uint16_t *ndst, uint16_t cap)
{
    const struct sp_zone *z = f->d->z;
    for (uint16_t i = 0; i < n; i++) {
        const struct sp_zone_rref *r = &from[i];
        if (r->rrset == SP_ZONE_SYNTHESIZED) {      /* a DNAME's CNAME: never signed */
            put(f, dst, ndst, cap, *r);
            continue;
        }
        uint32_t own = z->rrsets[r->rrset].name;
        const uint8_t *own_wire = sp_zone_name_wire(z, own);
        uint8_t own_len = z->names[own].len;
        bool renamed = !same_owner(r->owner, r->owner_len, own_wire, own_len);
        put(f, dst, ndst, cap, *r);
        if (renamed)
            first_sight(f, r->rrset, own_wire, own_len);
        uint16_t type = z->rrsets[r->rrset].type;
        uint32_t sigs = type == TYPE_RRSIG ? SP_ZONE_NONE : sp_zone_find_sigs(z, own, type);
        if (sigs == SP_ZONE_NONE)
            continue;
        struct sp_zone_rref sig = *r;
        sig.rrset = sigs;
        put(f, dst, ndst, cap, sig);
        if (renamed)
            first_sight(f, sigs, own_wire, own_len);
    }
}

/* A proof's NSEC RRset (NONE: the zone lacks it, and the proof goes without). */
static void proof(struct form *f, uint32_t nsec)
{
    if (nsec == SP_ZONE_NONE)
        return;
    const struct sp_zone *z = f->d->z;
    uint32_t own = f->d->z->rrsets[nsec].name;
    struct sp_zone_rref r = {.rrset = nsec, .ttl = z->rrsets[nsec].ttl,
                             .owner = sp_zone_name_wire(z, own), .owner_len = z->names[own].len};
    signed_section(f, &r, 1, f->out->ns, &f->out->nns, SP_ZONE_AUTHORITY_MAX);
}

/* A name resolving met, written out: the asked name stands in for the key's. false:
 * it is the key's own, which stands for every name below it (no proof fits all). */
static bool concrete(const struct form *f, const struct sp_zone_point *p, const uint8_t **wire,
                     size_t *len)
{
    const struct sp_zone_point *q = p->wire != NULL ? p : f->asked;
    if (q == NULL || q->wire == NULL)
        return false;
    *wire = q->wire;
    *len = q->len;
    return true;
}

/* --- NSEC3 (RFC 5155 section 7.2) --- */

/* The closest ancestor-or-self of a held name with an NSEC3 (opt-out leaves some
 * without one). */
static uint32_t provable_encloser(const struct sp_zone_dnssec *d, uint32_t name)
{
    const struct sp_zone *z = d->z;
    while (name != z->origin && sp_zone_nsec3_matching(d->nsec3, name) == SP_ZONE_NONE)
        name = z->names[name].parent;
    return name;
}

static unsigned label_count(const uint8_t *wire)
{
    unsigned n = 0;
    for (size_t i = 0; wire[i]; i += 1 + wire[i])
        n++;
    return n;
}

/* The NSEC3 covering name's next closer name below encloser. When name is the asked
 * name of a BELOW key (start: the key's name, or the name a proof starts from) and
 * encloser is the key itself, that cover depends on the name asked: left for dns.c to
 * hash and splice in. Otherwise the next closer name is start or above it. */
static void next_closer_cover(struct form *f, uint32_t encloser, const struct sp_zone_point *name,
                              uint32_t start)
{
    const struct sp_zone *z = f->d->z;
    const uint8_t *wire;
    size_t len;
    if (!concrete(f, name, &wire, &len)) {
        if (encloser == start) {
            f->left_out = true;
            return;
        }
        wire = sp_zone_name_wire(z, start);
        len = z->names[start].len;
    }
    unsigned labels = label_count(wire), above = label_count(sp_zone_name_wire(z, encloser));
    if (labels <= above)
        return;
    size_t i = 0;
    for (unsigned k = 0; k + above + 1 < labels; k++)
        i += 1 + wire[i];
    proof(f, sp_zone_nsec3_covering(f->d->nsec3, wire + i, len - i));
}

static void closest_encloser_proof(struct form *f, uint32_t encloser,
                                   const struct sp_zone_point *name, uint32_t start)
{
    proof(f, sp_zone_nsec3_matching(f->d->nsec3, encloser));
    next_closer_cover(f, encloser, name, start);
}

/* NODATA at name, answered from owner (a wildcard, or name itself). */
static void nodata_nsec3(struct form *f, uint32_t owner, const struct sp_zone_point *name)
{
    const struct sp_zone *z = f->d->z;
    uint32_t match = sp_zone_nsec3_matching(f->d->nsec3, owner);
    proof(f, match);
    if (name->id != owner) {                              /* a wildcard's NODATA */
        uint32_t parent = z->names[owner].parent;
        closest_encloser_proof(f, provable_encloser(f->d, parent), name, parent);
    } else if (match == SP_ZONE_NONE && z->names[owner].is_cut) {   /* opt-out */
        closest_encloser_proof(f, provable_encloser(f->d, owner), name, owner);
    }
}

static void nxdomain_nsec3(struct form *f, const struct sp_zone_answer *a)
{
    const struct sp_zone *z = f->d->z;
    uint32_t encloser = provable_encloser(f->d, a->denial_owner);
    closest_encloser_proof(f, encloser, &a->denied, a->denial_owner);
    uint8_t wild[SP_ZONE_NAME_MAX + 2] = {1, '*'};
    if (z->names[encloser].len + 2u <= SP_ZONE_NAME_MAX) {
        memcpy(wild + 2, sp_zone_name_wire(z, encloser), z->names[encloser].len);
        proof(f, sp_zone_nsec3_covering(f->d->nsec3, wild, z->names[encloser].len + 2u));
    }
}

/* No closer name than the wildcard matched the name. */
static void wildcard_proof_nsec3(struct form *f, const struct sp_zone_point *name, uint32_t wildcard)
{
    uint32_t parent = f->d->z->names[wildcard].parent;
    next_closer_cover(f, provable_encloser(f->d, parent), name, parent);
}

static void referral(struct form *f, const struct sp_zone_answer *a)
{
    const struct sp_zone *z = f->d->z;
    struct sp_zone_answer *out = f->out;
    put(f, out->ns, &out->nns, SP_ZONE_AUTHORITY_MAX, a->ns[0]);
    uint32_t cut = z->rrsets[a->ns[0].rrset].name;
    uint32_t ds = sp_zone_find_rrset(z, cut, TYPE_DS);
    if (ds != SP_ZONE_NONE) {
        struct sp_zone_rref r = a->ns[0];
        r.rrset = ds;
        r.ttl = z->rrsets[ds].ttl;
        signed_section(f, &r, 1, out->ns, &out->nns, SP_ZONE_AUTHORITY_MAX);
    } else if (f->d->nsec3 != NULL) {
        struct sp_zone_point at = {.wire = sp_zone_name_wire(z, cut), .id = cut,
                                   .len = z->names[cut].len};
        nodata_nsec3(f, cut, &at);
    } else {
        proof(f, sp_zone_find_rrset(z, cut, TYPE_NSEC));
    }
    memcpy(out->ad, a->ad, a->nad * sizeof(*a->ad));     /* glue: never signed */
    out->nad = a->nad;
    out->nad_required = a->nad_required;
}

/* NXDOMAIN or NODATA, proven; false when the proof depends on the name asked. */
static bool denial(struct form *f, const struct sp_zone_answer *a)
{
    const struct sp_zone *z = f->d->z;
    const uint8_t *wire;
    size_t len;
    if (f->d->nsec3 != NULL && a->denial == SP_ZONE_NXDOMAIN)
        nxdomain_nsec3(f, a);
    else if (f->d->nsec3 != NULL)
        nodata_nsec3(f, a->denial_owner, &a->denied);
    else if (!concrete(f, &a->denied, &wire, &len))
        return false;
    else if (a->denial == SP_ZONE_NXDOMAIN) {
        proof(f, nsec_covering(f->d, wire, len));
        uint8_t wild[SP_ZONE_NAME_MAX + 2] = {1, '*'};
        uint32_t ce = a->denial_owner;
        if (z->names[ce].len + 2u <= SP_ZONE_NAME_MAX) {
            memcpy(wild + 2, sp_zone_name_wire(z, ce), z->names[ce].len);
            proof(f, nsec_covering(f->d, wild, z->names[ce].len + 2u));
        }
    } else if (z->names[a->denial_owner].nrrsets == 0) {   /* an empty non-terminal */
        proof(f, nsec_covering(f->d, wire, len));
    } else {
        proof(f, sp_zone_find_rrset(z, a->denial_owner, TYPE_NSEC));
    }
    return true;
}

int sp_zone_sign(const struct sp_zone_dnssec *d, const struct sp_zone_answer *a,
                 const struct sp_zone_point *asked, struct sp_zone_answer *out)
{
    static __thread struct form f;
    f.d = d;
    f.out = out;
    f.asked = asked;
    f.nseen = 0;
    f.overflow = false;
    f.left_out = false;
    memset(out, 0, offsetof(struct sp_zone_answer, an));
    out->rcode = a->rcode;
    out->aa = a->aa;
    out->referral = a->referral;
    out->synthesized = a->synthesized;
    out->template = a->template;
    out->synthesized_len = a->synthesized_len;
    memcpy(out->synthesized_target, a->synthesized_target, a->synthesized_len);
    signed_section(&f, a->an, a->nan, out->an, &out->nan,
                   sizeof(out->an) / sizeof(out->an[0]));
    if (a->referral) {
        referral(&f, a);
    } else {
        signed_section(&f, a->ns, a->nns, out->ns, &out->nns, SP_ZONE_AUTHORITY_MAX);
        for (uint16_t i = 0; i < a->nexpanded; i++) {    /* no closer name matched */
            const uint8_t *wire;
            size_t len;
            if (d->nsec3 != NULL)
                wildcard_proof_nsec3(&f, &a->expanded[i].name, a->expanded[i].wildcard);
            else if (concrete(&f, &a->expanded[i].name, &wire, &len))
                proof(&f, nsec_covering(d, wire, len));
            else
                return SP_ZONE_UNPROVABLE;
        }
        if (a->denial != SP_ZONE_NO_DENIAL && !denial(&f, a))
            return SP_ZONE_UNPROVABLE;
        f.nseen = 0;     /* apart: a target may hold the answer's own RRset (an SVCB
                          * naming its owner), which Knot adds again (dnssec.py) */
        signed_section(&f, a->ad, a->nad, out->ad, &out->nad,
                       sizeof(out->ad) / sizeof(out->ad[0]));
    }
    return f.overflow ? -1 : f.left_out ? SP_ZONE_SPLICED : SP_ZONE_OK;
}

bool sp_zone_gap(const struct sp_zone_dnssec *d, uint32_t ancestor, uint32_t i,
                 struct sp_zone_gap *g)
{
    const struct sp_zone *z = d->z;
    size_t alen = z->names[ancestor].len, room = SP_ZONE_NAME_MAX - alen - 1;
    if (i == 0) {
        g->bound[0] = 0;
    } else {
        const uint8_t *kid = sp_zone_name_wire(z, d->kids[d->kids_at[ancestor] + i - 1]);
        memcpy(g->bound, kid, 1u + kid[0]);
    }
    if (g->bound[0] + 1u > (room < 63 ? room : 63))
        return false;
    g->sample[0] = g->bound[0] + 1;          /* the bound, then a zero byte */
    memcpy(g->sample + 1, g->bound + 1, g->bound[0]);
    g->sample[1 + g->bound[0]] = 0;
    bool taken;
    child_before(d, ancestor, g->sample, &taken);
    if (taken)
        return false;
    memcpy(g->sample + 1 + g->sample[0], sp_zone_name_wire(z, ancestor), alen);
    g->sample_len = (uint8_t)(1 + g->sample[0] + alen);
    return true;
}

uint32_t sp_zone_gap_count(const struct sp_zone_dnssec *d, uint32_t ancestor)
{
    return d->nkids[ancestor] + 1;
}
