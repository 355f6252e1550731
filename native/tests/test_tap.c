/* The tap's rings: records in order across the ring's end, drops when full, and
 * a tap that stops writing its heartbeat detached by the worker. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stormpy/engine/clock.h"
#include "stormpy/engine/tap.h"

#define RING (64u << 10)

static struct sp_tap_region *region(void)
{
    struct sp_tap_region *r = calloc(1, sp_tap_region_size(2, RING));
    CHECK(sp_tap_region_init(r, 2, RING, 2048) == 0);
    return r;
}

static struct sp_frame frame_of(uint8_t *buf, uint32_t len, uint8_t fill)
{
    memset(buf, fill, len);
    return (struct sp_frame){.data = buf, .len = len};
}

static void test_records_cross_the_end_in_order_and_drop_when_full(void)
{
    struct sp_tap_region *r = region();
    struct sp_tap_ring *ring = sp_tap_ring_at(r, 1);
    static uint8_t buf[4000];
    CHECK_EQ(sp_tap_attach(r, 7, sp_now_ns()), 0);
    unsigned expect = 0, seen = 0, ok = 1;
    for (unsigned round = 0; round < 400; round++) {   /* many laps of the ring */
        struct sp_frame f = frame_of(buf, 100 + round % 3000, (uint8_t)round);
        sp_tap_copy(r, ring, &f, 1, round % 2 ? SP_TAP_TX : SP_TAP_RX, round);
        for (const struct sp_tap_record *rec; (rec = sp_tap_peek(r, ring)) != NULL; seen++) {
            uint32_t len = 100 + expect % 3000;
            uint32_t caplen = len < 2048 ? len : 2048;
            ok &= rec->len == len && rec->caplen == caplen && rec->ts_ns == expect &&
                  rec->dir == (expect % 2 ? SP_TAP_TX : SP_TAP_RX) &&
                  ((const uint8_t *)(rec + 1))[caplen - 1] == (uint8_t)expect;
            sp_tap_consume(ring, rec);
            expect++;
        }
    }
    CHECK(ok);
    CHECK_EQ(seen, 400);
    CHECK_EQ(ring->records, 400);
    CHECK_EQ(ring->drops, 0);
    /* nobody drains: the ring fills, the rest is counted, what was kept stays whole */
    struct sp_frame f = frame_of(buf, 1000, 0x5a);
    for (int i = 0; i < 100; i++)
        sp_tap_copy(r, ring, &f, 1, SP_TAP_RX, 0);
    CHECK(ring->drops > 0);
    CHECK_EQ(ring->records + ring->drops, 500);
    unsigned kept = 0;
    for (const struct sp_tap_record *rec; (rec = sp_tap_peek(r, ring)) != NULL; kept++)
        sp_tap_consume(ring, rec);
    CHECK_EQ(kept, 100 - ring->drops);
    CHECK(sp_tap_peek(r, sp_tap_ring_at(r, 0)) == NULL);   /* the other worker's ring */
    free(r);
}

static void test_one_live_tap_and_a_silent_one_detached(void)
{
    struct sp_tap_region *r = region();
    uint64_t now;
    CHECK(sp_tap_ring_on(r, 0, &now) == NULL);               /* nobody attached */
    CHECK(sp_tap_ring_on(NULL, 0, &now) == NULL);            /* no region at all */
    CHECK_EQ(sp_tap_attach(r, 11, sp_now_ns()), 0);
    CHECK(sp_tap_ring_on(r, 1, &now) == sp_tap_ring_at(r, 1));
    CHECK(sp_tap_ring_on(r, 2, &now) == NULL);               /* no such worker */
    CHECK_EQ(sp_tap_attach(r, 12, sp_now_ns()), 11);         /* the first one is alive */
    /* 11 stops writing its heartbeat: the worker's next batch detaches it */
    sp_tap_heartbeat(r, sp_now_ns() - SP_TAP_STALE_NS - 1000000);
    CHECK(sp_tap_ring_on(r, 0, &now) == NULL);
    CHECK_EQ(r->attached, 0);
    CHECK_EQ(sp_tap_attach(r, 12, sp_now_ns()), 0);
    sp_tap_heartbeat(r, sp_now_ns() - SP_TAP_STALE_NS - 1000000);
    CHECK_EQ(sp_tap_session(r, sp_now_ns()), 0);
    CHECK_EQ(sp_tap_attach(r, 13, sp_now_ns()), 0);          /* a silent tap gives way */
    sp_tap_detach(r, 12);                                    /* too late: not 12's any more */
    CHECK_EQ(sp_tap_session(r, sp_now_ns()), 13);
    sp_tap_detach(r, 13);
    CHECK_EQ(r->attached, 0);
    free(r);
}

static void test_bad_sizes_refused(void)
{
    static struct sp_tap_region r;
    CHECK(sp_tap_region_init(&r, 1, 3u << 20, 2048) != 0);   /* not a power of two */
    CHECK(sp_tap_region_init(&r, 1, 32u << 10, 2048) != 0);  /* too small */
    CHECK(sp_tap_region_init(&r, 1, 64u << 10, 65535) != 0); /* under four frames */
}

int main(void)
{
    test_records_cross_the_end_in_order_and_drop_when_full();
    test_one_live_tap_and_a_silent_one_detached();
    test_bad_sizes_refused();
    return check_report("test_tap");
}
