/* Every key of a zone into a table builder, as compiler.py's _emit_zone makes them
 * (dns.h has the key kinds and the lookup order); see zone.h. Identical responses
 * are stored once. */
#include "stormpy/zone/zone.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stormpy/app/dns/dns.h"

enum { CLASS_IN = 1, TYPE_CNAME = 5, TYPE_DS = 43, TYPE_RRSIG = 46, TYPE_NSEC = 47,
       TYPE_ANY = 255 };

/* The question spliced in at 12, the ID copied, RD and CD copied (compiler.py's
 * DNS_PATCHES). */
static const struct sp_patch dns_patches[] = {
    {.op = SP_PATCH_INSERT, .field = SP_DNS_FIELD_QUESTION, .dst = 12},
    {.op = SP_PATCH_COPY, .field = SP_DNS_FIELD_MESSAGE, .dst = 0, .src = 0, .len = 2},
    {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 2, .src = 2, .mask = 0x01},
    {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 3, .src = 3, .mask = 0x10},
};

/* A response already added, known by 96 bits of two hashes of its bytes, length and
 * word (16 bytes a response at 1M responses matter: this table is part of the peak). A
 * collision of both needs about 2^48 responses. */
struct known {
    uint64_t h1;
    uint32_t h2, index_plus1;
};

/* One stored response's bytes: fixed, or variable (below a name, its pointers moving
 * with the question: shifts). */
struct form {
    uint8_t wire[SP_RESPONSE_MAX + 1];
    size_t len;
    uint32_t drop;
    bool variable;
    struct sp_zone_shifts shifts;
};

enum { SIGNED_NONE, SIGNED_FORM, SIGNED_GAPS };

/* One key's answer: its form, and in a signed zone its DNSSEC form (dns.h's
 * SP_DNS_USER_SIGNED) or the list of a form per gap (SP_DNS_USER_GAPS; the forms are
 * stored as it is made). */
struct result {
    struct form plain, dnssec;
    uint8_t signed_kind;
    uint8_t *gaps;
    size_t gaps_len, gaps_cap;
};

struct compiler {
    struct sp_zone *z;
    struct sp_table_builder *b;
    uint32_t slot;
    struct known *known;
    uint64_t mask, nknown;
    struct sp_zone_compile_stats *stats;
    struct sp_zone_dnssec *dnssec;     /* a signed zone's, or NULL */
    struct sp_zone_answer answer, signed_answer;
    struct sp_zone_soa_place soa;      /* where the last answer encoded holds the SOA */
    struct result other, typed;        /* OTHER's answer at a name, and a type's */
    struct form gap;
    struct sp_patch patches[4 + SP_ZONE_SHIFTS_MAX];
};

/* question: the length a variable response was compressed for (0: fixed); the same
 * bytes compressed for another length point elsewhere. */
static void hash2(const uint8_t *p, size_t n, uint32_t user, uint16_t question, uint64_t *h1,
                  uint32_t *h2)
{
    uint64_t seed = (uint64_t)user | (uint64_t)question << 32;
    *h1 = sp_zone_hash(p, n, 0x243f6a8885a308d3ULL ^ seed);
    *h2 = (uint32_t)(sp_zone_hash(p, n, 0x13198a2e03707344ULL + seed) >> 16);
}

static int grow_known(struct compiler *c)
{
    uint64_t mask = c->mask ? c->mask * 2 + 1 : 4095;
    struct known *k = calloc(mask + 1, sizeof(*k));
    if (k == NULL)
        return SP_ZONE_NOMEM;
    for (uint64_t i = 0; c->known && i <= c->mask; i++) {
        if (!c->known[i].index_plus1)
            continue;
        uint64_t s = c->known[i].h1 & mask;
        while (k[s].index_plus1)
            s = (s + 1) & mask;
        k[s] = c->known[i];
    }
    free(c->known);
    c->known = k;
    c->mask = mask;
    return SP_ZONE_OK;
}

static int remember_soa(struct sp_zone *z, uint32_t index, const struct sp_zone_soa_place *at)
{
    if (z->nsoa_places == z->soa_places_cap) {
        uint32_t cap = z->soa_places_cap ? z->soa_places_cap * 2 : 64;
        void *p = realloc(z->soa_places, cap * sizeof(*z->soa_places));
        if (p == NULL)
            return SP_ZONE_NOMEM;
        z->soa_places = p;
        z->soa_places_cap = cap;
    }
    z->soa_places[z->nsoa_places] = *at;
    z->soa_places[z->nsoa_places++].response = index;
    return SP_ZONE_OK;
}

/* The DNS patch list, and a SHIFT for each pointer a variable response moves. */
static uint16_t patch_list(struct compiler *c, const struct form *f)
{
    uint16_t n = sizeof(dns_patches) / sizeof(dns_patches[0]);
    memcpy(c->patches, dns_patches, sizeof(dns_patches));
    for (uint16_t i = 0; f->variable && i < f->shifts.n; i++)
        c->patches[n++] = (struct sp_patch){.op = SP_PATCH_SHIFT, .field = SP_DNS_FIELD_QUESTION,
                                            .dst = f->shifts.at[i], .len = f->shifts.question};
    return n;
}

static uint16_t question_of(const struct form *f)
{
    return f->variable && f->shifts.n ? f->shifts.question : 0;
}

static uint32_t user_word(const struct form *f, uint32_t slot, uint32_t flags)
{
    return (f->wire[3] & 0x0f) | slot << 8 | f->drop << 16 | flags;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x9e3779b97f4a7c15ULL + (h >> 31);
}

/* The index of the group's first response, when the group was added before. */
static int64_t known_index(struct compiler *c, uint64_t h1, uint32_t h2, uint64_t *slot)
{
    uint64_t s = h1 & c->mask;
    for (; c->known[s].index_plus1; s = (s + 1) & c->mask)
        if (c->known[s].h1 == h1 && c->known[s].h2 == h2)
            return c->known[s].index_plus1 - 1;
    *slot = s;
    return -1;
}

static int remember(struct compiler *c, uint64_t s, uint64_t h1, uint32_t h2, int64_t index)
{
    c->known[s] = (struct known){h1, h2, (uint32_t)index + 1};
    c->nknown++;
    c->stats->responses++;
    if (!c->z->signed_zone && c->soa.ttl_at && remember_soa(c->z, (uint32_t)index, &c->soa) != SP_ZONE_OK)
        return -1;
    return 0;
}

/* One form's index, added the first time it is seen; -1 when the builder refuses. */
static int64_t response(struct compiler *c, const struct form *f, uint32_t user)
{
    if ((c->nknown + 1) * 2 > c->mask && grow_known(c) != SP_ZONE_OK)
        return -1;
    uint64_t h1, s = 0;
    uint32_t h2;
    hash2(f->wire, f->len, user, question_of(f), &h1, &h2);
    int64_t index = known_index(c, h1, h2, &s);
    if (index >= 0)
        return index;
    index = sp_table_add_response(c->b, f->wire, (uint32_t)f->len, c->patches, patch_list(c, f), user);
    return index < 0 || remember(c, s, h1, h2, index) < 0 ? -1 : index;
}

/* A key's answer: its form, then its DNSSEC form or gap list right after it (dns.c
 * takes the next response), all added once. */
static int64_t stored(struct compiler *c, const struct result *r, uint32_t flags)
{
    if ((c->nknown + 1) * 2 > c->mask && grow_known(c) != SP_ZONE_OK)
        return -1;
    uint32_t user = user_word(&r->plain, c->slot, flags | (r->signed_kind ? SP_DNS_USER_SIGNED : 0));
    uint32_t dnssec_user = r->signed_kind == SIGNED_FORM ? user_word(&r->dnssec, c->slot, flags)
                                                         : SP_DNS_USER_GAPS | c->slot << 8;
    uint64_t h1, a1, s = 0;
    uint32_t h2, a2;
    hash2(r->plain.wire, r->plain.len, user, question_of(&r->plain), &h1, &h2);
    if (r->signed_kind == SIGNED_FORM)
        hash2(r->dnssec.wire, r->dnssec.len, dnssec_user, question_of(&r->dnssec), &a1, &a2);
    else if (r->signed_kind == SIGNED_GAPS)
        hash2(r->gaps, r->gaps_len, dnssec_user, 0, &a1, &a2);
    if (r->signed_kind) {
        h1 = mix(h1, a1);
        h2 = (uint32_t)mix(h2, a2);
    }
    int64_t index = known_index(c, h1, h2, &s);
    if (index >= 0)
        return index;
    index = sp_table_add_response(c->b, r->plain.wire, (uint32_t)r->plain.len, c->patches,
                                  patch_list(c, &r->plain), user);
    int64_t next = index;
    if (index >= 0 && r->signed_kind == SIGNED_FORM)
        next = sp_table_add_response(c->b, r->dnssec.wire, (uint32_t)r->dnssec.len, c->patches,
                                     patch_list(c, &r->dnssec), dnssec_user);
    else if (index >= 0 && r->signed_kind == SIGNED_GAPS)
        next = sp_table_add_response(c->b, r->gaps, (uint32_t)r->gaps_len, NULL, 0, dnssec_user);
    return next < 0 || remember(c, s, h1, h2, index) < 0 ? -1 : index;
}

static int add(struct compiler *c, enum sp_dns_kind kind, uint16_t type, uint32_t name,
               const struct result *r, bool wildcard)
{
    int64_t index = stored(c, r, wildcard ? SP_DNS_USER_WILDCARD : 0);
    if (index < 0 || sp_table_add_key(c->b, sp_dns_tag(kind, CLASS_IN, type),
                                      sp_zone_name_wire(c->z, name), c->z->names[name].len,
                                      (uint32_t)index) < 0)
        return SP_ZONE_NOMEM;
    c->stats->keys++;
    return SP_ZONE_OK;
}

static bool same_form(const struct form *a, const struct form *b)
{
    return a->len == b->len && a->drop == b->drop && memcmp(a->wire, b->wire, a->len) == 0;
}

static bool same_result(const struct result *a, const struct result *b)
{
    if (!same_form(&a->plain, &b->plain) || a->signed_kind != b->signed_kind)
        return false;
    if (a->signed_kind == SIGNED_FORM)
        return same_form(&a->dnssec, &b->dnssec);
    return a->signed_kind == SIGNED_NONE ||
           (a->gaps_len == b->gaps_len && memcmp(a->gaps, b->gaps, a->gaps_len) == 0);
}

static int too_big(struct compiler *c, uint32_t name, uint16_t type)
{
    snprintf(c->z->why, sizeof(c->z->why), "an answer (name %u, type %u) over 65535 bytes or "
             "with more than %d additional RRsets", name, type, SP_ZONE_ADDITIONAL_MAX);
    return SP_ZONE_DECLINED;
}

/* a into f: for the question name, or (name NONE) for any name below `below`, the
 * last `anchor` bytes of which every asker shares. */
static bool encode(struct compiler *c, const struct sp_zone_answer *a, struct form *f,
                   uint32_t name, uint32_t below, uint16_t anchor)
{
    struct sp_zone *z = c->z;
    f->variable = name == SP_ZONE_NONE;
    f->shifts.n = 0;
    f->shifts.anchor = anchor;
    uint32_t q = f->variable ? below : name;
    f->len = sp_zone_encode(z, a, sp_zone_name_wire(z, q), z->names[q].len, f->wire, &f->drop,
                            &c->soa, f->variable ? &f->shifts : NULL);
    return f->len != 0;
}

static int put_gap(struct compiler *c, struct result *r, int64_t index, const uint8_t *bound)
{
    if (r->gaps_len + SP_DNS_GAP_ENTRY > r->gaps_cap) {
        size_t cap = r->gaps_cap ? r->gaps_cap * 2 : 64 * SP_DNS_GAP_ENTRY;
        uint8_t *p = realloc(r->gaps, cap);
        if (p == NULL)
            return SP_ZONE_NOMEM;
        r->gaps = p;
        r->gaps_cap = cap;
    }
    uint8_t *e = r->gaps + r->gaps_len;
    memset(e, 0, SP_DNS_GAP_ENTRY);
    e[0] = (uint8_t)(index >> 24), e[1] = (uint8_t)(index >> 16);
    e[2] = (uint8_t)(index >> 8), e[3] = (uint8_t)index;
    memcpy(e + 4, bound, 1u + bound[0]);
    r->gaps_len += SP_DNS_GAP_ENTRY;
    (void)c;
    return SP_ZONE_OK;
}

/* A form for each gap between below's children: the proof differs from gap to gap. */
static int gap_forms(struct compiler *c, struct result *r, uint32_t below, uint16_t type)
{
    struct sp_zone_gap gap;
    r->gaps_len = 0;
    for (uint32_t i = 0, n = sp_zone_gap_count(c->dnssec, below); i < n; i++) {
        if (!sp_zone_gap(c->dnssec, below, i, &gap))
            continue;
        struct sp_zone_point asked = {.wire = gap.sample, .id = SP_ZONE_NONE, .len = gap.sample_len};
        if (sp_zone_sign(c->dnssec, &c->answer, &asked, &c->signed_answer) != SP_ZONE_OK ||
            !encode(c, &c->signed_answer, &c->gap, SP_ZONE_NONE, below, c->z->names[below].len))
            return too_big(c, below, type);
        int64_t index = response(c, &c->gap, user_word(&c->gap, c->slot, 0));
        if (index < 0 || put_gap(c, r, index, gap.bound) != SP_ZONE_OK)
            return SP_ZONE_NOMEM;
    }
    r->signed_kind = r->gaps_len ? SIGNED_GAPS : SIGNED_NONE;
    return SP_ZONE_OK;
}

/* r from c->answer (resolved for name, or below `below` when name is NONE). */
static int forms(struct compiler *c, struct result *r, uint32_t name, uint32_t below,
                 uint16_t type, uint16_t anchor)
{
    if (!encode(c, &c->answer, &r->plain, name, below, anchor))
        return too_big(c, below, type);
    r->signed_kind = SIGNED_NONE;
    if (c->dnssec == NULL)
        return SP_ZONE_OK;
    int rc = sp_zone_sign(c->dnssec, &c->answer, NULL, &c->signed_answer);
    if (rc == SP_ZONE_UNPROVABLE)
        return gap_forms(c, r, below, type);
    if (rc != SP_ZONE_OK || !encode(c, &c->signed_answer, &r->dnssec, name, below, anchor))
        return too_big(c, below, type);
    r->signed_kind = SIGNED_FORM;
    return SP_ZONE_OK;
}

/* The answer to (name, type), or below `below` when name is NONE, into r. */
static int answer(struct compiler *c, uint32_t name, uint32_t below, uint16_t type,
                  struct result *r)
{
    if (sp_zone_resolve(c->z, name, below, type, &c->answer) < 0)
        return too_big(c, below, type);
    return forms(c, r, name, below, type, c->z->names[below].len);
}

/* compiler.py's _sample_below: whether a name the zone lacks fits below this one. */
static bool room_below(const struct sp_zone *z, uint32_t name)
{
    static const uint8_t labels[2][17] = {"\x0f\x00stormpy-asked\x00", "\x01\x00"};
    static const size_t sizes[2] = {16, 2};
    size_t len = z->names[name].len;
    uint8_t sample[SP_ZONE_NAME_MAX + 16];
    for (int i = 0; i < 2; i++) {
        if (len + sizes[i] > SP_ZONE_NAME_MAX)
            continue;
        if (!z->nul_labels)
            return true;      /* both samples start with a zero byte: none can be held */
        memcpy(sample, labels[i], sizes[i]);
        memcpy(sample + sizes[i], sp_zone_name_wire(z, name), len);
        if (sp_zone_lookup(z, sample, len + sizes[i]) == SP_ZONE_NONE)
            return true;
    }
    return false;
}

static int type_order(const void *a, const void *b)
{
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* The types with keys of their own at a node: its own and ANY (and RRSIG where the
 * zone has any), and every type in the zone, DS and NSEC where a CNAME is (none of
 * them follows the chain: DS would follow it into a referral, NSEC is the alias's). */
static size_t key_types(const struct sp_zone *z, uint32_t node, uint16_t *types)
{
    const struct sp_zone_name *n = &z->names[node];
    size_t count = 0;
    bool cname = sp_zone_find_rrset(z, node, TYPE_CNAME) != SP_ZONE_NONE;
    for (uint32_t i = 0; i < n->nrrsets; i++)
        types[count++] = z->rrsets[n->first_rrset + i].type;
    types[count++] = TYPE_ANY;
    if (z->signed_zone)
        types[count++] = TYPE_RRSIG;
    for (uint32_t i = 0; cname && i < z->ntypes; i++)
        types[count++] = z->types[i];
    if (cname) {
        types[count++] = TYPE_DS;
        types[count++] = TYPE_NSEC;
    }
    qsort(types, count, sizeof(*types), type_order);
    size_t unique = 0;
    for (size_t i = 0; i < count; i++)      /* each key once: the table counts repeats */
        if (unique == 0 || types[unique - 1] != types[i])
            types[unique++] = types[i];
    return unique;
}

/* EXACT or BELOW keys for each type whose answer differs from OTHER's. */
static int typed_keys(struct compiler *c, uint32_t name, uint32_t node, bool below)
{
    uint16_t *types = malloc((c->z->names[node].nrrsets + c->z->ntypes + 4) * sizeof(*types));
    if (types == NULL)
        return SP_ZONE_NOMEM;
    size_t n = key_types(c->z, node, types);
    int rc = SP_ZONE_OK;
    for (size_t i = 0; i < n && rc == SP_ZONE_OK; i++) {
        rc = answer(c, below ? SP_ZONE_NONE : name, name, types[i], &c->typed);
        if (rc == SP_ZONE_OK && !same_result(&c->typed, &c->other))
            rc = add(c, below ? SP_DNS_BELOW : SP_DNS_EXACT, types[i], name, &c->typed, false);
    }
    free(types);
    return rc;
}

/* A name below a zone cut: the referral, for it and below it, and DS at the cut. */
static int emit_below_cut(struct compiler *c, uint32_t name, uint32_t cut, bool sample)
{
    struct sp_zone *z = c->z;
    memset(&c->answer, 0, offsetof(struct sp_zone_answer, an));
    if (sp_zone_referral(z, cut, &c->answer) < 0)
        return too_big(c, name, 0);
    int rc = forms(c, &c->typed, name, name, 0, 0);
    if (rc == SP_ZONE_OK)
        rc = add(c, SP_DNS_OTHER, 0, name, &c->typed, false);
    if (rc == SP_ZONE_OK && sample) {
        rc = forms(c, &c->typed, SP_ZONE_NONE, name, 0, z->names[name].len);
        if (rc == SP_ZONE_OK)
            rc = add(c, SP_DNS_BELOW_OTHER, 0, name, &c->typed, false);
    }
    if (rc == SP_ZONE_OK && name == cut) {
        rc = answer(c, name, name, TYPE_DS, &c->typed);
        if (rc == SP_ZONE_OK)
            rc = add(c, SP_DNS_EXACT, TYPE_DS, name, &c->typed, false);
    }
    return rc;
}

/* The NXDOMAIN below a name: unsigned, one for every name of the zone (pointing at the
 * origin only); signed, each name's own, with its proofs. */
static int emit_nxdomain(struct compiler *c, uint32_t name, int64_t *shared)
{
    struct sp_zone *z = c->z;
    if (c->dnssec != NULL) {
        int rc = answer(c, SP_ZONE_NONE, name, 0, &c->typed);
        return rc == SP_ZONE_OK ? add(c, SP_DNS_BELOW_OTHER, 0, name, &c->typed, false) : rc;
    }
    if (*shared < 0) {
        if (sp_zone_resolve(z, SP_ZONE_NONE, name, 0, &c->answer) < 0)
            return too_big(c, name, 0);
        int rc = forms(c, &c->typed, SP_ZONE_NONE, name, 0, z->names[z->origin].len);
        if (rc != SP_ZONE_OK)
            return rc;
        *shared = stored(c, &c->typed, 0);
        if (*shared < 0)
            return SP_ZONE_NOMEM;
    }
    if (sp_table_add_key(c->b, sp_dns_tag(SP_DNS_BELOW_OTHER, CLASS_IN, 0),
                         sp_zone_name_wire(z, name), z->names[name].len, (uint32_t)*shared) < 0)
        return SP_ZONE_NOMEM;
    c->stats->keys++;
    return SP_ZONE_OK;
}

static int emit_name(struct compiler *c, uint32_t name, int64_t *nxdomain)
{
    struct sp_zone *z = c->z;
    uint32_t cut = z->names[name].cut_top;
    bool sample = room_below(z, name);
    if (cut != SP_ZONE_NONE)
        return emit_below_cut(c, name, cut, sample);
    int rc = answer(c, name, name, 0, &c->other);
    if (rc == SP_ZONE_OK)
        rc = add(c, SP_DNS_OTHER, 0, name, &c->other, false);
    if (rc == SP_ZONE_OK && z->names[name].nrrsets)
        rc = typed_keys(c, name, name, false);
    if (rc != SP_ZONE_OK || !sample)
        return rc;
    uint32_t node = z->names[name].wildcard;
    if (node == SP_ZONE_NONE)
        return emit_nxdomain(c, name, nxdomain);
    rc = answer(c, SP_ZONE_NONE, name, 0, &c->other);
    if (rc == SP_ZONE_OK)
        rc = add(c, SP_DNS_BELOW_OTHER, 0, name, &c->other, true);
    return rc == SP_ZONE_OK ? typed_keys(c, name, node, true) : rc;
}

static void compiler_free(struct compiler *c)
{
    sp_zone_dnssec_free(c->dnssec);
    free(c->other.gaps);
    free(c->typed.gaps);
    free(c->known);
    free(c);
}

static struct compiler *compiler_new(struct sp_zone *z, struct sp_table_builder *b,
                                     uint32_t slot, struct sp_zone_compile_stats *stats)
{
    struct compiler *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->z = z, c->b = b, c->slot = slot, c->stats = stats;
    memset(stats, 0, sizeof(*stats));
    if (z->signed_zone && (c->dnssec = sp_zone_dnssec_new(z)) == NULL) {
        compiler_free(c);
        return NULL;
    }
    if (grow_known(c) != SP_ZONE_OK) {
        compiler_free(c);
        return NULL;
    }
    return c;
}

int sp_zone_compile(struct sp_zone *z, struct sp_table_builder *b, uint32_t slot,
                    struct sp_zone_compile_stats *stats)
{
    if (z->signed_zone && z->nsec3) {
        snprintf(z->why, sizeof(z->why), "an NSEC3-signed zone");
        return SP_ZONE_DECLINED;
    }
    struct compiler *c = compiler_new(z, b, slot, stats);
    if (c == NULL)
        return SP_ZONE_NOMEM;
    z->nsoa_places = 0;
    int64_t nxdomain = -1;
    int rc = SP_ZONE_OK;
    for (uint32_t name = 0; rc == SP_ZONE_OK && name < z->nnames; name++)
        if (!z->names[name].dead)
            rc = emit_name(c, name, &nxdomain);
    compiler_free(c);
    if (rc == SP_ZONE_OK)
        z->pending = false;
    return rc;
}

/* Every key a name can have, out of the edited table. */
static int remove_keys(struct sp_zone *z, struct sp_table_builder *b, uint32_t name)
{
    static const enum sp_dns_kind typed[] = {SP_DNS_EXACT, SP_DNS_BELOW};
    static const enum sp_dns_kind untyped[] = {SP_DNS_OTHER, SP_DNS_BELOW_OTHER};
    const uint8_t *key = sp_zone_name_wire(z, name);
    uint32_t len = z->names[name].len;
    for (int k = 0; k < 2; k++) {
        sp_table_remove_key(b, sp_dns_tag(untyped[k], CLASS_IN, 0), key, len);
        sp_table_remove_key(b, sp_dns_tag(typed[k], CLASS_IN, TYPE_ANY), key, len);
        sp_table_remove_key(b, sp_dns_tag(typed[k], CLASS_IN, TYPE_DS), key, len);
        for (uint32_t t = 0; t < z->ntypes; t++)
            sp_table_remove_key(b, sp_dns_tag(typed[k], CLASS_IN, z->types[t]), key, len);
    }
    return SP_ZONE_OK;
}

static int recompile_declined(struct sp_zone *z, const char *why)
{
    snprintf(z->why, sizeof(z->why), "compiled whole: %s", why);
    return SP_ZONE_DECLINED;
}

/* The SOA's new TTLs, serial and timers where the table stores it. */
static int rewrite_soa(struct sp_zone *z, struct sp_table_builder *b)
{
    const struct sp_zone_rdata *soa = &z->rdatas[z->rrsets[z->soa].first];
    const uint8_t *tail = z->rdata_arena + soa->off + soa->len - 20;
    for (uint32_t i = 0; i < z->nsoa_places; i++) {
        const struct sp_zone_soa_place *p = &z->soa_places[i];
        uint32_t ttl = p->negative ? z->negative_ttl : z->rrsets[z->soa].ttl;
        uint8_t be[4] = {(uint8_t)(ttl >> 24), (uint8_t)(ttl >> 16), (uint8_t)(ttl >> 8), (uint8_t)ttl};
        if (sp_table_rewrite(b, p->response, p->ttl_at, be, 4) < 0 ||
            sp_table_rewrite(b, p->response, p->tail_at, tail, 20) < 0)
            return recompile_declined(z, "an SOA place outside its response");
    }
    return SP_ZONE_OK;
}

int sp_zone_recompile(struct sp_zone *z, struct sp_table_builder *b, uint32_t slot,
                      struct sp_zone_compile_stats *stats)
{
    memset(stats, 0, sizeof(*stats));
    if (!z->pending)
        return SP_ZONE_OK;
    const struct sp_zone_rdata *soa = &z->rdatas[z->rrsets[z->soa].first];
    if (z->signed_zone)
        return recompile_declined(z, "a signed zone's proofs reach past the changed names");
    if (z->ntypes != z->old_ntypes || memcmp(z->types, z->old_types, z->ntypes * sizeof(*z->types)))
        return recompile_declined(z, "the zone's set of types changed");
    if (z->nul_labels != z->old_nul_labels)
        return recompile_declined(z, "names with a zero byte came or went");
    if (soa->len - 20u != z->old_soa_names_len ||
        memcmp(z->rdata_arena + soa->off, z->old_soa_names, z->old_soa_names_len))
        return recompile_declined(z, "the SOA's names changed");
    uint8_t *mark = calloc(z->nnames + 1, 1);
    if (mark == NULL)
        return SP_ZONE_NOMEM;
    uint32_t affected = sp_zone_affected(z, mark);
    if (affected > z->nnames / 2) {
        free(mark);
        return recompile_declined(z, "the change reaches most names");
    }
    int rc = rewrite_soa(z, b);
    for (uint32_t id = 0; rc == SP_ZONE_OK && id < z->nnames; id++)
        if (mark[id] & SP_ZONE_AFFECTED)
            rc = remove_keys(z, b, id);
    struct compiler *c = rc == SP_ZONE_OK ? compiler_new(z, b, slot, stats) : NULL;
    if (rc == SP_ZONE_OK && c == NULL)
        rc = SP_ZONE_NOMEM;
    int64_t nxdomain = -1;
    for (uint32_t id = 0; rc == SP_ZONE_OK && id < z->nnames; id++)
        if ((mark[id] & SP_ZONE_AFFECTED) && !z->names[id].dead)
            rc = emit_name(c, id, &nxdomain);
    if (c != NULL)
        compiler_free(c);
    free(mark);
    if (rc == SP_ZONE_OK)
        z->pending = false;
    return rc;
}
