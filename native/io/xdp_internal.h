/* What the AF_XDP program (xdp_program.c) shares with its per-queue sockets
 * (xdp_socket.c): the program's state, which a socket registers itself in, and the
 * backend's error reporting. Private to the backend; the API is
 * stormpy/io/xdp_program.h and stormpy/io/xdp_socket.h. */
#ifndef STORMPY_IO_XDP_INTERNAL_H
#define STORMPY_IO_XDP_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <net/if.h>
#include <stddef.h>
#include <stdint.h>

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "stormpy/io/xdp_program.h"

struct sp_xdp_prog {
    char ifname[IF_NAMESIZE];
    int ifindex;
    unsigned queues;          /* receive queues, 0 when unknown */
    uint32_t map_entries;
    struct bpf_object *obj;
    int prog_fd, map_fd;
    int link_fd;              /* -1: attached through netlink */
    uint32_t xdp_flags;       /* XDP_FLAGS_DRV_MODE or XDP_FLAGS_SKB_MODE */
    /* answers in the driver (xdp_answer.c): the maps, and the generation being filled */
    int answers_fd, answer_config_fd, answer_stats_fd;
    int answers_next_fd;      /* -1: none begun */
    bool answer;              /* loaded with its answer stage on */
};

void sp_xdp_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline int sp_xdp_is_perm(int e)
{
    return e == EPERM || e == EACCES;
}

/* Writes value into a loaded-to-be object's .rodata, at the offset BTF gives for the
 * global `name` (before bpf_object__load(): the kernel freezes it). */
int sp_xdp_set_rodata(struct bpf_object *obj, const char *name, const void *value, size_t vsize);

/* The answer maps' descriptors found in the loaded object (0, or -1 when absent);
 * the generation being filled closed. */
int sp_xdp_answers_find(struct sp_xdp_prog *p);
void sp_xdp_answers_close(struct sp_xdp_prog *p);

#define SP_XDP_PERM_MSG "AF_XDP: needs CAP_NET_ADMIN/CAP_NET_RAW/CAP_BPF (run as root)"

/* libbpf and libxdp print warnings to stderr by default. Between begin and end the
 * first warning is kept in sp_xdp_lib_msg instead (it names the cause; later ones
 * repeat it). The print functions are process-wide: one thread at a time. */
struct sp_xdp_quiet {
    libbpf_print_fn_t bpf;
    libxdp_print_fn_t xdp;
};
extern char sp_xdp_lib_msg[200];
struct sp_xdp_quiet sp_xdp_quiet_begin(void);
void sp_xdp_quiet_end(struct sp_xdp_quiet q);

#endif
