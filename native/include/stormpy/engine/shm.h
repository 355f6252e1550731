/*
 * A region of memory shared by the supervisor and its worker processes.
 *
 * The supervisor maps it before it forks any worker, so every process sees it at
 * the same address and plain pointers into it stay valid everywhere: the
 * published table (sp_table_ref), every table it points to, and each worker's
 * state and counters live here. Only the supervisor allocates and frees; workers
 * only read tables and write their own worker state.
 *
 * The mapping reserves address space, not memory (MAP_NORESERVE): pages are
 * taken when first written and handed back when a block is freed, so a region
 * sized for several reloads of a large zone costs nothing until it is used.
 */
#ifndef STORMPY_ENGINE_SHM_H
#define STORMPY_ENGINE_SHM_H

#include <stddef.h>
#include <stdint.h>

struct sp_shm;

/* Maps a region of `size` bytes; NULL with errno set on failure. */
struct sp_shm *sp_shm_create(size_t size);
void sp_shm_destroy(struct sp_shm *s);

/* A zeroed, 64-byte aligned block of n bytes, or NULL when the region is full. */
void *sp_shm_alloc(struct sp_shm *s, size_t n);
/* Gives a block back (its pages are returned to the system). NULL is ignored. */
void sp_shm_free(struct sp_shm *s, void *p);
/* True when p points into the region. */
int sp_shm_contains(const struct sp_shm *s, const void *p);

struct sp_shm_info {
    uint64_t size;     /* bytes reserved */
    uint64_t used;     /* bytes in live blocks, headers included */
    uint64_t blocks;   /* live blocks */
};
void sp_shm_get_info(const struct sp_shm *s, struct sp_shm_info *info);

#endif
