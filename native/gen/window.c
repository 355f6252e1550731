/* Datagram requests in flight, matched by sequence number. See window.h. */
#include "window.h"

#include <stdlib.h>
#include <string.h>

bool gen_windows_new(struct gen_window **w, uint32_t n)
{
    if (!(*w = calloc(n, sizeof(**w))))
        return false;
    for (uint32_t i = 0; i < n; i++)     /* calloc'd pages are touched only when used */
        if (!((*w)[i].flights = calloc(GEN_WINDOW, sizeof(struct gen_flight))))
            return false;
    return true;
}

void gen_windows_free(struct gen_window *w, uint32_t n)
{
    if (w)
        for (uint32_t i = 0; i < n; i++)
            free(w[i].flights);
    free(w);
}

struct gen_window *gen_window_pick(struct gen_window *w, uint32_t n, uint32_t *next,
                                   uint32_t *index)
{
    for (uint32_t tries = 0; tries < n; tries++) {
        uint32_t i = *next;
        *next = i + 1 == n ? 0 : i + 1;
        if (w[i].head - w[i].tail < GEN_WINDOW) {
            *index = i;
            return &w[i];
        }
    }
    return NULL;
}

/* Writes the request's sequence number where its reply will carry it back. */
static void number(int kind, uint8_t *req, uint64_t seq)
{
    if (kind == SP_GEN_DNS) {
        req[0] = (uint8_t)(seq >> 8);
        req[1] = (uint8_t)seq;
    } else {
        memcpy(req, &seq, sizeof(seq));
    }
}

uint32_t gen_window_fill(struct sp_gen *g, struct gen_window *w, uint32_t n,
                         uint8_t *const *bufs, uint32_t *lens)
{
    if (n > GEN_WINDOW - (w->head - w->tail))
        n = (uint32_t)(GEN_WINDOW - (w->head - w->tail));
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *req = gen_next_request(g, &lens[i]);
        memcpy(bufs[i], req, lens[i]);
        number(g->cfg.kind, bufs[i], w->head + i);
    }
    return n;
}

void gen_window_sent(struct sp_gen *g, struct sp_gen_counters *c, struct gen_window *w,
                     uint32_t sent, uint64_t now)
{
    for (uint32_t i = 0; i < sent; i++, w->head++) {
        struct gen_flight *f = &w->flights[w->head % GEN_WINDOW];
        *f = (struct gen_flight){ .sent_ns = gen_stamp(g, c, now), .seq = w->head,
                                  .state = GEN_LIVE };
    }
}

void gen_window_reply(struct sp_gen *g, struct sp_gen_counters *c, struct gen_window *w,
                      const uint8_t *reply, uint32_t len, uint64_t now)
{
    uint64_t seq;
    unsigned code = 0;
    if (g->cfg.kind == SP_GEN_DNS) {
        if (len < 12 || !(reply[2] & 0x80)) {        /* a header with QR set */
            gen_add(&c->bad_replies, 1);
            return;
        }
        seq = (uint64_t)reply[0] << 8 | reply[1];
        code = reply[3] & 0x0f;
    } else {
        if (len < sizeof(seq)) {
            gen_add(&c->bad_replies, 1);
            return;
        }
        memcpy(&seq, reply, sizeof(seq));
    }
    struct gen_flight *f = &w->flights[seq % GEN_WINDOW];
    bool same = g->cfg.kind == SP_GEN_DNS ? f->seq % GEN_WINDOW == seq : f->seq == seq;
    if (same && f->state == GEN_LIVE) {
        f->state = GEN_FREE;
        gen_answered(g, c, f->sent_ns, now, code);
    } else if (same && f->state == GEN_LOST) {
        f->state = GEN_FREE;
        gen_add(&c->late, 1);
    } else {
        gen_add(&c->unmatched, 1);
    }
}

void gen_windows_expire(struct sp_gen *g, struct sp_gen_counters *c, struct gen_window *w,
                        uint32_t n, uint64_t now, bool all)
{
    uint64_t timeout = g->cfg.timeout_ns;
    for (uint32_t i = 0; i < n; i++) {
        for (; w[i].tail < w[i].head; w[i].tail++) {
            struct gen_flight *f = &w[i].flights[w[i].tail % GEN_WINDOW];
            if (f->state != GEN_LIVE)
                continue;
            if (!all && f->sent_ns + timeout > now)
                break;
            f->state = GEN_LOST;
            g->inflight--;
            gen_add(&c->lost, 1);
        }
    }
}
