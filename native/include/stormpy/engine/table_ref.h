/*
 * A published table that workers read while a reloader replaces it
 * (quiescent-state reclamation).
 *
 * A worker calls sp_table_ref_enter() once per batch and uses the returned table
 * for the whole batch, so no batch ever mixes two tables; it calls
 * sp_table_ref_leave() when the batch is done, before it may block. The reloader
 * calls sp_table_ref_swap() and then sp_table_ref_wait() until no worker can
 * still hold the old table; only then is the old table freed. Each worker writes
 * only its own cache line.
 */
#ifndef STORMPY_ENGINE_TABLE_REF_H
#define STORMPY_ENGINE_TABLE_REF_H

#include <stdbool.h>
#include <stdint.h>

#include "stormpy/engine/table.h"

#define SP_MAX_WORKERS 256
#define SP_OFFLINE UINT64_MAX

struct sp_worker_slot {
    uint64_t seen;        /* accessed only through __atomic builtins */
    char pad[64 - sizeof(uint64_t)];
};

struct sp_table_ref {
    struct sp_table *current;   /* the fields here are accessed only atomically */
    uint64_t generation;
    int nworkers;
    /* keeps worker 0's slot, written every batch, off the line every worker reads */
    char read_mostly_pad[64];
    struct sp_worker_slot slot[SP_MAX_WORKERS];
};

void sp_table_ref_init(struct sp_table_ref *ref, struct sp_table *t);

static inline const struct sp_table *sp_table_ref_enter(struct sp_table_ref *ref, int worker)
{
    uint64_t gen = __atomic_load_n(&ref->generation, __ATOMIC_SEQ_CST);
    __atomic_store_n(&ref->slot[worker].seen, gen, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&ref->current, __ATOMIC_SEQ_CST);
}

static inline void sp_table_ref_leave(struct sp_table_ref *ref, int worker)
{
    __atomic_store_n(&ref->slot[worker].seen, SP_OFFLINE, __ATOMIC_RELEASE);
}

/*
 * Pins: a worker whose output outlives its batch (a TCP answer sent over many
 * wake-ups points into the table it came from) keeps that table's generation
 * announced in its slot, so the reloader waits for it. It counts what it pins per
 * generation, and enters and leaves with the oldest generation still pinned.
 */
#define SP_TABLE_PINS 4

struct sp_table_pins {
    struct {
        uint64_t generation;
        uint32_t count;
    } pin[SP_TABLE_PINS];
};

/* One more use of generation gen, which is never older than a generation pinned
 * already (a worker's generations never go down). Returns the generation it is
 * counted under, to unpin it with: gen, or with SP_TABLE_PINS generations pinned
 * already, the newest of them (so a pin never fails, and a worker never waits for one
 * while answers from older tables are still being sent). */
uint64_t sp_table_pin(struct sp_table_pins *p, uint64_t gen);
void sp_table_unpin(struct sp_table_pins *p, uint64_t gen);

/* sp_table_ref_enter() for a worker with pins; *gen is the generation to pin what
 * it keeps from this table under (never newer than the table returned). */
const struct sp_table *sp_table_ref_enter_pinned(struct sp_table_ref *ref, int worker,
                                                 const struct sp_table_pins *p, uint64_t *gen);
/* sp_table_ref_leave() that keeps the oldest pinned generation announced. */
void sp_table_ref_leave_pinned(struct sp_table_ref *ref, int worker,
                               const struct sp_table_pins *p);

/* Registers workers 0..n-1 (all offline). */
void sp_table_ref_set_workers(struct sp_table_ref *ref, int n);
/* Publishes t and returns the table it replaced. */
struct sp_table *sp_table_ref_swap(struct sp_table_ref *ref, struct sp_table *t);
/* Waits until no worker can hold a table published before the last swap;
 * false on timeout (the old table must then not be freed yet). */
bool sp_table_ref_wait(struct sp_table_ref *ref, int timeout_ms);

#endif
