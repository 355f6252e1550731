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
 * taken when first written, so a region sized for several reloads of a large zone
 * costs nothing until it is used. A freed block's pages are handed back; a region
 * told to keep them (sp_shm_keep_freed_pages: a server whose table changes often, a
 * secondary's) keeps up to one largest block's worth (and an eighth) for the next
 * table: placing a table where the last one was is a copy, not a page fault per 4 KiB.
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
/* The same, its bytes left as they are (for a caller that writes every byte). Carved
 * from space never used, the block gets `room` bytes more, so that a later block a
 * little larger (the next table) still fits where this one was. */
void *sp_shm_alloc_raw(struct sp_shm *s, size_t n, size_t room);
/* Gives a block back (its pages kept or returned, see above). NULL is ignored. */
void sp_shm_free(struct sp_shm *s, void *p);
/* Whether freed pages are kept (see above); not at first. */
void sp_shm_keep_freed_pages(struct sp_shm *s, int keep);
/* With freed pages kept: makes sure a free block of n bytes has its pages in memory (faulted in now, off the
 * path of the next reload, unless one has already), so that the next table is placed
 * by a copy. 0, or -1 when the region has no room. */
int sp_shm_prefault(struct sp_shm *s, size_t n, size_t room);
/* True when p points into the region. */
int sp_shm_contains(const struct sp_shm *s, const void *p);

struct sp_shm_info {
    uint64_t size;     /* bytes reserved */
    uint64_t used;     /* bytes in live blocks, headers included */
    uint64_t blocks;   /* live blocks */
    uint64_t kept;     /* bytes of free blocks whose pages are kept in memory */
};
void sp_shm_get_info(const struct sp_shm *s, struct sp_shm_info *info);

#endif
