/* Every key of a zone into a table builder, as compiler.py's _emit_zone makes them
 * (dns.h has the key kinds and the lookup order); see zone.h. Identical responses
 * are stored once. */
#include "stormpy/zone/zone.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stormpy/app/dns/dns.h"

enum { CLASS_IN = 1, TYPE_CNAME = 5, TYPE_DS = 43, TYPE_ANY = 255 };

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

struct compiler {
    struct sp_zone *z;
    struct sp_table_builder *b;
    uint32_t slot;
    struct known *known;
    uint64_t mask, nknown;
    struct sp_zone_compile_stats *stats;
    struct sp_zone_answer answer;
    struct sp_zone_soa_place soa;      /* where the last answer encoded holds the SOA */
    uint8_t other[SP_RESPONSE_MAX + 1], wire[SP_RESPONSE_MAX + 1];
    struct sp_zone_shifts other_shifts, wire_shifts;    /* theirs, when variable */
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
static uint16_t patch_list(struct compiler *c, const struct sp_zone_shifts *shifts)
{
    uint16_t n = sizeof(dns_patches) / sizeof(dns_patches[0]);
    memcpy(c->patches, dns_patches, sizeof(dns_patches));
    for (uint16_t i = 0; shifts && i < shifts->n; i++)
        c->patches[n++] = (struct sp_patch){.op = SP_PATCH_SHIFT, .field = SP_DNS_FIELD_QUESTION,
                                            .dst = shifts->at[i], .len = shifts->question};
    return n;
}

/* The response's index, added the first time it is seen; -1 when the builder refuses.
 * shifts: a variable response's, or NULL. */
static int64_t response(struct compiler *c, const uint8_t *wire, size_t len, uint32_t user,
                        const struct sp_zone_shifts *shifts)
{
    if ((c->nknown + 1) * 2 > c->mask && grow_known(c) != SP_ZONE_OK)
        return -1;
    uint64_t h1;
    uint32_t h2;
    hash2(wire, len, user, shifts && shifts->n ? shifts->question : 0, &h1, &h2);
    uint64_t s = h1 & c->mask;
    for (; c->known[s].index_plus1; s = (s + 1) & c->mask) {
        const struct known *k = &c->known[s];
        if (k->h1 == h1 && k->h2 == h2)
            return k->index_plus1 - 1;
    }
    int64_t index = sp_table_add_response(c->b, wire, (uint32_t)len, c->patches,
                                          patch_list(c, shifts), user);
    if (index < 0)
        return -1;
    c->known[s] = (struct known){h1, h2, (uint32_t)index + 1};
    c->nknown++;
    c->stats->responses++;
    if (c->soa.ttl_at && remember_soa(c->z, (uint32_t)index, &c->soa) != SP_ZONE_OK)
        return -1;
    return index;
}

static int add(struct compiler *c, enum sp_dns_kind kind, uint16_t type, uint32_t name,
               const uint8_t *wire, size_t len, uint32_t droppable, bool wildcard)
{
    uint32_t user = (wire[3] & 0x0f) | c->slot << 8 | droppable << 16 |
                    (wildcard ? SP_DNS_USER_WILDCARD : 0);
    bool variable = kind == SP_DNS_BELOW || kind == SP_DNS_BELOW_OTHER;
    int64_t index = response(c, wire, len, user, !variable ? NULL
                             : wire == c->other ? &c->other_shifts : &c->wire_shifts);
    if (index < 0 || sp_table_add_key(c->b, sp_dns_tag(kind, CLASS_IN, type),
                                      sp_zone_name_wire(c->z, name), c->z->names[name].len,
                                      (uint32_t)index) < 0)
        return SP_ZONE_NOMEM;
    c->stats->keys++;
    return SP_ZONE_OK;
}

static int too_big(struct compiler *c, uint32_t name, uint16_t type)
{
    snprintf(c->z->why, sizeof(c->z->why), "an answer (name %u, type %u) over 65535 bytes or "
             "with more than %d additional RRsets", name, type, SP_ZONE_ADDITIONAL_MAX);
    return SP_ZONE_DECLINED;
}

/* Encode the answer to (name, type), or below `below` when name is NONE, into out. */
/* A variable answer's shifts go with the buffer it is encoded into (c->wire, c->other). */
static struct sp_zone_shifts *shifts_of(struct compiler *c, const uint8_t *out)
{
    return out == c->other ? &c->other_shifts : &c->wire_shifts;
}

static size_t answer(struct compiler *c, uint32_t name, uint32_t below, uint16_t type,
                     uint8_t *out, uint32_t *droppable)
{
    if (sp_zone_resolve(c->z, name, below, type, &c->answer) < 0)
        return 0;
    if (name != SP_ZONE_NONE)
        return sp_zone_encode(c->z, &c->answer, sp_zone_name_wire(c->z, name),
                              c->z->names[name].len, out, droppable, &c->soa, NULL);
    struct sp_zone_shifts *shifts = shifts_of(c, out);
    shifts->anchor = c->z->names[below].len;
    return sp_zone_encode(c->z, &c->answer, sp_zone_name_wire(c->z, below),
                          c->z->names[below].len, out, droppable, &c->soa, shifts);
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

/* The types with keys of their own at a node: its own and ANY, and every type in the
 * zone and DS where a CNAME is (DS never follows a chain into a referral). */
static size_t key_types(const struct sp_zone *z, uint32_t node, uint16_t *types)
{
    const struct sp_zone_name *n = &z->names[node];
    size_t count = 0;
    bool cname = sp_zone_find_rrset(z, node, TYPE_CNAME) != SP_ZONE_NONE;
    for (uint32_t i = 0; i < n->nrrsets; i++)
        types[count++] = z->rrsets[n->first_rrset + i].type;
    types[count++] = TYPE_ANY;
    for (uint32_t i = 0; cname && i < z->ntypes; i++)
        types[count++] = z->types[i];
    if (cname)
        types[count++] = TYPE_DS;
    qsort(types, count, sizeof(*types), type_order);
    size_t unique = 0;
    for (size_t i = 0; i < count; i++)      /* each key once: the table counts repeats */
        if (unique == 0 || types[unique - 1] != types[i])
            types[unique++] = types[i];
    return unique;
}

/* EXACT or BELOW keys for each type whose answer differs from OTHER's. */
static int typed_keys(struct compiler *c, uint32_t name, uint32_t node, bool below,
                      size_t other_len, uint32_t other_drop)
{
    uint16_t *types = malloc((c->z->names[node].nrrsets + c->z->ntypes + 2) * sizeof(*types));
    if (types == NULL)
        return SP_ZONE_NOMEM;
    size_t n = key_types(c->z, node, types);
    int rc = SP_ZONE_OK;
    for (size_t i = 0; i < n && rc == SP_ZONE_OK; i++) {
        uint32_t drop;
        size_t len = answer(c, below ? SP_ZONE_NONE : name, name, types[i], c->wire, &drop);
        if (len == 0)
            rc = too_big(c, name, types[i]);
        else if (len != other_len || drop != other_drop || memcmp(c->wire, c->other, len))
            rc = add(c, below ? SP_DNS_BELOW : SP_DNS_EXACT, types[i], name, c->wire, len, drop, false);
    }
    free(types);
    return rc;
}

static int emit_name(struct compiler *c, uint32_t name, int64_t *nxdomain)
{
    struct sp_zone *z = c->z;
    uint32_t cut = z->names[name].cut_top, drop;
    bool sample = room_below(z, name);
    size_t len;
    if (cut != SP_ZONE_NONE) {
        memset(&c->answer, 0, offsetof(struct sp_zone_answer, an));
        if (sp_zone_referral(z, cut, &c->answer) < 0)
            return too_big(c, name, 0);
        len = sp_zone_encode(z, &c->answer, sp_zone_name_wire(z, name), z->names[name].len,
                             c->wire, &drop, &c->soa, NULL);
        if (len == 0)
            return too_big(c, name, 0);
        int rc = add(c, SP_DNS_OTHER, 0, name, c->wire, len, drop, false);
        if (rc == SP_ZONE_OK && sample) {
            c->wire_shifts.anchor = z->names[name].len;
            len = sp_zone_encode(z, &c->answer, sp_zone_name_wire(z, name), z->names[name].len,
                                 c->wire, &drop, &c->soa, &c->wire_shifts);
            rc = len ? add(c, SP_DNS_BELOW_OTHER, 0, name, c->wire, len, drop, false)
                     : too_big(c, name, 0);
        }
        if (rc == SP_ZONE_OK && name == cut) {
            len = answer(c, name, name, TYPE_DS, c->wire, &drop);
            rc = len ? add(c, SP_DNS_EXACT, TYPE_DS, name, c->wire, len, drop, false)
                     : too_big(c, name, TYPE_DS);
        }
        return rc;
    }
    uint32_t other_drop;
    size_t other_len = answer(c, name, name, 0, c->other, &other_drop);
    if (other_len == 0)
        return too_big(c, name, 0);
    int rc = add(c, SP_DNS_OTHER, 0, name, c->other, other_len, other_drop, false);
    if (rc == SP_ZONE_OK && z->names[name].nrrsets)
        rc = typed_keys(c, name, name, false, other_len, other_drop);
    if (rc != SP_ZONE_OK || !sample)
        return rc;
    uint32_t node = z->names[name].wildcard;
    if (node == SP_ZONE_NONE) {
        if (*nxdomain < 0) {         /* one for every name: pointing at the origin only */
            if (sp_zone_resolve(z, SP_ZONE_NONE, name, 0, &c->answer) < 0)
                return too_big(c, name, 0);
            c->wire_shifts.anchor = z->names[z->origin].len;
            len = sp_zone_encode(z, &c->answer, sp_zone_name_wire(z, name), z->names[name].len,
                                 c->wire, &drop, &c->soa, &c->wire_shifts);
            if (len == 0)
                return too_big(c, name, 0);
            uint32_t user = (c->wire[3] & 0x0f) | c->slot << 8 | drop << 16;
            *nxdomain = response(c, c->wire, len, user, &c->wire_shifts);
            if (*nxdomain < 0)
                return SP_ZONE_NOMEM;
        }
        if (sp_table_add_key(c->b, sp_dns_tag(SP_DNS_BELOW_OTHER, CLASS_IN, 0),
                             sp_zone_name_wire(z, name), z->names[name].len, (uint32_t)*nxdomain) < 0)
            return SP_ZONE_NOMEM;
        c->stats->keys++;
        return SP_ZONE_OK;
    }
    other_len = answer(c, SP_ZONE_NONE, name, 0, c->other, &other_drop);
    if (other_len == 0)
        return too_big(c, name, 0);
    rc = add(c, SP_DNS_BELOW_OTHER, 0, name, c->other, other_len, other_drop, true);
    return rc == SP_ZONE_OK ? typed_keys(c, name, node, true, other_len, other_drop) : rc;
}

static struct compiler *compiler_new(struct sp_zone *z, struct sp_table_builder *b,
                                     uint32_t slot, struct sp_zone_compile_stats *stats)
{
    struct compiler *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    *c = (struct compiler){.z = z, .b = b, .slot = slot, .stats = stats};
    memset(stats, 0, sizeof(*stats));
    if (grow_known(c) != SP_ZONE_OK) {
        free(c);
        return NULL;
    }
    return c;
}

static void compiler_free(struct compiler *c)
{
    free(c->known);
    free(c);
}

int sp_zone_compile(struct sp_zone *z, struct sp_table_builder *b, uint32_t slot,
                    struct sp_zone_compile_stats *stats)
{
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
