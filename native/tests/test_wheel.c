/* The timer wheel (engine/wheel.c): timers go off once, in their tick or the next
 * look after it, never early; moved and cancelled ones do not; timers beyond the
 * span and long pauses lose nothing. */
#include <stdlib.h>

#include "check.h"
#include "stormpy/engine/wheel.h"

#define MS 1000000ull
#define N 3000

static struct sp_wheel_timer timers[N];
static int fired[N];
static uint64_t fired_at[N];

static void expire(struct sp_wheel *w, uint64_t now)
{
    for (struct sp_wheel_timer *t = sp_wheel_expire(w, now), *next; t; t = next) {
        next = t->next;
        CHECK(!sp_wheel_armed(t));
        fired[t - timers]++;
        fired_at[t - timers] = now;
    }
}

static void random_timers(void)
{
    struct sp_wheel w;
    uint64_t start = 5000 * MS;
    CHECK_EQ(sp_wheel_init(&w, 256, MS, start), 0);
    srand(7);
    uint64_t due[N];
    for (int i = 0; i < N; i++) {
        due[i] = start + (uint64_t)(rand() % 2000) * MS + (uint64_t)(rand() % 1000) * 1000;
        sp_wheel_arm(&w, &timers[i], due[i]);
    }
    for (int i = 0; i < N; i += 7)                    /* moved later */
        sp_wheel_arm(&w, &timers[i], due[i] += 300 * MS);
    for (int i = 3; i < N; i += 11)                   /* cancelled */
        sp_wheel_cancel(&timers[i]);
    for (uint64_t now = start; now < start + 2500 * MS; now += 3 * MS + 17)
        expire(&w, now);
    int early = 0, late = 0, wrong = 0;
    for (int i = 0; i < N; i++) {
        int want = (i >= 3 && (i - 3) % 11 == 0) ? 0 : 1;
        wrong += fired[i] != want;
        if (fired[i]) {
            early += fired_at[i] / MS < due[i] / MS;
            late += fired_at[i] > due[i] + 4 * MS;    /* a look every 3 ms, a tick of 1 */
        }
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(early, 0);
    CHECK_EQ(late, 0);
    sp_wheel_fini(&w);
}

static void long_pause_and_far_timers(void)
{
    struct sp_wheel w;
    CHECK_EQ(sp_wheel_init(&w, 64, MS, 0), 0);
    for (int i = 0; i < 10; i++) {
        fired[i] = 0;
        sp_wheel_arm(&w, &timers[i], (uint64_t)(i + 1) * 100 * MS);   /* up to 15 turns away */
    }
    expire(&w, 450 * MS);                              /* one look after a long pause */
    int n = 0;
    for (int i = 0; i < 10; i++)
        n += fired[i];
    CHECK_EQ(n, 4);
    expire(&w, 10 * 1000 * MS);
    for (int i = 0; i < 10; i++)
        CHECK_EQ(fired[i], 1);
    sp_wheel_arm(&w, &timers[0], 0);                   /* already due: the next look */
    expire(&w, 10 * 1000 * MS + MS);
    CHECK_EQ(fired[0], 2);
    CHECK(sp_wheel_expire(&w, 10 * 1000 * MS + MS) == NULL);
    CHECK_EQ(sp_wheel_init(&w, 100, MS, 0), -1);       /* not a power of two */
    sp_wheel_fini(&w);
}

int main(void)
{
    random_timers();
    long_pause_and_far_timers();
    return check_report("test_wheel");
}
