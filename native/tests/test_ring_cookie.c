/* SYN cookies of serve-http's own TCP (app/http/ring_cookie.c). */
#include <string.h>

#include "check.h"
#include "../app/http/ring_internal.h"

#define SLOT 64000000000ull

static struct sp_tcpip syn(uint16_t mss, int wscale, bool sack)
{
    struct sp_tcpip t;
    memset(&t, 0, sizeof(t));
    t.family = 4;
    memcpy(t.src, "\xc6\x12\x04\x02", 4);
    memcpy(t.dst, "\xc6\x12\x04\x01", 4);
    t.sport = 40000;
    t.dport = 80;
    t.seq = 0xfffffff0;
    t.flags = SP_TCP_SYN;
    t.opt.has_mss = true;
    t.opt.mss = mss;
    t.opt.has_wscale = wscale >= 0;
    t.opt.wscale = (uint8_t)(wscale >= 0 ? wscale : 0);
    t.opt.sack_permitted = sack;
    return t;
}

/* The client's ACK of a SYN-ACK whose ISS was iss. */
static struct sp_tcpip ack_of(const struct sp_tcpip *s, uint32_t iss)
{
    struct sp_tcpip a = *s;
    memset(&a.opt, 0, sizeof(a.opt));
    a.flags = SP_TCP_ACK;
    a.seq = s->seq + 1;
    a.ack = iss + 1;
    return a;
}

static void round_trips(void)
{
    const uint64_t secret = 0x0123456789abcdefull, now = 1000 * SLOT + 5;
    static const struct { uint16_t mss; int wscale; bool sack; uint16_t want; } cases[] = {
        {1460, 7, true, 1460}, {1440, -1, false, 1440}, {1400, 14, true, 1220},
        {1220, 0, false, 1220}, {600, 3, true, 536}, {9000, 2, false, 1460},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sp_tcpip s = syn(cases[i].mss, cases[i].wscale, cases[i].sack);
        uint32_t iss = cookie_make(secret, &s, cases[i].mss, now);
        struct sp_tcpip a = ack_of(&s, iss);
        struct cookie_opts o;
        memset(&o, 0xff, sizeof(o));
        CHECK(cookie_check(secret, &a, now, &o));
        CHECK_EQ(o.mss, cases[i].want);
        CHECK_EQ(o.has_wscale, cases[i].wscale >= 0);
        CHECK_EQ(o.wscale, cases[i].wscale >= 0 ? cases[i].wscale : 0);
        CHECK_EQ(o.sack, cases[i].sack);
        CHECK(cookie_check(secret, &a, now + SLOT, &o));          /* the next slot too */
        CHECK(!cookie_check(secret, &a, now + 2 * SLOT, &o));     /* not later */
        CHECK(!cookie_check(secret, &a, now - SLOT, &o));         /* nor before it was made */
        CHECK(!cookie_check(secret ^ 1, &a, now, &o));            /* another key */
        struct sp_tcpip b = a;
        b.sport++;                                                  /* another flow */
        CHECK(!cookie_check(secret, &b, now, &o));
        b = a;
        b.src[3] ^= 1;
        CHECK(!cookie_check(secret, &b, now, &o));
        b = a;
        b.seq++;                                                    /* another ISN */
        CHECK(!cookie_check(secret, &b, now, &o));
        for (int bit = 0; bit < 32; bit++) {                        /* any bit of it */
            b = a;
            b.ack ^= 1u << bit;
            CHECK(!cookie_check(secret, &b, now, &o));
        }
    }
    /* cookies for different flows differ, and random ACKs are refused */
    struct sp_tcpip s = syn(1460, 7, true);
    uint32_t first = cookie_make(secret, &s, 1460, now);
    s.sport++;
    CHECK(cookie_make(secret, &s, 1460, now) != first);
    unsigned accepted = 0;
    struct cookie_opts o;
    for (uint32_t i = 0; i < 100000; i++) {
        struct sp_tcpip a = ack_of(&s, i * 2654435761u);
        accepted += cookie_check(secret, &a, now, &o);
    }
    CHECK_EQ(accepted, 0);
}

int main(void)
{
    round_trips();
    return check_report("test_ring_cookie");
}
