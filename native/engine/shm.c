/* The shared region: a first-fit block list. See shm.h. */
#define _GNU_SOURCE
#include "stormpy/engine/shm.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ALIGN 64u

/* Blocks tile the region from `first` to `top`; each starts with this header,
 * padded so the block's data stays 64-byte aligned. */
struct block {
    uint64_t size;     /* header included */
    uint64_t used;
    char pad[ALIGN - 2 * sizeof(uint64_t)];
};

struct sp_shm {
    uint64_t size;
    uint64_t top;      /* offset of the end of the last block */
    char pad[ALIGN - 2 * sizeof(uint64_t)];
};

static inline struct block *block_at(struct sp_shm *s, uint64_t off)
{
    return (struct block *)((char *)s + off);
}

struct sp_shm *sp_shm_create(size_t size)
{
    if (size < 2 * ALIGN) {
        errno = EINVAL;
        return NULL;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct sp_shm *s = p;
    s->size = size;
    s->top = sizeof(*s);
    return s;
}

void sp_shm_destroy(struct sp_shm *s)
{
    if (s)
        munmap(s, s->size);
}

/* The whole pages inside a freed block go back to the system; shmem keeps
 * pages that are only unmapped, hence MADV_REMOVE. */
static void release_pages(struct sp_shm *s, uint64_t off, uint64_t len)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = (off + sizeof(struct block) + page - 1) / page * page;
    uint64_t end = (off + len) / page * page;
    if (end > start)
        madvise((char *)s + start, end - start, MADV_REMOVE);
}

void *sp_shm_alloc(struct sp_shm *s, size_t n)
{
    if (n > s->size)
        return NULL;
    uint64_t need = (sizeof(struct block) + n + ALIGN - 1) / ALIGN * ALIGN;
    for (uint64_t off = sizeof(*s); off < s->top; off += block_at(s, off)->size) {
        struct block *b = block_at(s, off);
        if (b->used || b->size < need)
            continue;
        if (b->size - need >= 2 * ALIGN) {       /* split: the rest stays free */
            struct block *rest = block_at(s, off + need);
            rest->size = b->size - need;
            rest->used = 0;
            b->size = need;
        }
        b->used = 1;
        memset(b + 1, 0, b->size - sizeof(*b));
        return b + 1;
    }
    if (need > s->size - s->top)
        return NULL;
    struct block *b = block_at(s, s->top);
    b->size = need;
    b->used = 1;
    s->top += need;
    memset(b + 1, 0, need - sizeof(*b));      /* fresh or MADV_REMOVEd pages: cheap */
    return b + 1;
}

void sp_shm_free(struct sp_shm *s, void *p)
{
    if (!p)
        return;
    struct block *b = (struct block *)p - 1;
    uint64_t off = (uint64_t)((char *)b - (char *)s);
    b->used = 0;
    /* Merge with the free blocks after it, then with a free block before it. */
    while (off + b->size < s->top && !block_at(s, off + b->size)->used)
        b->size += block_at(s, off + b->size)->size;
    for (uint64_t prev = sizeof(*s), next; prev < off; prev = next) {
        next = prev + block_at(s, prev)->size;
        if (next == off && !block_at(s, prev)->used) {
            block_at(s, prev)->size += b->size;
            off = prev;
            b = block_at(s, prev);
            break;
        }
    }
    release_pages(s, off, b->size);
    if (off + b->size == s->top)
        s->top = off;
}

int sp_shm_contains(const struct sp_shm *s, const void *p)
{
    const char *c = p;
    return c >= (const char *)s && c < (const char *)s + s->size;
}

void sp_shm_get_info(const struct sp_shm *s, struct sp_shm_info *info)
{
    memset(info, 0, sizeof(*info));
    info->size = s->size;
    for (uint64_t off = sizeof(*s); off < s->top;) {
        const struct block *b = (const struct block *)((const char *)s + off);
        if (b->used) {
            info->used += b->size;
            info->blocks++;
        }
        off += b->size;
    }
}
