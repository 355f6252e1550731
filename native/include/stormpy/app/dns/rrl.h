/*
 * Response rate limiting, as NSD and Knot DNS do it: answers to one source prefix
 * (/24 for IPv4, /56 for IPv6 by default) of one kind (the same prepackaged
 * response, so every name answered by a zone's NXDOMAIN is one kind; or the same
 * error) are counted per second in a bucket. Past `rate` in a second they are
 * dropped, except every `slip`-th one, which goes out truncated (TC=1, no records)
 * so a real client behind a spoofed prefix retries over TCP. Sources in the
 * allow-list are never limited.
 *
 * One table serves every worker of a server: it lives in the region shared with
 * the worker processes (shm.h), buckets are updated with relaxed atomics, and
 * nothing is allocated after sp_rrl_init(). Buckets come in sets of two, chosen by a
 * hash keyed with a secret drawn at sp_rrl_init() (a client cannot pick sources that
 * share a set); each bucket counts one (prefix, kind), named by a tag, for the current
 * second. A third that finds both taken in the same second is not limited: a flood
 * spread over every set cannot make others' answers limited, and three sources that
 * share a set cannot be found without the secret. (A bucket taken over with its count
 * reset let two colliding sources, alternating, go unlimited.) A race at a second's
 * turn only makes the count approximate, never unsafe.
 */
#ifndef STORMPY_APP_DNS_RRL_H
#define STORMPY_APP_DNS_RRL_H

#include <stddef.h>
#include <stdint.h>

#define SP_RRL_ALLOW_MAX 16

enum sp_rrl_action { SP_RRL_SEND = 0, SP_RRL_DROP, SP_RRL_SLIP };

struct sp_rrl_prefix {
    uint8_t family;          /* 4 or 6 */
    uint8_t len;             /* prefix length in bits */
    uint8_t addr[16];
};

struct sp_rrl_config {
    uint32_t rate;           /* answers per second per bucket, for the whole server */
    uint32_t slip;           /* every slip-th limited answer goes out truncated; 0: none */
    uint8_t v4_prefix;       /* bits of an IPv4 source that name its bucket (24) */
    uint8_t v6_prefix;       /* bits of an IPv6 source (56) */
    uint32_t nallow;
    struct sp_rrl_prefix allow[SP_RRL_ALLOW_MAX];
};

struct sp_rrl_bucket {
    uint32_t tag;            /* the (prefix, kind) counted here: its hash's high half | 1 */
    uint32_t second;
    uint32_t count;
    uint32_t unused;
};

struct sp_rrl {
    struct sp_rrl_config cfg;
    uint64_t mask;           /* buckets - 1 */
    uint64_t secret;         /* the buckets' hash key */
    struct sp_rrl_bucket bucket[];
};

/* Bytes for a table of `buckets` buckets (a power of two). */
size_t sp_rrl_size(uint64_t buckets);
/* Lays a table out in mem (sp_rrl_size bytes, zeroed). NULL when buckets is not
 * a power of two or the config is out of range (prefix lengths, allow-list). */
struct sp_rrl *sp_rrl_init(void *mem, uint64_t buckets, const struct sp_rrl_config *cfg);

/* What to do with an answer of kind `kind` to src (4 or 16 bytes); now_s is any
 * clock in whole seconds. */
enum sp_rrl_action sp_rrl_check(struct sp_rrl *r, uint8_t family, const uint8_t *src,
                                uint64_t kind, uint32_t now_s);

#endif
