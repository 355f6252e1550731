/* The tap's rings: the worker's copies, the tap's attach and drain. See tap.h. */
#include "stormpy/engine/tap.h"

#include <string.h>

#include "stormpy/engine/clock.h"

_Static_assert(sizeof(struct sp_tap_record) == SP_TAP_ALIGN, "a record header is one unit");
_Static_assert(sizeof(struct sp_tap_ring) % 64 == 0, "rings stay cache-line aligned");

int sp_tap_region_init(struct sp_tap_region *r, uint32_t rings, uint64_t ring_bytes,
                       uint32_t snaplen)
{
    if (ring_bytes < (64u << 10) || (ring_bytes & (ring_bytes - 1)) || snaplen == 0 ||
        snaplen > ring_bytes / 4)
        return -1;
    r->rings = rings;
    r->snaplen = snaplen;
    r->ring_bytes = ring_bytes;
    __atomic_store_n(&r->magic, SP_TAP_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

static inline uint32_t padded(uint32_t n)
{
    return (n + SP_TAP_ALIGN - 1) / SP_TAP_ALIGN * SP_TAP_ALIGN;
}

static inline struct sp_tap_record *record_at(struct sp_tap_region *r, struct sp_tap_ring *ring,
                                              uint64_t pos)
{
    return (struct sp_tap_record *)((char *)(ring + 1) + (pos & (r->ring_bytes - 1)));
}

struct sp_tap_ring *sp_tap_ring_live(struct sp_tap_region *r, int index, uint64_t *now)
{
    uint32_t session = __atomic_load_n(&r->attached, __ATOMIC_ACQUIRE);
    *now = sp_now_ns();
    if (session == 0 || index < 0 || (uint32_t)index >= r->rings)
        return NULL;
    if (sp_tap_session(r, *now) == 0) {
        /* the tap died: detach it, unless another has just taken its place */
        __atomic_compare_exchange_n(&r->attached, &session, 0, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED);
        return NULL;
    }
    return sp_tap_ring_at(r, (uint32_t)index);
}

/* Room in ring at *head for a record of len bytes (caplen of them kept), its header
 * written; NULL, and a drop counted, when the tap has not read enough yet. */
static struct sp_tap_record *reserve(struct sp_tap_region *r, struct sp_tap_ring *ring,
                                     uint64_t *head, uint64_t tail, uint32_t len, int dir,
                                     uint64_t now)
{
    uint64_t size = r->ring_bytes;
    uint32_t caplen = len < r->snaplen ? len : r->snaplen;
    uint32_t need = padded((uint32_t)sizeof(struct sp_tap_record) + caplen);
    uint64_t to_end = size - (*head & (size - 1));
    uint64_t skip = need > to_end ? to_end : 0;   /* a record never wraps */
    if (skip + need > size - (*head - tail)) {
        ring->drops++;
        return NULL;
    }
    if (skip) {
        struct sp_tap_record *s = record_at(r, ring, *head);
        memset(s, 0, sizeof(*s));
        s->size = (uint32_t)skip;
        s->dir = SP_TAP_SKIP;
        *head += skip;
    }
    struct sp_tap_record *rec = record_at(r, ring, *head);
    rec->size = need;
    rec->caplen = caplen;
    rec->len = len;
    rec->dir = (uint16_t)dir;
    rec->pad = 0;
    rec->ts_ns = now;
    rec->pad1 = 0;
    *head += need;
    ring->records++;
    return rec;
}

void sp_tap_copy(struct sp_tap_region *r, struct sp_tap_ring *ring, const struct sp_frame *f,
                 unsigned n, int dir, uint64_t now)
{
    uint64_t head = ring->head;
    uint64_t tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        struct sp_tap_record *rec = reserve(r, ring, &head, tail, f[i].len, dir, now);
        if (rec)
            memcpy(rec + 1, f[i].data, rec->caplen);
    }
    __atomic_store_n(&ring->head, head, __ATOMIC_RELEASE);   /* the tap sees whole records */
}

void sp_tap_copy_gathered(struct sp_tap_region *r, struct sp_tap_ring *ring,
                          const struct sp_gather *g, unsigned n, uint64_t now)
{
    uint64_t head = ring->head;
    uint64_t tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++) {
        struct sp_tap_record *rec = reserve(r, ring, &head, tail, g[i].head_len + g[i].len,
                                            SP_TAP_TX, now);
        if (!rec)
            continue;
        uint8_t *out = (uint8_t *)(rec + 1);
        uint32_t room = rec->caplen, take = g[i].head_len < room ? g[i].head_len : room;
        memcpy(out, g[i].head, take);
        for (unsigned k = 0; k < g[i].niov && take < room; k++) {
            size_t piece = g[i].iov[k].iov_len < room - take ? g[i].iov[k].iov_len : room - take;
            memcpy(out + take, g[i].iov[k].iov_base, piece);
            take += (uint32_t)piece;
        }
    }
    __atomic_store_n(&ring->head, head, __ATOMIC_RELEASE);
}

uint32_t sp_tap_attach(struct sp_tap_region *r, uint32_t session, uint64_t now)
{
    uint64_t beat = __atomic_load_n(&r->heartbeat_ns, __ATOMIC_ACQUIRE);
    uint32_t held = __atomic_load_n(&r->attached, __ATOMIC_ACQUIRE);
    if (held != 0 && held != session && !(now > beat && now - beat > SP_TAP_STALE_NS))
        return held;              /* a live tap: its heartbeat is fresh */
    /* fresh before attached, so no worker takes this session for a dead one */
    __atomic_store_n(&r->heartbeat_ns, now, __ATOMIC_RELEASE);
    if (!__atomic_compare_exchange_n(&r->attached, &held, session, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE) && held != 0)
        return held;              /* another tap came first */
    if (held == 0)                /* a worker cleared the dead one meanwhile */
        __atomic_store_n(&r->attached, session, __ATOMIC_RELEASE);
    /* what a previous tap left unread is not this one's */
    for (uint32_t i = 0; i < r->rings; i++) {
        struct sp_tap_ring *ring = sp_tap_ring_at(r, i);
        __atomic_store_n(&ring->tail, __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE),
                         __ATOMIC_RELEASE);
    }
    return 0;
}

void sp_tap_heartbeat(struct sp_tap_region *r, uint64_t now)
{
    __atomic_store_n(&r->heartbeat_ns, now, __ATOMIC_RELEASE);
}

uint32_t sp_tap_session(struct sp_tap_region *r, uint64_t now)
{
    uint32_t session = __atomic_load_n(&r->attached, __ATOMIC_ACQUIRE);
    uint64_t beat = __atomic_load_n(&r->heartbeat_ns, __ATOMIC_ACQUIRE);
    return now > beat && now - beat > SP_TAP_STALE_NS ? 0 : session;
}

void sp_tap_detach(struct sp_tap_region *r, uint32_t session)
{
    __atomic_compare_exchange_n(&r->attached, &session, 0, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_RELAXED);
}

const struct sp_tap_record *sp_tap_peek(struct sp_tap_region *r, struct sp_tap_ring *ring)
{
    uint64_t head = __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE);
    uint64_t tail = ring->tail;
    while (tail != head) {
        const struct sp_tap_record *rec = record_at(r, ring, tail);
        if (rec->dir != SP_TAP_SKIP)
            return rec;
        tail += rec->size;
        __atomic_store_n(&ring->tail, tail, __ATOMIC_RELEASE);
    }
    return NULL;
}

void sp_tap_consume(struct sp_tap_ring *ring, const struct sp_tap_record *rec)
{
    __atomic_store_n(&ring->tail, ring->tail + rec->size, __ATOMIC_RELEASE);
}
