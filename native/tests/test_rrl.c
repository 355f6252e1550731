/* Response rate limiting: per-prefix buckets, the per-second rate, slip, the
 * allow-list, and kinds counted apart. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stormpy/app/dns/rrl.h"

static struct sp_rrl *make(uint32_t rate, uint32_t slip, const char *allow_v4, uint8_t allow_len)
{
    struct sp_rrl_config cfg = {.rate = rate, .slip = slip, .v4_prefix = 24, .v6_prefix = 56};
    if (allow_v4) {
        cfg.nallow = 1;
        cfg.allow[0].family = 4;
        cfg.allow[0].len = allow_len;
        memcpy(cfg.allow[0].addr, allow_v4, 4);
    }
    void *mem = calloc(1, sp_rrl_size(1024));
    return sp_rrl_init(mem, 1024, &cfg);
}

static unsigned count(struct sp_rrl *r, uint8_t family, const uint8_t *src, uint64_t kind,
                      uint32_t now, unsigned n, enum sp_rrl_action want)
{
    unsigned got = 0;
    for (unsigned i = 0; i < n; i++)
        got += sp_rrl_check(r, family, src, kind, now) == want;
    return got;
}

/* addr with bit i (0: the first, most significant, of byte 0) flipped. */
static void flip_bit(const uint8_t *addr, size_t len, unsigned i, uint8_t *out)
{
    memcpy(out, addr, len);
    out[i / 8] ^= (uint8_t)(0x80 >> (i % 8));
}

/* At every prefix length of both families: the first bit past the prefix changes no
 * bucket, the prefix's last bit does (a rate of 1: a second answer in one bucket is
 * dropped, the first in another is sent). */
static void test_every_prefix_length(void)
{
    const uint8_t v4[4] = {198, 18, 0xa5, 0x5a};
    const uint8_t v6[16] = {0x20, 0x01, 0, 2, 0xa5, 0x5a, 0xc3, 0x3c,
                            0x96, 0x69, 0xf0, 0x0f, 0x81, 0x18, 0xe7, 0x7e};
    for (int family = 4; family <= 6; family += 2) {
        const uint8_t *addr = family == 4 ? v4 : v6;
        size_t len = family == 4 ? 4 : 16;
        for (unsigned bits = 0; bits <= 8 * len; bits++) {
            struct sp_rrl_config cfg = {.rate = 1, .v4_prefix = 24, .v6_prefix = 56};
            if (family == 4)
                cfg.v4_prefix = (uint8_t)bits;
            else
                cfg.v6_prefix = (uint8_t)bits;
            void *mem = calloc(1, sp_rrl_size(1024));
            struct sp_rrl *r = sp_rrl_init(mem, 1024, &cfg);
            uint8_t other[16];
            CHECK_EQ(sp_rrl_check(r, (uint8_t)family, addr, 1, 7), SP_RRL_SEND);
            if (bits < 8 * len) {
                flip_bit(addr, len, bits, other);
                CHECK_EQ(sp_rrl_check(r, (uint8_t)family, other, 1, 7), SP_RRL_DROP);
            }
            if (bits > 0) {
                flip_bit(addr, len, bits - 1, other);
                CHECK_EQ(sp_rrl_check(r, (uint8_t)family, other, 1, 7), SP_RRL_SEND);
            }
            free(mem);
        }
    }
}

int main(void)
{
    test_every_prefix_length();
    const uint8_t a[4] = {198, 19, 5, 7}, same24[4] = {198, 19, 5, 200}, other[4] = {198, 19, 6, 7};
    struct sp_rrl *r = make(10, 0, NULL, 0);
    CHECK(r != NULL);
    CHECK_EQ(count(r, 4, a, 1, 100, 10, SP_RRL_SEND), 10);       /* the rate... */
    CHECK_EQ(count(r, 4, same24, 1, 100, 5, SP_RRL_DROP), 5);    /* ...shared by the /24 */
    CHECK_EQ(count(r, 4, other, 1, 100, 10, SP_RRL_SEND), 10);   /* another /24 */
    CHECK_EQ(count(r, 4, a, 2, 100, 10, SP_RRL_SEND), 10);       /* another kind */
    CHECK_EQ(count(r, 4, a, 1, 101, 10, SP_RRL_SEND), 10);       /* a new second */
    CHECK_EQ(count(r, 4, a, 1, 101, 1, SP_RRL_DROP), 1);
    free(r);

    r = make(4, 3, NULL, 0);                                     /* slip every third */
    enum sp_rrl_action seq[13];
    for (int i = 0; i < 13; i++)
        seq[i] = sp_rrl_check(r, 4, a, 7, 5);
    int sends = 0, slips = 0;
    for (int i = 0; i < 13; i++)
        sends += seq[i] == SP_RRL_SEND, slips += seq[i] == SP_RRL_SLIP;
    CHECK_EQ(sends, 4);
    CHECK_EQ(slips, 3);                                          /* limited 7, 10, 13th: 9 over */
    CHECK(seq[6] == SP_RRL_SLIP && seq[4] == SP_RRL_DROP && seq[5] == SP_RRL_DROP);
    free(r);

    const char net[4] = {(char)198, 19, 5, 0};
    r = make(1, 0, net, 24);                                     /* allow-listed /24 */
    CHECK_EQ(count(r, 4, a, 1, 9, 50, SP_RRL_SEND), 50);
    CHECK_EQ(count(r, 4, other, 1, 9, 3, SP_RRL_SEND), 1);
    free(r);

    uint8_t v6a[16] = {0x20, 0x01, 0, 2, 0, 0, 0, 0x11}, v6b[16] = {0x20, 0x01, 0, 2, 0, 0, 0, 0x1f};
    uint8_t v6c[16] = {0x20, 0x01, 0, 2, 0, 0, 1, 0x11};
    v6b[15] = 9;
    r = make(2, 0, NULL, 0);
    CHECK_EQ(count(r, 6, v6a, 1, 3, 2, SP_RRL_SEND), 2);
    CHECK_EQ(count(r, 6, v6b, 1, 3, 1, SP_RRL_DROP), 1);        /* same /56 (0x11 vs 0x1f) */
    CHECK_EQ(count(r, 6, v6c, 1, 3, 2, SP_RRL_SEND), 2);        /* another /56 */
    free(r);

    /* A set's two buckets count two sources apart: alternating them does not reset a
     * count (it did; two colliding prefixes went unlimited). A third in the same second
     * finds both taken and is not limited; the next second it gets one. */
    const uint8_t third[4] = {198, 19, 7, 7};
    struct sp_rrl_config one = {.rate = 10, .v4_prefix = 24, .v6_prefix = 56};
    r = sp_rrl_init(calloc(1, sp_rrl_size(2)), 2, &one);
    unsigned sent = 0;
    for (int i = 0; i < 40; i++)
        sent += sp_rrl_check(r, 4, i % 2 ? a : other, 1, 77) == SP_RRL_SEND;
    CHECK_EQ(sent, 20);
    CHECK_EQ(count(r, 4, third, 1, 77, 30, SP_RRL_SEND), 30);
    CHECK_EQ(count(r, 4, third, 1, 78, 12, SP_RRL_SEND), 10);
    free(r);

    /* The sets are chosen by a hash keyed per table: the same sources land in other
     * buckets of another table. */
    struct sp_rrl *r1 = make(1, 0, NULL, 0), *r2 = make(1, 0, NULL, 0);
    CHECK(r1->secret != r2->secret);
    const uint8_t *sources[3] = {a, other, third};
    unsigned same = 0;
    for (unsigned k = 0; k < 3; k++) {
        long at[2] = {-1, -1};
        struct sp_rrl *both[2] = {r1, r2};
        for (unsigned t = 0; t < 2; t++) {
            sp_rrl_check(both[t], 4, sources[k], 1, 500 + k);
            for (long i = 0; i < 1024; i++)
                if (both[t]->bucket[i].second == 500 + k)
                    at[t] = i;
        }
        CHECK(at[0] >= 0 && at[1] >= 0);
        same += at[0] == at[1];
    }
    CHECK(same < 3);
    free(r1);
    free(r2);

    struct sp_rrl_config bad = {.rate = 1, .v4_prefix = 33, .v6_prefix = 56};
    void *mem = calloc(1, sp_rrl_size(8));
    CHECK(sp_rrl_init(mem, 8, &bad) == NULL);
    bad.v4_prefix = 24;
    CHECK(sp_rrl_init(mem, 6, &bad) == NULL);                    /* not a power of two */
    free(mem);
    return check_report("test_rrl");
}
