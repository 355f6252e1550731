/*
 * A timer wheel (after Varghese and Lauck's hashed wheel) for the timers of many
 * connections in one worker: arming, moving and cancelling a timer are O(1), and a
 * round looks only at the slots whose time has come, never at every connection.
 *
 *   sp_wheel_init(&w, 1024, 1000000, now);           1024 slots of 1 ms
 *   sp_wheel_arm(&w, &conn->timer, due_ns);          again to move it
 *   for (t = sp_wheel_expire(&w, now); t; t = next) {   every round
 *       next = t->next;  ... container_of(t) is due ...
 *   }
 *   sp_wheel_cancel(&w, &conn->timer);               before the connection goes
 *
 * A timer further away than the wheel's span waits in its slot and is passed over
 * (and kept) at each turn until it is due. A timer goes off in its tick: up to a
 * tick early or late, so a caller checks its own deadlines. The
 * timers are embedded in the caller's objects: nothing here allocates after init.
 */
#ifndef STORMPY_ENGINE_WHEEL_H
#define STORMPY_ENGINE_WHEEL_H

#include <stdbool.h>
#include <stdint.h>

struct sp_wheel_timer {
    struct sp_wheel_timer *next, **pprev;  /* pprev NULL: not armed */
    uint64_t due_ns;
};

struct sp_wheel {
    struct sp_wheel_timer **slot;
    unsigned mask;                       /* slots - 1 */
    uint64_t tick_ns;
    uint64_t done_tick;                  /* every slot up to this tick has been looked at */
};

/* slots: a power of two. 0, or -1 when out of memory or slots is not a power of two. */
int sp_wheel_init(struct sp_wheel *w, unsigned slots, uint64_t tick_ns, uint64_t now_ns);
void sp_wheel_fini(struct sp_wheel *w);

/* Arms t to go off at due_ns (moving it if it was armed). */
void sp_wheel_arm(struct sp_wheel *w, struct sp_wheel_timer *t, uint64_t due_ns);
void sp_wheel_cancel(struct sp_wheel_timer *t);

static inline bool sp_wheel_armed(const struct sp_wheel_timer *t)
{
    return t->pprev != 0;
}

/* The timers due by now_ns, unarmed, as a list linked by next (NULL: none). */
struct sp_wheel_timer *sp_wheel_expire(struct sp_wheel *w, uint64_t now_ns);

#endif
