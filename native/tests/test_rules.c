/* Custom responders: rule matching, keyed lookups, rendering against the request
 * fields, rule-list validation, the program in flat tables, and the frame,
 * datagram and slow-path reply functions.
 *
 * Longer than the ~600 lines a C file keeps to: one test program per C module
 * (tests/test_native.py counts them), and the wire tests build on the rule tables
 * the first half makes. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stormpy/app/dns/dns.h"
#include "stormpy/app/dns/worker.h"
#include "stormpy/app/rules/rules.h"
#include "stormpy/engine/frame.h"
#include "stormpy/proto/csum.h"
#include "stormpy/proto/wire.h"

#define CAP 2048
#define PORT 7000

static const uint8_t SERVER_MAC[6] = {2, 0, 0, 0, 0, 1};
static const uint8_t PEER_MAC[6] = {2, 0, 0, 0, 0, 2};
static const uint8_t SERVER_V4[4] = {198, 18, 0, 1};
static const uint8_t PEER_V4[4] = {198, 18, 0, 2};
static const uint8_t SERVER_V6[16] = {0x20, 0x01, 0, 2, [15] = 1};
static const uint8_t PEER_V6[16] = {0x20, 0x01, 0, 2, [15] = 2};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)rng_state;
}

/* A rule list of n rules, as the program of a table. */
static struct sp_rules *rules_new(unsigned n)
{
    struct sp_rules *r = calloc(1, sizeof(*r) + n * sizeof(struct sp_rule));
    r->magic = SP_RULES_MAGIC;
    r->nrules = (uint16_t)n;
    return r;
}

static size_t rules_size(unsigned n)
{
    return sizeof(struct sp_rules) + n * sizeof(struct sp_rule);
}

static void set_match(struct sp_rule *r, uint16_t off, const char *m, uint16_t min_len)
{
    r->match_off = off;
    r->match_len = (uint8_t)strlen(m);
    memcpy(r->match, m, r->match_len);
    r->min_len = min_len;
}

static void set_key(struct sp_rule *r, unsigned i, uint16_t off, uint16_t end, const char *stops)
{
    r->keyed = 1;
    r->tag = sp_rule_tag(i);
    r->key_off = off;
    r->key_end = end;
    r->nstops = (uint8_t)strlen(stops);
    memcpy(r->stops, stops, r->nstops);
}

static int64_t add_plain(struct sp_table_builder *b, const char *s)
{
    return sp_table_add_response(b, (const uint8_t *)s, (uint32_t)strlen(s), NULL, 0, 0);
}

/* ---- the key-value table most tests use ---- */

enum { R_HELLO, R_FIRST, R_SECOND, R_VALUE, R_MISS, R_ID, R_ECHO, R_DELETED, R_COUNT };
enum { RULE_PING, RULE_AB, RULE_ABC, RULE_GET, RULE_DEL, RULE_ID, RULE_ECHO, RULE_LONG, RULE_NONE,
       RULE_N, RULE_D, RULE_COUNT };

static struct sp_table *kv_table(void)
{
    struct sp_table_builder *b = sp_table_builder_new();
    CHECK_EQ(add_plain(b, "HELLO"), R_HELLO);
    CHECK_EQ(add_plain(b, "FIRST"), R_FIRST);
    CHECK_EQ(add_plain(b, "SECOND"), R_SECOND);
    CHECK_EQ(add_plain(b, "VALUE key\r\n"), R_VALUE);
    CHECK_EQ(add_plain(b, "MISS\r\n"), R_MISS);
    /* a 4-byte ID at payload[2, 6) copied to the front */
    const struct sp_patch id[] = {{.op = SP_PATCH_COPY, .field = SP_RULE_FIELD_PAYLOAD, .dst = 0,
                                   .src = 2, .len = 4}};
    CHECK_EQ(sp_table_add_response(b, (const uint8_t *)"\0\0\0\0 OK", 7, id, 1, 0), R_ID);
    const struct sp_patch echo[] = {{.op = SP_PATCH_INSERT, .field = SP_RULE_FIELD_ECHO, .dst = 5}};
    CHECK_EQ(sp_table_add_response(b, (const uint8_t *)"ECHO[]", 6, echo, 1, 0), R_ECHO);
    CHECK_EQ(add_plain(b, "DELETED"), R_DELETED);
    CHECK_EQ(sp_table_add_key(b, sp_rule_tag(RULE_GET), (const uint8_t *)"key", 3, R_VALUE), 0);
    CHECK_EQ(sp_table_add_key(b, sp_rule_tag(RULE_GET), (const uint8_t *)"zz", 2, R_VALUE), 0);
    CHECK_EQ(sp_table_add_key(b, sp_rule_tag(RULE_DEL), (const uint8_t *)"key", 3, R_DELETED), 0);
    CHECK_EQ(sp_table_add_key(b, sp_rule_tag(RULE_DEL), (const uint8_t *)"abcd", 4, R_DELETED), 0);

    struct sp_rules *rs = rules_new(RULE_COUNT);
    struct sp_rule *r = rs->rule;
    set_match(&r[RULE_PING], 4, "PING", 8);           /* a match away from the start */
    r[RULE_PING].response = R_HELLO;
    set_match(&r[RULE_AB], 0, "AB", 2);
    r[RULE_AB].response = R_FIRST;
    set_match(&r[RULE_ABC], 0, "ABC", 3);             /* shadowed by the rule before it */
    r[RULE_ABC].response = R_SECOND;
    set_match(&r[RULE_GET], 0, "GET ", 5);
    set_key(&r[RULE_GET], RULE_GET, 4, SP_RULE_TO_END, "\r\n ");
    r[RULE_GET].response = R_MISS;
    set_match(&r[RULE_DEL], 0, "DEL ", 5);
    set_key(&r[RULE_DEL], RULE_DEL, 4, 8, "\r\n");    /* keys of at most 4 bytes */
    r[RULE_DEL].response = SP_RULE_NO_RESPONSE;
    set_match(&r[RULE_ID], 0, "ID", 6);
    r[RULE_ID].response = R_ID;
    set_match(&r[RULE_ECHO], 0, "ECHO ", 5);
    r[RULE_ECHO].echo_off = 5;
    r[RULE_ECHO].echo_end = 10;
    r[RULE_ECHO].response = R_ECHO;
    set_match(&r[RULE_LONG], 0, "LONG", 10);
    r[RULE_LONG].response = R_FIRST;
    set_match(&r[RULE_NONE], 0, "NONE", 4);
    r[RULE_NONE].response = SP_RULE_NO_RESPONSE;
    set_match(&r[RULE_N], 0, "N", 1);                 /* below NONE and DEL: never reached */
    r[RULE_N].response = R_SECOND;                    /* for those, even on the slow path */
    set_match(&r[RULE_D], 0, "D", 1);
    r[RULE_D].response = R_SECOND;
    CHECK_EQ(sp_table_set_program(b, rs, (uint32_t)rules_size(RULE_COUNT)), 0);
    CHECK_EQ(sp_table_set_program(b, rs, (uint32_t)rules_size(RULE_COUNT)), -1);   /* only one */
    free(rs);
    struct sp_table *t = sp_table_builder_finish(b);
    char err[128] = "";
    CHECK_EQ(sp_rules_check(t, err, sizeof(err)), 0);
    return t;
}

/* The last payload answer() looked at: req points into it until the next call. */
static uint8_t *last_payload;

/* The response a payload gets, rendered to out (its length in *n, 0 if none); the
 * response's index, or -1 for the slow path. */
static int answer(const struct sp_table *t, const char *payload, size_t len, uint8_t *out,
                  size_t *n, struct sp_request *req)
{
    const struct sp_rules *rs = sp_rules_of(t);
    free(last_payload);
    uint8_t *p = last_payload = malloc(len ? len : 1);   /* exact size: ASan sees overreads */
    memcpy(p, payload, len);
    const struct sp_response *r = sp_rules_find(t, rs, p, len, req);
    *n = 0;
    int index = -1;
    if (r) {
        *n = sp_response_render(t, r, req, out, CAP);
        index = (int)(r - sp_table_response(t, 0));
        CHECK(sp_table_response(t, (uint32_t)index) == r);
    }
    return index;
}

#define ANSWER(t, s, out, n, req) answer(t, s, sizeof(s) - 1, out, n, req)
#define RENDERED(out, n, s) ((n) == sizeof(s) - 1 && memcmp(out, s, sizeof(s) - 1) == 0)

static void test_match(void)
{
    struct sp_table *t = kv_table();
    uint8_t out[CAP];
    size_t n;
    struct sp_request req;
    /* match bytes at an offset */
    CHECK_EQ(ANSWER(t, "1234PING", out, &n, &req), R_HELLO);
    CHECK(RENDERED(out, n, "HELLO"));
    CHECK_EQ(ANSWER(t, "xxxxPINGandmore", out, &n, &req), R_HELLO);
    CHECK_EQ(ANSWER(t, "PING1234", out, &n, &req), -1);
    CHECK_EQ(ANSWER(t, "1234PINX", out, &n, &req), -1);
    CHECK_EQ(ANSWER(t, "1234PIN", out, &n, &req), -1);
    /* the first matching rule wins */
    CHECK_EQ(ANSWER(t, "ABC", out, &n, &req), R_FIRST);
    CHECK(RENDERED(out, n, "FIRST"));
    CHECK_EQ(ANSWER(t, "AB", out, &n, &req), R_FIRST);
    CHECK_EQ(ANSWER(t, "AC", out, &n, &req), -1);
    CHECK_EQ(ANSWER(t, "A", out, &n, &req), -1);
    CHECK_EQ(ANSWER(t, "", out, &n, &req), -1);
    /* min_len: a payload shorter than it goes to the slow path */
    CHECK_EQ(ANSWER(t, "LONG56789", out, &n, &req), -1);
    CHECK_EQ(ANSWER(t, "LONG567890", out, &n, &req), R_FIRST);
    CHECK_EQ(ANSWER(t, "ID123", out, &n, &req), -1);
    CHECK_EQ(ANSWER(t, "GET ", out, &n, &req), -1);
    /* a rule with no response: the slow path, and no later rule is tried */
    CHECK_EQ(ANSWER(t, "NONE", out, &n, &req), -1);
    CHECK_EQ(ANSWER(t, "NONE and more", out, &n, &req), -1);
    CHECK_EQ(ANSWER(t, "NON", out, &n, &req), R_SECOND);
    /* one byte past the 64 KiB a UDP payload can carry: never matched */
    static uint8_t huge[UINT16_MAX + 1];
    memcpy(huge, "AB", 2);
    CHECK(sp_rules_find(t, sp_rules_of(t), huge, sizeof(huge), &req) == NULL);
    CHECK(sp_rules_find(t, sp_rules_of(t), huge, sizeof(huge) - 1, &req) ==
          sp_table_response(t, R_FIRST));
    sp_table_free(t);
}

static void test_keys(void)
{
    struct sp_table *t = kv_table();
    uint8_t out[CAP];
    size_t n;
    struct sp_request req;
    /* the key ends at the first stop byte */
    CHECK_EQ(ANSWER(t, "GET key\r\n", out, &n, &req), R_VALUE);
    CHECK(RENDERED(out, n, "VALUE key\r\n"));
    CHECK_EQ(req.field_len[SP_RULE_FIELD_KEY], 3);
    CHECK_EQ(ANSWER(t, "GET key", out, &n, &req), R_VALUE);           /* or at the end */
    CHECK_EQ(ANSWER(t, "GET key extra\r\n", out, &n, &req), R_VALUE);
    CHECK_EQ(ANSWER(t, "GET key\n", out, &n, &req), R_VALUE);
    CHECK_EQ(ANSWER(t, "GET zz\r\n", out, &n, &req), R_VALUE);
    /* absent keys: the rule's miss response */
    CHECK_EQ(ANSWER(t, "GET keyx\r\n", out, &n, &req), R_MISS);
    CHECK(RENDERED(out, n, "MISS\r\n"));
    CHECK_EQ(req.field_len[SP_RULE_FIELD_KEY], 4);
    CHECK_EQ(ANSWER(t, "GET ke", out, &n, &req), R_MISS);
    CHECK_EQ(ANSWER(t, "GET \r\nkey", out, &n, &req), R_MISS);        /* an empty key */
    CHECK_EQ(req.field_len[SP_RULE_FIELD_KEY], 0);
    CHECK_EQ(ANSWER(t, "GET  key", out, &n, &req), R_MISS);
    /* a key is only looked up in its own rule's namespace */
    CHECK_EQ(ANSWER(t, "DEL key\r\n", out, &n, &req), R_DELETED);
    CHECK_EQ(ANSWER(t, "DEL zz\r\n", out, &n, &req), -1);
    CHECK_EQ(ANSWER(t, "DE zz\r\n", out, &n, &req), R_SECOND);   /* not DEL's: the next rule */
    /* key_end cuts the key: payload[4, 8) */
    CHECK_EQ(ANSWER(t, "DEL abcdefgh", out, &n, &req), R_DELETED);
    CHECK_EQ(req.field_len[SP_RULE_FIELD_KEY], 4);
    CHECK(memcmp(req.field[SP_RULE_FIELD_KEY], "abcd", 4) == 0);
    CHECK_EQ(ANSWER(t, "DEL abc", out, &n, &req), -1);
    /* absent, and no miss response: the slow path */
    CHECK_EQ(ANSWER(t, "DEL nokey", out, &n, &req), -1);
    CHECK_EQ(ANSWER(t, "DEL \r\n", out, &n, &req), -1);
    sp_table_free(t);
}

static void test_patches(void)
{
    struct sp_table *t = kv_table();
    uint8_t out[CAP];
    size_t n;
    struct sp_request req;
    /* COPY: the ID at payload[2, 6) */
    CHECK_EQ(ANSWER(t, "ID\x12\x34\x56\x78 and the rest", out, &n, &req), R_ID);
    CHECK(RENDERED(out, n, "\x12\x34\x56\x78 OK"));
    CHECK_EQ(ANSWER(t, "IDabcd", out, &n, &req), R_ID);
    CHECK(RENDERED(out, n, "abcd OK"));
    /* INSERT: payload[5, 10), cut at the payload's end */
    CHECK_EQ(ANSWER(t, "ECHO hello world", out, &n, &req), R_ECHO);
    CHECK(RENDERED(out, n, "ECHO[hello]"));
    CHECK_EQ(ANSWER(t, "ECHO hi", out, &n, &req), R_ECHO);
    CHECK(RENDERED(out, n, "ECHO[hi]"));
    CHECK_EQ(req.field_len[SP_RULE_FIELD_ECHO], 2);
    CHECK_EQ(ANSWER(t, "ECHO ", out, &n, &req), R_ECHO);
    CHECK(RENDERED(out, n, "ECHO[]"));
    CHECK_EQ(ANSWER(t, "ECHO 12345", out, &n, &req), R_ECHO);
    CHECK(RENDERED(out, n, "ECHO[12345]"));
    CHECK_EQ(ANSWER(t, "ECHO 123456", out, &n, &req), R_ECHO);
    CHECK(RENDERED(out, n, "ECHO[12345]"));
    sp_table_free(t);
}

/* Eight rules (first byte 'a' + k) over every combination of odd and even echo
 * offsets, insertion points and lengths, keyed or not, against random payloads. */
static void test_sums(void)
{
    struct sp_table_builder *b = sp_table_builder_new();
    struct sp_rules *rs = rules_new(8);
    for (unsigned k = 0; k < 8; k++) {
        uint8_t bytes[32];
        uint16_t len = (uint16_t)(11 + k), at = (uint16_t)(3 + (k >> 1 & 1)), copy = (uint16_t)(1 + k % 3);
        for (unsigned i = 0; i < len; i++)
            bytes[i] = (uint8_t)rnd();
        struct sp_patch p[] = {
            {.op = SP_PATCH_INSERT, .field = (k & 4) ? SP_RULE_FIELD_KEY : SP_RULE_FIELD_ECHO, .dst = at},
            {.op = SP_PATCH_COPY, .field = SP_RULE_FIELD_PAYLOAD, .dst = (uint16_t)(len - copy),
             .src = (uint16_t)(k & 1), .len = copy},
            {.op = SP_PATCH_COPY_BITS, .field = SP_RULE_FIELD_PAYLOAD, .dst = 1, .src = 1, .mask = 0x5a},
        };
        CHECK_EQ(sp_table_add_response(b, bytes, len, p, 3, 0), k);
        struct sp_rule *r = &rs->rule[k];
        char m[2] = {(char)('a' + k), 0};
        set_match(r, 0, m, (uint16_t)(2 + (k & 1)));
        r->echo_off = (uint16_t)(1 + (k & 1));
        r->echo_end = (k & 2) ? SP_RULE_TO_END : (uint16_t)(r->echo_off + 7);
        if (k & 4)
            set_key(r, k, 2, SP_RULE_TO_END, " ");
        r->response = k;
    }
    CHECK_EQ(sp_table_set_program(b, rs, (uint32_t)rules_size(8)), 0);
    free(rs);
    struct sp_table *t = sp_table_builder_finish(b);
    char err[128] = "";
    CHECK_EQ(sp_rules_check(t, err, sizeof(err)), 0);
    const struct sp_rules *rules = sp_rules_of(t);

    rng_state = 20261121;
    uint8_t payload[300], out[CAP];
    int rendered = 0, wrong = 0, odd = 0;
    for (int i = 0; i < 10000; i++) {
        size_t len = rnd() % sizeof(payload);
        for (size_t j = 0; j < len; j++)
            payload[j] = (rnd() & 7) ? (uint8_t)rnd() : ' ';
        if (len)
            payload[0] = (uint8_t)('a' + rnd() % 8);
        struct sp_request req;
        const struct sp_response *r = sp_rules_find(t, rules, payload, len, &req);
        if (!r)
            continue;
        size_t n = sp_response_render(t, r, &req, out, sizeof(out));
        if (!n)
            continue;                    /* the COPY source lies beyond a short payload */
        rendered++;
        odd += n & 1;
        wrong += sp_csum_fold(sp_response_sum(t, r, &req)) != sp_csum_fold(sp_csum_partial(out, n, 0));
    }
    CHECK_EQ(wrong, 0);
    CHECK(rendered > 9500);
    CHECK(odd > 3000 && rendered - odd > 3000);
    sp_table_free(t);
}

/* ---- validation ---- */

static struct sp_table *with_program(const void *program, size_t len)
{
    struct sp_table_builder *b = sp_table_builder_new();
    add_plain(b, "zero");
    add_plain(b, "one");
    if (program)
        CHECK_EQ(sp_table_set_program(b, program, (uint32_t)len), 0);
    return sp_table_builder_finish(b);
}

/* sp_rules_check on a two-rule list whose rule 1 is `bad`; its verdict, and the
 * reason must name rule 1 and contain `why`. */
static void check_rule(const struct sp_rule *bad, const char *why)
{
    struct sp_rules *rs = rules_new(2);
    set_match(&rs->rule[0], 0, "OK", 2);
    rs->rule[1] = *bad;
    struct sp_table *t = with_program(rs, rules_size(2));
    char err[128] = "";
    int v = sp_rules_check(t, err, sizeof(err));
    if (why) {
        CHECK_EQ(v, -1);
        CHECK(strncmp(err, "rule 1: ", 8) == 0 && strstr(err, why) != NULL);
        if (v != -1 || !strstr(err, why))
            fprintf(stderr, "  (expected \"%s\", got \"%s\")\n", why, err);
    } else {
        CHECK_EQ(v, 0);
        if (v)
            fprintf(stderr, "  (unexpected: %s)\n", err);
    }
    sp_table_free(t);
    free(rs);
}

static void test_check(void)
{
    struct sp_rule good;
    memset(&good, 0, sizeof(good));
    set_match(&good, 2, "GET ", 8);
    set_key(&good, 1, 6, SP_RULE_TO_END, "\r\n");
    good.echo_off = 8;
    good.echo_end = SP_RULE_TO_END;
    good.response = 1;
    check_rule(&good, NULL);
    struct sp_rule r = good;
    r.response = SP_RULE_NO_RESPONSE;
    check_rule(&r, NULL);

    r = good;
    r.min_len = 5;                              /* match bytes [2, 6) beyond it */
    check_rule(&r, "match");
    r = good;
    r.match_len = SP_RULE_MATCH_MAX + 1;
    r.min_len = 100;
    check_rule(&r, "match");
    r = good;
    r.nstops = SP_RULE_STOPS + 1;
    check_rule(&r, "stop");
    r = good;
    r.key_off = 9;                              /* beyond min_len */
    check_rule(&r, "key");
    r = good;
    r.key_end = 5;                              /* before key_off */
    check_rule(&r, "key");
    r = good;
    r.echo_off = 9;
    check_rule(&r, "echo");
    r = good;
    r.echo_end = 7;
    check_rule(&r, "echo");
    r = good;
    r.response = 2;                             /* the table has two */
    check_rule(&r, "response");
    r = good;
    r.tag = sp_rule_tag(0);                     /* rule 0's namespace */
    check_rule(&r, "namespace");
    r.keyed = 0;                                /* unkeyed: its tag is never used */
    check_rule(&r, NULL);

    char err[128];
    struct sp_rules *rs = rules_new(3);         /* room for a program one byte too long */
    rs->nrules = 2;
    set_match(&rs->rule[0], 0, "OK", 2);
    rs->rule[1] = good;
    /* wrong lengths: one byte more or less than two rules, or a rule count past the max */
    struct sp_table *t = with_program(rs, rules_size(2) + 1);
    strcpy(err, "");
    CHECK_EQ(sp_rules_check(t, err, sizeof(err)), -1);
    CHECK(strstr(err, "rules in") != NULL);
    sp_table_free(t);
    t = with_program(rs, rules_size(2) - 1);
    CHECK_EQ(sp_rules_check(t, err, sizeof(err)), -1);
    sp_table_free(t);
    struct sp_rules *many = rules_new(SP_RULES_MAX + 1);
    for (unsigned i = 0; i <= SP_RULES_MAX; i++)
        set_match(&many->rule[i], 0, "OK", 2);
    t = with_program(many, rules_size(SP_RULES_MAX + 1));
    CHECK_EQ(sp_rules_check(t, err, sizeof(err)), -1);
    sp_table_free(t);
    many->nrules = SP_RULES_MAX;
    t = with_program(many, rules_size(SP_RULES_MAX));
    CHECK_EQ(sp_rules_check(t, err, sizeof(err)), 0);
    sp_table_free(t);
    free(many);
    /* the wrong magic: no rule list at all */
    rs->magic ^= 1;
    t = with_program(rs, rules_size(2));
    CHECK(sp_rules_of(t) == NULL);
    strcpy(err, "");
    CHECK_EQ(sp_rules_check(t, err, sizeof(err)), -1);
    CHECK(strstr(err, "no rule list") != NULL);
    sp_table_free(t);
    rs->magic ^= 1;
    /* a program shorter than a rule list's header */
    t = with_program(rs, 4);
    CHECK(sp_rules_of(t) == NULL);
    CHECK_EQ(sp_rules_check(t, err, sizeof(err)), -1);
    sp_table_free(t);
    /* no program: a table built for serve-dns */
    t = with_program(NULL, 0);
    size_t len = 99;
    CHECK(sp_table_program(t, &len) == NULL);
    CHECK_EQ(len, 0);
    CHECK(sp_rules_of(t) == NULL);
    CHECK_EQ(sp_rules_check(t, err, sizeof(err)), -1);
    sp_table_free(t);
    /* empty programs are refused */
    struct sp_table_builder *b = sp_table_builder_new();
    CHECK_EQ(sp_table_set_program(b, rs, 0), -1);
    sp_table_builder_free(b);
    free(rs);
}

static void test_flat(void)
{
    struct sp_table *t = kv_table();
    size_t plen, flen;
    const void *prog = sp_table_program(t, &plen);
    CHECK(prog != NULL && plen == rules_size(RULE_COUNT));
    CHECK_EQ((uintptr_t)prog % 8, 0);
    size_t size = sp_table_flat_size(t);
    CHECK_EQ(size % 64, 0);
    void *mem = aligned_alloc(64, size);
    struct sp_table *flat = sp_table_flatten(t, mem);
    CHECK(sp_table_is_flat(flat));
    const void *fprog = sp_table_program(flat, &flen);
    CHECK(fprog != NULL && flen == plen && memcmp(fprog, prog, plen) == 0);
    CHECK_EQ((uintptr_t)fprog % 8, 0);
    CHECK(sp_rules_of(flat) != NULL);
    char err[128];
    CHECK_EQ(sp_rules_check(flat, err, sizeof(err)), 0);
    sp_table_free(t);                         /* the flat copy stands alone */

    /* copied elsewhere (a file) and rebased */
    void *copy = aligned_alloc(64, size);
    memcpy(copy, mem, size);
    memset(mem, 0xa5, size);
    CHECK(sp_table_flat_rebase(copy, size - 64) == NULL);
    struct sp_table *moved = sp_table_flat_rebase(copy, size);
    CHECK(moved != NULL);
    if (moved) {
        const void *mprog = sp_table_program(moved, &flen);
        CHECK(mprog != NULL && flen == plen && (uintptr_t)mprog % 8 == 0);
        CHECK((const uint8_t *)mprog > (const uint8_t *)copy &&
              (const uint8_t *)mprog + flen <= (const uint8_t *)copy + size);
        CHECK_EQ(sp_rules_check(moved, err, sizeof(err)), 0);
        uint8_t out[CAP];
        size_t n;
        struct sp_request req;
        CHECK_EQ(ANSWER(moved, "GET key\r\n", out, &n, &req), R_VALUE);
        CHECK(RENDERED(out, n, "VALUE key\r\n"));
        CHECK_EQ(ANSWER(moved, "ECHO hi", out, &n, &req), R_ECHO);
        CHECK(RENDERED(out, n, "ECHO[hi]"));
        CHECK_EQ(ANSWER(moved, "DEL nokey", out, &n, &req), -1);
        sp_table_free(moved);                 /* a flat table: left alone */
    }
    free(mem);
    free(copy);
}

/* ---- frames ---- */

static struct sp_frame_config config(void)
{
    struct sp_frame_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.port = PORT;
    cfg.ttl = 64;
    memcpy(cfg.mac, SERVER_MAC, 6);
    return cfg;
}

/* A UDP frame from the peer to the server with correct checksums. */
static size_t make_frame(uint8_t *f, int family, int vlan, uint16_t dport, const char *payload,
                         size_t plen)
{
    size_t l2 = vlan ? 18 : 14;
    memcpy(f, SERVER_MAC, 6);
    memcpy(f + 6, PEER_MAC, 6);
    if (vlan) {
        sp_put16(f + 12, 0x8100);
        sp_put16(f + 14, 42);
    }
    sp_put16(f + l2 - 2, family == 4 ? 0x0800 : 0x86dd);
    size_t ip = l2, udp = ip + (family == 4 ? 20 : 40);
    uint16_t ulen = (uint16_t)(8 + plen);
    uint8_t *h = f + ip;
    if (family == 4) {
        memset(h, 0, 20);
        h[0] = 0x45;
        sp_put16(h + 2, (uint16_t)(20 + ulen));
        h[8] = 64;
        h[9] = 17;
        memcpy(h + 12, PEER_V4, 4);
        memcpy(h + 16, SERVER_V4, 4);
        sp_put16(h + 10, sp_csum_fold(sp_csum_partial(h, 20, 0)));
    } else {
        memset(h, 0, 40);
        h[0] = 0x60;
        sp_put16(h + 4, ulen);
        h[6] = 17;
        h[7] = 64;
        memcpy(h + 8, PEER_V6, 16);
        memcpy(h + 24, SERVER_V6, 16);
    }
    sp_put16(f + udp, 40000);
    sp_put16(f + udp + 2, dport);
    sp_put16(f + udp + 4, ulen);
    sp_put16(f + udp + 6, 0);
    memcpy(f + udp + 8, payload, plen);
    uint32_t sum = family == 4 ? sp_csum_partial(h + 12, 8, 0) : sp_csum_partial(h + 8, 32, 0);
    sum = sp_csum_partial(f + udp, ulen, sum + 17u + ulen);
    uint16_t check = sp_csum_fold(sum);
    sp_put16(f + udp + 6, check ? check : 0xffff);
    return udp + ulen;
}

/* The reply to rx: swapped MACs, addresses and ports, right lengths and checksums,
 * and the payload want. */
static void check_reply(const uint8_t *rx, const uint8_t *tx, size_t n, const char *want,
                        size_t want_len)
{
    size_t l2 = sp_get16(rx + 12) == 0x8100 ? 18 : 14;
    int v4 = (rx[l2] >> 4) == 4;
    size_t iplen = v4 ? 20 : 40, alen = v4 ? 4 : 16, udp = l2 + iplen;
    CHECK_EQ(n, udp + 8 + want_len);
    if (n != udp + 8 + want_len)
        return;
    CHECK(memcmp(tx, rx + 6, 6) == 0);
    CHECK(memcmp(tx + 6, rx, 6) == 0);
    CHECK(memcmp(tx + 12, rx + 12, l2 - 12) == 0);
    const uint8_t *qi = rx + l2, *ri = tx + l2;
    size_t src = v4 ? 12 : 8;
    CHECK(memcmp(ri + src, qi + src + alen, alen) == 0);
    CHECK(memcmp(ri + src + alen, qi + src, alen) == 0);
    if (v4) {
        CHECK_EQ(ri[0], 0x45);
        CHECK_EQ(sp_get16(ri + 2), n - l2);
        CHECK_EQ(ri[9], 17);
        CHECK_EQ(sp_csum_fold(sp_csum_partial(ri, 20, 0)), 0);     /* header checksum */
    } else {
        CHECK_EQ(ri[0] >> 4, 6);
        CHECK_EQ(sp_get16(ri + 4), n - udp);
        CHECK_EQ(ri[6], 17);
    }
    CHECK_EQ(sp_get16(tx + udp), sp_get16(rx + udp + 2));
    CHECK_EQ(sp_get16(tx + udp + 2), sp_get16(rx + udp));
    CHECK_EQ(sp_get16(tx + udp + 4), n - udp);
    CHECK(sp_get16(tx + udp + 6) != 0);
    uint32_t sum = sp_csum_partial(ri + src, 2 * alen, 0) + 17u + (uint32_t)(n - udp);
    sum = sp_csum_partial(tx + udp, n - udp, sum);
    CHECK_EQ(sp_csum_fold(sum), 0);                                  /* UDP checksum */
    CHECK(memcmp(tx + udp + 8, want, want_len) == 0);
}

struct run {
    size_t n;
    bool to_slow;
    struct sp_slow_packet slow;
    struct sp_frame_counters c;
    struct sp_responder_counters rc;
};

static struct run frame(const struct sp_table *t, const struct sp_frame_config *cfg, bool all,
                        const uint8_t *rx, size_t len, uint8_t *tx, size_t cap)
{
    static struct sp_dns_worker dns = {.cfg = {.max_udp = 1232}};
    struct run r;
    memset(&r, 0, sizeof(r));
    r.to_slow = !all;                 /* overwritten either way */
    r.n = sp_responder_frame(t, sp_rules_of(t), cfg, all, &(struct sp_frame){.data = (uint8_t *)rx, .len = (uint32_t)len}, tx, cap, &dns, &r.c, &r.rc, &r.slow,
                             &r.to_slow);
    return r;
}

#define PAYLOAD(s) s, sizeof(s) - 1

static void test_frames(void)
{
    struct sp_table *t = kv_table();
    struct sp_frame_config cfg = config();
    uint8_t rx[CAP], tx[CAP];
    struct run r;
    /* rule answers, both families, with and without a VLAN tag */
    for (int family = 4; family <= 6; family += 2)
        for (int vlan = 0; vlan < 2; vlan++)
            for (int all = 0; all < 2; all++) {
                size_t len = make_frame(rx, family, vlan, PORT, PAYLOAD("GET key\r\n"));
                r = frame(t, &cfg, all, rx, len, tx, CAP);
                CHECK(!r.to_slow);
                CHECK_EQ(r.slow.udp, 1);
                CHECK_EQ(r.rc.rule_answers, 1);
                check_reply(rx, tx, r.n, PAYLOAD("VALUE key\r\n"));
                len = make_frame(rx, family, vlan, PORT, PAYLOAD("ECHO odd"));
                r = frame(t, &cfg, all, rx, len, tx, CAP);
                check_reply(rx, tx, r.n, PAYLOAD("ECHO[odd]"));
                len = make_frame(rx, family, vlan, PORT, PAYLOAD("ID\x01\x02\x03\x04"));
                r = frame(t, &cfg, all, rx, len, tx, CAP);
                check_reply(rx, tx, r.n, PAYLOAD("\x01\x02\x03\x04 OK"));
            }

    /* UDP to the port that no rule answers: the slow path, with its headers */
    size_t len = make_frame(rx, 4, 0, PORT, PAYLOAD("xyz"));
    r = frame(t, &cfg, false, rx, len, tx, CAP);
    CHECK_EQ(r.n, 0);
    CHECK(r.to_slow);
    CHECK_EQ(r.slow.udp, 1);
    CHECK_EQ(r.slow.fq.l2, 14);
    CHECK_EQ(r.slow.fq.headers, 42);
    CHECK_EQ(r.slow.fq.u.payload_len, 3);
    CHECK_EQ(r.slow.fq.u.sport, 40000);
    CHECK_EQ(r.rc.rule_answers, 0);

    /* an answer too big for the frame (or the MTU): no reply, not the slow path */
    len = make_frame(rx, 4, 0, PORT, PAYLOAD("GET key\r\n"));
    r = frame(t, &cfg, true, rx, len, tx, 42 + 10);
    CHECK_EQ(r.n, 0);
    CHECK(!r.to_slow);
    CHECK_EQ(r.rc.rule_unsent, 1);
    r = frame(t, &cfg, true, rx, len, tx, 42 + 11);
    check_reply(rx, tx, r.n, PAYLOAD("VALUE key\r\n"));
    struct sp_frame_config small = cfg;
    small.mtu = 28 + 10;
    r = frame(t, &small, true, rx, len, tx, CAP);
    CHECK_EQ(r.n, 0);
    CHECK_EQ(r.rc.rule_unsent, 1);
    small.mtu = 28 + 11;
    r = frame(t, &small, true, rx, len, tx, CAP);
    check_reply(rx, tx, r.n, PAYLOAD("VALUE key\r\n"));
    r = frame(t, &cfg, true, rx, len, tx, 42);        /* no room at all */
    CHECK_EQ(r.n, 0);
    CHECK(!r.to_slow);

    /* ARP, and UDP to another port: the slow path's only with all */
    uint8_t arp[42] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 2, 0x08, 0x06,
                       0, 1, 0x08, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 2, 198, 18, 0, 2,
                       0, 0, 0, 0, 0, 0, 198, 18, 0, 1};
    r = frame(t, &cfg, false, arp, sizeof(arp), tx, CAP);
    CHECK(r.n == 0 && !r.to_slow);
    r = frame(t, &cfg, true, arp, sizeof(arp), tx, CAP);
    CHECK(r.n == 0 && r.to_slow);
    CHECK_EQ(r.slow.udp, 0);
    CHECK_EQ(r.c.not_ours, 1);
    len = make_frame(rx, 6, 1, PORT + 1, PAYLOAD("GET key\r\n"));
    r = frame(t, &cfg, false, rx, len, tx, CAP);
    CHECK(r.n == 0 && !r.to_slow);
    r = frame(t, &cfg, true, rx, len, tx, CAP);
    CHECK(r.n == 0 && r.to_slow && !r.slow.udp);

    /* damaged frames and group sources: dropped, never the slow path */
    for (int all = 0; all < 2; all++) {
        for (int family = 4; family <= 6; family += 2) {
            len = make_frame(rx, family, 0, PORT, PAYLOAD("GET key\r\n"));
            size_t udp = family == 4 ? 34 : 54;
            rx[udp + 6] ^= 0x01;                    /* the UDP checksum */
            r = frame(t, &cfg, all, rx, len, tx, CAP);
            CHECK(r.n == 0 && !r.to_slow);
            CHECK_EQ(r.c.malformed, 1);
            CHECK_EQ(r.rc.rule_answers, 0);
            len = make_frame(rx, family, 0, PORT, PAYLOAD("xyz"));   /* unanswered payload too */
            rx[len - 1] ^= 0x40;
            r = frame(t, &cfg, all, rx, len, tx, CAP);
            CHECK(r.n == 0 && !r.to_slow);
        }
        len = make_frame(rx, 4, 0, PORT, PAYLOAD("GET key\r\n"));
        rx[14 + 10] ^= 0x01;                        /* the IPv4 header checksum */
        r = frame(t, &cfg, all, rx, len, tx, CAP);
        CHECK(r.n == 0 && !r.to_slow);
        len = make_frame(rx, 4, 0, PORT, PAYLOAD("GET key\r\n"));
        rx[6] |= 1;                                 /* from a group MAC */
        r = frame(t, &cfg, all, rx, len, tx, CAP);
        CHECK(r.n == 0 && !r.to_slow);
        CHECK_EQ(r.c.bad_source, 1);
        len = make_frame(rx, 4, 0, PORT, PAYLOAD("GET key\r\n"));
        r = frame(t, &cfg, all, rx, len - 1, tx, CAP);   /* truncated: not parsed as UDP */
        CHECK(r.n == 0 && !r.slow.udp && r.to_slow == all);
        r = frame(t, &cfg, all, rx, 10, tx, CAP);        /* not even Ethernet */
        CHECK(r.n == 0 && !r.to_slow);
    }

    /* a table without a rule list: every UDP frame to the port is the slow path's */
    struct sp_table *none = with_program(NULL, 0);
    len = make_frame(rx, 4, 0, PORT, PAYLOAD("GET key\r\n"));
    r = frame(none, &cfg, false, rx, len, tx, CAP);
    CHECK(r.n == 0 && r.to_slow && r.slow.udp);
    sp_table_free(none);
    sp_table_free(t);
}

static void test_datagrams(void)
{
    struct sp_table *t = kv_table();
    struct sp_dns_worker dns = {.cfg = {.max_udp = 1232}};
    struct sp_frame_counters c;
    struct sp_responder_counters rc;
    memset(&c, 0, sizeof(c));
    memset(&rc, 0, sizeof(rc));
    uint8_t tx[CAP];
    bool to_slow = true, replied;
    size_t n = sp_responder_datagram(t, sp_rules_of(t), (const uint8_t *)"GET key\r\n", 9, tx, CAP, &dns,
                                     &c, &rc, &to_slow, &replied);
    CHECK(RENDERED(tx, n, "VALUE key\r\n"));
    CHECK(!to_slow && replied);
    CHECK_EQ(rc.rule_answers, 1);
    CHECK_EQ(c.frames, 1);
    n = sp_responder_datagram(t, sp_rules_of(t), (const uint8_t *)"xyz", 3, tx, CAP, &dns, &c, &rc,
                              &to_slow, &replied);
    CHECK(n == 0 && to_slow);
    n = sp_responder_datagram(t, sp_rules_of(t), (const uint8_t *)"GET key\r\n", 9, tx, 10, &dns, &c,
                              &rc, &to_slow, &replied);
    CHECK(n == 0 && !to_slow);
    CHECK_EQ(rc.rule_unsent, 1);
    n = sp_responder_datagram(t, sp_rules_of(t), (const uint8_t *)"GET key\r\n", 9, tx, 11, &dns, &c,
                              &rc, &to_slow, &replied);
    CHECK_EQ(n, 11);
    CHECK_EQ(rc.rule_answers, 2);
    sp_table_free(t);
}

/* dns set: DNS from the table, names marked SP_RESPONSE_SLOW_PATH to the handler. */
static void test_dns_mode(void)
{
    static const struct sp_patch patches[] = {
        {.op = SP_PATCH_INSERT, .field = SP_DNS_FIELD_QUESTION, .dst = 12},
        {.op = SP_PATCH_COPY, .field = SP_DNS_FIELD_MESSAGE, .dst = 0, .src = 0, .len = 2},
    };
    const uint8_t a[] = {0, 0, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 0,
                         0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1};
    const char *www = "\x03www\x07" "example\x03" "com", *py = "\x02py\x07" "example\x03" "com";
    struct sp_table_builder *b = sp_table_builder_new();
    CHECK_EQ(sp_table_add_response(b, a, sizeof(a), patches, 2, SP_RCODE_NOERROR), 0);
    CHECK_EQ(sp_table_add_response(b, a, sizeof(a), patches, 2,
                                   SP_RCODE_NOERROR | SP_RESPONSE_SLOW_PATH), 1);
    CHECK_EQ(sp_table_add_key(b, sp_dns_tag(SP_DNS_EXACT, 1, 1), (const uint8_t *)www, 17, 0), 0);
    CHECK_EQ(sp_table_add_key(b, sp_dns_tag(SP_DNS_EXACT, 1, 1), (const uint8_t *)py, 16, 1), 0);
    struct sp_rules *rs = rules_new(0);
    rs->dns = 1;
    CHECK_EQ(sp_table_set_program(b, rs, (uint32_t)rules_size(0)), 0);
    free(rs);
    struct sp_table *t = sp_table_builder_finish(b);
    char err[128];
    CHECK_EQ(sp_rules_check(t, err, sizeof(err)), 0);
    struct sp_frame_config cfg = config();
    uint8_t q[64], rx[CAP], tx[CAP];
    const uint8_t head[12] = {0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    for (int name = 0; name < 2; name++) {
        memcpy(q, head, 12);
        size_t nlen = name ? 16 : 17;
        memcpy(q + 12, name ? py : www, nlen);
        memcpy(q + 12 + nlen, "\0\1\0\1", 4);
        size_t qlen = 16 + nlen;
        struct run r;
        size_t len = make_frame(rx, 4, 0, PORT, (const char *)q, qlen);
        r = frame(t, &cfg, false, rx, len, tx, CAP);
        CHECK_EQ(r.to_slow, name == 1);
        CHECK_EQ(r.n != 0, name == 0);
        if (r.n) {
            CHECK_EQ(sp_get16(tx + 42), 0xbeef);
            CHECK_EQ(r.n, 42 + sizeof(a) + qlen - 12);
        }
        struct sp_dns_worker dns = {.cfg = {.max_udp = 1232}};
        bool to_slow, replied;
        size_t n = sp_responder_datagram(t, sp_rules_of(t), q, qlen, tx, CAP, &dns, &r.c, &r.rc,
                                         &to_slow, &replied);
        CHECK_EQ(to_slow, name == 1);
        CHECK_EQ(n != 0, name == 0);
    }
    sp_table_free(t);
}

/* ---- slow-path replies ---- */

static void test_replies(void)
{
    struct sp_table *t = kv_table();
    struct sp_frame_config cfg = config();
    uint8_t rx[CAP], buf[CAP + 1];
    for (int family = 4; family <= 6; family += 2) {
        size_t len = make_frame(rx, family, family == 6, PORT, PAYLOAD("xyz"));
        struct run r = frame(t, &cfg, false, rx, len, buf, CAP);
        CHECK(r.to_slow && r.slow.udp);
        struct sp_frame rxf = {.data = rx, .len = (uint32_t)len, .cap = CAP, .id = 42};
        r.slow.frame = &rxf;
        size_t headers = r.slow.fq.headers;
        CHECK_EQ(headers, family == 4 ? 42 : 18 + 48);

        struct sp_frame tx = {.data = buf, .cap = CAP};
        CHECK(sp_responder_reply(&cfg, false, &r.slow, (const uint8_t *)"pong!", 5, &tx));
        size_t n = tx.len;
        CHECK_EQ(n, headers + 5);
        check_reply(rx, buf, n, PAYLOAD("pong!"));
        /* odd and even lengths, up to the frame's room exactly */
        uint8_t payload[CAP];
        for (size_t i = 0; i < sizeof(payload); i++)
            payload[i] = (uint8_t)rnd();
        tx.cap = (uint32_t)(headers + 101);
        CHECK(sp_responder_reply(&cfg, false, &r.slow, payload, 101, &tx) && tx.len == headers + 101);
        check_reply(rx, buf, tx.len, (const char *)payload, 101);
        CHECK(sp_responder_reply(&cfg, false, &r.slow, payload, 100, &tx) && tx.len == headers + 100);
        check_reply(rx, buf, tx.len, (const char *)payload, 100);
        tx.len = 7;
        CHECK(!sp_responder_reply(&cfg, false, &r.slow, payload, 102, &tx));
        CHECK_EQ(tx.len, 7);                        /* untouched */
        tx.cap = CAP;
        CHECK(!sp_responder_reply(&cfg, false, &r.slow, payload, CAP - headers + 1, &tx));
        /* the MTU */
        struct sp_frame_config small = cfg;
        small.mtu = (uint16_t)(headers - (family == 4 ? 14 : 18) + 50);
        CHECK(sp_responder_reply(&small, false, &r.slow, payload, 50, &tx) && tx.len == headers + 50);
        CHECK(!sp_responder_reply(&small, false, &r.slow, payload, 51, &tx));
        /* not UDP: nothing to reply to */
        struct sp_slow_packet not_udp = r.slow;
        not_udp.udp = 0;
        CHECK(!sp_responder_reply(&cfg, false, &not_udp, payload, 5, &tx));

        /* sockets: the payload alone, to the request's peer */
        tx.cap = 64;
        tx.id = 0;
        CHECK(sp_responder_reply(&cfg, true, &r.slow, payload, 64, &tx) && tx.len == 64);
        CHECK_EQ(tx.len, 64);
        CHECK_EQ(tx.id, 42);
        CHECK(memcmp(buf, payload, 64) == 0);
        CHECK(!sp_responder_reply(&cfg, true, &r.slow, payload, 65, &tx));
        CHECK(!sp_responder_reply(&cfg, true, &not_udp, payload, 5, &tx));
        tx.len = 7;                                 /* an empty payload: an empty datagram */
        CHECK(sp_responder_reply(&cfg, true, &r.slow, payload, 0, &tx) && tx.len == 0);
    }

    /* whole frames: at least an Ethernet header, at most the MTU behind it */
    uint8_t f[CAP];
    memset(f, 0x11, sizeof(f));
    struct sp_frame tx = {.data = buf, .cap = CAP};
    CHECK_EQ(sp_responder_raw(&cfg, false, f, 13, &tx), 0);
    CHECK_EQ(sp_responder_raw(&cfg, false, f, 14, &tx), 14);
    CHECK_EQ(tx.len, 14);
    CHECK_EQ(sp_responder_raw(&cfg, true, f, 60, &tx), 0);    /* sockets send no frames */
    struct sp_frame_config mtu = cfg;
    mtu.mtu = 1500;
    CHECK_EQ(sp_responder_raw(&mtu, false, f, 1518, &tx), 1518);
    CHECK(memcmp(buf, f, 1518) == 0);
    CHECK_EQ(sp_responder_raw(&mtu, false, f, 1519, &tx), 0);
    tx.cap = 100;                                              /* and the buffer */
    CHECK_EQ(sp_responder_raw(&cfg, false, f, 100, &tx), 100);
    CHECK_EQ(sp_responder_raw(&cfg, false, f, 101, &tx), 0);
    CHECK_EQ(sp_responder_raw(&mtu, false, f, 101, &tx), 0);
    sp_table_free(t);
}

int main(void)
{
    test_match();
    test_keys();
    test_patches();
    test_sums();
    test_check();
    test_flat();
    test_frames();
    test_datagrams();
    test_dns_mode();
    test_replies();
    free(last_payload);
    return check_report("test_rules");
}
