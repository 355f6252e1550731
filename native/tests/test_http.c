/* HTTP request heads and dates (app/http/request.h), and answers cut into segments
 * with their sums (app/http/reply.h). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "stormpy/app/http/reply.h"
#include "stormpy/app/http/request.h"
#include "stormpy/proto/csum.h"

static struct sp_http_request req;

static size_t parse(const char *s)
{
    return sp_http_parse_request((const uint8_t *)s, strlen(s), &req);
}

static int path_is(const char *s)
{
    return req.path_len == strlen(s) && memcmp(req.path, s, req.path_len) == 0;
}

/* Each target's request parses whole, gets a 400 and closes. */
static void check_refused(const char *const *targets, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char line[256];
        snprintf(line, sizeof(line), "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", targets[i]);
        CHECK(parse(line) == strlen(line));
        CHECK_EQ(req.error, 400);
        CHECK_EQ(req.keep_alive, 0);
    }
}

static void paths(void)
{
    static const char *cases[][2] = {
        {"/", "/"}, {"/a", "/a"}, {"/a/", "/a/"}, {"//a//b", "/a/b"}, {"/a/./b/", "/a/b/"},
        {"/a/b/..", "/a/"}, {"/a/b/../c", "/a/c"}, {"/a/%2e%2E/c", "/c"}, {"/a%2Fb", "/a/b"},
        {"/with%20space?x=/..", "/with space"}, {"/x#frag", "/x"}, {"http://h:8/a/b", "/a/b"},
        {"HTTPS://h", "/"}, {"/.", "/"}, {"/a/.", "/a/"}, {"/caf%C3%A9", "/caf\xc3\xa9"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char line[256];
        snprintf(line, sizeof(line), "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", cases[i][0]);
        CHECK(parse(line) == strlen(line));
        CHECK_EQ(req.error, 0);
        if (!path_is(cases[i][1]))
            fprintf(stderr, "path %s -> %.*s\n", cases[i][0], req.path_len, req.path);
        CHECK(path_is(cases[i][1]));
    }
    static const char *bad[] = {"/..", "/a/../..", "/%2e%2e/x", "/a%00b", "/a%zz", "/a%2", "x",
                                "*"};
    check_refused(bad, sizeof(bad) / sizeof(bad[0]));
}

/* The query as request.h keeps it, and a target whose bytes after the path could not
 * go back in a Location. */
static void queries(void)
{
    static const char *cases[][2] = {
        {"/a?x=1", "?x=1"}, {"/a", NULL}, {"/a?", NULL}, {"/a?x#f", "?x"}, {"/a#f?x", NULL},
        {"/a??x", "??x"}, {"/a?%20b=%E2%82%AC", "?%20b=%E2%82%AC"}, {"http://h?q", "?q"},
        {"http://h/d?q=/..", "?q=/.."}, {"/a?\xff\"<>", "?\xff\"<>"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char line[256];
        snprintf(line, sizeof(line), "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", cases[i][0]);
        CHECK(parse(line) == strlen(line));
        CHECK_EQ(req.error, 0);
        const char *want = cases[i][1];
        CHECK((req.query == NULL) == (want == NULL));
        if (want) {            /* in the request's own bytes, not copied */
            const char *mark = strchr(line, '?');
            CHECK(req.query == (const uint8_t *)mark);
            CHECK(req.query_len == strlen(want) && memcmp(req.query, want, req.query_len) == 0);
        }
        CHECK_EQ(req.query_len == 0, want == NULL);
    }
    parse("GET /a?x HTTP/1.1\r\nHost: a\r\n\r\n");
    parse("GET /b HTTP/1.1\r\nHost: a\r\n\r\n");
    CHECK(req.query == NULL && req.query_len == 0);     /* nothing of the last request */
    static const char *bad[] = {"/a?x\ry", "/a?\tb", "/a?\x01", "/a?x\x7f", "/a#\x01", "/a?#\x1f"};
    check_refused(bad, sizeof(bad) / sizeof(bad[0]));
}

static void heads(void)
{
    CHECK_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\n"), 0);          /* incomplete */
    CHECK_EQ(parse("GET / HTT"), 0);
    CHECK_EQ(parse("\r\n\r\nGET / HTTP/1.1\nHost: a\n\n"), 28); /* bare LF, leading blank lines */
    CHECK_EQ(req.error, 0);
    CHECK_EQ(req.method, SP_HTTP_GET);
    CHECK_EQ(req.keep_alive, 1);

    parse("HEAD / HTTP/1.0\r\n\r\n");
    CHECK_EQ(req.method, SP_HTTP_HEAD);
    CHECK_EQ(req.keep_alive, 0);
    parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
    CHECK_EQ(req.keep_alive, 1);
    parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n");
    CHECK_EQ(req.keep_alive, 0);
    parse("DELETE / HTTP/1.1\r\nHost: a\r\n\r\n");
    CHECK_EQ(req.method, SP_HTTP_OTHER);
    CHECK_EQ(req.error, 0);

    static const struct { const char *s; int status; } errors[] = {
        {"get / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\n\r\n", 400},                          /* no Host */
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nnocolon\r\n\r\n", 400},
        {"GET / HTTP/2.0\r\n\r\n", 505},
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
        {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
        {"GET /\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", 400},   /* a bare CR */
    };
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        CHECK(parse(errors[i].s) > 0);
        CHECK_EQ(req.error, errors[i].status);
    }

    parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n");
    CHECK_EQ(req.body, SP_HTTP_LENGTH);
    CHECK_EQ(req.content_length, 12);
    parse("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
    CHECK_EQ(req.body, SP_HTTP_CHUNKED);
    CHECK_EQ(req.keep_alive, 0);
}

static void limits(void)
{
    static char blanks[SP_HTTP_BLANK_MAX + 2];
    memset(blanks, '\n', SP_HTTP_BLANK_MAX);
    CHECK_EQ(parse(blanks), 0);                 /* stray line ends: wait for a request */
    blanks[SP_HTTP_BLANK_MAX] = '\n';
    CHECK_EQ(parse(blanks), SP_HTTP_BLANK_MAX + 1);   /* more: not a client */
    CHECK_EQ(req.error, 400);
    static char big[40000];
    memset(big, 'a', sizeof(big));
    memcpy(big, "GET /", 5);
    big[SP_HTTP_LINE_MAX + 10] = 0;             /* no line end yet, already too long */
    CHECK(parse(big) > 0);
    CHECK_EQ(req.error, 414);
    int n = snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nHost: a\r\n");
    while (n < SP_HTTP_HEAD_MAX + 100)
        n += snprintf(big + n, sizeof(big) - (size_t)n, "X-Filler: %0100d\r\n", 0);
    CHECK(parse(big) > 0);                      /* the end of the head is not even here */
    CHECK_EQ(req.error, 431);
    n = snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 0; i <= SP_HTTP_FIELDS_MAX; i++)
        n += snprintf(big + n, sizeof(big) - (size_t)n, "X: %d\r\n", i);
    snprintf(big + n, sizeof(big) - (size_t)n, "\r\n");
    CHECK(parse(big) > 0);
    CHECK_EQ(req.error, 431);
}

static void ranges(void)
{
    parse("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=5-10\r\n\r\n");
    CHECK(req.range.present && !req.range.suffix && req.range.first == 5 && req.range.last == 10);
    parse("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=5-\r\n\r\n");
    CHECK(req.range.present && req.range.last == UINT64_MAX);
    parse("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=-7\r\n\r\n");
    CHECK(req.range.present && req.range.suffix && req.range.last == 7);
    parse("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=1-2,4-5\r\n\r\n");
    CHECK(!req.range.present);                  /* several ranges: the whole file */
    parse("GET / HTTP/1.1\r\nHost: a\r\nRange: items=1-2\r\n\r\n");
    CHECK(!req.range.present);
    parse("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=x-2\r\n\r\n");
    CHECK(!req.range.present);
    parse("GET / HTTP/1.1\r\nHost: a\r\nRange: bytes=9-2\r\n\r\n");
    CHECK(!req.range.present);                  /* last before first: invalid, ignored */
}

static void dates(void)
{
    const char *forms[] = {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                           "Sun Nov  6 08:49:37 1994"};
    for (int i = 0; i < 3; i++)
        CHECK_EQ(sp_http_parse_date((const uint8_t *)forms[i], strlen(forms[i])), 784111777);
    CHECK_EQ(sp_http_parse_date((const uint8_t *)"Sun, 06 Nov 1994 08:49:37 UTC", 29), -1);
    CHECK_EQ(sp_http_parse_date((const uint8_t *)"yesterday", 9), -1);
    uint8_t out[SP_HTTP_DATE_LEN];
    sp_http_format_date(784111777, out);
    CHECK(memcmp(out, forms[0], SP_HTTP_DATE_LEN) == 0);
    sp_http_format_date(951782400, out);        /* a leap day */
    CHECK(memcmp(out, "Tue, 29 Feb 2000 00:00:00 GMT", SP_HTTP_DATE_LEN) == 0);
    for (int64_t t = 0; t < 4102444800; t += 86400 * 37 + 3607) {
        sp_http_format_date(t, out);
        CHECK_EQ(sp_http_parse_date(out, SP_HTTP_DATE_LEN), t);
    }
}

/* The stored sums of one blob, or of two one after the other (a head's, site.h). */
static uint32_t add_sums(struct sp_table_builder *b, const char *p, size_t n, const char *q,
                         size_t m)
{
    uint16_t sums[64];
    size_t k = sp_csum_prefix(p, n, SP_HTTP_SUM_STRIDE, sums);
    if (q)
        k += sp_csum_prefix(q, m, SP_HTTP_SUM_STRIDE, sums + k);
    return (uint32_t)sp_table_add_response(b, (const uint8_t *)sums, (uint32_t)(2 * k), NULL, 0,
                                           0);
}

/* A site as stormpy/http/site.py compiles one: at "/" and "/odd" two pages whose heads
 * put the Date at an even and an odd offset, at "/dir" a redirect, all with one body;
 * every error is the first but 414, a page of its own. */
#define DATE_0 "Thu, 01 Jan 1970 00:00:00 GMT"
static const struct {
    const char *path, *head;
    uint16_t status, flags;
} pages[] = {
    {"/", "HTTP/1.1 200 OK\r\nServer: x\r\nDate: " DATE_0 "\r\nContent-Type: text/plain\r\n"
          "Content-Length: 200\r\n", 200, 0},
    {"/odd", "HTTP/1.1 200 OK\r\nServer: xy\r\nDate: " DATE_0 "\r\nContent-Length: 200\r\n",
     200, 0},
    {"/dir", "HTTP/1.1 301 Moved Permanently\r\nServer: x\r\nDate: " DATE_0 "\r\n"
             "Content-Length: 200\r\nLocation: /dir/\r\n", 301, SP_HTTP_REDIRECT},
    {NULL, "HTTP/1.1 414 Request-URI Too Large\r\nServer: x\r\nDate: " DATE_0 "\r\n"
           "Content-Length: 200\r\n", 414, SP_HTTP_CLOSES},
};
#define NPAGES (sizeof(pages) / sizeof(pages[0]))
static char body[200];

static struct sp_table *reply_site(void)
{
    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (char)(i * 7 + 3);
    struct sp_table_builder *b = sp_table_builder_new();
    uint32_t body_at = (uint32_t)sp_table_add_response(b, (const uint8_t *)body, sizeof(body),
                                                       NULL, 0, 0);
    uint32_t body_sums = add_sums(b, body, sizeof(body), NULL, 0);
    size_t size = sizeof(struct sp_http_site) + NPAGES * sizeof(struct sp_http_entry);
    struct sp_http_site *site = calloc(1, size);
    site->magic = SP_HTTP_SITE_MAGIC;
    site->nentries = NPAGES;
    site->error[SP_HTTP_E414] = NPAGES - 1;
    for (uint32_t i = 0; i < NPAGES; i++) {
        const char *head = pages[i].head;
        size_t len = strlen(head), date_at = (size_t)(strstr(head, "Date: ") - head) + 6;
        size_t after = date_at + SP_HTTP_DATE_LEN;
        struct sp_http_entry *e = &site->entry[i];
        *e = (struct sp_http_entry){.body = body_at, .sums = body_sums, .status = pages[i].status,
                                    .flags = pages[i].flags,
                                    .not_modified = SP_HTTP_NONE, .partial = SP_HTTP_NONE,
                                    .etag = SP_HTTP_NONE, .sum_stride = SP_HTTP_SUM_STRIDE,
                                    .size = sizeof(body)};
        e->head = (uint32_t)sp_table_add_response(b, (const uint8_t *)head, (uint32_t)len, NULL,
                                                  0, i);
        e->head_sums = add_sums(b, head, date_at, head + after, len - after);
        e->head_date = (uint16_t)date_at;
        if (pages[i].path)
            CHECK_EQ(sp_table_add_key(b, 0, (const uint8_t *)pages[i].path,
                                      (uint32_t)strlen(pages[i].path), e->head), 0);
    }
    CHECK_EQ(site->entry[0].head_date % 2, 0);
    CHECK_EQ(site->entry[1].head_date % 2, 1);
    CHECK_EQ(sp_table_set_program(b, site, (uint32_t)size), 0);
    free(site);
    return sp_table_builder_finish(b);
}

/* Equal as one's-complement sums (where 0 and 0xFFFF are both zero). */
static int same_sum(uint32_t a, uint32_t b)
{
    return sp_csum_reduce(a) % 0xFFFF == sp_csum_reduce(b) % 0xFFFF;
}

/* An answer copied in segments of every length up to past two strides, from every
 * offset: each one's sum, from the stored sums of head, Date and body, must be that
 * of the bytes it holds, and on every second the Date's own bytes are the ones sent. */
static void reply_segments(void)
{
    struct sp_table *t = reply_site();
    const struct sp_http_site *site = sp_http_site_of(t);
    CHECK(site != NULL);
    static const int64_t seconds[] = {0, 784111777, 784111778, 951782400, 4102444799};
    static const struct { const char *s; int page; } requests[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0},
        {"GET /odd HTTP/1.1\r\nHost: a\r\n\r\n", 1},
        {"HEAD /odd HTTP/1.0\r\n\r\n", 1},
        {"GET /dir?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", 2},   /* the head cut before its CRLF */
        {"GET /dir?odd HTTP/1.1\r\nHost: a\r\n\r\n", 2},
        {"HEAD /dir HTTP/1.0\r\n\r\n", 2},
    };
    for (size_t d = 0; d < sizeof(seconds) / sizeof(seconds[0]); d++) {
        struct sp_http_date date;
        sp_http_date_set(&date, seconds[d]);
        uint8_t text[SP_HTTP_DATE_LEN];
        sp_http_format_date(seconds[d], text);
        CHECK(memcmp(date.text, text, SP_HTTP_DATE_LEN) == 0);
        for (size_t q = 0; q < sizeof(requests) / sizeof(requests[0]); q++) {
            CHECK(parse(requests[q].s) == strlen(requests[q].s));
            struct sp_http_reply r;
            sp_http_answer(t, site, &req, &date, &r);
            CHECK_EQ(r.status, pages[requests[q].page].status);
            for (int i = 0; i < r.niov; i++)     /* only the server's lines are summed */
                CHECK((r.stored[i].sums != NULL) == (r.iov[i].iov_base != r.extra));
            uint8_t whole[512], seg[512];
            CHECK(r.len <= sizeof(whole));
            uint32_t sum = sp_http_reply_copy(&r, 0, r.len, whole);
            CHECK(same_sum(sum, sp_csum_partial(whole, r.len, 0)));
            size_t date_at = site->entry[requests[q].page].head_date;
            CHECK(memcmp(whole + date_at, text, SP_HTTP_DATE_LEN) == 0);
            int bad = 0;
            for (size_t n = 1; n <= 2 * SP_HTTP_SUM_STRIDE + 3; n++)
                for (size_t off = 0; off + n <= r.len; off++) {
                    sum = sp_http_reply_copy(&r, off, n, seg);
                    bad += memcmp(seg, whole + off, n) != 0 ||
                           !same_sum(sum, sp_csum_partial(seg, n, 0));
                }
            CHECK_EQ(bad, 0);
        }
    }
    sp_table_free(t);
}

/* The answer to request, whole, in out (NUL-terminated); its status and close. */
static size_t answer(const struct sp_table *t, const char *request, char *out, size_t cap,
                     struct sp_http_reply *r)
{
    struct sp_http_date date;
    sp_http_date_set(&date, 0);
    CHECK(parse(request) == strlen(request));
    sp_http_answer(t, sp_http_site_of(t), &req, &date, r);
    CHECK(r->len < cap);
    if (r->len >= cap)
        return 0;
    uint32_t sum = sp_http_reply_copy(r, 0, r->len, (uint8_t *)out);
    CHECK(same_sum(sum, sp_csum_partial(out, r->len, 0)));
    out[r->len] = 0;
    return r->len;
}

/* A redirect carries the request's query on at the end of its Location, as nginx does;
 * without a query it is the stored head as ever. */
static void redirects(void)
{
    struct sp_table *t = reply_site();
    static char got[4096], want[4096];
    struct sp_http_reply r;
    const char *head = pages[2].head;
    const char *cut = strstr(head, "/dir/\r\n") + 5;     /* the Location value's end */
    int at = (int)(cut - head);
    static const struct { const char *request, *query, *connection; bool body; } cases[] = {
        {"GET /dir HTTP/1.1\r\nHost: a\r\n\r\n", "", "keep-alive", true},
        {"GET /dir? HTTP/1.1\r\nHost: a\r\n\r\n", "", "keep-alive", true},
        {"GET /dir?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", "?x=1", "keep-alive", true},
        {"GET /dir?a=%20b&c=%E2%82%AC#f HTTP/1.1\r\nHost: a\r\n\r\n", "?a=%20b&c=%E2%82%AC",
         "keep-alive", true},
        {"HEAD /dir?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", "?x=1", "keep-alive", false},
        {"HEAD /dir?x=1 HTTP/1.0\r\n\r\n", "?x=1", "close", false},
        {"GET /dir?x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "?x=1", "close", true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = answer(t, cases[i].request, got, sizeof(got), &r);
        int w = snprintf(want, sizeof(want), "%.*s%s%sConnection: %s\r\n\r\n", at, head,
                         cases[i].query, cut, cases[i].connection);
        if (cases[i].body) {
            memcpy(want + w, body, sizeof(body));
            w += (int)sizeof(body);
        }
        CHECK_EQ(r.status, 301);
        CHECK_EQ(r.close, strcmp(cases[i].connection, "close") == 0);
        CHECK_EQ(n, w);
        if (n != (size_t)w || memcmp(got, want, n) != 0)
            fprintf(stderr, "%s ->\n%.*s\n", cases[i].request, (int)n, got);
        CHECK(n == (size_t)w && memcmp(got, want, n) == 0);
    }

    /* a query the answer has no room for is refused, not dropped; any other page
     * than a redirect ignores it */
    size_t plain = answer(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", want, sizeof(want), &r);
    static char line[SP_HTTP_QUERY_MAX + 64];
    for (int extra = 0; extra <= 1; extra++) {
        for (int page = 0; page <= 2; page += 2) {
            int n = snprintf(line, sizeof(line), "GET %s?", pages[page].path);
            memset(line + n, 'q', SP_HTTP_QUERY_MAX - 1 + extra);
            snprintf(line + n + SP_HTTP_QUERY_MAX - 1 + extra, 64, " HTTP/1.1\r\nHost: a\r\n\r\n");
            size_t got_len = answer(t, line, got, sizeof(got), &r);
            if (page == 0) {
                CHECK(got_len == plain && memcmp(got, want, plain) == 0);
                continue;
            }
            CHECK_EQ(r.status, extra ? 414 : 301);
            CHECK_EQ(r.close, extra);
            CHECK(extra || (strstr(got, "Location: /dir/?qqq") && strstr(got, "qq\r\nConnection")));
        }
    }
    sp_table_free(t);
}

int main(void)
{
    paths();
    heads();
    limits();
    ranges();
    dates();
    queries();
    reply_segments();
    redirects();
    return check_report("test_http");
}
