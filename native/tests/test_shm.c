/* The shared region's allocator, flat tables in it, and a forked process reading
 * them through the same pointers. */
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "stormpy/engine/shm.h"
#include "stormpy/engine/table.h"

static void test_blocks_are_aligned_zeroed_and_reused(void)
{
    struct sp_shm *s = sp_shm_create(1 << 20);
    CHECK(s != NULL);
    uint8_t *a = sp_shm_alloc(s, 100), *b = sp_shm_alloc(s, 5000), *c = sp_shm_alloc(s, 10);
    CHECK(a && b && c);
    CHECK(((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % 64 == 0);
    CHECK(sp_shm_contains(s, a) && sp_shm_contains(s, c + 9) && !sp_shm_contains(s, &a));
    memset(b, 0xab, 5000);
    sp_shm_free(s, b);
    uint8_t *b2 = sp_shm_alloc(s, 4000);           /* first fit: b's place, zeroed again */
    CHECK(b2 == b);
    int zero = 1;
    for (int i = 0; i < 4000; i++)
        zero &= b2[i] == 0;
    CHECK(zero);
    struct sp_shm_info info;
    sp_shm_get_info(s, &info);
    CHECK_EQ(info.blocks, 3);
    sp_shm_free(s, a);
    sp_shm_free(s, b2);                            /* merges with a's block */
    uint8_t *big = sp_shm_alloc(s, 5000);
    CHECK(big == a);
    sp_shm_free(s, big);
    sp_shm_free(s, c);                             /* everything free: the region is empty */
    sp_shm_get_info(s, &info);
    CHECK_EQ(info.blocks, 0);
    CHECK_EQ(info.used, 0);
    CHECK(sp_shm_alloc(s, 2 << 20) == NULL);       /* larger than the region */
    void *all = sp_shm_alloc(s, (1 << 20) - 4096);
    CHECK(all != NULL && sp_shm_alloc(s, 8192) == NULL);
    sp_shm_free(s, all);
    CHECK(sp_shm_alloc(s, 8192) != NULL);
    sp_shm_destroy(s);
}

/* A freed block keeps its pages for the next one of its size, up to the largest block
 * handed out; past that they go back to the system (and read as zero). */
static void test_freed_pages_are_kept_for_one_block_like_the_largest(void)
{
    struct sp_shm *s = sp_shm_create(4 << 20);
    sp_shm_keep_freed_pages(s, 1);
    uint8_t *a = sp_shm_alloc(s, 256 << 10), *b = sp_shm_alloc(s, 256 << 10);
    uint8_t *c = sp_shm_alloc(s, 100);
    memset(a, 0x5a, 256 << 10);
    memset(b, 0xa5, 256 << 10);
    sp_shm_free(s, a);
    struct sp_shm_info info;
    sp_shm_get_info(s, &info);
    CHECK(info.kept >= 256 << 10);
    uint8_t *a2 = sp_shm_alloc_raw(s, 200 << 10, 0);   /* warm first: a's place, as it was */
    CHECK(a2 == a);
    CHECK(a2[0] == 0x5a && a2[(200 << 10) - 1] == 0x5a);
    sp_shm_free(s, a2);
    sp_shm_free(s, b);                  /* merged with a: twice the largest, given back */
    sp_shm_get_info(s, &info);
    CHECK_EQ(info.kept, 0);
    uint8_t *back = sp_shm_alloc_raw(s, 512 << 10, 0);
    CHECK(back == a);
    CHECK(back[4096] == 0 && back[(300 << 10)] == 0);
    sp_shm_free(s, back);
    sp_shm_free(s, c);
    /* a warm block at the end of the region grows into the rest when asked for more */
    sp_shm_get_info(s, &info);
    CHECK_EQ(info.blocks, 0);
    CHECK(sp_shm_alloc(s, (4 << 20) - 4096) != NULL);
    sp_shm_destroy(s);
}

/* Unless told to keep them, freed pages go back at once (they read as zero again),
 * and prefault does nothing. */
static void test_freed_pages_go_back_unless_kept(void)
{
    struct sp_shm *s = sp_shm_create(4 << 20);
    uint8_t *a = sp_shm_alloc(s, 256 << 10);
    sp_shm_alloc(s, 100);
    memset(a, 0x5a, 256 << 10);
    sp_shm_free(s, a);
    struct sp_shm_info info;
    sp_shm_get_info(s, &info);
    CHECK_EQ(info.kept, 0);
    uint8_t *again = sp_shm_alloc_raw(s, 200 << 10, 0);
    CHECK(again == a && again[8192] == 0);
    CHECK_EQ(sp_shm_prefault(s, 1 << 20, 0), 0);
    sp_shm_get_info(s, &info);
    CHECK_EQ(info.kept, 0);
    sp_shm_destroy(s);
}

/* prefault: a warm block for the next table, made once, taken by the next alloc. */
static void test_prefault_leaves_one_warm_block_for_the_next(void)
{
    struct sp_shm *s = sp_shm_create(4 << 20);
    sp_shm_keep_freed_pages(s, 1);
    uint8_t *table = sp_shm_alloc_raw(s, 256 << 10, 8 << 10);
    CHECK(table != NULL);
    struct sp_shm_info info;
    CHECK_EQ(sp_shm_prefault(s, 256 << 10, 8 << 10), 0);
    sp_shm_get_info(s, &info);
    CHECK(info.kept >= (256 + 8) << 10);
    uint64_t kept = info.kept;
    CHECK_EQ(sp_shm_prefault(s, 256 << 10, 8 << 10), 0);     /* there already: no more */
    sp_shm_get_info(s, &info);
    CHECK_EQ(info.kept, kept);
    uint8_t *next = sp_shm_alloc_raw(s, 260 << 10, 8 << 10);
    CHECK(next > table);
    sp_shm_get_info(s, &info);
    CHECK(info.kept <= (8 << 10));                            /* what it did not need */
    CHECK_EQ(sp_shm_prefault(s, 8 << 20, 0), -1);             /* larger than the region */
    sp_shm_destroy(s);
}

/* Reload after reload, each table a little larger (an IXFR's records) than the last:
 * every one is placed in pages kept warm, and two tables' worth of memory is held. */
static void test_growing_tables_take_turns_in_warm_pages(void)
{
    struct sp_shm *s = sp_shm_create(64 << 20);
    sp_shm_keep_freed_pages(s, 1);
    sp_shm_alloc(s, 1000);                          /* the ref, the workers */
    size_t n = 2 << 20;
    uint8_t *cur = sp_shm_alloc_raw(s, 5000, 5000 / 32);
    sp_shm_prefault(s, 5000, 5000 / 32);
    int warm = 0;
    for (int round = 0; round < 12; round++, n += 300) {
        struct sp_shm_info before, after;
        sp_shm_get_info(s, &before);
        uint8_t *next = sp_shm_alloc_raw(s, n, n / 32);
        sp_shm_get_info(s, &after);
        warm += before.kept >= after.kept + n;
        sp_shm_free(s, cur);
        cur = next;
        sp_shm_prefault(s, n, n / 32);
    }
    CHECK_EQ(warm, 11);                             /* all but the first, which grew */
    struct sp_shm_info info;                        /* and memory held: two tables' worth */
    sp_shm_get_info(s, &info);
    CHECK(info.used + info.kept <= 2 * (n + n / 32) + (64 << 10));
    sp_shm_destroy(s);
}

static struct sp_table *small_table(void)
{
    struct sp_table_builder *b = sp_table_builder_new();
    for (uint32_t i = 0; i < 300; i++) {
        uint8_t body[40];
        memset(body, (int)i, sizeof(body));
        struct sp_patch p = {.op = SP_PATCH_COPY, .field = 0, .dst = 0, .src = 0, .len = 2};
        int64_t r = sp_table_add_response(b, body, sizeof(body), &p, 1, i);
        char key[16];
        int n = snprintf(key, sizeof(key), "name%u", i);
        sp_table_add_key(b, 7, (const uint8_t *)key, (uint32_t)n, (uint32_t)r);
    }
    return sp_table_builder_finish(b);
}

static void test_flat_table_answers_like_the_original_in_another_process(void)
{
    struct sp_table *t = small_table();
    struct sp_shm *s = sp_shm_create(8 << 20);
    void *mem = sp_shm_alloc(s, sp_table_flat_size(t));
    struct sp_table *flat = sp_table_flatten(t, mem);
    CHECK(sp_table_is_flat(flat) && !sp_table_is_flat(t));
    uint64_t *seen_by_child = sp_shm_alloc(s, sizeof(uint64_t));
    int same = 1;
    for (uint32_t i = 0; i < 300; i++) {
        char key[16];
        int n = snprintf(key, sizeof(key), "name%u", i);
        const struct sp_response *a = sp_table_find(t, 7, (const uint8_t *)key, (size_t)n);
        const struct sp_response *f = sp_table_find(flat, 7, (const uint8_t *)key, (size_t)n);
        same &= a && f && a->user == f->user && a->len == f->len &&
                memcmp(sp_response_bytes(t, a), sp_response_bytes(flat, f), a->len) == 0;
    }
    CHECK(same);
    CHECK(sp_table_find(flat, 7, (const uint8_t *)"nope", 4) == NULL);
    sp_table_free(t);
    sp_table_free(flat);                           /* a flat table is left alone */

    pid_t pid = fork();
    if (pid == 0) {                                /* the same pointers, another process */
        uint64_t found = 0;
        for (uint32_t i = 0; i < 300; i++) {
            char key[16];
            int n = snprintf(key, sizeof(key), "name%u", i);
            const struct sp_response *r = sp_table_find(flat, 7, (const uint8_t *)key, (size_t)n);
            found += r && r->user == i && sp_response_bytes(flat, r)[5] == (uint8_t)i;
        }
        __atomic_store_n(seen_by_child, found, __ATOMIC_SEQ_CST);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(__atomic_load_n(seen_by_child, __ATOMIC_SEQ_CST), 300);
    sp_shm_destroy(s);
}

int main(void)
{
    test_blocks_are_aligned_zeroed_and_reused();
    test_freed_pages_are_kept_for_one_block_like_the_largest();
    test_freed_pages_go_back_unless_kept();
    test_prefault_leaves_one_warm_block_for_the_next();
    test_growing_tables_take_turns_in_warm_pages();
    test_flat_table_answers_like_the_original_in_another_process();
    return check_report("test_shm");
}
