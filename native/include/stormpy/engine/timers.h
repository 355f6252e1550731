/*
 * Connection timers for the stream servers (app/http/stream.c, app/dns/stream.c).
 *
 * A connection is on at most one timer list at a time, and every list has one
 * timeout for all its members: appending when a timer starts keeps a list in
 * deadline order, so expiring looks only at heads, and nothing is scanned or
 * allocated per request. A connection embeds a struct sp_timed as its first member;
 * its `next` also links free connections together.
 *
 *   sp_timer_start(lists, &c->timed, T_IDLE, now_ms);
 *   while ((c = (struct conn *)sp_timer_due(lists, T_IDLE, now_ms))) { ... }
 *   epoll_wait(..., sp_timer_next_wake(lists, T_LISTS, now_ms, 100));
 */
#ifndef STORMPY_ENGINE_TIMERS_H
#define STORMPY_ENGINE_TIMERS_H

#include <stdint.h>
#include <time.h>

#define SP_TIMER_NONE 0xff

struct sp_timed {
    struct sp_timed *prev, *next;
    uint64_t since_ms;               /* when its timer started */
    uint8_t list;                    /* SP_TIMER_NONE: on none */
};

struct sp_timer_list {
    struct sp_timed *head, *tail;
    uint32_t timeout_ms;
};

static inline uint64_t sp_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void sp_timer_remove(struct sp_timer_list *lists, struct sp_timed *e)
{
    if (e->list == SP_TIMER_NONE)
        return;
    struct sp_timer_list *tm = &lists[e->list];
    *(e->prev ? &e->prev->next : &tm->head) = e->next;
    *(e->next ? &e->next->prev : &tm->tail) = e->prev;
    e->prev = e->next = 0;
    e->list = SP_TIMER_NONE;
}

/* Puts e last on `list`, its timer started at now_ms. */
static inline void sp_timer_start(struct sp_timer_list *lists, struct sp_timed *e, int list,
                                  uint64_t now_ms)
{
    sp_timer_remove(lists, e);
    struct sp_timer_list *tm = &lists[list];
    e->list = (uint8_t)list;
    e->since_ms = now_ms;
    e->prev = tm->tail;
    e->next = 0;
    *(tm->tail ? &tm->tail->next : &tm->head) = e;
    tm->tail = e;
}

/* The head of `list` when its time is up (it stays on the list), else 0. */
static inline struct sp_timed *sp_timer_due(const struct sp_timer_list *lists, int list,
                                            uint64_t now_ms)
{
    struct sp_timed *e = lists[list].head;
    return e && e->since_ms + lists[list].timeout_ms <= now_ms ? e : 0;
}

/* Milliseconds until the first of n lists is due, at most max_ms. */
static inline uint32_t sp_timer_next_wake(const struct sp_timer_list *lists, int n,
                                          uint64_t now_ms, uint32_t max_ms)
{
    uint64_t wait = max_ms;
    for (int l = 0; l < n; l++) {
        const struct sp_timed *e = lists[l].head;
        if (e) {
            uint64_t due = e->since_ms + lists[l].timeout_ms;
            uint64_t in = due > now_ms ? due - now_ms : 0;
            wait = in < wait ? in : wait;
        }
    }
    return (uint32_t)wait;
}

#endif
