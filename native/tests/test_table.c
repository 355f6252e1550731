/* The response table: lookup, patches, and the incremental checksum. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stormpy/engine/table_ref.h"
#include "stormpy/proto/csum.h"
#include "../engine/table_layout.h"

static const struct sp_patch DNS_LIKE[] = {
    {.op = SP_PATCH_INSERT, .field = 1, .dst = 12},
    {.op = SP_PATCH_COPY, .field = 0, .dst = 0, .src = 0, .len = 2},
    {.op = SP_PATCH_COPY_BITS, .field = 0, .dst = 2, .src = 2, .mask = 0x01},
    {.op = SP_PATCH_COPY_BITS, .field = 0, .dst = 3, .src = 3, .mask = 0x10},
};

static void test_lookup(void)
{
    struct sp_table_builder *b = sp_table_builder_new();
    uint8_t resp[16] = {0};
    char key[32];
    for (int i = 0; i < 5000; i++) {
        resp[15] = (uint8_t)i;
        int64_t r = sp_table_add_response(b, resp, sizeof(resp), NULL, 0, (uint32_t)i);
        CHECK_EQ(r, i);
        int n = snprintf(key, sizeof(key), "key-%d", i);
        CHECK_EQ(sp_table_add_key(b, (uint64_t)(i % 3), (uint8_t *)key, (uint32_t)n, (uint32_t)r), 0);
    }
    /* the same key again: the later response wins */
    CHECK_EQ(sp_table_add_key(b, 0, (const uint8_t *)"key-0", 5, 7), 0);
    CHECK_EQ(sp_table_add_key(b, 0, (const uint8_t *)"x", 1, 99999), -1);   /* no such response */
    struct sp_table *t = sp_table_builder_finish(b);
    CHECK(t != NULL);
    int found = 0;
    for (int i = 1; i < 5000; i++) {
        int n = snprintf(key, sizeof(key), "key-%d", i);
        const struct sp_response *r = sp_table_find(t, (uint64_t)(i % 3), (uint8_t *)key, (size_t)n);
        found += r != NULL && r->user == (uint32_t)i;
        /* the tag is part of the key */
        CHECK(sp_table_find(t, (uint64_t)(i % 3) + 1, (uint8_t *)key, (size_t)n) == NULL);
    }
    CHECK_EQ(found, 4999);
    const struct sp_response *r0 = sp_table_find(t, 0, (const uint8_t *)"key-0", 5);
    CHECK(r0 && r0->user == 7);
    CHECK(sp_table_find(t, 0, (const uint8_t *)"key-", 4) == NULL);
    CHECK(sp_table_find(t, 0, (const uint8_t *)"", 0) == NULL);
    struct sp_table_info info;
    sp_table_get_info(t, &info);
    CHECK_EQ(info.keys, 5001);
    CHECK_EQ(info.responses, 5000);
    CHECK(info.slots >= 2 * info.keys);
    sp_table_free(t);
}

/* A key of every length is found by the hash a parser makes on the way
 * (sp_key_hash_padded()), which must be the one the builder placed it by. */
static void test_hash_every_length(void)
{
    enum { LONGEST = 255 };
    struct sp_table_builder *b = sp_table_builder_new();
    uint8_t resp[16] = {0}, keys[LONGEST + 1][LONGEST + 8];
    memset(keys, 0, sizeof(keys));
    for (size_t len = 1; len <= LONGEST; len++) {
        for (size_t i = 0; i < len; i++)
            keys[len][i] = (uint8_t)(len * 31 + i * 7);
        int64_t r = sp_table_add_response(b, resp, sizeof(resp), NULL, 0, (uint32_t)len);
        CHECK_EQ(sp_table_add_key(b, 3, keys[len], (uint32_t)len, (uint32_t)r), 0);
    }
    struct sp_table *t = sp_table_builder_finish(b);
    int found = 0, unfound = 0;
    for (size_t len = 1; len <= LONGEST; len++) {
        const struct sp_response *r =
            sp_table_find_hashed(t, 3, sp_key_hash_padded(keys[len], len), keys[len], len);
        found += r != NULL && r->user == len;
        keys[len][len - 1] ^= 1;     /* the last byte counts */
        unfound += sp_table_find_hashed(t, 3, sp_key_hash_padded(keys[len], len), keys[len],
                                        len) == NULL;
    }
    CHECK_EQ(found, LONGEST);
    CHECK_EQ(unfound, LONGEST);
    sp_table_free(t);
}

/* A name's keys under several tags share its bytes; only equal bytes are shared. */
static void test_shared_key_bytes(void)
{
    struct sp_table_builder *b = sp_table_builder_new();
    uint8_t resp[16] = {0};
    for (int i = 0; i < 8; i++) {
        resp[15] = (uint8_t)i;
        CHECK_EQ(sp_table_add_response(b, resp, sizeof(resp), NULL, 0, (uint32_t)i), i);
    }
    const char *keys[] = {"www.one", "www.one", "www.one", "www.two", "www.on", "www.one"};
    for (int i = 0; i < 6; i++)
        CHECK_EQ(sp_table_add_key(b, (uint64_t)i, (const uint8_t *)keys[i], (uint32_t)strlen(keys[i]),
                                  (uint32_t)i), 0);
    struct sp_table *t = sp_table_builder_finish(b);
    CHECK(t != NULL);
    for (int i = 0; i < 6; i++) {
        const struct sp_response *r = sp_table_find(t, (uint64_t)i, (const uint8_t *)keys[i],
                                                    strlen(keys[i]));
        CHECK(r && r->user == (uint32_t)i);
        CHECK(sp_table_find(t, (uint64_t)i, (const uint8_t *)"www.onf", 7) == NULL);
    }
    CHECK(sp_table_find(t, 4, (const uint8_t *)"www.one", 7) == NULL);
    struct sp_table_info info;
    sp_table_get_info(t, &info);
    /* 8 responses of 16 bytes; six 24-byte entries, each 8-byte aligned and followed by
     * its key's bytes unless it shares its predecessor's: "www.one" once for the first
     * three keys, "www.two", "www.on", "www.one" again (not next to its twin); the
     * zeros that align the entries after keys of 7, 7 and 6 bytes; the end padding, which
     * answers' tails are read into (SP_RESPONSE_READ_PAST) */
    CHECK_EQ(info.arena_bytes, 8 * 16 + 6 * 24 + 7 + 7 + 6 + 7 + (1 + 1 + 2) + 64);
    sp_table_free(t);
}

static void test_invalid_patches(void)
{
    struct sp_table_builder *b = sp_table_builder_new();
    uint8_t resp[20] = {0};
    struct sp_patch two_inserts[] = {{.op = SP_PATCH_INSERT, .dst = 2}, {.op = SP_PATCH_INSERT, .dst = 4}};
    struct sp_patch past_end[] = {{.op = SP_PATCH_COPY, .dst = 18, .len = 4}};
    struct sp_patch straddle[] = {{.op = SP_PATCH_INSERT, .dst = 5, .field = 1},
                                  {.op = SP_PATCH_COPY, .dst = 4, .len = 2}};
    struct sp_patch bad_field[] = {{.op = SP_PATCH_COPY, .field = SP_FIELDS, .dst = 0, .len = 1}};
    struct sp_patch bits_in_copy[] = {{.op = SP_PATCH_COPY, .dst = 0, .len = 4},
                                      {.op = SP_PATCH_COPY_BITS, .dst = 2, .mask = 1}};
    struct sp_patch bad_op[] = {{.op = 77, .dst = 0, .len = 1}};
    CHECK_EQ(sp_table_add_response(b, resp, 20, two_inserts, 2, 0), -1);
    CHECK_EQ(sp_table_add_response(b, resp, 20, past_end, 1, 0), -1);
    CHECK_EQ(sp_table_add_response(b, resp, 20, straddle, 2, 0), -1);
    CHECK_EQ(sp_table_add_response(b, resp, 20, bad_field, 1, 0), -1);
    CHECK_EQ(sp_table_add_response(b, resp, 20, bits_in_copy, 2, 0), -1);
    CHECK_EQ(sp_table_add_response(b, resp, 20, bad_op, 1, 0), -1);
    CHECK_EQ(sp_table_add_response(b, resp, 20, DNS_LIKE, 4, 0), 0);
    sp_table_builder_free(b);
}

static void test_render_and_sum(void)
{
    struct sp_table_builder *b = sp_table_builder_new();
    uint8_t stored[40];
    srand(4);
    for (size_t i = 0; i < sizeof(stored); i++)
        stored[i] = (uint8_t)rand();
    CHECK_EQ(sp_table_add_response(b, stored, sizeof(stored), DNS_LIKE, 4, 0), 0);
    CHECK_EQ(sp_table_add_response(b, stored, 13, NULL, 0, 0), 1);   /* no patches, odd length */
    CHECK_EQ(sp_table_add_key(b, 1, (const uint8_t *)"a", 1, 0), 0);
    CHECK_EQ(sp_table_add_key(b, 1, (const uint8_t *)"b", 1, 1), 0);
    struct sp_table *t = sp_table_builder_finish(b);
    const struct sp_response *r = sp_table_find(t, 1, (const uint8_t *)"a", 1);
    const struct sp_response *plain = sp_table_find(t, 1, (const uint8_t *)"b", 1);
    CHECK(r && plain);

    uint8_t msg[64], question[40], out[128];
    for (int round = 0; round < 500; round++) {
        size_t qlen = (size_t)(rand() % 40);   /* odd and even splice lengths */
        for (size_t i = 0; i < sizeof(msg); i++)
            msg[i] = (uint8_t)rand();
        for (size_t i = 0; i < qlen; i++)
            question[i] = (uint8_t)rand();
        struct sp_request req = {.field = {msg, question}, .field_len = {sizeof(msg), (uint16_t)qlen}};
        size_t n = sp_response_render(t, r, &req, out, sizeof(out));
        CHECK_EQ(n, sizeof(stored) + qlen);
        CHECK(memcmp(out, msg, 2) == 0);                                   /* ID copied */
        CHECK_EQ(out[2], (stored[2] & ~1) | (msg[2] & 1));                 /* RD bit */
        CHECK_EQ(out[3], (stored[3] & ~0x10) | (msg[3] & 0x10));           /* CD bit */
        CHECK(memcmp(out + 4, stored + 4, 8) == 0);
        CHECK(memcmp(out + 12, question, qlen) == 0);                      /* spliced */
        CHECK(memcmp(out + 12 + qlen, stored + 12, sizeof(stored) - 12) == 0);
        /* the incremental sum equals a full pass over what was written */
        CHECK_EQ(sp_csum_fold(sp_response_sum(t, r, &req)), sp_csum_fold(sp_csum_partial(out, n, 0)));

        size_t m = sp_response_render(t, plain, &req, out, sizeof(out));
        CHECK_EQ(m, 13);
        CHECK_EQ(sp_csum_fold(sp_response_sum(t, plain, &req)), sp_csum_fold(sp_csum_partial(out, m, 0)));
    }
    /* prefix rendering: the tail is left out, patches inside still apply */
    struct sp_request req = {.field = {msg, question}, .field_len = {sizeof(msg), 3}};
    CHECK_EQ(sp_response_render_prefix(t, r, &req, 20, out, sizeof(out)), 23);
    CHECK(memcmp(out, msg, 2) == 0);
    /* too small a buffer, or a request field too short for a patch: nothing */
    CHECK_EQ(sp_response_render(t, r, &req, out, 20), 0);
    struct sp_request short_msg = {.field = {msg, question}, .field_len = {1, 3}};
    CHECK_EQ(sp_response_render(t, r, &short_msg, out, sizeof(out)), 0);
    /* a request of 3 bytes: no rendering, but the sum is still the patches' (COPY and the
     * first COPY_BITS apply, the second has no byte), which start from the stored head
     * that sum_head leaves out */
    struct sp_request three = {.field = {msg, question}, .field_len = {3, 5}};
    uint8_t want[sizeof(stored) + 5];
    memcpy(want, stored, 12);
    memcpy(want, msg, 2);
    want[2] = (uint8_t)((stored[2] & ~1) | (msg[2] & 1));
    memcpy(want + 12, question, 5);
    memcpy(want + 17, stored + 12, sizeof(stored) - 12);
    CHECK_EQ(sp_csum_fold(sp_response_sum(t, r, &three)),
             sp_csum_fold(sp_csum_partial(want, sizeof(want), 0)));
    sp_table_free(t);
}

/* A compressed answer stored for a question of 10 bytes: a pointer to the question's
 * start (never moved), one at its last 6 bytes and one past it (both moved by the
 * asked question's length less 10), in every rendering, its sum, and a prefix. */
static void test_shifted_pointers(void)
{
    struct sp_table_builder *b = sp_table_builder_new();
    uint8_t stored[24] = {0};
    stored[12] = 0xc0, stored[13] = 12;                       /* the asked name */
    stored[16] = 0xc0, stored[17] = 12 + 4;                   /* its suffix */
    stored[20] = 0xc0, stored[21] = 12 + 10 + 2;              /* a name in the answer */
    struct sp_patch patches[8];
    memcpy(patches, DNS_LIKE, 4 * sizeof(*patches));
    patches[4] = (struct sp_patch){.op = SP_PATCH_SHIFT, .field = 1, .dst = 16, .len = 10};
    patches[5] = (struct sp_patch){.op = SP_PATCH_SHIFT, .field = 1, .dst = 20, .len = 10};
    CHECK_EQ(sp_table_add_response(b, stored, sizeof(stored), patches, 6, 0), 0);
    struct sp_patch before[5], alone[1] = {{.op = SP_PATCH_SHIFT, .field = 1, .dst = 16, .len = 10}};
    memcpy(before, DNS_LIKE, 4 * sizeof(*before));
    before[4] = (struct sp_patch){.op = SP_PATCH_SHIFT, .field = 1, .dst = 4, .len = 10};
    CHECK_EQ(sp_table_add_response(b, stored, sizeof(stored), before, 5, 0), -1);  /* before the splice */
    CHECK_EQ(sp_table_add_response(b, stored, sizeof(stored), alone, 1, 0), -1);   /* no splice */
    before[4].dst = 23;
    CHECK_EQ(sp_table_add_response(b, stored, sizeof(stored), before, 5, 0), -1);  /* past the end */
    CHECK_EQ(sp_table_add_key(b, 1, (const uint8_t *)"a", 1, 0), 0);
    struct sp_table *t = sp_table_builder_finish(b);
    const struct sp_response *r = sp_table_find(t, 1, (const uint8_t *)"a", 1);
    CHECK(r != NULL);
    uint8_t msg[16] = {0}, question[300], out[400];
    for (size_t qlen = 6; qlen <= 259; qlen++) {
        for (size_t i = 0; i < qlen; i++)
            question[i] = (uint8_t)(i * 7 + qlen);
        struct sp_request req = {.field = {msg, question}, .field_len = {sizeof(msg), (uint16_t)qlen}};
        size_t n = sp_response_render(t, r, &req, out, sizeof(out));
        CHECK_EQ(n, sizeof(stored) + qlen);
        CHECK_EQ(sp_get16(out + qlen + 12), 0xc00c);
        CHECK_EQ(sp_get16(out + qlen + 16), 0xc000 | (12 + 4 + qlen - 10));
        CHECK_EQ(sp_get16(out + qlen + 20), 0xc000 | (12 + qlen + 2));
        CHECK_EQ(sp_csum_fold(sp_response_sum(t, r, &req)), sp_csum_fold(sp_csum_partial(out, n, 0)));
        CHECK_EQ(sp_response_render_prefix(t, r, &req, 20, out, sizeof(out)), 20 + qlen);
        CHECK_EQ(sp_get16(out + qlen + 16), 0xc000 | (12 + 4 + qlen - 10));
        /* a prefix that ends with a pointer keeps it, moved */
        CHECK_EQ(sp_response_render_prefix(t, r, &req, 22, out, sizeof(out)), 22 + qlen);
        CHECK_EQ(sp_get16(out + qlen + 20), 0xc000 | (12 + qlen + 2));
    }
    sp_table_free(t);
}

static void test_ref_swap(void)
{
    struct sp_table_builder *b = sp_table_builder_new();
    struct sp_table *one = sp_table_builder_finish(b);
    b = sp_table_builder_new();
    struct sp_table *two = sp_table_builder_finish(b);
    static struct sp_table_ref ref;
    sp_table_ref_init(&ref, one);
    sp_table_ref_set_workers(&ref, 2);
    CHECK(sp_table_ref_enter(&ref, 0) == one);         /* worker 0 is inside a batch */
    CHECK(sp_table_ref_swap(&ref, two) == one);
    CHECK(!sp_table_ref_wait(&ref, 5));                 /* so the old table is not released */
    sp_table_ref_leave(&ref, 0);
    CHECK(sp_table_ref_wait(&ref, 5));                  /* now it is */
    CHECK(sp_table_ref_enter(&ref, 1) == two);
    sp_table_ref_leave(&ref, 1);
    sp_table_free(one);
    sp_table_free(sp_table_ref_swap(&ref, NULL));
}

/* A worker whose answers outlive its batch keeps the old table from being freed
 * until it unpins, across further enters and leaves, and across a second reload. */
static void test_ref_pins(void)
{
    struct sp_table *t[3];
    for (int i = 0; i < 3; i++)
        t[i] = sp_table_builder_finish(sp_table_builder_new());
    static struct sp_table_ref ref;
    struct sp_table_pins pins = {0};
    uint64_t gen, old;
    sp_table_ref_init(&ref, t[0]);
    sp_table_ref_set_workers(&ref, 1);
    CHECK(sp_table_ref_enter_pinned(&ref, 0, &pins, &old) == t[0]);
    CHECK(sp_table_pin(&pins, old) == old);             /* an answer still points into t[0] */
    sp_table_ref_leave_pinned(&ref, 0, &pins);
    CHECK(sp_table_ref_swap(&ref, t[1]) == t[0]);
    CHECK(!sp_table_ref_wait(&ref, 5));                 /* idle, yet still holding t[0] */
    CHECK(sp_table_ref_enter_pinned(&ref, 0, &pins, &gen) == t[1]);
    CHECK(gen > old);
    CHECK(!sp_table_ref_wait(&ref, 5));                 /* entering the new one is not enough */
    CHECK(sp_table_pin(&pins, gen) == gen);
    sp_table_ref_leave_pinned(&ref, 0, &pins);
    CHECK(sp_table_ref_swap(&ref, t[2]) == t[1]);
    sp_table_unpin(&pins, old);                         /* t[0]'s answer is out; t[1]'s is not */
    CHECK(sp_table_ref_enter_pinned(&ref, 0, &pins, &gen) == t[2]);
    sp_table_ref_leave_pinned(&ref, 0, &pins);
    CHECK(!sp_table_ref_wait(&ref, 5));
    sp_table_unpin(&pins, old + 1);
    sp_table_ref_leave_pinned(&ref, 0, &pins);
    CHECK(sp_table_ref_wait(&ref, 5));                  /* nothing pinned: all may go */
    /* A fifth generation with four pinned (slow downloads across reloads): counted
     * under the newest of them, never refused, and its table kept while it is. */
    uint64_t g[SP_TABLE_PINS + 1];
    for (int i = 0; i <= SP_TABLE_PINS; i++) {
        sp_table_ref_swap(&ref, t[i % 3]);
        sp_table_ref_enter_pinned(&ref, 0, &pins, &g[i]);
        CHECK(sp_table_pin(&pins, g[i]) == g[i < SP_TABLE_PINS ? i : SP_TABLE_PINS - 1]);
        sp_table_ref_leave_pinned(&ref, 0, &pins);
    }
    CHECK(sp_table_pin(&pins, g[1]) == g[1]);           /* a pinned one takes more */
    sp_table_unpin(&pins, g[1]);
    for (int i = 0; i < SP_TABLE_PINS; i++)             /* all but the fifth answer sent */
        sp_table_unpin(&pins, g[i]);
    sp_table_ref_swap(&ref, t[0]);
    sp_table_ref_enter_pinned(&ref, 0, &pins, &gen);
    sp_table_ref_leave_pinned(&ref, 0, &pins);
    CHECK(!sp_table_ref_wait(&ref, 5));                 /* the fifth keeps its table */
    sp_table_unpin(&pins, g[SP_TABLE_PINS - 1]);
    sp_table_ref_leave_pinned(&ref, 0, &pins);
    CHECK(sp_table_ref_wait(&ref, 5));
    for (int i = 0; i < 3; i++)
        sp_table_free(t[i]);
}

/* An edit of a table large enough that its arrays are copied into huge pages. */
static void test_edit_large(void)
{
    enum { KEYS = 400000 };
    struct sp_table_builder *b = sp_table_builder_new();
    uint8_t resp[16] = {0};
    char key[32];
    for (int i = 0; i < KEYS; i++) {
        memcpy(resp + 12, &i, 4);
        int64_t r = sp_table_add_response(b, resp, sizeof(resp), DNS_LIKE, 4, (uint32_t)i);
        int n = snprintf(key, sizeof(key), "k%d", i);
        CHECK_EQ(sp_table_add_key(b, 7, (uint8_t *)key, (uint32_t)n, (uint32_t)r), 0);
    }
    struct sp_table *t = sp_table_builder_finish(b);
    b = sp_table_builder_edit(t);
    CHECK(b != NULL);
    CHECK_EQ(sp_table_remove_key(b, 7, (const uint8_t *)"k5", 2), 0);
    int64_t r = sp_table_add_response(b, resp, sizeof(resp), DNS_LIKE, 4, 999999);
    CHECK_EQ(sp_table_add_key(b, 7, (const uint8_t *)"new", 3, (uint32_t)r), 0);
    struct sp_table *next = sp_table_builder_finish(b);
    CHECK(next != NULL);
    CHECK(sp_table_find(next, 7, (const uint8_t *)"k5", 2) == NULL);
    CHECK(sp_table_find(t, 7, (const uint8_t *)"k5", 2) != NULL);       /* the old one intact */
    const struct sp_response *found = sp_table_find(next, 7, (const uint8_t *)"new", 3);
    CHECK(found && found->user == 999999);
    int right = 0;
    for (int i = 0; i < KEYS; i += 997) {
        int n = snprintf(key, sizeof(key), "k%d", i);
        const struct sp_response *x = sp_table_find(next, 7, (uint8_t *)key, (size_t)n);
        right += x != NULL && x->user == (uint32_t)i &&
                 memcmp(sp_response_bytes(next, x) + 12, &i, 4) == 0;
    }
    CHECK_EQ(right, (KEYS + 996) / 997);
    sp_table_free(next);
    sp_table_free(t);
}

/* An edit: random removals and additions, a grown index, a rewritten response, all
 * checked against what each key should find; the table edited stays as it was. */
static void test_edit(void)
{
    enum { KEYS = 3000, ROUNDS = 4 };
    static int32_t want[KEYS * (ROUNDS + 1)];     /* response user word, -1: absent */
    struct sp_table_builder *b = sp_table_builder_new();
    uint8_t resp[16] = {0};
    char key[32];
    for (int i = 0; i < KEYS; i++) {
        resp[15] = (uint8_t)i;
        int64_t r = sp_table_add_response(b, resp, sizeof(resp), DNS_LIKE, 4, (uint32_t)i);
        int n = snprintf(key, sizeof(key), "k%d", i);
        CHECK_EQ(sp_table_add_key(b, 7, (uint8_t *)key, (uint32_t)n, (uint32_t)r), 0);
        want[i] = i;
    }
    struct sp_table *t = sp_table_builder_finish(b), *first = t;
    uint32_t seed = 12345, nkeys = KEYS, user = KEYS;
    for (int round = 0; round < ROUNDS; round++) {
        b = sp_table_builder_edit(t);
        CHECK(b != NULL);
        for (int k = 0; k < KEYS / 3; k++) {             /* a third removed, maybe twice */
            seed = seed * 1103515245u + 12345u;
            uint32_t i = (seed >> 8) % nkeys;
            int n = snprintf(key, sizeof(key), "k%u", i);
            CHECK_EQ(sp_table_remove_key(b, 7, (uint8_t *)key, (uint32_t)n), want[i] < 0 ? 1 : 0);
            want[i] = -1;
        }
        for (int k = 0; k < KEYS; k++) {                 /* new keys: the index must grow */
            resp[15] = (uint8_t)user;
            int64_t r = sp_table_add_response(b, resp, sizeof(resp), DNS_LIKE, 4, user);
            int n = snprintf(key, sizeof(key), "k%u", nkeys);
            CHECK_EQ(sp_table_add_key(b, 7, (uint8_t *)key, (uint32_t)n, (uint32_t)r), 0);
            want[nkeys++] = (int32_t)user++;
        }
        uint8_t changed[2] = {0xab, 0xcd};
        CHECK_EQ(sp_table_rewrite(b, 0, 14, changed, 2), 0);
        CHECK_EQ(sp_table_rewrite(b, 0, 15, changed, 2), -1);           /* past its end */
        CHECK_EQ(sp_table_rewrite(b, 0, 2 + 4 * (round & 1), changed, 2), 0);   /* the head */
        static const uint8_t longer[40];
        if (round == 1)                                  /* longer than any before it */
            CHECK(sp_table_add_response(b, longer, sizeof(longer), NULL, 0, 0) >= 0);
        struct sp_table *next = sp_table_builder_finish(b);
        CHECK(next != NULL);
        CHECK_EQ(sp_table_longest_response(next), round >= 1 ? sizeof(longer) : sizeof(resp));
        int right = 0;
        for (uint32_t i = 0; i < nkeys; i++) {
            int n = snprintf(key, sizeof(key), "k%u", i);
            const struct sp_response *r = sp_table_find(next, 7, (uint8_t *)key, (size_t)n);
            right += want[i] < 0 ? r == NULL : r != NULL && r->user == (uint32_t)want[i];
        }
        CHECK_EQ(right, (int)nkeys);
        const struct sp_response *r0 = sp_table_response(next, 0);
        CHECK(memcmp(sp_response_bytes(next, r0) + 14, changed, 2) == 0);
        CHECK_EQ(r0->sum_tail, sp_csum_partial(sp_response_bytes(next, r0) + 12, 4, 0));
        /* the sums kept for the rewritten head and tail: a rendering's checksum */
        const uint8_t head[4] = {1, 2, 3, 4}, question[3] = {7, 8, 9};
        struct sp_request req = {.field = {head, question}, .field_len = {4, 3}};
        uint8_t out[32];
        size_t len = sp_response_render(next, r0, &req, out, sizeof(out));
        CHECK_EQ(len, sizeof(resp) + 3);
        CHECK_EQ(sp_csum_fold(sp_response_sum(next, r0, &req)), sp_csum_fold(sp_csum_partial(out, len, 0)));
        if (t != first)
            sp_table_free(t);
        t = next;
    }
    int kept = 0;                                        /* the first table: untouched */
    for (int i = 0; i < KEYS; i++) {
        int n = snprintf(key, sizeof(key), "k%d", i);
        const struct sp_response *r = sp_table_find(first, 7, (uint8_t *)key, (size_t)n);
        kept += r != NULL && r->user == (uint32_t)i && sp_response_bytes(first, r)[14] == 0;
    }
    CHECK_EQ(kept, KEYS);
    sp_table_free(first);
    sp_table_free(t);
}

static int64_t add_numbered(struct sp_table_builder *b, const char *name, uint32_t user)
{
    uint8_t resp[16] = {0};
    memcpy(resp + 12, &user, 4);
    int64_t r = sp_table_add_response(b, resp, sizeof(resp), DNS_LIKE, 4, user);
    CHECK(r >= 0);
    CHECK_EQ(sp_table_add_key(b, 7, (const uint8_t *)name, (uint32_t)strlen(name), (uint32_t)r), 0);
    return r;
}

/* Keys "<prefix><i>" for i in [from, to), each answering with user i. */
static void add_numbered_range(struct sp_table_builder *b, const char *prefix, uint32_t from,
                               uint32_t to)
{
    char name[32];
    for (uint32_t i = from; i < to; i++) {
        snprintf(name, sizeof(name), "%s%u", prefix, i);
        add_numbered(b, name, i);
    }
}

static int64_t found_user(const struct sp_table *t, const char *name)
{
    const struct sp_response *r = sp_table_find(t, 7, (const uint8_t *)name, strlen(name));
    return r ? (int64_t)r->user : -1;
}

/* The arena ends with SP_RESPONSE_READ_PAST zero bytes, which answers' tails are read
 * into: after the last response of a new table and of an edit that added one, and an
 * edit that added nothing to the arena (a key removed) does not pad it twice. */
static void test_arena_padding(void)
{
    static const uint8_t resp[20] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    struct sp_table_builder *b = sp_table_builder_new();
    add_numbered_range(b, "k", 0, 10);
    int64_t last = sp_table_add_response(b, resp, sizeof(resp), NULL, 0, 99);
    CHECK(last >= 0);
    struct sp_table *t = sp_table_builder_finish(b);
    struct sp_table_info info;
    sp_table_get_info(t, &info);
    /* the first response's bytes are the arena's first */
    const uint8_t *arena = sp_response_bytes(t, sp_table_response(t, 0));
    const uint8_t *end = sp_response_bytes(t, sp_table_response(t, (uint32_t)last)) + sizeof(resp);
    CHECK_EQ(info.arena_bytes, (uint64_t)(end - arena) + SP_RESPONSE_READ_PAST);
    static const uint8_t zeros[SP_RESPONSE_READ_PAST];
    CHECK(memcmp(end, zeros, sizeof(zeros)) == 0);
    uint64_t padded = info.arena_bytes;

    b = sp_table_builder_edit(t);
    CHECK_EQ(sp_table_remove_key(b, 7, (const uint8_t *)"k3", 2), 0);
    struct sp_table *removed = sp_table_builder_finish(b);
    sp_table_get_info(removed, &info);
    CHECK_EQ(info.arena_bytes, padded);

    b = sp_table_builder_edit(removed);
    last = sp_table_add_response(b, resp, sizeof(resp), NULL, 0, 98);
    struct sp_table *added = sp_table_builder_finish(b);
    sp_table_get_info(added, &info);
    CHECK_EQ(info.arena_bytes, padded + sizeof(resp) + SP_RESPONSE_READ_PAST);
    end = sp_response_bytes(added, sp_table_response(added, (uint32_t)last)) + sizeof(resp);
    CHECK(memcmp(end, zeros, sizeof(zeros)) == 0);
    sp_table_free(t);
    sp_table_free(removed);
    sp_table_free(added);
}

/* A key added again by an edit answers with its new response, whether the edit keeps
 * its index or grows it (every key re-indexed from the old slots); a key removed stays
 * out through the growth; the edited table survives a flat copy and a rebase. */
static void test_edit_readds_and_flattens(void)
{
    enum { KEYS = 100 };
    char name[16];
    struct sp_table_builder *b = sp_table_builder_new();
    add_numbered_range(b, "k", 0, KEYS);
    struct sp_table *base = sp_table_builder_finish(b);
    struct sp_table_info info;
    sp_table_get_info(base, &info);
    uint64_t slots = info.slots;

    b = sp_table_builder_edit(base);                 /* the same index */
    add_numbered(b, "k3", 1003);
    struct sp_table *same = sp_table_builder_finish(b);
    sp_table_get_info(same, &info);
    CHECK_EQ(info.slots, slots);
    CHECK_EQ(found_user(same, "k3"), 1003);
    CHECK_EQ(found_user(same, "k4"), 4);
    CHECK_EQ(found_user(base, "k3"), 3);

    b = sp_table_builder_edit(same);                 /* a grown index */
    CHECK_EQ(sp_table_remove_key(b, 7, (const uint8_t *)"k7", 2), 0);
    add_numbered(b, "k5", 1005);
    add_numbered_range(b, "k", KEYS, 3 * KEYS);
    struct sp_table *grown = sp_table_builder_finish(b);
    sp_table_get_info(grown, &info);
    CHECK(info.slots > slots);

    size_t size = sp_table_flat_size(grown);
    void *mem = aligned_alloc(64, size), *copy = aligned_alloc(64, size);
    sp_table_flatten(grown, mem);
    memcpy(copy, mem, size);
    memset(mem, 0xa5, size);
    struct sp_table *moved = sp_table_flat_rebase(copy, size);
    CHECK(moved != NULL);
    const struct sp_table *tables[] = {grown, moved};
    for (int k = 0; k < 2 && moved; k++) {
        int right = 0;
        for (uint32_t i = 0; i < 3 * KEYS; i++) {
            snprintf(name, sizeof(name), "k%u", i);
            int64_t want = i == 7 ? -1 : i == 3 ? 1003 : i == 5 ? 1005 : (int64_t)i;
            right += found_user(tables[k], name) == want;
        }
        CHECK_EQ(right, 3 * KEYS);
    }
    free(mem);
    free(copy);
    sp_table_free(grown);
    sp_table_free(same);
    sp_table_free(base);
}

/* The prefetch stages' hint changes nothing a lookup finds: with its own hint, another
 * key's, or none, every key (and every absent one) finds what sp_table_find_hashed()
 * finds. And it is used: with a wrong tagged hash, the hint alone finds most keys. */
static void test_staged_lookups(void)
{
    enum { KEYS = 2000 };
    struct sp_table_builder *b = sp_table_builder_new();
    add_numbered_range(b, "key-number-", 0, KEYS);
    struct sp_table *t = sp_table_builder_finish(b);
    int same = 0, by_hint = 0;
    const struct sp_table_hint *before = NULL;
    for (uint32_t i = 0; i < 2 * KEYS; i++) {
        uint8_t key[40] = {0};            /* read in whole words */
        size_t len = (size_t)snprintf((char *)key, sizeof(key), "key-number-%u", i);
        uint64_t hash = sp_key_hash_padded(key, len);
        uint64_t tagged = sp_table_prefetch_slot(t, 7, hash);
        const struct sp_table_hint *hint = sp_table_prefetch_entry(t, tagged);
        sp_table_prefetch_key(t, hint);
        const struct sp_response *want = sp_table_find_hashed(t, 7, hash, key, len);
        CHECK((want != NULL) == (i < KEYS));
        same += sp_table_find_tagged(t, 7, tagged, key, len, hint) == want &&
                sp_table_find_tagged(t, 7, tagged, key, len, NULL) == want &&
                sp_table_find_tagged(t, 7, tagged, key, len, before) == want &&
                sp_table_find_tagged(t, 8, tagged, key, len, hint) == NULL;
        by_hint += want && sp_table_find_tagged(t, 7, ~tagged, key, len, hint) == want;
        before = hint;
    }
    CHECK_EQ(same, 2 * KEYS);
    CHECK(by_hint > KEYS * 8 / 10);
    sp_table_free(t);
}

/* A random hash at load a makes a found key's linear probe pass 1/2 (1 + 1/(1 - a)) - 1
 * slots beyond its home on average (Knuth). The key hash and tag mix must do as well on
 * the names zones hold: numbered hosts, short labels under numbered zones, reverse
 * names (a hash that keeps structure clusters them, and the probes grow). */
static void test_hash_spreads_names(void)
{
    enum { NAMES = 200000, TAGS = 5, SLOTS = 1 << 21 };
    uint8_t *used = calloc(SLOTS, 1);
    CHECK(used != NULL);
    if (!used)
        return;
    for (int shape = 0; shape < 3; shape++) {
        memset(used, 0, SLOTS);
        uint64_t passed = 0;
        for (int i = 0; i < NAMES; i++) {
            char name[64];
            if (shape == 0)
                snprintf(name, sizeof(name), "host%d.example.com", i);
            else if (shape == 1)
                snprintf(name, sizeof(name), "%c%c%c.a%d.zone%d.net", 'a' + i % 26,
                         'a' + i / 26 % 26, 'a' + i / 676 % 26, i / 17576, i % 7);
            else
                snprintf(name, sizeof(name), "%d.%d.%d.10.in-addr.arpa", i & 255,
                         (i >> 8) & 255, (i >> 16) & 255);
            uint8_t wire[72] = {0};   /* padded: sp_key_hash_padded() reads whole words */
            size_t n = 0, start = 0, len = strlen(name);
            for (size_t j = 0; j <= len; j++)
                if (j == len || name[j] == '.') {
                    wire[n++] = (uint8_t)(j - start);
                    memcpy(wire + n, name + start, j - start);
                    n += j - start;
                    start = j + 1;
                }
            wire[n++] = 0;
            uint64_t key_hash = sp_key_hash_padded(wire, n);
            for (uint64_t tag = 1; tag <= TAGS; tag++) {
                uint64_t s = hash_tagged(key_hash, tag * 0x10001) & (SLOTS - 1);
                while (used[s]) {
                    passed++;
                    s = (s + 1) & (SLOTS - 1);
                }
                used[s] = 1;
            }
        }
        /* inserting key k passes what finding it will; averaged over the keys */
        double keys = (double)NAMES * TAGS, load = keys / SLOTS;
        double random = 0.5 * (1 + 1 / (1 - load)) - 1;
        CHECK((double)passed / keys < 1.15 * random);
    }
    free(used);
}

int main(void)
{
    test_lookup();
    test_hash_every_length();
    test_shared_key_bytes();
    test_invalid_patches();
    test_render_and_sum();
    test_shifted_pointers();
    test_edit_large();
    test_ref_swap();
    test_ref_pins();
    test_edit();
    test_edit_readds_and_flattens();
    test_arena_padding();
    test_staged_lookups();
    test_hash_spreads_names();
    return check_report("test_table");
}
