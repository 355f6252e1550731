/* A minimal test harness: CHECK records a failure and carries on; main prints
 * "N passed, N failed" and exits non-zero on any failure. */
#ifndef STORMPY_CHECK_H
#define STORMPY_CHECK_H

#include <stdio.h>

static int checks_passed, checks_failed;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (cond) {                                                              \
            checks_passed++;                                                     \
        } else {                                                                 \
            checks_failed++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

#define CHECK_EQ(a, b)                                                            \
    do {                                                                          \
        long long a_ = (long long)(a), b_ = (long long)(b);                       \
        if (a_ == b_) {                                                           \
            checks_passed++;                                                      \
        } else {                                                                  \
            checks_failed++;                                                      \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, expected %s == %lld\n", \
                    __FILE__, __LINE__, #a, a_, #b, b_);                         \
        }                                                                         \
    } while (0)

static inline int check_report(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, checks_passed, checks_failed);
    return checks_failed ? 1 : 0;
}

#endif
