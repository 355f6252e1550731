/* A byte limit on a TX ring's frames in flight: tx_limit.h. */
#include "tx_limit.h"

#include <stdlib.h>
#include <string.h>

int sp_tx_limit_init(struct sp_tx_limit *t, uint64_t limit, uint64_t base, uint32_t frame_size,
                     uint32_t nframes)
{
    memset(t, 0, sizeof(*t));
    if (!limit)
        return 0;
    t->sent_len = calloc(nframes, sizeof(*t->sent_len));
    t->waiting = calloc(nframes, sizeof(*t->waiting));
    if (!t->sent_len || !t->waiting) {
        sp_tx_limit_free(t);
        return -1;
    }
    t->limit = limit;
    t->base = base;
    t->nframes = nframes;
    while ((1u << t->frame_shift) < frame_size)
        t->frame_shift++;
    return 0;
}

void sp_tx_limit_free(struct sp_tx_limit *t)
{
    free(t->sent_len);
    free(t->waiting);
    memset(t, 0, sizeof(*t));
}

void sp_tx_limit_queue(struct sp_tx_limit *t, uint64_t addr, uint32_t len)
{
    if (t->nwaiting == t->nframes)
        return;   /* cannot happen: each waiting reply holds one of the nframes frames */
    t->waiting[(t->head + t->nwaiting++) % t->nframes] = (struct sp_tx_waiting){addr, len};
}

unsigned sp_tx_limit_release(struct sp_tx_limit *t, struct sp_tx_waiting *out, unsigned max)
{
    unsigned n = 0;
    while (n < max && t->nwaiting) {
        struct sp_tx_waiting w = t->waiting[t->head];
        if (t->inflight && t->inflight + w.len > t->limit)
            break;
        uint64_t frame = (w.addr - t->base) >> t->frame_shift;
        if (frame < t->nframes)
            t->sent_len[frame] = w.len;
        t->inflight += w.len;
        t->head = (t->head + 1) % t->nframes;
        t->nwaiting--;
        out[n++] = w;
    }
    if (t->inflight > t->peak)
        t->peak = t->inflight;
    return n;
}

void sp_tx_limit_completed(struct sp_tx_limit *t, uint64_t addr)
{
    uint64_t frame = (addr - t->base) >> t->frame_shift;
    if (frame >= t->nframes)
        return;
    /* sent_len stays: a precopy frame may be in flight several times at once, with
     * the same length each time, and a TX frame's next use sets its own */
    uint32_t len = t->sent_len[frame];
    t->inflight -= len <= t->inflight ? len : t->inflight;
}
