/*
 * HTTP over the kernel's TCP: the embedded default, for a worker without rings.
 *
 * One stream server per worker process, on its own listening socket (the workers'
 * sockets share the port through SO_REUSEPORT, so the kernel spreads connections).
 * An epoll loop reads requests, answers each from the published table and sends
 * the answer with one sendmsg of iovecs pointing into the table: bodies are never
 * copied. Connections come from a pool sized at open, and their timers are three
 * lists ordered by deadline (one timeout per list), so nothing is allocated or
 * scanned per request.
 *
 * A connection's unsent answers point into the table they came from. The worker
 * keeps that table's generation in its slot of the table_ref until they are sent,
 * so a reload frees the old table only once no answer needs it.
 *
 *   s = sp_http_stream_open(&cfg, err, sizeof(err));
 *   sp_http_stream_run(s, ref, index, &stop, &counters);
 *   sp_http_stream_close(s);
 */
#ifndef STORMPY_APP_HTTP_STREAM_H
#define STORMPY_APP_HTTP_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/engine/table_ref.h"

struct sp_http_counters {
    uint64_t connections;        /* accepted */
    uint64_t requests;           /* answered */
    uint64_t status[6];          /* answers by status class: [2] is 2xx */
    uint64_t bytes;              /* sent */
    uint64_t timeouts;           /* connections cut by a timer */
    uint64_t evicted;            /* idle connections closed to make room */
    uint64_t refused;            /* connections closed at once: the pool was full */
    uint64_t open;               /* open now */
    uint64_t retransmits;        /* segments sent again (stormpy's own TCP) */
    uint64_t cookies_sent;       /* SYN-ACKs with a SYN cookie (own TCP): no room for state */
    uint64_t cookies_accepted;   /* connections opened from a cookie's ACK (own TCP) */
};

struct sp_http_stream_config {
    int listen_fd;               /* a listening TCP socket, the stream server's from now on */
    uint32_t max_connections;    /* capped by the process's file limit */
    uint32_t request_timeout_ms; /* a request head must arrive within this (else 408) */
    uint32_t idle_timeout_ms;    /* a kept-alive connection may wait this long */
    uint32_t send_timeout_ms;    /* a client that reads nothing for this long is cut */
};

struct sp_http_stream;

/* NULL with a one-line reason in err (listen_fd closed then too). */
struct sp_http_stream *sp_http_stream_open(const struct sp_http_stream_config *cfg, char *err,
                                           size_t errlen);
/* Closes every connection and the listening socket. */
void sp_http_stream_close(struct sp_http_stream *s);

/* Serves until *stop is set (read atomically; seen within 100 ms). Tables come from
 * ref as worker `index`. 0, or the errno that ended it. */
int sp_http_stream_run(struct sp_http_stream *s, struct sp_table_ref *ref, int index,
                       const int *stop, struct sp_http_counters *c);

#endif
