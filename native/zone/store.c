/* A zone's names, records and RRsets; see zone.h. */
#include "stormpy/zone/zone.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    TYPE_NS = 2, TYPE_SOA = 6, TYPE_CNAME = 5, TYPE_SIG = 24, TYPE_NXT = 30, TYPE_DNAME = 39,
    TYPE_DS = 43, TYPE_RRSIG = 46, TYPE_NSEC = 47, TYPE_DNSKEY = 48, TYPE_NSEC3 = 50,
    TYPE_NSEC3PARAM = 51, TYPE_CDS = 59, TYPE_CDNSKEY = 60,
};

struct sp_zone *sp_zone_new(void)
{
    struct sp_zone *z = calloc(1, sizeof(*z));
    if (z == NULL)
        return NULL;
    z->slots_mask = (1u << 12) - 1;
    z->slots = calloc(z->slots_mask + 1, sizeof(*z->slots));
    if (z->slots == NULL) {
        free(z);
        return NULL;
    }
    z->origin = z->soa = SP_ZONE_NONE;
    return z;
}

void sp_zone_free(struct sp_zone *z)
{
    if (z == NULL)
        return;
    free(z->arena);
    free(z->names);
    free(z->slots);
    free(z->rdata_arena);
    free(z->records);
    free(z->rrsets);
    free(z->rdatas);
    free(z->types);
    free(z->changed);
    free(z->old_types);
    free(z->soa_places);
    free(z);
}

static void *copy_of(const void *p, size_t bytes)
{
    void *q = malloc(bytes ? bytes : 1);
    if (q != NULL && bytes)
        memcpy(q, p, bytes);
    return q;
}

struct sp_zone *sp_zone_copy(const struct sp_zone *z)
{
    struct sp_zone *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    *c = *z;
    c->records = NULL;
    c->nrecords = c->records_cap = 0;
    c->changed = NULL;
    c->nchanged = c->changed_cap = 0;
    c->pending = false;
    c->old_types = NULL;
    c->soa_places = NULL;
    c->nsoa_places = c->soa_places_cap = 0;
    c->arena = copy_of(z->arena, z->arena_len);
    c->arena_cap = z->arena_len;
    c->names = copy_of(z->names, z->nnames * sizeof(*z->names));
    c->names_cap = z->nnames;
    c->slots = copy_of(z->slots, ((size_t)z->slots_mask + 1) * sizeof(*z->slots));
    c->rdata_arena = copy_of(z->rdata_arena, z->rdata_len);
    c->rdata_cap = z->rdata_len;
    c->rrsets = copy_of(z->rrsets, z->nrrsets * sizeof(*z->rrsets));
    c->rdatas = copy_of(z->rdatas, z->nrdatas * sizeof(*z->rdatas));
    c->types = copy_of(z->types, z->ntypes * sizeof(*z->types));
    if (!c->arena || !c->names || !c->slots || !c->rdata_arena || !c->rrsets || !c->rdatas ||
        !c->types) {
        sp_zone_free(c);
        return NULL;
    }
    return c;
}

static bool grow(void **p, size_t *cap, size_t need, size_t item)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 1024;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * item);
    if (q == NULL)
        return false;
    *p = q;
    *cap = n;
    return true;
}

static inline uint8_t lower(uint8_t c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static inline uint64_t name_hash(const uint8_t *wire, size_t len)
{
    return sp_zone_hash(wire, len, 0);
}

size_t sp_zone_wire_len(const uint8_t *name, size_t cap)
{
    size_t i = 0;
    while (i < cap && i < SP_ZONE_NAME_MAX) {
        uint8_t l = name[i];
        if (l == 0)
            return i + 1;
        if (l > 63)
            return 0;
        i += 1 + l;
    }
    return 0;
}

bool sp_zone_is_subdomain(const uint8_t *name, size_t len, const uint8_t *parent, size_t plen)
{
    for (size_t i = 0; i < len; i += 1 + name[i]) {
        if (len - i == plen && memcmp(name + i, parent, plen) == 0)
            return true;
        if (name[i] == 0)
            break;
    }
    return false;
}

uint32_t sp_zone_find(const struct sp_zone *z, const uint8_t *wire, size_t len)
{
    for (uint32_t s = (uint32_t)name_hash(wire, len) & z->slots_mask;; s = (s + 1) & z->slots_mask) {
        uint32_t id = z->slots[s];
        if (id == 0)
            return SP_ZONE_NONE;
        const struct sp_zone_name *n = &z->names[id - 1];
        if (n->len == len && memcmp(z->arena + n->off, wire, len) == 0)
            return id - 1;
    }
}

uint32_t sp_zone_lookup(const struct sp_zone *z, const uint8_t *wire, size_t len)
{
    uint32_t id = sp_zone_find(z, wire, len);
    return id != SP_ZONE_NONE && z->names[id].dead ? SP_ZONE_NONE : id;
}

static bool rehash(struct sp_zone *z)
{
    uint32_t mask = z->slots_mask * 2 + 1;
    uint32_t *slots = calloc((size_t)mask + 1, sizeof(*slots));
    if (slots == NULL)
        return false;
    for (uint32_t id = 0; id < z->nnames; id++) {
        const struct sp_zone_name *n = &z->names[id];
        uint32_t s = (uint32_t)name_hash(z->arena + n->off, n->len) & mask;
        while (slots[s])
            s = (s + 1) & mask;
        slots[s] = id + 1;
    }
    free(z->slots);
    z->slots = slots;
    z->slots_mask = mask;
    return true;
}

uint32_t sp_zone_intern(struct sp_zone *z, const uint8_t *wire, size_t len)
{
    uint8_t low[SP_ZONE_NAME_MAX];
    if (len == 0 || len > SP_ZONE_NAME_MAX)
        return SP_ZONE_NONE;
    for (size_t i = 0; i < len; i++)
        low[i] = lower(wire[i]);
    uint32_t id = sp_zone_find(z, low, len);
    if (id != SP_ZONE_NONE)
        return id;
    if ((uint64_t)(z->nnames + 1) * 2 > z->slots_mask && !rehash(z))
        return SP_ZONE_NONE;
    size_t cap = z->names_cap;
    if (!grow((void **)&z->names, &cap, z->nnames + 1, sizeof(*z->names))
        || !grow((void **)&z->arena, &z->arena_cap, z->arena_len + len, 1))
        return SP_ZONE_NONE;
    z->names_cap = (uint32_t)cap;
    id = z->nnames++;
    z->names[id] = (struct sp_zone_name){.off = (uint32_t)z->arena_len, .len = (uint8_t)len,
                                         .parent = SP_ZONE_NONE, .cut_top = SP_ZONE_NONE,
                                         .wildcard = SP_ZONE_NONE};
    memcpy(z->arena + z->arena_len, low, len);
    z->arena_len += len;
    uint32_t s = (uint32_t)name_hash(low, len) & z->slots_mask;
    while (z->slots[s])
        s = (s + 1) & z->slots_mask;
    z->slots[s] = id + 1;
    return id;
}

int sp_zone_add_record(struct sp_zone *z, const uint8_t *owner, size_t owner_len, uint16_t type,
                       uint32_t ttl, const uint8_t *rdata, size_t rdlen)
{
    uint32_t name = sp_zone_intern(z, owner, owner_len);
    size_t cap = z->records_cap;
    if (name == SP_ZONE_NONE || rdlen > UINT16_MAX
        || !grow((void **)&z->records, &cap, z->nrecords + 1, sizeof(*z->records))
        || !grow((void **)&z->rdata_arena, &z->rdata_cap, z->rdata_len + rdlen, 1))
        return SP_ZONE_NOMEM;
    z->records_cap = (uint32_t)cap;
    z->records[z->nrecords++] = (struct sp_zone_record){
        .name = name, .ttl = ttl, .rdata = (uint32_t)z->rdata_len, .type = type,
        .rdlen = (uint16_t)rdlen};
    if (rdlen)
        memcpy(z->rdata_arena + z->rdata_len, rdata, rdlen);
    z->rdata_len += rdlen;
    return SP_ZONE_OK;
}

static const struct sp_zone *sorting;

/* Records by name, type, then rdata as RFC 4034 section 6.3 orders it. */
static int record_order(const void *pa, const void *pb)
{
    const struct sp_zone_record *a = pa, *b = pb;
    if (a->name != b->name)
        return a->name < b->name ? -1 : 1;
    if (a->type != b->type)
        return a->type < b->type ? -1 : 1;
    size_t n = a->rdlen < b->rdlen ? a->rdlen : b->rdlen;
    int c = memcmp(sorting->rdata_arena + a->rdata, sorting->rdata_arena + b->rdata, n);
    return c ? c : (int)a->rdlen - (int)b->rdlen;
}

static int decline(struct sp_zone *z, const char *why, uint32_t name)
{
    char text[SP_ZONE_NAME_MAX * 4 + 2] = "";
    if (name != SP_ZONE_NONE) {      /* a name as dotted text for the log */
        const uint8_t *w = sp_zone_name_wire(z, name);
        size_t o = 0;
        for (size_t i = 0; w[i] && o + 5 < sizeof(text); i += 1 + w[i]) {
            for (size_t k = 1; k <= w[i] && o + 5 < sizeof(text); k++)
                text[o++] = (w[i + k] > 32 && w[i + k] < 127) ? (char)w[i + k] : '?';
            text[o++] = '.';
        }
        text[o] = 0;
    }
    snprintf(z->why, sizeof(z->why), "%s%s%s", why, *text ? " at " : "", text);
    return SP_ZONE_DECLINED;
}

bool sp_zone_type_in_c(uint16_t type)
{
    return type != TYPE_SIG && type != TYPE_NXT;
}

bool sp_zone_type_patchable(uint16_t type)
{
    switch (type) {
    case TYPE_RRSIG: case TYPE_NSEC: case TYPE_DNSKEY: case TYPE_NSEC3: case TYPE_NSEC3PARAM:
    case TYPE_CDS: case TYPE_CDNSKEY: case TYPE_DNAME:     /* proofs, occlusion: whole */
        return false;
    default:
        return sp_zone_type_in_c(type);
    }
}

/* Two records of one RRset: RRSIGs are grouped by the type they cover, as dnspython
 * keeps them (their rdata starts with it, so the sort brings each group together). */
static bool same_rrset(const struct sp_zone *z, const struct sp_zone_rrset *set,
                       const struct sp_zone_record *r)
{
    if (set == NULL || set->name != r->name || set->type != r->type)
        return false;
    if (r->type != TYPE_RRSIG)
        return true;
    const struct sp_zone_rdata *d = &z->rdatas[set->first];
    return d->len >= 2 && r->rdlen >= 2 &&
           memcmp(z->rdata_arena + d->off, z->rdata_arena + r->rdata, 2) == 0;
}

/* Records into RRsets: duplicates dropped, the lowest TTL kept (as dnspython does). */
static int group(struct sp_zone *z)
{
    sorting = z;
    qsort(z->records, z->nrecords, sizeof(*z->records), record_order);
    z->rrsets = malloc((z->nrecords + 1) * sizeof(*z->rrsets));
    z->rdatas = malloc((z->nrecords + 1) * sizeof(*z->rdatas));
    if (z->rrsets == NULL || z->rdatas == NULL)
        return SP_ZONE_NOMEM;
    uint8_t seen[65536 / 8 + 1] = {0};
    for (uint32_t i = 0; i < z->nrecords; i++) {
        const struct sp_zone_record *r = &z->records[i];
        if (!sp_zone_type_in_c(r->type))
            return decline(z, "a SIG or NXT record", r->name);
        if (!sp_zone_is_subdomain(sp_zone_name_wire(z, r->name), z->names[r->name].len,
                                  sp_zone_name_wire(z, z->origin), z->names[z->origin].len)) {
            z->first_outside = z->outside++ ? z->first_outside : r->name;
            continue;
        }
        struct sp_zone_rrset *last = z->nrrsets ? &z->rrsets[z->nrrsets - 1] : NULL;
        if (same_rrset(z, last, r)) {
            if (r->ttl != last->ttl && r->type != TYPE_RRSIG && z->ttl_mismatch++ == 0)
                z->first_ttl_mismatch = r->name;
            const struct sp_zone_rdata *prev = &z->rdatas[z->nrdatas - 1];
            if (prev->len == r->rdlen && !memcmp(z->rdata_arena + prev->off,
                                                 z->rdata_arena + r->rdata, r->rdlen)) {
                if (r->ttl < last->ttl)
                    last->ttl = r->ttl;
                continue;
            }
            if (r->type == TYPE_CNAME || r->type == TYPE_SOA || r->type == TYPE_DNAME)
                return decline(z, "a CNAME, DNAME or SOA with more than one record", r->name);
            if (last->count == UINT16_MAX)
                return decline(z, "an RRset of 65535 records or more", r->name);
            last->count++;
            if (r->ttl < last->ttl)
                last->ttl = r->ttl;
        } else {
            struct sp_zone_name *n = &z->names[r->name];
            if (n->nrrsets == 0)
                n->first_rrset = z->nrrsets;
            n->nrrsets++;
            z->rrsets[z->nrrsets++] = (struct sp_zone_rrset){
                .name = r->name, .ttl = r->ttl, .first = z->nrdatas, .type = r->type, .count = 1};
            bool aside = r->type == TYPE_RRSIG || r->type == TYPE_NSEC3;   /* no answers' types */
            if (!aside && !(seen[r->type / 8] & (1u << (r->type % 8)))) {
                seen[r->type / 8] |= (uint8_t)(1u << (r->type % 8));
                z->ntypes++;
            }
        }
        z->rdatas[z->nrdatas++] = (struct sp_zone_rdata){.off = r->rdata, .len = r->rdlen};
    }
    free(z->records);
    z->records = NULL;
    z->records_cap = z->nrecords = 0;
    z->types = malloc((z->ntypes + 1) * sizeof(*z->types));
    if (z->types == NULL)
        return SP_ZONE_NOMEM;
    z->ntypes = 0;
    for (uint32_t t = 0; t < 65536; t++)
        if (seen[t / 8] & (1u << (t % 8)))
            z->types[z->ntypes++] = (uint16_t)t;
    return SP_ZONE_OK;
}

uint32_t sp_zone_find_sigs(const struct sp_zone *z, uint32_t name, uint16_t covered)
{
    const struct sp_zone_name *n = &z->names[name];
    for (uint32_t i = n->first_rrset; i < n->first_rrset + n->nrrsets; i++)
        if (z->rrsets[i].type == TYPE_RRSIG && sp_zone_covered(z, i) == covered)
            return i;
    return SP_ZONE_NONE;
}

uint32_t sp_zone_find_rrset(const struct sp_zone *z, uint32_t name, uint16_t type)
{
    const struct sp_zone_name *n = &z->names[name];
    for (uint32_t i = 0; i < n->nrrsets; i++)
        if (z->rrsets[n->first_rrset + i].type == type)
            return n->first_rrset + i;
    return SP_ZONE_NONE;
}

/* Each owner's parents up to the origin, added as empty non-terminals where they hold
 * nothing; a name that is neither (a patch took its records) is dead. */
static int link_parents(struct sp_zone *z)
{
    uint32_t origin_len = z->names[z->origin].len;
    z->ndead = 0;
    for (uint32_t id = 0; id < z->nnames; id++)
        z->names[id].dead = (z->names[id].nrrsets == 0 || z->names[id].hidden) && id != z->origin;
    for (uint32_t id = 0; id < z->nnames; id++) {   /* nnames grows as parents are added */
        if (z->names[id].nrrsets == 0 || z->names[id].hidden)
            continue;                                 /* reached from its descendants */
        for (uint32_t n = id; n != z->origin && z->names[n].parent == SP_ZONE_NONE;) {
            uint8_t len = z->names[n].len;
            if (len <= origin_len)
                break;        /* outside the origin: group() has declined already */
            const uint8_t *w = sp_zone_name_wire(z, n);
            uint8_t parent[SP_ZONE_NAME_MAX];
            size_t plen = len - 1u - w[0];
            memcpy(parent, w + 1 + w[0], plen);
            if (w[0] && w[1] == 0)
                z->nul_labels = true;
            bool wildcard = w[0] == 1 && w[1] == '*';     /* held, or an empty non-terminal */
            uint32_t p = sp_zone_intern(z, parent, plen);
            if (p == SP_ZONE_NONE)
                return SP_ZONE_NOMEM;
            z->names[n].parent = p;
            z->names[p].dead = 0;
            if (wildcard)
                z->names[p].wildcard = n;
            n = p;
        }
    }
    for (uint32_t id = 0; id < z->nnames; id++)
        z->ndead += z->names[id].dead;
    return SP_ZONE_OK;
}

/* The zone as the last compile saw it, kept by the first patch after it. */
static int remember_before(struct sp_zone *z)
{
    if (z->pending)
        return SP_ZONE_OK;
    free(z->old_types);
    z->old_types = malloc((z->ntypes + 1) * sizeof(*z->old_types));
    if (z->old_types == NULL)
        return SP_ZONE_NOMEM;
    memcpy(z->old_types, z->types, z->ntypes * sizeof(*z->types));
    z->old_ntypes = z->ntypes;
    z->old_nul_labels = z->nul_labels;
    z->old_soa_ttl = z->rrsets[z->soa].ttl;
    z->old_negative_ttl = z->negative_ttl;
    const struct sp_zone_rdata *soa = &z->rdatas[z->rrsets[z->soa].first];
    z->old_soa_names_len = soa->len - 20u;      /* finish checked the SOA's shape */
    memcpy(z->old_soa_names, z->rdata_arena + soa->off, z->old_soa_names_len);
    z->nchanged = 0;
    z->pending = true;
    return SP_ZONE_OK;
}

int sp_zone_reopen(struct sp_zone *z, const uint8_t *const *names, const size_t *lens,
                   size_t count)
{
    uint32_t old_nnames = z->nnames;
    uint8_t *drop = calloc(z->nnames + 1, 1);
    struct sp_zone_record *records = malloc((z->nrdatas + 1) * sizeof(*records));
    if (drop == NULL || records == NULL) {
        free(drop);
        free(records);
        return SP_ZONE_NOMEM;
    }
    if (remember_before(z) != SP_ZONE_OK) {
        free(drop);
        free(records);
        return SP_ZONE_NOMEM;
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t id = sp_zone_intern(z, names[i], lens[i]);   /* a new name: dead till it has records */
        size_t cap = z->changed_cap;
        if (id == SP_ZONE_NONE
            || !grow((void **)&z->changed, &cap, z->nchanged + 1, sizeof(*z->changed))) {
            free(drop);
            free(records);
            return SP_ZONE_NOMEM;
        }
        z->changed_cap = (uint32_t)cap;
        bool held = id < old_nnames && z->names[id].nrrsets;
        z->changed[z->nchanged++] = (struct sp_zone_changed){
            .name = id, .old_ns = held ? sp_zone_ns_hash(z, id) : 0,
            .was_cut = held && z->names[id].is_cut};
        if (id < old_nnames)
            drop[id] = 1;
    }
    uint32_t kept = 0;
    for (uint32_t i = 0; i < z->nrrsets; i++) {
        const struct sp_zone_rrset *s = &z->rrsets[i];
        for (uint32_t k = 0; !drop[s->name] && k < s->count; k++) {
            const struct sp_zone_rdata *d = &z->rdatas[s->first + k];
            records[kept++] = (struct sp_zone_record){.name = s->name, .ttl = s->ttl,
                .rdata = d->off, .type = s->type, .rdlen = d->len};
        }
    }
    free(drop);
    free(z->records);
    free(z->rrsets);
    free(z->rdatas);
    free(z->types);
    z->rrsets = NULL;
    z->rdatas = NULL;
    z->types = NULL;
    z->nrrsets = z->nrdatas = z->ntypes = 0;
    z->records = records;
    z->nrecords = kept;
    z->records_cap = z->nrecords + 1;     /* the arena keeps the dropped rdata: small */
    for (uint32_t id = 0; id < z->nnames; id++) {
        struct sp_zone_name *n = &z->names[id];
        n->first_rrset = n->nrrsets = 0;
        n->parent = n->cut_top = n->wildcard = SP_ZONE_NONE;
        n->is_cut = n->dead = n->hidden = 0;
    }
    z->soa = SP_ZONE_NONE;
    z->nul_labels = false;
    return SP_ZONE_OK;
}

/* Whether a CNAME has nothing beside it but its RRSIGs and NSEC (RFC 4035 2.5). */
static bool alone_but_dnssec(const struct sp_zone *z, uint32_t name)
{
    const struct sp_zone_name *n = &z->names[name];
    uint32_t others = 0;
    for (uint32_t i = n->first_rrset; i < n->first_rrset + n->nrrsets; i++)
        others += z->rrsets[i].type != TYPE_RRSIG && z->rrsets[i].type != TYPE_NSEC;
    return others == 1;
}

/* NSEC3 records' hashed owners are no names of the zone (dnssec.py keeps them apart):
 * a query for one is NXDOMAIN. RRSIGs without an RRset beside them, or an NSEC3 beside
 * other data, are left to the Python compiler. */
static int hide_nsec3_owners(struct sp_zone *z)
{
    bool chain = false;
    for (uint32_t id = 0; id < z->nnames; id++) {
        struct sp_zone_name *n = &z->names[id];
        uint32_t sigs = 0, nsec3 = 0;
        for (uint32_t i = n->first_rrset; i < n->first_rrset + n->nrrsets; i++) {
            sigs += z->rrsets[i].type == TYPE_RRSIG;
            nsec3 += z->rrsets[i].type == TYPE_NSEC3;
        }
        if (n->nrrsets && sigs + nsec3 == n->nrrsets && !nsec3)
            return decline(z, "RRSIGs without the RRset they cover", id);
        if (nsec3 && sigs + nsec3 != n->nrrsets)
            return decline(z, "an NSEC3 record beside other data", id);
        n->hidden = nsec3 != 0;
        chain |= nsec3 != 0;
    }
    z->nsec3 = chain && sp_zone_find_rrset(z, z->origin, TYPE_NSEC3PARAM) != SP_ZONE_NONE;
    return SP_ZONE_OK;
}

/* The topmost cut at or above each name: its parent's, else itself if a cut. */
static int find_cuts(struct sp_zone *z)
{
    for (uint32_t id = 0; id < z->nnames; id++)
        z->names[id].is_cut = id != z->origin && sp_zone_find_rrset(z, id, TYPE_NS) != SP_ZONE_NONE;
    uint32_t *path = malloc(SP_ZONE_NAME_MAX * sizeof(*path));
    uint8_t *done = calloc(z->nnames, 1);
    if (path == NULL || done == NULL) {
        free(path);
        free(done);
        return SP_ZONE_NOMEM;
    }
    for (uint32_t id = 0; id < z->nnames; id++) {
        uint32_t depth = 0, n = id;
        while (n != SP_ZONE_NONE && !done[n]) {      /* up to a name already settled */
            path[depth++] = n;
            n = z->names[n].parent;
        }
        uint32_t top = n == SP_ZONE_NONE ? SP_ZONE_NONE : z->names[n].cut_top;
        while (depth--) {                             /* then down, the topmost cut kept */
            n = path[depth];
            if (top == SP_ZONE_NONE && z->names[n].is_cut)
                top = n;
            z->names[n].cut_top = top;
            done[n] = 1;
        }
    }
    free(path);
    free(done);
    return SP_ZONE_OK;
}

int sp_zone_finish(struct sp_zone *z, const uint8_t *origin, size_t origin_len)
{
    z->origin = sp_zone_intern(z, origin, origin_len);
    if (z->origin == SP_ZONE_NONE)
        return SP_ZONE_NOMEM;
    int rc = group(z);
    if (rc != SP_ZONE_OK)
        return rc;
    z->dnames = false;
    for (uint32_t i = 0; i < z->nrrsets; i++) {
        const struct sp_zone_rrset *s = &z->rrsets[i];
        if (s->type == TYPE_SOA && s->name != z->origin)
            return decline(z, "an SOA record below the origin", s->name);
        if (s->type == TYPE_CNAME && !alone_but_dnssec(z, s->name))
            return decline(z, "a CNAME and other records", s->name);
        z->dnames |= s->type == TYPE_DNAME;
    }
    rc = hide_nsec3_owners(z);
    if (rc != SP_ZONE_OK)
        return rc;
    z->soa = sp_zone_find_rrset(z, z->origin, TYPE_SOA);
    if (z->soa == SP_ZONE_NONE || sp_zone_find_rrset(z, z->origin, TYPE_NS) == SP_ZONE_NONE)
        return decline(z, "no SOA or no NS at the origin", SP_ZONE_NONE);
    const struct sp_zone_rdata *soa = &z->rdatas[z->rrsets[z->soa].first];
    const uint8_t *d = z->rdata_arena + soa->off;
    size_t mname = sp_zone_wire_len(d, soa->len);
    size_t rname = mname ? sp_zone_wire_len(d + mname, soa->len - mname) : 0;
    if (!rname || mname + rname + 20 != soa->len)
        return decline(z, "a malformed SOA", z->origin);
    const uint8_t *f = d + mname + rname;
    z->serial = (uint32_t)f[0] << 24 | (uint32_t)f[1] << 16 | (uint32_t)f[2] << 8 | f[3];
    uint32_t minimum = (uint32_t)f[16] << 24 | (uint32_t)f[17] << 16 | (uint32_t)f[18] << 8 | f[19];
    z->negative_ttl = z->rrsets[z->soa].ttl < minimum ? z->rrsets[z->soa].ttl : minimum;
    rc = link_parents(z);
    if (rc != SP_ZONE_OK)
        return rc;
    for (uint32_t id = 0; id < z->nnames; id++)
        if (z->names[id].hidden && !z->names[id].dead)
            return decline(z, "names below an NSEC3 record's owner", id);
    z->signed_zone = sp_zone_find_rrset(z, z->origin, TYPE_DNSKEY) != SP_ZONE_NONE &&
                     sp_zone_find_rrset(z, z->origin, TYPE_RRSIG) != SP_ZONE_NONE;
    return find_cuts(z);
}
