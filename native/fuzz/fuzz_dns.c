/* DNS query parsing and answering (EDNS, compression, every limit), from a real
 * compiled zone, over UDP and TCP and at output sizes from 0 to 65535. And
 * sp_dns_find(), which may take a name unchecked, against the walking parse and lookup. */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "stormpy/app/dns/dns.h"

static void find_as_walked(const struct sp_table *t, const uint8_t *msg, size_t size)
{
    for (int with_sum = 0; with_sum < 2; with_sum++) {
        struct sp_dns_query q, walked;
        enum sp_dns_verdict v, w = with_sum ? sp_dns_parse_summed(msg, size, &walked)
                                            : sp_dns_parse(msg, size, &walked);
        const struct sp_response *r = sp_dns_find(t, msg, size, &q, with_sum, &v);
        if (v != w || r != (w == SP_DNS_LOOKUP ? sp_dns_lookup(t, &walked) : NULL) ||
            q.has_question != walked.has_question)
            __builtin_trap();
        if (q.has_question &&
            (q.question_len != walked.question_len || q.name_hash != walked.name_hash ||
             (with_sum && q.question_sum != walked.question_sum) ||
             memcmp(q.question, walked.question, q.question_len) != 0))
            __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct sp_table *t = fuzz_table();
    /* an NSID (RFC 5001) on every other input: its room must be counted too */
    struct sp_dns_config cfg = {.max_udp = 1232, .nsid_len = size & 1 ? 100 : 0};
    struct sp_dns_query q;
    struct sp_dns_counters c = {0};
    uint8_t *msg = fuzz_copy(data, size);
    find_as_walked(t, msg, size);
    static const size_t caps[] = {0, 11, 12, 40, 512, 1232, 65535};
    for (unsigned i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        for (int tcp = 0; tcp < 2; tcp++) {
            uint8_t *out = malloc(caps[i] ? caps[i] : 1);
            size_t n = sp_dns_answer(t, &cfg, msg, size, tcp, out, caps[i], &q, &c);
            if (n > caps[i])
                __builtin_trap();
            if (n && (size < SP_DNS_HEADER_LEN || (msg[2] & 0x80)))
                __builtin_trap();                 /* never answer a response, or a fragment */
            if (n && !(out[2] & 0x80))
                __builtin_trap();                 /* what goes out is a response */
            if (n && !tcp && n > (q.edns ? cfg.max_udp : SP_DNS_UDP_MIN))
                __builtin_trap();                 /* the UDP limits */
            if (n && q.edns && size >= SP_DNS_HEADER_LEN && caps[i] >= SP_DNS_UDP_MIN &&
                !(out[3] & 0x0f) && !(out[2] & 0x02) && sp_get16(out + 10) == 0)
                __builtin_trap();                 /* an EDNS query's answer has its OPT */
            if (n && (out[0] != msg[0] || out[1] != msg[1]))
                __builtin_trap();                 /* the ID is the query's */
            free(out);
        }
    }
    free(msg);
    return 0;
}
