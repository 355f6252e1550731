/*
 * The custom responder's part of a worker (engine/worker.h): rules (rules.h) answer
 * what they can, and the rest goes to the worker's slow path (engine/batch.h). A DNS
 * responder answers with DNS's part of the same worker (app/dns/worker.h).
 *
 * The state lives in the worker struct, in the region shared with the supervisor,
 * which reads the counters there.
 */
#ifndef STORMPY_APP_RULES_WORKER_H
#define STORMPY_APP_RULES_WORKER_H

#include <stdbool.h>

#include "stormpy/app/dns/worker.h"
#include "stormpy/app/rules/rules.h"
#include "stormpy/engine/batch.h"
#include "stormpy/engine/table.h"

struct sp_rules_worker {
    int all;                 /* frames that are not UDP to the port go to the slow path too */
    struct sp_responder_counters counters;
};

/* Sets w up for a worker (the counters stay): all also hands the slow path frames
 * that are not UDP to the port. No undo: nothing to free. */
void sp_rules_worker_init(struct sp_rules_worker *w, bool all);

/* Answers the batch with t's rules (or DNS, d), collecting in b->slow what is left
 * for the slow path; replies go to tx. */
void sp_rules_worker_batch(struct sp_rules_worker *w, struct sp_dns_worker *d,
                           const struct sp_table *t, struct sp_batch *b);

#endif
