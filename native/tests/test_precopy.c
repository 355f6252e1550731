/* Precopy mode against memcpy mode: for many random queries, the frame sent from
 * the pool must be byte for byte what sp_dns_frame_answer() writes, with valid IP and UDP
 * checksums; repeats must hit; copies in flight and copies of an old table must
 * never be reused. And a group answered in stages (sp_dns_frame_answer_group) against
 * the same frames answered one by one. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stormpy/app/dns/answer.h"
#include "stormpy/app/dns/dns.h"
#include "stormpy/app/dns/precopy.h"
#include "stormpy/app/dns/worker.h"
#include "stormpy/engine/frame.h"
#include "stormpy/proto/csum.h"
#include "stormpy/proto/wire.h"

#define CAP 2048

static const uint8_t SERVER_MAC[6] = {2, 0, 0, 0, 0, 1};
static const uint8_t SERVER_V4[4] = {198, 18, 0, 1};
static const uint8_t SERVER_V6[16] = {0x20, 0x01, 0, 2, [15] = 1};

static const char *NAMES[] = {"\x03www\x07" "example\x03" "com", "\x04mail\x07" "example\x03" "com",
                              "\x02nx\x07" "example\x03" "com", "\x03odd\x07" "example\x03" "com",
                              NULL};   /* the last: longest_name(), a 255-byte name */
#define LONGEST_NAME 4

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)rng_state;
}

/* www A, mail MX-ish (longer), NXDOMAIN below example.com, odd: an odd length, big:
 * too large for 512 bytes (truncated without EDNS: never precopy). */
static struct sp_table *make_table(uint8_t ttl_byte)
{
    static const struct sp_patch patches[] = {
        {.op = SP_PATCH_INSERT, .field = SP_DNS_FIELD_QUESTION, .dst = 12},
        {.op = SP_PATCH_COPY, .field = SP_DNS_FIELD_MESSAGE, .dst = 0, .src = 0, .len = 2},
        {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 2, .src = 2, .mask = 0x01},
        {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 3, .src = 3, .mask = 0x10},
    };
    const uint8_t www[] = {0, 0, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 0,
                           0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, ttl_byte, 0, 4, 192, 0, 2, 1};
    const uint8_t mail[] = {0, 0, 0x84, 0x00, 0, 1, 0, 2, 0, 0, 0, 0,
                            0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, ttl_byte, 0, 4, 192, 0, 2, 25,
                            0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, ttl_byte, 0, 4, 192, 0, 2, 26};
    const uint8_t nx[] = {0, 0, 0x84, 0x03, 0, 1, 0, 0, 0, 0, 0, 0};
    const uint8_t odd[] = {0, 0, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 0,
                           0xc0, 0x0c, 0, 16, 0, 1, 0, 0, 0, ttl_byte, 0, 4, 3, 'a', 'b', 'c', 0xff};
    uint8_t big[700] = {0, 0, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 0};
    struct sp_table_builder *b = sp_table_builder_new();
    sp_table_add_response(b, www, sizeof(www), patches, 4, SP_RCODE_NOERROR);
    sp_table_add_response(b, mail, sizeof(mail), patches, 4, SP_RCODE_NOERROR);
    sp_table_add_response(b, nx, sizeof(nx), patches, 4, SP_RCODE_NXDOMAIN);
    sp_table_add_response(b, odd, sizeof(odd), patches, 4, SP_RCODE_NOERROR);
    sp_table_add_response(b, big, sizeof(big), patches, 4, SP_RCODE_NOERROR);
    sp_table_add_key(b, sp_dns_tag(SP_DNS_EXACT, 1, 1), (const uint8_t *)NAMES[0], 17, 0);
    sp_table_add_key(b, sp_dns_tag(SP_DNS_EXACT, 1, 1), (const uint8_t *)NAMES[1], 18, 1);
    sp_table_add_key(b, sp_dns_tag(SP_DNS_BELOW_OTHER, 1, 0), (const uint8_t *)"\x07" "example\x03" "com", 13, 2);
    sp_table_add_key(b, sp_dns_tag(SP_DNS_EXACT, 1, 1), (const uint8_t *)NAMES[3], 17, 3);
    sp_table_add_key(b, sp_dns_tag(SP_DNS_EXACT, 1, 16), (const uint8_t *)NAMES[0], 17, 4);
    return sp_table_builder_finish(b);
}

struct qspec {
    int name;        /* index into NAMES */
    uint16_t qtype;
    int family;      /* 4 or 6 */
    int vlan;
    int edns, dnssec_ok;
    uint16_t edns_size;
};

/* A whole query frame, with the client's random MAC, address, port, ID, flags and
 * letter case. */
static size_t make_frame(uint8_t *f, const struct qspec *s)
{
    size_t l2 = s->vlan ? 18 : 14;
    memcpy(f, SERVER_MAC, 6);
    uint8_t mac[6] = {(uint8_t)(rnd() & 0xfe), (uint8_t)rnd(), (uint8_t)rnd(), (uint8_t)rnd(),
                      (uint8_t)rnd(), (uint8_t)rnd()};
    memcpy(f + 6, mac, 6);
    if (s->vlan) {
        sp_put16(f + 12, 0x8100);
        sp_put16(f + 14, (uint16_t)(rnd() & 0x0fff));
    }
    sp_put16(f + l2 - 2, s->family == 4 ? 0x0800 : 0x86dd);
    size_t ip = l2, iplen = s->family == 4 ? 20 : 40, udp = ip + iplen, dns = udp + 8;
    uint8_t *m = f + dns;
    sp_put16(m, (uint16_t)rnd());
    m[2] = (uint8_t)(rnd() & 1);            /* RD */
    m[3] = (uint8_t)(rnd() & 0x10);         /* CD */
    sp_put16(m + 4, 1);
    memset(m + 6, 0, 6);
    const char *name = NAMES[s->name];
    size_t nlen = strlen(name) + 1, n = 12;
    for (size_t i = 0; i < nlen; i++) {
        uint8_t c = (uint8_t)name[i];
        m[n++] = (c >= 'a' && c <= 'z' && (rnd() & 1)) ? (uint8_t)(c - 32) : c;   /* 0x20 */
    }
    sp_put16(m + n, s->qtype);
    sp_put16(m + n + 2, 1);
    n += 4;
    if (s->edns) {
        const uint8_t opt[11] = {0, 0, 41, (uint8_t)(s->edns_size >> 8), (uint8_t)s->edns_size, 0,
                                 0, (uint8_t)(s->dnssec_ok ? 0x80 : 0), 0, 0, 0};
        memcpy(m + n, opt, 11);
        n += 11;
        m[11] = 1;
    }
    uint16_t ulen = (uint16_t)(8 + n);
    if (s->family == 4) {
        uint8_t *h = f + ip;
        memset(h, 0, 20);
        h[0] = 0x45;
        sp_put16(h + 2, (uint16_t)(20 + ulen));
        h[8] = 64;
        h[9] = 17;
        uint8_t src[4] = {10, (uint8_t)rnd(), (uint8_t)rnd(), (uint8_t)(1 + rnd() % 200)};
        memcpy(h + 12, src, 4);
        memcpy(h + 16, SERVER_V4, 4);
    } else {
        uint8_t *h = f + ip;
        memset(h, 0, 40);
        h[0] = 0x60;
        sp_put16(h + 4, ulen);
        h[6] = 17;
        h[7] = 64;
        h[8] = 0x20;
        h[9] = 0x01;
        for (int i = 10; i < 24; i++)
            h[i] = (uint8_t)rnd();
        memcpy(h + 24, SERVER_V6, 16);
    }
    sp_put16(f + udp, (uint16_t)(1024 + rnd() % 60000));
    sp_put16(f + udp + 2, 53);
    sp_put16(f + udp + 4, ulen);
    sp_put16(f + udp + 6, 0);
    /* correct sums: a ring backend drops frames the kernel would drop */
    if (s->family == 4)
        sp_put16(f + ip + 10, sp_csum_fold(sp_csum_partial(f + ip, 20, 0)));
    uint32_t sum = s->family == 4 ? sp_csum_partial(f + ip + 12, 8, 0)
                                  : sp_csum_partial(f + ip + 8, 32, 0);
    sum = sp_csum_partial(f + udp, ulen, sum + 17u + ulen);
    uint16_t check = sp_csum_fold(sum);
    sp_put16(f + udp + 6, check ? check : 0xffff);
    return dns + n;
}

static int checksums_ok(const uint8_t *f, size_t len)
{
    size_t l2 = sp_get16(f + 12) == 0x8100 ? 18 : 14;
    const uint8_t *ip = f + l2;
    uint32_t sum;
    size_t alen, udp;
    if ((ip[0] >> 4) == 4) {
        if (sp_csum_fold(sp_csum_partial(ip, 20, 0)) != 0)
            return 0;
        alen = 4;
        udp = l2 + 20;
        sum = sp_csum_partial(ip + 12, 8, 0);
    } else {
        alen = 16;
        udp = l2 + 40;
        sum = sp_csum_partial(ip + 8, 32, 0);
    }
    (void)alen;
    uint16_t ulen = sp_get16(f + udp + 4);
    if (udp + ulen != len || sp_get16(f + udp + 6) == 0)
        return 0;
    sum += 17 + ulen;
    sum = sp_csum_partial(f + udp, ulen, sum);
    return sp_csum_fold(sum) == 0;
}

struct pool {
    struct sp_precopy *p;
    uint8_t *mem;
};

static struct pool pool_new(unsigned frames)
{
    struct pool pl = {sp_precopy_new(frames), NULL};
    sp_precopy_set_min_len(pl.p, 0);          /* every answer copied, the small ones too */
    unsigned n = sp_precopy_frames(pl.p);
    pl.mem = malloc((size_t)n * CAP);
    for (unsigned i = 0; i < n; i++)
        sp_precopy_set_frame(pl.p, i, pl.mem + (size_t)i * CAP, CAP, 1000 + i);
    return pl;
}

static void pool_free(struct pool pl)
{
    sp_precopy_free(pl.p);
    free(pl.mem);
}

static struct sp_frame_config config(void)
{
    struct sp_frame_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.port = 53;
    cfg.ttl = 64;
    return cfg;
}

/* What one way of answering counts: the frame path's and DNS's. */
struct counts {
    struct sp_frame_counters frame;
    struct sp_dns_worker dns;
};

static void counts_init(struct counts *c)
{
    memset(c, 0, sizeof(*c));
    c->dns.cfg.max_udp = 1232;
}

static bool same_counts(const struct counts *a, const struct counts *b)
{
    return memcmp(&a->frame, &b->frame, sizeof(a->frame)) == 0 &&
           memcmp(&a->dns.counters, &b->dns.counters, sizeof(a->dns.counters)) == 0;
}

static void random_spec(struct qspec *s)
{
    s->name = (int)(rnd() % 4);
    s->qtype = (rnd() % 8 == 0) ? 16 : 1;
    s->family = rnd() & 1 ? 4 : 6;
    s->vlan = (rnd() & 3) == 0;
    s->edns = rnd() & 1;
    s->dnssec_ok = rnd() & 1;
    s->edns_size = (rnd() & 1) ? 1232 : (uint16_t)(512 + rnd() % 4000);
}

/* One query both ways; returns the pool index used (-1: TX buffer, -2: no reply). */
static int both_ways(struct sp_precopy *p, const struct sp_table *t,
                     const struct sp_frame_config *cfg, const uint8_t *rx, size_t len,
                     struct counts *cm, struct counts *cp)
{
    static uint8_t want[CAP], txbuf[CAP];
    size_t n = sp_dns_frame_answer(t, &cm->dns, cfg, &(struct sp_frame){.data = (uint8_t *)rx, .len = (uint32_t)len}, want, CAP, &cm->frame);
    struct sp_frame tx = {.data = txbuf, .cap = CAP, .id = 7, .pool = -1}, out;
    memset(&out, 0, sizeof(out));
    size_t m = sp_precopy_answer(p, t, &cp->dns, cfg, &(struct sp_frame){.data = (uint8_t *)rx, .len = (uint32_t)len}, &tx, &out, &cp->frame);
    CHECK_EQ(m, n);
    if (!m)
        return -2;
    CHECK_EQ(out.len, m);
    CHECK(memcmp(out.data, want, n) == 0);
    CHECK(checksums_ok(out.data, m));
    if (out.pool < 0)
        CHECK(out.data == txbuf);
    return out.pool;
}

static void test_random_queries_match_memcpy(void)
{
    struct sp_table *t = make_table(60);
    struct sp_frame_config cfg = config();
    struct pool pl = pool_new(64);
    struct counts cm, cp;
    counts_init(&cm);
    counts_init(&cp);
    uint8_t f[CAP];
    sp_precopy_begin(pl.p, t, 1);
    int mismatches = 0;
    for (int i = 0; i < 20000; i++) {
        struct qspec s;
        random_spec(&s);
        size_t len = make_frame(f, &s);
        if (i % 50 == 0)                      /* damage: never a copy, same verdict */
            f[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
        int before = checks_failed;
        int idx = both_ways(pl.p, t, &cfg, f, len, &cm, &cp);
        mismatches += checks_failed != before;
        if (idx >= 0)
            sp_precopy_complete(pl.p, (uint32_t)idx);
        if (mismatches > 5)
            break;
    }
    CHECK_EQ(mismatches, 0);
    CHECK(same_counts(&cm, &cp));   /* the same counts, query for query */
    const struct sp_precopy_counters *pc = sp_precopy_get_counters(pl.p);
    CHECK(pc->hits > 10000);
    CHECK(pc->fills > 0);
    CHECK_EQ(pc->fallbacks, 0);               /* everything was completed at once */
    CHECK(cm.dns.counters.truncated > 0);              /* the big answer: memcpy's, never a copy */
    CHECK_EQ(sp_precopy_in_flight(pl.p), 0);
    pool_free(pl);
    sp_table_free(t);
}

static void test_in_flight_copies_are_never_rewritten(void)
{
    struct sp_table *t = make_table(60);
    struct sp_frame_config cfg = config();
    struct pool pl = pool_new(8);             /* one set of eight ways */
    struct counts cm, cp;
    counts_init(&cm);
    counts_init(&cp);
    sp_precopy_begin(pl.p, t, 1);
    struct qspec s = {.name = 0, .qtype = 1, .family = 4};
    static uint8_t f[CAP], sent[8][CAP];
    int used[8], seen[8] = {0};
    for (int i = 0; i < 8; i++) {             /* nothing completes: eight fills */
        size_t len = make_frame(f, &s);
        used[i] = both_ways(pl.p, t, &cfg, f, len, &cm, &cp);
        CHECK(used[i] >= 0 && used[i] < 8 && !seen[used[i]]);
        if (used[i] >= 0 && used[i] < 8) {
            seen[used[i]] = 1;
            memcpy(sent[i], pl.mem + (size_t)used[i] * CAP, CAP);
        }
    }
    size_t len = make_frame(f, &s);
    CHECK_EQ(both_ways(pl.p, t, &cfg, f, len, &cm, &cp), -1);   /* the ninth: a fallback */
    for (int i = 0; i < 8; i++)
        CHECK(used[i] < 0 || memcmp(sent[i], pl.mem + (size_t)used[i] * CAP, CAP) == 0);
    const struct sp_precopy_counters *pc = sp_precopy_get_counters(pl.p);
    CHECK_EQ(pc->fills, 8);
    CHECK_EQ(pc->hits, 0);
    CHECK_EQ(pc->fallbacks, 1);
    CHECK_EQ(sp_precopy_in_flight(pl.p), 8);
    /* one comes back: the next query is a hit on exactly that copy */
    sp_precopy_complete(pl.p, (uint32_t)used[3]);
    len = make_frame(f, &s);
    CHECK_EQ(both_ways(pl.p, t, &cfg, f, len, &cm, &cp), used[3]);
    CHECK_EQ(pc->hits, 1);
    pool_free(pl);
    sp_table_free(t);
}

static void test_new_table_forgets_copies(void)
{
    struct sp_table *t1 = make_table(60), *t2 = make_table(61);
    struct sp_frame_config cfg = config();
    struct pool pl = pool_new(64);
    struct counts cm, cp;
    counts_init(&cm);
    counts_init(&cp);
    struct qspec s = {.name = 1, .qtype = 1, .family = 6, .vlan = 1};
    uint8_t f[CAP];
    const struct sp_precopy_counters *pc = sp_precopy_get_counters(pl.p);

    sp_precopy_begin(pl.p, t1, 1);
    int a = both_ways(pl.p, t1, &cfg, f, make_frame(f, &s), &cm, &cp);
    sp_precopy_complete(pl.p, (uint32_t)a);
    int in_flight = both_ways(pl.p, t1, &cfg, f, make_frame(f, &s), &cm, &cp);   /* hit */
    CHECK_EQ(pc->hits, 1);
    /* t2 differs in a TTL byte: a stale copy would show up as a mismatch */
    sp_precopy_begin(pl.p, t2, 2);
    both_ways(pl.p, t2, &cfg, f, make_frame(f, &s), &cm, &cp);
    CHECK_EQ(pc->hits, 1);
    CHECK_EQ(pc->fills, 2);
    sp_precopy_complete(pl.p, (uint32_t)in_flight);   /* an old copy comes back: forgotten */
    /* the same table pointer under a new generation (a freed table's address reused) */
    sp_precopy_begin(pl.p, t2, 3);
    int b = both_ways(pl.p, t2, &cfg, f, make_frame(f, &s), &cm, &cp);
    CHECK_EQ(pc->fills, 3);
    sp_precopy_complete(pl.p, (uint32_t)b);
    both_ways(pl.p, t2, &cfg, f, make_frame(f, &s), &cm, &cp);
    CHECK_EQ(pc->hits, 2);
    pool_free(pl);
    sp_table_free(t1);
    sp_table_free(t2);
}

/* Random groups of frames (some damaged, some to another port) answered in stages and one
 * by one: the same replies in the same order, the same counts. */
/* Groups in memcpy mode, and in precopy mode from a pool (every answer copied): both
 * byte for byte one frame at a time; precopy's TX buffers taken in order, once each. */
static void test_groups_match_one_by_one(void)
{
    struct sp_table *t = make_table(60);
    struct sp_frame_config cfg = config();
    struct counts one, grouped, pooled;
    counts_init(&one);
    counts_init(&grouped);
    counts_init(&pooled);
    struct pool pl = pool_new(64);
    sp_precopy_begin(pl.p, t, 1);
    static uint8_t rxbuf[SP_DNS_GROUP][CAP], txbuf[SP_DNS_GROUP][CAP], want[SP_DNS_GROUP][CAP];
    size_t want_len[SP_DNS_GROUP];
    int mismatches = 0, groups_with_gaps = 0;
    for (int round = 0; round < 2000 && mismatches <= 5; round++) {
        unsigned n = 1 + rnd() % SP_DNS_GROUP, nwant = 0;
        struct sp_frame rx[SP_DNS_GROUP], tx[SP_DNS_GROUP];
        for (unsigned j = 0; j < n; j++) {
            struct qspec s;
            random_spec(&s);
            size_t len = make_frame(rxbuf[j], &s);
            if (rnd() % 8 == 0)               /* damage: dropped, or an error answer */
                rxbuf[j][rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
            else if (rnd() % 16 == 0)         /* to another port: not ours */
                sp_put16(rxbuf[j] + (s.vlan ? 18 : 14) + (s.family == 4 ? 20 : 40) + 2, 5353);
            rx[j] = (struct sp_frame){.data = rxbuf[j], .len = (uint32_t)len, .cap = CAP};
            tx[j] = (struct sp_frame){.data = txbuf[j], .cap = CAP, .pool = -1};
            size_t m = sp_dns_frame_answer(t, &one.dns, &cfg, &rx[j], want[nwant], CAP,
                                           &one.frame);
            if (m)
                want_len[nwant++] = m;
        }
        groups_with_gaps += nwant < n;
        int before = checks_failed;
        unsigned got = sp_dns_frame_answer_group(t, &grouped.dns, &cfg, rx, n, tx,
                                                 &grouped.frame);
        CHECK_EQ(got, nwant);
        for (unsigned k = 0; k < got && k < nwant; k++) {
            CHECK_EQ(tx[k].len, want_len[k]);
            CHECK(memcmp(tx[k].data, want[k], want_len[k]) == 0);
        }
        struct sp_frame out[SP_DNS_GROUP];
        unsigned taken = 0;
        got = sp_precopy_answer_group(pl.p, t, &pooled.dns, &cfg, rx, n, tx, out, &taken,
                                      &pooled.frame);
        CHECK_EQ(got, nwant);
        for (unsigned k = 0, buffers = 0; k < got && k < nwant; k++) {
            CHECK_EQ(out[k].len, want_len[k]);
            CHECK(memcmp(out[k].data, want[k], want_len[k]) == 0);
            if (out[k].pool < 0)
                CHECK(out[k].data == txbuf[buffers++]);
            else
                sp_precopy_complete(pl.p, (uint32_t)out[k].pool);
            if (k + 1 == got)
                CHECK_EQ(buffers, taken);
        }
        mismatches += checks_failed != before;
    }
    CHECK_EQ(mismatches, 0);
    CHECK(groups_with_gaps > 100);    /* replies moved up past frames without one */
    CHECK(same_counts(&one, &grouped));
    CHECK(same_counts(&one, &pooled));
    const struct sp_precopy_counters *pc = sp_precopy_get_counters(pl.p);
    CHECK(pc->hits > 1000 && pc->fills > 0);
    CHECK_EQ(sp_precopy_in_flight(pl.p), 0);
    pool_free(pl);
    sp_table_free(t);
}

/* With the default minimum, the small answers are rendered as in memcpy mode (no hit,
 * fill or fallback counted for them) and the 700-byte one is copied. */
static void test_answers_below_the_minimum_go_the_memcpy_way(void)
{
    struct sp_table *t = make_table(60);
    struct sp_frame_config cfg = config();
    struct pool pl = pool_new(64);
    sp_precopy_set_min_len(pl.p, SP_PRECOPY_DEFAULT_MIN_LEN);
    struct counts cm, cp;
    counts_init(&cm);
    counts_init(&cp);
    uint8_t f[CAP];
    sp_precopy_begin(pl.p, t, 1);
    int big = 0;
    for (int i = 0; i < 4000; i++) {
        struct qspec s;
        random_spec(&s);
        size_t len = make_frame(f, &s);
        int idx = both_ways(pl.p, t, &cfg, f, len, &cm, &cp);
        if (idx >= 0) {
            sp_precopy_complete(pl.p, (uint32_t)idx);
            big++;
        }
    }
    const struct sp_precopy_counters *pc = sp_precopy_get_counters(pl.p);
    CHECK(big > 20);               /* the big answer's queries (1 in 32, with room for it) */
    CHECK_EQ(pc->hits + pc->fills, (uint64_t)big);
    CHECK(pc->hits > 0);
    CHECK(sp_dns_queries(&cm.dns.counters) > 3000);
    CHECK(pc->hits + pc->fills + pc->fallbacks < sp_dns_queries(&cm.dns.counters) / 10);
    CHECK(same_counts(&cm, &cp));
    pool_free(pl);
    sp_table_free(t);
}

/* A name of SP_DNS_NAME_MAX bytes, its root label included. */
static const char *longest_name(void)
{
    static char name[SP_DNS_NAME_MAX];
    const uint8_t labels[] = {63, 63, 63, 61};
    size_t n = 0;
    for (size_t i = 0; i < sizeof(labels); i++) {
        name[n++] = (char)labels[i];
        memset(name + n, 'a' + (int)i, labels[i]);
        n += labels[i];
    }
    CHECK_EQ(n + 1, SP_DNS_NAME_MAX);
    return name;
}

/* sp_precopy_may_copy() is exact: a table whose longest response, asked with the longest
 * name and an OPT record, makes an answer of just the pool's minimum may be copied, and
 * is; one byte short of it may not, and that answer goes the memcpy way. */
static void test_may_copy_knows_the_longest_answer(void)
{
    static const struct sp_patch patches[] = {
        {.op = SP_PATCH_INSERT, .field = SP_DNS_FIELD_QUESTION, .dst = 12},
        {.op = SP_PATCH_COPY, .field = SP_DNS_FIELD_MESSAGE, .dst = 0, .src = 0, .len = 2},
        {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 2, .src = 2, .mask = 0x01},
        {.op = SP_PATCH_COPY_BITS, .field = SP_DNS_FIELD_MESSAGE, .dst = 3, .src = 3, .mask = 0x10},
    };
    uint8_t txt[100] = {0, 0, 0x84, 0x00, 0, 1, 0, 1, 0, 0, 0, 0,
                        0xc0, 0x0c, 0, 16, 0, 1, 0, 0, 0, 60, 0, 76, 75};
    memset(txt + 25, 'x', sizeof(txt) - 25);
    NAMES[LONGEST_NAME] = longest_name();
    struct sp_table_builder *b = sp_table_builder_new();
    /* a shorter one first: the longest, not the last added */
    CHECK_EQ(sp_table_add_response(b, txt, 40, NULL, 0, SP_RCODE_NOERROR), 0);
    CHECK_EQ(sp_table_add_response(b, txt, sizeof(txt), patches, 4, SP_RCODE_NOERROR), 1);
    CHECK_EQ(sp_table_add_key(b, sp_dns_tag(SP_DNS_EXACT, 1, 16),
                              (const uint8_t *)NAMES[LONGEST_NAME], SP_DNS_NAME_MAX, 1), 0);
    struct sp_table *t = sp_table_builder_finish(b);
    CHECK_EQ(sp_table_longest_response(t), sizeof(txt));
    size_t answer = sizeof(txt) + SP_DNS_NAME_MAX + 4 + SP_DNS_OPT_LEN;
    struct sp_frame_config cfg = config();
    struct pool pl = pool_new(64);
    uint8_t f[CAP];
    struct qspec s = {.name = LONGEST_NAME, .qtype = 16, .family = 4, .edns = 1,
                      .edns_size = 1232};
    for (size_t min = answer; min <= answer + 1; min++) {
        struct counts cm, cp;
        counts_init(&cm);
        counts_init(&cp);
        sp_precopy_set_min_len(pl.p, min);
        CHECK_EQ(sp_precopy_may_copy(pl.p, t), min == answer);
        sp_precopy_begin(pl.p, t, min);
        size_t len = make_frame(f, &s);
        int idx = both_ways(pl.p, t, &cfg, f, len, &cm, &cp);
        const struct sp_precopy_counters *pc = sp_precopy_get_counters(pl.p);
        CHECK_EQ(idx >= 0, min == answer);    /* copied into the pool, or a TX buffer */
        CHECK_EQ(pc->fills, 1u);              /* the first, and no second */
        if (idx >= 0)
            sp_precopy_complete(pl.p, (uint32_t)idx);
    }
    pool_free(pl);
    sp_table_free(t);
}

static void test_pool_sizes(void)
{
    CHECK(sp_precopy_new(7) == NULL);
    CHECK(sp_precopy_new(SP_PRECOPY_MAX_FRAMES + 1) == NULL);
    struct sp_precopy *p = sp_precopy_new(100);    /* 8 sets of 8 */
    CHECK_EQ(sp_precopy_frames(p), 64);
    sp_precopy_free(p);
    p = sp_precopy_new(SP_PRECOPY_DEFAULT_FRAMES);
    CHECK_EQ(sp_precopy_frames(p), SP_PRECOPY_DEFAULT_FRAMES);
    sp_precopy_free(p);
}

int main(void)
{
    test_random_queries_match_memcpy();
    test_in_flight_copies_are_never_rewritten();
    test_new_table_forgets_copies();
    test_answers_below_the_minimum_go_the_memcpy_way();
    test_pool_sizes();
    test_groups_match_one_by_one();
    test_may_copy_knows_the_longest_answer();
    return check_report("test_precopy");
}
