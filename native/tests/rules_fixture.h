/* What the rule tests share (test_rules.c, test_responder.c): rule lists built by
 * hand and the key-value table most tests answer from. */
#ifndef STORMPY_RULES_FIXTURE_H
#define STORMPY_RULES_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stormpy/app/dns/dns.h"
#include "stormpy/app/rules/rules.h"
#include "stormpy/engine/frame.h"
#include "stormpy/proto/csum.h"
#include "stormpy/proto/wire.h"

#define CAP 2048

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

#define RENDERED(out, n, s) ((n) == sizeof(s) - 1 && memcmp(out, s, sizeof(s) - 1) == 0)

/* A table of two plain responses with this program (NULL: none). */
static struct sp_table *with_program(const void *program, size_t len)
{
    struct sp_table_builder *b = sp_table_builder_new();
    add_plain(b, "zero");
    add_plain(b, "one");
    if (program)
        CHECK_EQ(sp_table_set_program(b, program, (uint32_t)len), 0);
    return sp_table_builder_finish(b);
}

#endif
