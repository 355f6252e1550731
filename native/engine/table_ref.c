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
