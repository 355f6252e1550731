/* What ldns reads more leniently than dnspython. See read_check.h. Declining is
 * always safe (the Python loader then reads the file and judges it), so these
 * checks may be stricter than dnspython, never looser. */
#include "read_check.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "stormpy/proto/wire.h"

static bool all_digits(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return n > 0;
}

/* A decimal number of at most max; leading zeros are allowed, signs are not. */
static bool number_within(const char *p, size_t n, uint64_t max)
{
    uint64_t v = 0;
    if (!all_digits(p, n))
        return false;
    for (size_t i = 0; i < n; i++) {
        v = v * 10 + (uint64_t)(p[i] - '0');
        if (v > max)
            return false;
    }
    return true;
}

bool sp_zone_ttl_valid(const char *p, size_t n, uint32_t *ttl)
{
    uint64_t total = 0, current = 0;
    bool need_digit = true;
    if (all_digits(p, n)) {
        if (!number_within(p, n, UINT32_MAX))
            return false;
        for (size_t i = 0; i < n; i++)
            total = total * 10 + (uint64_t)(p[i] - '0');
        *ttl = (uint32_t)total;
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] >= '0' && p[i] <= '9') {
            current = current * 10 + (uint64_t)(p[i] - '0');
            need_digit = false;
            if (current > UINT32_MAX)
                return false;
            continue;
        }
        static const char units[] = "wdhms";
        static const uint32_t seconds[] = {604800, 86400, 3600, 60, 1};
        const char *u = need_digit ? NULL : strchr(units, tolower((unsigned char)p[i]));
        if (u == NULL || *u == 0)
            return false;
        total += current * seconds[u - units];
        current = 0;
        need_digit = true;
        if (total > UINT32_MAX)
            return false;
    }
    if (!need_digit || n == 0)   /* digits without a unit after units */
        return false;
    *ttl = (uint32_t)total;
    return true;
}

/* The next whitespace-separated token from *p (quotes and escapes kept inside it). */
static bool next_token(const char **p, const char **start, size_t *len)
{
    const char *s = *p;
    while (isspace((unsigned char)*s))
        s++;
    if (*s == 0)
        return false;
    const char *e = s;
    bool quoted = false;
    while (*e && (quoted || !isspace((unsigned char)*e))) {
        if (*e == '\\' && e[1])
            e++;
        else if (*e == '"')
            quoted = !quoted;
        e++;
    }
    *start = s;
    *len = (size_t)(e - s);
    *p = e;
    return true;
}

bool sp_zone_is_class(const char *p, size_t n)
{
    return (n == 2 && (!strncasecmp(p, "IN", 2) || !strncasecmp(p, "CH", 2) ||
                       !strncasecmp(p, "HS", 2))) ||
           (n > 5 && !strncasecmp(p, "CLASS", 5));
}

/* The rdata's tokens checked against the fields ldns read them into, as far as each
 * field is one token: numbers within their width, periods as TTLs are, an even
 * number of hex digits. */
static const char *fields_refused(const char *rest, const ldns_rr *rr)
{
    const char *tok;
    size_t n;
    for (size_t i = 0; i < ldns_rr_rd_count(rr); i++) {
        if (!next_token(&rest, &tok, &n))
            return NULL;
        if (i == 0 && n == 2 && tok[0] == '\\' && tok[1] == '#')
            return NULL;                       /* RFC 3597's generic form: lengths only */
        uint32_t unused;
        switch (ldns_rdf_get_type(ldns_rr_rdf(rr, i))) {
        case LDNS_RDF_TYPE_INT8:
            if (!number_within(tok, n, UINT8_MAX))
                return "a number that is not an unsigned 8-bit integer";
            break;
        case LDNS_RDF_TYPE_INT16:
            if (!number_within(tok, n, UINT16_MAX))
                return "a number that is not an unsigned 16-bit integer";
            break;
        case LDNS_RDF_TYPE_INT32:
            if (!number_within(tok, n, UINT32_MAX))
                return "a number that is not an unsigned 32-bit integer";
            break;
        case LDNS_RDF_TYPE_ALG:
        case LDNS_RDF_TYPE_CERTIFICATE_USAGE:
        case LDNS_RDF_TYPE_SELECTOR:
        case LDNS_RDF_TYPE_MATCHING_TYPE:
            if (!number_within(tok, n, UINT8_MAX))   /* or a mnemonic: dnspython judges */
                return "an 8-bit field that is not a plain number";
            break;
        case LDNS_RDF_TYPE_PERIOD:
            if (!sp_zone_ttl_valid(tok, n, &unused))
                return "a time value that is not a TTL";
            break;
        case LDNS_RDF_TYPE_HEX: {              /* the rest of the record */
            size_t digits = n;
            while (next_token(&rest, &tok, &n))
                digits += n;
            return digits % 2 ? "an odd number of hex digits" : NULL;
        }
        case LDNS_RDF_TYPE_DNAME:
        case LDNS_RDF_TYPE_A:
        case LDNS_RDF_TYPE_AAAA:
        case LDNS_RDF_TYPE_TAG:
        case LDNS_RDF_TYPE_TYPE:
            break;
        default:                               /* strings and the like: not one token */
            return NULL;
        }
    }
    return NULL;
}

/* The digest's length a DS digest type, an SSHFP fingerprint type or a TLSA matching
 * type fixes (dnspython's tables); 0: any. */
static size_t fixed_length(uint16_t type, uint8_t kind)
{
    switch (type) {
    case LDNS_RR_TYPE_DS:
    case LDNS_RR_TYPE_CDS:
    case LDNS_RR_TYPE_DLV:
        return kind == 1 ? 20 : kind == 2 || kind == 3 ? 32 : kind == 4 ? 48 : 0;
    case LDNS_RR_TYPE_SSHFP:
        return kind == 1 ? 20 : kind == 2 ? 32 : 0;
    default:                                   /* TLSA, SMIMEA */
        return kind == 1 ? 32 : kind == 2 ? 64 : 0;
    }
}

/* The keys the text's mandatory= lists, duplicates counted (ldns drops them); 0 when
 * it has none. */
static size_t mandatory_listed(const char *rest)
{
    const char *tok;
    size_t n, keys = 0;
    while (next_token(&rest, &tok, &n))
        if (n > 10 && strncasecmp(tok, "mandatory=", 10) == 0)
            for (size_t i = 10, any = 0; i <= n; i++) {
                bool end = i == n || tok[i] == ',';
                keys += end && any;
                any = end ? 0 : any || (tok[i] != '"');
            }
    return keys;
}

/* RFC 9460's rules dnspython keeps: keys in strictly increasing order, no parameters
 * in AliasMode, a mandatory list of present keys other than itself, in order, each
 * once, and no no-default-alpn without alpn. */
static const char *svcb_refused(const uint8_t *p, size_t len, size_t listed)
{
    if (len < 3)
        return "a short SVCB record";
    size_t at = 2;
    while (at < len && p[at] != 0)             /* the target name, uncompressed */
        at += 1 + (size_t)p[at];
    at++;
    if (at > len)
        return "a short SVCB record";
    if (sp_get16(p) == 0 && at < len)
        return "parameters in AliasMode";
    const uint8_t *mandatory = NULL;
    size_t nmandatory = 0, params = at;
    int32_t last = -1;
    bool alpn = false, no_default_alpn = false;
    while (at + 4 <= len) {
        uint16_t key = sp_get16(p + at), vlen = sp_get16(p + at + 2);
        if ((int32_t)key <= last || at + 4 + vlen > len)
            return "SVCB keys not in strictly increasing order";
        last = key;
        if (key == 0) {
            mandatory = p + at + 4;
            nmandatory = vlen / 2u;
            if (vlen == 0 || vlen % 2)
                return "an SVCB mandatory list that is not a list of keys";
        }
        if (key == 5 && (vlen < 6 || sp_get16(p + at + 4) != vlen - 2u))
            return "an SVCB ech value that is not an ECHConfigList";
        alpn |= key == 1;
        no_default_alpn |= key == 2;
        at += 4 + (size_t)vlen;
    }
    if (at != len)
        return "a short SVCB parameter";
    if (listed != nmandatory)
        return "an SVCB mandatory list naming a key twice";
    if (no_default_alpn && !alpn)
        return "no-default-alpn without alpn";
    for (size_t i = 0; i < nmandatory; i++) {
        uint16_t want = sp_get16(mandatory + 2 * i);
        if (want == 0 || (i && want <= sp_get16(mandatory + 2 * i - 2)))
            return "an SVCB mandatory list out of order, or listing itself";
        bool present = false;
        for (size_t q = params; q + 4 <= len && !present; q += 4 + (size_t)sp_get16(p + q + 2))
            present = sp_get16(p + q) == want;
        if (!present)
            return "an SVCB key declared mandatory but not present";
    }
    return NULL;
}

/* Text ldns reads otherwise than dnspython (and Knot DNS): a name starting "@" or an
 * escaped "@" other than the bare "@" (\@, \@.x, @.x: ldns reads each as the
 * origin), and a quote opened inside a word (x"y": ldns keeps the quotes as text,
 * dnspython starts a new string; an SVCB value, key="...", both read alike). */
static const char *text_refused(const char *rest)
{
    bool quoted = false;
    char prev = ' ';
    for (const char *p = rest; *p; prev = *p++) {
        if (*p == '\\' && p[1]) {
            if (!quoted && isspace((unsigned char)prev) &&
                (p[1] == '@' || strncmp(p + 1, "064", 3) == 0))
                return "a name starting with an escaped @, which ldns reads as the origin";
            prev = *++p;
            continue;
        }
        if (*p == '"') {
            if (!quoted && !isspace((unsigned char)prev) && prev != '"' && prev != '=')
                return "a quote opened inside a word";
            quoted = !quoted;
        } else if (!quoted && *p == '@' && isspace((unsigned char)prev) && p[1] &&
                   !isspace((unsigned char)p[1])) {
            return "a name starting with @ that is not the bare @";
        }
    }
    return NULL;
}

/* SVCB parameters ldns reads otherwise than dnspython: a port past 16 bits (ldns keeps
 * the low bits), a known key in its generic keyNNNNN form (ldns reads the value as the
 * key's presentation form, RFC 9460 as its wire form; keys from 16 up are opaque to
 * both) and escapes (ldns keeps "\,"
 * in an alpn list as text). */
static const char *svcb_text_refused(const char *rest)
{
    const char *tok;
    size_t n;
    for (int field = 0; field < 2; field++)      /* the priority and the target */
        if (!next_token(&rest, &tok, &n))
            return NULL;
    while (next_token(&rest, &tok, &n)) {
        if (memchr(tok, '\\', n) != NULL)
            return "an escape in an SVCB parameter";
        size_t digits = 0;
        while (n > 3 + digits && isdigit((unsigned char)tok[3 + digits]))
            digits++;
        if (digits && strncasecmp(tok, "key", 3) == 0 &&
            (digits == 1 || (digits == 2 && tok[3] == '1' && tok[4] < '6')))
            return "a key below 16 (one a reader may know) in its generic keyNNNNN form";
        if (n >= 5 && strncasecmp(tok, "port=", 5) == 0) {
            const char *v = tok + 5;
            size_t vn = n - 5;
            if (vn >= 2 && v[0] == '"' && v[vn - 1] == '"') {
                v++;
                vn -= 2;
            }
            if (!number_within(v, vn, UINT16_MAX))
                return "an SVCB port that is not an unsigned 16-bit integer";
        }
    }
    return NULL;
}

const char *sp_zone_record_refused(const char *text, const ldns_rr *rr, const uint8_t *rdata,
                                   size_t len)
{
    const char *rest = text, *tok;
    size_t n;
    if (!isspace((unsigned char)*rest) && !next_token(&rest, &tok, &n))   /* the owner */
        return NULL;
    for (int field = 0; field < 3 && next_token(&rest, &tok, &n); field++) {
        if (isdigit((unsigned char)tok[0])) {
            uint32_t ttl;
            if (!sp_zone_ttl_valid(tok, n, &ttl))
                return "a TTL dnspython does not read";
        } else if (!sp_zone_is_class(tok, n)) {
            break;                             /* the type: the rdata follows */
        }
    }
    const char *why = fields_refused(rest, rr);
    if (why == NULL)
        why = text_refused(rest);
    if (why)
        return why;
    uint16_t type = (uint16_t)ldns_rr_get_type(rr);
    switch (type) {
    case LDNS_RR_TYPE_DS:
    case LDNS_RR_TYPE_CDS:
    case LDNS_RR_TYPE_DLV:
        if (len >= 4 && rdata[3] == 0)
            return "DS digest type 0, which is reserved";
        if (len >= 4 && fixed_length(type, rdata[3]) && len - 4 != fixed_length(type, rdata[3]))
            return "a digest length that does not fit its digest type";
        return NULL;
    case LDNS_RR_TYPE_SSHFP:
        if (len >= 2 && fixed_length(type, rdata[1]) && len - 2 != fixed_length(type, rdata[1]))
            return "a fingerprint length that does not fit its type";
        return NULL;
    case LDNS_RR_TYPE_TLSA:
    case LDNS_RR_TYPE_SMIMEA:
        if (len >= 3 && fixed_length(type, rdata[2]) && len - 3 != fixed_length(type, rdata[2]))
            return "certificate data whose length does not fit its matching type";
        return NULL;
    case LDNS_RR_TYPE_SVCB:
    case LDNS_RR_TYPE_HTTPS:
        if ((why = svcb_text_refused(rest)) != NULL)
            return why;
        return svcb_refused(rdata, len, mandatory_listed(rest));
    case LDNS_RR_TYPE_URI:
        return len <= 4 ? "a URI record without a target" : NULL;
    case LDNS_RR_TYPE_ZONEMD:   /* RFC 8976 2.2.3 and 2.2.4 */
        return len < 6 + 12 || rdata[5] == 0 ? "a ZONEMD digest shorter than 12 octets or of "
                                               "hash algorithm 0" : NULL;
    case LDNS_RR_TYPE_LOC:
        return "a LOC record (its ranges are dnspython's to check)";
    default:
        return NULL;
    }
}
