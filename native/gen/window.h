/* Datagram requests in flight (DNS, echo), for every transport that carries them
 * (udp.c over sockets, ring.c over a frame backend): one window per source port,
 * indexed by sequence number, so a reply is matched with one array access, by its
 * DNS ID (the sequence's low 16 bits) or by the echo's 64-bit sequence number. */
#ifndef STORMPY_GEN_WINDOW_H
#define STORMPY_GEN_WINDOW_H

#include "loop.h"

#define GEN_WINDOW 65536u        /* DNS IDs; an echo window of the same size */

struct gen_flight {
    uint64_t sent_ns;            /* the request's timestamp (gen_stamp) */
    uint64_t seq;
    uint8_t state;               /* GEN_FREE, GEN_LIVE or GEN_LOST */
};

enum { GEN_FREE, GEN_LIVE, GEN_LOST };

struct gen_window {
    uint64_t head, tail;         /* sequence numbers: next to send, oldest not settled */
    struct gen_flight *flights;
};

/* n windows; false when out of memory (free them with gen_windows_free either way). */
bool gen_windows_new(struct gen_window **w, uint32_t n);
void gen_windows_free(struct gen_window *w, uint32_t n);

/* The next of n windows, from *next on, with room for a request; NULL when none. */
struct gen_window *gen_window_pick(struct gen_window *w, uint32_t n, uint32_t *next,
                                   uint32_t *index);

/* Copies up to n requests, in turn, into bufs[i] (lengths into lens[i]), each numbered
 * with its sequence in the window; returns how many (the window's room caps it). */
uint32_t gen_window_fill(struct sp_gen *g, struct gen_window *w, uint32_t n,
                         uint8_t *const *bufs, uint32_t *lens);
/* The first `sent` of those left: they are in flight from now on. */
void gen_window_sent(struct sp_gen *g, struct sp_gen_counters *c, struct gen_window *w,
                     uint32_t sent, uint64_t now);
/* One reply's payload, received at `now`. */
void gen_window_reply(struct sp_gen *g, struct sp_gen_counters *c, struct gen_window *w,
                      const uint8_t *reply, uint32_t len, uint64_t now);
void gen_windows_expire(struct sp_gen *g, struct sp_gen_counters *c, struct gen_window *w,
                        uint32_t n, uint64_t now, bool all);

#endif
