/* A zone's NSEC3 chain (RFC 5155): its records in hash order, the NSEC3 matching or
 * covering a name, and the chain as dns.c splices from it; see zone.h. The hashes
 * are the owners' first labels (base32hex), so the chain is read, never recomputed;
 * a name's own hash is computed once, when a proof first asks for it. */
#include "stormpy/zone/zone.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stormpy/proto/sha1.h"

enum { TYPE_NSEC3 = 50, TYPE_NSEC3PARAM = 51, HASH_SHA1 = 1, UNKNOWN = SP_ZONE_NONE - 1 };

struct link {
    uint8_t hash[SP_SHA1_LEN];
    uint32_t rrset;
};

struct sp_zone_nsec3 {
    const struct sp_zone *z;
    struct link *chain;          /* by hash */
    uint32_t count;
    const uint8_t *salt;
    uint8_t salt_len;
    uint16_t iterations;
    uint32_t *matching;          /* per name: the NSEC3 RRset of its hash, NONE, or UNKNOWN */
};

static int declined(struct sp_zone *z, const char *why)
{
    snprintf(z->why, sizeof(z->why), "%s", why);
    return SP_ZONE_DECLINED;
}

static int base32hex(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'v')
        return c - 'a' + 10;
    return c >= 'A' && c <= 'V' ? c - 'A' + 10 : -1;
}

/* A hashed owner's first label (32 base32hex digits) as its 20 bytes. */
static bool decode(const uint8_t *label, uint8_t out[SP_SHA1_LEN])
{
    if (label[0] != 32)
        return false;
    uint64_t bits = 0;
    unsigned nbits = 0, o = 0;
    for (unsigned i = 1; i <= 32; i++) {
        int v = base32hex(label[i]);
        if (v < 0)
            return false;
        bits = bits << 5 | (unsigned)v;
        nbits += 5;
        if (nbits >= 8) {
            nbits -= 8;
            out[o++] = (uint8_t)(bits >> nbits);
        }
    }
    return true;
}

static int by_hash(const void *a, const void *b)
{
    return memcmp(((const struct link *)a)->hash, ((const struct link *)b)->hash, SP_SHA1_LEN);
}

void sp_zone_nsec3_free(struct sp_zone_nsec3 *n)
{
    if (n == NULL)
        return;
    free(n->chain);
    free(n->matching);
    free(n);
}

/* The zone's one NSEC3PARAM, with SHA-1; false otherwise (dnspython decides those). */
static bool read_param(struct sp_zone_nsec3 *n)
{
    const struct sp_zone *z = n->z;
    uint32_t set = sp_zone_find_rrset(z, z->origin, TYPE_NSEC3PARAM);
    if (set == SP_ZONE_NONE || z->rrsets[set].count != 1)
        return false;
    const struct sp_zone_rdata *d = &z->rdatas[z->rrsets[set].first];
    const uint8_t *p = z->rdata_arena + d->off;
    if (d->len < 5 || p[0] != HASH_SHA1 || d->len != 5u + p[4])
        return false;
    n->iterations = (uint16_t)(p[2] << 8 | p[3]);
    n->salt_len = p[4];
    n->salt = p + 5;
    return true;
}

int sp_zone_nsec3_new(struct sp_zone *z, struct sp_zone_nsec3 **out)
{
    struct sp_zone_nsec3 *n = calloc(1, sizeof(*n));
    *out = NULL;
    if (n == NULL)
        return SP_ZONE_NOMEM;
    n->z = z;
    if (!read_param(n)) {
        sp_zone_nsec3_free(n);
        return declined(z, "an NSEC3PARAM other than one with SHA-1");
    }
    n->chain = malloc(((size_t)z->nnames + 1) * sizeof(*n->chain));
    n->matching = malloc(((size_t)z->nnames + 1) * sizeof(*n->matching));
    if (n->chain == NULL || n->matching == NULL) {
        sp_zone_nsec3_free(n);
        return SP_ZONE_NOMEM;
    }
    const uint8_t *origin = sp_zone_name_wire(z, z->origin);
    size_t olen = z->names[z->origin].len;
    for (uint32_t id = 0; id < z->nnames; id++) {
        n->matching[id] = UNKNOWN;
        uint32_t set = z->names[id].hidden ? sp_zone_find_rrset(z, id, TYPE_NSEC3) : SP_ZONE_NONE;
        if (set == SP_ZONE_NONE)
            continue;
        const uint8_t *w = sp_zone_name_wire(z, id);
        struct link *l = &n->chain[n->count++];
        l->rrset = set;
        if (z->names[id].len != 1u + w[0] + olen || memcmp(w + 1 + w[0], origin, olen) ||
            !decode(w, l->hash)) {
            sp_zone_nsec3_free(n);
            return declined(z, "an NSEC3 owner that is no SHA-1 hash right below the origin");
        }
    }
    qsort(n->chain, n->count, sizeof(*n->chain), by_hash);
    *out = n;
    return SP_ZONE_OK;
}

/* The chain's place of the first hash at or after h (count: none). */
static uint32_t lower_bound(const struct sp_zone_nsec3 *n, const uint8_t *h)
{
    uint32_t lo = 0, hi = n->count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (memcmp(n->chain[mid].hash, h, SP_SHA1_LEN) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void hash_name(const struct sp_zone_nsec3 *n, const uint8_t *wire, size_t len,
                      uint8_t h[SP_SHA1_LEN])
{
    uint8_t lower[SP_ZONE_NAME_MAX];
    for (size_t i = 0; i < len; i++)
        lower[i] = wire[i] >= 'A' && wire[i] <= 'Z' ? wire[i] + 32 : wire[i];
    sp_nsec3_hash(lower, len, n->salt, n->salt_len, n->iterations, h);
}

uint32_t sp_zone_nsec3_matching(struct sp_zone_nsec3 *n, uint32_t name)
{
    if (n->matching[name] != UNKNOWN)
        return n->matching[name];
    uint8_t h[SP_SHA1_LEN];
    hash_name(n, sp_zone_name_wire(n->z, name), n->z->names[name].len, h);
    uint32_t i = lower_bound(n, h);
    bool found = i < n->count && memcmp(n->chain[i].hash, h, SP_SHA1_LEN) == 0;
    return n->matching[name] = found ? n->chain[i].rrset : SP_ZONE_NONE;
}

uint32_t sp_zone_nsec3_covering(const struct sp_zone_nsec3 *n, const uint8_t *wire, size_t len)
{
    if (n->count == 0)
        return SP_ZONE_NONE;
    uint8_t h[SP_SHA1_LEN];
    hash_name(n, wire, len, h);
    uint32_t i = lower_bound(n, h);
    return n->chain[i ? i - 1 : n->count - 1].rrset;      /* the chain wraps */
}

uint32_t sp_zone_nsec3_index(const struct sp_zone_nsec3 *n, uint32_t rrset)
{
    uint8_t h[SP_SHA1_LEN];
    if (!decode(sp_zone_name_wire(n->z, n->z->rrsets[rrset].name), h))
        return SP_ZONE_NONE;
    uint32_t i = lower_bound(n, h);
    return i < n->count && n->chain[i].rrset == rrset ? i : SP_ZONE_NONE;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
    return p + 4;
}

/* An RRset's records, uncompressed, under its owner and with ttl. */
static uint8_t *put_records(const struct sp_zone *z, uint8_t *p, uint32_t set, uint32_t ttl,
                            uint32_t *count)
{
    const struct sp_zone_rrset *s = &z->rrsets[set];
    const uint8_t *owner = sp_zone_name_wire(z, s->name);
    size_t olen = z->names[s->name].len;
    for (uint32_t k = 0; k < s->count; k++) {
        const struct sp_zone_rdata *d = &z->rdatas[s->first + k];
        memcpy(p, owner, olen);
        p += olen;
        *p++ = (uint8_t)(s->type >> 8), *p++ = (uint8_t)s->type, *p++ = 0, *p++ = 1;
        p = put32(p, ttl);
        *p++ = (uint8_t)(d->len >> 8), *p++ = (uint8_t)d->len;
        memcpy(p, z->rdata_arena + d->off, d->len);
        p += d->len;
        (*count)++;
    }
    return p;
}

static size_t records_size(const struct sp_zone *z, uint32_t set)
{
    const struct sp_zone_rrset *s = &z->rrsets[set];
    size_t size = 0;
    for (uint32_t k = 0; k < s->count; k++)
        size += z->names[s->name].len + 10u + z->rdatas[s->first + k].len;
    return size;
}

#define CHAIN_ENTRY (SP_SHA1_LEN + 8u)

int sp_zone_nsec3_chain(const struct sp_zone_nsec3 *n, uint8_t **out, size_t *len)
{
    const struct sp_zone *z = n->z;
    size_t head = 2 + 1 + n->salt_len + 4, size = head + (size_t)n->count * CHAIN_ENTRY;
    for (uint32_t i = 0; i < n->count; i++) {
        uint32_t set = n->chain[i].rrset, sigs = sp_zone_find_sigs(z, z->rrsets[set].name, TYPE_NSEC3);
        size += records_size(z, set) + (sigs != SP_ZONE_NONE ? records_size(z, sigs) : 0);
    }
    *out = NULL;
    if (size > UINT32_MAX)
        return SP_ZONE_DECLINED;
    uint8_t *blob = malloc(size), *p = blob;
    if (blob == NULL)
        return SP_ZONE_NOMEM;
    *p++ = (uint8_t)(n->iterations >> 8), *p++ = (uint8_t)n->iterations, *p++ = n->salt_len;
    memcpy(p, n->salt, n->salt_len);
    p = put32(p + n->salt_len, n->count);
    uint8_t *records = blob + head + (size_t)n->count * CHAIN_ENTRY;
    for (uint32_t i = 0; i < n->count; i++) {
        uint32_t set = n->chain[i].rrset, count = 0, ttl = z->rrsets[set].ttl;
        uint32_t sigs = sp_zone_find_sigs(z, z->rrsets[set].name, TYPE_NSEC3);
        uint8_t *start = records;
        records = put_records(z, records, set, ttl, &count);
        if (sigs != SP_ZONE_NONE)            /* timed as the NSEC3 is served */
            records = put_records(z, records, sigs, ttl, &count);
        memcpy(p, n->chain[i].hash, SP_SHA1_LEN);
        p = put32(p + SP_SHA1_LEN, (uint32_t)(start - blob));
        size_t rlen = (size_t)(records - start);
        if (rlen > UINT16_MAX || count > UINT16_MAX) {
            free(blob);
            return SP_ZONE_DECLINED;
        }
        *p++ = (uint8_t)(rlen >> 8), *p++ = (uint8_t)rlen;
        *p++ = (uint8_t)(count >> 8), *p++ = (uint8_t)count;
    }
    *len = size;
    *out = blob;
    return SP_ZONE_OK;
}
