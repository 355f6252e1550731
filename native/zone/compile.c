/* Every key of a zone into a table builder, as compiler.py's _emit_zone makes them
 * (dns.h has the key kinds and the lookup order); see zone.h. Identical responses
 * are stored once. */
#include "stormpy/zone/zone.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stormpy/app/dns/dns.h"
#include "compiler.h"

enum { CLASS_IN = 1, TYPE_CNAME = 5, TYPE_DNAME = 39, TYPE_DS = 43, TYPE_RRSIG = 46, TYPE_NSEC = 47,
       TYPE_ANY = 255 };

/* flags: dns.h's SP_DNS_USER_WILDCARD or SP_DNS_USER_DNAME, or 0. */
static int add(struct compiler *c, enum sp_dns_kind kind, uint16_t type, uint32_t name,
               const struct result *r, uint32_t flags)
{
    int64_t index = sp_compiler_stored(c, r, flags);
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
           (a->list_len == b->list_len && memcmp(a->list, b->list, a->list_len) == 0);
}

static int too_big(struct compiler *c, uint32_t name, uint16_t type)
{
    snprintf(c->z->why, sizeof(c->z->why), "an answer (name %u, type %u) over 65535 bytes or "
             "with more than %d additional RRsets", name, type, SP_ZONE_ADDITIONAL_MAX);
    return SP_ZONE_DECLINED;
}

/* a into f: for the question name, or (name NONE) for any name below `below`, the
 * last `anchor` bytes of which every asker shares. An answer over 65535 bytes comes
 * out as SERVFAIL (sp_zone_encode), and c->servfail says so. */
static bool encode(struct compiler *c, const struct sp_zone_answer *a, struct form *f,
                   uint32_t name, uint32_t below, uint16_t anchor)
{
    struct sp_zone *z = c->z;
    f->variable = name == SP_ZONE_NONE;
    f->spliced = false;
    f->shifts.n = 0;
    f->shifts.anchor = anchor;
    uint32_t q = f->variable ? below : name;
    if (f->variable && a->synthesized)      /* uncompressed, as compiler.py's _uncompressed */
        f->len = sp_zone_encode(z, a, NULL, 0, f->wire, &f->drop, &c->soa, NULL);
    else
        f->len = sp_zone_encode(z, a, sp_zone_name_wire(z, q), z->names[q].len, f->wire,
                                &f->drop, &c->soa, f->variable ? &f->shifts : NULL);
    c->servfail |= (f->wire[3] & 0x0f) == SP_RCODE_SERVFAIL;
    return f->len != 0;
}

/* A key's answer that came out SERVFAIL: counted, the first named, for the warning
 * native.py logs (compiler.py's Encoder notes the same). */
static void note_servfail(struct compiler *c, uint32_t name, uint32_t below, uint16_t type)
{
    if (!c->servfail || c->stats->oversized++)
        return;
    c->stats->oversized_name = name == SP_ZONE_NONE ? below : name;
    c->stats->oversized_type = type;
    c->stats->oversized_below = name == SP_ZONE_NONE;
}

/* A form for each gap between below's children: the proof differs from gap to gap. */
static int gap_forms(struct compiler *c, struct result *r, uint32_t below, uint16_t type)
{
    struct sp_zone_gap gap;
    r->list_len = 0;
    for (uint32_t i = 0, n = sp_zone_gap_count(c->dnssec, below); i < n; i++) {
        if (!sp_zone_gap(c->dnssec, below, i, &gap))
            continue;
        struct sp_zone_point asked = {.wire = gap.sample, .id = SP_ZONE_NONE, .len = gap.sample_len};
        if (sp_zone_sign(c->dnssec, &c->answer, &asked, &c->signed_answer) != SP_ZONE_OK ||
            !encode(c, &c->signed_answer, &c->gap, SP_ZONE_NONE, below, c->z->names[below].len))
            return too_big(c, below, type);
        int64_t index = sp_compiler_response(c, &c->gap, sp_compiler_user_word(&c->gap, c->slot, 0));
        if (index < 0 || sp_compiler_put_gap(r, index, gap.bound) != SP_ZONE_OK)
            return SP_ZONE_NOMEM;
    }
    r->signed_kind = r->list_len ? SIGNED_GAPS : SIGNED_NONE;
    return SP_ZONE_OK;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* The zone's NSEC3 chain, stored once (c->chain). */
static int store_chain(struct compiler *c)
{
    if (c->chain >= 0)
        return SP_ZONE_OK;
    size_t len;
    uint8_t *blob;
    int rc = sp_zone_nsec3_chain(sp_zone_dnssec_nsec3(c->dnssec), &blob, &len);
    if (rc == SP_ZONE_DECLINED)
        snprintf(c->z->why, sizeof(c->z->why), "an NSEC3 record and its RRSIGs over 65535 bytes");
    if (rc != SP_ZONE_OK)
        return rc;
    c->chain = sp_table_add_response(c->b, blob, (uint32_t)len, NULL, 0, c->slot << 8);
    free(blob);
    if (c->chain < 0)
        return SP_ZONE_NOMEM;
    c->stats->responses++;
    return SP_ZONE_OK;
}

/* The DNSSEC form below `below` without the NSEC3 covering the asked name's next
 * closer name, and the descriptor dns.c completes it by (nsec3.c): the form's header,
 * the form, the chain, where the proof goes in, the ancestor's length, and the chain
 * records the form holds already. */
static int nsec3_forms(struct compiler *c, struct result *r, uint32_t below, uint16_t type,
                       uint16_t anchor)
{
    struct form *f = &r->dnssec;
    f->shifts.plain_additional = true;
    bool fits = encode(c, &c->signed_answer, f, SP_ZONE_NONE, below, anchor);
    f->shifts.plain_additional = false;
    if (!fits)
        return too_big(c, below, type);
    if ((f->wire[3] & 0x0f) == SP_RCODE_SERVFAIL) {     /* no proof to splice in */
        r->signed_kind = SIGNED_FORM;
        return SP_ZONE_OK;
    }
    int rc = store_chain(c);
    if (rc != SP_ZONE_OK)
        return rc;
    int64_t form = sp_compiler_response(c, f, sp_compiler_user_word(f, c->slot, 0));
    if (form < 0 || sp_compiler_list_room(r, 12 + 14 + 4 * SP_ZONE_AUTHORITY_MAX) != SP_ZONE_OK)
        return SP_ZONE_NOMEM;
    uint8_t *d = r->list;
    memcpy(d, f->wire, 12);
    put32(d + 12, (uint32_t)form);
    put32(d + 16, (uint32_t)c->chain);
    put32(d + 20, f->shifts.additional_at);
    d[24] = (uint8_t)c->z->names[below].len;
    d[25] = 0;
    const struct sp_zone_nsec3 *n = sp_zone_dnssec_nsec3(c->dnssec);
    for (uint16_t i = 0; i < c->signed_answer.nns; i++) {
        uint32_t at = sp_zone_nsec3_index(n, c->signed_answer.ns[i].rrset);
        if (at != SP_ZONE_NONE)
            put32(d + 26 + 4 * d[25]++, at);
    }
    r->list_len = 26u + 4u * d[25];
    r->signed_kind = SIGNED_NSEC3;
    return SP_ZONE_OK;
}

/* r from c->answer (resolved for name, or below `below` when name is NONE). */
static int signed_forms(struct compiler *c, struct result *r, uint32_t name, uint32_t below,
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
    if (rc == SP_ZONE_SPLICED)
        return nsec3_forms(c, r, below, type, anchor);
    if (rc != SP_ZONE_OK || !encode(c, &c->signed_answer, &r->dnssec, name, below, anchor))
        return too_big(c, below, type);
    r->signed_kind = SIGNED_FORM;
    return SP_ZONE_OK;
}

static int forms(struct compiler *c, struct result *r, uint32_t name, uint32_t below,
                 uint16_t type, uint16_t anchor)
{
    c->servfail = false;
    int rc = signed_forms(c, r, name, below, type, anchor);
    note_servfail(c, name, below, type);
    return rc;
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
    if (z->signed_zone || cname)     /* an alias answers RRSIG itself, no chain (resolve.c) */
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
            rc = add(c, below ? SP_DNS_BELOW : SP_DNS_EXACT, types[i], name, &c->typed, 0);
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
        rc = add(c, SP_DNS_OTHER, 0, name, &c->typed, 0);
    if (rc == SP_ZONE_OK && sample) {
        rc = forms(c, &c->typed, SP_ZONE_NONE, name, 0, z->names[name].len);
        if (rc == SP_ZONE_OK)
            rc = add(c, SP_DNS_BELOW_OTHER, 0, name, &c->typed, 0);
    }
    if (rc == SP_ZONE_OK && name == cut) {
        rc = answer(c, name, name, TYPE_DS, &c->typed);
        if (rc == SP_ZONE_OK)
            rc = add(c, SP_DNS_EXACT, TYPE_DS, name, &c->typed, 0);
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
        return rc == SP_ZONE_OK ? add(c, SP_DNS_BELOW_OTHER, 0, name, &c->typed, 0) : rc;
    }
    if (*shared < 0) {
        if (sp_zone_resolve(z, SP_ZONE_NONE, name, 0, &c->answer) < 0)
            return too_big(c, name, 0);
        int rc = forms(c, &c->typed, SP_ZONE_NONE, name, 0, z->names[z->origin].len);
        if (rc != SP_ZONE_OK)
            return rc;
        *shared = sp_compiler_stored(c, &c->typed, 0);
        if (*shared < 0)
            return SP_ZONE_NOMEM;
    }
    if (sp_table_add_key(c->b, sp_dns_tag(SP_DNS_BELOW_OTHER, CLASS_IN, 0),
                         sp_zone_name_wire(z, name), z->names[name].len, (uint32_t)*shared) < 0)
        return SP_ZONE_NOMEM;
    c->stats->keys++;
    return SP_ZONE_OK;
}

/* Below a DNAME's owner: the DNAME and the CNAME dns.c completes for the name asked. */
static int emit_dname(struct compiler *c, uint32_t name)
{
    int rc = answer(c, SP_ZONE_NONE, name, 0, &c->other);
    c->other.plain.spliced = c->other.dnssec.spliced = true;
    return rc == SP_ZONE_OK ? add(c, SP_DNS_BELOW_OTHER, 0, name, &c->other, SP_DNS_USER_DNAME)
                            : rc;
}

static int emit_name(struct compiler *c, uint32_t name, int64_t *nxdomain)
{
    struct sp_zone *z = c->z;
    if (z->dnames && name != z->origin &&
        sp_zone_dname_above(z, z->names[name].parent) != SP_ZONE_NONE)
        return SP_ZONE_OK;                   /* occluded: the DNAME rewrites it */
    uint32_t cut = z->names[name].cut_top;
    bool sample = room_below(z, name);
    if (cut != SP_ZONE_NONE)
        return emit_below_cut(c, name, cut, sample);
    int rc = answer(c, name, name, 0, &c->other);
    if (rc == SP_ZONE_OK)
        rc = add(c, SP_DNS_OTHER, 0, name, &c->other, 0);
    if (rc == SP_ZONE_OK && z->names[name].nrrsets)
        rc = typed_keys(c, name, name, false);
    if (rc != SP_ZONE_OK || !sample)
        return rc;
    if (z->dnames && sp_zone_find_rrset(z, name, TYPE_DNAME) != SP_ZONE_NONE)
        return emit_dname(c, name);
    uint32_t node = z->names[name].wildcard;
    if (node == SP_ZONE_NONE)
        return emit_nxdomain(c, name, nxdomain);
    rc = answer(c, SP_ZONE_NONE, name, 0, &c->other);
    bool held = z->names[node].nrrsets != 0;   /* else NODATA to every type: no BELOW keys */
    if (rc == SP_ZONE_OK)
        rc = add(c, SP_DNS_BELOW_OTHER, 0, name, &c->other, held ? SP_DNS_USER_WILDCARD : 0);
    return rc == SP_ZONE_OK && held ? typed_keys(c, name, node, true) : rc;
}

static void compiler_free(struct compiler *c)
{
    sp_zone_dnssec_free(c->dnssec);
    free(c->other.list);
    free(c->typed.list);
    free(c->known);
    free(c);
}

static int compiler_new(struct sp_zone *z, struct sp_table_builder *b, uint32_t slot,
                        struct sp_zone_compile_stats *stats, struct compiler **out)
{
    struct compiler *c = *out = calloc(1, sizeof(*c));
    if (c == NULL)
        return SP_ZONE_NOMEM;
    c->z = z, c->b = b, c->slot = slot, c->stats = stats;
    c->chain = -1;
    memset(stats, 0, sizeof(*stats));
    int rc = z->signed_zone ? sp_zone_dnssec_new(z, &c->dnssec) : SP_ZONE_OK;
    if (rc == SP_ZONE_OK)
        rc = sp_compiler_grow_known(c);
    if (rc != SP_ZONE_OK) {
        compiler_free(c);
        *out = NULL;
    }
    return rc;
}

int sp_zone_compile(struct sp_zone *z, struct sp_table_builder *b, uint32_t slot,
                    struct sp_zone_compile_stats *stats)
{
    struct compiler *c;
    int rc = compiler_new(z, b, slot, stats, &c);
    if (rc != SP_ZONE_OK)
        return rc;
    z->nsoa_places = 0;
    int64_t nxdomain = -1;
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
        /* an alias's own (key_types()), in a zone without RRSIGs or NSECs too */
        sp_table_remove_key(b, sp_dns_tag(typed[k], CLASS_IN, TYPE_RRSIG), key, len);
        sp_table_remove_key(b, sp_dns_tag(typed[k], CLASS_IN, TYPE_NSEC), key, len);
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
    if (z->dnames)
        return recompile_declined(z, "a zone with DNAME records (they occlude what is below)");
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
    struct compiler *c = NULL;
    if (rc == SP_ZONE_OK)
        rc = compiler_new(z, b, slot, stats, &c);
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
