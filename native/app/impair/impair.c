/* Loss, duplication, delay and reordering between two backends. See
 * stormpy/app/impair/impair.h. */
#include "stormpy/app/impair/impair.h"

#include <stdlib.h>
#include <string.h>

#include "stormpy/engine/clock.h"
#include "stormpy/engine/frame.h"

#define BURST 64

struct held {
    uint64_t release_ns;
    uint64_t order;              /* equal release times leave in arrival order */
    uint32_t len;
    uint8_t data[SP_FRAME_MAX];
};

struct sp_impair {
    struct sp_impair_config cfg;
    int stop;                    /* __atomic access */
    uint64_t rng;
    uint64_t arrivals;
    uint32_t nheld, cap;
    uint32_t *heap;              /* slots by release time */
    uint32_t *free_slots;
    uint32_t nfree;
    struct held *slots;
};

/* xorshift64*: a fast generator with a seed, not a secret one. */
static uint32_t draw_ppm(struct sp_impair *im)
{
    im->rng ^= im->rng >> 12;
    im->rng ^= im->rng << 25;
    im->rng ^= im->rng >> 27;
    return (uint32_t)((im->rng * 0x2545F4914F6CDD1Dull) >> 32) % SP_IMPAIR_PPM;
}

static bool before(const struct sp_impair *im, uint32_t a, uint32_t b)
{
    const struct held *x = &im->slots[a], *y = &im->slots[b];
    return x->release_ns != y->release_ns ? x->release_ns < y->release_ns : x->order < y->order;
}

static void heap_push(struct sp_impair *im, uint32_t slot)
{
    uint32_t i = im->nheld++;
    im->heap[i] = slot;
    while (i && before(im, im->heap[i], im->heap[(i - 1) / 2])) {
        uint32_t p = (i - 1) / 2, t = im->heap[p];
        im->heap[p] = im->heap[i];
        im->heap[i] = t;
        i = p;
    }
}

static uint32_t heap_pop(struct sp_impair *im)
{
    uint32_t top = im->heap[0];
    im->heap[0] = im->heap[--im->nheld];
    for (uint32_t i = 0;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < im->nheld && before(im, im->heap[l], im->heap[m]))
            m = l;
        if (r < im->nheld && before(im, im->heap[r], im->heap[m]))
            m = r;
        if (m == i)
            break;
        uint32_t t = im->heap[m];
        im->heap[m] = im->heap[i];
        im->heap[i] = t;
        i = m;
    }
    return top;
}

struct sp_impair *sp_impair_new(const struct sp_impair_config *cfg)
{
    struct sp_impair *im = calloc(1, sizeof(*im));
    if (!im)
        return NULL;
    im->cfg = *cfg;
    im->cap = cfg->queue_frames ? cfg->queue_frames : 16384;
    im->rng = cfg->seed ? cfg->seed : 0x9E3779B97F4A7C15ull;
    im->heap = calloc(im->cap, sizeof(*im->heap));
    im->free_slots = calloc(im->cap, sizeof(*im->free_slots));
    im->slots = malloc((size_t)im->cap * sizeof(*im->slots));
    if (!im->heap || !im->free_slots || !im->slots) {
        sp_impair_free(im);
        return NULL;
    }
    for (uint32_t i = 0; i < im->cap; i++)
        im->free_slots[im->nfree++] = im->cap - 1 - i;
    return im;
}

void sp_impair_free(struct sp_impair *im)
{
    if (!im)
        return;
    free(im->heap);
    free(im->free_slots);
    free(im->slots);
    free(im);
}

static void hold(struct sp_impair *im, const struct sp_frame *f, uint64_t release_ns,
                 struct sp_impair_counters *c)
{
    if (f->len > SP_FRAME_MAX) {
        c->oversized++;
        return;
    }
    if (!im->nfree) {
        c->overflow++;
        return;
    }
    uint32_t slot = im->free_slots[--im->nfree];
    struct held *h = &im->slots[slot];
    h->release_ns = release_ns;
    h->order = im->arrivals++;
    h->len = f->len;
    memcpy(h->data, f->data, f->len);
    heap_push(im, slot);
}

/* What arrived: lost, held, perhaps twice, perhaps held longer. */
static void take(struct sp_impair *im, const struct sp_frame *rx, unsigned n, uint64_t now,
                 struct sp_impair_counters *c)
{
    const struct sp_impair_config *cfg = &im->cfg;
    for (unsigned i = 0; i < n; i++) {
        c->received++;
        if (cfg->loss_ppm && draw_ppm(im) < cfg->loss_ppm) {
            c->lost++;
            continue;
        }
        uint64_t release = now + cfg->delay_us * 1000;
        if (cfg->reorder_ppm && draw_ppm(im) < cfg->reorder_ppm) {
            c->reordered++;
            release += cfg->reorder_us * 1000;
        }
        hold(im, &rx[i], release, c);
        if (cfg->duplicate_ppm && draw_ppm(im) < cfg->duplicate_ppm) {
            c->duplicated++;
            hold(im, &rx[i], release, c);
        }
    }
}

static bool due(const struct sp_impair *im, uint64_t now, bool all)
{
    return im->nheld && (all || im->slots[im->heap[0]].release_ns <= now);
}

/* Sends what is due (everything when `all`). */
static void release(struct sp_impair *im, struct sp_io *out, uint64_t now, bool all,
                    struct sp_impair_counters *c)
{
    struct sp_frame tx[BURST];
    while (due(im, now, all)) {
        unsigned got = out->ops->tx_reserve(out, tx, BURST);
        if (got == 0)
            return;                      /* the ring is full: again next round */
        unsigned k = 0;
        for (; k < got && due(im, now, all); k++) {
            uint32_t slot = heap_pop(im);
            struct held *h = &im->slots[slot];
            uint32_t len = h->len < tx[k].cap ? h->len : tx[k].cap;
            memcpy(tx[k].data, h->data, len);
            tx[k].len = len;
            im->free_slots[im->nfree++] = slot;
        }
        out->ops->tx_submit(out, tx, k, tx + k, got - k);
        out->ops->kick(out);
        c->sent += k;
    }
}

void sp_impair_stop(struct sp_impair *im)
{
    __atomic_store_n(&im->stop, 1, __ATOMIC_RELEASE);
}

int sp_impair_run(struct sp_impair *im, struct sp_io *in, struct sp_io *out,
                  struct sp_impair_counters *c)
{
    struct sp_frame rx[BURST];
    while (!__atomic_load_n(&im->stop, __ATOMIC_ACQUIRE) && !in->error && !out->error) {
        in->rx_nowait = 0;
        unsigned n = in->ops->rx_burst(in, rx, BURST);
        uint64_t now = sp_now_ns();
        take(im, rx, n, now, c);
        in->ops->rx_release(in, rx, n);
        out->ops->reclaim(out);
        release(im, out, now, false, c);
    }
    release(im, out, sp_now_ns(), true, c);
    return in->error ? in->error : out->error;
}
