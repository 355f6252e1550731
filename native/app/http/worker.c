/* The HTTP server's part of a worker. See stormpy/app/http/worker.h. */
#include "stormpy/app/http/worker.h"

int sp_http_worker_init(struct sp_http_worker *w, const struct sp_http_stream_config *cfg,
                        char *err, size_t errlen)
{
    w->stream = sp_http_stream_open(cfg, err, errlen);
    return w->stream ? 0 : -1;
}

int sp_http_worker_init_ring(struct sp_http_worker *w, const struct sp_http_ring_config *cfg)
{
    sp_http_ring_close(w->ring);
    w->ring = sp_http_ring_open(cfg);
    return w->ring ? 0 : -1;
}

void sp_http_worker_rearm(struct sp_http_worker *w)
{
    w->stream = NULL;
    w->ring = NULL;
}

void sp_http_worker_close(struct sp_http_worker *w)
{
    sp_http_stream_close(w->stream);
    sp_http_ring_close(w->ring);
    w->stream = NULL;
    w->ring = NULL;
}
