/* One DNS query on the frame path. See answer.h. */
#include "stormpy/app/dns/answer.h"

size_t sp_dns_frame_reply(const struct sp_table *t, struct sp_dns_worker *d,
                          const struct sp_frame_config *cfg, const uint8_t *rx,
                          const struct sp_frame_query *fq, enum sp_dns_verdict verdict,
                          const struct sp_response *r, uint8_t *tx, size_t cap)
{
    size_t dns_cap = sp_frame_payload_cap(cfg, fq, cap);
    if (!dns_cap)
        return 0;
    uint32_t sum;
    size_t n = sp_dns_answer_summed(t, &d->cfg, rx + fq->l2 + fq->u.payload_off,
                                    fq->u.payload_len, false, tx + fq->headers, dns_cap, &d->query,
                                    verdict, r, &d->counters, &sum);
    if (!n)
        return 0;
    sp_frame_write_headers(cfg, rx, fq, tx, n, sum);
    return fq->headers + n;
}

bool sp_dns_rate_limit(struct sp_dns_worker *d, uint8_t family, const uint8_t *src,
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

/* One function with everything it calls inlined: the calls' register saves and
 * restores were a sixth of the DNS layer's instructions. */
__attribute__((flatten)) size_t sp_dns_frame_answer(const struct sp_table *t, struct sp_dns_worker *d,
                           const struct sp_frame_config *cfg, const uint8_t *rx, size_t len,
                           uint8_t *tx, size_t cap, struct sp_frame_counters *c)
{
    struct sp_frame_query fq;
    size_t stack;
    if (sp_frame_parse(cfg, rx, len, tx, cap, &fq, &stack, c) != SP_FRAME_QUERY)
        return stack;
    if (!sp_frame_payload_cap(cfg, &fq, cap))
        return 0;
    struct sp_dns_query *q = &d->query;
    const uint8_t *msg = rx + fq.l2 + fq.u.payload_off;
    enum sp_dns_verdict v = sp_dns_parse(msg, fq.u.payload_len, q);
    const struct sp_response *r = v == SP_DNS_LOOKUP ? sp_dns_lookup(t, q) : NULL;
    if (d->rrl && !sp_dns_rate_limit(d, fq.u.family, fq.u.src, &v, r))
        return 0;
    return sp_dns_frame_reply(t, d, cfg, rx, &fq, v, r, tx, cap);
}

size_t sp_dns_datagram_answer(const struct sp_table *t, struct sp_dns_worker *d,
                              const struct sp_frame *rx, uint8_t *tx, size_t cap,
                              struct sp_frame_counters *c)
{
    c->frames++;
    struct sp_dns_query *q = &d->query;
    enum sp_dns_verdict v = sp_dns_parse(rx->data, rx->len, q);
    const struct sp_response *r = v == SP_DNS_LOOKUP ? sp_dns_lookup(t, q) : NULL;
    if (d->rrl && !sp_dns_rate_limit(d, rx->src_family, rx->src, &v, r))
        return 0;
    return sp_dns_answer_parsed(t, &d->cfg, rx->data, rx->len, false, tx, cap, q, v, r,
                                &d->counters);
}
