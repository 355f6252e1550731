/* The XDP program's loading and attachment. See stormpy/io/xdp_program.h. */
#ifdef SP_WITH_XDP

#include "xdp_internal.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/sockios.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>

#define SP_XDP_PROG_NAME "stormpy_steer"   /* the SEC("xdp") function in steer.bpf.c */
#define SP_XDP_MAP_NAME "sp_xsks"
#define SP_XDP_PORT_VAR "sp_port"
#define SP_XDP_TCP_VAR "sp_tcp"
#define SP_XDP_ANSWER_VAR "sp_answer"
#define SP_XDP_REFLECT_VAR "sp_reflect"
#define SP_XDP_MAP_MIN 64                  /* XSKMAP entries even when fewer queues */

/* ---- the embedded BPF object ------------------------------------------------------ */

#ifdef SP_XDP_BPF_OBJ
/* The object file, assembled straight into .rodata: no generated source, no file to
 * find at run time. 8-aligned because libelf reads the ELF headers in place. */
__asm__(".pushsection .rodata.sp_xdp_steer_obj, \"a\"\n"
        ".balign 8\n"
        ".globl sp_xdp_steer_obj\n"
        ".hidden sp_xdp_steer_obj\n"
        "sp_xdp_steer_obj:\n"
        ".incbin \"" SP_XDP_BPF_OBJ "\"\n"
        ".globl sp_xdp_steer_obj_end\n"
        ".hidden sp_xdp_steer_obj_end\n"
        "sp_xdp_steer_obj_end:\n"
        ".popsection\n");
extern const unsigned char sp_xdp_steer_obj[] __attribute__((visibility("hidden")));
extern const unsigned char sp_xdp_steer_obj_end[] __attribute__((visibility("hidden")));
#endif

/* ---- errors ----------------------------------------------------------------------- */

void sp_xdp_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

char sp_xdp_lib_msg[200];

static void keep_first(const char *fmt, va_list ap)
{
    if (sp_xdp_lib_msg[0])
        return;
    vsnprintf(sp_xdp_lib_msg, sizeof(sp_xdp_lib_msg), fmt, ap);
    char *nl = strchr(sp_xdp_lib_msg, '\n');
    if (nl)
        *nl = '\0';
}

static int capture_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level != LIBBPF_DEBUG)
        keep_first(fmt, ap);
    return 0;
}

static int capture_libxdp(enum libxdp_print_level level, const char *fmt, va_list ap)
{
    if (level != LIBXDP_DEBUG)
        keep_first(fmt, ap);
    return 0;
}

struct sp_xdp_quiet sp_xdp_quiet_begin(void)
{
    sp_xdp_lib_msg[0] = '\0';
    struct sp_xdp_quiet q = {libbpf_set_print(capture_libbpf), libxdp_set_print(capture_libxdp)};
    return q;
}

void sp_xdp_quiet_end(struct sp_xdp_quiet q)
{
    libbpf_set_print(q.bpf);
    libxdp_set_print(q.xdp);
}

/* ---- the program ------------------------------------------------------------------ */

/* Receive queues: ethtool's channel count (right in any network namespace), else
 * sysfs, else unknown. */
static unsigned count_queues(const char *ifname)
{
    unsigned n = 0;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s >= 0) {
        struct ethtool_channels ch = {.cmd = ETHTOOL_GCHANNELS};
        struct ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
        ifr.ifr_data = (void *)&ch;
        if (ioctl(s, SIOCETHTOOL, &ifr) == 0)
            n = ch.rx_count + ch.combined_count;
        close(s);
    }
    if (n)
        return n;
    char path[64 + IF_NAMESIZE];
    snprintf(path, sizeof(path), "/sys/class/net/%s/queues", ifname);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, "rx-", 3) == 0;
    closedir(d);
    return n;
}

int sp_xdp_set_rodata(struct bpf_object *obj, const char *name, const void *value, size_t vsize)
{
    struct bpf_map *map, *rodata = NULL;
    bpf_object__for_each_map(map, obj) {
        const char *map_name = bpf_map__name(map);
        size_t len = strlen(map_name);
        if (len >= 7 && strcmp(map_name + len - 7, ".rodata") == 0)
            rodata = map;
    }
    struct btf *btf = bpf_object__btf(obj);
    if (!rodata || !btf)
        return -ENOENT;
    int id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
    if (id < 0)
        return -ENOENT;
    const struct btf_type *sec = btf__type_by_id(btf, (uint32_t)id);
    const struct btf_var_secinfo *vs = btf_var_secinfos(sec);
    for (unsigned i = 0; i < btf_vlen(sec); i++) {
        const struct btf_type *var = btf__type_by_id(btf, vs[i].type);
        if (strcmp(btf__name_by_offset(btf, var->name_off), name) != 0)
            continue;
        size_t size;
        const void *init = bpf_map__initial_value(rodata, &size);
        unsigned char buf[256];
        if (!init || vs[i].size != vsize || size > sizeof(buf) || vs[i].offset + vsize > size)
            return -EINVAL;
        memcpy(buf, init, size);
        memcpy(buf + vs[i].offset, value, vsize);
        return bpf_map__set_initial_value(rodata, buf, size);
    }
    return -ENOENT;
}

static int prog_name(uint32_t id, char *name, size_t len)
{
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0)
        return -errno;
    struct bpf_prog_info info;
    uint32_t info_len = sizeof(info);
    memset(&info, 0, sizeof(info));
    int r = bpf_obj_get_info_by_fd(fd, &info, &info_len);
    close(fd);
    if (r)
        return -errno;
    snprintf(name, len, "%s", (const char *)info.name);
    return 0;
}

/* Detach a stormpy program left by a crash (a netlink attach outlives its process);
 * refuse when another program, or a live stormpy's link, holds the interface. */
static int clear_stale(struct sp_xdp_prog *p, char *err, size_t errlen)
{
    LIBBPF_OPTS(bpf_xdp_query_opts, q);
    int r = bpf_xdp_query(p->ifindex, 0, &q);
    if (r) {
        if (sp_xdp_is_perm(-r))
            sp_xdp_set_err(err, errlen, SP_XDP_PERM_MSG);
        else
            sp_xdp_set_err(err, errlen, "AF_XDP: cannot query XDP on %s: %s", p->ifname, strerror(-r));
        return -1;
    }
    const struct {
        uint32_t id, flag;
    } attached[3] = {
        {q.drv_prog_id, XDP_FLAGS_DRV_MODE},
        {q.skb_prog_id, XDP_FLAGS_SKB_MODE},
        {q.hw_prog_id, XDP_FLAGS_HW_MODE},
    };
    for (int i = 0; i < 3; i++) {
        if (!attached[i].id)
            continue;
        char name[BPF_OBJ_NAME_LEN];
        r = prog_name(attached[i].id, name, sizeof(name));
        if (r) {
            if (sp_xdp_is_perm(-r))
                sp_xdp_set_err(err, errlen, SP_XDP_PERM_MSG);
            else
                sp_xdp_set_err(err, errlen, "AF_XDP: cannot inspect XDP program %u on %s: %s",
                        attached[i].id, p->ifname, strerror(-r));
            return -1;
        }
        if (strcmp(name, SP_XDP_PROG_NAME) != 0) {
            sp_xdp_set_err(err, errlen,
                    "AF_XDP: %s already has XDP program '%s' (id %u); not replacing it",
                    p->ifname, name, attached[i].id);
            return -1;
        }
        int fd = bpf_prog_get_fd_by_id(attached[i].id);
        if (fd < 0) {
            if (errno == ENOENT)
                continue;   /* gone in the meantime */
            sp_xdp_set_err(err, errlen, "AF_XDP: cannot open stale XDP program %u: %s",
                    attached[i].id, strerror(errno));
            return -1;
        }
        LIBBPF_OPTS(bpf_xdp_attach_opts, o, .old_prog_fd = fd);
        r = bpf_xdp_detach(p->ifindex, attached[i].flag, &o);
        close(fd);
        if (r == -EBUSY) {
            sp_xdp_set_err(err, errlen, "AF_XDP: %s is served by another running stormpy (XDP program %u)",
                    p->ifname, attached[i].id);
            return -1;
        }
        if (r && r != -EEXIST && r != -ENOENT) {   /* replaced or gone meanwhile: fine */
            sp_xdp_set_err(err, errlen, "AF_XDP: cannot detach stale stormpy program %u from %s: %s",
                    attached[i].id, p->ifname, strerror(-r));
            return -1;
        }
    }
    return 0;
}

/* Attach in one mode: a BPF link first (detached by the kernel when this process
 * dies), the netlink attach when the kernel has no XDP links. 0 or -errno. */
static int attach_mode(struct sp_xdp_prog *p, uint32_t flag)
{
    LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = flag);
    int fd = bpf_link_create(p->prog_fd, p->ifindex, BPF_XDP, &lo);
    if (fd >= 0) {
        p->link_fd = fd;
        p->xdp_flags = flag;
        return 0;
    }
    int link_err = -errno;
    if (link_err != -EINVAL)   /* links exist; the mode or the device said no */
        return link_err;
    int r = bpf_xdp_attach(p->ifindex, p->prog_fd, flag | XDP_FLAGS_UPDATE_IF_NOEXIST, NULL);
    if (r)
        return r;
    p->link_fd = -1;
    p->xdp_flags = flag;
    return 0;
}

struct sp_xdp_prog *sp_xdp_prog_attach_file(const char *obj_path, const char *ifname,
                                            uint16_t port, bool tcp, unsigned stages,
                                            enum sp_xdp_attach_mode mode, char *err,
                                            size_t errlen)
{
    uint8_t steer_tcp = tcp, answer_here = (stages & SP_XDP_ANSWER) != 0,
            reflect = (stages & SP_XDP_REFLECT) != 0;
    if (!ifname || !*ifname || strlen(ifname) >= IF_NAMESIZE) {
        sp_xdp_set_err(err, errlen, "AF_XDP: bad interface name");
        return NULL;
    }
    if (mode != SP_XDP_ATTACH_AUTO && mode != SP_XDP_ATTACH_NATIVE &&
        mode != SP_XDP_ATTACH_GENERIC) {
        sp_xdp_set_err(err, errlen, "AF_XDP: bad attach mode %d", (int)mode);
        return NULL;
    }
    int ifindex = (int)if_nametoindex(ifname);
    if (!ifindex) {
        sp_xdp_set_err(err, errlen, "AF_XDP: interface %s not found", ifname);
        return NULL;
    }
    struct sp_xdp_prog *p = calloc(1, sizeof(*p));
    if (!p) {
        sp_xdp_set_err(err, errlen, "AF_XDP: out of memory");
        return NULL;
    }
    snprintf(p->ifname, sizeof(p->ifname), "%s", ifname);
    p->ifindex = ifindex;
    p->link_fd = -1;
    p->answers_next_fd = -1;
    p->answer = answer_here;
    p->queues = count_queues(ifname);
    p->map_entries = p->queues > SP_XDP_MAP_MIN ? p->queues : SP_XDP_MAP_MIN;

    struct sp_xdp_quiet q = sp_xdp_quiet_begin();
    LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = SP_XDP_PROG_NAME);
    if (obj_path) {
        p->obj = bpf_object__open_file(obj_path, &oo);
    } else {
#ifdef SP_XDP_BPF_OBJ
        p->obj = bpf_object__open_mem(sp_xdp_steer_obj,
                                      (size_t)(sp_xdp_steer_obj_end - sp_xdp_steer_obj), &oo);
#else
        sp_xdp_quiet_end(q);
        sp_xdp_set_err(err, errlen, "AF_XDP: no embedded BPF object (built without SP_XDP_BPF_OBJ)");
        free(p);
        return NULL;
#endif
    }
    if (!p->obj) {
        int e = errno;
        sp_xdp_quiet_end(q);
        sp_xdp_set_err(err, errlen, "AF_XDP: cannot open BPF object %s: %s",
                obj_path ? obj_path : "(embedded)", strerror(e));
        free(p);
        return NULL;
    }
    struct bpf_program *prog = bpf_object__find_program_by_name(p->obj, SP_XDP_PROG_NAME);
    struct bpf_map *map = bpf_object__find_map_by_name(p->obj, SP_XDP_MAP_NAME);
    if (!prog || !map || sp_xdp_set_rodata(p->obj, SP_XDP_PORT_VAR, &port, sizeof(port)) ||
        sp_xdp_set_rodata(p->obj, SP_XDP_TCP_VAR, &steer_tcp, sizeof(steer_tcp)) ||
        sp_xdp_set_rodata(p->obj, SP_XDP_ANSWER_VAR, &answer_here, sizeof(answer_here)) ||
        sp_xdp_set_rodata(p->obj, SP_XDP_REFLECT_VAR, &reflect, sizeof(reflect)) ||
        bpf_map__set_max_entries(map, p->map_entries)) {
        sp_xdp_quiet_end(q);
        sp_xdp_set_err(err, errlen, "AF_XDP: BPF object is not stormpy's steer program "
                             "(no %s, %s, %s, %s, %s or %s)", SP_XDP_PROG_NAME, SP_XDP_MAP_NAME,
                SP_XDP_PORT_VAR, SP_XDP_TCP_VAR, SP_XDP_ANSWER_VAR, SP_XDP_REFLECT_VAR);
        goto fail;
    }
    int r = bpf_object__load(p->obj);
    if (r) {
        sp_xdp_quiet_end(q);
        if (sp_xdp_is_perm(-r) && !strstr(sp_xdp_lib_msg, "verifier"))
            sp_xdp_set_err(err, errlen, SP_XDP_PERM_MSG);
        else
            sp_xdp_set_err(err, errlen, "AF_XDP: kernel refused the XDP program: %s (%s)",
                    strerror(-r), sp_xdp_lib_msg);
        goto fail;
    }
    p->prog_fd = bpf_program__fd(prog);
    p->map_fd = bpf_map__fd(map);
    if (sp_xdp_answers_find(p)) {
        sp_xdp_quiet_end(q);
        sp_xdp_set_err(err, errlen, "AF_XDP: BPF object has no answer maps");
        goto fail;
    }

    if (clear_stale(p, err, errlen)) {
        sp_xdp_quiet_end(q);
        goto fail;
    }
    uint32_t modes[2];
    int nmodes = 0;
    if (mode != SP_XDP_ATTACH_GENERIC)
        modes[nmodes++] = XDP_FLAGS_DRV_MODE;
    if (mode != SP_XDP_ATTACH_NATIVE)
        modes[nmodes++] = XDP_FLAGS_SKB_MODE;
    r = -EINVAL;
    for (int i = 0; i < nmodes; i++) {
        r = attach_mode(p, modes[i]);
        if (r == 0 || r == -EBUSY || r == -EEXIST || sp_xdp_is_perm(-r))
            break;   /* done, or the next mode would fail the same way */
    }
    sp_xdp_quiet_end(q);
    if (r) {
        if (sp_xdp_is_perm(-r))
            sp_xdp_set_err(err, errlen, SP_XDP_PERM_MSG);
        else if (r == -EBUSY || r == -EEXIST)
            sp_xdp_set_err(err, errlen, "AF_XDP: %s got another XDP program meanwhile; not replacing it",
                    p->ifname);
        else
            sp_xdp_set_err(err, errlen, "AF_XDP: kernel refused to attach XDP to %s (%s mode): %s",
                    p->ifname, mode == SP_XDP_ATTACH_NATIVE ? "native" : "generic",
                    strerror(-r));
        goto fail;
    }
    return p;

fail:
    bpf_object__close(p->obj);
    free(p);
    return NULL;
}

struct sp_xdp_prog *sp_xdp_prog_attach(const char *ifname, uint16_t port, bool tcp, unsigned stages,
                                       enum sp_xdp_attach_mode mode, char *err, size_t errlen)
{
    return sp_xdp_prog_attach_file(NULL, ifname, port, tcp, stages, mode, err, errlen);
}

void sp_xdp_prog_detach(struct sp_xdp_prog *p)
{
    if (!p)
        return;
    struct sp_xdp_quiet q = sp_xdp_quiet_begin();
    if (p->link_fd >= 0) {
        bpf_link_detach(p->link_fd);   /* even if a forked child still holds the fd */
        close(p->link_fd);
    } else {
        /* only if it is still ours: XDP_FLAGS_REPLACE with our program as the old one */
        LIBBPF_OPTS(bpf_xdp_attach_opts, o, .old_prog_fd = p->prog_fd);
        bpf_xdp_detach(p->ifindex, p->xdp_flags, &o);
    }
    sp_xdp_answers_close(p);
    bpf_object__close(p->obj);
    sp_xdp_quiet_end(q);
    free(p);
}

enum sp_xdp_attach_mode sp_xdp_prog_mode(const struct sp_xdp_prog *p)
{
    return p->xdp_flags == XDP_FLAGS_DRV_MODE ? SP_XDP_ATTACH_NATIVE : SP_XDP_ATTACH_GENERIC;
}

int sp_xdp_prog_uses_link(const struct sp_xdp_prog *p)
{
    return p->link_fd >= 0;
}

unsigned sp_xdp_prog_queues(const struct sp_xdp_prog *p)
{
    return p->queues;
}

#else
/* Built without -DSP_WITH_XDP (no libxdp): the backend is left out. */
typedef int sp_xdp_program_not_built;
#endif
