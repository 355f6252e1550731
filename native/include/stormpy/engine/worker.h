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
 *
 *   sp_frame_worker_init(w, &cfg, err, sizeof(err));   a backend's io, the table, the port
 *   sp_frame_worker_run(w);                            in the worker's thread
 *   sp_frame_worker_stop(w);                           from any thread
 *   sp_frame_worker_close(w);                          once run() has returned
 */
#ifndef STORMPY_ENGINE_WORKER_H
#define STORMPY_ENGINE_WORKER_H

#include "stormpy/app/dns/precopy.h"
#include "stormpy/app/rules/rules.h"
#include "stormpy/engine/counters.h"
#include "stormpy/engine/frame.h"
#include "stormpy/engine/table_ref.h"
#include "stormpy/io.h"

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

/* How sp_frame_worker_init() sets a worker up. */
struct sp_frame_worker_config {
    struct sp_io *io;                /* the backend, the worker's from now on */
    struct sp_table_ref *ref;
    int index;                       /* the worker's slot in ref */
    unsigned batch;
    uint64_t tx_flush_ns;
    uint16_t port;                   /* the served UDP port */
    uint8_t ttl;
    uint16_t max_udp;                /* the largest DNS reply over UDP */
    struct sp_rrl *rrl;              /* response rate limiting, or NULL */
    unsigned precopy_frames;         /* precopy mode with a pool this large; 0: memcpy mode */
};

/* Sets w up to run on cfg->io: its configuration is set afresh (no identity, no own
 * stack, no responder: set those after), while its counters and its stop flag stay,
 * so a worker made again on the same state (in the same process or a new one, see
 * shm.h) continues them. 0; or -1 with a one-line reason in err, the backend closed
 * (sp_frame_worker_close). sp_frame_worker_close() undoes it. */
int sp_frame_worker_init(struct sp_frame_worker *w, const struct sp_frame_worker_config *cfg,
                         char *err, size_t errlen);

/* Before a worker's state is used again, its process perhaps dead: clears the stop
 * flag and forgets what lived in that process (backend, pool, slow path). The caller
 * also marks the worker's slot outside any table (sp_table_ref_leave), since a
 * worker that died mid-batch never left. */
void sp_frame_worker_rearm(struct sp_frame_worker *w);

/* Runs until stopped, until the backend has no more input (memory backend), or
 * until it fails (io->error). Returns the number of batches processed. */
uint64_t sp_frame_worker_run(struct sp_frame_worker *w);
/* Asks a running worker to return after its current batch (any thread). */
void sp_frame_worker_stop(struct sp_frame_worker *w);

/* Closes the backend, then frees the pool (the worker struct stays the caller's). */
void sp_frame_worker_close(struct sp_frame_worker *w);

#endif
