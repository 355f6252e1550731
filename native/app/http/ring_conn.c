/* The connection table of serve-http's own TCP: lookup by flow, the free list, the
 * connections ready to run this round, their timers on a wheel, and the TIME_WAIT
 * ones, oldest first, which a new connection takes when nothing is free. See
 * ring_internal.h. */
#define _GNU_SOURCE
#include "ring_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "stormpy/engine/clock.h"

#define WHEEL_SLOTS 1024
#define WHEEL_TICK_NS 1000000ull

uint64_t ring_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint32_t ring_flow_hash(const struct sp_tcpip *t)
{
    uint64_t a, b;
    memcpy(&a, t->src, 8);
    memcpy(&b, t->src + 8, 8);
    return (uint32_t)ring_mix(a ^ ring_mix(b ^ ((uint64_t)t->sport << 16 | t->dport))) % BUCKETS;
}

static bool same_flow(const struct tcb *c, const struct sp_tcpip *t)
{
    return c->peer.sport == t->sport && c->peer.dport == t->dport &&
           c->peer.family == t->family && memcmp(c->peer.src, t->src, 16) == 0 &&
           memcmp(c->peer.dst, t->dst, 16) == 0;
}

struct tcb *ring_find(struct sp_http_ring *r, const struct sp_tcpip *t)
{
    for (struct tcb *c = r->bucket[ring_flow_hash(t)]; c; c = c->hnext)
        if (same_flow(c, t))
            return c;
    return NULL;
}

struct sp_http_ring *sp_http_ring_open(const struct sp_http_ring_config *cfg)
{
    struct sp_http_ring *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->cfg = *cfg;
    if (!r->cfg.max_connections)
        r->cfg.max_connections = 1024;
    r->tcbs = calloc(r->cfg.max_connections, sizeof(struct tcb));
    if (!r->tcbs || sp_wheel_init(&r->wheel, WHEEL_SLOTS, WHEEL_TICK_NS, sp_now_ns()) != 0) {
        free(r->tcbs);
        free(r);
        return NULL;
    }
    for (uint32_t i = r->cfg.max_connections; i-- > 0;) {
        r->tcbs[i].next = r->free_list;
        r->free_list = &r->tcbs[i];
    }
    r->ready_tail = &r->ready;
    r->tw_tail = &r->tw;
    if (getrandom(&r->secret, sizeof(r->secret), 0) != sizeof(r->secret))
        r->secret = ring_mix((uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)r);
    r->date_second = -1;
    return r;
}

void sp_http_ring_close(struct sp_http_ring *r)
{
    if (!r)
        return;
    sp_wheel_fini(&r->wheel);
    free(r->tcbs);
    free(r);
}

void sp_http_ring_set_pool(struct sp_http_ring *r, struct sp_precopy *pool)
{
    r->pool = pool;
}

void ring_ready(struct sp_http_ring *r, struct tcb *c)
{
    if (c->ready_pprev || c->state == FREE)
        return;
    c->ready_round = r->round;
    c->ready_next = NULL;
    c->ready_pprev = r->ready_tail;
    *r->ready_tail = c;
    r->ready_tail = &c->ready_next;
}

void ring_unready(struct sp_http_ring *r, struct tcb *c)
{
    if (!c->ready_pprev)
        return;
    *c->ready_pprev = c->ready_next;
    if (c->ready_next)
        c->ready_next->ready_pprev = c->ready_pprev;
    else
        r->ready_tail = c->ready_pprev;
    c->ready_pprev = NULL;
}

static void tw_remove(struct sp_http_ring *r, struct tcb *c)
{
    if (!c->tw_pprev)
        return;
    *c->tw_pprev = c->tw_next;
    if (c->tw_next)
        c->tw_next->tw_pprev = c->tw_pprev;
    else
        r->tw_tail = c->tw_pprev;
    c->tw_pprev = NULL;
}

void ring_time_wait(struct sp_http_ring *r, struct tcb *c, struct sp_table_pins *pins,
                    uint64_t until_ns)
{
    if (c->has_reply) {
        sp_table_unpin(pins, c->gen);
        c->has_reply = false;
    }
    c->state = TIME_WAIT;
    c->tw_until_ns = until_ns;
    c->tw_next = NULL;
    c->tw_pprev = r->tw_tail;
    *r->tw_tail = c;
    r->tw_tail = &c->tw_next;
    sp_wheel_arm(&r->wheel, &c->timer, until_ns);
}

void ring_release(struct sp_http_ring *r, struct tcb *c, struct sp_table_pins *pins,
                  struct sp_http_counters *k)
{
    if (c->has_reply)
        sp_table_unpin(pins, c->gen);
    c->has_reply = false;
    struct tcb **p = &r->bucket[ring_flow_hash(&c->peer)];
    while (*p && *p != c)
        p = &(*p)->hnext;
    if (*p)
        *p = c->hnext;
    ring_unready(r, c);
    tw_remove(r, c);
    sp_wheel_cancel(&c->timer);
    if (c->state == SYN_RCVD)
        r->half_open--;
    c->state = FREE;
    c->next = r->free_list;
    r->free_list = c;
    k->open--;
}

bool ring_has_room(const struct sp_http_ring *r)
{
    return r->free_list || r->tw;
}

struct tcb *ring_take(struct sp_http_ring *r, const struct sp_tcpip *t, struct sp_table_pins *pins,
                      struct sp_http_counters *k)
{
    if (!r->free_list && r->tw) {
        ring_release(r, r->tw, pins, k);      /* the oldest TIME_WAIT makes room */
    }
    struct tcb *c = r->free_list;
    if (!c)
        return NULL;
    r->free_list = c->next;
    memset(c, 0, offsetof(struct tcb, reply));
    c->in_len = 0;                       /* the last client's unread bytes go too */
    c->peer = *t;
    uint32_t h = ring_flow_hash(t);
    c->hnext = r->bucket[h];
    r->bucket[h] = c;
    k->open++;
    k->connections++;
    return c;
}
