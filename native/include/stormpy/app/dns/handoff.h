/*
 * Zone transfers and NOTIFY handed up to the server process.
 *
 * The fast path answers QUERY only. A server that follows a primary (NOTIFY, RFC 1996)
 * or serves transfers (AXFR/IXFR, RFC 5936 and 1995) gives each worker the write end
 * of a Unix datagram socket (sp_dns_config.handoff_fd); the rare messages that only
 * the control plane can answer go up it, and the worker answers nothing itself:
 *   - a UDP NOTIFY (or UPDATE, or IXFR): the message with its sender and the address it
 *     was sent to, which the server answers from a socket on the same port and that
 *     address (a primary drops an answer from another; stormpy/dns/handoff.py);
 *   - a TCP connection whose query is an AXFR, an IXFR or a NOTIFY (Knot sends
 *     NOTIFY over TCP): the connection itself (SCM_RIGHTS) with the bytes read from
 *     it so far; the worker forgets it.
 * Nothing is checked per query that is answered from the table: the test runs where
 * the table had no answer. When the socket is full, the message is dropped (the
 * primary retries a NOTIFY; a transfer client retries its connection).
 *
 * Each datagram is a struct sp_dns_handoff followed by the message bytes.
 */
#ifndef STORMPY_APP_DNS_HANDOFF_H
#define STORMPY_APP_DNS_HANDOFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stormpy/app/dns/dns.h"

enum { SP_DNS_HANDOFF_UDP = 1, SP_DNS_HANDOFF_TCP = 2 };

struct sp_dns_handoff {
    uint8_t kind;            /* SP_DNS_HANDOFF_UDP or _TCP (then a descriptor rides along) */
    uint8_t family;          /* 4 or 6: the sender's address (UDP) */
    uint16_t port;           /* the sender's port, host order */
    uint8_t addr[16];
    uint8_t local[16];       /* the address the message was sent to (family's length);
                              * all zero: not known */
};

/* Whether a UDP query with this verdict goes up rather than answered here (AXFR over
 * UDP stays NOTIMP, here). */
static inline bool sp_dns_handoff_wanted(enum sp_dns_verdict v, const struct sp_dns_query *q)
{
    return v == SP_DNS_NOTAUTH || (v == SP_DNS_TRANSFER && q->qtype != SP_DNS_TYPE_AXFR);
}

/* A UDP message from (family, addr, port) to local (NULL: not known) sent up fd, so
 * that the answer leaves from the address asked; false when it could not go. */
bool sp_dns_handoff_datagram(int fd, uint8_t family, const uint8_t *addr, uint16_t port,
                             const uint8_t *local, const uint8_t *msg, size_t len);

/* TCP connection conn_fd sent up fd with the len bytes read from it; false when it
 * could not go (the caller still owns conn_fd either way and closes it). */
bool sp_dns_handoff_stream(int fd, int conn_fd, const uint8_t *data, size_t len);

#endif
