/*
 * The HTTP server's part of a worker (engine/worker.h). On the kernel's TCP (the
 * embedded default) the worker runs a stream server (stream.h) instead of the frame
 * loop; its counters live here, in the worker struct the supervisor reads.
 */
#ifndef STORMPY_APP_HTTP_WORKER_H
#define STORMPY_APP_HTTP_WORKER_H

#include <stddef.h>

#include "stormpy/app/http/ring.h"
#include "stormpy/app/http/stream.h"

struct sp_http_worker {
    struct sp_http_counters counters;
    struct sp_http_stream *stream;   /* the worker process's own: the kernel's TCP */
    struct sp_http_ring *ring;       /* or its own TCP on the rings */
};

/* Opens a stream server on cfg->listen_fd (the counters stay). 0, or -1 with a
 * one-line reason in err. sp_http_worker_close() undoes it. */
int sp_http_worker_init(struct sp_http_worker *w, const struct sp_http_stream_config *cfg,
                        char *err, size_t errlen);
/* Serves on the frame worker's rings with stormpy's own TCP instead: -1 when out of
 * memory. Undone by sp_http_worker_close(). */
int sp_http_worker_init_ring(struct sp_http_worker *w, const struct sp_http_ring_config *cfg);
/* Forgets what lived in a worker process that may be dead. */
void sp_http_worker_rearm(struct sp_http_worker *w);
void sp_http_worker_close(struct sp_http_worker *w);

#endif
