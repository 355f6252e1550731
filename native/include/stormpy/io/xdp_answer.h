/*
 * Answers in the driver: the layouts the XDP program (native/bpf/answer.h) and its
 * loader (native/io/xdp_answer.c) share. With answering on, the steer program looks
 * an IPv4 UDP query's (name, type) up in a hash map of prepackaged answers and, on a
 * hit, turns the frame into its reply in place and returns XDP_TX: no socket, no
 * copy, no wake-up. Every query it does not answer goes to the AF_XDP socket as
 * before, so the bytes a client gets are the same whichever side answered: the
 * entries are the C fast path's own replies, rendered at load (stormpy/dns/xdp.py).
 *
 *   sp_xdp_answers_config(prog, &cfg);          the interface's MAC and addresses
 *   sp_xdp_answers_begin(prog, entries);        a new, empty generation
 *   sp_xdp_answers_add(prog, keys, values, n);  ... filled
 *   sp_xdp_answers_publish(prog);               swapped in whole (map in map)
 *
 * Why it is built this way:
 *  - One generation is one hash map, and the program reaches it through a one-slot
 *    array of maps read once per packet: a reload fills the next map while the old
 *    one serves, then swaps the slot. A query never sees half of two zones.
 *  - The key is the lower-cased wire name, zero-padded, with the type: the program
 *    builds it in the walk that checks the name's labels. The client's question stays
 *    where it is in the frame, so its case (0x20) comes back as sent.
 *  - The value holds the sections after the question, the OPT record after them for
 *    a query with EDNS, and the checksum sums of both: compression pointers into the
 *    question still point at offset 12, and the reply's UDP checksum is composed
 *    from the stored sums and the question's, never summed over the reply.
 *  - Only what is certain is answered there: a plain QUERY, class IN, one question,
 *    no other records but an OPT of version 0 with DO clear, its options well-formed
 *    (at most 8, 64 bytes; the workers answer none of them, so neither does the
 *    driver: a COOKIE gets the reply a query without it gets), a checksum that
 *    verifies, an untagged IPv4 frame to one of the interface's addresses from a
 *    source the fast path would answer. The rest goes up.
 */
#ifndef STORMPY_IO_XDP_ANSWER_H
#define STORMPY_IO_XDP_ANSWER_H

#include <linux/types.h>

#define SP_XDP_NAME_MAX 255     /* a wire name, root label included */
#define SP_XDP_TAIL_MAX 512     /* the sections after the question, OPT included */
#define SP_XDP_ADDRS 8          /* IPv4 addresses answered for */
#define SP_XDP_PATCHES 8        /* pointers into the question's suffix in a "below" answer */
#define SP_XDP_DEPTH 8          /* labels a name may have below the closest one held */

/* Two keys hold no query's type (the program sends a query of either type up):
 *  - (name, SP_XDP_OTHER_TYPES): the answer to every type the name does not hold (its
 *    NODATA, or the referral at a cut), or a stop entry;
 *  - (name, SP_XDP_BELOW): the answer to every name below it that the zone does not
 *    hold (NXDOMAIN, or a referral), or a stop entry (a wildcard, a DNAME).
 * Every name the zones hold, empty non-terminals included, has both: a query's closest
 * held ancestor is the first one found walking up, and a stop entry sends it up. */
#define SP_XDP_OTHER_TYPES 0
#define SP_XDP_BELOW 0xffff

struct sp_xdp_answer_key {
    __u16 qtype;                          /* network order */
    __u8 name[SP_XDP_NAME_MAX + 1];       /* lower-cased wire name, zero after it */
};

struct sp_xdp_answer {
    __u16 flags;          /* the reply's flags word, network order; RD and CD are the query's */
    __u16 an, ns, ar;     /* the section counts without EDNS, network order */
    __u16 plain_len;      /* tail bytes without EDNS */
    __u16 edns_len;       /* tail bytes with EDNS: the same, then the OPT record */
    __u32 plain_sum;      /* each one's ones-complement sum from an even offset, folded */
    __u32 edns_sum;
    /* A below entry, rendered for a child name of probe_len bytes: its compression
     * pointers into the question's suffix move with the asked name's length. */
    __u8 probe_len;
    __u8 npatch;
    __u16 patch[SP_XDP_PATCHES];   /* tail offsets of those pointers */
    __u8 tail[SP_XDP_TAIL_MAX];    /* both lengths 0: a stop entry */
    __u8 zone;            /* the zone slot a worker counts this answer under */
    __u8 unused;
};

struct sp_xdp_answer_config {
    __u8 mac[6];          /* the interface's: frames to another MAC go up */
    __u8 ttl;             /* the reply's IPv4 TTL, as the fast path's */
    __u8 naddrs;
    __u8 addrs[SP_XDP_ADDRS][4];
};

/* The driver's answers are counted as a worker counts its own (sp_dns_counters), so
 * the per-rcode and per-zone figures hold whichever side answered. */
#define SP_XDP_ZONE_SLOTS 64    /* SP_DNS_ZONE_SLOTS */
enum sp_xdp_answer_stat {
    SP_XDP_ANSWERED = 0,  /* replies sent from the driver */
    SP_XDP_PASSED = 1,    /* queries to the served port left to the socket */
    SP_XDP_RCODES = 2,    /* ... + rcode (0-15): the driver's replies by rcode */
    SP_XDP_ZONES = SP_XDP_RCODES + 16,   /* ... + zone slot: by zone */
    SP_XDP_STATS = SP_XDP_ZONES + SP_XDP_ZONE_SLOTS,
};

#ifndef __bpf__
#include <errno.h>
#include <stdint.h>

struct sp_xdp_prog;

#ifdef SP_WITH_XDP

/* Each returns 0, or -errno (-ENOTSUP: the program was attached without answering).
 * The interface's MAC, addresses and TTL; queries to other ones go up. */
int sp_xdp_answers_config(struct sp_xdp_prog *prog, const struct sp_xdp_answer_config *cfg);
/* A new, empty generation room for `entries` answers; one begun before is dropped. */
int sp_xdp_answers_begin(struct sp_xdp_prog *prog, uint32_t entries);
/* n answers into the generation begun (-ENOSPC past its room). */
int sp_xdp_answers_add(struct sp_xdp_prog *prog, const struct sp_xdp_answer_key *keys,
                       const struct sp_xdp_answer *values, uint32_t n);
/* The generation begun serves from the next packet on; the one before is freed once
 * no packet holds it. */
int sp_xdp_answers_publish(struct sp_xdp_prog *prog);
/* The counters summed over CPUs, indexed by enum sp_xdp_answer_stat. */
int sp_xdp_answers_stats(const struct sp_xdp_prog *prog, uint64_t out[SP_XDP_STATS]);
/* One frame through the loaded program (BPF_PROG_TEST_RUN): the verdict and the frame
 * as the program left it, for tests that compare it with the socket path. */
int sp_xdp_prog_test_run(const struct sp_xdp_prog *prog, const void *in, uint32_t len,
                         void *out, uint32_t *out_len, uint32_t *verdict);
/* The program's size after the verifier (xlated) and the instructions it checked. */
int sp_xdp_prog_instructions(const struct sp_xdp_prog *prog, uint32_t *xlated,
                             uint32_t *verified);
#else
/* Built without libxdp: there is no program to answer in. */
#define SP_XDP_ANSWER_STUB(decl) static inline decl { return -ENOTSUP; }
SP_XDP_ANSWER_STUB(int sp_xdp_answers_config(struct sp_xdp_prog *prog,
                                             const struct sp_xdp_answer_config *cfg))
SP_XDP_ANSWER_STUB(int sp_xdp_answers_begin(struct sp_xdp_prog *prog, uint32_t entries))
SP_XDP_ANSWER_STUB(int sp_xdp_answers_add(struct sp_xdp_prog *prog,
                                          const struct sp_xdp_answer_key *keys,
                                          const struct sp_xdp_answer *values, uint32_t n))
SP_XDP_ANSWER_STUB(int sp_xdp_answers_publish(struct sp_xdp_prog *prog))
SP_XDP_ANSWER_STUB(int sp_xdp_answers_stats(const struct sp_xdp_prog *prog,
                                            uint64_t out[SP_XDP_STATS]))
SP_XDP_ANSWER_STUB(int sp_xdp_prog_test_run(const struct sp_xdp_prog *prog, const void *in,
                                            uint32_t len, void *out, uint32_t *out_len,
                                            uint32_t *verdict))
SP_XDP_ANSWER_STUB(int sp_xdp_prog_instructions(const struct sp_xdp_prog *prog,
                                                uint32_t *xlated, uint32_t *verified))
#endif
#endif

#endif
