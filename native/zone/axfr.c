/* An AXFR's messages into a zone, parsed by ldns; see axfr.h. */
#include "stormpy/zone/axfr.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

struct sp_zone_axfr {
    struct sp_zone *z;
    ldns_rdf *origin;
    uint16_t id;
    char *key_name, *key_secret;
    ldns_rdf *algorithm;
    ldns_rdf *mac;           /* what the next message's TSIG is chained from */
    unsigned messages;
    uint32_t serial;         /* the opening SOA's */
    bool opened, apex_ns, done;
    ldns_buffer *rdata;
};

static int decline(struct sp_zone_axfr *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->z->why, sizeof(a->z->why), fmt, ap);
    va_end(ap);
    a->done = true;
    return SP_ZONE_DECLINED;
}

void sp_zone_axfr_free(struct sp_zone_axfr *a)
{
    if (!a)
        return;
    ldns_rdf_deep_free(a->origin);
    ldns_rdf_deep_free(a->algorithm);
    ldns_rdf_deep_free(a->mac);
    ldns_buffer_free(a->rdata);
    free(a->key_name);
    free(a->key_secret);
    free(a);
}

/* The MAC as a TSIG's MAC field holds it: its length first. */
static ldns_rdf *mac_rdf(const uint8_t *mac, size_t len)
{
    uint8_t field[2 + 512];
    if (len > sizeof(field) - 2)
        return NULL;
    field[0] = (uint8_t)(len >> 8);
    field[1] = (uint8_t)len;
    memcpy(field + 2, mac, len);
    return ldns_rdf_new_frm_data(LDNS_RDF_TYPE_INT16_DATA, 2 + len, field);
}

struct sp_zone_axfr *sp_zone_axfr_new(struct sp_zone *z, const struct sp_zone_axfr_config *cfg)
{
    struct sp_zone_axfr *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->z = z;
    a->id = cfg->id;
    a->origin = ldns_rdf_new_frm_data(LDNS_RDF_TYPE_DNAME, cfg->origin_len, cfg->origin);
    a->rdata = ldns_buffer_new(65536);
    bool ok = a->origin && a->rdata;
    if (ok && cfg->key_name) {
        a->key_name = strdup(cfg->key_name);
        a->key_secret = strdup(cfg->key_secret);
        a->algorithm = ldns_rdf_new_frm_str(LDNS_RDF_TYPE_DNAME, cfg->algorithm);
        a->mac = mac_rdf(cfg->request_mac, cfg->request_mac_len);
        ok = a->key_name && a->key_secret && a->algorithm && a->mac;
    }
    if (!ok) {
        sp_zone_axfr_free(a);
        return NULL;
    }
    return a;
}

static uint64_t time_signed(const ldns_rdf *t)
{
    const uint8_t *p = ldns_rdf_data(t);
    uint64_t v = 0;
    for (size_t i = 0; i < 6 && i < ldns_rdf_size(t); i++)
        v = v << 8 | p[i];
    return v;
}

/* RFC 8945 5.2-5.3: the key's algorithm, the MAC (chained), no error, in time. */
static int check_tsig(struct sp_zone_axfr *a, ldns_pkt *p, const uint8_t *wire, size_t len,
                      uint64_t now)
{
    ldns_rr *tsig = ldns_pkt_tsig(p);
    if (!a->key_name)
        return tsig ? decline(a, "a signed message answering an unsigned query") : SP_ZONE_OK;
    if (!tsig)
        return decline(a, "message %u has no TSIG (dnspython checks the unsigned ones "
                          "between signed ones)", a->messages + 1);
    if (ldns_rr_rd_count(tsig) < 7 || ldns_dname_compare(ldns_rr_rdf(tsig, 0), a->algorithm) != 0)
        return decline(a, "a TSIG of another algorithm");
    if (!ldns_pkt_tsig_verify_next(p, wire, len, a->key_name, a->key_secret, a->mac,
                                   a->messages > 0))
        return decline(a, "message %u: TSIG does not verify", a->messages + 1);
    uint64_t signed_at = time_signed(ldns_rr_rdf(tsig, 1));
    uint16_t fudge = ldns_rdf2native_int16(ldns_rr_rdf(tsig, 2));
    if (ldns_rdf2native_int16(ldns_rr_rdf(tsig, 5)) != 0 ||
        (signed_at > now ? signed_at - now : now - signed_at) > fudge)
        return decline(a, "message %u: TSIG error or time out of its fudge", a->messages + 1);
    ldns_rdf *next = ldns_rdf_clone(ldns_rr_rdf(tsig, 3));
    if (!next)
        return SP_ZONE_NOMEM;
    ldns_rdf_deep_free(a->mac);
    a->mac = next;
    return SP_ZONE_OK;
}

static int check_header(struct sp_zone_axfr *a, ldns_pkt *p)
{
    if (ldns_pkt_id(p) != a->id || !ldns_pkt_qr(p) || ldns_pkt_tc(p) ||
        ldns_pkt_get_opcode(p) != LDNS_PACKET_QUERY)
        return decline(a, "message %u is not an answer to the query", a->messages + 1);
    if (ldns_pkt_get_rcode(p) != LDNS_RCODE_NOERROR)
        return decline(a, "rcode %d", (int)ldns_pkt_get_rcode(p));
    ldns_rr_list *q = ldns_pkt_question(p);
    size_t n = q ? ldns_rr_list_rr_count(q) : 0;
    if (n > 1 || (n == 0 && a->messages == 0))
        return decline(a, "message %u: %zu questions", a->messages + 1, n);
    if (n == 1) {
        ldns_rr *qr = ldns_rr_list_rr(q, 0);
        if (ldns_rr_get_type(qr) != LDNS_RR_TYPE_AXFR ||
            ldns_rr_get_class(qr) != LDNS_RR_CLASS_IN ||
            ldns_dname_compare(ldns_rr_owner(qr), a->origin) != 0)
            return decline(a, "message %u answers another question", a->messages + 1);
    }
    return SP_ZONE_OK;
}

static int add(struct sp_zone_axfr *a, ldns_rr *rr)
{
    ldns_buffer_clear(a->rdata);
    if (ldns_rr_rdata2buffer_wire(a->rdata, rr) != LDNS_STATUS_OK)
        return decline(a, "rdata ldns cannot write");
    ldns_rdf *owner = ldns_rr_owner(rr);
    return sp_zone_add_record(a->z, ldns_rdf_data(owner), ldns_rdf_size(owner),
                              (uint16_t)ldns_rr_get_type(rr), ldns_rr_ttl(rr),
                              ldns_buffer_begin(a->rdata), ldns_buffer_position(a->rdata));
}

static int records(struct sp_zone_axfr *a, ldns_rr_list *answer)
{
    size_t n = answer ? ldns_rr_list_rr_count(answer) : 0;
    for (size_t i = 0; i < n; i++) {
        ldns_rr *rr = ldns_rr_list_rr(answer, i);
        ldns_rdf *owner = ldns_rr_owner(rr);
        bool apex = ldns_dname_compare(owner, a->origin) == 0;
        bool soa = apex && ldns_rr_get_type(rr) == LDNS_RR_TYPE_SOA && ldns_rr_rd_count(rr) == 7;
        if (a->done)
            return decline(a, "records after the closing SOA");
        if (ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN)
            return decline(a, "a class other than IN");
        if (!apex && !ldns_dname_is_subdomain(owner, a->origin))
            return decline(a, "a record outside the zone");
        if (!a->opened) {
            if (!soa)
                return decline(a, "the first record is not the zone's SOA");
            a->opened = true;
            a->serial = ldns_rdf2native_int32(ldns_rr_rdf(rr, 2));
        } else if (soa) {
            if (ldns_rdf2native_int32(ldns_rr_rdf(rr, 2)) != a->serial)
                return decline(a, "the closing SOA's serial is not the opening one's");
            a->done = true;
            continue;
        }
        a->apex_ns |= apex && ldns_rr_get_type(rr) == LDNS_RR_TYPE_NS;
        int rc = add(a, rr);
        if (rc != SP_ZONE_OK)
            return rc;
    }
    return SP_ZONE_OK;
}

int sp_zone_axfr_message(struct sp_zone_axfr *a, const uint8_t *wire, size_t len, uint64_t now)
{
    if (a->done)
        return decline(a, "a message after the transfer's end");
    ldns_pkt *p = NULL;
    if (ldns_wire2pkt(&p, wire, len) != LDNS_STATUS_OK)
        return decline(a, "message %u: ldns cannot parse it", a->messages + 1);
    int rc = check_header(a, p);
    if (rc == SP_ZONE_OK)
        rc = check_tsig(a, p, wire, len, now);
    if (rc == SP_ZONE_OK)
        rc = records(a, ldns_pkt_answer(p));
    ldns_pkt_free(p);
    a->messages++;
    if (rc != SP_ZONE_OK)
        return rc;
    if (!a->done)
        return SP_ZONE_OK;
    if (!a->apex_ns)
        return decline(a, "no NS at the origin");
    return SP_ZONE_AXFR_DONE;
}
