/* Pre-copy mode: a set-associative cache of ready-made reply frames. See precopy.h. */
#include "stormpy/app/dns/precopy.h"

#include <stdlib.h>
#include <string.h>

#include "stormpy/app/dns/answer.h"
#include "stormpy/app/dns/dns.h"
#include "stormpy/proto/csum.h"

enum { SLOT_EMPTY = 0, SLOT_IDLE, SLOT_BUSY };

struct slot {
    uint64_t key0, key1;     /* the tag: response pointer; epoch and layout */
    uint8_t *data;
    uint64_t id;
    uint32_t cap;
    uint32_t len;            /* the whole frame */
    /* What the DNS layer adds to the table's rendering (the OPT record and the ARCOUNT
     * that counts it), as a partial sum: the same for every query with this tag. For
     * an application's own copies (sp_precopy_take), the sum it stored. */
    uint32_t extra_sum;
    uint8_t state;
};

struct sp_precopy {
    unsigned nframes;
    unsigned set_mask;
    uint32_t epoch;
    uint64_t generation;
    const struct sp_table *table;
    unsigned busy;
    size_t min_len;          /* smaller answers go the memcpy way */
    struct sp_precopy_counters counters;
    uint8_t *hand;           /* per set: where the search for a victim starts */
    struct slot slots[];
};

struct sp_precopy *sp_precopy_new(unsigned frames)
{
    if (frames < SP_PRECOPY_WAYS || frames > SP_PRECOPY_MAX_FRAMES)
        return NULL;
    unsigned sets = 1;
    while (sets * 2 * SP_PRECOPY_WAYS <= frames)
        sets *= 2;
    unsigned n = sets * SP_PRECOPY_WAYS;
    struct sp_precopy *p = calloc(1, sizeof(*p) + (size_t)n * sizeof(struct slot));
    if (!p)
        return NULL;
    p->hand = calloc(sets, 1);
    if (!p->hand) {
        free(p);
        return NULL;
    }
    p->nframes = n;
    p->set_mask = sets - 1;
    p->min_len = SP_PRECOPY_DEFAULT_MIN_LEN;
    return p;
}

void sp_precopy_free(struct sp_precopy *p)
{
    if (p) {
        free(p->hand);
        free(p);
    }
}

void sp_precopy_set_min_len(struct sp_precopy *p, size_t len)
{
    p->min_len = len;
}

unsigned sp_precopy_frames(const struct sp_precopy *p)
{
    return p->nframes;
}

void sp_precopy_set_frame(struct sp_precopy *p, unsigned i, uint8_t *data, uint32_t cap,
                          uint64_t id)
{
    if (i >= p->nframes)
        return;
    p->slots[i].data = data;
    p->slots[i].cap = cap;
    p->slots[i].id = id;
    p->slots[i].state = SLOT_EMPTY;
}

/* Frames a cache line apart beyond SP_FRAME_MAX: at a 2 KB stride every frame's head
 * would fall in the same two L1 sets, and a hit touches only the head. */
#define HEAP_STRIDE (SP_FRAME_MAX + 64)

uint8_t *sp_precopy_lend_heap(struct sp_precopy *p)
{
    uint8_t *mem = malloc((size_t)p->nframes * HEAP_STRIDE);
    if (!mem)
        return NULL;
    for (unsigned i = 0; i < p->nframes; i++)
        sp_precopy_set_frame(p, i, mem + (size_t)i * HEAP_STRIDE, SP_FRAME_MAX, i);
    return mem;
}

bool sp_precopy_may_copy(const struct sp_precopy *p, const struct sp_table *t)
{
    /* sp_precopy_reply()'s test of a long answer, with the longest of each part */
    return (size_t)sp_table_longest_response(t) + SP_DNS_NAME_MAX + 4 + SP_DNS_OPT_LEN >=
           p->min_len;
}

void sp_precopy_begin(struct sp_precopy *p, const struct sp_table *t, uint64_t generation)
{
    if (t == p->table && generation == p->generation)
        return;
    p->table = t;
    p->generation = generation;
    p->epoch++;
    /* Idle copies go now; the epoch in the tag covers those still in flight. */
    for (unsigned i = 0; i < p->nframes; i++)
        if (p->slots[i].state == SLOT_IDLE)
            p->slots[i].state = SLOT_EMPTY;
}

void sp_precopy_complete(struct sp_precopy *p, uint32_t index)
{
    if (index >= p->nframes || p->slots[index].state != SLOT_BUSY)
        return;
    struct slot *s = &p->slots[index];
    s->state = (uint32_t)(s->key1 >> 32) == p->epoch ? SLOT_IDLE : SLOT_EMPTY;
    p->busy--;
}

const struct sp_precopy_counters *sp_precopy_get_counters(const struct sp_precopy *p)
{
    return &p->counters;
}

unsigned sp_precopy_in_flight(const struct sp_precopy *p)
{
    return p->busy;
}

static inline unsigned set_of(const struct sp_precopy *p, uint64_t key0, uint64_t key1)
{
    uint64_t h = (key0 ^ (key1 * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
    return (unsigned)(h ^ (h >> 29) ^ (h >> 47)) & p->set_mask;
}

/* An idle copy with the tag, or NULL and in *victim a way to fill (NULL: none is
 * free of flight and large enough). */
static struct slot *lookup(struct sp_precopy *p, uint64_t key0, uint64_t key1, size_t flen,
                           struct slot **victim)
{
    unsigned set = set_of(p, key0, key1);
    struct slot *ways = &p->slots[(size_t)set * SP_PRECOPY_WAYS];
    struct slot *empty = NULL;
    for (unsigned i = 0; i < SP_PRECOPY_WAYS; i++) {
        struct slot *s = &ways[i];
        if (s->state == SLOT_IDLE && s->key0 == key0 && s->key1 == key1)
            return s;
        if (!empty && s->state == SLOT_EMPTY && s->cap >= flen)
            empty = s;
    }
    *victim = empty;
    if (empty)
        return NULL;
    /* Round robin over the idle ways: cheap, and no way stays hot for ever. */
    unsigned h = p->hand[set];
    for (unsigned k = 0; k < SP_PRECOPY_WAYS; k++) {
        unsigned i = (h + k) % SP_PRECOPY_WAYS;
        if (ways[i].state == SLOT_IDLE && ways[i].cap >= flen) {
            p->hand[set] = (uint8_t)((i + 1) % SP_PRECOPY_WAYS);
            *victim = &ways[i];
            break;
        }
    }
    return NULL;
}

static size_t send_slot(struct sp_precopy *p, struct slot *s, struct sp_frame *out)
{
    s->state = SLOT_BUSY;
    p->busy++;
    out->data = s->data;
    out->len = s->len;
    out->cap = s->cap;
    out->id = s->id;
    out->pool = (int32_t)(s - p->slots);
    return s->len;
}

uint32_t sp_precopy_epoch(const struct sp_precopy *p)
{
    return p->epoch;
}

int sp_precopy_get(struct sp_precopy *p, uint64_t key0, uint64_t key1, size_t flen, int *fill)
{
    struct slot *victim = NULL;
    struct slot *s = lookup(p, key0, key1, flen, &victim);
    *fill = victim ? (int)(victim - p->slots) : -1;
    if (s)
        p->counters.hits++;
    else if (victim)
        p->counters.fills++;
    else
        p->counters.fallbacks++;
    return s ? (int)(s - p->slots) : -1;
}

uint8_t *sp_precopy_frame(struct sp_precopy *p, int i, uint32_t *sum)
{
    *sum = p->slots[i].extra_sum;
    return p->slots[i].data;
}

void sp_precopy_take(struct sp_precopy *p, int i, uint64_t key0, uint64_t key1, uint32_t len,
                     uint32_t sum, struct sp_frame *out)
{
    struct slot *s = &p->slots[i];
    s->key0 = key0;
    s->key1 = key1;
    s->len = len;
    s->extra_sum = sum;
    send_slot(p, s, out);
}

size_t sp_precopy_reply(struct sp_precopy *p, const struct sp_table *t, struct sp_dns_worker *d,
                        struct sp_dns_query *q, const struct sp_frame_config *cfg,
                        const uint8_t *rx, const struct sp_frame_query *fq,
                        enum sp_dns_verdict v, const struct sp_response *r,
                        const struct sp_frame *tx, struct sp_frame *out)
{
    size_t dns_cap = sp_frame_payload_cap(cfg, fq, tx->cap), n;
    if (!dns_cap)
        return 0;
    /* Below the minimum even with an OPT record: decided before anything is computed. */
    bool large = r && (size_t)r->len + q->question_len + SP_DNS_OPT_LEN >= p->min_len;
    size_t full = large && v == SP_DNS_LOOKUP ? sp_dns_copy_len(r, q, &d->cfg, dns_cap) : 0;
    if (full && full >= p->min_len) {
        size_t flen = fq->headers + full;
        uint64_t key0 = (uint64_t)(uintptr_t)r;
        uint64_t key1 = (uint64_t)p->epoch << 32 | (uint64_t)q->question_len << 16 |
                        (uint64_t)fq->l2 << 8 | (uint64_t)(fq->u.family == 6) << 2 |
                        (uint64_t)q->edns << 1 | (uint64_t)q->edns_do;
        struct slot *victim = NULL;
        struct slot *s = lookup(p, key0, key1, flen, &victim);
        if (s) {
            const uint8_t *msg = rx + fq->l2 + fq->u.payload_off;
            uint8_t *payload = s->data + fq->headers;
            uint32_t sum = sp_csum_add(sp_dns_copy_rewrite(t, r, msg, q, payload), s->extra_sum);
            sp_frame_write_headers(cfg, rx, fq, s->data, full, sum);
            d->counters.rcode[SP_DNS_USER_HEADER_RCODE(r->user)]++;
            d->counters.zone[SP_DNS_USER_ZONE(r->user)]++;
            p->counters.hits++;
            return send_slot(p, s, out);
        }
        if (victim) {
            n = sp_dns_frame_reply(t, d, q, cfg, rx, fq, v, r, victim->data, victim->cap);
            if (!n) {                 /* counted by the DNS layer, as in memcpy mode */
                victim->state = SLOT_EMPTY;
                return 0;
            }
            victim->key0 = n == flen ? key0 : 0;   /* not the frame foreseen: never a hit */
            victim->key1 = key1;
            victim->len = (uint32_t)n;
            /* Summed once per fill, so that no hit ever sums the payload again. */
            const uint8_t *payload = victim->data + fq->headers;
            uint32_t whole = sp_csum_partial(payload, full, 0);
            victim->extra_sum = sp_csum_sub(whole, sp_dns_copy_sum(t, r, q, payload));
            p->counters.fills++;
            return send_slot(p, victim, out);
        }
        p->counters.fallbacks++;
    }
    n = sp_dns_frame_reply(t, d, q, cfg, rx, fq, v, r, tx->data, tx->cap);
    if (n) {
        *out = *tx;
        out->len = (uint32_t)n;
        out->pool = -1;
    }
    return n;
}

/* sp_precopy_answer(), inlined where it is called: in the batch loop below too. */
static inline __attribute__((always_inline)) size_t
precopy_answer(struct sp_precopy *p, const struct sp_table *t, struct sp_dns_worker *d,
               const struct sp_frame_config *cfg, const struct sp_frame *frame,
               const struct sp_frame *tx, struct sp_frame *out, struct sp_frame_counters *c)
{
    struct sp_frame_query fq;
    size_t n;
    const uint8_t *rx = frame->data;
    if (sp_frame_parse_unchecked(cfg, frame, tx->data, tx->cap, &fq, &n, c) != SP_FRAME_QUERY) {
        if (n) {
            *out = *tx;
            out->len = (uint32_t)n;
        }
        return n;
    }
    if (!sp_frame_payload_cap(cfg, &fq, tx->cap))
        return 0;
    struct sp_dns_query *q = &d->query;
    enum sp_dns_verdict v;
    const struct sp_response *r =
        sp_dns_find(t, rx + fq.l2 + fq.u.payload_off, fq.u.payload_len, q, true, &v);
    if (d->rrl && !sp_dns_rate_limit(d, fq.u.family, fq.u.src, &v, r))
        return 0;
    if (!sp_dns_payload_checked(rx, &fq, q, c))
        return 0;
    return sp_precopy_reply(p, t, d, q, cfg, rx, &fq, v, r, tx, out);
}

/* Flattened as the memcpy path is (answer.c), so that a hit costs that path's parse
 * and lookup and no more calls than it. */
__attribute__((flatten)) size_t
sp_precopy_answer(struct sp_precopy *p, const struct sp_table *t, struct sp_dns_worker *d,
                  const struct sp_frame_config *cfg, const struct sp_frame *frame,
                  const struct sp_frame *tx, struct sp_frame *out, struct sp_frame_counters *c)
{
    return precopy_answer(p, t, d, cfg, frame, tx, out, c);
}

/* The loop inlined with its body, as sp_dns_frames_answer() (answer.c). */
__attribute__((flatten)) unsigned
sp_precopy_frames_answer(struct sp_precopy *p, const struct sp_table *t, struct sp_dns_worker *d,
                         const struct sp_frame_config *cfg, const struct sp_frame *rx,
                         unsigned n, const struct sp_frame *tx, struct sp_frame *out,
                         unsigned *taken, struct sp_frame_counters *c)
{
    unsigned sent = 0, used = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!precopy_answer(p, t, d, cfg, &rx[i], &tx[used], &out[sent], c))
            continue;
        used += out[sent].pool < 0;
        sent++;
    }
    *taken = used;
    return sent;
}
