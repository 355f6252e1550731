/* The lookup order (dns.h): a parsed query's keys in the response table, the name's own
 * first, then its ancestors'; and sp_dns_find(), which parses and looks up at once,
 * taking the usual query's name unchecked where a key can prove it (parse.c). */
#include "stormpy/app/dns/dns.h"

#include <stddef.h>

/* r, or its DNSSEC form for a query with DO: the compiler stores it next (dns.h). A
 * query without DO pays one test of a byte the parser wrote. */
static inline const struct sp_response *signed_form(const struct sp_response *r,
                                                    const struct sp_dns_query *q)
{
    return __builtin_expect(q->edns_do, 0) && (r->user & SP_DNS_USER_SIGNED) ? r + 1 : r;
}

/* The DNSSEC form of r (signed) below the ancestor at offset `suffix` of the name: out of
 * line, as only queries with DO to a signed zone want it. */
static __attribute__((noinline, cold)) const struct sp_response *
signed_form_below(const struct sp_table *t, const struct sp_response *r,
                  const struct sp_dns_query *q, size_t suffix)
{
    const struct sp_response *s = r + 1;
    if (s->user & SP_DNS_USER_GAPS) {
        size_t label = 0;        /* found again here, not carried through the walk */
        while (label + 1 + q->name_lower[label] < suffix)
            label += 1 + (size_t)q->name_lower[label];
        s = sp_dns_gap_pick(t, s, q->name_lower + label);
    }
    return s ? s : r;
}

/* signed_form() below the ancestor at offset `suffix` of the name, where the form may
 * be a gap list chosen by the asked name's label just below the ancestor (nsec.c). */
static inline const struct sp_response *signed_below(const struct sp_table *t,
                                                     const struct sp_response *r,
                                                     const struct sp_dns_query *q, size_t suffix)
{
    if (__builtin_expect(!q->edns_do, 1) || !(r->user & SP_DNS_USER_SIGNED))
        return r;
    return signed_form_below(t, r, q, suffix);
}

static inline uint16_t lookup_class(const struct sp_dns_query *q)
{
    return q->qclass == SP_DNS_CLASS_ANY ? SP_DNS_CLASS_IN : q->qclass;
}

/* The name's OTHER key: its other types (NODATA), a CNAME, a cut. */
static inline const struct sp_response *lookup_other(const struct sp_table *t,
                                                     const struct sp_dns_query *q)
{
    const struct sp_response *r = sp_table_find_hashed(
        t, sp_dns_tag(SP_DNS_OTHER, lookup_class(q), 0), q->name_hash, q->name_lower, q->name_len);
    return r ? signed_form(r, q) : NULL;
}

/* The lookup order after the name's own keys found nothing (dns.h): the closest
 * encloser first, every ancestor, ending with the root label. */
static inline const struct sp_response *lookup_ancestors(const struct sp_table *t,
                                                         const struct sp_dns_query *q)
{
    const struct sp_response *r;
    uint16_t qclass = lookup_class(q);
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
                return signed_below(t, w, q, off);
        }
        return signed_below(t, r, q, off);
    }
    return NULL;
}

static inline const struct sp_response *lookup_rest(const struct sp_table *t,
                                                    const struct sp_dns_query *q)
{
    const struct sp_response *r = lookup_other(t, q);
    return r ? r : lookup_ancestors(t, q);
}

static inline const struct sp_response *lookup_exact(const struct sp_table *t,
                                                     const struct sp_dns_query *q)
{
    const struct sp_response *r =
        sp_table_find_hashed(t, sp_dns_first_tag(q), q->name_hash, q->name_lower, q->name_len);
    return r ? signed_form(r, q) : NULL;
}

const struct sp_response *sp_dns_lookup(const struct sp_table *t, const struct sp_dns_query *q)
{
    const struct sp_response *r = lookup_exact(t, q);
    return r ? r : lookup_rest(t, q);
}

/* A name sp_dns_parse_unchecked() took that is not one: the query parsed again, and
 * looked up when it is (a compressed name) one. */
static __attribute__((noinline, cold)) const struct sp_response *
find_again(const struct sp_table *t, const uint8_t *msg, size_t len, struct sp_dns_query *q,
           enum sp_dns_verdict *verdict)
{
    *verdict = sp_dns_parse_again(msg, len, q);
    return *verdict == SP_DNS_LOOKUP ? sp_dns_lookup(t, q) : NULL;
}

/* sp_dns_find() inlined: the name's keys may be probed before its labels are walked,
 * since a key equal to it proves it well-formed; the ancestors' may not. */
static inline __attribute__((always_inline)) const struct sp_response *
find(const struct sp_table *t, const uint8_t *msg, size_t len, struct sp_dns_query *q,
     bool with_sum, enum sp_dns_verdict *verdict)
{
    *verdict = sp_dns_parse_unchecked(msg, len, q, with_sum);
    if (*verdict != SP_DNS_LOOKUP)
        return NULL;
    const struct sp_response *r = lookup_exact(t, q);
    if (r || (r = lookup_other(t, q)))
        return r;
    if (!sp_dns_name_well_formed(q)) {
        enum sp_dns_verdict again;      /* not *verdict: its address would escape */
        r = find_again(t, msg, len, q, &again);
        *verdict = again;
        return r;
    }
    return lookup_ancestors(t, q);
}

const struct sp_response *sp_dns_find(const struct sp_table *t, const uint8_t *msg, size_t len,
                                      struct sp_dns_query *q, bool with_sum,
                                      enum sp_dns_verdict *verdict)
{
    return find(t, msg, len, q, with_sum, verdict);
}

const struct sp_response *sp_dns_lookup_first(const struct sp_table *t,
                                              const struct sp_dns_query *q, uint64_t first_hash,
                                              const struct sp_table_hint *hint)
{
    const struct sp_response *r = sp_table_find_tagged(t, sp_dns_first_tag(q), first_hash,
                                                       q->name_lower, q->name_len, hint);
    return r ? signed_form(r, q) : NULL;
}

void sp_dns_prefetch_rest(const struct sp_table *t, const struct sp_dns_query *q,
                          uint64_t hashes[2])
{
    uint16_t qclass = lookup_class(q);
    hashes[0] = sp_table_prefetch_slot(t, sp_dns_tag(SP_DNS_OTHER, qclass, 0), q->name_hash);
    hashes[1] = 0;
    if (q->name_lower[0] == 0)
        return;
    size_t off = 1 + (size_t)q->name_lower[0];
    hashes[1] = sp_table_prefetch_slot(t, sp_dns_tag(SP_DNS_BELOW_OTHER, qclass, 0),
                                       sp_key_hash_padded(q->name_lower + off, q->name_len - off));
}

const struct sp_response *sp_dns_lookup_rest(const struct sp_table *t,
                                             const struct sp_dns_query *q)
{
    return lookup_rest(t, q);
}
