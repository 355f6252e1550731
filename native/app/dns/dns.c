/* DNS query parsing and answering from the response table. See dns.h. */
#include "stormpy/app/dns/dns.h"

#include <string.h>

#include "stormpy/proto/csum.h"
#include "stormpy/proto/wire.h"

#define QR 0x80
#define AA 0x04
#define TC 0x02
#define RD 0x01
#define CD 0x10
#define TYPE_OPT 41
#define CLASS_IN 1
#define CLASS_CH 3
#define CLASS_ANY 255
#define TYPE_IXFR 251
#define TYPE_AXFR 252
#define OPCODE_NOTIFY 4
#define OPCODE_UPDATE 5
#define OPT_EDE 15
#define EDE_NOT_AUTHORITATIVE 20

/* ASCII lower case of 8 bytes at once: bytes 'A'..'Z' gain 0x20, all others stay.
 * Label length bytes (at most 63) are never in 'A'..'Z'. */
static inline uint64_t lower8(uint64_t v)
{
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t low7 = v & ~high;
    uint64_t at_least_a = low7 + ones * (0x80 - 'A');
    uint64_t past_z = low7 + ones * (0x80 - 'Z' - 1);
    uint64_t upper = at_least_a & ~past_z & ~v & high;
    return v | (upper >> 2);
}

/* Reads the question name at pos into q, decompressing. Each pointer must point
 * before the previous one's target, so a pointer chain always ends. Returns the
 * offset just past the name in the message, or 0 when malformed. */
static size_t parse_qname(const uint8_t *msg, size_t len, size_t pos, struct sp_dns_query *q)
{
    size_t end = 0, limit = pos, out = 0;
    uint8_t labels = 0;
    for (;;) {
        if (pos >= len)
            return 0;
        uint8_t c = msg[pos];
        if (c == 0) {
            if (out + 1 > SP_DNS_NAME_MAX)
                return 0;
            q->question[out++] = 0;
            if (!end)
                end = pos + 1;
            break;
        }
        if ((c & 0xc0) == 0xc0) {
            if (pos + 1 >= len)
                return 0;
            size_t target = (size_t)(c & 0x3f) << 8 | msg[pos + 1];
            if (target >= limit)
                return 0;
            if (!end)
                end = pos + 2;
            limit = target;
            pos = target;
            continue;
        }
        if (c & 0xc0)          /* extended label types are obsolete */
            return 0;
        if (pos + 1 + c > len || out + 1 + c + 1 > SP_DNS_NAME_MAX || labels >= SP_DNS_LABELS_MAX)
            return 0;
        labels++;
        memcpy(q->question + out, msg + pos, 1 + (size_t)c);
        out += 1 + (size_t)c;
        pos += 1 + (size_t)c;
    }
    for (size_t i = 0; i < out; i += 8) {   /* both buffers are padded to 8 bytes */
        uint64_t v;
        memcpy(&v, q->question + i, 8);
        v = lower8(v);
        memcpy(q->name_lower + i, &v, 8);
    }
    q->name_len = (uint8_t)out;
    return end;
}

/* The end of the question name at pos when it has no compression pointer (as every
 * client sends it): the offset just past it, 0 when malformed, or 1 (never a name's
 * end) at a pointer, which is parse_qname()'s. The limit of 127 labels needs no count:
 * 128 would be longer than 255 bytes. */
static inline size_t walk_labels(const uint8_t *msg, size_t len, size_t pos)
{
    size_t start = pos;
    for (;;) {
        if (pos >= len)
            return 0;
        uint8_t c = msg[pos];
        if (c == 0)
            break;
        if (c & 0xc0)          /* a pointer, or an obsolete extended label type */
            return (c & 0xc0) == 0xc0 ? 1 : 0;
        pos += 1 + (size_t)c;
    }
    return pos + 1 - start > SP_DNS_NAME_MAX ? 0 : pos + 1;
}

/* The n (< 8) bytes at p, whose last byte is before end, as sp_keep_bytes() keeps a
 * loaded word's: loaded from the 8 bytes that end with them when the 8 from p would
 * pass end (a question is never shorter than 5 bytes and starts 12 into the message). */
static inline uint64_t load_last(const uint8_t *p, size_t n, const uint8_t *end)
{
    uint64_t v;
    if (p + 8 <= end) {
        memcpy(&v, p, 8);
        return sp_keep_bytes(v, n);
    }
    memcpy(&v, p + n - 8, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return v >> (64 - 8 * n);
#else
    return v << (64 - 8 * n);
#endif
}

/* Adds a word to a checksum accumulator (sp_csum_acc), the carry wrapped around. */
static inline uint64_t acc_word(uint64_t acc, uint64_t v)
{
    acc += v;
    return acc + (acc < v);
}

/* The question at p (q->question_len bytes before end): copied as sent, its name
 * lower-cased and hashed for the table, and the whole summed for the reply's checksum,
 * in one pass of 8 bytes at a time. */
static inline void take_question(const uint8_t *p, const uint8_t *end, struct sp_dns_query *q)
{
    size_t name_len = q->name_len, i = 0;
    uint64_t h = sp_key_hash_start(name_len), acc = 0, v, lower;
    for (; i + 8 <= name_len; i += 8) {          /* the name's whole words */
        memcpy(&v, p + i, 8);
        memcpy(q->question + i, &v, 8);
        acc = acc_word(acc, v);
        lower = lower8(v);
        memcpy(q->name_lower + i, &lower, 8);
        h = sp_key_hash_word(h, lower);
    }
    /* the rest: r (0 to 7) bytes of the name, then type and class, in one or two words */
    size_t r = name_len - i, rest = r + 4;
    v = rest >= 8 ? (memcpy(&v, p + i, 8), v) : load_last(p + i, rest, end);
    memcpy(q->question + i, &v, 8);
    acc = acc_word(acc, v);
    lower = lower8(v);
    memcpy(q->name_lower + i, &lower, 8);
    if (r)
        h = sp_key_hash_word(h, sp_keep_bytes(lower, r));
    if (rest > 8) {
        v = load_last(p + i + 8, rest - 8, end);
        memcpy(q->question + i + 8, &v, 8);
        acc = acc_word(acc, v);
    }
    q->name_hash = h;
    q->question_sum = sp_csum_acc_done(acc);
}

/* Skips an owner name in a resource record without decompressing it. */
static size_t skip_name(const uint8_t *msg, size_t len, size_t pos)
{
    for (unsigned hops = 0; hops < SP_DNS_NAME_MAX; hops++) {
        if (pos >= len)
            return 0;
        uint8_t c = msg[pos];
        if (c == 0)
            return pos + 1;
        if ((c & 0xc0) == 0xc0)
            return pos + 2 <= len ? pos + 2 : 0;
        if (c & 0xc0)
            return 0;
        pos += 1 + (size_t)c;
    }
    return 0;
}

/* Walks the answer, authority and additional records that follow the question.
 * Well-formed records in the first two are ignored; the additional section may
 * hold at most one OPT, and nothing may follow the last record. */
static enum sp_dns_verdict parse_records(const uint8_t *msg, size_t len, size_t pos,
                                         unsigned skipped, unsigned additional,
                                         struct sp_dns_query *q)
{
    for (unsigned i = 0; i < skipped + additional; i++) {
        pos = skip_name(msg, len, pos);
        if (!pos || pos + 10 > len)
            return SP_DNS_FORMERR;
        uint16_t type = sp_get16(msg + pos);
        uint16_t rdlen = sp_get16(msg + pos + 8);
        size_t rdata = pos + 10;
        if (rdata + rdlen > len)
            return SP_DNS_FORMERR;
        if (type == TYPE_OPT) {
            if (i < skipped || q->edns) {
                q->edns = false;
                return SP_DNS_FORMERR;
            }
            q->edns_size = sp_get16(msg + pos + 2);
            q->edns_version = msg[pos + 5];
            q->edns_do = (msg[pos + 6] & 0x80) != 0;
            for (size_t o = rdata; o < rdata + rdlen;) {   /* options: code, length, data */
                if (o + 4 > rdata + rdlen || o + 4 + sp_get16(msg + o + 2) > rdata + rdlen) {
                    q->edns = false;
                    return SP_DNS_FORMERR;
                }
                o += 4 + (size_t)sp_get16(msg + o + 2);
            }
            q->edns = true;
        }
        pos = rdata + rdlen;
    }
    return pos == len ? SP_DNS_LOOKUP : SP_DNS_FORMERR;
}

enum sp_dns_verdict sp_dns_parse(const uint8_t *msg, size_t len, struct sp_dns_query *q)
{
    q->has_question = false;
    q->edns = false;
    q->edns_do = false;
    q->edns_version = 0;
    q->edns_size = 0;
    if (len < SP_DNS_HEADER_LEN || (msg[2] & QR))
        return SP_DNS_DROP;
    q->opcode = (msg[2] >> 3) & 0x0f;
    uint16_t qdcount = sp_get16(msg + 4);
    uint16_t ancount = sp_get16(msg + 6);
    uint16_t nscount = sp_get16(msg + 8);
    uint16_t arcount = sp_get16(msg + 10);

    if (qdcount > 1)
        return SP_DNS_DROP;        /* as Knot DNS: no answer to a question we cannot echo */
    if (qdcount == 0) {
        parse_records(msg, len, SP_DNS_HEADER_LEN, (unsigned)ancount + nscount, arcount, q);
        return SP_DNS_FORMERR;     /* with an OPT when a valid one came */
    }
    size_t pos = walk_labels(msg, len, SP_DNS_HEADER_LEN);
    if (pos == 1) {            /* compressed: decompressed, then hashed and summed */
        pos = parse_qname(msg, len, SP_DNS_HEADER_LEN, q);
        if (!pos || pos + 4 > len)
            return SP_DNS_FORMERR;
        memcpy(q->question + q->name_len, msg + pos, 4);
        q->question_len = (uint16_t)(q->name_len + 4);
        q->name_hash = sp_key_hash_padded(q->name_lower, q->name_len);
        q->question_sum = sp_csum_partial(q->question, q->question_len, 0);
    } else {
        if (!pos || pos + 4 > len)
            return SP_DNS_FORMERR;
        q->name_len = (uint8_t)(pos - SP_DNS_HEADER_LEN);
        q->question_len = (uint16_t)(q->name_len + 4);
        take_question(msg + SP_DNS_HEADER_LEN, msg + len, q);
    }
    q->qtype = sp_get16(msg + pos);
    q->qclass = sp_get16(msg + pos + 2);
    q->has_question = true;
    pos += 4;

    enum sp_dns_verdict v = (ancount | nscount | arcount) == 0
        ? (pos == len ? SP_DNS_LOOKUP : SP_DNS_FORMERR)
        : parse_records(msg, len, pos, (unsigned)ancount + nscount, arcount, q);
    if (v != SP_DNS_LOOKUP)
        return v;
    if (q->edns && q->edns_version != 0)
        return SP_DNS_BADVERS;
    if (q->opcode == OPCODE_NOTIFY || q->opcode == OPCODE_UPDATE)
        return SP_DNS_NOTAUTH;    /* known operations this server permits to nobody */
    if (q->opcode != 0 || q->qtype == 0)
        return SP_DNS_NOTIMP;
    if (q->qtype == TYPE_IXFR || q->qtype == TYPE_AXFR)
        return SP_DNS_TRANSFER;
    if (q->qclass != CLASS_IN && q->qclass != CLASS_CH && q->qclass != CLASS_ANY)
        return SP_DNS_REFUSED;
    return SP_DNS_LOOKUP;
}

size_t sp_dns_udp_limit(const struct sp_dns_query *q, const struct sp_dns_config *cfg)
{
    if (!q->edns || q->edns_size <= SP_DNS_UDP_MIN)
        return SP_DNS_UDP_MIN;
    return q->edns_size < cfg->max_udp ? q->edns_size : cfg->max_udp;
}

const struct sp_response *sp_dns_lookup(const struct sp_table *t, const struct sp_dns_query *q)
{
    const struct sp_response *r;
    uint16_t qclass = q->qclass == CLASS_ANY ? CLASS_IN : q->qclass;
    r = sp_table_find_hashed(t, sp_dns_tag(SP_DNS_EXACT, qclass, q->qtype), q->name_hash,
                             q->name_lower, q->name_len);
    if (r)
        return r;
    r = sp_table_find_hashed(t, sp_dns_tag(SP_DNS_OTHER, qclass, 0), q->name_hash,
                             q->name_lower, q->name_len);
    if (r)
        return r;
    /* Closest encloser first: every ancestor, ending with the root label. */
    for (size_t off = 0; q->name_lower[off] != 0;) {
        off += 1 + (size_t)q->name_lower[off];
        const uint8_t *suffix = q->name_lower + off;
        size_t n = q->name_len - off;
        uint64_t h = sp_key_hash_padded(suffix, n);
        r = sp_table_find_hashed(t, sp_dns_tag(SP_DNS_BELOW_OTHER, qclass, 0), h, suffix, n);
        if (!r)
            continue;
        if (r->user & SP_DNS_USER_WILDCARD) {
            const struct sp_response *w =
                sp_table_find_hashed(t, sp_dns_tag(SP_DNS_BELOW, qclass, q->qtype), h, suffix, n);
            if (w)
                return w;
        }
        return r;
    }
    return NULL;
}

/* The response OPT: our payload size, the client's DO bit, the upper bits of an
 * extended rcode, and Extended DNS Error 20 on REFUSED (as Knot does). */
#define EDE_LEN 6u
#define RCODE_REFUSED_NO_ZONE 0x1005   /* REFUSED with EDE 20; internal only */

static size_t opt_len(uint16_t rcode)
{
    return SP_DNS_OPT_LEN + (rcode == RCODE_REFUSED_NO_ZONE ? EDE_LEN : 0u);
}

static size_t write_opt(uint8_t *p, const struct sp_dns_query *q, const struct sp_dns_config *cfg,
                        uint16_t rcode)
{
    p[0] = 0;
    sp_put16(p + 1, TYPE_OPT);
    sp_put16(p + 3, cfg->max_udp);
    p[5] = rcode == RCODE_REFUSED_NO_ZONE ? 0 : (uint8_t)(rcode >> 4);
    p[6] = 0;
    p[7] = q->edns_do ? 0x80 : 0;
    p[8] = 0;
    sp_put16(p + 9, 0);
    if (rcode == RCODE_REFUSED_NO_ZONE) {
        sp_put16(p + 9, EDE_LEN);
        sp_put16(p + 11, OPT_EDE);
        sp_put16(p + 13, 2);
        sp_put16(p + 15, EDE_NOT_AUTHORITATIVE);
    }
    return opt_len(rcode);
}

/* An answer made on the spot: header, the question when it parsed, OPT when the
 * query had one. Carries no data, whatever the table holds. */
static size_t write_error(const uint8_t *msg, const struct sp_dns_query *q,
                          const struct sp_dns_config *cfg, uint16_t rcode, uint8_t *out, size_t cap)
{
    size_t qlen = q->has_question ? q->question_len : 0;
    size_t need = SP_DNS_HEADER_LEN + qlen + (q->edns ? opt_len(rcode) : 0);
    if (need > cap)
        return 0;
    memcpy(out, msg, 2);
    out[2] = (uint8_t)(QR | (msg[2] & 0x78) | (msg[2] & RD));
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

/* The response does not fit: header and question only, TC set, so the client
 * retries over TCP. */
static size_t write_truncated(const struct sp_table *t, const struct sp_response *r,
                              const uint8_t *msg, const struct sp_dns_query *q,
                              const struct sp_dns_config *cfg, uint8_t *out, size_t cap)
{
    size_t need = SP_DNS_HEADER_LEN + q->question_len + (q->edns ? SP_DNS_OPT_LEN : 0);
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
    if (n)
        c->zone[SP_DNS_USER_ZONE(r->user)]++;
    return count_rcode(c, SP_DNS_USER_RCODE(r->user), n);
}

size_t sp_dns_full_len(const struct sp_response *r, const struct sp_dns_query *q,
                       const struct sp_dns_config *cfg, size_t cap)
{
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

/* The answer's sum from the table's stored sums and the question's (dns.h). */
static inline uint32_t table_sum(const struct sp_table *t, const struct sp_response *r,
                                 const struct sp_request *req, const struct sp_dns_query *q)
{
    if (r->insert_field == SP_DNS_FIELD_QUESTION)
        return sp_response_sum_with(t, r, req, q->question_sum);
    return sp_response_sum(t, r, req);
}

/* r rendered whole for q, when r has the DNS patch list (its head echoed, the question
 * spliced in at 12: the compiler's): the renderer specialised to that list, with
 * fixed-size copies and no patch loop. 0 when it does not fit or r is another shape
 * (sp_response_render_prefix() then). */
static inline size_t render_dns(const struct sp_table *t, const struct sp_response *r,
                                const uint8_t *msg, const struct sp_dns_query *q, uint8_t *out,
                                size_t cap)
{
    size_t qlen = q->question_len, tail = r->len - SP_DNS_HEADER_LEN;
    if (!r->echo_head || r->insert_at != SP_DNS_HEADER_LEN ||
        r->insert_field != SP_DNS_FIELD_QUESTION || r->len + qlen > cap)
        return 0;
    const uint8_t *b = sp_response_bytes(t, r);
    uint64_t w;
    uint32_t w4;
    memcpy(&w, b, 8);
    memcpy(out, &w, 8);
    memcpy(&w4, b + 8, 4);
    memcpy(out + 8, &w4, 4);
    out[0] = msg[0];
    out[1] = msg[1];
    out[2] = (uint8_t)((out[2] & ~r->echo_mask[0]) | (msg[2] & r->echo_mask[0]));
    out[3] = (uint8_t)((out[3] & ~r->echo_mask[1]) | (msg[3] & r->echo_mask[1]));
    if (tail >= 8) {   /* the question in whole words: the tail overwrites what passes it */
        for (size_t i = 0; i < qlen; i += 8) {
            memcpy(&w, q->question + i, 8);
            memcpy(out + SP_DNS_HEADER_LEN + i, &w, 8);
        }
    } else {
        sp_copy_short(out + SP_DNS_HEADER_LEN, q->question, qlen);
    }
    sp_copy_short(out + SP_DNS_HEADER_LEN + qlen, b + SP_DNS_HEADER_LEN, tail);
    return r->len + qlen;
}

/* An answer from the table's response r: whole, without its additional section, or
 * truncated; with an OPT record when the query had one. */
static inline __attribute__((always_inline)) size_t
answer_from_table(const struct sp_table *t, const struct sp_dns_config *cfg, const uint8_t *msg,
                  size_t len, bool tcp, uint8_t *out, size_t cap, struct sp_dns_query *q,
                  enum sp_dns_verdict verdict, const struct sp_response *r,
                  struct sp_dns_counters *c, uint32_t *sum)
{
    size_t limit = tcp ? 65535 : sp_dns_udp_limit(q, cfg);
    if (limit > cap)
        limit = cap;
    size_t opt = q->edns ? SP_DNS_OPT_LEN : 0;
    if (verdict == SP_DNS_SLIP)
        return count_answer(c, r, summed(out, write_truncated(t, r, msg, q, cfg, out, limit), sum));
    size_t stored = r->len;
    if (stored + q->question_len + opt > limit) {
        /* Optional additional records go first; then the whole answer, with TC. */
        stored = SP_DNS_USER_DROPPABLE(r->user);
        if (!stored || stored + q->question_len + opt > limit) {
            c->truncated++;
            return count_answer(c, r, summed(out, write_truncated(t, r, msg, q, cfg, out, limit), sum));
        }
    }

    struct sp_request req = {
        .field = {msg, q->question},
        .field_len = {(uint16_t)len, q->question_len},
    };
    size_t n = stored == r->len ? render_dns(t, r, msg, q, out, limit - opt) : 0;
    if (!n)
        n = sp_response_render_prefix(t, r, &req, stored, out, limit - opt);
    if (!n)
        return count_answer(c, r, 0);
    if (stored != r->len) {
        sp_put16(out + 10, 0);
        if (opt)
            n += write_opt(out + n, q, cfg, 0);
        sp_put16(out + 10, opt ? 1 : 0);
        return count_answer(c, r, summed(out, n, sum));
    }
    if (opt) {
        uint16_t arcount = sp_get16(out + 10);
        sp_put16(out + 10, (uint16_t)(arcount + 1));
        write_opt(out + n, q, cfg, 0);
        if (sum && arcount != 0xffff) {   /* ARCOUNT one more (an even offset), the OPT at n */
            uint32_t opt_sum = sp_csum_partial(out + n, opt, 0);
            *sum = sp_csum_add(sp_csum_add(table_sum(t, r, &req, q), 1),
                               n & 1 ? sp_csum_swap(opt_sum) : opt_sum);
        } else {
            summed(out, n + opt, sum);
        }
        return count_answer(c, r, n + opt);
    }
    if (sum)
        *sum = table_sum(t, r, &req, q);
    return count_answer(c, r, n);
}

/* An answer made on the spot (write_error), counted under rcode. */
static inline size_t error_answer(const uint8_t *msg, const struct sp_dns_query *q,
                                  const struct sp_dns_config *cfg, uint16_t rcode, uint16_t why,
                                  uint8_t *out, size_t cap, struct sp_dns_counters *c,
                                  uint32_t *sum)
{
    return count_rcode(c, rcode, summed(out, write_error(msg, q, cfg, why, out, cap), sum));
}

/* sp_dns_answer_parsed(), and the answer's checksum when sum is not NULL. */
static inline __attribute__((always_inline)) size_t
answer(const struct sp_table *t, const struct sp_dns_config *cfg, const uint8_t *msg, size_t len,
       bool tcp, uint8_t *out, size_t cap, struct sp_dns_query *q, enum sp_dns_verdict verdict,
       const struct sp_response *r, struct sp_dns_counters *c, uint32_t *sum)
{
    c->queries++;
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
        uint16_t rcode = q->qtype == TYPE_AXFR && !tcp ? SP_RCODE_NOTIMP : SP_RCODE_NOTAUTH;
        return error_answer(msg, q, cfg, rcode, rcode, out, cap, c, sum);
    }
    case SP_DNS_BADVERS:
        return error_answer(msg, q, cfg, SP_RCODE_BADVERS, SP_RCODE_BADVERS, out, cap, c, sum);
    case SP_DNS_REFUSED:
        return error_answer(msg, q, cfg, SP_RCODE_REFUSED, SP_RCODE_REFUSED, out, cap, c, sum);
    }

    if (!r) {
        uint16_t why = q->qclass == CLASS_CH ? SP_RCODE_REFUSED : RCODE_REFUSED_NO_ZONE;
        return error_answer(msg, q, cfg, SP_RCODE_REFUSED, why, out, cap, c, sum);
    }
    return answer_from_table(t, cfg, msg, len, tcp, out, cap, q, verdict, r, c, sum);
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
#define MEASURED __attribute__((noinline))
#else
#define MEASURED __attribute__((noinline, noclone))
#endif

MEASURED size_t
sp_dns_answer(const struct sp_table *t, const struct sp_dns_config *cfg, const uint8_t *msg,
              size_t len, bool tcp, uint8_t *out, size_t cap, struct sp_dns_query *q,
              struct sp_dns_counters *c)
{
    enum sp_dns_verdict v = sp_dns_parse(msg, len, q);
    const struct sp_response *r = v == SP_DNS_LOOKUP ? sp_dns_lookup(t, q) : NULL;
    return answer(t, cfg, msg, len, tcp, out, cap, q, v, r, c, NULL);
}
