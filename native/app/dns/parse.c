/* DNS query parsing: the header, the question (copied, lower-cased, hashed and summed
 * in one pass), the records after it. See dns.h. */
#include "stormpy/app/dns/dns.h"

#include <string.h>

#include "stormpy/proto/csum.h"
#include "stormpy/proto/wire.h"

#define OPCODE_UPDATE 5
#define COOKIE_OPTION_LEN (4u + 8u)   /* code, length, a client cookie alone */

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

/* lower8() of 16 bytes at once, in vector registers where the target has them (SSE2 on
 * every x86-64, NEON on 64-bit Arm: about half the instructions of two lower8() calls);
 * elsewhere the compiler writes it out in plain code, with the same result. */
typedef uint8_t bytes16 __attribute__((vector_size(16)));
typedef int8_t signed16 __attribute__((vector_size(16)));

/* 'A'..'Z' moved to the bottom of the signed bytes (-128..-103): one signed compare
 * finds them, where an unsigned one takes SSE2 two instructions more. */
static inline bytes16 lower16(bytes16 v)
{
    signed16 moved = (signed16)(v + (uint8_t)(0x80 - 'A'));
    bytes16 upper = (bytes16)(moved < (int8_t)(-128 + 26));   /* all ones at 'A'..'Z' */
    return v | (upper & 0x20);
}

typedef uint64_t words2 __attribute__((vector_size(16)));

/* lower8() in a vector register: on x86-64 fewer instructions than the word's own
 * arithmetic with its four 64-bit constants. */
static inline uint64_t lower8_in_vector(uint64_t v)
{
    words2 x = {v, 0};      /* built in the register: a memcpy() went through the stack */
    return ((words2)lower16((bytes16)x))[0];
}

/* Reads the question name at pos into q, decompressing. Each pointer must point
 * before the previous one's target, so a pointer chain always ends. Returns the
 * offset just past the name in the message, or 0 when malformed. */
static __attribute__((noinline, cold)) size_t
parse_qname(const uint8_t *msg, size_t len, size_t pos, struct sp_dns_query *q)
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

/* A question whose name is shorter than 8 bytes (the root, a TLD): its name, type and
 * class in one or two words, loaded in bounds. */
static inline __attribute__((always_inline)) uint64_t
take_short_question(const uint8_t *p, const uint8_t *end, struct sp_dns_query *q, bool with_sum)
{
    size_t name_len = q->name_len, rest = name_len + 4;
    uint64_t v = rest >= 8 ? (memcpy(&v, p, 8), v) : load_last(p, rest, end), lower, acc;
    memcpy(q->question, &v, 8);
    acc = sp_csum_acc_word(0, v);
    lower = lower8_in_vector(v);
    memcpy(q->name_lower, &lower, 8);
    q->name_hash = sp_key_hash_word(sp_key_hash_start(name_len), sp_keep_bytes(lower, name_len));
    if (rest > 8) {
        v = load_last(p + 8, rest - 8, end);
        memcpy(q->question + 8, &v, 8);
        acc = sp_csum_acc_word(acc, v);
    }
    if (with_sum)
        q->question_sum = sp_csum_acc_done(acc);
    return acc;
}

/* The question at p (q->question_len bytes before end): copied as sent, its name
 * lower-cased and hashed for the table (as sp_key_hash_padded(): the name's last 8
 * bytes overlap the word before), and (with_sum) the whole summed for the reply's
 * checksum, in one pass of 16 bytes at a time, then 8, then the name's last word. */
static inline __attribute__((always_inline)) uint64_t
take_question(const uint8_t *p, const uint8_t *end, struct sp_dns_query *q, bool with_sum)
{
    size_t name_len = q->name_len, i = 0;
    if (__builtin_expect(name_len < 8, 0))
        return take_short_question(p, end, q, with_sum);
    uint64_t h = sp_key_hash_start(name_len), acc = 0, v, lower;
    for (; i + 16 < name_len; i += 16) {         /* the name's 16-byte pieces */
        bytes16 raw, low;
        memcpy(&raw, p + i, 16);
        memcpy(q->question + i, &raw, 16);
        low = lower16(raw);
        memcpy(q->name_lower + i, &low, 16);
        uint64_t first, second;   /* from the message again: out of raw, via the stack */
        memcpy(&first, p + i, 8);
        memcpy(&second, p + i + 8, 8);
        words2 lows = (words2)low;
        acc = sp_csum_acc_word(sp_csum_acc_word(acc, first), second);
        h = sp_key_hash_word(sp_key_hash_word(h, lows[0]), lows[1]);
    }
    if (i + 8 < name_len) {                      /* a whole word before the last */
        memcpy(&v, p + i, 8);
        memcpy(q->question + i, &v, 8);
        acc = sp_csum_acc_word(acc, v);
        lower = lower8_in_vector(v);
        memcpy(q->name_lower + i, &lower, 8);
        h = sp_key_hash_word(h, lower);
        i += 8;
    }
    /* the name's last 8 bytes (1 to 8 of them new), then type and class */
    memcpy(&v, p + name_len - 8, 8);
    memcpy(q->question + name_len - 8, &v, 8);
    lower = lower8_in_vector(v);
    memcpy(q->name_lower + name_len - 8, &lower, 8);
    q->name_hash = sp_key_hash_word(h, lower);
    uint32_t type_class;
    memcpy(&type_class, p + name_len, 4);
    memcpy(q->question + name_len, &type_class, 4);
    if (!with_sum)
        return 0;
    /* Bytes [i, name_len) are v's last d (an even offset, as i); type and class follow
     * at name_len, placed one byte up in their word at an odd offset: each byte summed
     * at its offset's parity, which is all the sum sees of where it is. */
    size_t d = name_len - i;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    acc = sp_csum_acc_word(acc, v >> (64 - 8 * d));
    acc = sp_csum_acc_word(acc, (uint64_t)type_class << (8 * (name_len & 1)));
#else
    acc = sp_csum_acc_word(acc, v << (64 - 8 * d));
    acc = sp_csum_acc_word(acc, ((uint64_t)type_class << 32) >> (8 * (name_len & 1)));
#endif
    q->question_sum = sp_csum_acc_done(acc);
    return acc;
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
        if (type == SP_DNS_TYPE_OPT) {
            if (i < skipped || q->edns) {
                q->edns = false;
                q->nsid = false;
                return SP_DNS_FORMERR;
            }
            q->edns_size = sp_get16(msg + pos + 2);
            q->edns_version = msg[pos + 5];
            q->edns_do = (msg[pos + 6] & 0x80) != 0;
            for (size_t o = rdata; o < rdata + rdlen;) {   /* options: code, length, data */
                if (o + 4 > rdata + rdlen || o + 4 + sp_get16(msg + o + 2) > rdata + rdlen) {
                    q->edns = false;
                    q->nsid = false;
                    return SP_DNS_FORMERR;
                }
                q->nsid |= sp_get16(msg + o) == SP_DNS_OPTION_NSID;
                o += 4 + (size_t)sp_get16(msg + o + 2);
            }
            q->edns = true;
        }
        pos = rdata + rdlen;
    }
    return pos == len ? SP_DNS_LOOKUP : SP_DNS_FORMERR;
}

static enum sp_dns_verdict unusual_verdict(const struct sp_dns_query *q);

/* The OPT record most queries end with, read without parse_records()'s walk: the only
 * record after the question, owned by the root, ending the message, with no options or
 * one (a cookie, as dig sends) that is not NSID. False for any other, which
 * parse_records() then reads. */
static inline bool usual_opt(const uint8_t *msg, size_t len, size_t pos, struct sp_dns_query *q)
{
    static const uint8_t only_opt[6] = {0, 0, 0, 0, 0, 1};
    const uint8_t *opt = msg + pos;
    if (len - pos < SP_DNS_OPT_LEN || memcmp(msg + 6, only_opt, 6) != 0 || opt[0] != 0 ||
        sp_get16(opt + 1) != SP_DNS_TYPE_OPT)
        return false;
    size_t rdlen = sp_get16(opt + 9);
    if (len - pos != SP_DNS_OPT_LEN + rdlen ||
        (rdlen && (rdlen < 4 || 4u + sp_get16(opt + SP_DNS_OPT_LEN + 2) != rdlen ||
                   sp_get16(opt + SP_DNS_OPT_LEN) == SP_DNS_OPTION_NSID)))
        return false;
    q->edns_size = sp_get16(opt + 3);
    q->edns_version = opt[6];
    q->edns_do = (opt[7] & 0x80) != 0;
    q->edns = true;
    return true;
}

/* Where the usual query's name ends (its type's offset), found from the message's end
 * without walking the name (sp_dns_parse_unchecked()): with the question alone, 4
 * bytes before it; with an OPT after it, before the OPT that usual_opt() reads there,
 * one with no option or with a client cookie. 0 for any other query, which is walked.
 * alone: the header's counts of a question alone; opt_bit: an additional record's. */
static inline size_t name_end_unchecked(const uint8_t *msg, size_t len, uint64_t counts,
                                        uint64_t alone, uint64_t opt_bit, struct sp_dns_query *q)
{
    size_t end = len - 4;
    if (counts == alone)
        return end - (SP_DNS_HEADER_LEN + 1) < SP_DNS_NAME_MAX ? end : 0;
    if (counts != (alone | opt_bit) || len < SP_DNS_HEADER_LEN + 1 + 4 + SP_DNS_OPT_LEN)
        return 0;
    end -= SP_DNS_OPT_LEN;                         /* no option: RDLENGTH 0 ends it */
    if (msg[len - 1] | msg[len - 2])
        end -= COOKIE_OPTION_LEN;
    if (end - (SP_DNS_HEADER_LEN + 1) >= SP_DNS_NAME_MAX)
        return 0;
    return usual_opt(msg, len, end + 4, q) ? end : 0;
}

/* parse_records() from pos with the header's counts. */
static inline enum sp_dns_verdict records_after(const uint8_t *msg, size_t len, size_t pos,
                                               struct sp_dns_query *q)
{
    if (usual_opt(msg, len, pos, q))
        return SP_DNS_LOOKUP;
    return parse_records(msg, len, pos, (unsigned)sp_get16(msg + 6) + sp_get16(msg + 8),
                         sp_get16(msg + 10), q);
}

static __attribute__((noinline, cold)) enum sp_dns_verdict
unusual_unchecked(const uint8_t *msg, size_t len, struct sp_dns_query *q);

/* The usual query in one test: a QUERY in class IN, EDNS version 0 if any (both in
 * opcode_version: a version is only kept with a valid OPT), a type below IXFR that is
 * not 0. */
static inline bool usual_lookup(uint8_t opcode_version, uint16_t qclass, uint16_t qtype)
{
    return opcode_version == 0 && qclass == SP_DNS_CLASS_IN &&
           (uint16_t)(qtype - 1) < SP_DNS_TYPE_IXFR - 1;
}

/* The question sent without a pointer, its name ending at pos: take_question(), and
 * (with_sum) the whole message's sum: the header, and what follows the question. */
static inline __attribute__((always_inline)) void
take_sent_question(const uint8_t *msg, size_t len, size_t pos, uint64_t counts,
                   struct sp_dns_query *q, bool with_sum)
{
    q->name_len = (uint8_t)(pos - SP_DNS_HEADER_LEN);
    q->question_len = (uint16_t)(q->name_len + 4);
    uint64_t acc = take_question(msg + SP_DNS_HEADER_LEN, msg + len, q, with_sum);
    if (!with_sum)
        return;
    uint32_t head;
    memcpy(&head, msg, 4);
    acc = sp_csum_acc_word(sp_csum_acc_word(acc, head), counts);
    if (pos + 4 < len) {     /* at an odd offset, byte-swapped */
        uint32_t rest = sp_csum_acc_reduce(sp_csum_acc(msg + pos + 4, len - pos - 4, 0));
        acc = sp_csum_acc_word(acc, pos & 1 ? sp_csum_swap16(rest) : rest);
    }
    q->message_acc = acc;
    q->message_summed = true;
}

/* sp_dns_parse(), and the question's sum when with_sum (a constant where inlined: a
 * reply the kernel checksums needs none); with unchecked, sp_dns_parse_unchecked(). */
static inline __attribute__((always_inline)) enum sp_dns_verdict
parse(const uint8_t *msg, size_t len, struct sp_dns_query *q, bool with_sum, bool unchecked)
{
    q->opcode = 0;           /* with the 7 below: the compiler's one 8-byte store */
    q->has_question = false;
    q->edns = false;
    q->edns_do = false;
    q->edns_version = 0;
    q->message_summed = false;
    q->edns_size = 0;
    q->nsid = false;
    if (len < SP_DNS_HEADER_LEN || (msg[2] & SP_DNS_QR))
        return SP_DNS_DROP;
    uint8_t opcode = (msg[2] >> 3) & 0x0f;     /* kept in locals too: stores through q */
    q->opcode = opcode;                         /* may alias it for the compiler */
    /* The usual counts (one question, an OPT or nothing after it) in one comparison;
     * the counts are read from the message again where they are needed, not kept. */
    static const uint8_t usual[8] = {0, 1, 0, 0, 0, 0, 0, 0}, ignored[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    uint64_t counts, usual_counts, ignored_bits;
    memcpy(&counts, msg + 4, 8);
    memcpy(&usual_counts, usual, 8);
    memcpy(&ignored_bits, ignored, 8);
    size_t end =
        unchecked ? name_end_unchecked(msg, len, counts, usual_counts, ignored_bits, q) : 0;
    if (end) {
        uint16_t qtype = sp_get16(msg + end), qclass = sp_get16(msg + end + 2);
        take_sent_question(msg, len, end, counts, q, with_sum);
        q->qtype = qtype;
        q->qclass = qclass;
        q->has_question = true;
        if (__builtin_expect(usual_lookup(opcode | q->edns_version, qclass, qtype), 1))
            return SP_DNS_LOOKUP;
        return unusual_unchecked(msg, len, q);
    }
    if (__builtin_expect((counts & ~ignored_bits) != usual_counts, 0)) {
        uint16_t qdcount = sp_get16(msg + 4);
        if (qdcount > 1)
            return SP_DNS_DROP;    /* as Knot DNS: no answer to a question we cannot echo */
        if (qdcount == 0) {
            records_after(msg, len, SP_DNS_HEADER_LEN, q);
            return SP_DNS_FORMERR; /* with an OPT when a valid one came */
        }
    }
    size_t pos = walk_labels(msg, len, SP_DNS_HEADER_LEN);
    if (pos == 1) {            /* compressed: decompressed, then hashed and summed */
        pos = parse_qname(msg, len, SP_DNS_HEADER_LEN, q);
        if (!pos || pos + 4 > len)
            return SP_DNS_FORMERR;
        memcpy(q->question + q->name_len, msg + pos, 4);
        q->question_len = (uint16_t)(q->name_len + 4);
        q->name_hash = sp_key_hash_padded(q->name_lower, q->name_len);
        if (with_sum)
            q->question_sum = sp_csum_partial(q->question, q->question_len, 0);
    } else {
        if (!pos || pos + 4 > len)
            return SP_DNS_FORMERR;
        take_sent_question(msg, len, pos, counts, q, with_sum);
    }
    uint16_t qtype = sp_get16(msg + pos), qclass = sp_get16(msg + pos + 2);
    q->qtype = qtype;
    q->qclass = qclass;
    q->has_question = true;
    pos += 4;

    static const uint8_t records[8] = {0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint64_t records_bits;
    memcpy(&records_bits, records, 8);
    enum sp_dns_verdict v = (counts & records_bits) == 0
        ? (pos == len ? SP_DNS_LOOKUP : SP_DNS_FORMERR)
        : records_after(msg, len, pos, q);
    if (v != SP_DNS_LOOKUP)
        return v;
    if (__builtin_expect(usual_lookup(opcode | q->edns_version, qclass, qtype), 1))
        return SP_DNS_LOOKUP;
    return unusual_verdict(q);
}

/* parse()'s unusual query, its name checked first where it was taken unchecked: no
 * lookup will prove it well-formed. */
static __attribute__((noinline, cold)) enum sp_dns_verdict
unusual_unchecked(const uint8_t *msg, size_t len, struct sp_dns_query *q)
{
    if (!sp_dns_name_well_formed(q))
        return sp_dns_parse_again(msg, len, q);
    return unusual_verdict(q);
}

/* The verdict on a well-formed query that is not the usual one (parse()): out of line,
 * so that the usual query's registers are not spent on it. */
static __attribute__((noinline, cold)) enum sp_dns_verdict
unusual_verdict(const struct sp_dns_query *q)
{
    if (q->edns && q->edns_version != 0)
        return SP_DNS_BADVERS;
    if (q->opcode == SP_DNS_OPCODE_NOTIFY || q->opcode == OPCODE_UPDATE)
        return SP_DNS_NOTAUTH;    /* known operations this server permits to nobody */
    if (q->opcode != 0 || q->qtype == 0)
        return SP_DNS_NOTIMP;
    if (q->qtype == SP_DNS_TYPE_IXFR || q->qtype == SP_DNS_TYPE_AXFR)
        return SP_DNS_TRANSFER;
    if (q->qclass != SP_DNS_CLASS_IN && q->qclass != SP_DNS_CLASS_CH &&
        q->qclass != SP_DNS_CLASS_ANY)
        return SP_DNS_REFUSED;
    return SP_DNS_LOOKUP;
}

enum sp_dns_verdict sp_dns_parse(const uint8_t *msg, size_t len, struct sp_dns_query *q)
{
    return parse(msg, len, q, false, false);
}

enum sp_dns_verdict sp_dns_parse_summed(const uint8_t *msg, size_t len, struct sp_dns_query *q)
{
    return parse(msg, len, q, true, false);
}

enum sp_dns_verdict sp_dns_parse_unchecked(const uint8_t *msg, size_t len,
                                           struct sp_dns_query *q, bool with_sum)
{
    return with_sum ? parse(msg, len, q, true, true) : parse(msg, len, q, false, true);
}

enum sp_dns_verdict sp_dns_parse_again(const uint8_t *msg, size_t len, struct sp_dns_query *q)
{
    return q->message_summed ? parse(msg, len, q, true, false) : parse(msg, len, q, false, false);
}
