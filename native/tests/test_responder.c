/* Custom responders on the wire: the frame, datagram and slow-path reply functions
 * (rules.h), over the rule tables of rules_fixture.h. */
#include "rules_fixture.h"

#define PORT 7000

static const uint8_t SERVER_MAC[6] = {2, 0, 0, 0, 0, 1};
static const uint8_t PEER_MAC[6] = {2, 0, 0, 0, 0, 2};
static const uint8_t SERVER_V4[4] = {198, 18, 0, 1};
static const uint8_t PEER_V4[4] = {198, 18, 0, 2};
static const uint8_t SERVER_V6[16] = {0x20, 0x01, 0, 2, [15] = 1};
static const uint8_t PEER_V6[16] = {0x20, 0x01, 0, 2, [15] = 2};

/* ---- frames ---- */

static struct sp_frame_config config(void)
{
    struct sp_frame_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.port = PORT;
    cfg.ttl = 64;
    cfg.dns.max_udp = 1232;
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
    static struct sp_frame_scratch scratch;
    struct run r;
    memset(&r, 0, sizeof(r));
    r.to_slow = !all;                 /* overwritten either way */
    r.n = sp_responder_frame(t, sp_rules_of(t), cfg, all, rx, len, tx, cap, &scratch, &r.c, &r.rc, &r.slow,
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
    struct sp_frame_config cfg = config();
    struct sp_frame_scratch scratch;
    struct sp_frame_counters c;
    struct sp_responder_counters rc;
    memset(&scratch, 0, sizeof(scratch));
    memset(&c, 0, sizeof(c));
    memset(&rc, 0, sizeof(rc));
    uint8_t tx[CAP];
    bool to_slow = true, replied;
    size_t n = sp_responder_datagram(t, sp_rules_of(t), &cfg, (const uint8_t *)"GET key\r\n", 9, tx, CAP, &scratch,
                                     &c, &rc, &to_slow, &replied);
    CHECK(RENDERED(tx, n, "VALUE key\r\n"));
    CHECK(!to_slow && replied);
    CHECK_EQ(rc.rule_answers, 1);
    CHECK_EQ(c.frames, 1);
    n = sp_responder_datagram(t, sp_rules_of(t), &cfg, (const uint8_t *)"xyz", 3, tx, CAP, &scratch, &c, &rc,
                              &to_slow, &replied);
    CHECK(n == 0 && to_slow);
    n = sp_responder_datagram(t, sp_rules_of(t), &cfg, (const uint8_t *)"GET key\r\n", 9, tx, 10, &scratch, &c,
                              &rc, &to_slow, &replied);
    CHECK(n == 0 && !to_slow);
    CHECK_EQ(rc.rule_unsent, 1);
    n = sp_responder_datagram(t, sp_rules_of(t), &cfg, (const uint8_t *)"GET key\r\n", 9, tx, 11, &scratch, &c,
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
        struct sp_frame_scratch scratch;
        memset(&scratch, 0, sizeof(scratch));
        bool to_slow, replied;
        size_t n = sp_responder_datagram(t, sp_rules_of(t), &cfg, q, qlen, tx, CAP, &scratch, &r.c, &r.rc,
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
        size_t n = sp_responder_reply(&cfg, false, &r.slow, (const uint8_t *)"pong!", 5, &tx);
        CHECK_EQ(n, headers + 5);
        CHECK_EQ(tx.len, n);
        check_reply(rx, buf, n, PAYLOAD("pong!"));
        /* odd and even lengths, up to the frame's room exactly */
        uint8_t payload[CAP];
        for (size_t i = 0; i < sizeof(payload); i++)
            payload[i] = (uint8_t)rnd();
        tx.cap = (uint32_t)(headers + 101);
        CHECK_EQ(sp_responder_reply(&cfg, false, &r.slow, payload, 101, &tx), headers + 101);
        check_reply(rx, buf, tx.len, (const char *)payload, 101);
        CHECK_EQ(sp_responder_reply(&cfg, false, &r.slow, payload, 100, &tx), headers + 100);
        check_reply(rx, buf, tx.len, (const char *)payload, 100);
        tx.len = 7;
        CHECK_EQ(sp_responder_reply(&cfg, false, &r.slow, payload, 102, &tx), 0);
        CHECK_EQ(tx.len, 7);                        /* untouched */
        tx.cap = CAP;
        CHECK_EQ(sp_responder_reply(&cfg, false, &r.slow, payload, CAP - headers + 1, &tx), 0);
        /* the MTU */
        struct sp_frame_config small = cfg;
        small.mtu = (uint16_t)(headers - (family == 4 ? 14 : 18) + 50);
        CHECK_EQ(sp_responder_reply(&small, false, &r.slow, payload, 50, &tx), headers + 50);
        CHECK_EQ(sp_responder_reply(&small, false, &r.slow, payload, 51, &tx), 0);
        /* not UDP: nothing to reply to */
        struct sp_slow_packet not_udp = r.slow;
        not_udp.udp = 0;
        CHECK_EQ(sp_responder_reply(&cfg, false, &not_udp, payload, 5, &tx), 0);

        /* sockets: the payload alone, to the request's peer */
        tx.cap = 64;
        tx.id = 0;
        CHECK_EQ(sp_responder_reply(&cfg, true, &r.slow, payload, 64, &tx), 64);
        CHECK_EQ(tx.len, 64);
        CHECK_EQ(tx.id, 42);
        CHECK(memcmp(buf, payload, 64) == 0);
        CHECK_EQ(sp_responder_reply(&cfg, true, &r.slow, payload, 65, &tx), 0);
        CHECK_EQ(sp_responder_reply(&cfg, true, &not_udp, payload, 5, &tx), 0);
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
    test_frames();
    test_datagrams();
    test_dns_mode();
    test_replies();
    return check_report("test_responder");
}
