/* Table publication: workers read the current table while a reloader replaces it.
 * See table_ref.h. */
#include "stormpy/engine/table_ref.h"

#include <string.h>
#include <time.h>

void sp_table_ref_init(struct sp_table_ref *ref, struct sp_table *t)
{
    memset(ref, 0, sizeof(*ref));
    __atomic_store_n(&ref->current, t, __ATOMIC_SEQ_CST);
}

void sp_table_ref_set_workers(struct sp_table_ref *ref, int n)
{
    if (n > SP_MAX_WORKERS)
        n = SP_MAX_WORKERS;
    for (int i = 0; i < n; i++)
        __atomic_store_n(&ref->slot[i].seen, SP_OFFLINE, __ATOMIC_SEQ_CST);
    __atomic_store_n(&ref->nworkers, n, __ATOMIC_SEQ_CST);
}

struct sp_table *sp_table_ref_swap(struct sp_table_ref *ref, struct sp_table *t)
{
    struct sp_table *old = __atomic_exchange_n(&ref->current, t, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&ref->generation, 1, __ATOMIC_SEQ_CST);
    return old;
}

bool sp_table_ref_wait(struct sp_table_ref *ref, int timeout_ms)
{
    uint64_t gen = __atomic_load_n(&ref->generation, __ATOMIC_SEQ_CST);
    int n = __atomic_load_n(&ref->nworkers, __ATOMIC_SEQ_CST);
    struct timespec pause = {0, 200 * 1000}, now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t deadline = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 + timeout_ms;
    for (;;) {
        int done = 0;
        for (int i = 0; i < n; i++)
            done += __atomic_load_n(&ref->slot[i].seen, __ATOMIC_SEQ_CST) >= gen;
        if (done == n)
            return true;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 >= deadline)
            return false;
        nanosleep(&pause, NULL);
    }
}

/* With every record taken, the use is counted under the newest generation pinned:
 * older than gen, it keeps gen's table (and every table after it) from being freed
 * as long as gen's own record would have. */
uint64_t sp_table_pin(struct sp_table_pins *p, uint64_t gen)
{
    int free_pin = -1, newest = 0;
    for (int i = 0; i < SP_TABLE_PINS; i++) {
        if (p->pin[i].count && p->pin[i].generation == gen) {
            p->pin[i].count++;
            return gen;
        }
        if (!p->pin[i].count && free_pin < 0)
            free_pin = i;
        if (p->pin[i].generation > p->pin[newest].generation)
            newest = i;
    }
    if (free_pin < 0) {
        p->pin[newest].count++;
        return p->pin[newest].generation;
    }
    p->pin[free_pin].generation = gen;
    p->pin[free_pin].count = 1;
    return gen;
}

void sp_table_unpin(struct sp_table_pins *p, uint64_t gen)
{
    for (int i = 0; i < SP_TABLE_PINS; i++)
        if (p->pin[i].count && p->pin[i].generation == gen) {
            p->pin[i].count--;
            return;
        }
}

static uint64_t oldest_pinned(const struct sp_table_pins *p, uint64_t limit)
{
    for (int i = 0; i < SP_TABLE_PINS; i++)
        if (p->pin[i].count && p->pin[i].generation < limit)
            limit = p->pin[i].generation;
    return limit;
}

/* The generation is read before the table, and what is announced is never newer than
 * it: a table swapped in between is only protected more than it needs. */
const struct sp_table *sp_table_ref_enter_pinned(struct sp_table_ref *ref, int worker,
                                                 const struct sp_table_pins *p, uint64_t *gen)
{
    *gen = __atomic_load_n(&ref->generation, __ATOMIC_SEQ_CST);
    __atomic_store_n(&ref->slot[worker].seen, oldest_pinned(p, *gen), __ATOMIC_SEQ_CST);
    return __atomic_load_n(&ref->current, __ATOMIC_SEQ_CST);
}

void sp_table_ref_leave_pinned(struct sp_table_ref *ref, int worker,
                               const struct sp_table_pins *p)
{
    __atomic_store_n(&ref->slot[worker].seen, oldest_pinned(p, SP_OFFLINE), __ATOMIC_RELEASE);
}
