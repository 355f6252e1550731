/* Custom responders: rules over UDP payloads, answered from the table. See rules.h. */
#include "stormpy/app/rules/rules.h"

#include <stdio.h>
#include <string.h>

#include "stormpy/app/dns/answer.h"
#include "stormpy/app/dns/dns.h"
#include "stormpy/proto/csum.h"

const struct sp_rules *sp_rules_of(const struct sp_table *t)
{
    size_t len;
    const struct sp_rules *rules = sp_table_program(t, &len);
    return rules && len >= sizeof(*rules) && rules->magic == SP_RULES_MAGIC ? rules : NULL;
}

int sp_rules_check(const struct sp_table *t, char *err, size_t errlen)
{
    size_t len;
    const struct sp_rules *rules = sp_table_program(t, &len);
    if (!rules || len < sizeof(*rules) || rules->magic != SP_RULES_MAGIC) {
        snprintf(err, errlen, "the table carries no rule list");
        return -1;
    }
    if (rules->nrules > SP_RULES_MAX ||
        len != sizeof(*rules) + rules->nrules * sizeof(struct sp_rule)) {
        snprintf(err, errlen, "a rule list of %u rules in %zu bytes (at most %d rules)",
                 rules->nrules, len, SP_RULES_MAX);
        return -1;
    }
    for (unsigned i = 0; i < rules->nrules; i++) {
        const struct sp_rule *r = &rules->rule[i];
        const char *why = NULL;
        if (r->match_len > SP_RULE_MATCH_MAX || r->match_off + r->match_len > r->min_len)
            why = "its match bytes lie beyond its minimum length";
        else if (r->nstops > SP_RULE_STOPS)
            why = "too many key stop bytes";
        else if (r->key_off > r->key_end || r->key_off > r->min_len)
            why = "its key starts beyond its minimum length";
        else if (r->echo_off > r->echo_end || r->echo_off > r->min_len)
            why = "its echoed slice starts beyond its minimum length";
        else if (r->response != SP_RULE_NO_RESPONSE && !sp_table_response(t, r->response))
            why = "its response is not in the table";
        else if (r->keyed && r->tag != sp_rule_tag(i))
            why = "its key namespace is another rule's";
        if (why) {
            snprintf(err, errlen, "rule %u: %s", i, why);
            return -1;
        }
    }
    return 0;
}

static inline size_t cut(size_t end, size_t len)
{
    return end < len ? end : len;
}

const struct sp_response *sp_rules_find(const struct sp_table *t, const struct sp_rules *rules,
                                        const uint8_t *payload, size_t len,
                                        struct sp_request *req)
{
    if (len > UINT16_MAX)
        return NULL;
    for (unsigned i = 0; i < rules->nrules; i++) {
        const struct sp_rule *r = &rules->rule[i];
        if (len < r->min_len || memcmp(payload + r->match_off, r->match, r->match_len) != 0)
            continue;
        /* min_len covers both starts, so the slices below are never negative */
        size_t echo_end = cut(r->echo_end, len);
        req->field[SP_RULE_FIELD_PAYLOAD] = payload;
        req->field_len[SP_RULE_FIELD_PAYLOAD] = (uint16_t)len;
        req->field[SP_RULE_FIELD_ECHO] = payload + r->echo_off;
        req->field_len[SP_RULE_FIELD_ECHO] = (uint16_t)(echo_end - r->echo_off);
        req->field[SP_RULE_FIELD_KEY] = payload + r->key_off;
        req->field_len[SP_RULE_FIELD_KEY] = 0;
        req->field[3] = NULL;
        req->field_len[3] = 0;
        const struct sp_response *found = NULL;
        if (r->keyed) {
            size_t end = cut(r->key_end, len);
            for (size_t p = r->key_off; p < end; p++)
                if (r->nstops && memchr(r->stops, payload[p], r->nstops)) {
                    end = p;
                    break;
                }
            req->field_len[SP_RULE_FIELD_KEY] = (uint16_t)(end - r->key_off);
            found = sp_table_find(t, r->tag, payload + r->key_off, end - r->key_off);
        }
        if (!found && r->response != SP_RULE_NO_RESPONSE)
            found = sp_table_response(t, r->response);
        return found;    /* the first matching rule decides, even for the slow path */
    }
    return NULL;
}

/* A DNS responder's choice for a query (the question summed where the reply's checksum
 * is composed from it); true when it is a dynamic name, which the slow path answers. */
static bool dns_choice(const struct sp_table *t, struct sp_dns_query *q, const uint8_t *msg,
                       size_t len, bool with_sum, enum sp_dns_verdict *v,
                       const struct sp_response **r)
{
    *r = sp_dns_find(t, msg, len, q, with_sum, v);
    return *r && ((*r)->user & SP_RESPONSE_SLOW_PATH);
}

/* A rule's answer rendered at out; 0 when it does not fit room. */
static size_t render_rule(const struct sp_table *t, const struct sp_rules *rules,
                          const uint8_t *payload, size_t len, uint8_t *out, size_t room,
                          uint32_t *sum, struct sp_responder_counters *rc, bool *to_slow,
                          bool *sent)
{
    struct sp_request req;
    const struct sp_response *r = rules ? sp_rules_find(t, rules, payload, len, &req) : NULL;
    if (!r) {
        *to_slow = true;
        return 0;
    }
    size_t want = sp_response_len(t, r, &req);
    size_t n = want <= room ? sp_response_render(t, r, &req, out, room) : 0;
    if (n != want) {              /* too large, or a patch reads past the payload */
        rc->rule_unsent++;
        return 0;
    }
    if (sum)
        *sum = sp_response_sum(t, r, &req);
    rc->rule_answers++;
    *sent = true;
    return n;
}

size_t sp_responder_frame(const struct sp_table *t, const struct sp_rules *rules,
                          const struct sp_frame_config *cfg, bool all, const struct sp_frame *frame,
                          uint8_t *tx, size_t cap, struct sp_dns_worker *dns,
                          struct sp_frame_counters *c, struct sp_responder_counters *rc,
                          struct sp_slow_packet *slow, bool *to_slow)
{
    size_t stack;
    *to_slow = false;
    slow->udp = 0;
    const uint8_t *rx = frame->data;
    enum sp_frame_kind kind = sp_frame_parse(cfg, frame, tx, cap, &slow->fq, &stack, c);
    if (kind != SP_FRAME_QUERY) {
        /* Bad checksums and sources never to be answered stay dropped. What the
         * port's parser does not take (ARP, ICMP, other ports, fragments, IP it
         * cannot parse) may interest a handler that is the whole stack: it gets
         * the raw frame, as the kernel would. */
        *to_slow = all && kind == SP_FRAME_NOT_OURS && !stack;
        return stack;
    }
    const struct sp_frame_query *fq = &slow->fq;
    const uint8_t *payload = rx + fq->l2 + fq->u.payload_off;
    size_t plen = fq->u.payload_len;
    size_t room = sp_frame_payload_cap(cfg, fq, cap);
    slow->udp = 1;
    if (!room)
        return 0;
    if (rules && rules->dns) {
        enum sp_dns_verdict v;
        const struct sp_response *r;
        if ((*to_slow = dns_choice(t, &dns->query, payload, plen, true, &v, &r)))
            return 0;
        return sp_dns_frame_reply(t, dns, &dns->query, cfg, rx, fq, v, r, tx, cap);
    }
    uint32_t sum = 0;
    bool sent = false;
    size_t n = render_rule(t, rules, payload, plen, tx + fq->headers, room, &sum, rc, to_slow,
                           &sent);
    if (!sent)
        return 0;
    sp_frame_write_headers(cfg, rx, fq, tx, n, sum);
    return fq->headers + n;
}

size_t sp_responder_datagram(const struct sp_table *t, const struct sp_rules *rules,
                             const uint8_t *rx, size_t len, uint8_t *tx, size_t cap,
                             struct sp_dns_worker *dns, struct sp_frame_counters *c,
                             struct sp_responder_counters *rc, bool *to_slow, bool *replied)
{
    *to_slow = false;
    *replied = false;
    c->frames++;
    if (rules && rules->dns) {
        enum sp_dns_verdict v;
        const struct sp_response *r;
        if ((*to_slow = dns_choice(t, &dns->query, rx, len, false, &v, &r)))
            return 0;
        size_t n = sp_dns_answer_parsed(t, &dns->cfg, rx, len, false, tx, cap, &dns->query, v,
                                         r, &dns->counters);
        *replied = n != 0;
        return n;
    }
    return render_rule(t, rules, rx, len, tx, cap, NULL, rc, to_slow, replied);
}

bool sp_responder_reply(const struct sp_frame_config *cfg, bool datagrams,
                        const struct sp_slow_packet *p, const uint8_t *payload, size_t len,
                        struct sp_frame *tx)
{
    if (!p->udp)
        return false;
    if (datagrams) {
        if (len > tx->cap)
            return false;
        memcpy(tx->data, payload, len);
        tx->id = p->frame->id;            /* the reply goes to this request's peer */
        tx->len = (uint32_t)len;
        return true;
    }
    size_t room = sp_frame_payload_cap(cfg, &p->fq, tx->cap);
    if (!room || len > room)      /* no room: not even the headers fit */
        return false;
    memcpy(tx->data + p->fq.headers, payload, len);
    sp_frame_write_headers(cfg, p->frame->data, &p->fq, tx->data, len,
                           sp_csum_partial(tx->data + p->fq.headers, len, 0));
    tx->len = (uint32_t)(p->fq.headers + len);
    return true;
}

size_t sp_responder_raw(const struct sp_frame_config *cfg, bool datagrams, const uint8_t *frame,
                        size_t len, struct sp_frame *tx)
{
    /* an Ethernet header, and no more than the MTU behind it (with one VLAN tag) */
    size_t most = cfg->mtu ? (size_t)cfg->mtu + SP_ETH_HEADER_LEN + SP_VLAN_TAG_LEN : tx->cap;
    if (datagrams || len < SP_ETH_HEADER_LEN || len > tx->cap || len > most)
        return 0;
    memcpy(tx->data, frame, len);
    tx->len = (uint32_t)len;
    return len;
}
