/*
 * HTTP/1.x request parsing (RFC 9110, RFC 9112), for a server of static content.
 *
 * sp_http_parse_request() reads one request head from the bytes received so far.
 * It copies nothing but the request path, which it percent-decodes and normalises
 * (dot-segments resolved, repeated slashes merged, query and fragment dropped) into
 * the request, so a lookup never sees "..", "%2e%2e" or "//". Header values it
 * keeps, and the query, point into the caller's buffer and live as long as it does.
 * A control character anywhere in the target, the query included, is a 400: a
 * redirect's Location carries the query on, and a header may hold no CR or LF.
 *
 * A request that is complete but wrong still parses: `error` then holds the status
 * to answer with (400, 414, 431, 501, 505) and the connection closes after it.
 */
#ifndef STORMPY_APP_HTTP_REQUEST_H
#define STORMPY_APP_HTTP_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#define SP_HTTP_PATH_MAX 4096          /* decoded path (longer: 414) */
#define SP_HTTP_LINE_MAX 8192          /* request line (longer: 414) */
#define SP_HTTP_HEAD_MAX 16384         /* whole request head (longer: 431) */
#define SP_HTTP_FIELDS_MAX 100         /* header lines (more: 431) */
#define SP_HTTP_BLANK_MAX 256          /* line ends tolerated before a request (more: 400) */
#define SP_HTTP_DATE_LEN 29            /* "Sun, 06 Nov 1994 08:49:37 GMT" */

enum sp_http_method {
    SP_HTTP_GET = 1,
    SP_HTTP_HEAD,
    SP_HTTP_OTHER,                     /* a valid method this server does not allow: 405 */
};

enum sp_http_body {
    SP_HTTP_NO_BODY = 0,
    SP_HTTP_LENGTH,                    /* content_length bytes follow the head */
    SP_HTTP_CHUNKED,                   /* a chunked body follows: the server closes after */
};

struct sp_http_range {
    int present;                       /* a single byte range was asked for */
    int suffix;                        /* "-N": the last `last` bytes */
    uint64_t first, last;              /* last == UINT64_MAX: open ("N-") */
};

struct sp_http_request {
    uint8_t method;                    /* enum sp_http_method */
    uint8_t version;                   /* 10 or 11 */
    uint8_t keep_alive;                /* after the answer, the connection may stay */
    uint8_t body;                      /* enum sp_http_body */
    uint16_t error;                    /* 0, or the status a bad request gets */
    uint16_t path_len;
    uint64_t content_length;
    int64_t if_modified_since;         /* -1 when absent or not a date */
    int64_t if_unmodified_since;
    const uint8_t *if_none_match;      /* NULL when absent */
    const uint8_t *if_match;
    const uint8_t *if_range;
    uint16_t if_none_match_len, if_match_len, if_range_len;
    /* "?" and the query as sent (not decoded), NULL when there is none or it is empty:
     * nginx too redirects "/dir?" to "/dir/" */
    const uint8_t *query;
    uint16_t query_len;
    struct sp_http_range range;
    uint8_t path[SP_HTTP_PATH_MAX];
};

/* Parses the request head at the start of buf[0, len).
 *   > 0  the head's length (consumed bytes); req is filled, req->error may be set;
 *   0    incomplete: wait for more bytes;
 * A head too long to ever complete is reported as complete, with the error set and
 * the whole of buf consumed, as soon as that is known. */
size_t sp_http_parse_request(const uint8_t *buf, size_t len, struct sp_http_request *req);

/* An HTTP-date (IMF-fixdate, RFC 850 or asctime form) in seconds since the epoch,
 * or -1. */
int64_t sp_http_parse_date(const uint8_t *s, size_t len);

/* Writes the IMF-fixdate of t (SP_HTTP_DATE_LEN bytes, no terminator). */
void sp_http_format_date(int64_t t, uint8_t *out);

#endif
