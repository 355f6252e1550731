/* The zone compiler's state, shared by compile.c (what each key answers) and
 * responses.c (each response stored once). Private to native/zone. */
#ifndef STORMPY_ZONE_COMPILER_H
#define STORMPY_ZONE_COMPILER_H

#include "stormpy/zone/zone.h"
#include "stormpy/engine/table.h"

struct known;

/* The question's ID, RD and CD copied (compiler.py's SPLICED_PATCHES): the patches
 * of a response completed per name, without the question's INSERT. */
extern const struct sp_patch sp_compiler_spliced_patches[3];

/* One stored response's bytes: fixed, or variable (below a name, its pointers moving
 * with the question: shifts). */
struct form {
    uint8_t wire[SP_RESPONSE_MAX + 1];
    size_t len;
    uint32_t drop;
    bool variable;
    bool spliced;           /* a DNAME's, completed per name by dns.c: no INSERT */
    struct sp_zone_shifts shifts;
};

enum { SIGNED_NONE, SIGNED_FORM, SIGNED_GAPS, SIGNED_NSEC3 };

/* One key's answer: its form, and in a signed zone its DNSSEC form (dns.h's
 * SP_DNS_USER_SIGNED), the list of a form per gap (SP_DNS_USER_GAPS) or an NSEC3
 * descriptor (SP_DNS_USER_NSEC3). A list or descriptor refers to forms stored as it
 * is made, so equal bytes mean equal answers. */
struct result {
    struct form plain, dnssec;
    uint8_t signed_kind;
    uint8_t *list;              /* the gap list or descriptor */
    size_t list_len, list_cap;
};

struct compiler {
    struct sp_zone *z;
    struct sp_table_builder *b;
    uint32_t slot;
    struct known *known;
    uint64_t mask, nknown;
    struct sp_zone_compile_stats *stats;
    struct sp_zone_dnssec *dnssec;     /* a signed zone's, or NULL */
    struct sp_zone_answer answer, signed_answer;
    struct sp_zone_soa_place soa;      /* where the last answer encoded holds the SOA */
    struct result other, typed;        /* OTHER's answer at a name, and a type's */
    struct form gap;
    int64_t chain;                     /* an NSEC3 zone's chain, once stored (else -1) */
    bool servfail;                     /* a form of the answer being made is SERVFAIL */
    struct sp_patch patches[4 + SP_ZONE_SHIFTS_MAX];
};

/* The index of f, added the first time it is seen; -1 when the builder refuses. */
int64_t sp_compiler_response(struct compiler *c, const struct form *f, uint32_t user);
/* r's group (its form, then its DNSSEC form or list right after it: dns.c takes the
 * next response), added once; its first index, or -1. */
int64_t sp_compiler_stored(struct compiler *c, const struct result *r, uint32_t flags);
/* Room for n more bytes in r's list. */
int sp_compiler_list_room(struct result *r, size_t n);
/* A gap list entry: the form's index and the gap's bound (length-prefixed). */
int sp_compiler_put_gap(struct result *r, int64_t index, const uint8_t *bound);
uint32_t sp_compiler_user_word(const struct form *f, uint32_t slot, uint32_t flags);
int sp_compiler_grow_known(struct compiler *c);

#endif
