/* DNS answers from the response table: rendering, EDNS and truncation (the query's
 * parsing is parse.c's, the lookup order lookup.c's). See dns.h. */
#include "stormpy/app/dns/dns.h"

#include <stddef.h>
#include <string.h>

#include "stormpy/proto/csum.h"
#include "stormpy/proto/wire.h"

#define TC 0x02
#define RD 0x01
#define CD 0x10
#define OPT_EDE 15
#define EDE_NOT_AUTHORITATIVE 20

size_t sp_dns_udp_limit(const struct sp_dns_query *q, const struct sp_dns_config *cfg)
{
    if (!q->edns || q->edns_size <= SP_DNS_UDP_MIN)
        return SP_DNS_UDP_MIN;
    return q->edns_size < cfg->max_udp ? q->edns_size : cfg->max_udp;
}

/* The response OPT: our payload size, the client's DO bit, the upper bits of an
 * extended rcode, the server's NSID when the query asked for it (RFC 5001), and Extended
 * DNS Error 20 on REFUSED (as Knot does, after the NSID). */
#define EDE_LEN 6u
#define RCODE_REFUSED_NO_ZONE 0x1005   /* REFUSED with EDE 20; internal only */

/* The NSID option's length in q's answer: 0 unless asked for and configured. */
static inline size_t nsid_len(const struct sp_dns_query *q, const struct sp_dns_config *cfg)
{
    return q->nsid && cfg->nsid_len ? 4u + cfg->nsid_len : 0u;
}

static size_t opt_len(const struct sp_dns_query *q, const struct sp_dns_config *cfg,
                      uint16_t rcode)
{
    return SP_DNS_OPT_LEN + nsid_len(q, cfg) + (rcode == RCODE_REFUSED_NO_ZONE ? EDE_LEN : 0u);
}

/* The room an answer's OPT takes: none without EDNS. */
static inline size_t opt_room(const struct sp_dns_query *q, const struct sp_dns_config *cfg)
{
    return q->edns ? opt_len(q, cfg, 0) : 0;
}

/* The sum of write_opt()'s record for rcode 0 (no EDE) at offset at, composed from its
 * two variable fields: the payload size and the DO bit. Below 2^17. */
static inline uint32_t opt_sum(const struct sp_dns_query *q, const struct sp_dns_config *cfg,
                               size_t at)
{
    uint32_t size = cfg->max_udp, swapped = sp_csum_swap16(size);
    if (at & 1)   /* the words: type 0x0029, the size, the flags' DO bit */
        return SP_DNS_TYPE_OPT + size + (q->edns_do ? 0x8000u : 0);
    return (SP_DNS_TYPE_OPT << 8) + swapped + (q->edns_do ? 0x80u : 0);
}

/* An OPT record without options, for an extended rcode's upper bits. */
static inline void write_plain_opt(uint8_t *p, const struct sp_dns_query *q,
                                   const struct sp_dns_config *cfg, uint8_t rcode_high)
{
    p[0] = 0;
    sp_put16(p + 1, SP_DNS_TYPE_OPT);
    sp_put16(p + 3, cfg->max_udp);
    p[5] = rcode_high;
    p[6] = 0;
    p[7] = q->edns_do ? 0x80 : 0;
    p[8] = 0;
    sp_put16(p + 9, 0);
}

static size_t write_opt(uint8_t *p, const struct sp_dns_query *q, const struct sp_dns_config *cfg,
                        uint16_t rcode)
{
    write_plain_opt(p, q, cfg, rcode == RCODE_REFUSED_NO_ZONE ? 0 : (uint8_t)(rcode >> 4));
    size_t len = opt_len(q, cfg, rcode), at = SP_DNS_OPT_LEN;
    sp_put16(p + 9, (uint16_t)(len - SP_DNS_OPT_LEN));
    if (nsid_len(q, cfg)) {
        sp_put16(p + at, SP_DNS_OPTION_NSID);
        sp_put16(p + at + 2, cfg->nsid_len);
        memcpy(p + at + 4, cfg->nsid, cfg->nsid_len);
        at += 4u + cfg->nsid_len;
    }
    if (rcode == RCODE_REFUSED_NO_ZONE) {
        sp_put16(p + at, OPT_EDE);
        sp_put16(p + at + 2, 2);
        sp_put16(p + at + 4, EDE_NOT_AUTHORITATIVE);
    }
    return len;
}

/* An answer made on the spot: header, the question when it parsed, OPT when the
 * query had one. Carries no data, whatever the table holds. */
static size_t write_error(const uint8_t *msg, const struct sp_dns_query *q,
                          const struct sp_dns_config *cfg, uint16_t rcode, uint8_t *out, size_t cap)
{
    size_t qlen = q->has_question ? q->question_len : 0;
    size_t need = SP_DNS_HEADER_LEN + qlen + (q->edns ? opt_len(q, cfg, rcode) : 0);
    if (need > cap)
        return 0;
    memcpy(out, msg, 2);
    out[2] = (uint8_t)(SP_DNS_QR | (msg[2] & 0x78) | (msg[2] & RD));
    out[3] = (uint8_t)((msg[3] & CD) | (rcode & 0x0f));
    sp_put16(out + 4, q->has_question ? 1 : 0);
    sp_put16(out + 6, 0);
    sp_put16(out + 8, 0);
    sp_put16(out + 10, q->edns ? 1 : 0);
    memcpy(out + SP_DNS_HEADER_LEN, q->question, qlen);
    if (q->edns)
        write_opt(out + SP_DNS_HEADER_LEN + qlen, q, cfg, rcode);
    return need;
}

uint16_t sp_dns_additional_before(const uint8_t *bytes, size_t len, size_t end)
{
    if (end > len || len < SP_DNS_HEADER_LEN)
        return 0;
    size_t before = (size_t)sp_get16(bytes + 6) + sp_get16(bytes + 8), at = SP_DNS_HEADER_LEN;
    uint16_t count = 0;
    for (size_t i = 0; at < end; i++) {
        while (at < end && bytes[at] != 0 && (bytes[at] & 0xC0) != 0xC0)
            at += 1u + bytes[at];
        at += at < end && bytes[at] != 0 ? 2 : 1;      /* a pointer, or the root */
        if (at + 10 > end)
            break;
        at += 10u + sp_get16(bytes + at + 8);
        if (i >= before && at <= end)
            count++;
    }
    return count;
}

/* The response does not fit: header and question only, TC set, so the client
 * retries over TCP. */
static __attribute__((noinline, cold)) size_t
write_truncated(const struct sp_table *t, const struct sp_response *r, const uint8_t *msg,
                const struct sp_dns_query *q, const struct sp_dns_config *cfg, uint8_t *out,
                size_t cap)
{
    size_t need = SP_DNS_HEADER_LEN + q->question_len + opt_room(q, cfg);
    if (need > cap)
        return 0;
    memcpy(out, sp_response_bytes(t, r), SP_DNS_HEADER_LEN);
    memcpy(out, msg, 2);
    out[2] = (uint8_t)((out[2] & ~RD) | (msg[2] & RD) | TC);
    out[3] = (uint8_t)((out[3] & ~CD) | (msg[3] & CD));
    sp_put16(out + 6, 0);
    sp_put16(out + 8, 0);
    sp_put16(out + 10, q->edns ? 1 : 0);
    memcpy(out + SP_DNS_HEADER_LEN, q->question, q->question_len);
    if (q->edns)
        write_opt(out + SP_DNS_HEADER_LEN + q->question_len, q, cfg, 0);
    return need;
}

static inline size_t count_rcode(struct sp_dns_counters *c, uint16_t rcode, size_t n)
{
    if (n)
        c->rcode[rcode < 16 ? rcode : 16]++;
    else
        c->dropped++;
    return n;
}

/* An answer from the table r: by rcode and by zone. */
static inline size_t count_answer(struct sp_dns_counters *c, const struct sp_response *r, size_t n)
{
    if (n) {
        c->zone[SP_DNS_USER_ZONE(r->user)]++;
        c->rcode[SP_DNS_USER_HEADER_RCODE(r->user)]++;
    } else {
        c->dropped++;
    }
    return n;
}

size_t sp_dns_full_len(const struct sp_response *r, const struct sp_dns_query *q,
                       const struct sp_dns_config *cfg, size_t cap)
{
    if ((r->user & SP_DNS_USER_DNAME) || nsid_len(q, cfg))     /* and SP_DNS_USER_NSEC3 */
        return 0;
    size_t limit = sp_dns_udp_limit(q, cfg);
    if (limit > cap)
        limit = cap;
    size_t n = r->len + q->question_len + (q->edns ? SP_DNS_OPT_LEN : 0);
    return n <= limit ? n : 0;
}

/* The sum of an answer written out of the table's order: summed over. */
static inline size_t summed(const uint8_t *out, size_t n, uint32_t *sum)
{
    if (sum)
        *sum = sp_csum_partial(out, n, 0);
    return n;
}

#define DNS_PATCHES 4u      /* the head echoed and the question: SHIFTs follow */
/* A usual answer's tail is copied in four 16-byte pieces (render_dns()); the bytes read
 * past a response's end must be in its table's padding. */
#define TAIL_PIECES 4u
_Static_assert(TAIL_PIECES * 16 <= SP_RESPONSE_READ_PAST,
               "a tail's pieces, read past a response's end, stay in the padding");

_Static_assert(offsetof(struct sp_response, echo_head) ==
               offsetof(struct sp_response, insert_field) + 1, "read as one 16-bit word");

/* Whether r has the DNS patch list, as the compiler makes it: the head echoed, the
 * question spliced in at 12 (then any SHIFTs). */
static inline bool dns_shaped(const struct sp_response *r)
{
    /* insert_field and echo_head side by side: both in one comparison */
    static const uint8_t question_echoed[2] = {SP_DNS_FIELD_QUESTION, 1};
    uint16_t field_echo, want;
    memcpy(&field_echo, &r->insert_field, 2);
    memcpy(&want, question_echoed, 2);
    return field_echo == want && r->insert_at == SP_DNS_HEADER_LEN;
}

/* The fields the table's general renderer and sums read (only where render_dns() and
 * the DNS patch list's sum do not apply). */
static inline struct sp_request request(const uint8_t *msg, size_t len,
                                        const struct sp_dns_query *q)
{
    return (struct sp_request){
        .field = {msg, q->question},
        .field_len = {(uint16_t)len, q->question_len},
    };
}

/* The sum of r's answer in out, from the table's stored sums and the question's (dns.h).
 * For the DNS patch list: the stored head's sum (without its first 4 bytes, table.h),
 * the answer's first 4 bytes, the question's, and the tail's, byte-swapped behind a
 * question of odd length. */
static inline uint32_t table_sum(const struct sp_table *t, const struct sp_response *r,
                                 bool shaped, const uint8_t *msg, size_t len,
                                 const struct sp_dns_query *q, const uint8_t *out)
{
    if (!shaped) {
        struct sp_request req = request(msg, len, q);
        return r->insert_field == SP_DNS_FIELD_QUESTION
            ? sp_response_sum_with(t, r, &req, q->question_sum) : sp_response_sum(t, r, &req);
    }
    /* every part a reduced sum (table.h, sp_csum_acc_done()): added up in 32 bits */
    uint32_t sum = r->sum_head + sp_get16(out) + sp_get16(out + 2) + q->question_sum;
    sum += q->question_len & 1 ? sp_csum_swap16(r->sum_tail) : r->sum_tail;
    if (r->npatch > DNS_PATCHES)        /* a variable answer's moved pointers */
        sum = sp_response_shift_sum(t, r, q->question_len, sum);
    return sp_csum_reduce(sum);
}

/* q's question after the header in one or two 16-byte pieces, the rest of a long one
 * after them; up to 15 bytes past it written too, which the tail's copy must overwrite
 * (16 bytes of it at least). Written out: as a loop, the compiler made it a call to
 * libc. */
static inline void copy_question(uint8_t *out, const struct sp_dns_query *q, size_t qlen)
{
    uint8_t piece[16];
    memcpy(piece, q->question, 16);
    memcpy(out + SP_DNS_HEADER_LEN, piece, 16);
    if (qlen > 16) {
        memcpy(piece, q->question + 16, 16);
        memcpy(out + SP_DNS_HEADER_LEN + 16, piece, 16);
    }
    if (qlen > 32)
        sp_copy_short(out + SP_DNS_HEADER_LEN + 32, q->question + 32, qlen - 32);
}

/* r rendered whole for q, when r has the DNS patch list (its head echoed, the question
 * spliced in at 12: the compiler's): the renderer specialised to that list, with
 * fixed-size copies and no patch loop. 0 when it does not fit or r is another shape
 * (sp_response_render_prefix() then). */
static inline size_t render_dns(const struct sp_table *t, const struct sp_response *r,
                                bool shaped, const uint8_t *msg, const struct sp_dns_query *q,
                                uint8_t *out, size_t cap)
{
    size_t qlen = q->question_len, tail = r->len - SP_DNS_HEADER_LEN;
    if (!shaped || r->len + qlen > cap)
        return 0;
    const uint8_t *b = sp_response_bytes(t, r);
    uint64_t w;
    uint32_t w4;
    memcpy(&w, b, 8);
    memcpy(out, &w, 8);
    memcpy(&w4, b + 8, 4);
    memcpy(out + 8, &w4, 4);
    sp_echo_head(r, msg, out);
    /* The usual tail (an A's or AAAA's record, a negative answer's SOA, with OPT) in four
     * 16-byte pieces, read past its end (SP_RESPONSE_READ_PAST) and written past it into
     * room there is: a count fixed, as a loop's end mispredicted with its length. */
    if (tail <= TAIL_PIECES * 16 && SP_DNS_HEADER_LEN + qlen + TAIL_PIECES * 16 <= cap) {
        copy_question(out, q, qlen);
        uint8_t p0[16], p1[16], p2[16], p3[16];   /* four registers, not the stack */
        const uint8_t *from = b + SP_DNS_HEADER_LEN;
        uint8_t *to = out + SP_DNS_HEADER_LEN + qlen;
        memcpy(p0, from, 16);
        memcpy(p1, from + 16, 16);
        memcpy(p2, from + 32, 16);
        memcpy(p3, from + 48, 16);
        memcpy(to, p0, 16);
        memcpy(to + 16, p1, 16);
        memcpy(to + 32, p2, 16);
        memcpy(to + 48, p3, 16);
    } else {
        if (tail >= 16)
            copy_question(out, q, qlen);
        else
            sp_copy_short(out + SP_DNS_HEADER_LEN, q->question, qlen);
        sp_copy_short(out + SP_DNS_HEADER_LEN + qlen, b + SP_DNS_HEADER_LEN, tail);
    }
    if (r->npatch > DNS_PATCHES)
        sp_response_shift(t, r, qlen, r->len, out);
    return r->len + qlen;
}

size_t sp_dns_copy_len(const struct sp_response *r, const struct sp_dns_query *q,
                       const struct sp_dns_config *cfg, size_t cap)
{
    return dns_shaped(r) ? sp_dns_full_len(r, q, cfg, cap) : 0;
}

uint32_t sp_dns_copy_sum(const struct sp_table *t, const struct sp_response *r,
                         const struct sp_dns_query *q, const uint8_t *out)
{
    return table_sum(t, r, dns_shaped(r), NULL, 0, q, out);
}

uint32_t sp_dns_copy_rewrite(const struct sp_table *t, const struct sp_response *r,
                             const uint8_t *msg, const struct sp_dns_query *q, uint8_t *out)
{
    sp_echo_head(r, msg, out);
    sp_copy_short(out + SP_DNS_HEADER_LEN, q->question, q->question_len);
    return table_sum(t, r, dns_shaped(r), NULL, 0, q, out);
}

/* An answer completed per name asked: a DNAME's (dname.c) or one with an NSEC3 proof
 * spliced in (nsec3.c); with OPT when asked, or truncated; summed whole (rare). Such a
 * response has no question INSERT, so the specialised renderer declines it and the
 * common path pays nothing; its stored head is a header (an NSEC3 descriptor starts
 * with its form's), so a slip or a truncation needs nothing of its own. */
static __attribute__((noinline, cold)) size_t
answer_spliced(const struct sp_table *t, const struct sp_dns_config *cfg, const uint8_t *msg,
               uint8_t *out, size_t limit, const struct sp_dns_query *q,
               const struct sp_response *r, struct sp_dns_counters *c, uint32_t *sum)
{
    bool nsec3 = (r->user & SP_DNS_USER_NSEC3) == SP_DNS_USER_NSEC3;
    size_t opt = opt_room(q, cfg), n = 0;
    if (limit > opt)
        n = nsec3 ? sp_dns_nsec3_render(t, r, msg, q, out, limit - opt)
                  : sp_dns_dname_render(t, r, msg, q, out, limit - opt);
    if (!n) {
        c->truncated++;
        n = write_truncated(t, r, msg, q, cfg, out, limit);
        return count_rcode(c, n ? out[3] & 0x0f : 0, summed(out, n, sum));   /* n: 0 when nothing fits */
    }
    if (opt) {
        sp_put16(out + 10, (uint16_t)(sp_get16(out + 10) + 1));
        n += write_opt(out + n, q, cfg, 0);
    }
    c->zone[SP_DNS_USER_ZONE(r->user)]++;
    return count_rcode(c, out[3] & 0x0f, summed(out, n, sum));
}

/* r's whole answer, rendered at out (n bytes), finished: an OPT record when the query had
 * one (opt its length, room left for it), the sum when wanted, counted. */
static inline __attribute__((always_inline)) size_t
answer_whole(const struct sp_table *t, const struct sp_dns_config *cfg, const uint8_t *msg,
             size_t len, uint8_t *out, size_t n, size_t opt, const struct sp_dns_query *q,
             const struct sp_response *r, bool shaped, struct sp_dns_counters *c, uint32_t *sum)
{
    if (opt) {
        uint16_t arcount = sp_get16(out + 10);
        sp_put16(out + 10, (uint16_t)(arcount + 1));
        if (opt != SP_DNS_OPT_LEN) {         /* an NSID: summed whole (answer_from_table() has none) */
            write_opt(out + n, q, cfg, 0);
            return count_answer(c, r, summed(out, n + opt, sum));
        }
        write_plain_opt(out + n, q, cfg, 0);
        if (sum && arcount != 0xffff) {   /* ARCOUNT one more (an even offset), the OPT at n */
            *sum = sp_csum_reduce(table_sum(t, r, shaped, msg, len, q, out) + 1 +
                                  opt_sum(q, cfg, n));
        } else {
            summed(out, n + opt, sum);
        }
        return count_answer(c, r, n + opt);
    }
    if (sum)
        *sum = table_sum(t, r, shaped, msg, len, q, out);
    return count_answer(c, r, n);
}

/* An answer from the table's response r, any: whole, without its additional section, or
 * truncated; with an OPT record when the query had one. Out of line, for the answers
 * answer_from_table() leaves to it (a slip, one cut to fit, one of another shape than
 * the DNS patch list), so that their code takes no registers from the usual answer's. */
static __attribute__((noinline, cold)) size_t
answer_from_table_unusual(const struct sp_table *t, const struct sp_dns_config *cfg,
                          const uint8_t *msg, size_t len, bool tcp, uint8_t *out, size_t cap,
                          struct sp_dns_query *q, enum sp_dns_verdict verdict,
                          const struct sp_response *r, struct sp_dns_counters *c, uint32_t *sum)
{
    size_t limit = tcp ? 65535 : sp_dns_udp_limit(q, cfg);
    if (limit > cap)
        limit = cap;
    size_t opt = opt_room(q, cfg);
    if (verdict == SP_DNS_SLIP)
        return count_answer(c, r, summed(out, write_truncated(t, r, msg, q, cfg, out, limit), sum));
    size_t stored = r->len;
    if (stored + q->question_len + opt > limit) {
        if (r->user & SP_DNS_USER_DNAME)     /* its length is the name's: it decides */
            return answer_spliced(t, cfg, msg, out, limit, q, r, c, sum);
        /* Optional additional records go first; then the whole answer, with TC. */
        stored = SP_DNS_USER_DROPPABLE(r->user);
        if (!stored || stored + q->question_len + opt > limit) {
            c->truncated++;
            return count_answer(c, r, summed(out, write_truncated(t, r, msg, q, cfg, out, limit), sum));
        }
    }

    /* read once: the writes to out below may alias r for the compiler */
    bool shaped = dns_shaped(r);
    size_t n = stored == r->len ? render_dns(t, r, shaped, msg, q, out, limit - opt) : 0;
    if (!n && (r->user & SP_DNS_USER_DNAME))     /* and SP_DNS_USER_NSEC3 */
        return answer_spliced(t, cfg, msg, out, limit, q, r, c, sum);
    if (!n) {
        struct sp_request req = request(msg, len, q);
        n = sp_response_render_prefix(t, r, &req, stored, out, limit - opt);
    }
    if (!n)
        return count_answer(c, r, 0);
    if (stored != r->len) {
        uint16_t kept = sp_dns_additional_before(sp_response_bytes(t, r), r->len, stored);
        if (opt)
            n += write_opt(out + n, q, cfg, 0);
        sp_put16(out + 10, (uint16_t)(kept + (opt ? 1 : 0)));
        return count_answer(c, r, summed(out, n, sum));
    }
    return answer_whole(t, cfg, msg, len, out, n, opt, q, r, shaped, c, sum);
}

/* The usual answer from the table to a lookup (a slip goes to answer_other_verdict()): r
 * whole, with the DNS patch list, and room for it. */
static inline __attribute__((always_inline)) size_t
answer_from_table(const struct sp_table *t, const struct sp_dns_config *cfg, const uint8_t *msg,
                  size_t len, bool tcp, uint8_t *out, size_t cap, struct sp_dns_query *q,
                  const struct sp_response *r, struct sp_dns_counters *c, uint32_t *sum)
{
    size_t limit = tcp ? 65535 : sp_dns_udp_limit(q, cfg);
    if (limit > cap)
        limit = cap;
    size_t opt = q->edns ? SP_DNS_OPT_LEN : 0;
    if (__builtin_expect(!dns_shaped(r) || r->len + q->question_len + opt > limit || q->nsid, 0))
        return answer_from_table_unusual(t, cfg, msg, len, tcp, out, cap, q, SP_DNS_LOOKUP, r,
                                         c, sum);
    size_t n = render_dns(t, r, true, msg, q, out, SIZE_MAX);   /* it fits: tested above */
    return answer_whole(t, cfg, msg, len, out, n, opt, q, r, true, c, sum);
}

/* An answer made on the spot (write_error), counted under rcode. */
static inline size_t error_answer(const uint8_t *msg, const struct sp_dns_query *q,
                                  const struct sp_dns_config *cfg, uint16_t rcode, uint16_t why,
                                  uint8_t *out, size_t cap, struct sp_dns_counters *c,
                                  uint32_t *sum)
{
    return count_rcode(c, rcode, summed(out, write_error(msg, q, cfg, why, out, cap), sum));
}

/* Every answer but one from the table to a lookup (errors, REFUSED outside the zones, a
 * slip): out of line, as answer_from_table_unusual(). */
static __attribute__((noinline, cold)) size_t
answer_other_verdict(const struct sp_table *t, const struct sp_dns_config *cfg,
                     const uint8_t *msg, size_t len, bool tcp, uint8_t *out, size_t cap,
                     struct sp_dns_query *q, enum sp_dns_verdict verdict,
                     const struct sp_response *r, struct sp_dns_counters *c, uint32_t *sum)
{
    switch (verdict) {
    case SP_DNS_LOOKUP:
    case SP_DNS_SLIP:
        break;
    case SP_DNS_DROP:
        c->dropped++;
        return 0;
    case SP_DNS_FORMERR:
        return error_answer(msg, q, cfg, SP_RCODE_FORMERR, SP_RCODE_FORMERR, out, cap, c, sum);
    case SP_DNS_NOTIMP:
        return error_answer(msg, q, cfg, SP_RCODE_NOTIMP, SP_RCODE_NOTIMP, out, cap, c, sum);
    case SP_DNS_NOTAUTH:
        return error_answer(msg, q, cfg, SP_RCODE_NOTAUTH, SP_RCODE_NOTAUTH, out, cap, c, sum);
    case SP_DNS_TRANSFER: {
        /* No zone transfers: AXFR is not a UDP operation at all; the rest are
         * transfers nobody is allowed to make. */
        uint16_t rcode = q->qtype == SP_DNS_TYPE_AXFR && !tcp ? SP_RCODE_NOTIMP : SP_RCODE_NOTAUTH;
        return error_answer(msg, q, cfg, rcode, rcode, out, cap, c, sum);
    }
    case SP_DNS_BADVERS:
        return error_answer(msg, q, cfg, SP_RCODE_BADVERS, SP_RCODE_BADVERS, out, cap, c, sum);
    case SP_DNS_REFUSED:
        return error_answer(msg, q, cfg, SP_RCODE_REFUSED, SP_RCODE_REFUSED, out, cap, c, sum);
    }

    if (!r) {
        uint16_t why = q->qclass == SP_DNS_CLASS_CH ? SP_RCODE_REFUSED : RCODE_REFUSED_NO_ZONE;
        return error_answer(msg, q, cfg, SP_RCODE_REFUSED, why, out, cap, c, sum);
    }
    return answer_from_table_unusual(t, cfg, msg, len, tcp, out, cap, q, verdict, r, c, sum);
}

/* sp_dns_answer_parsed(), and the answer's checksum when sum is not NULL. */
static inline __attribute__((always_inline)) size_t
answer(const struct sp_table *t, const struct sp_dns_config *cfg, const uint8_t *msg, size_t len,
       bool tcp, uint8_t *out, size_t cap, struct sp_dns_query *q, enum sp_dns_verdict verdict,
       const struct sp_response *r, struct sp_dns_counters *c, uint32_t *sum)
{
    if (__builtin_expect(verdict != SP_DNS_LOOKUP || !r, 0))
        return answer_other_verdict(t, cfg, msg, len, tcp, out, cap, q, verdict, r, c, sum);
    return answer_from_table(t, cfg, msg, len, tcp, out, cap, q, r, c, sum);
}

size_t sp_dns_answer_parsed(const struct sp_table *t, const struct sp_dns_config *cfg,
                            const uint8_t *msg, size_t len, bool tcp, uint8_t *out, size_t cap,
                            struct sp_dns_query *q, enum sp_dns_verdict verdict,
                            const struct sp_response *r, struct sp_dns_counters *c)
{
    return answer(t, cfg, msg, len, tcp, out, cap, q, verdict, r, c, NULL);
}

size_t sp_dns_answer_summed(const struct sp_table *t, const struct sp_dns_config *cfg,
                            const uint8_t *msg, size_t len, bool tcp, uint8_t *out, size_t cap,
                            struct sp_dns_query *q, enum sp_dns_verdict verdict,
                            const struct sp_response *r, struct sp_dns_counters *c,
                            uint32_t *sum)
{
    return answer(t, cfg, msg, len, tcp, out, cap, q, verdict, r, c, sum);
}

/* A function of its own, by its own name, even where the build inlines and clones across
 * files (-flto): callgrind counts the DNS layer inside it (stormpy bench fastpath). */
#ifdef __clang__
#define MEASURED __attribute__((noinline, flatten))
#else
#define MEASURED __attribute__((noinline, noclone, flatten))
#endif

MEASURED size_t
sp_dns_answer(const struct sp_table *t, const struct sp_dns_config *cfg, const uint8_t *msg,
              size_t len, bool tcp, uint8_t *out, size_t cap, struct sp_dns_query *q,
              struct sp_dns_counters *c)
{
    enum sp_dns_verdict v;
    const struct sp_response *r = sp_dns_find(t, msg, len, q, false, &v);
    return answer(t, cfg, msg, len, tcp, out, cap, q, v, r, c, NULL);
}
