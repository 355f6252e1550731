/*
 * The run-to-completion worker: one per NIC queue or socket. RX batch -> the
 * application answers it from the current table -> TX batch -> one kick, through the
 * backend's function table (called once per batch). No locks, no allocation, and
 * writes only to its own state.
 *
 * The state can live in memory shared with a supervisor process (shm.h): then the
 * supervisor reads the counters and sets `stop`, and never touches `io`, which
 * points into the worker process's own memory. A worker started again on the
 * same state (after its process died) continues its counters.
 *
 * Applications: the worker serves one, chosen by `app`, and calls its batch function
 * through a switch once per batch (batch.h). Each application's state is a member of
 * the worker struct (dns, rules) rather than behind a pointer, because the worker
 * struct is what lives in the shared region: the supervisor reads the applications'
 * counters there, and a restarted worker continues them. The engine never reads an
 * application's fields; it calls the application's init, batch, rearm and close.
 *
 *   sp_frame_worker_init(w, &cfg, err, sizeof(err));   a backend's io, the table, the port
 *   sp_frame_worker_run(w);                            in the worker's thread
 *   sp_frame_worker_stop(w);                           from any thread
 *   sp_frame_worker_close(w);                          once run() has returned
 */
#ifndef STORMPY_ENGINE_WORKER_H
#define STORMPY_ENGINE_WORKER_H

#include "stormpy/app/dns/worker.h"
#include "stormpy/app/http/worker.h"
#include "stormpy/app/rules/worker.h"
#include "stormpy/engine/batch.h"
#include "stormpy/engine/counters.h"
#include "stormpy/engine/frame.h"
#include "stormpy/engine/table_ref.h"
#include "stormpy/engine/tap.h"
#include "stormpy/io.h"

/* The application a worker serves. */
enum sp_app {
    SP_APP_DNS = 0,          /* serve-dns: app/dns */
    SP_APP_RULES,            /* a custom responder: app/rules, with a slow path */
    SP_APP_HTTP,             /* serve-http: app/http; on the kernel's TCP, no frame loop */
    SP_APP_DNS_TCP,          /* serve-dns's TCP worker: app/dns/stream.h, no frame loop */
};

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
    int app;                         /* enum sp_app */
    /* Frames the application leaves go to slow_path, called once per batch (never per
     * frame) after the worker has left the table (batch.h). slow_path and slow_ctx
     * belong to the worker's process. */
    sp_slow_path_fn slow_path;
    void *slow_ctx;
    struct sp_dns_worker dns;        /* also a DNS responder's (SP_APP_RULES) */
    struct sp_rules_worker rules;
    struct sp_http_worker http;
    /* Tables that answers still point into after their batch (HTTP on the rings):
     * the worker enters and leaves with them announced (table_ref.h). */
    struct sp_table_pins pins;
    /* `stormpy tap`'s region (tap.h), mapped before the fork; NULL on sockets. The
     * worker copies its frames into ring `index` while a tap is attached. */
    struct sp_tap_region *tap;
    /* Workers lie side by side in shared memory: this keeps the counters one writes per
     * frame off any cache line of the next one's (no false sharing between cores). */
    char next_worker_pad[64];
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
    int app;                         /* enum sp_app */
    int all_frames;                  /* SP_APP_RULES: also what is not UDP to the port */
    struct sp_dns_worker_config dns;
    struct sp_http_stream_config http;   /* SP_APP_HTTP without io: the kernel's TCP */
    struct sp_dns_stream_config dns_tcp; /* SP_APP_DNS_TCP */
};

/* Sets w up to run on cfg->io: its configuration is set afresh (no identity, no own
 * stack, no slow path: set those after), while its counters and its stop flag stay,
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
 * until it fails (io->error). Returns the number of batches processed (0 for an
 * stream worker on the kernel's TCP, HTTP or DNS, which has no batches). */
uint64_t sp_frame_worker_run(struct sp_frame_worker *w);
/* Asks a running worker to return after its current batch (any thread). */
void sp_frame_worker_stop(struct sp_frame_worker *w);

/* Closes the backend, then the applications' state (the worker struct stays the
 * caller's). */
void sp_frame_worker_close(struct sp_frame_worker *w);

#endif
