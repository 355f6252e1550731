/* The DNSSEC form of an answer below an ancestor in an NSEC-signed zone: its proof
 * (the NSEC covering the name asked) depends on where the name falls among the
 * ancestor's children, so the compiler stores one form per gap between them and a
 * gap list to choose it (dns.h, SP_DNS_USER_GAPS). */
#include "stormpy/app/dns/dns.h"

#include <string.h>

#include "stormpy/proto/wire.h"

static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)sp_get16(p) << 16 | sp_get16(p + 2);
}

/* RFC 4034 section 6.1: labels compare as lower-case octet strings, a shorter one
 * first when it is a prefix of the other. a and b are length-prefixed. */
static int label_cmp(const uint8_t *a, const uint8_t *b)
{
    size_t n = a[0] < b[0] ? a[0] : b[0];
    int c = memcmp(a + 1, b + 1, n);
    return c ? c : (int)a[0] - (int)b[0];
}

const struct sp_response *sp_dns_gap_pick(const struct sp_table *t, const struct sp_response *list,
                                          const uint8_t *label)
{
    const uint8_t *b = sp_response_bytes(t, list);
    size_t entries = list->len / SP_DNS_GAP_ENTRY;
    if (!entries)
        return NULL;
    /* the last entry whose bound is at or below label; the first one's is empty */
    size_t lo = 0, hi = entries;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (label_cmp(b + mid * SP_DNS_GAP_ENTRY + 4, label) <= 0)
            lo = mid;
        else
            hi = mid;
    }
    return sp_table_response(t, get32(b + lo * SP_DNS_GAP_ENTRY));
}
