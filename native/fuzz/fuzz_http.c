/* HTTP over TCP: the received bytes as one connection's stream, every request head
 * in them parsed (sp_http_parse_request) and answered (sp_http_answer) from a small
 * compiled site, as the stream server does, pipelining included. Every answer must
 * point only into the table or into itself, with lengths that add up, and cut into
 * segments (the first of any length, so later ones start at odd offsets too) each
 * segment's sum from the stored sums of the heads, the Date and the body must be its
 * bytes' sum. The Date's second comes from the input, so it varies from run to run.
 * The site is the one make_inputs.py compiles to $SP_FUZZ_SITE. */
#define _GNU_SOURCE                  /* memmem */
#include <stdint.h>
#include <string.h>

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

/* Equal as one's-complement sums (where 0 and 0xFFFF are both zero). */
static bool same_sum(uint32_t a, uint32_t b)
{
    return sp_csum_reduce(a) % 0xFFFF == sp_csum_reduce(b) % 0xFFFF;
}

/* Cut as the own TCP cuts it after a first segment of `first` bytes, each payload's
 * sum (from the stored sums) must be the sum of the bytes copied, and the pieces a
 * gathered frame points at (sp_http_reply_slice) must be those bytes. */
static void check_segments(const struct sp_http_reply *r, size_t first, size_t mss)
{
    static uint8_t seg[2048];
    uint64_t end = r->len < 65536 ? r->len : 65536;
    for (uint64_t off = 0; off < end; off += first, first = mss) {
        size_t n = end - off < first ? (size_t)(end - off) : first;
        uint32_t sum = sp_http_reply_copy(r, off, n, seg);
        CHECK(same_sum(sum, sp_csum_partial(seg, n, 0)));
        struct iovec iov[SP_HTTP_REPLY_IOV];
        unsigned k = sp_http_reply_slice(r, off, n, iov, SP_HTTP_REPLY_IOV);
        CHECK(n == 0 || k > 0);
        size_t at = 0;
        for (unsigned i = 0; i < k; i++) {
            CHECK(at + iov[i].iov_len <= n && memcmp(seg + at, iov[i].iov_base, iov[i].iov_len) == 0);
            at += iov[i].iov_len;
        }
        CHECK(at == n);
    }
}

/* A redirect with a query carries it at the end of its Location, and the line stays a
 * header line: no CR, LF or other control byte a client could take for a line end. */
static void check_redirect(const struct sp_http_reply *r, const struct sp_http_request *req)
{
    static uint8_t whole[2 * SP_HTTP_QUERY_MAX + 1024];
    if (r->status != 301 || r->len > sizeof(whole))
        return;
    sp_http_reply_copy(r, 0, r->len, whole);
    const uint8_t *end = whole + r->len;
    const uint8_t *line = memmem(whole, r->len, "\r\nLocation: ", 12);
    CHECK(line != NULL);
    line += 12;
    const uint8_t *eol = memmem(line, (size_t)(end - line), "\r\n", 2);
    CHECK(eol != NULL);
    for (const uint8_t *c = line; c < eol; c++)
        CHECK(*c >= 0x20 && *c != 0x7f);
    size_t n = req->query_len;
    CHECK(!req->query || ((size_t)(eol - line) > n && memcmp(eol - n, req->query, n) == 0));
}

/* FNV-1a: a second of the 400 years from 1970 for the input's Date. */
static int64_t second_of(const uint8_t *data, size_t size)
{
    uint64_t h = 14695981039346656037u;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211u;
    return (int64_t)(h % (400ull * 365 * 86400));
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
    struct sp_http_date date;
    sp_http_date_set(&date, second_of(data, size));
    uint8_t *buf = fuzz_copy(data, size);
    size_t at = 0;
    while (at < size) {
        size_t used = sp_http_parse_request(buf + at, size - at, &req);
        if (used == 0)
            break;
        CHECK(used <= size - at);
        CHECK(req.error || req.path_len >= 1);
        CHECK(req.error || req.path[0] == '/');
        sp_http_answer(site_table, site, &req, &date, &reply);
        uint64_t total = 0;
        for (int i = 0; i < reply.niov; i++) {
            const struct iovec *v = &reply.iov[i];
            CHECK(inside(v->iov_base, v->iov_len, site_table, table_size) ||
                  inside(v->iov_base, v->iov_len, &reply, sizeof(reply)));
            total += v->iov_len;
        }
        CHECK(total == reply.len);
        check_segments(&reply, 1 + (size * 7 + at) % 331, 1 + (size * 131 + at) % 1600);
        CHECK(reply.status >= 200 && reply.status < 600);
        check_redirect(&reply, &req);
        CHECK(!req.error || reply.close);
        at += used;
        if (reply.close)
            break;
    }
    free(buf);
    return 0;
}
