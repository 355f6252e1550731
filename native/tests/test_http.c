/* HTTP request heads and dates (app/http/request.h). */
#include <string.h>

#include "check.h"
#include "stormpy/app/http/request.h"

static struct sp_http_request req;

static size_t parse(const char *s)
{
    return sp_http_parse_request((const uint8_t *)s, strlen(s), &req);
}

static int path_is(const char *s)
{
    return req.path_len == strlen(s) && memcmp(req.path, s, req.path_len) == 0;
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
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char line[256];
        snprintf(line, sizeof(line), "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", bad[i]);
        CHECK(parse(line) == strlen(line));
        CHECK_EQ(req.error, 400);
        CHECK_EQ(req.keep_alive, 0);
    }
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

int main(void)
{
    paths();
    heads();
    limits();
    ranges();
    dates();
    return check_report("test_http");
}
