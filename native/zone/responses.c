/* Each response of a zone stored once: a response already added is known by two
 * hashes of its bytes, and a key's group (its form and DNSSEC form or list) by their
 * mix; see compiler.h. */
#include "compiler.h"

#include <stdlib.h>
#include <string.h>

#include "stormpy/app/dns/dns.h"

/* The question spliced in at 12, the ID copied, RD and CD copied (compiler.py's
 * DNS_PATCHES). */
static const struct sp_patch dns_patches[4] = {
    {.op = SP_PATCH_INSERT, .field = SP_DNS_FIELD_QUESTION, .dst = 12},
    {.op = SP_PATCH_COPY, .field = SP_DNS_FIELD_MESSAGE, .dst = 0, .src = 0, .len = 2},
    {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 2, .src = 2, .mask = 0x01},
    {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 3, .src = 3, .mask = 0x10},
};

const struct sp_patch sp_compiler_spliced_patches[3] = {
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

/* question: the length a variable response was compressed for (0: fixed); the same
 * bytes compressed for another length point elsewhere. */
static void hash2(const uint8_t *p, size_t n, uint32_t user, uint16_t question, uint64_t *h1,
                  uint32_t *h2)
{
    uint64_t seed = (uint64_t)user | (uint64_t)question << 32;
    *h1 = sp_zone_hash(p, n, 0x243f6a8885a308d3ULL ^ seed);
    *h2 = (uint32_t)(sp_zone_hash(p, n, 0x13198a2e03707344ULL + seed) >> 16);
}

int sp_compiler_grow_known(struct compiler *c)
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
    uint16_t n = f->spliced ? 3 : 4;        /* a spliced one without the question's INSERT */
    memcpy(c->patches, f->spliced ? sp_compiler_spliced_patches : dns_patches,
           n * sizeof(struct sp_patch));
    for (uint16_t i = 0; f->variable && i < f->shifts.n; i++)
        c->patches[n++] = (struct sp_patch){.op = SP_PATCH_SHIFT, .field = SP_DNS_FIELD_QUESTION,
                                            .dst = f->shifts.at[i], .len = f->shifts.question};
    return n;
}

static uint16_t question_of(const struct form *f)
{
    return f->variable && f->shifts.n ? f->shifts.question : 0;
}

uint32_t sp_compiler_user_word(const struct form *f, uint32_t slot, uint32_t flags)
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

int64_t sp_compiler_response(struct compiler *c, const struct form *f, uint32_t user)
{
    if ((c->nknown + 1) * 2 > c->mask && sp_compiler_grow_known(c) != SP_ZONE_OK)
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
int64_t sp_compiler_stored(struct compiler *c, const struct result *r, uint32_t flags)
{
    if ((c->nknown + 1) * 2 > c->mask && sp_compiler_grow_known(c) != SP_ZONE_OK)
        return -1;
    uint32_t user = sp_compiler_user_word(&r->plain, c->slot, flags | (r->signed_kind ? SP_DNS_USER_SIGNED : 0));
    uint32_t dnssec_user = r->signed_kind == SIGNED_FORM ? sp_compiler_user_word(&r->dnssec, c->slot, flags)
                           : r->signed_kind == SIGNED_NSEC3 ? SP_DNS_USER_NSEC3 | c->slot << 8
                                                            : SP_DNS_USER_GAPS | c->slot << 8;
    uint64_t h1, a1, s = 0;
    uint32_t h2, a2;
    hash2(r->plain.wire, r->plain.len, user, question_of(&r->plain), &h1, &h2);
    if (r->signed_kind == SIGNED_FORM)
        hash2(r->dnssec.wire, r->dnssec.len, dnssec_user, question_of(&r->dnssec), &a1, &a2);
    else if (r->signed_kind)
        hash2(r->list, r->list_len, dnssec_user, 0, &a1, &a2);
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
        next = sp_table_add_response(c->b, r->list, (uint32_t)r->list_len, NULL, 0, dnssec_user);
    else if (index >= 0 && r->signed_kind == SIGNED_NSEC3)
        next = sp_table_add_response(c->b, r->list, (uint32_t)r->list_len,
                                     sp_compiler_spliced_patches, 3, dnssec_user);
    return next < 0 || remember(c, s, h1, h2, index) < 0 ? -1 : index;
}

int sp_compiler_list_room(struct result *r, size_t n)
{
    if (r->list_len + n <= r->list_cap)
        return SP_ZONE_OK;
    size_t cap = r->list_cap ? r->list_cap * 2 : 64 * SP_DNS_GAP_ENTRY;
    while (cap < r->list_len + n)
        cap *= 2;
    uint8_t *p = realloc(r->list, cap);
    if (p == NULL)
        return SP_ZONE_NOMEM;
    r->list = p;
    r->list_cap = cap;
    return SP_ZONE_OK;
}

int sp_compiler_put_gap(struct result *r, int64_t index, const uint8_t *bound)
{
    if (sp_compiler_list_room(r, SP_DNS_GAP_ENTRY) != SP_ZONE_OK)
        return SP_ZONE_NOMEM;
    uint8_t *e = r->list + r->list_len;
    memset(e, 0, SP_DNS_GAP_ENTRY);
    e[0] = (uint8_t)(index >> 24), e[1] = (uint8_t)(index >> 16);
    e[2] = (uint8_t)(index >> 8), e[3] = (uint8_t)index;
    memcpy(e + 4, bound, 1u + bound[0]);
    r->list_len += SP_DNS_GAP_ENTRY;
    return SP_ZONE_OK;
}
