/*
 * The netmap backend: one NIC ring pair per worker ("netmap:IFACE-Q"), opened with
 * netmap's own header-only API. Built only when NETMAP_INCLUDE names a directory
 * holding net/netmap_user.h (SP_HAVE_NETMAP); otherwise the open call says so.
 * netmap takes the interface from the kernel, so ARP, ICMP and NDP for the served
 * addresses are stormpy's to answer (ownstack.h).
 *
 * Pre-copy mode swaps buffers instead of copying: the pool's copies are netmap
 * "extra buffers" (requested at open), and sending one puts its buffer index into
 * the TX slot (NS_BUF_CHANGED), parking the slot's own buffer aside. When the slot
 * comes back (the TX tail passes it after a sync) the copy is complete and the
 * slot gets its own buffer again. The extra buffers go back to netmap at close.
 */
#ifndef STORMPY_IO_NETMAP_H
#define STORMPY_IO_NETMAP_H

#include <stddef.h>
#include <stdio.h>

#include "stormpy/io.h"

struct sp_netmap_config {
    const char *ifname;
    unsigned queue;          /* the NIC ring pair this worker owns */
    int busy_poll;           /* 1: spin with NIOCRXSYNC; 0: poll() */
    unsigned poll_ms;
    unsigned pool_frames;    /* extra buffers for a precopy pool (0: memcpy only) */
};

#ifdef SP_HAVE_NETMAP
struct sp_io *sp_netmap_io_open(const struct sp_netmap_config *cfg, char *err, size_t errlen);
#else
static inline struct sp_io *sp_netmap_io_open(const struct sp_netmap_config *cfg, char *err,
                                              size_t errlen)
{
    (void)cfg;
    snprintf(err, errlen, "netmap: not compiled in (build with NETMAP_INCLUDE=<dir with net/netmap_user.h>)");
    return NULL;
}
#endif

static inline int sp_have_netmap(void)
{
#ifdef SP_HAVE_NETMAP
    return 1;
#else
    return 0;
#endif
}

#endif
