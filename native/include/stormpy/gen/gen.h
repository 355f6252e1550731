/*
 * `stormpy gen`: a load generator and latency meter over the kernel's sockets.
 *
 * Three kinds of request, each matched to its reply:
 *   DNS   queries over connected UDP sockets, matched by DNS ID on the socket (port)
 *         that sent them;
 *   ECHO  datagrams carrying a 64-bit sequence number, matched by it on their socket;
 *   HTTP  GETs over kept-alive TCP connections, matched by order on each connection.
 *
 * Open loop (`rate` > 0): request k is due at start + k / rate. It is timestamped
 * with that scheduled time, not with the moment it left, so a generator or a server
 * that falls behind shows as latency instead of silently sending later (coordinated
 * omission, as wrk2 corrects it). Closed loop (`rate` == 0): `outstanding` requests
 * in flight at once, each timestamped when it is sent.
 *
 * A request unanswered `timeout_ns` after its timestamp is lost; a reply to it that
 * comes later is counted as late, not received. When sending ends (count or
 * duration reached, or stop()), run() waits up to timeout_ns for what is in flight,
 * then counts the rest lost: at the end sent = received + lost.
 *
 * The caller opens the sockets (connected, so the kernel filters replies from
 * others; non-blocking) and closes them. run() closes none: a TCP connection the
 * server closed, or whose oldest request timed out, is shut down and left alone.
 * One thread per generator; counters are readable from another thread while it runs.
 */
#ifndef STORMPY_GEN_GEN_H
#define STORMPY_GEN_GEN_H

#include <stdint.h>

#include "stormpy/gen/latency.h"

enum sp_gen_kind { SP_GEN_DNS, SP_GEN_ECHO, SP_GEN_HTTP };

struct sp_io;

/* DNS and echo may go over a frame backend (AF_PACKET, AF_XDP: stormpy/io.h) instead
 * of sockets: the requests' Ethernet, IPv4/IPv6 and UDP headers are written here, from
 * one source port, and replies are the frames from the server's port to it. */
struct sp_gen_ring {
    struct sp_io *io;            /* opened with a poll of 1 ms; the caller closes it */
    uint8_t family;              /* 4 or 6 */
    uint8_t src[16], dst[16];    /* this host's address, the server's */
    uint8_t src_mac[6], dst_mac[6];   /* the interface's, the next hop's */
    uint16_t sport, dport;       /* the caller holds a UDP socket on sport, unread, so
                                  * the kernel answers no reply with ICMP */
    uint8_t ttl;
};

#define SP_GEN_MAX_SOCKETS 256
#define SP_GEN_MAX_REQUEST 1472      /* a DNS query, an echo datagram or a GET head */
#define SP_GEN_MAX_BATCH 256

struct sp_gen_config {
    int kind;
    int *fds;                    /* UDP sockets or TCP connections, nfds of them */
    uint32_t nfds;
    const struct sp_gen_ring *ring;   /* instead of fds (nfds 1, fds NULL); NULL: none */
    const uint8_t *requests;     /* the requests sent in turn, back to back: request i */
    const uint32_t *offsets;     /* is requests[offsets[i]] up to offsets[i + 1] */
    uint32_t nrequests;
    uint64_t rate;               /* requests per second: open loop; 0: closed loop */
    uint32_t outstanding;        /* closed loop: requests in flight at once */
    uint32_t pipeline;           /* HTTP: requests in flight on one connection (1..64) */
    uint64_t count;              /* requests to send; 0: no limit */
    uint64_t duration_ns;        /* time to send for; 0: no limit */
    uint64_t timeout_ns;         /* a request unanswered this long is lost */
    uint32_t batch;              /* requests per sendmmsg, replies per recvmmsg */
};

/* Written only by run()'s thread; read them with sp_gen_snapshot() from others. */
struct sp_gen_counters {
    uint64_t sent, received, lost;
    uint64_t late;               /* replies that came after their request was lost */
    uint64_t unmatched;          /* replies to nothing sent (duplicates, strangers) */
    uint64_t would_block;        /* a send the socket refused for now (buffer full):
                                  * the generator, not the server, is behind */
    uint64_t send_errors;        /* a send that failed otherwise */
    uint64_t refused;            /* ICMP port unreachable reported on a socket */
    uint64_t window_full;        /* DNS: 65,536 IDs in flight on a socket */
    uint64_t closed;             /* HTTP: connections closed (by the server or a timeout) */
    uint64_t bad_replies;        /* a reply that could not be parsed */
    uint64_t codes[8];           /* DNS: rcodes 0-6 and 7 for the rest; HTTP: status / 100 */
    uint64_t started_ns, send_end_ns, ended_ns;   /* CLOCK_MONOTONIC */
    uint64_t max_lag_ns;         /* open loop: furthest a send fell behind its schedule */
};

struct sp_gen;

/* NULL when out of memory. The config's arrays must outlive the generator. */
struct sp_gen *sp_gen_new(const struct sp_gen_config *cfg);
void sp_gen_free(struct sp_gen *g);

/* Sends and receives until done (see above). Returns 0, or an errno that ended it. */
int sp_gen_run(struct sp_gen *g, struct sp_gen_counters *c);
/* Asks run() to stop sending and finish (any thread). */
void sp_gen_stop(struct sp_gen *g);
/* A copy of the counters run() is writing, safe from any thread. */
void sp_gen_snapshot(const struct sp_gen_counters *c, struct sp_gen_counters *out);
/* The latencies of every reply received (ns); complete once run() has returned. */
const struct sp_latency *sp_gen_latency(const struct sp_gen *g);

#endif
