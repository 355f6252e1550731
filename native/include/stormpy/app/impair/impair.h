/*
 * A path impairer: frames forwarded from one backend to another with loss,
 * duplication, delay and reordering, for what this kernel's missing netem would do
 * (`stormpy impair`, the HTTP tests under loss, the labs).
 *
 * One direction per call: frames from `in` are held in a queue ordered by release
 * time and sent on `out` when it comes. A reordered frame is held reorder_us longer
 * than the others, so the frames behind it overtake it. Random draws come from a
 * seeded generator: the same seed and the same input make the same decisions.
 *
 *   struct sp_impair *im = sp_impair_new(&cfg);
 *   sp_impair_run(im, in, out, &counters);   in its own thread, one per direction
 *   sp_impair_stop(im);                      from any thread
 *   sp_impair_free(im);                      once run() has returned
 */
#ifndef STORMPY_APP_IMPAIR_IMPAIR_H
#define STORMPY_APP_IMPAIR_IMPAIR_H

#include <stdint.h>

#include "stormpy/io.h"

#define SP_IMPAIR_PPM 1000000u

struct sp_impair_config {
    uint32_t loss_ppm;           /* frames dropped, per million */
    uint32_t duplicate_ppm;      /* frames sent twice, per million */
    uint32_t reorder_ppm;        /* frames held back reorder_us more, per million */
    uint64_t delay_us;           /* every frame */
    uint64_t reorder_us;
    uint64_t seed;
    uint32_t queue_frames;       /* frames held at once; more are dropped (0: 16384) */
};

struct sp_impair_counters {
    uint64_t received, sent, lost, duplicated, reordered;
    uint64_t overflow;           /* dropped: the queue was full */
    uint64_t oversized;          /* dropped: longer than a frame (TSO/GSO on a host) */
};

struct sp_impair;

/* NULL when out of memory. */
struct sp_impair *sp_impair_new(const struct sp_impair_config *cfg);
void sp_impair_free(struct sp_impair *im);

/* Forwards in -> out until stopped or a backend fails; frames still held are sent
 * before it returns. Returns the failing backend's errno or 0. */
int sp_impair_run(struct sp_impair *im, struct sp_io *in, struct sp_io *out,
                  struct sp_impair_counters *c);
/* Asks run() to return (any thread). */
void sp_impair_stop(struct sp_impair *im);

#endif
