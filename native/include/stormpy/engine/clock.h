/* The workers' clock. */
#ifndef STORMPY_ENGINE_CLOCK_H
#define STORMPY_ENGINE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t sp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* vDSO: no system call */
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
