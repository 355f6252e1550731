/* Custom responders' rules: matching, keyed lookups, rendering against the request
 * fields, rule-list validation and the program in flat tables. The frame, datagram
 * and slow-path reply functions are test_responder.c's. */
#include "rules_fixture.h"

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

int main(void)
{
    test_match();
    test_keys();
    test_patches();
    test_sums();
    test_check();
    test_flat();
    free(last_payload);
    return check_report("test_rules");
}
