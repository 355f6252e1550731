/*
 * DNS on top of the prepackaged-response table.
 *
 * sp_dns_parse() checks one query against the received length at every step and
 * builds the lookup key: the question name lower-cased in wire format, with any
 * compression pointer in the question decompressed (pointers must point strictly
 * backwards, so a pointer loop ends in FORMERR, never in a loop). It also reads an
 * EDNS0 OPT record (payload size, DO bit, version).
 *
 * sp_dns_answer() looks the key up and renders the prepackaged response: the ID,
 * RD and CD come from the query, the question is echoed as the client sent it
 * (so 0x20 random case comes back intact), an OPT record is appended when the
 * query had one, and a response that exceeds the client's limit (512 bytes
 * without EDNS) goes out truncated with TC=1.
 *
 * Lookup order, all keys in class qclass (the zone compiler emits them):
 *   EXACT(name, qtype)        the response for this name and type;
 *   OTHER(name)               any other type at an existing name (NODATA, CNAME
 *                             chain, referral below a zone cut);
 *   then for each ancestor A of name, closest first:
 *   BELOW_OTHER(A)            NXDOMAIN, wildcard NODATA or a referral at A;
 *   BELOW(A, qtype)           a wildcard *.A answering qtype, looked up only when
 *                             BELOW_OTHER(A)'s word says SP_DNS_USER_WILDCARD.
 * So an ancestor costs one probe, and a wildcard's two. The response found is then
 * swapped for its DNSSEC form when the query has DO and its word says
 * SP_DNS_USER_SIGNED (no probe: the next response in the array). No key at all means the name
 * is outside every served zone: REFUSED.
 *
 * Stored DNS responses are the 12-byte header followed by everything after the
 * question; the question is spliced in at offset 12 (SP_PATCH_INSERT). Responses
 * reached through BELOW keys serve names of any length: they are compressed for a
 * sample question one label below the key's name, the asked name a pointer to 12,
 * and every other pointer moved by the asked question's length less the sample's
 * (SP_PATCH_SHIFT), so they point only past the asked name's first label.
 */
#ifndef STORMPY_APP_DNS_DNS_H
#define STORMPY_APP_DNS_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stormpy/engine/table.h"

#define SP_DNS_HEADER_LEN 12u
#define SP_DNS_NAME_MAX 255
#define SP_DNS_LABELS_MAX 127
#define SP_DNS_OPT_LEN 11u
#define SP_DNS_OPTION_NSID 3    /* RFC 5001 */
#define SP_DNS_NSID_MAX 128     /* the longest NSID a server sends */
#define SP_DNS_UDP_MIN 512u

enum sp_dns_kind {
    SP_DNS_EXACT = 1,
    SP_DNS_OTHER = 2,
    SP_DNS_BELOW = 3,
    SP_DNS_BELOW_OTHER = 4,
};

static inline uint64_t sp_dns_tag(enum sp_dns_kind kind, uint16_t qclass, uint16_t qtype)
{
    return ((uint64_t)kind << 32) | ((uint64_t)qclass << 16) | qtype;
}

/* Request fields handed to the table's patches. */
enum sp_dns_field {
    SP_DNS_FIELD_MESSAGE = 0,   /* the query as received */
    SP_DNS_FIELD_QUESTION = 1,  /* decompressed question: name, type, class */
};

/* What the parser concluded; values double as counter indices. */
enum sp_dns_verdict {
    SP_DNS_LOOKUP = 0,   /* a well-formed standard query: look it up */
    SP_DNS_DROP,         /* not a query (QR set) or shorter than a header */
    SP_DNS_FORMERR,
    SP_DNS_NOTIMP,       /* opcode other than QUERY */
    SP_DNS_BADVERS,      /* EDNS version other than 0 */
    SP_DNS_REFUSED,      /* a class this server does not serve */
    SP_DNS_NOTAUTH,      /* NOTIFY or UPDATE: nobody is allowed */
    SP_DNS_TRANSFER,     /* AXFR or IXFR: no transfers are served */
    SP_DNS_SLIP,         /* set by rate limiting: header and question only, TC=1 */
};

/* The table's per-response word: rcode in the low 6 bits, then two flags (below); in
 * the next byte, the zone's counter slot (below); and in the high 16 bits the stored
 * length without the optional part of the additional section, which may be dropped to
 * fit a client's limit (0: none may). That part is the whole section but for a
 * referral, where only sibling glue is optional (RFC 9471: in-domain glue that does
 * not fit makes the answer TC). */
#define SP_DNS_USER_RCODE(u) ((uint16_t)((u) & 0x3f))
/* The same, as the compilers store it: the header's 4 bits (no extended rcode comes
 * from the table), so a counter needs no clamp. */
#define SP_DNS_USER_HEADER_RCODE(u) ((size_t)(u) & 0x0f)
/* The response has a DNSSEC form (RRSIGs, NSEC/NSEC3 proofs), stored right after it
 * in the table's response array: a query with the DO bit gets that one instead. */
#define SP_DNS_USER_SIGNED (1u << 6)
/* A DNAME's answer (RFC 6672) for any name below its owner: the last answer record is
 * the synthesized CNAME, owned by the question (0xC00C), whose stored RDATA is the
 * DNAME's target; the answer puts the asked name's labels above the DNAME's owner in
 * front of it, or answers YXDOMAIN without the CNAME when that name would pass 255
 * octets. Such an answer is never precopied (its bytes depend on the name). */
#define SP_DNS_USER_DNAME (1u << 7)
/* A DNAME word with the rcode field at 63 (no rcode): a DNSSEC form whose NSEC3 proof
 * depends on the asked name's hash (nsec3.c). The response is a descriptor, not an
 * answer: the form's header, then the form without that proof and the zone's NSEC3
 * chain to take it from. Both kinds have no question INSERT in their patch list, so
 * the common renderer declines them and dns.c completes them apart. */
#define SP_DNS_USER_NSEC3 (SP_DNS_USER_DNAME | 0x3fu)
/* On a DNSSEC form only (never a key's own response): the form depends on the label
 * of the name asked just below the key's ancestor (NSEC proofs), and this response is
 * a list of gaps, not an answer: entries of SP_DNS_GAP_ENTRY bytes sorted by their
 * bound, each a 32-bit response index then the bound as a length-prefixed lower-case
 * label (the first one empty); the name's label picks the last bound not above it.
 * The lookup resolves it, so it never leaves sp_dns_lookup(); the rules app's
 * SP_RESPONSE_SLOW_PATH, the same bit, is on its own responses, never on a form. */
#define SP_DNS_USER_GAPS (1u << 15)
#define SP_DNS_GAP_ENTRY (4u + 64u)
#define SP_DNS_USER_DROPPABLE(u) ((size_t)((u) >> 16))
/* On a BELOW_OTHER response: BELOW keys exist at its name (a wildcard is there). */
#define SP_DNS_USER_WILDCARD (1u << 14)

/* Answers are counted per zone in a fixed array in each worker's counters (no shared
 * write, no lookup per packet): slots 1..63 are the first 63 zones the server loaded,
 * kept across reloads by the control plane; slot 0 is every other answer (later zones,
 * CHAOS). The mask keeps any table's word inside the array. */
#define SP_DNS_ZONE_SLOTS 64
#define SP_DNS_USER_ZONE(u) ((size_t)((u) >> 8) & (SP_DNS_ZONE_SLOTS - 1))

/* Wire values the parser (parse.c) and the answers (dns.c) share. */
#define SP_DNS_QR 0x80
#define SP_DNS_TYPE_OPT 41
#define SP_DNS_TYPE_AXFR 252
#define SP_DNS_TYPE_IXFR 251
#define SP_DNS_OPCODE_NOTIFY 4
#define SP_DNS_CLASS_IN 1
#define SP_DNS_CLASS_CH 3
#define SP_DNS_CLASS_ANY 255

#define SP_RCODE_NOERROR 0
#define SP_RCODE_FORMERR 1
#define SP_RCODE_SERVFAIL 2
#define SP_RCODE_NXDOMAIN 3
#define SP_RCODE_NOTIMP 4
#define SP_RCODE_REFUSED 5
#define SP_RCODE_YXDOMAIN 6
#define SP_RCODE_NOTAUTH 9
#define SP_RCODE_BADVERS 16

struct sp_dns_query {
    uint8_t opcode;
    bool has_question;       /* question parsed: it is echoed in error responses */
    bool edns;
    bool edns_do;
    uint8_t edns_version;
    bool message_summed;     /* message_acc holds the message's sum */
    uint16_t edns_size;
    uint16_t qtype;
    uint16_t qclass;
    uint8_t name_len;        /* wire length including the root label */
    bool nsid;               /* an NSID option came with the OPT (RFC 5001) */
    uint16_t question_len;   /* name_len + 4 */
    uint32_t question_sum;   /* partial checksum of the question, as at an even offset
                                (sp_dns_parse_summed() only: not written otherwise) */
    uint64_t name_hash;      /* the table's hash of name_lower (sp_key_hash_*) */
    /* The whole message's sum as sp_csum_acc() adds it up, made on the question's way
     * (sp_dns_parse_summed() of a question sent without a pointer: message_summed), so
     * that the query's UDP checksum is checked without reading it again. */
    uint64_t message_acc;
    /* Padded past the longest name and question: the name is written and hashed 16 or
     * 8 bytes at a time and compared 8 at a time, the question copied out 16 at a time. */
    uint8_t name_lower[SP_DNS_NAME_MAX + 1 + 8];
    uint8_t question[SP_DNS_NAME_MAX + 1 + 16];    /* name, type, class */
};

struct sp_dns_config {
    uint16_t max_udp;        /* largest UDP response this server sends (EDNS) */
    uint16_t nsid_len;       /* this server's NSID, sent to queries with the option; 0: none */
    uint8_t nsid[SP_DNS_NSID_MAX];
    int handoff_fd;          /* NOTIFY and transfers go up this socket (handoff.h); 0: none */
    uint8_t handoff_local[16];   /* the worker's socket's own address, where it has one */
};

/* Counters a worker keeps for itself; index rcode by min(rcode, 16), zone by
 * SP_DNS_USER_ZONE() of the answer's table word. Each query is counted once, under
 * its rcode or as dropped: the queries are their sum (sp_dns_queries()), not a counter
 * of their own to add to per query. */
struct sp_dns_counters {
    uint64_t dropped;
    uint64_t truncated;
    uint64_t rcode[17];
    uint64_t zone[SP_DNS_ZONE_SLOTS];   /* answers from the table, by zone slot */
};

static inline uint64_t sp_dns_queries(const struct sp_dns_counters *c)
{
    uint64_t n = c->dropped;
    for (unsigned i = 0; i < 17; i++)
        n += c->rcode[i];
    return n;
}

enum sp_dns_verdict sp_dns_parse(const uint8_t *msg, size_t len, struct sp_dns_query *q);
/* sp_dns_parse() with q->question_sum, for a reply whose checksum is composed from it
 * (the frame paths: sp_dns_answer_summed(), sp_dns_copy_sum()). */
enum sp_dns_verdict sp_dns_parse_summed(const uint8_t *msg, size_t len, struct sp_dns_query *q);

/* sp_dns_parse() or sp_dns_parse_summed() (with_sum) of a query that a lookup follows.
 * The name of the usual query (a question, then nothing or an OPT with no option or a
 * client cookie) is not walked label by label but taken to end where the rest of the
 * message leaves it, the rest read as the walk would read it there. A key equal to the
 * name proves it well-formed (every DNS key of a table is a well-formed name: the
 * compilers make them), so only a name no key matches needs sp_dns_name_well_formed();
 * where that fails, sp_dns_parse_again() gives the verdict sp_dns_parse() would have
 * given. sp_dns_find() does all of it. A verdict other than SP_DNS_LOOKUP comes with
 * the name checked. */
enum sp_dns_verdict sp_dns_parse_unchecked(const uint8_t *msg, size_t len,
                                           struct sp_dns_query *q, bool with_sum);
enum sp_dns_verdict sp_dns_parse_again(const uint8_t *msg, size_t len, struct sp_dns_query *q);

/* The name sp_dns_parse_unchecked() took is a name: labels, then the root label at its
 * last byte. (It is at most SP_DNS_NAME_MAX bytes long, so it has at most 127 labels.)
 * Always true of a name the parse walked. */
static inline bool sp_dns_name_well_formed(const struct sp_dns_query *q)
{
    size_t pos = 0, last = (size_t)q->name_len - 1;
    while (pos < last) {
        uint8_t c = q->question[pos];
        if (c == 0 || (c & 0xc0))
            return false;
        pos += 1 + (size_t)c;
    }
    return pos == last && q->question[pos] == 0;
}

/* The response size limit for a parsed query on UDP (on TCP it is 65535). */
size_t sp_dns_udp_limit(const struct sp_dns_query *q, const struct sp_dns_config *cfg);

/* Answer one query. Returns the response length written to out (at most cap),
 * or 0 when the query must be dropped. q is scratch space owned by the caller
 * (a worker keeps one, so nothing is allocated per packet). */
size_t sp_dns_answer(const struct sp_table *t, const struct sp_dns_config *cfg,
                     const uint8_t *msg, size_t len, bool tcp, uint8_t *out, size_t cap,
                     struct sp_dns_query *q, struct sp_dns_counters *c);

/* The tag of a parsed query's first lookup, EXACT(name, qtype) in its class (ANY is
 * looked up in IN): a batch prefetches it (answer.h). */
static inline uint64_t sp_dns_first_tag(const struct sp_dns_query *q)
{
    uint16_t qclass = q->qclass == SP_DNS_CLASS_ANY ? SP_DNS_CLASS_IN : q->qclass;
    return sp_dns_tag(SP_DNS_EXACT, qclass, q->qtype);
}

/* The table response chosen for a parsed query (NULL: REFUSED). */
const struct sp_response *sp_dns_lookup(const struct sp_table *t, const struct sp_dns_query *q);

/* sp_dns_parse_unchecked(), then for SP_DNS_LOOKUP the lookup: the response chosen for
 * msg (NULL: none, or no lookup), the verdict in *verdict. */
const struct sp_response *sp_dns_find(const struct sp_table *t, const uint8_t *msg, size_t len,
                                      struct sp_dns_query *q, bool with_sum,
                                      enum sp_dns_verdict *verdict);

/* sp_dns_lookup() in two halves, for a group answered in stages: the first key (NULL
 * when it misses), its tagged hash known (what sp_table_prefetch_slot() returned for
 * sp_dns_first_tag(q) and q->name_hash) with the hint sp_table_prefetch_entry() gave
 * for it; and the probes a miss makes next, whose first two (the name's OTHER key, the parent's BELOW_OTHER)
 * are fetched in stages as the first key's were (sp_dns_prefetch_rest() gives their
 * tagged hashes, 0 for none) before sp_dns_lookup_rest() takes them. */
const struct sp_response *sp_dns_lookup_first(const struct sp_table *t,
                                              const struct sp_dns_query *q, uint64_t first_hash,
                                              const struct sp_table_hint *hint);
void sp_dns_prefetch_rest(const struct sp_table *t, const struct sp_dns_query *q,
                          uint64_t hashes[2]);
const struct sp_response *sp_dns_lookup_rest(const struct sp_table *t,
                                             const struct sp_dns_query *q);

/* sp_dns_answer() after the caller ran sp_dns_parse() (verdict) and, for
 * SP_DNS_LOOKUP, sp_dns_lookup() (r): precopy mode looks at the choice before it
 * knows where the answer goes, and must not parse twice. */
size_t sp_dns_answer_parsed(const struct sp_table *t, const struct sp_dns_config *cfg,
                            const uint8_t *msg, size_t len, bool tcp, uint8_t *out, size_t cap,
                            struct sp_dns_query *q, enum sp_dns_verdict verdict,
                            const struct sp_response *r, struct sp_dns_counters *c);

/* sp_dns_answer_parsed() that also gives the answer's partial checksum in *sum
 * (as at an even offset): composed from the table's stored sums and the question's,
 * summed while it was parsed, so the frame path never sums the reply. */
size_t sp_dns_answer_summed(const struct sp_table *t, const struct sp_dns_config *cfg,
                            const uint8_t *msg, size_t len, bool tcp, uint8_t *out, size_t cap,
                            struct sp_dns_query *q, enum sp_dns_verdict verdict,
                            const struct sp_response *r, struct sp_dns_counters *c,
                            uint32_t *sum);

/* The response a gap list (SP_DNS_USER_GAPS) gives the length-prefixed, lower-case
 * label (nsec.c); NULL when the list is empty. */
const struct sp_response *sp_dns_gap_pick(const struct sp_table *t, const struct sp_response *list,
                                          const uint8_t *label);

/* The answer an NSEC3 descriptor (SP_DNS_USER_NSEC3) gives q (nsec3.c): header,
 * question, the form's records with the covering NSEC3 and its RRSIGs spliced in; no
 * OPT. The length written, 0 when it does not fit in cap. */
size_t sp_dns_nsec3_render(const struct sp_table *t, const struct sp_response *desc,
                           const uint8_t *msg, const struct sp_dns_query *q, uint8_t *out,
                           size_t cap);

/* r's answer to q when its word says SP_DNS_USER_DNAME (dname.c): header, question and
 * records, the synthesized CNAME completed (or YXDOMAIN); no OPT. The length written,
 * 0 when it does not fit in cap. */
size_t sp_dns_dname_render(const struct sp_table *t, const struct sp_response *r,
                           const uint8_t *msg, const struct sp_dns_query *q, uint8_t *out,
                           size_t cap);

/* How many records of the additional section a stored response (bytes, len: header
 * then the sections, no question) holds before offset end: the ARCOUNT of that
 * response cut at end to fit. */
uint16_t sp_dns_additional_before(const uint8_t *bytes, size_t len, size_t end);

/* The length of r's whole answer to q over UDP (question echoed, OPT when asked)
 * when it fits both cap and the client's limit, unshortened; 0 when sp_dns_answer()
 * would drop the additional section or truncate, r's bytes depend on the name
 * (SP_DNS_USER_DNAME), or the answer carries the server's NSID. */
size_t sp_dns_full_len(const struct sp_response *r, const struct sp_dns_query *q,
                       const struct sp_dns_config *cfg, size_t cap);

/* A copy of an answer reused for another query (precopy.h). Its bytes are the same
 * for every query with the same response, question length, EDNS and DO bit, apart
 * from the head's ID and echoed flags and the question's letters.
 *   sp_dns_copy_len      sp_dns_full_len() where r has the DNS patch list (head echoed,
 *                        question at 12), else 0: only such answers are copied;
 *   sp_dns_copy_sum      the sum of the copy's bytes that the table stored (all but
 *                        the OPT record and its ARCOUNT), from the stored sums;
 *   sp_dns_copy_rewrite  the copy in out made q's answer to msg; its sp_dns_copy_sum(). */
size_t sp_dns_copy_len(const struct sp_response *r, const struct sp_dns_query *q,
                       const struct sp_dns_config *cfg, size_t cap);
uint32_t sp_dns_copy_sum(const struct sp_table *t, const struct sp_response *r,
                         const struct sp_dns_query *q, const uint8_t *out);
uint32_t sp_dns_copy_rewrite(const struct sp_table *t, const struct sp_response *r,
                             const uint8_t *msg, const struct sp_dns_query *q, uint8_t *out);

#endif
