/* The AF_XDP frame backend. See xdp_io.h for the design and the reasons. */
#ifdef SP_WITH_XDP

#include "stormpy/xdp_io.h"
#include "stormpy/precopy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <linux/sockios.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#define SP_XDP_PROG_NAME "stormpy_steer"   /* the SEC("xdp") function in steer.bpf.c */
#define SP_XDP_MAP_NAME "sp_xsks"
#define SP_XDP_PORT_VAR "sp_port"
#define SP_XDP_MAP_MIN 64                  /* XSKMAP entries even when fewer queues */
#define SP_XDP_KICK_MAX 16                 /* sendto() calls per kick, at most */

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

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int is_perm(int e)
{
    return e == EPERM || e == EACCES;
}

#define SP_XDP_PERM_MSG "AF_XDP: needs CAP_NET_ADMIN/CAP_NET_RAW/CAP_BPF (run as root)"

/* libbpf and libxdp print warnings to stderr by default. While this file calls them,
 * the first warning is kept instead (it names the cause; later ones repeat it). */
static char lib_msg[200];

static void keep_first(const char *fmt, va_list ap)
{
    if (lib_msg[0])
        return;
    vsnprintf(lib_msg, sizeof(lib_msg), fmt, ap);
    char *nl = strchr(lib_msg, '\n');
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

struct quiet {
    libbpf_print_fn_t bpf;
    libxdp_print_fn_t xdp;
};

static struct quiet quiet_begin(void)
{
    lib_msg[0] = '\0';
    struct quiet q = {libbpf_set_print(capture_libbpf), libxdp_set_print(capture_libxdp)};
    return q;
}

static void quiet_end(struct quiet q)
{
    libbpf_set_print(q.bpf);
    libxdp_set_print(q.xdp);
}

/* ---- the program ------------------------------------------------------------------ */

struct sp_xdp_prog {
    char ifname[IF_NAMESIZE];
    int ifindex;
    unsigned queues;          /* receive queues, 0 when unknown */
    uint32_t map_entries;
    struct bpf_object *obj;
    int prog_fd, map_fd;
    int link_fd;              /* -1: attached through netlink */
    uint32_t xdp_flags;       /* XDP_FLAGS_DRV_MODE or XDP_FLAGS_SKB_MODE */
};

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

/* Write the port into .rodata's initial value, at the offset BTF gives for sp_port. */
static int set_port(struct bpf_object *obj, uint16_t port)
{
    struct bpf_map *map, *rodata = NULL;
    bpf_object__for_each_map(map, obj) {
        const char *name = bpf_map__name(map);
        size_t len = strlen(name);
        if (len >= 7 && strcmp(name + len - 7, ".rodata") == 0)
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
        if (strcmp(btf__name_by_offset(btf, var->name_off), SP_XDP_PORT_VAR) != 0)
            continue;
        size_t size;
        const void *init = bpf_map__initial_value(rodata, &size);
        unsigned char buf[256];
        if (!init || vs[i].size != sizeof(port) || size > sizeof(buf) ||
            vs[i].offset + sizeof(port) > size)
            return -EINVAL;
        memcpy(buf, init, size);
        memcpy(buf + vs[i].offset, &port, sizeof(port));
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
        if (is_perm(-r))
            set_err(err, errlen, SP_XDP_PERM_MSG);
        else
            set_err(err, errlen, "AF_XDP: cannot query XDP on %s: %s", p->ifname, strerror(-r));
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
            if (is_perm(-r))
                set_err(err, errlen, SP_XDP_PERM_MSG);
            else
                set_err(err, errlen, "AF_XDP: cannot inspect XDP program %u on %s: %s",
                        attached[i].id, p->ifname, strerror(-r));
            return -1;
        }
        if (strcmp(name, SP_XDP_PROG_NAME) != 0) {
            set_err(err, errlen,
                    "AF_XDP: %s already has XDP program '%s' (id %u); not replacing it",
                    p->ifname, name, attached[i].id);
            return -1;
        }
        int fd = bpf_prog_get_fd_by_id(attached[i].id);
        if (fd < 0) {
            if (errno == ENOENT)
                continue;   /* gone in the meantime */
            set_err(err, errlen, "AF_XDP: cannot open stale XDP program %u: %s",
                    attached[i].id, strerror(errno));
            return -1;
        }
        LIBBPF_OPTS(bpf_xdp_attach_opts, o, .old_prog_fd = fd);
        r = bpf_xdp_detach(p->ifindex, attached[i].flag, &o);
        close(fd);
        if (r == -EBUSY) {
            set_err(err, errlen, "AF_XDP: %s is served by another running stormpy (XDP program %u)",
                    p->ifname, attached[i].id);
            return -1;
        }
        if (r && r != -EEXIST && r != -ENOENT) {   /* replaced or gone meanwhile: fine */
            set_err(err, errlen, "AF_XDP: cannot detach stale stormpy program %u from %s: %s",
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
                                            uint16_t port, enum sp_xdp_attach_mode mode,
                                            char *err, size_t errlen)
{
    if (!ifname || !*ifname || strlen(ifname) >= IF_NAMESIZE) {
        set_err(err, errlen, "AF_XDP: bad interface name");
        return NULL;
    }
    if (mode != SP_XDP_ATTACH_AUTO && mode != SP_XDP_ATTACH_NATIVE &&
        mode != SP_XDP_ATTACH_GENERIC) {
        set_err(err, errlen, "AF_XDP: bad attach mode %d", (int)mode);
        return NULL;
    }
    int ifindex = (int)if_nametoindex(ifname);
    if (!ifindex) {
        set_err(err, errlen, "AF_XDP: interface %s not found", ifname);
        return NULL;
    }
    struct sp_xdp_prog *p = calloc(1, sizeof(*p));
    if (!p) {
        set_err(err, errlen, "AF_XDP: out of memory");
        return NULL;
    }
    snprintf(p->ifname, sizeof(p->ifname), "%s", ifname);
    p->ifindex = ifindex;
    p->link_fd = -1;
    p->queues = count_queues(ifname);
    p->map_entries = p->queues > SP_XDP_MAP_MIN ? p->queues : SP_XDP_MAP_MIN;

    struct quiet q = quiet_begin();
    LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = SP_XDP_PROG_NAME);
    if (obj_path) {
        p->obj = bpf_object__open_file(obj_path, &oo);
    } else {
#ifdef SP_XDP_BPF_OBJ
        p->obj = bpf_object__open_mem(sp_xdp_steer_obj,
                                      (size_t)(sp_xdp_steer_obj_end - sp_xdp_steer_obj), &oo);
#else
        quiet_end(q);
        set_err(err, errlen, "AF_XDP: no embedded BPF object (built without SP_XDP_BPF_OBJ)");
        free(p);
        return NULL;
#endif
    }
    if (!p->obj) {
        int e = errno;
        quiet_end(q);
        set_err(err, errlen, "AF_XDP: cannot open BPF object %s: %s",
                obj_path ? obj_path : "(embedded)", strerror(e));
        free(p);
        return NULL;
    }
    struct bpf_program *prog = bpf_object__find_program_by_name(p->obj, SP_XDP_PROG_NAME);
    struct bpf_map *map = bpf_object__find_map_by_name(p->obj, SP_XDP_MAP_NAME);
    if (!prog || !map || set_port(p->obj, port) ||
        bpf_map__set_max_entries(map, p->map_entries)) {
        quiet_end(q);
        set_err(err, errlen, "AF_XDP: BPF object is not stormpy's steer program "
                             "(no %s, %s or %s)", SP_XDP_PROG_NAME, SP_XDP_MAP_NAME,
                SP_XDP_PORT_VAR);
        goto fail;
    }
    int r = bpf_object__load(p->obj);
    if (r) {
        quiet_end(q);
        if (is_perm(-r) && !strstr(lib_msg, "verifier"))
            set_err(err, errlen, SP_XDP_PERM_MSG);
        else
            set_err(err, errlen, "AF_XDP: kernel refused the XDP program: %s (%s)",
                    strerror(-r), lib_msg);
        goto fail;
    }
    p->prog_fd = bpf_program__fd(prog);
    p->map_fd = bpf_map__fd(map);

    if (clear_stale(p, err, errlen)) {
        quiet_end(q);
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
        if (r == 0 || r == -EBUSY || r == -EEXIST || is_perm(-r))
            break;   /* done, or the next mode would fail the same way */
    }
    quiet_end(q);
    if (r) {
        if (is_perm(-r))
            set_err(err, errlen, SP_XDP_PERM_MSG);
        else if (r == -EBUSY || r == -EEXIST)
            set_err(err, errlen, "AF_XDP: %s got another XDP program meanwhile; not replacing it",
                    p->ifname);
        else
            set_err(err, errlen, "AF_XDP: kernel refused to attach XDP to %s (%s mode): %s",
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

struct sp_xdp_prog *sp_xdp_prog_attach(const char *ifname, uint16_t port,
                                       enum sp_xdp_attach_mode mode, char *err, size_t errlen)
{
    return sp_xdp_prog_attach_file(NULL, ifname, port, mode, err, errlen);
}

void sp_xdp_prog_detach(struct sp_xdp_prog *p)
{
    if (!p)
        return;
    struct quiet q = quiet_begin();
    if (p->link_fd >= 0) {
        bpf_link_detach(p->link_fd);   /* even if a forked child still holds the fd */
        close(p->link_fd);
    } else {
        /* only if it is still ours: XDP_FLAGS_REPLACE with our program as the old one */
        LIBBPF_OPTS(bpf_xdp_attach_opts, o, .old_prog_fd = p->prog_fd);
        bpf_xdp_detach(p->ifindex, p->xdp_flags, &o);
    }
    bpf_object__close(p->obj);
    quiet_end(q);
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

/* ---- one queue -------------------------------------------------------------------- */

struct xdp_io {
    struct sp_io io;
    struct xsk_ring_cons rx, comp;
    struct xsk_ring_prod tx, fill;
    struct xsk_umem *umem;
    struct xsk_socket *xsk;
    struct sp_xdp_prog *prog;
    uint32_t queue_id;
    int fd;
    int busy, timeout_ms;
    uint8_t *area;
    uint64_t area_len;        /* RX [0, rx_end), TX [rx_end, tx_end), pool [tx_end, area_len) */
    uint64_t rx_end;
    uint64_t tx_end;
    uint32_t npool;           /* precopy frames in the UMEM (cfg.pool_frames) */
    struct sp_precopy *pool;
    uint64_t frame_mask;      /* ~(frame_size - 1) */
    uint32_t frame_size;
    uint32_t ntx;             /* TX frames */
    uint32_t nfree;           /* TX frames on the free stack */
    uint32_t nstash;          /* RX frames waiting for room in the fill ring */
    uint64_t *free_tx;        /* [ntx] */
    uint64_t *stash;          /* [fill ring size] */
    struct sp_xdp_stats stats;
};

/* RX frames the fill ring had no room for (it always has: see xdp_io.h) go back now. */
static void flush_stash(struct xdp_io *x)
{
    uint32_t idx;
    uint32_t n = xsk_prod_nb_free(&x->fill, x->nstash);
    if (n > x->nstash)
        n = x->nstash;
    if (!n || xsk_ring_prod__reserve(&x->fill, n, &idx) != n)
        return;
    for (uint32_t i = 0; i < n; i++)
        *xsk_ring_prod__fill_addr(&x->fill, idx + i) = x->stash[--x->nstash];
    xsk_ring_prod__submit(&x->fill, n);
}

static void wake_rx(struct xdp_io *x)
{
    /* zero-copy drivers stop taking fill-ring frames until woken */
    if (xsk_ring_prod__needs_wakeup(&x->fill)) {
        recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
        x->stats.rx_wakeups++;
    }
}

static uint32_t tx_unsent(const struct xdp_io *x)
{
    return *x->tx.producer - __atomic_load_n(x->tx.consumer, __ATOMIC_ACQUIRE);
}

/* Make the kernel send what is on the TX ring, when the ring says it needs telling.
 * Copy mode sends a limited number per sendto() and answers EAGAIN for the rest, so
 * it is called again while that makes progress; zero-copy only needs waking once. */
static void kick_tx(struct xdp_io *x)
{
    for (int i = 0; i < SP_XDP_KICK_MAX; i++) {
        uint32_t before = tx_unsent(x);
        if (!before || !xsk_ring_prod__needs_wakeup(&x->tx))
            return;
        x->io.counters.kicks++;
        if (sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0) {
            if (x->stats.zerocopy)
                return;
        } else if (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS && errno != EINTR) {
            x->stats.tx_kick_errors++;   /* ENETDOWN, ENXIO: the device went away */
            return;
        }
        if (x->stats.zerocopy || tx_unsent(x) >= before)
            return;   /* no progress: the next batch or idle poll tries again */
    }
}

static unsigned xdp_rx_burst(struct sp_io *io, struct sp_frame *rx, unsigned max)
{
    struct xdp_io *x = (struct xdp_io *)io;
    uint32_t idx;
    if (x->nstash)
        flush_stash(x);
    unsigned n = xsk_ring_cons__peek(&x->rx, max, &idx);
    if (n == 0) {
        if (tx_unsent(x))
            kick_tx(x);
        if (x->busy) {
            wake_rx(x);
            return 0;
        }
        /* poll() also wakes the driver (zero-copy) and drives TX (copy mode) */
        struct pollfd pfd = {.fd = x->fd, .events = POLLIN};
        if (poll(&pfd, 1, x->timeout_ms) <= 0)
            return 0;
        n = xsk_ring_cons__peek(&x->rx, max, &idx);
        if (n == 0)
            return 0;
    }
    unsigned got = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct xdp_desc *d = xsk_ring_cons__rx_desc(&x->rx, idx + i);
        uint64_t addr = d->addr;
        uint32_t len = d->len;
        uint64_t base = addr & x->frame_mask;
        if (base >= x->rx_end || len == 0 || addr - base + len > x->frame_size) {
            x->stats.bad_desc++;
            if (base < x->rx_end && x->nstash < x->rx_end / x->frame_size)
                x->stash[x->nstash++] = base;   /* our frame, bad length: reuse it */
            continue;
        }
        rx[got].data = x->area + addr;
        rx[got].len = len;
        rx[got].cap = len;
        rx[got].id = base;
        got++;
    }
    /* The descriptors are copied out, so the slots go back now; the frames stay
     * ours until rx_release. */
    xsk_ring_cons__release(&x->rx, n);
    io->counters.rx_frames += got;
    return got;
}

static void xdp_reclaim(struct sp_io *io)
{
    struct xdp_io *x = (struct xdp_io *)io;
    uint32_t idx;
    unsigned n = xsk_ring_cons__peek(&x->comp, x->ntx, &idx);
    for (unsigned i = 0; i < n; i++) {
        uint64_t base = *xsk_ring_cons__comp_addr(&x->comp, idx + i) & x->frame_mask;
        if (base >= x->tx_end && base < x->area_len && x->pool) {
            sp_precopy_complete(x->pool, (uint32_t)((base - x->tx_end) / x->frame_size));
            continue;   /* a copy the NIC is done with: it may be rewritten now */
        }
        if (base < x->rx_end || base >= x->tx_end || x->nfree == x->ntx) {
            x->stats.bad_desc++;
            continue;
        }
        x->free_tx[x->nfree++] = base;
    }
    if (n)
        xsk_ring_cons__release(&x->comp, n);
}

static unsigned xdp_tx_reserve(struct sp_io *io, struct sp_frame *tx, unsigned n)
{
    struct xdp_io *x = (struct xdp_io *)io;
    uint32_t slots = xsk_prod_nb_free(&x->tx, n);
    if (n > slots)
        n = slots;
    if (n > x->nfree)
        n = x->nfree;
    for (unsigned i = 0; i < n; i++) {
        uint64_t addr = x->free_tx[--x->nfree];
        tx[i].data = x->area + addr;
        tx[i].cap = x->frame_size;
        tx[i].len = 0;
        tx[i].id = addr;
        tx[i].pool = -1;
    }
    return n;
}

static void xdp_tx_submit(struct sp_io *io, struct sp_frame *tx, unsigned used,
                          struct sp_frame *unused, unsigned nunused)
{
    struct xdp_io *x = (struct xdp_io *)io;
    uint32_t idx;
    /* tx_reserve saw at least as many free slots as frames, pool copies included,
     * and only this thread produces */
    if (used && xsk_ring_prod__reserve(&x->tx, used, &idx) == used) {
        for (unsigned i = 0; i < used; i++) {
            struct xdp_desc *d = xsk_ring_prod__tx_desc(&x->tx, idx + i);
            d->addr = tx[i].id;
            d->len = tx[i].len;
            d->options = 0;
            io->counters.tx_bytes += tx[i].len;
        }
        xsk_ring_prod__submit(&x->tx, used);
        io->counters.tx_frames += used;
    } else if (used) {
        io->counters.tx_ring_full += used;   /* cannot happen; never lose the frames */
        for (unsigned i = 0; i < used; i++) {
            if (tx[i].pool >= 0)
                sp_precopy_complete(x->pool, (uint32_t)tx[i].pool);
            else
                x->free_tx[x->nfree++] = tx[i].id;
        }
    }
    for (unsigned i = 0; i < nunused; i++)
        x->free_tx[x->nfree++] = unused[i].id;
}

/* The copies live in the UMEM past the TX frames, so a TX descriptor can point at
 * them; the NIC (or the kernel, in copy mode) reads them in place. */
static int xdp_pool_open(struct sp_io *io, struct sp_precopy *pool, char *err, size_t errlen)
{
    struct xdp_io *x = (struct xdp_io *)io;
    unsigned n = sp_precopy_frames(pool);
    if (x->pool || n > x->npool) {
        set_err(err, errlen, "AF_XDP: %u pool frames asked, the UMEM has %u", n, x->npool);
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        uint64_t addr = x->tx_end + (uint64_t)i * x->frame_size;
        sp_precopy_set_frame(pool, i, x->area + addr, x->frame_size, addr);
    }
    x->pool = pool;
    return 0;
}

static void xdp_rx_release(struct sp_io *io, struct sp_frame *rx, unsigned n)
{
    struct xdp_io *x = (struct xdp_io *)io;
    uint32_t idx;
    if (!n)
        return;
    if (!x->nstash && xsk_ring_prod__reserve(&x->fill, n, &idx) == n) {
        for (unsigned i = 0; i < n; i++)
            *xsk_ring_prod__fill_addr(&x->fill, idx + i) = rx[i].id;
        xsk_ring_prod__submit(&x->fill, n);
    } else {
        for (unsigned i = 0; i < n; i++)
            x->stash[x->nstash++] = rx[i].id;
        flush_stash(x);
    }
    wake_rx(x);
}

static void xdp_kick(struct sp_io *io)
{
    kick_tx((struct xdp_io *)io);
}

static void xdp_close(struct sp_io *io)
{
    struct xdp_io *x = (struct xdp_io *)io;
    if (!x)
        return;
    struct quiet q = quiet_begin();
    if (x->xsk) {
        uint32_t key = x->queue_id;
        bpf_map_delete_elem(x->prog->map_fd, &key);   /* the kernel would too, on close */
        xsk_socket__delete(x->xsk);
    }
    if (x->umem)
        xsk_umem__delete(x->umem);
    quiet_end(q);
    if (x->area)
        munmap(x->area, x->area_len);
    free(x);
}

static const struct sp_io_ops xdp_ops = {
    .name = "af_xdp",
    .rx_burst = xdp_rx_burst,
    .reclaim = xdp_reclaim,
    .tx_reserve = xdp_tx_reserve,
    .tx_submit = xdp_tx_submit,
    .rx_release = xdp_rx_release,
    .kick = xdp_kick,
    .close = xdp_close,
    .pool_open = xdp_pool_open,
};

static int pow2(uint32_t v)
{
    return v && !(v & (v - 1));
}

/* One UMEM + socket in one copy mode. 0 or -errno; on failure nothing is left. */
static int bind_queue(struct xdp_io *x, const struct sp_xdp_config *c, int zerocopy,
                      const char **step)
{
    struct xsk_umem_config uc = {
        .fill_size = c->fill_size,
        .comp_size = c->comp_size,
        .frame_size = c->frame_size,
        .frame_headroom = 0,
        .flags = 0,
    };
    *step = "the UMEM";
    int r = xsk_umem__create(&x->umem, x->area, x->area_len, &x->fill, &x->comp, &uc);
    if (r) {
        x->umem = NULL;
        return r;
    }
    struct xsk_socket_config sc = {
        .rx_size = c->rx_size,
        .tx_size = c->tx_size,
        .libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,   /* our program, not libxdp's */
        .xdp_flags = 0,
        .bind_flags = (uint16_t)(XDP_USE_NEED_WAKEUP | (zerocopy ? XDP_ZEROCOPY : XDP_COPY)),
    };
    *step = zerocopy ? "zero-copy" : "copy mode";
    r = xsk_socket__create(&x->xsk, x->prog->ifname, x->queue_id, x->umem, &x->rx, &x->tx, &sc);
    if (r) {
        x->xsk = NULL;
        xsk_umem__delete(x->umem);
        x->umem = NULL;
        return r;
    }
    return 0;
}

struct sp_io *sp_xdp_io_open(struct sp_xdp_prog *prog, uint32_t queue_id,
                             const struct sp_xdp_config *cfg, char *err, size_t errlen)
{
    struct sp_xdp_config c = {0};
    if (cfg)
        c = *cfg;
    if (!prog) {
        set_err(err, errlen, "AF_XDP: no program attached");
        return NULL;
    }
    if (!c.frame_size)
        c.frame_size = 2048;
    if (!c.rx_size)
        c.rx_size = XSK_RING_CONS__DEFAULT_NUM_DESCS;
    if (!c.fill_size)
        c.fill_size = 2 * c.rx_size;
    if (!c.tx_size)
        c.tx_size = XSK_RING_PROD__DEFAULT_NUM_DESCS;
    if (!c.comp_size)
        c.comp_size = c.tx_size;
    if (!c.poll_timeout_ms)
        c.poll_timeout_ms = 100;
    if ((c.frame_size != 2048 && c.frame_size != 4096) || !pow2(c.rx_size) ||
        !pow2(c.fill_size) || !pow2(c.tx_size) || !pow2(c.comp_size) ||
        c.fill_size < c.rx_size || c.comp_size < c.tx_size || c.fill_size > (1u << 20) ||
        c.tx_size > (1u << 20) || c.pool_frames > (1u << 20) || c.poll_timeout_ms < 0 || c.copy_mode < SP_XDP_COPY_AUTO ||
        c.copy_mode > SP_XDP_ZEROCOPY) {
        set_err(err, errlen, "AF_XDP: bad configuration (frame size 2048/4096, ring sizes "
                             "powers of two, fill >= rx, completion >= tx)");
        return NULL;
    }
    if (prog->queues && queue_id >= prog->queues) {
        set_err(err, errlen, "AF_XDP: %s has no queue %u (it has %u)", prog->ifname, queue_id,
                prog->queues);
        return NULL;
    }
    if (queue_id >= prog->map_entries) {
        set_err(err, errlen, "AF_XDP: queue %u is beyond the program's %u", queue_id,
                prog->map_entries);
        return NULL;
    }

    struct xdp_io *x = calloc(1, sizeof(*x) + sizeof(uint64_t) * ((size_t)c.tx_size + c.fill_size));
    if (!x) {
        set_err(err, errlen, "AF_XDP: out of memory");
        return NULL;
    }
    x->io.ops = &xdp_ops;
    x->prog = prog;
    x->queue_id = queue_id;
    x->busy = c.poll_busy != 0;
    x->timeout_ms = c.poll_timeout_ms;
    x->frame_size = c.frame_size;
    x->frame_mask = ~(uint64_t)(c.frame_size - 1);
    x->ntx = c.tx_size;
    x->rx_end = (uint64_t)c.fill_size * c.frame_size;
    x->tx_end = x->rx_end + (uint64_t)c.tx_size * c.frame_size;
    x->npool = c.pool_frames;
    x->area_len = x->tx_end + (uint64_t)c.pool_frames * c.frame_size;
    x->free_tx = (uint64_t *)(x + 1);
    x->stash = x->free_tx + c.tx_size;
    x->fd = -1;

    void *area = mmap(NULL, x->area_len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (area == MAP_FAILED) {
        set_err(err, errlen, "AF_XDP: cannot map %llu MiB for the UMEM: %s",
                (unsigned long long)(x->area_len >> 20), strerror(errno));
        free(x);
        return NULL;
    }
    x->area = area;

    int tries[2], ntries = 0;
    if (c.copy_mode != SP_XDP_COPY_ALWAYS)
        tries[ntries++] = 1;
    if (c.copy_mode != SP_XDP_ZEROCOPY)
        tries[ntries++] = 0;
    struct quiet q = quiet_begin();
    int r = -EINVAL, zc = 0;
    const char *step = "";
    for (int i = 0; i < ntries; i++) {
        zc = tries[i];
        r = bind_queue(x, &c, zc, &step);
        if (r == 0 || is_perm(-r) || r == -EBUSY)
            break;   /* done, or copy mode would fail the same way */
    }
    quiet_end(q);
    if (r) {
        if (is_perm(-r))
            set_err(err, errlen, SP_XDP_PERM_MSG);
        else if (r == -EBUSY)
            set_err(err, errlen, "AF_XDP: queue %u of %s is in use by another AF_XDP socket",
                    queue_id, prog->ifname);
        else if (r == -ENOBUFS || r == -ENOMEM)
            set_err(err, errlen, "AF_XDP: kernel refused %s on %s queue %u: %s "
                    "(RLIMIT_MEMLOCK? CAP_IPC_LOCK lifts it)", step, prog->ifname, queue_id,
                    strerror(-r));
        else
            set_err(err, errlen, "AF_XDP: kernel refused %s on %s queue %u: %s", step,
                    prog->ifname, queue_id, strerror(-r));
        xdp_close(&x->io);
        return NULL;
    }
    x->fd = xsk_socket__fd(x->xsk);
    fcntl(x->fd, F_SETFD, FD_CLOEXEC);   /* libxdp 1.3 does not: keep it from exec'd children */
    struct xdp_options opt = {0};
    socklen_t optlen = sizeof(opt);
    if (getsockopt(x->fd, SOL_XDP, XDP_OPTIONS, &opt, &optlen) == 0)
        x->stats.zerocopy = (opt.flags & XDP_OPTIONS_ZEROCOPY) != 0;
    else
        x->stats.zerocopy = zc;   /* a kernel before 5.3: trust the bind flag */

    /* every RX frame into the fill ring (it has exactly that many slots) */
    uint32_t idx;
    if (xsk_ring_prod__reserve(&x->fill, c.fill_size, &idx) != c.fill_size) {
        set_err(err, errlen, "AF_XDP: fill ring of %s queue %u is not empty", prog->ifname,
                queue_id);
        xdp_close(&x->io);
        return NULL;
    }
    for (uint32_t i = 0; i < c.fill_size; i++)
        *xsk_ring_prod__fill_addr(&x->fill, idx + i) = (uint64_t)i * c.frame_size;
    xsk_ring_prod__submit(&x->fill, c.fill_size);
    for (uint32_t i = 0; i < c.tx_size; i++)   /* low addresses on top of the stack */
        x->free_tx[i] = x->rx_end + (uint64_t)(c.tx_size - 1 - i) * c.frame_size;
    x->nfree = c.tx_size;

    /* last: the program starts redirecting this queue only now */
    r = bpf_map_update_elem(prog->map_fd, &queue_id, &x->fd, BPF_ANY);
    if (r) {
        r = errno;
        set_err(err, errlen, "AF_XDP: kernel refused to register queue %u of %s: %s", queue_id,
                prog->ifname, strerror(r));
        xdp_close(&x->io);
        return NULL;
    }
    return &x->io;
}

int sp_xdp_io_stats(struct sp_io *io, struct sp_xdp_stats *s)
{
    struct xdp_io *x = (struct xdp_io *)io;
    *s = x->stats;
    struct xdp_statistics k;
    socklen_t len = sizeof(k);
    memset(&k, 0, sizeof(k));
    if (getsockopt(x->fd, SOL_XDP, XDP_STATISTICS, &k, &len))
        return -1;
    s->rx_dropped = k.rx_dropped;
    s->rx_invalid_descs = k.rx_invalid_descs;
    s->tx_invalid_descs = k.tx_invalid_descs;
    s->rx_ring_full = k.rx_ring_full;
    s->rx_fill_ring_empty_descs = k.rx_fill_ring_empty_descs;
    s->tx_ring_empty_descs = k.tx_ring_empty_descs;
    return 0;
}

#else
/* Built without -DSP_WITH_XDP (no libxdp): the backend is left out. */
typedef int sp_xdp_not_built;
#endif
