/*
 * The run-to-completion worker: one per NIC queue or socket. RX batch -> answer
 * each frame from the current table -> TX batch -> one kick, through the
 * backend's function table (called once per batch). No locks, no allocation, and
 * writes only to its own state.
 *
 * The state can live in memory shared with a supervisor process (shm.h): then the
 * supervisor reads the counters and sets `stop`, and never touches `io`, which
 * points into the worker process's own memory. A worker started again on the
 * same state (after its process died) continues its counters.
 */
#ifndef STORMPY_WORKER_H
#define STORMPY_WORKER_H

#include "stormpy/counters.h"
#include "stormpy/frame.h"
#include "stormpy/io.h"
#include "stormpy/precopy.h"
#include "stormpy/rules.h"
#include "stormpy/table.h"

struct sp_frame_worker {
    struct sp_io *io;
    struct sp_table_ref *ref;
    int index;                       /* this worker's slot in ref */
    unsigned batch;
    /* Kick TX at most every tx_flush_ns under load (the paper's dt, ~80 us), and at
     * once when RX runs dry so the last replies never wait; 0 kicks every batch. */
    uint64_t tx_flush_ns;
    struct sp_frame_config cfg;
    int stop;                        /* set by the control thread, __atomic access */
    uint64_t batches;
    uint64_t batch_hist[SP_HIST_BUCKETS];
    struct sp_io_counters io_counters;   /* the backend's, copied after every batch */
    struct sp_frame_counters counters;
    struct sp_frame_scratch scratch;
    struct sp_precopy *precopy;      /* NULL: memcpy mode, chosen once per batch */
    /* The pool's counters, copied after every batch (and continued by a restart) */
    struct sp_precopy_counters precopy_counters;
    /* A custom responder (rules.h) instead of serve-dns: the table's rules answer
     * first, and frames they leave go to slow_path, called once per batch (never per
     * frame) after the worker has left the table. It writes replies to tx, at most
     * ntx, and returns how many. responder_all also hands it frames that are not
     * UDP to the port. slow_path and slow_ctx belong to the worker's process. */
    int responder;
    int responder_all;
    unsigned (*slow_path)(void *ctx, const struct sp_slow_packet *p, unsigned n,
                          struct sp_frame *tx, unsigned ntx);
    void *slow_ctx;
    struct sp_responder_counters responder_counters;
};

/* Runs until stopped, until the backend has no more input (memory backend), or
 * until it fails (io->error). Returns the number of batches processed. */
uint64_t sp_frame_worker_run(struct sp_frame_worker *w);
/* Asks a running worker to return after its current batch (any thread). */
void sp_frame_worker_stop(struct sp_frame_worker *w);

/* Switches a worker that is not running to precopy mode with a pool of `frames`
 * copies lent by its backend (see precopy.h). 0, or -1 with a one-line reason. */
int sp_frame_worker_precopy(struct sp_frame_worker *w, unsigned frames, char *err,
                            size_t errlen);
/* Closes the backend, then frees the pool (the worker struct stays the caller's). */
void sp_frame_worker_close(struct sp_frame_worker *w);

#endif
