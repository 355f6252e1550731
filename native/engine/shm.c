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
    uint32_t used;
    uint32_t warm;     /* free, and its pages kept in memory */
    char pad[ALIGN - 2 * sizeof(uint64_t)];
};

struct sp_shm {
    uint64_t size;
    uint64_t top;      /* offset of the end of the last block */
    uint64_t largest;  /* the largest block handed out: how much may be kept warm */
    uint64_t warm;     /* bytes in warm blocks */
    uint64_t keep;     /* freed pages are kept (sp_shm_keep_freed_pages) */
    char pad[ALIGN - 5 * sizeof(uint64_t)];
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
    /* A big table's lookups miss the TLB on every probe in 4 KiB pages; in 2 MiB pages
     * (where shmem_enabled allows them) a million-name zone answers about 17% faster. */
    madvise(p, size, MADV_HUGEPAGE);
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

/* The free block at off, made a used block of need bytes (the rest split off). */
static void *take(struct sp_shm *s, uint64_t off, uint64_t need)
{
    struct block *b = block_at(s, off);
    if (b->warm)
        s->warm -= b->size;
    if (b->size - need >= 2 * ALIGN) {       /* split: the rest stays free */
        struct block *rest = block_at(s, off + need);
        rest->size = b->size - need;
        rest->used = 0;
        rest->warm = b->warm;
        if (rest->warm)
            s->warm += rest->size;
        b->size = need;
    }
    b->used = 1;
    b->warm = 0;
    if (b->size > s->largest)
        s->largest = b->size;
    return b + 1;
}

static uint64_t block_size(size_t n)
{
    return (sizeof(struct block) + (uint64_t)n + ALIGN - 1) / ALIGN * ALIGN;
}

void *sp_shm_alloc_raw(struct sp_shm *s, size_t n, size_t room)
{
    if (n > s->size || room > s->size)
        return NULL;
    uint64_t need = block_size(n), want = block_size(n + room);
    uint64_t tail = s->top;                   /* where a free last block starts */
    /* warm blocks first: their pages need no fault and no zeroing by the kernel */
    for (uint32_t warm = 1, pass = 0; pass < 2; pass++, warm = 0) {
        for (uint64_t off = sizeof(*s); off < s->top; off += block_at(s, off)->size) {
            struct block *b = block_at(s, off);
            tail = b->used ? s->top : (tail == s->top ? off : tail);
            if (!b->used && b->warm == warm && b->size >= need)   /* the room kept too */
                return take(s, off, b->size < want ? b->size : want);
        }
    }
    if (need > s->size - tail)
        return NULL;
    if (want <= s->size - tail)
        need = want;
    if (tail < s->top) {                      /* the free last block grows into the rest */
        if (block_at(s, tail)->warm)
            s->warm -= block_at(s, tail)->size;
        s->top = tail;
    }
    struct block *b = block_at(s, s->top);
    b->size = need;
    b->used = 0;
    b->warm = 0;
    s->top += need;
    return take(s, s->top - need, need);
}

void *sp_shm_alloc(struct sp_shm *s, size_t n)
{
    void *p = sp_shm_alloc_raw(s, n, 0);
    if (p)
        memset(p, 0, ((struct block *)p - 1)->size - sizeof(struct block));
    return p;
}

void sp_shm_free(struct sp_shm *s, void *p)
{
    if (!p)
        return;
    struct block *b = (struct block *)p - 1;
    uint64_t off = (uint64_t)((char *)b - (char *)s);
    b->used = 0;
    b->warm = 0;
    /* Merge with the free blocks after it, then with a free block before it. */
    while (off + b->size < s->top && !block_at(s, off + b->size)->used) {
        struct block *next = block_at(s, off + b->size);
        if (next->warm)
            s->warm -= next->size;
        b->size += next->size;
    }
    for (uint64_t prev = sizeof(*s), next; prev < off; prev = next) {
        next = prev + block_at(s, prev)->size;
        if (next == off && !block_at(s, prev)->used) {
            struct block *before = block_at(s, prev);
            if (before->warm)
                s->warm -= before->size;
            before->size += b->size;
            off = prev;
            b = before;
            break;
        }
    }
    /* One table's worth of freed pages stays in memory: the next table fits where the
     * last one was and is copied at memory speed, instead of faulting in every page. */
    b->warm = s->keep && s->warm + b->size <= s->largest + s->largest / 8;
    if (b->warm) {
        s->warm += b->size;
        return;
    }
    release_pages(s, off, b->size);
    if (off + b->size == s->top)
        s->top = off;
}

void sp_shm_keep_freed_pages(struct sp_shm *s, int keep)
{
    s->keep = keep != 0;
}

int sp_shm_prefault(struct sp_shm *s, size_t n, size_t room)
{
    if (!s->keep)
        return 0;
    for (uint64_t off = sizeof(*s); off < s->top; off += block_at(s, off)->size) {
        const struct block *b = block_at(s, off);
        if (!b->used && b->warm && b->size >= block_size(n))
            return 0;
    }
    char *p = sp_shm_alloc_raw(s, n, room);
    if (!p)
        return -1;
    struct block *b = (struct block *)p - 1;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    char *start = (char *)((uintptr_t)p / page * page);
    if (madvise(start, (size_t)(p + b->size - sizeof(*b) - start), MADV_POPULATE_WRITE) != 0)
        memset(p, 0, b->size - sizeof(*b));      /* before Linux 5.14: touch every page */
    sp_shm_free(s, p);
    return 0;
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
        } else if (b->warm) {
            info->kept += b->size;
        }
        off += b->size;
    }
}
