/* The zone compiler (native/zone/, the layers after ldns): zones built from the
 * input's bytes, two at a time a record (which owner, which type), out of a few
 * labels ("a", "b", "*", "ns", a 60-byte one for long names) so that cuts under cuts,
 * wildcards, empty non-terminals, CNAME chains and loops, glue and names near the
 * 255-octet limit all occur; every record's data names one of those names. Then
 * sp_zone_finish() and sp_zone_compile() into a table, and every response must be a
 * DNS message the size rules allow (DNAMEs among the records occlude what is below
 * them). Then a patch, as a secondary's IXFR makes one (two names given new records,
 * sp_zone_reopen), recompiled into an edit of that table: the same rules hold. RRSIG and NSEC records make some zones signed, so that their
 * DNSSEC forms and gap lists are built too; some of those get an NSEC3 chain (the
 * hashes of some of the owners and their parents, opt-out or not), so that NSEC3
 * forms, descriptors and the chain are built. Each finished zone is also written out as
 * an AXFR (transfer.h: every record once, the SOA twice, each message within its cap)
 * and compared with a copy of itself (no difference) and, after the patch, with that
 * copy (the patched names differ). Needs no SP_FUZZ_TABLE. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "stormpy/app/dns/dns.h"
#include "stormpy/proto/sha1.h"
#include "stormpy/zone/transfer.h"
#include "stormpy/zone/zone.h"

#define CHECK(cond)                  \
    do {                             \
        if (!(cond))                 \
            __builtin_trap();        \
    } while (0)

static const uint8_t ORIGIN[] = "\x01z";   /* z. */

/* A name under the origin from one byte: up to 3 labels, 2 bits each. */
static size_t make_name(uint8_t pick, uint8_t *out)
{
    static const char *labels[] = {"a", "b", "*", "ns"};
    static char longest[61];
    if (!longest[0])
        memset(longest, 'l', 60);
    size_t len = 0;
    int depth = pick >> 6;
    for (int i = 0; i < depth; i++) {
        const char *l = (pick & 0x20) && i == 0 ? longest : labels[(pick >> (2 * i)) & 3];
        size_t n = strlen(l);
        out[len++] = (uint8_t)n;
        memcpy(out + len, l, n);
        len += n;
    }
    memcpy(out + len, ORIGIN, sizeof(ORIGIN));
    return len + sizeof(ORIGIN);
}

static const uint8_t SOA[] = "\x02ns\x01z\x00\x01h\x01z\x00\0\0\0\1\0\0\0\2\0\0\0\3\0\0\0\4\0\0\0\5";

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void check_responses(const struct sp_table *t, uint64_t count)
{
    uint32_t chain = UINT32_MAX;
    for (uint32_t r = 0; r < count; r++) {
        const struct sp_response *resp = sp_table_response(t, r);
        if ((resp->user & SP_DNS_USER_NSEC3) == SP_DNS_USER_NSEC3) {   /* a descriptor */
            const uint8_t *d = sp_response_bytes(t, resp);
            CHECK(resp->len >= 26 && resp->len == 26u + 4u * d[25]);
            CHECK(sp_table_response(t, get32(d + 12)) != NULL);
            CHECK(chain == UINT32_MAX || chain == get32(d + 16));
            chain = get32(d + 16);
            CHECK(sp_table_response(t, chain) != NULL);
        }
    }
    for (uint32_t r = 0; r < count; r++) {
        const struct sp_response *resp = sp_table_response(t, r);
        CHECK(resp != NULL && resp->len <= 65535);
        if (r == chain)
            continue;
        if (resp->user & SP_DNS_USER_GAPS) {         /* a gap list: entries of live forms */
            const uint8_t *e = sp_response_bytes(t, resp);
            CHECK(resp->len % SP_DNS_GAP_ENTRY == 0);
            for (uint32_t i = 0; i < resp->len; i += SP_DNS_GAP_ENTRY)
                CHECK(sp_table_response(t, (uint32_t)e[i] << 24 | e[i + 1] << 16 | e[i + 2] << 8 |
                                           e[i + 3]) != NULL && e[i + 4] <= 63);
            continue;
        }
        CHECK(resp->len >= 12);
        const uint8_t *bytes = sp_response_bytes(t, resp);
        CHECK((bytes[2] & 0x80) && bytes[4] == 0 && bytes[5] == 1);
    }
}

/* An NSEC3 record at the hash of name (salt "s", iterations), from the input's byte. */
static void add_nsec3(struct sp_zone *z, const uint8_t *name, size_t len, uint8_t pick)
{
    static const char digits[] = "0123456789abcdefghijklmnopqrstuv";
    uint8_t h[SP_SHA1_LEN], owner[1 + 32 + sizeof(ORIGIN)] = {32};
    sp_nsec3_hash(name, len, (const uint8_t *)"s", 1, pick & 1, h);
    for (int i = 0; i < 32; i++) {                 /* base32hex, 5 bits a digit */
        int bit = 5 * i, v = (h[bit / 8] << 8 | (bit / 8 + 1 < SP_SHA1_LEN ? h[bit / 8 + 1] : 0));
        owner[1 + i] = (uint8_t)digits[(v >> (11 - bit % 8)) & 31];
    }
    memcpy(owner + 33, ORIGIN, sizeof(ORIGIN));
    uint8_t rdata[6 + 21 + 3] = {1, pick >> 7, 0, pick & 1, 1, 's', SP_SHA1_LEN};
    memset(rdata + 7, pick, SP_SHA1_LEN);
    memcpy(rdata + 27, "\0\x01\x40", 3);
    CHECK(sp_zone_add_record(z, owner, sizeof(owner), 50, 30, rdata, sizeof(rdata)) == 0);
    static const uint8_t sig[] = "\0\x32";
    if (pick & 2)
        CHECK(sp_zone_add_record(z, owner, sizeof(owner), 46, 30, sig, sizeof(sig) - 1) == 0);
}

static void add_apex(struct sp_zone *z, uint8_t serial)
{
    uint8_t soa[sizeof(SOA)];
    memcpy(soa, SOA, sizeof(SOA));
    soa[sizeof(SOA) - 1 - 20 + 3] = serial;
    CHECK(sp_zone_add_record(z, ORIGIN, sizeof(ORIGIN), 6, 60, soa, sizeof(SOA) - 1) == 0);
    CHECK(sp_zone_add_record(z, ORIGIN, sizeof(ORIGIN), 2, 60, (const uint8_t *)"\x02ns\x01z", 6) == 0);
}

/* z written out as an AXFR in messages of a small budget: every record once and the
 * SOA again at the end; every owner's pointer within the message. */
static void check_axfr(const struct sp_zone *z)
{
    static uint8_t out[65536];
    struct sp_zone_walk w;
    uint64_t records = 0;
    sp_zone_walk_init(&w);
    while (w.phase != SP_ZONE_WALK_DONE) {
        uint16_t count;
        size_t n = sp_zone_walk_write(z, &w, out, sizeof(out) - 64, 600, 12, 40, &count);
        CHECK(count > 0 && n > 0 && n <= sizeof(out) - 64);
        CHECK(count == 1 || n <= 600);
        records += count;
    }
    CHECK(records == (uint64_t)z->nrdatas + 1);
}

/* The names old and now hold differently, at most limit of them: each id in range. */
static size_t difference(const struct sp_zone *old, const struct sp_zone *now)
{
    uint32_t *ids;
    size_t count;
    int rc = sp_zone_difference(old, now, 1000, &ids, &count);
    CHECK(rc != SP_ZONE_NOMEM);
    for (size_t i = 0; rc == SP_ZONE_OK && i < count; i++)
        CHECK((ids[i] & SP_ZONE_FROM_OLD) ? (ids[i] & ~SP_ZONE_FROM_OLD) < old->nnames
                                          : ids[i] < now->nnames);
    free(ids);
    return rc == SP_ZONE_OK ? count : 0;
}

/* Two names' records replaced (the first's dropped, an A at the second), the apex's
 * serial bumped (so it differs from before, the zone as it was), then recompiled into an edit of t: the table that serves next. */
static struct sp_table *patch(struct sp_zone *z, struct sp_table *t, uint8_t first, uint8_t second,
                              const struct sp_zone *before)
{
    uint8_t a[SP_ZONE_NAME_MAX], b[SP_ZONE_NAME_MAX];
    const uint8_t *names[3] = {a, b, ORIGIN};
    size_t lens[3] = {make_name(first, a), make_name(second, b), sizeof(ORIGIN)};
    CHECK(sp_zone_reopen(z, names, lens, 3) == SP_ZONE_OK);
    add_apex(z, 2);
    CHECK(sp_zone_add_record(z, b, lens[1], 1, 30, (const uint8_t *)"\xc0\0\2\1", 4) == 0);
    int rc = sp_zone_finish(z, ORIGIN, sizeof(ORIGIN));
    CHECK(rc != SP_ZONE_NOMEM);
    if (rc != SP_ZONE_OK)
        return t;
    check_axfr(z);
    CHECK(difference(before, z) > 0);       /* the apex's serial at least */
    struct sp_table_builder *edit = sp_table_builder_edit(t);
    struct sp_zone_compile_stats stats;
    CHECK(edit != NULL);
    rc = sp_zone_recompile(z, edit, 1, &stats);
    CHECK(rc != SP_ZONE_NOMEM);
    struct sp_table *next = sp_table_builder_finish(edit);
    CHECK(next != NULL);
    if (rc == SP_ZONE_OK) {
        uint32_t r = 0;
        while (sp_table_response(next, r) != NULL)
            r++;
        check_responses(next, r);
    }
    sp_table_free(t);
    return next;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* RRSIG and NSEC make the zone signed (a DNSKEY and the SOA's RRSIG are added); 39:
     * DNAME, its target one of the names */
    static const uint16_t types[] = {1, 2, 5, 15, 33, 16, 43, 28, 46, 47, 1, 39, 5, 28, 46, 47};
    struct sp_zone *z = sp_zone_new();
    CHECK(z != NULL);
    uint8_t owner[SP_ZONE_NAME_MAX], target[SP_ZONE_NAME_MAX], rdata[SP_ZONE_NAME_MAX + 32];
    bool signed_zone = false;
    add_apex(z, 1);
    for (size_t i = 0; i + 2 < size && i < 3 * 64; i += 3) {
        size_t olen = make_name(data[i], owner), tlen = make_name(data[i + 2], target);
        uint16_t type = types[data[i + 1] & 15];
        size_t skip = type == 15 ? 2 : type == 33 ? 6 : 0, rdlen;
        memset(rdata, data[i + 1], 8);
        if (type == 46) {                  /* covering one of the types, any signature */
            rdata[0] = 0, rdata[1] = (uint8_t)types[data[i + 2] & 7];
            memcpy(rdata + 18, ORIGIN, sizeof(ORIGIN));
            rdlen = 18 + sizeof(ORIGIN) + (data[i + 2] & 15);
            signed_zone = true;
        } else if (type == 47) {           /* next name, then a bitmap */
            memcpy(rdata, target, tlen);
            memcpy(rdata + tlen, "\0\x06\x40\x01\0\0\0\x03", 8);
            rdlen = tlen + 8;
            signed_zone = true;
        } else if (type == 1 || type == 28 || type == 16 || type == 43) {
            rdlen = type == 1 ? 4 : type == 28 ? 16 : 8;
            memset(rdata, data[i + 2], rdlen);
            if (type == 16)
                rdata[0] = 7;
        } else {
            memcpy(rdata + skip, target, tlen);
            rdlen = skip + tlen;
        }
        CHECK(sp_zone_add_record(z, owner, olen, type, 30 + (data[i + 1] >> 3), rdata, rdlen) == 0);
    }
    if (signed_zone) {
        static const uint8_t key[] = "\x01\x01\x03\x0dkeykeykeykey", sig[] = "\0\x06";
        CHECK(sp_zone_add_record(z, ORIGIN, sizeof(ORIGIN), 48, 60, key, sizeof(key) - 1) == 0);
        CHECK(sp_zone_add_record(z, ORIGIN, sizeof(ORIGIN), 46, 60, sig, sizeof(sig) - 1) == 0);
    }
    if (signed_zone && size > 0 && (data[0] & 0x10)) {      /* NSEC3: some names hashed */
        uint8_t param[] = {1, 0, 0, data[0] & 1, 1, 's'};
        CHECK(sp_zone_add_record(z, ORIGIN, sizeof(ORIGIN), 51, 60, param, sizeof(param)) == 0);
        add_nsec3(z, ORIGIN, sizeof(ORIGIN), data[0]);
        for (size_t i = 0; i + 2 < size && i < 3 * 64; i += 3) {
            size_t olen = make_name(data[i], owner);
            if (data[i + 2] & 0x40)
                add_nsec3(z, owner, olen, (uint8_t)(data[0] & 1) | (data[i + 2] & 0x82));
            if ((data[i + 2] & 0x20) && owner[0] < olen - 1)     /* its parent */
                add_nsec3(z, owner + 1 + owner[0], olen - 1 - owner[0],
                          (uint8_t)(data[0] & 1) | (data[i + 2] & 0x82));
        }
    }
    int rc = sp_zone_finish(z, ORIGIN, sizeof(ORIGIN));
    CHECK(rc != SP_ZONE_NOMEM);
    if (rc == SP_ZONE_OK) {
        struct sp_table_builder *b = sp_table_builder_new();
        struct sp_zone_compile_stats stats;
        CHECK(b != NULL);
        rc = sp_zone_compile(z, b, 1, &stats);
        CHECK(rc != SP_ZONE_NOMEM);
        struct sp_table *t = sp_table_builder_finish(b);
        CHECK(t != NULL);
        uint32_t count = 0;
        while (rc == SP_ZONE_OK && sp_table_response(t, count) != NULL)
            count++;
        check_responses(t, count);
        check_axfr(z);
        struct sp_zone *before = sp_zone_copy(z);
        CHECK(before != NULL);
        CHECK(difference(before, z) == 0);
        if (rc == SP_ZONE_OK && size > 0)
            t = patch(z, t, data[0], data[size - 1], before);
        sp_zone_free(before);
        sp_table_free(t);
    }
    sp_zone_free(z);
    return 0;
}
