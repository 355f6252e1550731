/*
 * A zone in C: master files read with NLnetLabs' ldns, answers decided and encoded
 * into a response table without a Python step per record.
 *
 * It makes exactly the decisions stormpy/dns/compiler.py makes (that file is the
 * reference; tests compare every key's answer both ways). What it does not handle
 * it declines, and the control plane then loads and compiles the zone in Python:
 * sp_zone_read() and sp_zone_finish() return SP_ZONE_DECLINED with the reason in
 * zone->why ($GENERATE, a record without a TTL before any $TTL, SIG, anything ldns
 * rejects: the Python loader words each error), and sp_zone_compile() for an NSEC3
 * chain it does not judge (no SHA-1 NSEC3PARAM, owners that are no hashes).
 *
 * Layers, one file each:
 *   store.c    names interned (lower-cased wire), records, then RRsets, empty
 *              non-terminals and zone cuts (sp_zone_finish);
 *   read.c     the master file, record by record, through ldns (optional: built
 *              when pkg-config finds ldns);
 *   resolve.c  the answer to (name, type): CNAME chains, wildcards, referrals, glue,
 *              the CNAME a DNAME synthesizes;
 *   encode.c   an answer in wire format, names compressed;
 *   dnssec.c   a signed zone's answers with their RRSIGs and NSEC or NSEC3 proofs;
 *   nsec3.c    the NSEC3 chain in hash order, and the blob dns.c splices from;
 *   compile.c  every key of the zone into a table builder (dns.h's key kinds);
 *   responses.c  each response stored once (compile.c's, private: compiler.h);
 *   transfer.c the zone sent out: AXFR records, and two stores' difference (transfer.h).
 */
#ifndef STORMPY_ZONE_ZONE_H
#define STORMPY_ZONE_ZONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stormpy/engine/table.h"

#define SP_ZONE_NONE UINT32_MAX
#define SP_ZONE_NAME_MAX 255

enum sp_zone_status {
    SP_ZONE_OK = 0,
    SP_ZONE_DECLINED = 1,   /* not for the C path: load it in Python (why says which) */
    SP_ZONE_NOMEM = -1,
};

/* A name the zone holds: an owner, or an empty non-terminal between one and the origin. */
struct sp_zone_name {
    uint32_t off;          /* lower-cased wire form in zone->arena */
    uint32_t parent;       /* SP_ZONE_NONE at the origin */
    uint32_t first_rrset;  /* its RRsets, ordered by type */
    uint16_t nrrsets;      /* 0: an empty non-terminal */
    uint8_t len;
    uint8_t is_cut : 1;    /* NS here and not the origin */
    uint8_t dead : 1;      /* no longer in the zone (a patch took its records): skipped */
    uint8_t hidden : 1;    /* an NSEC3 record's hashed owner: no name of the zone (dead) */
    uint32_t cut_top;      /* the topmost cut at or above it, or SP_ZONE_NONE */
    uint32_t wildcard;     /* its child '*' (records or an empty non-terminal), or NONE */
};

struct sp_zone_rrset {
    uint32_t name;
    uint32_t ttl;
    uint32_t first;        /* into zone->rdatas, canonical order, no duplicates */
    uint16_t type;
    uint16_t count;
};

struct sp_zone_rdata {
    uint32_t off;          /* into zone->rdata_arena */
    uint16_t len;
};

/* A record as read, before sp_zone_finish() groups them. */
struct sp_zone_record {
    uint32_t name;
    uint32_t ttl;
    uint32_t rdata;        /* into zone->rdata_arena */
    uint16_t type;
    uint16_t rdlen;
};

/* Where a stored response carries the zone's SOA record: its TTL and the 20 bytes of
 * serial and timers that end it, rewritten in place when only those change. */
struct sp_zone_soa_place {
    uint32_t response;
    uint16_t ttl_at, tail_at;
    uint8_t negative;      /* in a denial's authority: its TTL is the negative TTL */
};

/* A name a patch gave new records, and what it was before (sp_zone_reopen). */
struct sp_zone_changed {
    uint32_t name;
    uint64_t old_ns;       /* hash of its NS records then; 0: none */
    bool was_cut;
};

struct sp_zone {
    uint8_t *arena;             /* names */
    size_t arena_len, arena_cap;
    struct sp_zone_name *names;
    uint32_t nnames, names_cap;
    uint32_t ndead;             /* names marked dead (still hashed, never served) */
    uint32_t *slots;            /* name hash: id + 1, 0 empty */
    uint32_t slots_mask;
    uint8_t *rdata_arena;
    size_t rdata_len, rdata_cap;
    struct sp_zone_record *records;
    uint32_t nrecords, records_cap;
    struct sp_zone_rrset *rrsets;
    uint32_t nrrsets;
    struct sp_zone_rdata *rdatas;
    uint32_t nrdatas;
    uint16_t *types;            /* every type the zone holds, ascending */
    uint32_t ntypes;
    uint32_t origin;            /* a name id */
    uint32_t soa;               /* the origin's SOA RRset */
    uint32_t negative_ttl;      /* min(SOA TTL, SOA minimum): RFC 2308 */
    uint32_t serial;
    bool nul_labels;            /* some name's first label starts with a zero byte */
    bool signed_zone;           /* DNSKEY and RRSIGs at the origin: answers get DNSSEC forms */
    bool nsec3;                 /* NSEC3PARAM at the origin and NSEC3 records */
    bool dnames;                /* DNAME records: the names below each are occluded */
    /* Since the last compile: the names patches changed and the zone as it was then,
     * for sp_zone_recompile(). */
    bool pending;
    struct sp_zone_changed *changed;
    uint32_t nchanged, changed_cap;
    uint16_t *old_types;
    uint32_t old_ntypes, old_soa_ttl, old_negative_ttl;
    bool old_nul_labels;
    uint8_t old_soa_names[2 * SP_ZONE_NAME_MAX];    /* the SOA's MNAME and RNAME */
    size_t old_soa_names_len;
    /* The SOA in the table this zone was last compiled into (or edited into). */
    struct sp_zone_soa_place *soa_places;
    uint32_t nsoa_places, soa_places_cap;
    char why[512];              /* SP_ZONE_DECLINED: the reason, for the debug log */
    /* Records outside the origin, left out as dnspython and Knot DNS leave them (the
     * loader warns), and the owner of the first. */
    uint32_t outside, first_outside;
    /* Records whose TTL is not their RRset's (RFC 2181 5.2): the lowest is kept, as
     * dnspython keeps it, and the loader warns (RRSIGs aside). */
    uint32_t ttl_mismatch, first_ttl_mismatch;
};

struct sp_zone *sp_zone_new(void);
void sp_zone_free(struct sp_zone *z);
/* A deep copy of a finished zone (without what a patch keeps for its compile): a
 * secondary writes its file from one while the zone itself is patched. NULL when
 * out of memory. */
struct sp_zone *sp_zone_copy(const struct sp_zone *z);

/* The id of a name (any case), added when absent; SP_ZONE_NONE when out of memory. */
uint32_t sp_zone_intern(struct sp_zone *z, const uint8_t *wire, size_t len);
/* The id of a lower-cased name, dead or alive; SP_ZONE_NONE when never seen. */
uint32_t sp_zone_find(const struct sp_zone *z, const uint8_t *wire, size_t len);
/* The id of a lower-cased name, or SP_ZONE_NONE when the zone does not hold it. */
uint32_t sp_zone_lookup(const struct sp_zone *z, const uint8_t *wire, size_t len);
static inline const uint8_t *sp_zone_name_wire(const struct sp_zone *z, uint32_t id)
{
    return z->arena + z->names[id].off;
}

/* One record; owner any case. 0, or SP_ZONE_NOMEM. */
int sp_zone_add_record(struct sp_zone *z, const uint8_t *owner, size_t owner_len, uint16_t type,
                       uint32_t ttl, const uint8_t *rdata, size_t rdlen);
/* Group the records into RRsets under the origin (a name wire), add the empty
 * non-terminals, find the cuts. SP_ZONE_OK, SP_ZONE_DECLINED or SP_ZONE_NOMEM. */
int sp_zone_finish(struct sp_zone *z, const uint8_t *origin, size_t origin_len);

/* A finished zone back to its records, less every record at the given names (any
 * case), so that sp_zone_add_record() can give those names their new records and
 * sp_zone_finish() group the zone again: a secondary's IXFR applied to the zone in
 * place, in time proportional to the zone's records, not to a parse of them. Names
 * left with no records and no descendant are marked dead by the finish. The names
 * and the zone as it was are kept for sp_zone_recompile(). 0, or SP_ZONE_NOMEM (the
 * zone is unusable then). */
int sp_zone_reopen(struct sp_zone *z, const uint8_t *const *names, const size_t *lens,
                   size_t count);

/* Whether records of this type stay on the C path: the obsolete SIG and NXT go to the
 * Python compiler (sp_zone_finish declines a zone holding one). */
bool sp_zone_type_in_c(uint16_t type);
/* Whether a patch (a secondary's IXFR) may carry records of this type: not DNSSEC's,
 * whose proofs reach beyond the names a patch touches, nor DNAME, which occludes them. */
bool sp_zone_type_patchable(uint16_t type);

/* Read a master file with ldns. origin: text, or NULL to take the file's first
 * $ORIGIN. SP_ZONE_DECLINED when this build has no ldns. */
int sp_zone_read(struct sp_zone *z, const char *path, const char *origin);
bool sp_zone_reader_available(void);
/* The zone as a master file at path (ldns prints each record; the apex first): a
 * secondary's copy on disk. SP_ZONE_OK, SP_ZONE_DECLINED (no ldns, or a record it
 * cannot print) or -errno. */
int sp_zone_write(struct sp_zone *z, const char *path);

/* Helpers the layers share. */
static inline uint64_t sp_zone_hash(const uint8_t *p, size_t n, uint64_t seed)
{
    const uint64_t mul = 0x9e3779b97f4a7c15ULL;
    uint64_t h = (seed ^ n) * mul, w;
    for (; n >= 8; n -= 8, p += 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * mul;
        h ^= h >> 29;
    }
    if (n) {
        w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * mul;
    }
    h ^= h >> 33;                 /* MurmurHash3's finalizer: every bit reaches the low ones */
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

bool sp_zone_is_subdomain(const uint8_t *name, size_t len, const uint8_t *parent, size_t plen);
size_t sp_zone_wire_len(const uint8_t *name, size_t cap);   /* 0: malformed */
uint32_t sp_zone_find_rrset(const struct sp_zone *z, uint32_t name, uint16_t type);
/* The RRSIGs at name covering type (an RRset of its own per covered type). */
uint32_t sp_zone_find_sigs(const struct sp_zone *z, uint32_t name, uint16_t covered);
static inline uint16_t sp_zone_covered(const struct sp_zone *z, uint32_t rrset)
{
    const struct sp_zone_rdata *d = &z->rdatas[z->rrsets[rrset].first];
    const uint8_t *p = z->rdata_arena + d->off;
    return d->len >= 2 ? (uint16_t)(p[0] << 8 | p[1]) : 0;
}

/* --- resolve.c --- */
#define SP_ZONE_MAX_CHAIN 5           /* CNAMEs followed in one answer (Knot DNS: 5) */
#define SP_ZONE_ADDITIONAL_MAX 1024

/* An RRset in an answer under the name it is given: its own, a wildcard's asker, or
 * (owner NULL) the question's name itself. */
struct sp_zone_rref {
    uint32_t rrset;
    uint32_t ttl;           /* the RRset's, or the negative TTL for a denial's SOA */
    const uint8_t *owner;   /* lower-cased wire; NULL: the question's name */
    uint8_t owner_len;
};

/* A name as resolving met it, for dnssec.c's proofs: one the zone holds (id), or not
 * (id NONE); wire NULL stands for the name asked of a BELOW key (any name below it). */
struct sp_zone_point {
    const uint8_t *wire;
    uint32_t id;
    uint8_t len;
};

enum sp_zone_denial { SP_ZONE_NO_DENIAL, SP_ZONE_NXDOMAIN, SP_ZONE_NODATA };

#define SP_ZONE_AUTHORITY_MAX 32       /* a signed denial's SOA, proofs and their RRSIGs */

/* An rref's rrset for the CNAME a DNAME synthesizes (RFC 6672): owned by the name it
 * rewrites, its target in the answer's `synthesized`. */
#define SP_ZONE_SYNTHESIZED (SP_ZONE_NONE - 1)

/* The sections' arrays have room for a DNSSEC form's RRSIGs beside each RRset. */
struct sp_zone_answer {
    uint8_t rcode;
    bool aa, referral;
    /* the synthesized CNAME's target, when the answer has one; a template (the
     * DNAME's target, dns.c's dname.c puts the asked labels in front) when it is
     * owned by the asked name of a BELOW key */
    bool synthesized, template;
    uint8_t synthesized_len;
    uint16_t nan, nns, nad;
    uint16_t nad_required;         /* ad[0..this) must come, or TC: a referral's
                                      in-domain glue (RFC 9471); the rest may be left out */
    uint8_t denial;                /* enum sp_zone_denial */
    struct sp_zone_point denied;   /* the name denied */
    uint32_t denial_owner;         /* NXDOMAIN: the closest encloser; NODATA: the node
                                      answering (the name, an empty non-terminal, a wildcard) */
    uint16_t nexpanded;            /* wildcards expanded: the name, the wildcard's node */
    struct { struct sp_zone_point name; uint32_t wildcard; } expanded[SP_ZONE_MAX_CHAIN + 1];
    struct sp_zone_rref an[2 * (SP_ZONE_MAX_CHAIN + 1)];
    struct sp_zone_rref ns[SP_ZONE_AUTHORITY_MAX];
    struct sp_zone_rref ad[2 * SP_ZONE_ADDITIONAL_MAX];
    uint8_t names[SP_ZONE_MAX_CHAIN + 1][SP_ZONE_NAME_MAX];  /* chain targets, lower-cased */
    uint8_t synthesized_target[SP_ZONE_NAME_MAX];
};

/* The topmost DNAME owner at `from` (a name id) or above it, or SP_ZONE_NONE: a name
 * below it is rewritten by it (occluded). */
uint32_t sp_zone_dname_above(const struct sp_zone *z, uint32_t from);

/* The answer to (name, qtype) as compiler.py's ZoneIndex.resolve gives it. name is a
 * name id; SP_ZONE_NONE with below set means a name the zone does not hold, just
 * below the name `below` (compile.c's BELOW keys). qtype 0: any type not listed.
 * 0, or -1 when the additional section would exceed SP_ZONE_ADDITIONAL_MAX. */
int sp_zone_resolve(const struct sp_zone *z, uint32_t name, uint32_t below, uint16_t qtype,
                    struct sp_zone_answer *a);
/* The referral at cut (a name id) after `answer` so far. */
int sp_zone_referral(const struct sp_zone *z, uint32_t cut, struct sp_zone_answer *a);

/* --- encode.c --- */
#define SP_ZONE_SHIFTS_MAX 500     /* compiler.py's SHIFTS_MAX */

/* A variable response's pointers that move with the question (SP_PATCH_SHIFT): the
 * length of the question it was compressed for, then where each pointer is stored.
 * anchor, set by the caller: how many of the name's last bytes every asker shares
 * (the name's own length, or the origin's for a response all names share). */
struct sp_zone_shifts {
    uint16_t question, n, anchor;
    uint16_t at[SP_ZONE_SHIFTS_MAX];
    /* set by the caller: the additional section uncompressed (an NSEC3 proof goes in
     * before it per query, nsec3.c); then where it starts in the stored response */
    bool plain_additional;
    uint32_t additional_at;
};

/* The stored response: header, then the sections after the question. qname (lower-
 * cased wire, qlen bytes) is the question's name for a fixed response (compressed
 * throughout, pointers into the question allowed). With shifts, a variable response
 * below qname: the asked name is a pointer to the question, the rest compressed as
 * for a question one label below qname (into the question only at its last
 * shifts->anchor bytes), and shifts lists the pointers. qname NULL: a variable
 * response with nothing but the asked name compressed. Returns the stored length;
 * *droppable as compiler.py's encoders. soa->ttl_at 0: no SOA stored. An answer over
 * 65535 bytes is stored as Knot DNS answers it over TCP (answer.py's encoders): filled,
 * with room for an OPT record (and a variable one's for the longest question), each
 * additional RRset that does not fit left out (in-domain glue: with TC); when the
 * answer and authority sections alone do not fit, a SERVFAIL header, never AA. */
size_t sp_zone_encode(const struct sp_zone *z, const struct sp_zone_answer *a,
                      const uint8_t *qname, size_t qlen, uint8_t *out, uint32_t *droppable,
                      struct sp_zone_soa_place *soa, struct sp_zone_shifts *shifts);

/* --- nsec3.c --- */
/* A zone's NSEC3 chain in hash order (RFC 5155). SP_ZONE_DECLINED (why set) for a
 * chain dnspython is left to judge: other than one NSEC3PARAM with SHA-1, or an owner
 * that is no hash right below the origin. */
struct sp_zone_nsec3;
int sp_zone_nsec3_new(struct sp_zone *z, struct sp_zone_nsec3 **out);
void sp_zone_nsec3_free(struct sp_zone_nsec3 *n);
/* The NSEC3 RRset whose owner is the hash of a held name, or NONE (opt-out). */
uint32_t sp_zone_nsec3_matching(struct sp_zone_nsec3 *n, uint32_t name);
/* The NSEC3 RRset covering any name's hash: the last before it, wrapping. */
uint32_t sp_zone_nsec3_covering(const struct sp_zone_nsec3 *n, const uint8_t *wire, size_t len);
/* An NSEC3 RRset's place in the chain (NONE: not in it). */
uint32_t sp_zone_nsec3_index(const struct sp_zone_nsec3 *n, uint32_t rrset);
/* The chain as app/dns/nsec3.c searches it (a malloc'ed blob, *len bytes): iterations,
 * salt, count, per record its hash and where its NSEC3 and RRSIG records lie.
 * SP_ZONE_DECLINED when a record's entry would pass its 16-bit lengths. */
int sp_zone_nsec3_chain(const struct sp_zone_nsec3 *n, uint8_t **out, size_t *len);

/* --- dnssec.c --- */
#define SP_ZONE_UNPROVABLE 2
#define SP_ZONE_SPLICED 3

/* A signed zone's proof index: for NSEC its names in canonical order (RFC 4034
 * section 6.1), for NSEC3 its chain. Made after sp_zone_finish, for one compile.
 * SP_ZONE_OK, SP_ZONE_NOMEM, or SP_ZONE_DECLINED (why set: sp_zone_nsec3_new). */
struct sp_zone_dnssec;
int sp_zone_dnssec_new(struct sp_zone *z, struct sp_zone_dnssec **out);
void sp_zone_dnssec_free(struct sp_zone_dnssec *d);
struct sp_zone_nsec3 *sp_zone_dnssec_nsec3(const struct sp_zone_dnssec *d);   /* NULL: NSEC */

/* out: a (resolved) with the RRSIGs of every RRset it holds and the NSEC or NSEC3
 * records that prove its denials, as dnssec.py's Signed.sign. asked: the name a BELOW
 * key's answer is given for (NULL: for the key itself, every name below it).
 * SP_ZONE_OK; SP_ZONE_UNPROVABLE when an NSEC proof depends on the name asked (the key
 * then gets one form per gap, below); SP_ZONE_SPLICED when out lacks the NSEC3
 * covering the asked name's next closer name (dns.c hashes the name and splices it
 * in: app/dns/nsec3.c); -1 when the sections overflow. */
int sp_zone_sign(const struct sp_zone_dnssec *d, const struct sp_zone_answer *a,
                 const struct sp_zone_point *asked, struct sp_zone_answer *out);

/* The gaps between an ancestor's children (dns.h's SP_DNS_USER_GAPS): the bound, the
 * label from which on a name falls in the gap (the first's is empty), and a name in
 * it. Gap i of sp_zone_gap_count(); false when no name fits in it. */
struct sp_zone_gap {
    uint8_t bound[64];                 /* length-prefixed */
    uint8_t sample[SP_ZONE_NAME_MAX];
    uint8_t sample_len;
};
uint32_t sp_zone_gap_count(const struct sp_zone_dnssec *d, uint32_t ancestor);
bool sp_zone_gap(const struct sp_zone_dnssec *d, uint32_t ancestor, uint32_t i,
                 struct sp_zone_gap *g);

/* --- compile.c --- */
struct sp_zone_compile_stats {
    uint64_t keys;        /* keys added */
    uint64_t responses;   /* distinct responses this zone refers to */
    uint64_t oversized;   /* answers over 65535 bytes, answered SERVFAIL (sp_zone_encode) */
    uint32_t oversized_name;    /* the first one's name, or the name it is below */
    uint16_t oversized_type;    /* and its type (0: any type the name has no key for) */
    bool oversized_below;       /* the first one answers names below oversized_name */
};

/* Every key of the zone into b; each response's word carries the zone's counter
 * slot. SP_ZONE_OK, SP_ZONE_DECLINED (why says which answer) or SP_ZONE_NOMEM. */
int sp_zone_compile(struct sp_zone *z, struct sp_table_builder *b, uint32_t slot,
                    struct sp_zone_compile_stats *stats);

/* After patches (sp_zone_reopen, sp_zone_finish): b, an edit of the table this zone
 * was last compiled into (sp_table_builder_edit), brought to the zone's new state
 * by taking out and compiling again only the keys of the names whose answers the
 * patches can change, and rewriting the SOA where it is stored. SP_ZONE_DECLINED
 * (why says why) when a whole compile is due instead: the zone's set of types or
 * its SOA's names changed, or the change reaches most names. */
int sp_zone_recompile(struct sp_zone *z, struct sp_table_builder *b, uint32_t slot,
                      struct sp_zone_compile_stats *stats);

/* --- affected.c --- */
enum { SP_ZONE_CHANGED = 1, SP_ZONE_ABOVE = 2, SP_ZONE_WILD_PARENT = 4, SP_ZONE_AFFECTED = 8 };
/* mark (one byte a name, zeroed) gets SP_ZONE_AFFECTED on every name whose keys the
 * patches since the last compile can change: those names, their ancestors, a cut's
 * whole subtree when its NS changed, and the owners of CNAME, NS, MX and SRV records
 * whose targets reach a changed name, to a fixed point. Returns how many, or
 * UINT32_MAX when so many cuts changed that a whole compile is due. */
uint32_t sp_zone_affected(const struct sp_zone *z, uint8_t *mark);
uint64_t sp_zone_ns_hash(const struct sp_zone *z, uint32_t name);

#endif
