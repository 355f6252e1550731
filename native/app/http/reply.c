/* Answers from a compiled site. See stormpy/app/http/reply.h and site.h. */
#include "stormpy/app/http/reply.h"
#include "stormpy/proto/csum.h"

#include <stdio.h>
#include <string.h>

const struct sp_http_site *sp_http_site_of(const struct sp_table *t)
{
    size_t len;
    const struct sp_http_site *site = sp_table_program(t, &len);
    if (!site || len < sizeof(*site) || site->magic != SP_HTTP_SITE_MAGIC ||
        (len - sizeof(*site)) / sizeof(site->entry[0]) < site->nentries)
        return NULL;
    for (int i = 0; i < SP_HTTP_ERRORS; i++)
        if (site->error[i] >= site->nentries)
            return NULL;
    return site;
}

static const uint16_t ERROR_STATUS[SP_HTTP_ERRORS] = {400, 403, 404, 405, 408, 414, 416, 431,
                                                      501, 505, 412};

const struct sp_http_entry *sp_http_error_entry(const struct sp_http_site *site, uint16_t status)
{
    for (int i = 0; i < SP_HTTP_ERRORS; i++)
        if (ERROR_STATUS[i] == status)
            return &site->entry[site->error[i]];
    return &site->entry[site->error[SP_HTTP_E400]];
}

/* n bytes at p as the answer's next iov; from byte `first` of a blob of `size` bytes
 * whose prefix sums are `sums` (site.h), or with sums NULL, summed when copied. */
static void add(struct sp_http_reply *out, const void *p, size_t n, const uint8_t *sums,
                uint32_t first, uint32_t size)
{
    if (n == 0)
        return;
    out->iov[out->niov].iov_base = (void *)p;
    out->iov[out->niov].iov_len = n;
    out->stored[out->niov] = (struct sp_http_stored){.sums = sums, .first = first, .size = size};
    out->niov++;
    out->len += n;
}

/* How many prefix sums a blob of len bytes has (sp_csum_prefix()). */
static size_t sum_count(size_t len)
{
    return (len + SP_HTTP_SUM_STRIDE - 1) / SP_HTTP_SUM_STRIDE + 1;
}

/* Response `index` as `count` prefix sums at this build's stride, or NULL (none, or
 * not in the form expected: the bytes are then summed). */
static const uint8_t *stored_sums(const struct sp_table *t, const struct sp_http_entry *e,
                                  uint32_t index, size_t count)
{
    const struct sp_response *r = sp_table_response(t, index);
    if (!r || e->sum_stride != SP_HTTP_SUM_STRIDE || r->len != 2 * count)
        return NULL;
    return sp_response_bytes(t, r);
}

/* A stored head with the current date spliced in at date_at; its bytes before and
 * after the Date are two blobs, each with its prefix sums in `sums` (site.h). */
static void add_head(struct sp_http_reply *out, const struct sp_table *t,
                     const struct sp_http_entry *e, uint32_t index, uint32_t sums,
                     uint16_t date_at)
{
    const struct sp_response *r = sp_table_response(t, index);
    if (!r)
        return;
    const uint8_t *b = sp_response_bytes(t, r);
    if ((size_t)date_at + SP_HTTP_DATE_LEN > r->len) {
        add(out, b, r->len, NULL, 0, 0);
        return;
    }
    uint32_t after = date_at + SP_HTTP_DATE_LEN, rest = r->len - after;
    const uint8_t *s = stored_sums(t, e, sums, sum_count(date_at) + sum_count(rest));
    add(out, b, date_at, s, 0, date_at);
    add(out, out->date.text, SP_HTTP_DATE_LEN, (const uint8_t *)out->date.sums, 0,
        SP_HTTP_DATE_LEN);
    add(out, b + after, rest, s ? s + 2 * sum_count(date_at) : NULL, 0, rest);
}

static void add_body(struct sp_http_reply *out, const struct sp_table *t,
                     const struct sp_http_entry *e, uint64_t first, uint64_t count)
{
    const struct sp_response *r = sp_table_response(t, e->body);
    if (!r || first > r->len || count > r->len - first || count == 0)
        return;
    out->body_iov = out->niov;
    out->body_at = out->len;
    add(out, sp_response_bytes(t, r) + first, count, stored_sums(t, e, e->sums, sum_count(r->len)),
        (uint32_t)first, r->len);
}

static uint32_t stored_sum(const uint8_t *sums, uint64_t k)
{
    uint16_t v;
    memcpy(&v, sums + 2 * k, 2);
    return v;
}

/* The sum of blob[a, b) as the blob's own words see it (offset 0 even): two stored
 * sums and the edges short of a stride. */
static uint32_t stored_range_sum(const struct sp_http_stored *s, const uint8_t *blob, uint64_t a,
                                 uint64_t b)
{
    const uint64_t stride = SP_HTTP_SUM_STRIDE;
    uint64_t up = (a + stride - 1) / stride * stride;
    uint64_t down = b == s->size ? b : b / stride * stride;
    if (up >= down) {
        uint32_t sum = sp_csum_partial(blob + a, b - a, 0);
        return a & 1 ? sp_csum_swap(sum) : sum;
    }
    /* the edges are often empty (a whole head piece, the Date, a stride-cut body) */
    uint32_t head = up > a ? sp_csum_partial(blob + a, up - a, 0) : 0;
    uint64_t k_down = down == s->size ? (s->size + stride - 1) / stride : down / stride;
    uint32_t mid = sp_csum_sub(stored_sum(s->sums, k_down), stored_sum(s->sums, up / stride));
    uint32_t tail = b > down ? sp_csum_partial(blob + down, b - down, 0) : 0;   /* down even */
    return sp_csum_add(sp_csum_add(a & 1 ? sp_csum_swap(head) : head, mid), tail);
}

/* The partial sum of n bytes of iov i from byte skip on, as if at an even offset. */
static uint32_t piece_sum(const struct sp_http_reply *r, int i, size_t skip, size_t n)
{
    const uint8_t *p = (const uint8_t *)r->iov[i].iov_base + skip;
    const struct sp_http_stored *s = &r->stored[i];
    if (!s->sums)
        return sp_csum_partial(p, n, 0);
    uint64_t a = s->first + skip;
    uint32_t sum = stored_range_sum(s, p - a, a, a + n);
    return a & 1 ? sp_csum_swap(sum) : sum;
}

uint32_t sp_http_reply_copy(const struct sp_http_reply *r, uint64_t off, size_t len, uint8_t *out)
{
    uint32_t sum = 0;
    size_t done = 0;
    for (int i = 0; done < len && i < r->niov; i++) {   /* len 0: r may be unset */
        size_t have = r->iov[i].iov_len;
        if (off >= have) {
            off -= have;
            continue;
        }
        size_t n = have - off < len - done ? have - off : len - done;
        memcpy(out + done, (const uint8_t *)r->iov[i].iov_base + off, n);
        uint32_t piece = piece_sum(r, i, (size_t)off, n);
        sum = sp_csum_add(sum, done & 1 ? sp_csum_swap(piece) : piece);
        done += n;
        off = 0;
    }
    return sum;
}

unsigned sp_http_reply_slice(const struct sp_http_reply *r, uint64_t off, size_t len,
                             struct iovec *out, unsigned max)
{
    unsigned n = 0;
    size_t done = 0;
    for (int i = 0; done < len && i < r->niov; i++) {
        size_t have = r->iov[i].iov_len;
        if (off >= have) {
            off -= have;
            continue;
        }
        if (n == max)
            return 0;
        size_t take = have - off < len - done ? have - off : len - done;
        out[n++] = (struct iovec){(uint8_t *)r->iov[i].iov_base + off, take};
        done += take;
        off = 0;
    }
    return done == len ? n : 0;
}

/* The header lines the server adds, and the blank line. */
static void add_extra(struct sp_http_reply *out, int n)
{
    if (n < 0 || n >= SP_HTTP_EXTRA_MAX)
        n = 0;                           /* cannot happen with the lines written here */
    n += snprintf((char *)out->extra + n, SP_HTTP_EXTRA_MAX - (size_t)n, "%s",
                  out->close ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n");
    add(out, out->extra, n < SP_HTTP_EXTRA_MAX ? (size_t)n : SP_HTTP_EXTRA_MAX - 1, NULL, 0, 0);
}

_Static_assert(SP_HTTP_DATE_LEN <= SP_HTTP_SUM_STRIDE, "a Date's sums are two");

void sp_http_date_set(struct sp_http_date *d, int64_t second)
{
    sp_http_format_date(second, d->text);
    sp_csum_prefix(d->text, SP_HTTP_DATE_LEN, SP_HTTP_SUM_STRIDE, d->sums);
}

static void start(struct sp_http_reply *out, const struct sp_http_date *date, uint16_t status,
                  bool close)
{
    out->niov = 0;
    out->len = 0;
    out->body_iov = -1;
    out->status = status;
    out->close = close;
    out->date = *date;
}

/* An entry's head, the server's lines (n bytes already in out->extra), its body. */
static void add_entry(struct sp_http_reply *out, const struct sp_table *t,
                      const struct sp_http_entry *e, bool head_only, int n)
{
    add_head(out, t, e, e->head, e->head_sums, e->head_date);
    add_extra(out, n);
    if (!head_only)
        add_body(out, t, e, 0, e->size);
}

void sp_http_answer_error(const struct sp_table *t, const struct sp_http_site *site,
                         uint16_t status, bool head_only, const struct sp_http_date *date,
                         struct sp_http_reply *out)
{
    const struct sp_http_entry *e = sp_http_error_entry(site, status);
    start(out, date, e->status, (e->flags & SP_HTTP_CLOSES) != 0);
    add_entry(out, t, e, head_only, 0);
}

/* Whether an entity tag in an If-None-Match or If-Match list (or "*") matches: weak
 * comparison ignores a W/ prefix, strong comparison never matches a weak tag. */
static bool tag_listed(const uint8_t *list, size_t len, const uint8_t *etag, size_t elen, bool weak)
{
    for (size_t i = 0; i < len;) {
        while (i < len && (list[i] == ' ' || list[i] == '\t' || list[i] == ','))
            i++;
        if (i < len && list[i] == '*')
            return true;
        if (weak && i + 2 <= len && list[i] == 'W' && list[i + 1] == '/')
            i += 2;
        size_t s = i;
        if (i < len && list[i] == '"') {
            const uint8_t *q = memchr(list + i + 1, '"', len - i - 1);
            i = q ? (size_t)(q - list) + 1 : len;
        } else {
            while (i < len && list[i] != ',')
                i++;
        }
        if (i - s == elen && memcmp(list + s, etag, elen) == 0)
            return true;
    }
    return false;
}

/* If-Match (strong comparison: a weak tag never matches) and If-Unmodified-Since,
 * RFC 9110 13.1.1 and 13.1.4: false when the precondition fails (412). */
static bool preconditions_hold(const struct sp_table *t, const struct sp_http_entry *e,
                               const struct sp_http_request *req)
{
    if (req->if_match) {
        const struct sp_response *tag = sp_table_response(t, e->etag);
        return tag && tag_listed(req->if_match, req->if_match_len, sp_response_bytes(t, tag),
                                 tag->len, false);
    }
    return req->if_unmodified_since < 0 || e->mtime <= req->if_unmodified_since;
}

static bool not_modified(const struct sp_table *t, const struct sp_http_entry *e,
                         const struct sp_http_request *req)
{
    if (req->if_none_match) {
        const struct sp_response *tag = sp_table_response(t, e->etag);
        return tag && tag_listed(req->if_none_match, req->if_none_match_len,
                                 sp_response_bytes(t, tag), tag->len, true);
    }
    return req->if_modified_since >= 0 && e->mtime <= req->if_modified_since;
}

/* If-Range: the range applies only to the representation the client has. */
static bool range_applies(const struct sp_table *t, const struct sp_http_entry *e,
                          const struct sp_http_request *req)
{
    if (!req->range.present || req->method != SP_HTTP_GET)
        return false;                    /* RFC 9110 14.2: ranges are for GET only */
    if (!req->if_range)
        return true;
    if (req->if_range[0] == '"') {             /* strong comparison: W/ never matches */
        const struct sp_response *tag = sp_table_response(t, e->etag);
        return tag && tag->len == req->if_range_len &&
               memcmp(sp_response_bytes(t, tag), req->if_range, tag->len) == 0;
    }
    return sp_http_parse_date(req->if_range, req->if_range_len) == e->mtime;
}

static void reply_file(const struct sp_table *t, const struct sp_http_site *site,
                       const struct sp_http_entry *e, const struct sp_http_request *req,
                       struct sp_http_reply *out)
{
    bool head_only = req->method == SP_HTTP_HEAD;
    if (!preconditions_hold(t, e, req)) {
        const struct sp_http_entry *x = sp_http_error_entry(site, 412);
        out->status = x->status;
        add_entry(out, t, x, head_only, 0);
        return;
    }
    if (not_modified(t, e, req)) {
        out->status = 304;
        add_head(out, t, e, e->not_modified, e->not_modified_sums, e->not_modified_date);
        add_extra(out, 0);
        return;
    }
    if (!range_applies(t, e, req)) {
        add_entry(out, t, e, head_only, 0);
        return;
    }
    const struct sp_http_range *r = &req->range;
    if (e->size == 0 && r->suffix && r->last != 0) {
        add_entry(out, t, e, head_only, 0);   /* RFC 9110 14.1.1: satisfiable, no byte to name */
        return;
    }
    uint64_t first = r->first, last = r->last;
    if (r->suffix) {
        first = r->last >= e->size ? 0 : e->size - r->last;
        last = e->size - 1;
    } else if (last >= e->size) {
        last = e->size - 1;
    }
    if (e->size == 0 || (r->suffix && r->last == 0) || first >= e->size || first > last) {
        const struct sp_http_entry *x = sp_http_error_entry(site, 416);
        out->status = x->status;
        int n = snprintf((char *)out->extra, SP_HTTP_EXTRA_MAX, "Content-Range: bytes */%llu\r\n",
                         (unsigned long long)e->size);
        add_entry(out, t, x, head_only, n);
        return;
    }
    out->status = 206;
    add_head(out, t, e, e->partial, e->partial_sums, e->partial_date);
    int n = snprintf((char *)out->extra, SP_HTTP_EXTRA_MAX,
                     "Content-Length: %llu\r\nContent-Range: bytes %llu-%llu/%llu\r\n",
                     (unsigned long long)(last - first + 1), (unsigned long long)first,
                     (unsigned long long)last, (unsigned long long)e->size);
    add_extra(out, n);
    if (!head_only)
        add_body(out, t, e, first, last - first + 1);
}

/* A redirect with the request's query at the end of its Location, the head's last
 * line (site.h): the head short of its CRLF, then the query and that CRLF ahead of
 * the server's lines, copied: the request's bytes do not live as long as the answer. */
static void reply_redirect(const struct sp_table *t, const struct sp_http_entry *e,
                           const struct sp_http_request *req, bool head_only,
                           struct sp_http_reply *out)
{
    add_head(out, t, e, e->head, e->head_sums, e->head_date);
    struct iovec *last = out->niov ? &out->iov[out->niov - 1] : NULL;
    int n = 0;
    if (last && last->iov_len >= 2 &&
        memcmp((const uint8_t *)last->iov_base + last->iov_len - 2, "\r\n", 2) == 0) {
        last->iov_len -= 2;            /* its stored sums still hold: they are by offset */
        out->len -= 2;
        if (last->iov_len == 0)
            out->niov--;
        memcpy(out->extra, req->query, req->query_len);
        memcpy(out->extra + req->query_len, "\r\n", 2);
        n = req->query_len + 2;
    }
    add_extra(out, n);
    if (!head_only)
        add_body(out, t, e, 0, e->size);
}

void sp_http_answer(const struct sp_table *t, const struct sp_http_site *site,
                   const struct sp_http_request *req, const struct sp_http_date *date,
                   struct sp_http_reply *out)
{
    bool head_only = req->method == SP_HTTP_HEAD;
    const struct sp_http_entry *e;
    if (req->error || req->method == SP_HTTP_OTHER) {
        e = sp_http_error_entry(site, req->error ? req->error : 405);
    } else {
        const struct sp_response *r = sp_table_find(t, 0, req->path, req->path_len);
        e = r && r->user < site->nentries ? &site->entry[r->user] : sp_http_error_entry(site, 404);
        if ((e->flags & SP_HTTP_REDIRECT) && req->query_len > SP_HTTP_QUERY_MAX)
            e = sp_http_error_entry(site, 414);   /* no room to carry it on (reply.h) */
    }
    start(out, date, e->status, !req->keep_alive || (e->flags & SP_HTTP_CLOSES));
    if (e->flags & SP_HTTP_FILE)
        reply_file(t, site, e, req, out);
    else if ((e->flags & SP_HTTP_REDIRECT) && req->query)
        reply_redirect(t, e, req, head_only, out);
    else
        add_entry(out, t, e, head_only, 0);
}
