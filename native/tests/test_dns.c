/* DNS parsing and answering, on hand-made queries and a hand-built table. */
#include <string.h>

#include "check.h"
#include "stormpy/app/dns/dns.h"
#include "stormpy/proto/csum.h"

#define WWW "\x03www\x07" "example\x03" "com"   /* + the root label */

/* Header (ID 0x1234, RD, one question) + question WWW/A/IN. */
static size_t make_query(uint8_t *m, const char *name, size_t name_len, uint16_t qtype)
{
    const uint8_t head[12] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(m, head, 12);
    memcpy(m + 12, name, name_len);
    size_t n = 12 + name_len;
    m[n++] = (uint8_t)(qtype >> 8);
    m[n++] = (uint8_t)qtype;
    m[n++] = 0;
    m[n++] = 1;
    return n;
}

static size_t add_opt(uint8_t *m, size_t n, uint16_t size, uint8_t version, int dnssec_ok)
{
    const uint8_t opt[11] = {0, 0, 41, (uint8_t)(size >> 8), (uint8_t)size, 0, version,
                             (uint8_t)(dnssec_ok ? 0x80 : 0), 0, 0, 0};
    memcpy(m + n, opt, 11);
    m[11]++;
    return n + 11;
}

/* sp_dns_parse_summed() into q, and sp_dns_parse(), which must agree on everything but
 * the question's sum (not written). */
static enum sp_dns_verdict parse_both(const uint8_t *m, size_t n, struct sp_dns_query *q)
{
    struct sp_dns_query plain;
    enum sp_dns_verdict v = sp_dns_parse_summed(m, n, q);
    CHECK_EQ(sp_dns_parse(m, n, &plain), v);
    CHECK_EQ(plain.has_question, q->has_question);
    if (q->has_question) {
        CHECK_EQ(plain.name_hash, q->name_hash);
        CHECK_EQ(plain.question_len, q->question_len);
        CHECK(memcmp(plain.question, q->question, q->question_len) == 0);
        CHECK(memcmp(plain.name_lower, q->name_lower, q->name_len) == 0);
    }
    CHECK_EQ(plain.edns, q->edns);
    CHECK_EQ(plain.edns_size, q->edns_size);
    /* the whole message's sum made on the way, where the question came uncompressed,
     * is the message's (the frame paths check the query's UDP checksum with it) */
    if (q->message_summed)
        CHECK_EQ(sp_csum_acc_reduce(q->message_acc), sp_csum_acc_reduce(sp_csum_acc(m, n, 0)));
    return v;
}

/* The name's hash and the question's sum, made on the way, are what the table and the
 * checksum make from scratch. */
static int derived_right(const struct sp_dns_query *q)
{
    return q->name_hash == sp_key_hash_padded(q->name_lower, q->name_len) &&
           q->question_sum == sp_csum_partial(q->question, q->question_len, 0);
}

static void test_parse_plain(void)
{
    uint8_t m[512];
    struct sp_dns_query q;
    size_t n = make_query(m, "\x03WwW\x07" "eXaMpLe\x03" "COM", 17, 1);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_LOOKUP);
    CHECK_EQ(q.name_len, 17);
    CHECK(derived_right(&q));
    CHECK(memcmp(q.name_lower, WWW, 17) == 0);                       /* key is lower case */
    CHECK(memcmp(q.question, "\x03WwW\x07" "eXaMpLe\x03" "COM", 17) == 0);   /* echo keeps case */
    CHECK_EQ(q.question_len, 21);
    CHECK_EQ(q.qtype, 1);
    CHECK(!q.edns);
}

static void test_lowercase_every_byte(void)
{
    /* Every byte value in a label: only 'A'..'Z' change in the key, nothing in the echo. */
    for (int half = 0; half < 2; half++) {
        uint8_t m[600], name[300];
        struct sp_dns_query q;
        size_t len = 0;
        for (int b = half * 128; b < half * 128 + 128; b += 63) {
            int n = half * 128 + 128 - b < 63 ? half * 128 + 128 - b : 63;
            name[len++] = (uint8_t)n;
            for (int i = 0; i < n; i++)
                name[len++] = (uint8_t)(b + i);
        }
        name[len++] = 0;
        size_t n = make_query(m, (const char *)name, len, 1);
        CHECK_EQ(parse_both(m, n, &q), SP_DNS_LOOKUP);
        CHECK_EQ(q.name_len, len);
        int wrong = 0;
        for (size_t i = 0; i < len; i++) {
            int letter = name[i] >= 'A' && name[i] <= 'Z' && i != 0 && i != 64 && i != 128;
            wrong += q.name_lower[i] != (letter ? name[i] + 32 : name[i]) || q.question[i] != name[i];
        }
        CHECK_EQ(wrong, 0);
        CHECK(derived_right(&q));
    }
}

static void test_parse_edns(void)
{
    uint8_t m[512];
    struct sp_dns_query q;
    size_t n = add_opt(m, make_query(m, WWW, 17, 1), 4096, 0, 1);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_LOOKUP);
    CHECK(q.edns && q.edns_do);
    CHECK_EQ(q.edns_size, 4096);
    struct sp_dns_config cfg = {.max_udp = 1232};
    CHECK_EQ(sp_dns_udp_limit(&q, &cfg), 1232);
    n = add_opt(m, make_query(m, WWW, 17, 1), 100, 0, 0);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_LOOKUP);
    CHECK_EQ(sp_dns_udp_limit(&q, &cfg), 512);                        /* never below 512 */
    n = add_opt(m, make_query(m, WWW, 17, 1), 1232, 1, 0);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_BADVERS);
    n = add_opt(m, add_opt(m, make_query(m, WWW, 17, 1), 1232, 0, 0), 1232, 0, 0);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_FORMERR);                 /* two OPT records */
    n = add_opt(m, make_query(m, WWW, 17, 1), 1232, 0, 0);
    m[n - 1] = 4;                                                     /* rdlen past the end */
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_FORMERR);
    /* an option whose length overruns the OPT data */
    n = make_query(m, WWW, 17, 1);
    const uint8_t opt[] = {0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 4, 0, 10, 0, 9};
    memcpy(m + n, opt, sizeof(opt));
    m[11] = 1;
    CHECK_EQ(parse_both(m, n + sizeof(opt), &q), SP_DNS_FORMERR);
}

/* The usual OPT (ending the message, no option or one) is read without the records'
 * walk; the same OPT carrying two options takes the walk: all read the same fields,
 * for every payload size, version, extended rcode and flags tried. And an OPT owned
 * by another name, or in the authority section, is the walk's to judge. */
static void test_usual_opt_reads_as_the_walk(void)
{
    uint8_t m[512];
    struct sp_dns_query usual, one, walked;
    uint32_t x = 12345;
    for (int i = 0; i < 2000; i++) {
        x = x * 1103515245u + 12345u;
        size_t n = add_opt(m, make_query(m, WWW, 17, 1), (uint16_t)(x >> 8),
                           (uint8_t)(i % 3 == 0 ? x >> 3 : 0), (int)(x >> 30) & 1);
        m[n - 6] = (uint8_t)(x >> 24);                      /* the extended rcode */
        m[n - 3] |= (uint8_t)(x >> 16) & 0x7f;               /* the other flags */
        enum sp_dns_verdict v = parse_both(m, n, &usual);
        const uint8_t cookie[12] = {0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8};
        m[n - 1] = sizeof(cookie);
        memcpy(m + n, cookie, sizeof(cookie));
        CHECK_EQ(parse_both(m, n + sizeof(cookie), &one), v);
        const uint8_t empty_option[4] = {0xfd, 0xe9, 0, 0};  /* a local option, no data */
        m[n - 1] = sizeof(cookie) + 4;
        memcpy(m + n + sizeof(cookie), empty_option, 4);
        CHECK_EQ(parse_both(m, n + sizeof(cookie) + 4, &walked), v);
        CHECK(usual.edns && one.edns && walked.edns);
        CHECK_EQ(usual.edns_size, walked.edns_size);
        CHECK_EQ(usual.edns_version, walked.edns_version);
        CHECK_EQ(usual.edns_do, walked.edns_do);
        CHECK_EQ(one.edns_size, walked.edns_size);
        CHECK_EQ(one.edns_version, walked.edns_version);
        CHECK_EQ(one.edns_do, walked.edns_do);
        CHECK_EQ(v, usual.edns_version ? SP_DNS_BADVERS : SP_DNS_LOOKUP);
    }
    size_t n = make_query(m, WWW, 17, 1);   /* owned by "a.", not the root */
    const uint8_t named[13] = {1, 'a', 0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 0};
    memcpy(m + n, named, sizeof(named));
    m[11] = 1;
    CHECK_EQ(parse_both(m, n + sizeof(named), &usual), SP_DNS_LOOKUP);   /* as the walk reads it */
    CHECK(usual.edns && usual.edns_do && usual.edns_size == 1232);
    n = add_opt(m, make_query(m, WWW, 17, 1), 1232, 0, 1);
    const uint8_t short_option[5] = {0, 10, 0, 8, 1};     /* says 8 bytes, has 1 */
    m[n - 1] = sizeof(short_option);
    memcpy(m + n, short_option, sizeof(short_option));
    CHECK_EQ(parse_both(m, n + sizeof(short_option), &usual), SP_DNS_FORMERR);
    m[n - 1] = 2;                           /* less than an option's code and length */
    CHECK_EQ(parse_both(m, n + 2, &usual), SP_DNS_FORMERR);
    n = add_opt(m, make_query(m, WWW, 17, 1), 1232, 0, 1);
    m[9] = 1;                               /* counted in the authority section */
    m[11] = 0;
    CHECK_EQ(parse_both(m, n, &usual), SP_DNS_FORMERR);
}

static void test_parse_header_rules(void)
{
    uint8_t m[512];
    struct sp_dns_query q;
    size_t n = make_query(m, WWW, 17, 1);
    for (size_t cut = 0; cut < 12; cut++)
        CHECK_EQ(parse_both(m, cut, &q), SP_DNS_DROP);             /* shorter than a header */
    for (size_t cut = 12; cut < n; cut++)
        CHECK_EQ(parse_both(m, cut, &q), SP_DNS_FORMERR);          /* truncated question */
    m[2] |= 0x80;
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_DROP);                   /* QR: a response */
    m[2] = (uint8_t)(2 << 3);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_NOTIMP);                 /* STATUS */
    m[2] = (uint8_t)(5 << 3);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_NOTAUTH);                /* UPDATE */
    m[2] = 0;
    m[5] = 0;
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_FORMERR);                /* no question */
    m[5] = 2;
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_DROP);                   /* two questions */
    m[5] = 1;
    m[n] = 0xab;
    CHECK_EQ(parse_both(m, n + 1, &q), SP_DNS_FORMERR);            /* trailing garbage */
    n = make_query(m, WWW, 17, 252);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_TRANSFER);               /* AXFR */
    n = make_query(m, WWW, 17, 0);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_NOTIMP);                 /* qtype 0 */
    n = make_query(m, WWW, 17, 1);
    m[n - 1] = 4;                                                    /* class HS */
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_REFUSED);
}

static void test_parse_opt_without_question(void)
{
    uint8_t m[64] = {0x12, 0x34, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0};
    struct sp_dns_query q;
    size_t n = add_opt(m, 12, 1232, 0, 1);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_FORMERR);   /* no question, but the OPT is read */
    CHECK(q.edns && q.edns_do && !q.has_question);
    /* an OPT owned by a name other than the root is accepted, as Knot does */
    n = make_query(m, WWW, 17, 1);
    const uint8_t opt[] = {1, 'x', 0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0};
    memcpy(m + n, opt, sizeof(opt));
    m[11] = 1;
    CHECK_EQ(parse_both(m, n + sizeof(opt), &q), SP_DNS_LOOKUP);
    CHECK(q.edns);
}

/* A name of 255 bytes, the longest: 4 labels of 62 bytes, one of 1, the root. Returns
 * its length. */
static size_t longest_name(char *name)
{
    size_t len = 0;
    for (int i = 0; i < 4; i++) {
        name[len++] = 62;
        memset(name + len, 'a', 62);
        len += 62;
    }
    name[len++] = 1;
    name[len++] = 'b';
    name[len++] = 0;
    return len;
}

static void test_parse_names(void)
{
    uint8_t m[600];
    struct sp_dns_query q;
    /* A question whose tail is a pointer back into the header bytes: decompressed. */
    size_t n = make_query(m, "\x03www\xc0\x04", 6, 1);
    m[4] = 0;   /* qdcount high byte doubles as the root label the pointer lands on */
    m[5] = 1;
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_LOOKUP);
    CHECK_EQ(q.name_len, 5);
    CHECK(memcmp(q.question, "\x03www\x00", 5) == 0);
    CHECK(derived_right(&q));

    /* A pointer to itself, or forward: never followed. */
    n = make_query(m, "\xc0\x0c", 2, 1);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_FORMERR);
    n = make_query(m, "\x01" "a\xc0\x0c", 4, 1);                    /* a loop through "a" */
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_FORMERR);
    n = make_query(m, "\xc0\x20", 2, 1);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_FORMERR);
    /* extended label type 0x40 */
    n = make_query(m, "\x41" "a\x00", 3, 1);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_FORMERR);
    /* a label running past the packet */
    n = make_query(m, "\x3f" "abc", 4, 1);
    CHECK_EQ(parse_both(m, 16, &q), SP_DNS_FORMERR);

    /* 255 bytes is the longest name; 256 is refused. */
    char name[300];
    size_t len = longest_name(name);
    n = make_query(m, name, len, 1);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_LOOKUP);
    CHECK_EQ(q.name_len, 255);
    CHECK(derived_right(&q));
    name[len - 3] = 2;
    memmove(name + len - 1, "bb", 0);
    name[len - 1] = 'c';
    name[len] = 0;
    n = make_query(m, name, len + 1, 1);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_FORMERR);
    /* the root name */
    n = make_query(m, "", 1, 2);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_LOOKUP);
    CHECK_EQ(q.name_len, 1);
    CHECK(derived_right(&q));
}

/* Table: www.example.com A (exact), NXDOMAIN below example.com. */
static struct sp_table *small_table(void)
{
    static const struct sp_patch patches[] = {
        {.op = SP_PATCH_INSERT, .field = SP_DNS_FIELD_QUESTION, .dst = 12},
        {.op = SP_PATCH_COPY, .field = SP_DNS_FIELD_MESSAGE, .dst = 0, .src = 0, .len = 2},
        {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 2, .src = 2, .mask = 0x01},
        {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 3, .src = 3, .mask = 0x10},
    };
    /* answer: www.example.com (pointer to the question) A 192.0.2.1, TTL 60 */
    const uint8_t answer[] = {0, 0, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 0,
                              0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1};
    const uint8_t nxdomain[] = {0, 0, 0x84, 0x03, 0, 1, 0, 0, 0, 0, 0, 0};
    uint8_t big[700] = {0, 0, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 0};
    struct sp_table_builder *b = sp_table_builder_new();
    sp_table_add_response(b, answer, sizeof(answer), patches, 4, SP_RCODE_NOERROR);
    /* the NXDOMAIN in zone slot 2: counted there, its rcode still read from the low byte */
    sp_table_add_response(b, nxdomain, sizeof(nxdomain), patches, 4, SP_RCODE_NXDOMAIN | 2u << 8);
    sp_table_add_response(b, big, sizeof(big), patches, 4, SP_RCODE_NOERROR);
    sp_table_add_key(b, sp_dns_tag(SP_DNS_EXACT, 1, 1), (const uint8_t *)WWW, 17, 0);
    sp_table_add_key(b, sp_dns_tag(SP_DNS_BELOW_OTHER, 1, 0), (const uint8_t *)"\x07" "example\x03" "com", 13, 1);
    sp_table_add_key(b, sp_dns_tag(SP_DNS_EXACT, 1, 16), (const uint8_t *)WWW, 17, 2);
    return sp_table_builder_finish(b);
}

static void test_answer(void)
{
    struct sp_table *t = small_table();
    struct sp_dns_config cfg = {.max_udp = 1232};
    struct sp_dns_counters c = {0};
    struct sp_dns_query q;
    uint8_t m[512], out[2048];

    size_t n = make_query(m, "\x03WWW\x07" "example\x03" "com", 17, 1);
    size_t len = sp_dns_answer(t, &cfg, m, n, false, out, sizeof(out), &q, &c);
    CHECK_EQ(len, 12 + 21 + 16);
    CHECK(out[0] == 0x12 && out[1] == 0x34);                          /* ID */
    CHECK_EQ(out[2], 0x85);                                          /* QR AA RD */
    CHECK(memcmp(out + 12, m + 12, 21) == 0);                        /* 0x20 case kept */
    CHECK_EQ(c.rcode[SP_RCODE_NOERROR], 1);

    n = make_query(m, "\x03" "foo\x07" "example\x03" "com", 17, 1);
    len = sp_dns_answer(t, &cfg, m, n, false, out, sizeof(out), &q, &c);
    CHECK_EQ(out[3] & 0x0f, SP_RCODE_NXDOMAIN);                      /* found by walking up */
    CHECK_EQ(c.rcode[SP_RCODE_NXDOMAIN], 1);
    CHECK(c.zone[2] == 1 && c.zone[0] == 1);                         /* by zone slot */
    n = make_query(m, "\x07" "example\x03" "org", 13, 1);
    len = sp_dns_answer(t, &cfg, m, n, false, out, sizeof(out), &q, &c);
    CHECK_EQ(len, 12 + 17);
    CHECK_EQ(out[3] & 0x0f, SP_RCODE_REFUSED);                       /* no zone */
    CHECK(c.zone[2] == 1 && c.zone[0] == 1);                         /* no zone, no count */

    /* 700 bytes do not fit in 512: header + question with TC; over TCP all of it */
    n = make_query(m, WWW, 17, 16);
    len = sp_dns_answer(t, &cfg, m, n, false, out, sizeof(out), &q, &c);
    CHECK_EQ(len, 12 + 21);
    CHECK(out[2] & 0x02);
    CHECK_EQ(out[7], 0);                                             /* no answers */
    CHECK_EQ(c.truncated, 1);
    len = sp_dns_answer(t, &cfg, m, n, true, out, sizeof(out), &q, &c);
    CHECK_EQ(len, 700 + 21);
    n = add_opt(m, make_query(m, WWW, 17, 16), 1232, 0, 1);
    len = sp_dns_answer(t, &cfg, m, n, false, out, sizeof(out), &q, &c);
    CHECK_EQ(len, 700 + 21 + 11);                                    /* fits in 1232, OPT added */
    CHECK_EQ(out[11], 1);
    CHECK_EQ(out[len - 4], 0x80);                                    /* DO echoed */

    /* EDNS version 1: BADVERS in the OPT's extended rcode, no data */
    n = add_opt(m, make_query(m, WWW, 17, 1), 1232, 1, 0);
    len = sp_dns_answer(t, &cfg, m, n, false, out, sizeof(out), &q, &c);
    CHECK_EQ(out[3] & 0x0f, 0);
    CHECK_EQ(out[7], 0);
    CHECK_EQ(out[len - 6], 1);                                       /* 16 >> 4 */
    CHECK_EQ(c.rcode[16], 1);

    /* QR set: dropped, never answered */
    n = make_query(m, WWW, 17, 1);
    m[2] |= 0x80;
    CHECK_EQ(sp_dns_answer(t, &cfg, m, n, false, out, sizeof(out), &q, &c), 0);
    CHECK_EQ(c.dropped, 1);
    /* an output buffer too small for even the error: dropped, not overrun */
    n = make_query(m, WWW, 17, 1);
    CHECK_EQ(sp_dns_answer(t, &cfg, m, n, false, out, 20, &q, &c), 0);
    sp_table_free(t);
}

/* Names of every length, with nothing, an OPT, an OPT with a cookie (odd), or stray
 * bytes after the question: each message's sum is made on the way (parse_both()). */
static void test_message_sum(void)
{
    static const uint8_t cookie[12] = {0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t m[600], name[256];
    struct sp_dns_query q;
    for (size_t len = 1; len <= 255; len++) {
        size_t at = 0;           /* labels of up to 63 bytes, letters by position */
        while (at + 2 < len) {   /* room for a length byte, one byte, and the root */
            size_t label = len - 1 - at - 1 < 63 ? len - 1 - at - 1 : 63;
            name[at++] = (uint8_t)label;
            for (size_t i = 0; i < label; i++, at++)
                name[at] = (uint8_t)('A' + (at * 7) % 26);
        }
        name[at] = 0;
        if (at + 1 != len)
            continue;           /* one byte left over: no label of 0 bytes */
        for (int after = 0; after < 4; after++) {
            size_t n = make_query(m, (const char *)name, len, 1);
            if (after == 1 || after == 2)
                n = add_opt(m, n, 1232, 0, after == 2);
            if (after == 2) {   /* the OPT's RDLENGTH, then its option */
                m[n - 1] = sizeof(cookie);
                memcpy(m + n, cookie, sizeof(cookie));
                n += sizeof(cookie);
            }
            if (after == 3)
                m[n++] = 0x5a;
            enum sp_dns_verdict v = parse_both(m, n, &q);
            CHECK_EQ(v, after == 3 ? SP_DNS_FORMERR : SP_DNS_LOOKUP);
            CHECK(q.message_summed);
            CHECK(derived_right(&q));   /* every name length: the hash's last word too */
        }
    }
    /* compressed: summed the long way, by the caller */
    size_t n = make_query(m, "\x03www\xc0\x0b", 6, 1);
    CHECK_EQ(parse_both(m, n, &q), SP_DNS_LOOKUP);
    CHECK(!q.message_summed);
}

/* sp_dns_find(), which may take a name unchecked, against sp_dns_parse() and
 * sp_dns_lookup(): the same verdict, response and query, with and without the sum. */
static void check_find(const struct sp_table *t, const uint8_t *m, size_t n,
                       enum sp_dns_verdict expected)
{
    for (int with_sum = 0; with_sum < 2; with_sum++) {
        struct sp_dns_query q, walked;
        enum sp_dns_verdict v, w = with_sum ? sp_dns_parse_summed(m, n, &walked)
                                            : sp_dns_parse(m, n, &walked);
        const struct sp_response *r = sp_dns_find(t, m, n, &q, with_sum, &v);
        CHECK_EQ(v, expected);
        CHECK_EQ(w, expected);
        CHECK(r == (w == SP_DNS_LOOKUP ? sp_dns_lookup(t, &walked) : NULL));
        CHECK_EQ(q.has_question, walked.has_question);
        if (!q.has_question || !walked.has_question)
            continue;
        CHECK_EQ(q.name_len, walked.name_len);
        CHECK_EQ(q.question_len, walked.question_len);
        CHECK(memcmp(q.question, walked.question, walked.question_len) == 0);
        CHECK(memcmp(q.name_lower, walked.name_lower, walked.name_len) == 0);
        CHECK_EQ(q.name_hash, walked.name_hash);
        if (with_sum)
            CHECK_EQ(q.question_sum, walked.question_sum);
        CHECK_EQ(q.qtype, walked.qtype);
        CHECK_EQ(q.qclass, walked.qclass);
        CHECK_EQ(q.message_summed, walked.message_summed);
        if (walked.message_summed)
            CHECK_EQ(q.message_acc, walked.message_acc);
    }
}

static void test_find_takes_names_unchecked(void)
{
    struct sp_table *t = small_table();
    uint8_t m[600];
    size_t n = make_query(m, "\x03WwW\x07" "eXaMpLe\x03" "COM", 17, 1);
    check_find(t, m, n, SP_DNS_LOOKUP);                  /* a key: the name proven */
    n = make_query(m, WWW, 17, 15);
    check_find(t, m, n, SP_DNS_LOOKUP);                  /* no key: walked, then below */
    n = make_query(m, "\x03" "ftp\x07" "example\x03" "com", 17, 1);
    check_find(t, m, n, SP_DNS_LOOKUP);
    n = make_query(m, "\x03www\xc0\x04", 6, 1);          /* compressed: parsed again */
    m[4] = 0;
    check_find(t, m, n, SP_DNS_LOOKUP);
    n = make_query(m, "\x03www\x00\x07", 6, 1);          /* a byte after the name */
    check_find(t, m, n, SP_DNS_FORMERR);
    n = make_query(m, "\x05www\x00", 5, 1);              /* a label past the name's end */
    check_find(t, m, n, SP_DNS_FORMERR);
    n = make_query(m, "\x41" "a\x00", 3, 1);             /* extended label type */
    check_find(t, m, n, SP_DNS_FORMERR);
    n = make_query(m, "\x03www\x00\x07", 6, 252);        /* no lookup: checked in the parse */
    check_find(t, m, n, SP_DNS_FORMERR);
    n = make_query(m, WWW, 17, 252);
    check_find(t, m, n, SP_DNS_TRANSFER);
    n = make_query(m, "\x03www\xc0\x04", 6, 252);
    m[4] = 0;
    check_find(t, m, n, SP_DNS_TRANSFER);
    n = make_query(m, "\x03www\x00\x07", 6, 1);
    m[2] = SP_DNS_OPCODE_NOTIFY << 3;
    check_find(t, m, n, SP_DNS_FORMERR);
    n = make_query(m, WWW, 17, 1);
    m[n - 1] = SP_DNS_CLASS_CH;                          /* unusual, then looked up */
    check_find(t, m, n, SP_DNS_LOOKUP);
    n = make_query(m, "", 1, 1);                         /* the root */
    check_find(t, m, n, SP_DNS_LOOKUP);
    n = make_query(m, "\x00\x00", 2, 1);
    check_find(t, m, n, SP_DNS_FORMERR);
    n = make_query(m, WWW, 17, 1);
    m[11] = 1;                                           /* an OPT counted, none there */
    check_find(t, m, n, SP_DNS_FORMERR);
    n = add_opt(m, make_query(m, WWW, 17, 1), 1232, 0, 1);
    check_find(t, m, n, SP_DNS_LOOKUP);
    n = add_opt(m, make_query(m, "\x03www\x00\x07", 6, 1), 1232, 0, 0);
    check_find(t, m, n, SP_DNS_FORMERR);
    n = add_opt(m, make_query(m, "\x03www\x00\x07", 6, 1), 1232, 1, 0);
    check_find(t, m, n, SP_DNS_FORMERR);                 /* not BADVERS: malformed first */
    n = add_opt(m, make_query(m, WWW, 17, 1), 1232, 1, 0);
    check_find(t, m, n, SP_DNS_BADVERS);
    n = add_opt(m, make_query(m, "\x03www\xc0\x04", 6, 15), 1232, 0, 0);
    m[4] = 0;
    check_find(t, m, n, SP_DNS_LOOKUP);
    /* an OPT with a client cookie, as dig sends it; its last bytes zero or not */
    static const uint8_t cookies[2][12] = {{0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8},
                                           {0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 0, 0}};
    for (int c = 0; c < 2; c++) {
        const char *names[] = {WWW, "\x03" "FTP\x07" "example\x03" "com", "\x03www\x00\x07"};
        const size_t lens[] = {17, 17, 6};
        const enum sp_dns_verdict verdicts[] = {SP_DNS_LOOKUP, SP_DNS_LOOKUP, SP_DNS_FORMERR};
        for (int i = 0; i < 3; i++) {
            n = add_opt(m, make_query(m, names[i], lens[i], 1), 1232, 0, 1);
            m[n - 1] = 12;
            memcpy(m + n, cookies[c], 12);
            check_find(t, m, n + 12, verdicts[i]);
        }
    }
    /* an OPT shorter than its RDLENGTH says; a second OPT in its place */
    n = add_opt(m, make_query(m, WWW, 17, 1), 1232, 0, 0);
    m[n - 1] = 4;
    check_find(t, m, n, SP_DNS_FORMERR);
    n = add_opt(m, make_query(m, WWW, 17, 1), 1232, 0, 0);
    n = add_opt(m, n, 1232, 0, 0);
    m[11] = 1;
    check_find(t, m, n, SP_DNS_FORMERR);

    /* 255 bytes, the longest name, taken unchecked; 256 walked */
    char name[300];
    size_t len = longest_name(name);
    n = make_query(m, name, len, 1);
    check_find(t, m, n, SP_DNS_LOOKUP);
    name[len - 1] = 'c';                                 /* the root label moved one on */
    name[len - 3] = 2;
    name[len++] = 0;
    n = make_query(m, name, len, 1);
    check_find(t, m, n, SP_DNS_FORMERR);
    sp_table_free(t);
}

int main(void)
{
    test_parse_plain();
    test_lowercase_every_byte();
    test_parse_edns();
    test_usual_opt_reads_as_the_walk();
    test_parse_header_rules();
    test_parse_opt_without_question();
    test_parse_names();
    test_message_sum();
    test_answer();
    test_find_takes_names_unchecked();
    return check_report("test_dns");
}
