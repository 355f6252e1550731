/* Shared by the libFuzzer harnesses: the compiled zone they answer from.
 *
 * `make fuzz` compiles zones/example.zone and tests/zones/example.com.zone with
 * stormpy's own compiler and writes the flat table to $SP_FUZZ_TABLE (see
 * make_inputs.py), so the harnesses answer from a real zone: data, NXDOMAIN,
 * wildcards, referrals, CNAME chains and responses long enough to truncate. */
#ifndef STORMPY_FUZZ_COMMON_H
#define STORMPY_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stormpy/engine/table.h"

/* The flat table in the file the environment variable `var` names. */
static inline struct sp_table *fuzz_load(const char *var)
{
    struct sp_table *t;
    const char *path = getenv(var);
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        fprintf(stderr, "fuzz: set %s to the table make_inputs.py wrote\n", var);
        abort();
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *mem = aligned_alloc(64, ((size_t)len + 63) / 64 * 64);
    if (!mem || fread(mem, 1, (size_t)len, f) != (size_t)len)
        abort();
    fclose(f);
    t = sp_table_flat_rebase(mem, (size_t)len);
    if (!t)
        abort();
    return t;
}

static inline const struct sp_table *fuzz_table(void)
{
    static struct sp_table *t;
    if (!t)
        t = fuzz_load("SP_FUZZ_TABLE");
    return t;
}

/* An exact-size heap copy, so AddressSanitizer sees a read one byte past the end. */
static inline uint8_t *fuzz_copy(const uint8_t *data, size_t size)
{
    uint8_t *p = malloc(size ? size : 1);
    if (size)
        memcpy(p, data, size);
    return p;
}

#endif
