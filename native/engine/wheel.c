/* A timer wheel. See stormpy/engine/wheel.h. */
#include "stormpy/engine/wheel.h"

#include <stdlib.h>

int sp_wheel_init(struct sp_wheel *w, unsigned slots, uint64_t tick_ns, uint64_t now_ns)
{
    if (!slots || (slots & (slots - 1)) || !tick_ns)
        return -1;
    w->slot = calloc(slots, sizeof(*w->slot));
    if (!w->slot)
        return -1;
    w->mask = slots - 1;
    w->tick_ns = tick_ns;
    w->done_tick = now_ns / tick_ns;
    return 0;
}

void sp_wheel_fini(struct sp_wheel *w)
{
    free(w->slot);
    w->slot = NULL;
}

void sp_wheel_cancel(struct sp_wheel_timer *t)
{
    if (!t->pprev)
        return;
    *t->pprev = t->next;
    if (t->next)
        t->next->pprev = t->pprev;
    t->next = NULL;
    t->pprev = NULL;
}

void sp_wheel_arm(struct sp_wheel *w, struct sp_wheel_timer *t, uint64_t due_ns)
{
    sp_wheel_cancel(t);
    uint64_t tick = due_ns / w->tick_ns;
    if (tick <= w->done_tick)
        tick = w->done_tick + 1;         /* already due: the next look finds it */
    struct sp_wheel_timer **head = &w->slot[tick & w->mask];
    t->due_ns = due_ns;
    t->next = *head;
    if (*head)
        (*head)->pprev = &t->next;
    *head = t;
    t->pprev = head;
}

struct sp_wheel_timer *sp_wheel_expire(struct sp_wheel *w, uint64_t now_ns)
{
    uint64_t now_tick = now_ns / w->tick_ns;
    struct sp_wheel_timer *due = NULL;
    if (now_tick <= w->done_tick)
        return NULL;
    /* after a long pause every slot once is enough: each holds all its turns */
    uint64_t from = now_tick - w->done_tick > w->mask ? now_tick - w->mask : w->done_tick + 1;
    for (uint64_t tick = from; tick <= now_tick; tick++) {
        struct sp_wheel_timer *t = w->slot[tick & w->mask];
        while (t) {
            struct sp_wheel_timer *next = t->next;
            if (t->due_ns / w->tick_ns <= now_tick) {
                sp_wheel_cancel(t);
                t->next = due;
                due = t;
            }
            t = next;
        }
    }
    w->done_tick = now_tick;
    return due;
}
