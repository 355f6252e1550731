/* HTTP over TCP: the received bytes as one connection's stream, every request head
 * in them parsed (sp_http_parse_request) and answered (sp_http_answer) from a small
 * compiled site, as the stream server does, pipelining included. Every answer must
 * point only into the table or into itself, with lengths that add up. The site is
 * the one make_inputs.py compiles to $SP_FUZZ_SITE. */
#include <stdint.h>

#include "fuzz_common.h"
#include "stormpy/app/http/reply.h"
#include "stormpy/proto/csum.h"

#define CHECK(cond)                  \
    do {                             \
        if (!(cond))                 \
            __builtin_trap();        \
    } while (0)

static const struct sp_table *site_table;
static size_t table_size;

static bool inside(const void *p, size_t n, const void *base, size_t len)
{
    const uint8_t *b = base, *q = p;
    return q >= b && q + n <= b + len;
}

/* Cut as the own TCP cuts it, each payload's sum (from the stored sums) must be the
 * sum of the bytes copied, and the bytes the answer's. */
static void check_segments(const struct sp_http_reply *r, size_t mss)
{
    static uint8_t seg[2048];
    uint64_t end = r->len < 65536 ? r->len : 65536;
    for (uint64_t off = 0; off < end; off += mss) {
        size_t n = end - off < mss ? (size_t)(end - off) : mss;
        uint32_t sum = sp_http_reply_copy(r, off, n, seg);
        CHECK(sp_csum_fold(sum) == sp_csum_fold(sp_csum_partial(seg, n, 0)) ||
              (uint16_t)(sp_csum_fold(sum) + sp_csum_fold(sp_csum_partial(seg, n, 0))) == 0xFFFF);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!site_table) {
        site_table = fuzz_load("SP_FUZZ_SITE");
        table_size = sp_table_flat_size(site_table);
    }
    const struct sp_http_site *site = sp_http_site_of(site_table);
    CHECK(site != NULL);
    static struct sp_http_request req;
    struct sp_http_reply reply;
    uint8_t date[SP_HTTP_DATE_LEN];
    sp_http_format_date((int64_t)size * 86400 * 365, date);
    uint8_t *buf = fuzz_copy(data, size);
    size_t at = 0;
    while (at < size) {
        size_t used = sp_http_parse_request(buf + at, size - at, &req);
        if (used == 0)
            break;
        CHECK(used <= size - at);
        CHECK(req.error || req.path_len >= 1);
        CHECK(req.error || req.path[0] == '/');
        sp_http_answer(site_table, site, &req, date, &reply);
        uint64_t total = 0;
        for (int i = 0; i < reply.niov; i++) {
            const struct iovec *v = &reply.iov[i];
            CHECK(inside(v->iov_base, v->iov_len, site_table, table_size) ||
                  inside(v->iov_base, v->iov_len, &reply, sizeof(reply)));
            total += v->iov_len;
        }
        CHECK(total == reply.len);
        check_segments(&reply, 1 + (size * 131 + at) % 1600);
        CHECK(reply.status >= 200 && reply.status < 600);
        CHECK(!req.error || reply.close);
        at += used;
        if (reply.close)
            break;
    }
    free(buf);
    return 0;
}
