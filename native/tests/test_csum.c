/* Checksums: partial sums, RFC 1624 updates, and UDP/IP reply headers. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stormpy/proto/csum.h"
#include "stormpy/proto/udpip.h"

/* The textbook definition, for comparison. */
static uint16_t reference_checksum(const uint8_t *p, size_t len)
{
    uint64_t sum = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        sum += (uint32_t)(p[i] << 8 | p[i + 1]);
    if (len & 1)
        sum += (uint32_t)p[len - 1] << 8;
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

static void test_partial_matches_reference(void)
{
    uint8_t buf[1500];
    srand(1);
    for (size_t len = 0; len < sizeof(buf); len += 37) {
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)rand();
        CHECK_EQ(sp_csum_fold(sp_csum_partial(buf, len, 0)), reference_checksum(buf, len));
    }
    memset(buf, 0xff, sizeof(buf));   /* carries in every word */
    CHECK_EQ(sp_csum_fold(sp_csum_partial(buf, 1499, 0)), reference_checksum(buf, 1499));
}

/* sp_csum_acc_is_ffff() says what folding the accumulated sum says: random data
 * (about one in 65,535 sums to 0xffff), data with its checksum written in (always
 * 0xffff), all zeros (0), all ones (0xffff, with carries in every word). */
static void test_acc_is_ffff_matches_the_fold(void)
{
    uint8_t buf[64];
    srand(4);
    int right = 0, rounds = 200000;
    for (int round = 0; round < rounds; round++) {
        size_t len = 2 + (size_t)(rand() % 62);
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)rand();
        if (round & 1) {              /* the checksum at 0, over the rest */
            buf[0] = buf[1] = 0;
            uint16_t check = sp_csum_fold(sp_csum_partial(buf, len, 0));
            buf[0] = (uint8_t)(check >> 8);
            buf[1] = (uint8_t)check;
        }
        uint64_t acc = sp_csum_acc(buf, len, 0);
        bool want = sp_csum_acc_reduce(acc) == 0xffff;
        right += sp_csum_acc_is_ffff(acc) == want && (want || !(round & 1)) &&
                 (acc == 0 || sp_csum_acc_nonzero_is_ffff(acc) == want);
    }
    CHECK_EQ(right, rounds);
    memset(buf, 0, sizeof(buf));
    CHECK(!sp_csum_acc_is_ffff(sp_csum_acc(buf, sizeof(buf), 0)));
    memset(buf, 0xff, sizeof(buf));
    CHECK(sp_csum_acc_is_ffff(sp_csum_acc(buf, sizeof(buf), 0)));
    CHECK(sp_csum_acc_is_ffff(UINT64_MAX) && sp_csum_acc_is_ffff(0xffff) &&
          !sp_csum_acc_is_ffff(0xfffe) && sp_csum_acc_is_ffff(0xffffull << 40));
}

/* sp_csum_acc_fold() is the complemented sp_csum_acc_reduce(), whatever the carries
 * (its halves' sum overflowing, all ones, 0); sp_csum_acc_net() adds a network-order sum
 * as its bytes swapped would be. */
static uint64_t rand64(void)
{
    return (uint64_t)rand() << 42 ^ (uint64_t)rand() << 21 ^ (uint64_t)rand();
}

static void test_acc_fold_matches_the_reduce(void)
{
    static const uint64_t edges[] = {0, 1, 0xffff, 0x10000, 0xffffffff, 0x100000000ull,
                                     0xffff0000ffffull, 0xfffffffffffeull, UINT64_MAX,
                                     UINT64_MAX - 1, 0x8000000080000000ull};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        CHECK_EQ(sp_csum_acc_fold(edges[i]), (uint16_t)~sp_csum_acc_reduce(edges[i]));
    srand(5);
    int right = 0, rounds = 200000;
    for (int round = 0; round < rounds; round++) {
        uint64_t acc = rand64() >> (rand() % 64);
        uint64_t net = rand64() >> 24;   /* below 2^40 */
        uint64_t low = acc >> 2;         /* room for the shifted sum */
        uint32_t want = sp_csum_reduce(sp_csum_native(sp_csum_acc_reduce(low)) +
                                       sp_csum_reduce((uint32_t)net) +
                                       sp_csum_reduce((uint32_t)(net >> 32)));
        right += sp_csum_acc_fold(acc) == (uint16_t)~sp_csum_acc_reduce(acc) &&
                 sp_csum_native(sp_csum_acc_fold(sp_csum_acc_net(low, net))) == (uint16_t)~want;
    }
    CHECK_EQ(right, rounds);
}

static void test_rfc1071_example(void)
{
    /* RFC 1071 section 3: the sum of these words is 0xddf2. */
    const uint8_t data[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
    CHECK_EQ(sp_csum_reduce(sp_csum_partial(data, sizeof(data), 0)), 0xddf2);
}

static void test_update16_matches_recompute(void)
{
    uint8_t buf[64];
    srand(2);
    for (int round = 0; round < 1000; round++) {
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = (uint8_t)rand();
        uint16_t check = sp_csum_fold(sp_csum_partial(buf, sizeof(buf), 0));
        size_t at = (size_t)(rand() % 32) * 2;
        uint16_t old = (uint16_t)(buf[at] << 8 | buf[at + 1]);
        uint16_t new = round == 0 ? (uint16_t)~old : (uint16_t)rand();
        buf[at] = (uint8_t)(new >> 8);
        buf[at + 1] = (uint8_t)new;
        uint16_t want = sp_csum_fold(sp_csum_partial(buf, sizeof(buf), 0));
        uint16_t got = sp_csum_update16(check, old, new);
        /* 0x0000 and 0xffff are the same number in one's complement. */
        CHECK(got == want || (got ^ want) == 0xffff);
    }
}

static void test_odd_offset_swap(void)
{
    uint8_t buf[101];
    srand(3);
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)rand();
    /* The sum of a block that starts at an odd offset is its byte-swapped sum. */
    uint32_t whole = sp_csum_partial(buf, sizeof(buf), 0);
    uint32_t split = sp_csum_add(sp_csum_partial(buf, 1, 0),
                                 sp_csum_swap(sp_csum_partial(buf + 1, sizeof(buf) - 1, 0)));
    CHECK_EQ(sp_csum_fold(whole), sp_csum_fold(split));
    uint32_t sub = sp_csum_sub(whole, sp_csum_partial(buf, 10, 0));
    CHECK_EQ(sp_csum_fold(sub), sp_csum_fold(sp_csum_partial(buf + 10, sizeof(buf) - 10, 0)));
}

static size_t build_request(uint8_t *pkt, int family, const uint8_t *payload, size_t plen)
{
    struct sp_udpip u = {.family = (uint8_t)family, .sport = 53, .dport = 40000};
    for (int i = 0; i < 16; i++) {
        u.src[i] = (uint8_t)(0x20 + i);
        u.dst[i] = (uint8_t)(0xc6 + i);
    }
    if (family == 4) {
        memset(u.src + 4, 0, 12);
        memset(u.dst + 4, 0, 12);
    }
    /* A reply to u is a request from u's destination: write it, then use it. */
    size_t h = sp_udpip_write_reply(pkt, &u, plen, sp_csum_partial(payload, plen, 0), 64);
    memcpy(pkt + h, payload, plen);
    return h + plen;
}

static void test_udpip_roundtrip(int family)
{
    uint8_t payload[77], pkt[256], reply[256];
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (uint8_t)(i * 7);
    size_t len = build_request(pkt, family, payload, sizeof(payload));

    struct sp_udpip req;
    CHECK(sp_udpip_parse(pkt, len, &req));
    CHECK_EQ(req.family, family);
    CHECK_EQ(req.sport, 40000);
    CHECK_EQ(req.dport, 53);
    CHECK_EQ(req.payload_len, sizeof(payload));
    CHECK(memcmp(pkt + req.payload_off, payload, sizeof(payload)) == 0);

    /* A checksummed packet sums to zero over its pseudo-header and UDP part. */
    size_t ip_len = family == 4 ? 20 : 40;
    size_t alen = family == 4 ? 4 : 16;
    uint32_t sum = sp_csum_partial(req.src, alen, 0);
    sum = sp_csum_partial(req.dst, alen, sum);
    sum += 17 + (uint32_t)(len - ip_len);
    sum = sp_csum_partial(pkt + ip_len, len - ip_len, sum);
    CHECK_EQ(sp_csum_fold(sum), 0);
    if (family == 4)
        CHECK_EQ(sp_csum_fold(sp_csum_partial(pkt, 20, 0)), 0);

    size_t h = sp_udpip_write_reply(reply, &req, 5, sp_csum_partial("hello", 5, 0), 64);
    memcpy(reply + h, "hello", 5);
    struct sp_udpip back;
    CHECK(sp_udpip_parse(reply, h + 5, &back));
    CHECK_EQ(back.sport, 53);
    CHECK_EQ(back.dport, 40000);
    CHECK(memcmp(back.src, req.dst, alen) == 0 && memcmp(back.dst, req.src, alen) == 0);
}

static void test_udpip_rejects(void)
{
    uint8_t payload[8] = {0}, pkt[128];
    size_t len = build_request(pkt, 4, payload, sizeof(payload));
    struct sp_udpip u;
    for (size_t cut = 0; cut < len; cut++)   /* every truncation is refused */
        CHECK(!sp_udpip_parse(pkt, cut, &u));
    uint8_t frag[128];
    memcpy(frag, pkt, len);
    frag[6] |= 0x20;                          /* more fragments */
    CHECK(!sp_udpip_parse(frag, len, &u));
    memcpy(frag, pkt, len);
    frag[0] = 0x44;                           /* IHL below 5 */
    CHECK(!sp_udpip_parse(frag, len, &u));
    memcpy(frag, pkt, len);
    frag[24] = 0xff;                          /* UDP length past the packet */
    CHECK(!sp_udpip_parse(frag, len, &u));
    memcpy(frag, pkt, len);
    frag[9] = 6;                              /* TCP */
    CHECK(!sp_udpip_parse(frag, len, &u));
    len = build_request(pkt, 6, payload, sizeof(payload));
    for (size_t cut = 0; cut < len; cut++)
        CHECK(!sp_udpip_parse(pkt, cut, &u));
}

/* The family the link header names: its packets parsed as sp_udpip_parse() parses
 * them, the other family's refused. */
static void test_udpip_parse_family(void)
{
    uint8_t payload[8] = {1, 2, 3}, pkt[128];
    struct sp_udpip u;
    size_t len = build_request(pkt, 4, payload, sizeof(payload));
    CHECK(sp_udpip_parse_ipv4(pkt, len, &u) && u.family == 4 && u.dport == 53 &&
          u.payload_len == sizeof(payload));
    CHECK(!sp_udpip_parse_ipv6(pkt, len, &u));
    for (size_t cut = 0; cut < len; cut++)
        CHECK(!sp_udpip_parse_ipv4(pkt, cut, &u));
    len = build_request(pkt, 6, payload, sizeof(payload));
    CHECK(sp_udpip_parse_ipv6(pkt, len, &u) && u.family == 6 && u.dport == 53 &&
          u.payload_len == sizeof(payload));
    CHECK(!sp_udpip_parse_ipv4(pkt, len, &u));
    for (size_t cut = 0; cut < len; cut++)
        CHECK(!sp_udpip_parse_ipv6(pkt, cut, &u));
}

/* The IPv4 header's rules as written out plainly: the parse takes the usual header
 * (IHL 5, not a fragment) by a masked compare of its first 8 bytes, and any other the
 * long way; both must say what these say, for every first byte, every fragment bit,
 * and totals around each bound. */
static bool ipv4_reference(const uint8_t *p, size_t len, size_t *off, size_t *plen)
{
    if (len < 20 || p[0] >> 4 != 4)
        return false;
    size_t ihl = (size_t)(p[0] & 15) * 4, total = (size_t)p[2] << 8 | p[3];
    if (ihl < 20 || total < ihl || total > len || ((p[6] << 8 | p[7]) & 0x3fff) || p[9] != 17)
        return false;
    if (ihl + 8 > total)
        return false;
    size_t ulen = (size_t)p[ihl + 4] << 8 | p[ihl + 5];
    if (ulen < 8 || ihl + ulen > total)
        return false;
    *off = ihl + 8;
    *plen = ulen - 8;
    return true;
}

static void test_ipv4_header_rules(void)
{
    uint8_t pkt[160];
    for (size_t i = 0; i < sizeof(pkt); i++)
        pkt[i] = (uint8_t)(i * 13 + 5);
    pkt[9] = 17;
    for (unsigned first = 0; first < 256; first++) {
        for (int bit = -1; bit < 16; bit++) {       /* no flag, then each bit of bytes 6-7 */
            for (size_t total = 16; total <= 100; total++) {
                size_t ihl = (first & 15) * 4;
                uint8_t p[160];
                memcpy(p, pkt, sizeof(p));
                p[0] = (uint8_t)first;
                p[2] = (uint8_t)(total >> 8);
                p[3] = (uint8_t)total;
                p[6] = bit >= 8 ? (uint8_t)(1u << (bit - 8)) : 0;
                p[7] = bit >= 0 && bit < 8 ? (uint8_t)(1u << bit) : 0;
                if (ihl + 8 <= sizeof(p)) {         /* a UDP length that fits, or not */
                    size_t ulen = total > ihl ? total - ihl : 0;
                    p[ihl + 4] = (uint8_t)(ulen >> 8);
                    p[ihl + 5] = (uint8_t)(ulen - (total & 1));
                }
                for (size_t len = total - 1; len <= total + 1; len++) {
                    size_t off = 0, plen = 0;
                    bool want = ipv4_reference(p, len, &off, &plen);
                    struct sp_udpip a, b;
                    bool any = sp_udpip_parse(p, len, &a), v4 = sp_udpip_parse_ipv4(p, len, &b);
                    CHECK_EQ(any, want);
                    CHECK_EQ(v4, want);
                    if (want && any && v4) {
                        CHECK(a.payload_off == off && a.payload_len == plen && a.family == 4);
                        CHECK(b.payload_off == off && b.payload_len == plen && b.family == 4);
                        CHECK(memcmp(b.src, p + 12, 4) == 0 && memcmp(b.dst, p + 16, 4) == 0);
                    }
                }
            }
        }
    }
}

int main(void)
{
    test_partial_matches_reference();
    test_rfc1071_example();
    test_acc_is_ffff_matches_the_fold();
    test_acc_fold_matches_the_reduce();
    test_update16_matches_recompute();
    test_odd_offset_swap();
    test_udpip_roundtrip(4);
    test_udpip_roundtrip(6);
    test_udpip_rejects();
    test_udpip_parse_family();
    test_ipv4_header_rules();
    return check_report("test_csum");
}
