/*
 * The socket backend: the embedded default, behind the same I/O interface as the
 * ring backends (io.h) and run by the same worker loop (worker.h).
 *
 * One UDP socket per worker, all bound to the same address with SO_REUSEPORT so
 * the kernel spreads clients across workers. The control plane opens and binds
 * the sockets (with SO_RCVTIMEO set, so a worker looks at its stop flag at least
 * that often); a worker's batch is one recvmmsg() and one sendmmsg(). Frames are
 * UDP payloads (io->datagrams); replies go back to the peer of the request whose
 * id they carry. A wildcard socket (bound to 0.0.0.0 or ::, with IP_PKTINFO or
 * IPV6_RECVPKTINFO on) reads each query's destination from its control data and
 * answers from it; a socket bound to one address passes no control data. Nothing
 * is allocated after open.
 */
#ifndef STORMPY_IO_SOCKET_H
#define STORMPY_IO_SOCKET_H

#include <stddef.h>
#include <stdint.h>

#include "stormpy/io.h"

#define SP_SOCK_RX_MAX 4096     /* larger datagrams are counted in rx_truncated */

/* Takes ownership of fd (closed by close()). tx_max is the largest reply, the
 * server's EDNS payload size. NULL when out of memory. */
struct sp_io *sp_sock_io_open(int fd, unsigned batch, uint16_t tx_max);

#endif
