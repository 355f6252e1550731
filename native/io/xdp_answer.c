/* Answers in the driver: the maps of steer.bpf.c's answer stage. See
 * stormpy/io/xdp_answer.h. */
#ifdef SP_WITH_XDP

#include "xdp_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "stormpy/io/xdp_answer.h"

int sp_xdp_answers_find(struct sp_xdp_prog *p)
{
    struct bpf_map *answers = bpf_object__find_map_by_name(p->obj, "sp_answers");
    struct bpf_map *config = bpf_object__find_map_by_name(p->obj, "sp_answer_config");
    struct bpf_map *stats = bpf_object__find_map_by_name(p->obj, "sp_answer_stats");
    if (!answers || !config || !stats)
        return -1;
    p->answers_fd = bpf_map__fd(answers);
    p->answer_config_fd = bpf_map__fd(config);
    p->answer_stats_fd = bpf_map__fd(stats);
    p->answers_next_fd = -1;
    return 0;
}

void sp_xdp_answers_close(struct sp_xdp_prog *p)
{
    if (p->answers_next_fd >= 0)
        close(p->answers_next_fd);
    p->answers_next_fd = -1;
}

int sp_xdp_answers_config(struct sp_xdp_prog *p, const struct sp_xdp_answer_config *cfg)
{
    if (!p->answer)
        return -ENOTSUP;
    uint32_t zero = 0;
    return bpf_map_update_elem(p->answer_config_fd, &zero, cfg, BPF_ANY) ? -errno : 0;
}

int sp_xdp_answers_begin(struct sp_xdp_prog *p, uint32_t entries)
{
    if (!p->answer)
        return -ENOTSUP;
    sp_xdp_answers_close(p);
    LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_NO_PREALLOC);
    int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "sp_answer_gen", sizeof(struct sp_xdp_answer_key),
                            sizeof(struct sp_xdp_answer), entries ? entries : 1, &o);
    if (fd < 0)
        return -errno;
    p->answers_next_fd = fd;
    return 0;
}

int sp_xdp_answers_add(struct sp_xdp_prog *p, const struct sp_xdp_answer_key *keys,
                       const struct sp_xdp_answer *values, uint32_t n)
{
    if (p->answers_next_fd < 0)
        return -EINVAL;
    uint32_t count = n;
    LIBBPF_OPTS(bpf_map_batch_opts, o, .elem_flags = BPF_ANY);
    if (n == 0 || bpf_map_update_batch(p->answers_next_fd, keys, values, &count, &o) == 0)
        return 0;
    if (errno != EINVAL || count != 0)     /* E2BIG: past the generation's room */
        return errno == E2BIG ? -ENOSPC : -errno;
    /* a kernel without batch updates of hash maps: one at a time */
    for (uint32_t i = 0; i < n; i++)
        if (bpf_map_update_elem(p->answers_next_fd, &keys[i], &values[i], BPF_ANY))
            return errno == E2BIG ? -ENOSPC : -errno;
    return 0;
}

int sp_xdp_answers_publish(struct sp_xdp_prog *p)
{
    if (p->answers_next_fd < 0)
        return -EINVAL;
    uint32_t zero = 0;
    if (bpf_map_update_elem(p->answers_fd, &zero, &p->answers_next_fd, BPF_ANY))
        return -errno;
    /* the outer map holds the new generation now; the old one goes with its last
     * reference, after every packet that looked it up (RCU) */
    sp_xdp_answers_close(p);
    return 0;
}

int sp_xdp_answers_stats(const struct sp_xdp_prog *p, uint64_t out[SP_XDP_STATS])
{
    int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0)
        return cpus ? cpus : -EINVAL;
    uint64_t *per_cpu = calloc((size_t)cpus, sizeof(uint64_t));
    if (!per_cpu)
        return -ENOMEM;
    int r = 0;
    for (uint32_t k = 0; k < SP_XDP_STATS && !r; k++) {
        out[k] = 0;
        if (bpf_map_lookup_elem(p->answer_stats_fd, &k, per_cpu)) {
            r = -errno;
            break;
        }
        for (int c = 0; c < cpus; c++)
            out[k] += per_cpu[c];
    }
    free(per_cpu);
    return r;
}

int sp_xdp_prog_test_run(const struct sp_xdp_prog *p, const void *in, uint32_t len, void *out,
                         uint32_t *out_len, uint32_t *verdict)
{
    LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in, .data_size_in = len, .data_out = out,
                .data_size_out = *out_len, .repeat = 1);
    if (bpf_prog_test_run_opts(p->prog_fd, &o))
        return -errno;
    *out_len = o.data_size_out;
    *verdict = o.retval;
    return 0;
}

int sp_xdp_prog_instructions(const struct sp_xdp_prog *p, uint32_t *xlated, uint32_t *verified)
{
    struct bpf_prog_info info;
    uint32_t len = sizeof(info);
    memset(&info, 0, sizeof(info));
    if (bpf_obj_get_info_by_fd(p->prog_fd, &info, &len))
        return -errno;
    *xlated = info.xlated_prog_len / 8;
    *verified = info.verified_insns;
    return 0;
}

#else
typedef int sp_xdp_answer_not_built;
#endif
