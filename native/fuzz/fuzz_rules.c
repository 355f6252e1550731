/* Custom responders: one raw Ethernet frame through sp_responder_frame (with and
 * without `all`), its UDP payload (and the input itself) through
 * sp_responder_datagram, and slow-path replies of many lengths into TX buffers of
 * many sizes, against a key-value responder's rules (ECHO, keyed GET with a miss
 * response, DEL to the slow path, a COPY of an ID, a catch-all echo for long
 * payloads). Builds its own table: it needs no SP_FUZZ_TABLE. */
#include <stdbool.h>
#include <stdint.h>

#include "fuzz_common.h"
#include "stormpy/app/dns/worker.h"
#include "stormpy/app/rules/rules.h"
#include "stormpy/proto/csum.h"
#include "stormpy/proto/wire.h"

#define PORT 7000   /* make_inputs.py sends its seeds here */

static const uint8_t MAC[6] = {2, 0, 0, 0, 0, 1};
static const struct sp_table *table;

#define CHECK(cond)                  \
    do {                             \
        if (!(cond))                 \
            __builtin_trap();        \
    } while (0)

static int64_t add(struct sp_table_builder *b, const char *s, size_t len,
                   const struct sp_patch *p, uint16_t np)
{
    int64_t r = sp_table_add_response(b, (const uint8_t *)s, (uint32_t)len, p, np, 0);
    CHECK(r >= 0);
    return r;
}

static void set_match(struct sp_rule *r, uint16_t off, const char *m, uint16_t min_len)
{
    r->match_off = off;
    r->match_len = (uint8_t)strlen(m);
    memcpy(r->match, m, r->match_len);
    r->min_len = min_len;
}

static void set_key(struct sp_rule *r, unsigned i, uint16_t end, const char *stops)
{
    r->keyed = 1;
    r->tag = sp_rule_tag(i);
    r->key_off = r->min_len;
    r->key_end = end;
    r->nstops = (uint8_t)strlen(stops);
    memcpy(r->stops, stops, r->nstops);
}

static const struct sp_table *build(void)
{
    struct sp_table_builder *b = sp_table_builder_new();
    const struct sp_patch echo[] = {{.op = SP_PATCH_INSERT, .field = SP_RULE_FIELD_ECHO, .dst = 5}};
    const struct sp_patch key[] = {{.op = SP_PATCH_INSERT, .field = SP_RULE_FIELD_KEY, .dst = 10}};
    const struct sp_patch id[] = {
        {.op = SP_PATCH_COPY, .field = SP_RULE_FIELD_PAYLOAD, .dst = 0, .src = 0, .len = 2},
        {.op = SP_PATCH_COPY_BITS, .field = SP_RULE_FIELD_PAYLOAD, .dst = 2, .src = 5, .mask = 0x81},
        {.op = SP_PATCH_COPY, .field = SP_RULE_FIELD_PAYLOAD, .dst = 8, .src = 6, .len = 3},
    };
    const struct sp_patch all[] = {{.op = SP_PATCH_INSERT, .field = SP_RULE_FIELD_ECHO, .dst = 3}};
    static char big[1400];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)('a' + i % 26);
    int64_t r_echo = add(b, "ECHO \r\n", 7, echo, 1);
    int64_t r_value = add(b, "VALUE k 0 1\r\n1\r\nEND\r\n", 21, NULL, 0);
    int64_t r_big = add(b, big, sizeof(big), NULL, 0);
    int64_t r_miss = add(b, "NOT_FOUND \r\n", 12, key, 1);    /* echoes the key */
    int64_t r_end = add(b, "END\r\n", 5, NULL, 0);
    int64_t r_id = add(b, "\0\0\0 ID OK\0\0\0\r\n", 14, id, 3);
    int64_t r_all = add(b, "ALL\n", 4, all, 1);

    enum { ECHO, GET, ID, SLOW, DEL, ALL, N };
    struct sp_rules *rs = calloc(1, sizeof(*rs) + N * sizeof(struct sp_rule));
    rs->magic = SP_RULES_MAGIC;
    rs->nrules = N;
    struct sp_rule *r = rs->rule;
    set_match(&r[ECHO], 0, "ECHO ", 5);
    r[ECHO].echo_off = 5;
    r[ECHO].echo_end = SP_RULE_TO_END;
    r[ECHO].response = (uint32_t)r_echo;
    set_match(&r[GET], 0, "GET ", 4);
    set_key(&r[GET], GET, SP_RULE_TO_END, "\r\n ");
    r[GET].response = (uint32_t)r_miss;
    set_match(&r[ID], 2, "ID", 4);             /* the ID at [0, 2); [6, 9) may be missing */
    r[ID].response = (uint32_t)r_id;
    set_match(&r[SLOW], 0, "SLOW", 4);
    r[SLOW].response = SP_RULE_NO_RESPONSE;
    set_match(&r[DEL], 0, "DEL ", 4);
    set_key(&r[DEL], DEL, 12, "\r\n");
    r[DEL].response = SP_RULE_NO_RESPONSE;
    set_match(&r[ALL], 0, "", 200);           /* anything long: echoed whole */
    r[ALL].echo_off = 0;
    r[ALL].echo_end = SP_RULE_TO_END;
    r[ALL].response = (uint32_t)r_all;
    CHECK(sp_table_set_program(b, rs, (uint32_t)(sizeof(*rs) + N * sizeof(struct sp_rule))) == 0);
    free(rs);
    CHECK(sp_table_add_key(b, sp_rule_tag(GET), (const uint8_t *)"k", 1, (uint32_t)r_value) == 0);
    CHECK(sp_table_add_key(b, sp_rule_tag(GET), (const uint8_t *)"big", 3, (uint32_t)r_big) == 0);
    CHECK(sp_table_add_key(b, sp_rule_tag(GET), (const uint8_t *)"", 0, (uint32_t)r_end) == 0);
    CHECK(sp_table_add_key(b, sp_rule_tag(DEL), (const uint8_t *)"k", 1, (uint32_t)r_end) == 0);
    struct sp_table *t = sp_table_builder_finish(b);
    char err[160];
    CHECK(t && sp_rules_check(t, err, sizeof(err)) == 0);
    /* workers read a flat copy (the shared region) */
    size_t size = sp_table_flat_size(t);
    struct sp_table *flat = sp_table_flatten(t, aligned_alloc(64, size));
    sp_table_free(t);
    CHECK(sp_rules_of(flat) != NULL);
    return flat;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    table = build();
    return 0;
}

/* Independently of the parser: could this frame be UDP to PORT at all? */
static bool udp_to_port(const uint8_t *f, size_t len)
{
    if (len < 14)
        return false;
    size_t l2 = 14;
    uint16_t type = sp_get16(f + 12);
    if (type == 0x8100 || type == 0x88a8) {
        if (len < 18)
            return false;
        type = sp_get16(f + 16);
        l2 = 18;
    }
    const uint8_t *ip = f + l2;
    size_t rest = len - l2, udp;
    if (type == 0x0800) {
        if (rest < 20 || ip[0] >> 4 != 4 || ip[9] != 17)
            return false;
        udp = (size_t)(ip[0] & 15) * 4;
    } else if (type == 0x86dd) {
        if (rest < 40 || ip[0] >> 4 != 6 || ip[6] != 17)
            return false;
        udp = 40;
    } else {
        return false;
    }
    return rest >= udp + 8 && sp_get16(ip + udp + 2) == PORT;
}

static uint32_t hash(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static const size_t CAPS[] = {0, 20, 60, 600, SP_FRAME_MAX};
#define NCAPS (sizeof(CAPS) / sizeof(CAPS[0]))

/* The reply frame to rx: to its sender, from PORT, with checksums that verify. */
static void check_frame_reply(const uint8_t *rx, const uint8_t *tx, size_t n,
                              const struct sp_slow_packet *slow)
{
    const struct sp_frame_query *fq = &slow->fq;
    CHECK(n >= fq->headers && n >= SP_ETH_HEADER_LEN);
    CHECK(!(tx[0] & 1));                                  /* never to a group MAC */
    CHECK(memcmp(tx, rx + 6, 6) == 0 && memcmp(tx + 6, rx, 6) == 0);
    struct sp_udpip u;
    CHECK(sp_udpip_parse(tx + fq->l2, n - fq->l2, &u));
    CHECK(u.family == fq->u.family && u.sport == PORT && u.dport == fq->u.sport);
    CHECK(fq->l2 + u.payload_off + u.payload_len == n);
    CHECK(sp_udpip_checksums_ok(tx + fq->l2, &u, false));
}

/* Slow-path replies to a frame the responder took as UDP to its port. */
static void slow_replies(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len,
                         struct sp_slow_packet *slow, uint32_t h)
{
    struct sp_frame rxf = {.data = (uint8_t *)rx, .len = (uint32_t)len, .id = 99};
    slow->frame = &rxf;
    static uint8_t payload[SP_FRAME_MAX + 1];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)(h >> (i % 4 * 8)) ^ (uint8_t)i;
    for (unsigned c = 0; c < NCAPS; c++) {
        size_t cap = CAPS[c];
        size_t room = cap > slow->fq.headers ? cap - slow->fq.headers : 0;
        const size_t lens[] = {0, 1, h % (SP_FRAME_MAX + 1), room ? room - 1 : 0, room, room + 1};
        for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            for (int datagrams = 0; datagrams < 2; datagrams++) {
                uint8_t *buf = malloc(cap ? cap : 1);   /* exact size: ASan sees overflows */
                struct sp_frame tx = {.data = buf, .cap = (uint32_t)cap, .id = 1};
                bool sent = sp_responder_reply(cfg, datagrams, slow, payload, lens[i], &tx);
                size_t n = sent ? tx.len : 0;
                CHECK(n <= cap);
                if (sent) {
                    CHECK(n == (datagrams ? 0 : slow->fq.headers) + lens[i]);
                    if (datagrams)
                        CHECK(tx.id == 99);
                    else
                        check_frame_reply(rx, buf, n, slow);
                }
                free(buf);
            }
        }
    }
}

static void frames(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len, uint32_t h)
{
    static struct sp_dns_worker dns = {.cfg = {.max_udp = 1232}};
    for (unsigned c = 0; c < NCAPS; c++) {
        size_t cap = CAPS[c];
        uint8_t *tx[2] = {malloc(cap ? cap : 1), malloc(cap ? cap : 1)};
        size_t n[2];
        bool to_slow[2];
        struct sp_slow_packet slow[2];
        uint64_t stack = 0;
        for (int all = 0; all < 2; all++) {
            struct sp_frame_counters fc = {0};
            struct sp_responder_counters rc = {0};
            n[all] = sp_responder_frame(table, sp_rules_of(table), cfg, all, &(struct sp_frame){.data = (uint8_t *)rx, .len = (uint32_t)len}, tx[all], cap, &dns, &fc,
                                        &rc, &slow[all], &to_slow[all]);
            stack = fc.stack_replies;
            CHECK(n[all] <= cap);
            CHECK(!(n[all] && to_slow[all]));
            if (slow[all].udp || (n[all] && !stack))
                CHECK(udp_to_port(rx, len));     /* rule answers go to UDP to the port only */
            if (to_slow[all] && !all)
                CHECK(slow[all].udp);            /* without all: only UDP to the port */
            if (n[all] && !stack) {
                CHECK(slow[all].udp);
                check_frame_reply(rx, tx[all], n[all], &slow[all]);
            }
            if (n[all])
                CHECK(n[all] >= SP_ETH_HEADER_LEN && !(tx[all][0] & 1));   /* never to a group */
            if (n[all] && cfg->mtu)
                CHECK(n[all] <= SP_ETH_HEADER_LEN + SP_VLAN_TAG_LEN + cfg->mtu);
        }
        /* all decides only where frames go, never what a reply says */
        CHECK(n[0] == n[1] && memcmp(tx[0], tx[1], n[0]) == 0);
        CHECK(slow[0].udp == slow[1].udp && (!to_slow[0] || to_slow[1]));
        if (n[0] && !stack) {
            /* the same rule answers the bare payload the same way */
            const struct sp_frame_query *fq = &slow[0].fq;
            size_t room = n[0] - fq->headers;
            uint8_t *d = malloc(room ? room : 1);
            struct sp_frame_counters fc = {0};
            struct sp_responder_counters rc = {0};
            bool ds, dr;
            size_t m = sp_responder_datagram(table, sp_rules_of(table), rx + fq->l2 + fq->u.payload_off,
                                             fq->u.payload_len, d, room, &dns, &fc, &rc, &ds,
                                             &dr);
            CHECK(m == room && !ds && dr && memcmp(d, tx[0] + fq->headers, m) == 0);
            free(d);
        }
        if (c == NCAPS - 1 && slow[1].udp)
            slow_replies(cfg, rx, len, &slow[1], h);
        free(tx[0]);
        free(tx[1]);
    }
}

static void datagrams(const uint8_t *rx, size_t len)
{
    static struct sp_dns_worker dns = {.cfg = {.max_udp = 1232}};
    for (unsigned c = 0; c < NCAPS; c++) {
        size_t cap = CAPS[c];
        uint8_t *tx = malloc(cap ? cap : 1);
        struct sp_frame_counters fc = {0};
        struct sp_responder_counters rc = {0};
        bool to_slow, replied;
        size_t n = sp_responder_datagram(table, sp_rules_of(table), rx, len, tx, cap, &dns, &fc, &rc, &to_slow,
                                         &replied);
        CHECK(n <= cap && !(replied && to_slow) && (n == 0 || replied));
        CHECK(rc.rule_answers == replied);
        free(tx);
    }
}

static void raw(const struct sp_frame_config *cfg, const uint8_t *rx, size_t len)
{
    for (unsigned c = 0; c < NCAPS; c++) {
        size_t cap = CAPS[c];
        uint8_t *buf = malloc(cap ? cap : 1);
        struct sp_frame tx = {.data = buf, .cap = (uint32_t)cap};
        for (int datagrams = 0; datagrams < 2; datagrams++) {
            size_t n = sp_responder_raw(cfg, datagrams, rx, len, &tx);
            CHECK(n <= cap && (n == 0 || (n == len && !datagrams && n >= SP_ETH_HEADER_LEN)));
            if (cfg->mtu)
                CHECK(n <= (size_t)cfg->mtu + SP_ETH_HEADER_LEN + SP_VLAN_TAG_LEN);
        }
        free(buf);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *rx = fuzz_copy(data, size);
    uint32_t h = hash(data, size);
    struct sp_frame_config cfg = {.port = PORT, .ttl = 64};
    frames(&cfg, rx, size, h);                    /* a socket-like view: no identity */
    datagrams(rx, size);
    raw(&cfg, rx, size);

    memcpy(cfg.mac, MAC, 6);                      /* an owned interface with an MTU */
    cfg.check_dst = 1, cfg.mtu = (h & 1) ? 1500 : 576, cfg.own_stack = 1;
    cfg.nv4 = cfg.nv6 = 1, cfg.has_ipv4 = cfg.has_ipv6 = 1;
    const uint8_t v4[4] = {198, 18, 0, 1};
    const uint8_t v6[16] = {0x20, 0x01, 0, 2, [15] = 1};
    memcpy(cfg.v4[0], v4, 4), memcpy(cfg.ipv4, v4, 4);
    memcpy(cfg.v6[0], v6, 16), memcpy(cfg.ipv6, v6, 16);
    frames(&cfg, rx, size, h);
    raw(&cfg, rx, size);
    free(rx);
    return 0;
}
