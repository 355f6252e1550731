/* A DNAME's answer (RFC 6672) completed for the name asked: the one DNS answer whose
 * bytes depend on the question beyond the question itself. See dns.h,
 * SP_DNS_USER_DNAME: the compiler stores the DNAME's records with the synthesized
 * CNAME last, owned by the question (0xC00C) and holding the DNAME's target; here the
 * asked name's labels above the DNAME's owner go in front of that target. */
#include "stormpy/app/dns/dns.h"

#include <string.h>

#include "stormpy/proto/wire.h"

#define TYPE_CNAME 5
#define RR_FIXED 10u   /* type, class, TTL, RDLENGTH */
#define RD 0x01
#define CD 0x10

/* The length of the uncompressed name at b[off], within len; 0 if it is not one. */
static size_t name_len(const uint8_t *b, size_t off, size_t len)
{
    size_t start = off;
    while (off < len && b[off] != 0) {
        if (b[off] > 63)
            return 0;
        off += 1 + (size_t)b[off];
    }
    return off < len ? off + 1 - start : 0;
}

/* The offset of the last answer record in the stored response, 0 if it cannot be
 * walked (the compiler's records only: each owner a name or a 2-byte pointer). */
static size_t last_answer(const uint8_t *b, size_t len, unsigned ancount)
{
    size_t off = SP_DNS_HEADER_LEN, last = 0;
    for (unsigned i = 0; i < ancount; i++) {
        last = off;
        size_t owner = off + 1 < len && (b[off] & 0xc0) == 0xc0 ? 2 : name_len(b, off, len);
        if (!owner || off + owner + RR_FIXED > len)
            return 0;
        off += owner + RR_FIXED + sp_get16(b + off + owner + 8);
        if (off > len)
            return 0;
    }
    return last;
}

size_t sp_dns_dname_render(const struct sp_table *t, const struct sp_response *r,
                           const uint8_t *msg, const struct sp_dns_query *q, uint8_t *out,
                           size_t cap)
{
    const uint8_t *b = sp_response_bytes(t, r);
    size_t len = r->len, qlen = q->question_len;
    unsigned ancount = sp_get16(b + 6);
    size_t owner = name_len(b, SP_DNS_HEADER_LEN, len);       /* the DNAME's owner */
    size_t cname = ancount >= 2 ? last_answer(b, len, ancount) : 0;
    if (!owner || !cname || owner > q->name_len || b[cname] != 0xc0 || b[cname + 1] != 0x0c ||
        sp_get16(b + cname + 2) != TYPE_CNAME)
        return 0;
    size_t rdata = cname + 2 + RR_FIXED, target = sp_get16(b + rdata - 2);
    size_t prefix = q->name_len - owner;     /* the asked labels above the owner */
    bool too_long = prefix + target > SP_DNS_NAME_MAX;
    /* YXDOMAIN: the records before the CNAME only */
    size_t n = too_long ? SP_DNS_HEADER_LEN + qlen + (cname - SP_DNS_HEADER_LEN)
                        : len + qlen + prefix;
    if (n > cap)
        return 0;
    memcpy(out, b, SP_DNS_HEADER_LEN);
    memcpy(out, msg, 2);
    out[2] = (uint8_t)((out[2] & ~RD) | (msg[2] & RD));
    out[3] = (uint8_t)((out[3] & ~CD) | (msg[3] & CD));
    memcpy(out + SP_DNS_HEADER_LEN, q->question, qlen);
    uint8_t *p = out + SP_DNS_HEADER_LEN + qlen;
    if (too_long) {
        out[3] = (uint8_t)((out[3] & 0xf0) | SP_RCODE_YXDOMAIN);
        sp_put16(out + 6, (uint16_t)(ancount - 1));
        sp_put16(out + 8, 0);
        sp_put16(out + 10, 0);
        memcpy(p, b + SP_DNS_HEADER_LEN, cname - SP_DNS_HEADER_LEN);
        return n;
    }
    memcpy(p, b + SP_DNS_HEADER_LEN, rdata - SP_DNS_HEADER_LEN);
    p += rdata - SP_DNS_HEADER_LEN;
    sp_put16(p - 2, (uint16_t)(prefix + target));
    memcpy(p, q->question, prefix);
    memcpy(p + prefix, b + rdata, len - rdata);
    return n;
}
