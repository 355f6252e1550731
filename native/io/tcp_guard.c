/* The TCP guard's loading and attachment. See stormpy/io/tcp_guard.h. */
#include "stormpy/io/tcp_guard.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef SP_WITH_XDP

#include "xdp_internal.h"

#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#define SP_GUARD_PROG_NAME "stormpy_guard"
#define SP_GUARD_PORT_VAR "sp_port"
/* enum bpf_attach_type's BPF_TCX_INGRESS (Linux 6.6), which Debian 12's headers predate */
#define SP_BPF_TCX_INGRESS 46
/* the clsact filter's place when there is no tcx: fixed per port, so a new start
 * replaces a filter a crashed one left, and servers of other ports keep theirs */
#define SP_GUARD_HANDLE(port) (0x53500000u | (port))
#define SP_GUARD_PRIORITY 1

#ifdef SP_TCP_GUARD_OBJ
__asm__(".pushsection .rodata.sp_tcp_guard_obj, \"a\"\n"
        ".balign 8\n"
        ".globl sp_tcp_guard_obj\n"
        ".hidden sp_tcp_guard_obj\n"
        "sp_tcp_guard_obj:\n"
        ".incbin \"" SP_TCP_GUARD_OBJ "\"\n"
        ".globl sp_tcp_guard_obj_end\n"
        ".hidden sp_tcp_guard_obj_end\n"
        "sp_tcp_guard_obj_end:\n"
        ".popsection\n");
extern const unsigned char sp_tcp_guard_obj[] __attribute__((visibility("hidden")));
extern const unsigned char sp_tcp_guard_obj_end[] __attribute__((visibility("hidden")));
#endif

struct sp_tcp_guard {
    int ifindex;
    struct bpf_object *obj;
    int prog_fd;
    int link_fd;                 /* -1: a clsact filter */
    uint16_t port;
};

static struct sp_tcp_guard *fail(struct sp_tcp_guard *g, char *err, size_t errlen,
                                 const char *what, int e)
{
    if (sp_xdp_is_perm(e))
        sp_xdp_set_err(err, errlen, "TCP guard (%s): needs CAP_NET_ADMIN and CAP_BPF (run as root)",
                       what);
    else
        sp_xdp_set_err(err, errlen, "TCP guard: %s: %s%s%s", what, strerror(e),
                       sp_xdp_lib_msg[0] ? ": " : "", sp_xdp_lib_msg);
    if (g->obj)
        bpf_object__close(g->obj);
    free(g);
    return NULL;
}

static int attach_clsact(struct sp_tcp_guard *g)
{
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = g->ifindex, .attach_point = BPF_TC_INGRESS);
    int r = bpf_tc_hook_create(&hook);
    if (r && r != -EEXIST)
        return r;
    LIBBPF_OPTS(bpf_tc_opts, o, .handle = SP_GUARD_HANDLE(g->port), .priority = SP_GUARD_PRIORITY,
                .prog_fd = g->prog_fd, .flags = BPF_TC_F_REPLACE);
    return bpf_tc_attach(&hook, &o);
}

struct sp_tcp_guard *sp_tcp_guard_attach(const char *ifname, uint16_t port,
                                         const struct sp_tcp_guard_addrs *addrs, char *err,
                                         size_t errlen)
{
    int ifindex = ifname && *ifname && strlen(ifname) < IF_NAMESIZE ? (int)if_nametoindex(ifname) : 0;
    if (!ifindex) {
        sp_xdp_set_err(err, errlen, "TCP guard: interface %s not found", ifname ? ifname : "");
        return NULL;
    }
    struct sp_tcp_guard *g = calloc(1, sizeof(*g));
    if (!g) {
        sp_xdp_set_err(err, errlen, "TCP guard: out of memory");
        return NULL;
    }
    g->ifindex = ifindex;
    g->link_fd = -1;
    g->port = port;
#ifndef SP_TCP_GUARD_OBJ
    return fail(g, err, errlen, "no embedded BPF object", ENOENT);
#else
    struct sp_xdp_quiet q = sp_xdp_quiet_begin();
    LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = SP_GUARD_PROG_NAME);
    g->obj = bpf_object__open_mem(sp_tcp_guard_obj, (size_t)(sp_tcp_guard_obj_end - sp_tcp_guard_obj), &oo);
    int e = libbpf_get_error(g->obj);
    if (e) {
        g->obj = NULL;
        sp_xdp_quiet_end(q);
        return fail(g, err, errlen, "open", -e);
    }
    struct bpf_program *prog = bpf_object__find_program_by_name(g->obj, SP_GUARD_PROG_NAME);
    uint32_t nv4 = addrs->nv4 < SP_TCP_GUARD_ADDRS ? addrs->nv4 : SP_TCP_GUARD_ADDRS;
    uint32_t nv6 = addrs->nv6 < SP_TCP_GUARD_ADDRS ? addrs->nv6 : SP_TCP_GUARD_ADDRS;
    e = !prog ? ENOENT : -sp_xdp_set_rodata(g->obj, SP_GUARD_PORT_VAR, &port, sizeof(port));
    if (!e)
        e = -sp_xdp_set_rodata(g->obj, "sp_nv4", &nv4, sizeof(nv4));
    if (!e)
        e = -sp_xdp_set_rodata(g->obj, "sp_nv6", &nv6, sizeof(nv6));
    if (!e)
        e = -sp_xdp_set_rodata(g->obj, "sp_v4", addrs->v4, sizeof(addrs->v4));
    if (!e)
        e = -sp_xdp_set_rodata(g->obj, "sp_v6", addrs->v6, sizeof(addrs->v6));
    if (!e)
        e = -bpf_object__load(g->obj);
    if (e) {
        sp_xdp_quiet_end(q);
        return fail(g, err, errlen, "load", e);
    }
    g->prog_fd = bpf_program__fd(prog);
    g->link_fd = bpf_link_create(g->prog_fd, ifindex, (enum bpf_attach_type)SP_BPF_TCX_INGRESS, NULL);
    if (g->link_fd < 0) {
        g->link_fd = -1;
        e = -attach_clsact(g);
    }
    sp_xdp_quiet_end(q);
    if (e)
        return fail(g, err, errlen, ifname, e);
    return g;
#endif
}

void sp_tcp_guard_detach(struct sp_tcp_guard *g)
{
    if (!g)
        return;
    struct sp_xdp_quiet q = sp_xdp_quiet_begin();
    if (g->link_fd >= 0) {
        bpf_link_detach(g->link_fd);   /* even if a forked child still holds the fd */
        close(g->link_fd);
    } else {
        LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = g->ifindex, .attach_point = BPF_TC_INGRESS);
        LIBBPF_OPTS(bpf_tc_opts, o, .handle = SP_GUARD_HANDLE(g->port), .priority = SP_GUARD_PRIORITY);
        bpf_tc_detach(&hook, &o);
    }
    bpf_object__close(g->obj);
    sp_xdp_quiet_end(q);
    free(g);
}

int sp_tcp_guard_uses_link(const struct sp_tcp_guard *g)
{
    return g->link_fd >= 0;
}

#else /* built without libbpf */

struct sp_tcp_guard *sp_tcp_guard_attach(const char *ifname, uint16_t port,
                                         const struct sp_tcp_guard_addrs *addrs, char *err,
                                         size_t errlen)
{
    (void)ifname;
    (void)port;
    (void)addrs;
    snprintf(err, errlen, "TCP guard: not compiled in (build with libbpf-dev and clang)");
    return NULL;
}

void sp_tcp_guard_detach(struct sp_tcp_guard *g)
{
    (void)g;
}

int sp_tcp_guard_uses_link(const struct sp_tcp_guard *g)
{
    (void)g;
    return 0;
}

#endif
