/* One DNS query on the frame path. See answer.h. */
#include "stormpy/app/dns/answer.h"

#include "stormpy/app/dns/handoff.h"

/* Whether the server process takes q (handoff.h): out of line, as the rate limit. */
static __attribute__((noinline, cold)) bool
handed_off(const struct sp_dns_worker *d, const struct sp_dns_query *q, enum sp_dns_verdict verdict,
           const uint8_t *rx, const struct sp_frame_query *fq)
{
    return sp_dns_handoff_wanted(verdict, q) &&
           sp_dns_handoff_datagram(d->cfg.handoff_fd, fq->u.family, fq->u.src, fq->u.sport,
                                   fq->u.dst, rx + fq->l2 + fq->u.payload_off, fq->u.payload_len);
}

/* sp_dns_frame_reply() for the query q (the worker's, or one of a group's), with
 * room for dns_cap bytes of DNS message after the headers (sp_frame_payload_cap()). */
static inline size_t frame_reply(const struct sp_table *t, struct sp_dns_worker *d,
                                 struct sp_dns_query *q, const struct sp_frame_config *cfg,
                                 const uint8_t *rx, const struct sp_frame_query *fq,
                                 enum sp_dns_verdict verdict, const struct sp_response *r,
                                 uint8_t *tx, size_t dns_cap)
{
    if (!dns_cap)
        return 0;
    if (!r && d->cfg.handoff_fd && handed_off(d, q, verdict, rx, fq))
        return 0;                             /* the server process answers it */
    uint32_t sum;
    size_t n = sp_dns_answer_summed(t, &d->cfg, rx + fq->l2 + fq->u.payload_off,
                                    fq->u.payload_len, false, tx + fq->headers, dns_cap, q,
                                    verdict, r, &d->counters, &sum);
    if (!n)
        return 0;
    sp_frame_write_headers(cfg, rx, fq, tx, n, sum);
    return fq->headers + n;
}

size_t sp_dns_frame_reply(const struct sp_table *t, struct sp_dns_worker *d,
                          struct sp_dns_query *q, const struct sp_frame_config *cfg,
                          const uint8_t *rx, const struct sp_frame_query *fq,
                          enum sp_dns_verdict verdict, const struct sp_response *r,
                          uint8_t *tx, size_t cap)
{
    return frame_reply(t, d, q, cfg, rx, fq, verdict, r, tx, sp_frame_payload_cap(cfg, fq, cap));
}

/* Out of line: with rate limiting off (the default) the frame loops only test d->rrl,
 * and its code takes no registers from them. */
__attribute__((noinline)) bool
sp_dns_rate_limit(struct sp_dns_worker *d, uint8_t family, const uint8_t *src,
                  enum sp_dns_verdict *verdict, const struct sp_response *r)
{
    if (*verdict == SP_DNS_DROP)
        return true;                          /* nothing goes out anyway */
    /* the kind: the same prepackaged response, or the same error */
    uint64_t kind = r ? (uint64_t)(uintptr_t)r : (uint64_t)*verdict << 1 | 1;
    switch (sp_rrl_check(d->rrl, family, src, kind, d->now_s)) {
    case SP_RRL_SEND:
        return true;
    case SP_RRL_SLIP:
        d->rrl_slipped++;
        if (r)
            *verdict = SP_DNS_SLIP;           /* an error is already as small as a slip */
        return true;
    case SP_RRL_DROP:
    default:
        d->rrl_dropped++;
        return false;
    }
}

__attribute__((noinline, cold)) bool
sp_dns_payload_rechecked(const uint8_t *rx, const struct sp_frame_query *fq,
                         struct sp_frame_counters *c)
{
    uint64_t acc = sp_csum_acc(rx + fq->l2 + fq->u.payload_off, fq->u.payload_len, 0);
    return sp_frame_payload_checked(rx, fq, acc, c);
}

/* The DNS message of a frame sp_frame_parse_unchecked() took as a query. */
static inline const uint8_t *frame_message(const struct sp_frame *frame,
                                           const struct sp_frame_query *fq)
{
    return frame->data + fq->l2 + fq->u.payload_off;
}

/* sp_dns_frame_answer(), inlined where it is called: in the batch loop below too. */
static inline __attribute__((always_inline)) size_t
frame_answer(const struct sp_table *t, struct sp_dns_worker *d, const struct sp_frame_config *cfg,
             const struct sp_frame *frame, uint8_t *tx, size_t cap, struct sp_frame_counters *c)
{
    struct sp_frame_query fq;
    size_t stack;
    const uint8_t *rx = frame->data;
    if (sp_frame_parse_unchecked(cfg, frame, tx, cap, &fq, &stack, c) != SP_FRAME_QUERY)
        return stack;
    size_t dns_cap = sp_frame_payload_cap(cfg, &fq, cap);
    if (!dns_cap)
        return 0;
    struct sp_dns_query *q = &d->query;
    enum sp_dns_verdict v;
    const struct sp_response *r = sp_dns_find(t, frame_message(frame, &fq), fq.u.payload_len, q,
                                              true, &v);
    if (d->rrl && !sp_dns_rate_limit(d, fq.u.family, fq.u.src, &v, r))
        return 0;
    if (!sp_dns_payload_checked(rx, &fq, q, c))
        return 0;
    return frame_reply(t, d, q, cfg, rx, &fq, v, r, tx, dns_cap);
}

/* One function with everything it calls inlined: the calls' register saves and
 * restores were a sixth of the DNS layer's instructions. */
__attribute__((flatten)) size_t sp_dns_frame_answer(const struct sp_table *t, struct sp_dns_worker *d,
                           const struct sp_frame_config *cfg, const struct sp_frame *frame,
                           uint8_t *tx, size_t cap, struct sp_frame_counters *c)
{
    return frame_answer(t, d, cfg, frame, tx, cap, c);
}

/* The loop inlined with its body: a call per frame saved and restored as many
 * registers as the body takes instructions to check a header. */
__attribute__((flatten)) unsigned
sp_dns_frames_answer(const struct sp_table *t, struct sp_dns_worker *d,
                     const struct sp_frame_config *cfg, const struct sp_frame *rx, unsigned n,
                     struct sp_frame *tx, struct sp_frame_counters *c)
{
    struct sp_frame *out = tx;   /* a pointer, not an index: no multiply by the stride */
    for (unsigned i = 0; i < n; i++) {
        size_t len = frame_answer(t, d, cfg, &rx[i], out->data, out->cap, c);
        if (len)
            (out++)->len = (uint32_t)len;
    }
    return (unsigned)(out - tx);
}

/* One frame of a group through the stages: its fields side by side, so that a stage
 * reaches them from one pointer, not by an index into five arrays of five strides. */
struct group_frame {
    struct sp_dns_query q;
    struct sp_frame_query fq;
    const struct sp_response *r;
    enum sp_dns_verdict verdict;
    bool query;                    /* a DNS query, with room for its answer */
};

/* The stages of a group (answer.h), then each frame answered in order: into tx[used]
 * (memcpy mode, pool NULL: a constant where this is inlined), or by the pool into
 * out[sent], with *taken the TX buffers of tx used. Returns the replies. */
static inline __attribute__((always_inline)) unsigned
answer_group(const struct sp_table *t, struct sp_dns_worker *d, const struct sp_frame_config *cfg,
             const struct sp_frame *rx, unsigned n, struct sp_frame *tx,
             struct sp_frame_counters *c, struct sp_precopy *pool, struct sp_frame *out,
             unsigned *taken)
{
    struct group_frame f[SP_DNS_GROUP];
    uint64_t hash[SP_DNS_GROUP];   /* the first lookup's tagged hash, for each of look[] */
    const struct sp_table_hint *hint[SP_DNS_GROUP];   /* and what stage 2 found for it */
    uint8_t look[SP_DNS_GROUP];    /* the frames to look up */
    unsigned nlook = 0;
    if (n > SP_DNS_GROUP)
        n = SP_DNS_GROUP;
    for (unsigned j = 0; j < n; j++) {   /* parse and hash; the first slot fetched */
        struct group_frame *g = &f[j];
        size_t stack;
        g->r = NULL;
        g->query = sp_frame_parse_unchecked(cfg, &rx[j], tx[j].data, tx[j].cap, &g->fq, &stack,
                                            c) == SP_FRAME_QUERY &&
                   sp_frame_payload_cap(cfg, &g->fq, tx[j].cap);
        if (!g->query)
            continue;
        g->verdict = sp_dns_parse_unchecked(frame_message(&rx[j], &g->fq), g->fq.u.payload_len,
                                            &g->q, true);
        if (g->verdict == SP_DNS_LOOKUP) {
            look[nlook] = (uint8_t)j;
            hash[nlook++] = sp_table_prefetch_slot(t, sp_dns_first_tag(&g->q), g->q.name_hash);
        }
    }
    for (unsigned k = 0; k < nlook; k++)
        hint[k] = sp_table_prefetch_entry(t, hash[k]);
    for (unsigned k = 0; k < nlook; k++)
        sp_table_prefetch_key(t, hint[k]);
    unsigned nmissed = 0;
    for (unsigned k = 0; k < nlook; k++) {   /* the first keys, their answers' bytes fetched */
        struct group_frame *g = &f[look[k]];
        g->r = sp_dns_lookup_first(t, &g->q, hash[k], hint[k]);
        if (g->r)
            sp_response_prefetch(t, g->r);
        else if (!sp_dns_name_well_formed(&g->q))
            g->r = sp_dns_find(t, frame_message(&rx[look[k]], &g->fq), g->fq.u.payload_len,
                               &g->q, true, &g->verdict);   /* parsed again, walked */
        else
            look[nmissed++] = look[k];  /* NODATA, NXDOMAIN, wildcards: a second round */
    }
    uint64_t rest[SP_DNS_GROUP][2];
    const struct sp_table_hint *rest_hint[SP_DNS_GROUP][2];
    for (unsigned k = 0; k < nmissed; k++)
        sp_dns_prefetch_rest(t, &f[look[k]].q, rest[k]);
    for (unsigned k = 0; k < nmissed; k++)
        for (unsigned i = 0; i < 2; i++)
            rest_hint[k][i] = rest[k][i] ? sp_table_prefetch_entry(t, rest[k][i]) : NULL;
    for (unsigned k = 0; k < nmissed; k++)
        for (unsigned i = 0; i < 2; i++)
            sp_table_prefetch_key(t, rest_hint[k][i]);
    for (unsigned k = 0; k < nmissed; k++) {
        struct group_frame *g = &f[look[k]];
        g->r = sp_dns_lookup_rest(t, &g->q);
        if (g->r)
            sp_response_prefetch(t, g->r);
    }
    struct sp_frame *next = tx;   /* the next reply's TX buffer: a pointer, as in the batch */
    unsigned sent = 0;
    for (unsigned j = 0; j < n; j++) {   /* the answers, in the frames' order */
        struct group_frame *g = &f[j];
        if (!g->query)
            continue;
        if (d->rrl && !sp_dns_rate_limit(d, g->fq.u.family, g->fq.u.src, &g->verdict, g->r))
            continue;
        if (!sp_dns_payload_checked(rx[j].data, &g->fq, &g->q, c))
            continue;
        if (pool) {
            if (sp_precopy_reply(pool, t, d, &g->q, cfg, rx[j].data, &g->fq, g->verdict, g->r,
                                 next, &out[sent]))
                next += out[sent++].pool < 0;
            continue;
        }
        size_t len = frame_reply(t, d, &g->q, cfg, rx[j].data, &g->fq, g->verdict, g->r,
                                 next->data, sp_frame_payload_cap(cfg, &g->fq, next->cap));
        if (len)
            (next++)->len = (uint32_t)len;
    }
    if (pool) {
        *taken = (unsigned)(next - tx);
        return sent;
    }
    return (unsigned)(next - tx);
}

/* Flattened, as sp_dns_frame_answer(), so that each stage is one loop without calls. */
__attribute__((flatten)) unsigned
sp_dns_frame_answer_group(const struct sp_table *t, struct sp_dns_worker *d,
                          const struct sp_frame_config *cfg, const struct sp_frame *rx,
                          unsigned n, struct sp_frame *tx, struct sp_frame_counters *c)
{
    return answer_group(t, d, cfg, rx, n, tx, c, NULL, NULL, NULL);
}

__attribute__((flatten)) unsigned
sp_precopy_answer_group(struct sp_precopy *p, const struct sp_table *t, struct sp_dns_worker *d,
                        const struct sp_frame_config *cfg, const struct sp_frame *rx,
                        unsigned n, const struct sp_frame *tx, struct sp_frame *out,
                        unsigned *taken, struct sp_frame_counters *c)
{
    return answer_group(t, d, cfg, rx, n, (struct sp_frame *)tx, c, p, out, taken);
}


size_t sp_dns_datagram_answer(const struct sp_table *t, struct sp_dns_worker *d,
                              const struct sp_frame *rx, uint8_t *tx, size_t cap,
                              struct sp_frame_counters *c)
{
    c->frames++;
    if (sp_datagram_source_refused(rx->src_family, rx->src, rx->src_port)) {
        c->bad_source++;                      /* no reply can go there: none is made */
        return 0;
    }
    struct sp_dns_query *q = &d->query;
    enum sp_dns_verdict v;
    const struct sp_response *r = sp_dns_find(t, rx->data, rx->len, q, false, &v);
    if (!r && d->cfg.handoff_fd && sp_dns_handoff_wanted(v, q) &&
        sp_dns_handoff_datagram(d->cfg.handoff_fd, rx->src_family, rx->src, rx->src_port,
                                rx->dst ? rx->dst : d->cfg.handoff_local, rx->data, rx->len))
        return 0;                             /* the server process answers it */
    if (d->rrl && !sp_dns_rate_limit(d, rx->src_family, rx->src, &v, r))
        return 0;
    return sp_dns_answer_parsed(t, &d->cfg, rx->data, rx->len, false, tx, cap, q, v, r,
                                &d->counters);
}
