/*
 * The socket backend: the embedded default. One UDP socket per worker, all bound
 * to the same address with SO_REUSEPORT so the kernel spreads clients across
 * workers. The control plane opens and binds the sockets (with SO_RCVTIMEO set
 * to SP_SOCK_POLL_MS); each worker runs recvmmsg -> answer every query from the current
 * table -> sendmmsg, with no lock and no allocation after start-up; it checks
 * its stop flag at least every SP_SOCK_POLL_MS.
 */
#ifndef STORMPY_SOCKET_IO_H
#define STORMPY_SOCKET_IO_H

#include <stdint.h>
#include <sys/socket.h>

#include "stormpy/counters.h"
#include "stormpy/dns.h"
#include "stormpy/table.h"

#define SP_SOCK_BATCH_MAX 256
#define SP_SOCK_POLL_MS 100
#define SP_SOCK_RX_MAX 4096

struct sp_worker_counters {
    uint64_t rx;
    uint64_t tx;
    uint64_t tx_errors;
    uint64_t rx_truncated;       /* datagrams larger than the receive buffer */
    uint64_t batches;
    uint64_t batch_hist[SP_HIST_BUCKETS];
    struct sp_dns_counters dns;
};

struct sp_sock_worker;

/* Creates worker number `index` reading fd; batch is clamped to 1..SP_SOCK_BATCH_MAX.
 * The worker owns fd from then on. NULL when out of memory. */
struct sp_sock_worker *sp_sock_worker_new(int fd, int index, int batch, struct sp_table_ref *ref,
                                          const struct sp_dns_config *cfg);
void sp_sock_worker_free(struct sp_sock_worker *w);

/* Runs until sp_sock_worker_stop(). Returns 0, or -errno on a socket error. */
int sp_sock_worker_run(struct sp_sock_worker *w);
void sp_sock_worker_stop(struct sp_sock_worker *w);

/* A consistent-enough copy of the worker's counters (each field is read atomically). */
void sp_sock_worker_counters(const struct sp_sock_worker *w, struct sp_worker_counters *out);

#endif
