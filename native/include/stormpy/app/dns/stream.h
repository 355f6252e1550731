/*
 * DNS over the kernel's TCP (RFC 7766), in a worker process of its own.
 *
 * One stream server per TCP worker, on its own listening socket (the workers share
 * the port through SO_REUSEPORT). An epoll loop reads length-prefixed queries,
 * answers each from the published table into one buffer and sends what a wake-up
 * produced with one send. Connections come from a pool allocated at open, so
 * memory does not grow with the number of clients, and each holds at most one
 * unsent answer: a connection whose answer cannot leave is not read until it has.
 *
 * The defences (after Knot DNS and NSD):
 *   - a message must arrive, and an answer leave, within io_timeout_ms of its first
 *     byte (a slow-loris, a client that does not read);
 *   - a connection may wait idle_timeout_ms for its next query while fewer than half
 *     the pool is open; the wait shrinks to io_timeout_ms as the pool fills;
 *   - a full pool closes its oldest idle connection, then its slowest reader, for a
 *     new one;
 *   - one address (an IPv6 address's /64) holds at most max_per_source connections.
 *
 *   s = sp_dns_stream_open(&cfg, err, sizeof(err));
 *   sp_dns_stream_run(s, ref, index, &stop, &dns_counters, &tcp_counters);
 *   sp_dns_stream_close(s);
 */
#ifndef STORMPY_APP_DNS_STREAM_H
#define STORMPY_APP_DNS_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/app/dns/dns.h"
#include "stormpy/engine/table_ref.h"

struct sp_dns_tcp_counters {
    uint64_t connections;        /* accepted */
    uint64_t open;               /* open now */
    uint64_t refused;            /* closed at once: the pool was full of busy connections */
    uint64_t source_limited;     /* closed at once: the address held max_per_source */
    uint64_t evicted;            /* idle or slow connections closed to make room */
    uint64_t io_timeouts;        /* a message or an answer took longer than io_timeout_ms */
    uint64_t idle_timeouts;      /* no query within the idle timeout */
    uint64_t malformed;          /* a length of 0 or over SP_DNS_TCP_QUERY_MAX: closed */
};

/* The longest query read; RFC 7766 allows 65535, but a query is a name and a few
 * options, and every connection's buffer is allocated at open. */
#define SP_DNS_TCP_QUERY_MAX 1022

struct sp_dns_stream_config {
    int listen_fd;               /* a listening TCP socket, the stream server's from now on */
    uint32_t max_connections;    /* capped by the process's file limit */
    uint32_t max_per_source;     /* 0: no limit */
    uint32_t io_timeout_ms;
    uint32_t idle_timeout_ms;
    struct sp_dns_config dns;
};

struct sp_dns_stream;

/* NULL with a one-line reason in err (listen_fd closed then too). */
struct sp_dns_stream *sp_dns_stream_open(const struct sp_dns_stream_config *cfg, char *err,
                                         size_t errlen);
/* Closes every connection and the listening socket. */
void sp_dns_stream_close(struct sp_dns_stream *s);

/* Serves until *stop is set (read atomically; seen within 100 ms). Tables come from
 * ref as worker `index`. 0, or the errno that ended it. */
int sp_dns_stream_run(struct sp_dns_stream *s, struct sp_table_ref *ref, int index,
                      const int *stop, struct sp_dns_counters *dns,
                      struct sp_dns_tcp_counters *tcp);

#endif
