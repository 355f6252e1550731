/* HTTP/1.x request heads. See stormpy/app/http/request.h. */
#include "stormpy/app/http/request.h"

#include <stdbool.h>
#include <string.h>

/* RFC 9110 §5.6.2 tchar */
static bool is_tchar(uint8_t c)
{
    if ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int hex_value(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool equals_nocase(const uint8_t *s, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    if (len != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((s[i] | 0x20) != (uint8_t)lit[i])   /* lit is lower-case letters and '-' */
            return false;
    return true;
}

static void trim(const uint8_t **s, size_t *len)
{
    while (*len && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*len)--;
    }
    while (*len && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t'))
        (*len)--;
}

/* RFC 9112 3.2: no whitespace or control character in a request target */
static bool target_byte_bad(uint8_t c)
{
    return c <= 0x20 || c == 0x7f;
}

/* The query after the path (path_end: its '?' or '#', or len), as request.h has it:
 * up to a fragment. The bytes after the path are checked too: a redirect sends the
 * query back in a header. A status or 0. */
static uint16_t take_query(const uint8_t *s, size_t len, size_t path_end,
                           struct sp_http_request *req)
{
    for (size_t i = path_end; i < len; i++)
        if (target_byte_bad(s[i]))
            return 400;
    if (path_end == len || s[path_end] != '?')
        return 0;                              /* none, or a fragment first */
    const uint8_t *hash = memchr(s + path_end, '#', len - path_end);
    size_t end = hash ? (size_t)(hash - s) : len;
    if (end - path_end > 1) {
        req->query = s + path_end;
        req->query_len = (uint16_t)(end - path_end);   /* within SP_HTTP_LINE_MAX */
    }
    return 0;
}

/* Decodes and normalises the request target's path into req->path, and finds its
 * query; a status or 0. */
static uint16_t take_path(const uint8_t *s, size_t len, struct sp_http_request *req)
{
    uint8_t decoded[SP_HTTP_PATH_MAX];
    size_t n = 0;
    if (len >= 7 && (equals_nocase(s, 7, "http://") || (len >= 8 && equals_nocase(s, 8, "https://")))) {
        size_t at = s[4] == ':' ? 7 : 8;       /* absolute-form: the authority is not ours */
        while (at < len && s[at] != '/' && s[at] != '?')
            if (s[at++] == '@')
                return 400;                    /* RFC 9110 4.2.4: userinfo is an error */
        s += at;
        len -= at;
        if (len == 0 || s[0] != '/')
            decoded[n++] = '/';
    } else if (len == 0 || s[0] != '/') {
        return 400;
    }
    size_t path_end = 0;
    for (; path_end < len && s[path_end] != '?' && s[path_end] != '#'; path_end++) {
        uint8_t c = s[path_end];
        if (target_byte_bad(c))
            return 400;
        if (c == '%') {
            const uint8_t *hex = s + path_end;
            if (path_end + 2 >= len || hex_value(hex[1]) < 0 || hex_value(hex[2]) < 0)
                return 400;
            c = (uint8_t)(hex_value(hex[1]) << 4 | hex_value(hex[2]));
            if (c == 0)
                return 400;
            path_end += 2;
        }
        if (n == sizeof(decoded))
            return 414;
        decoded[n++] = c;
    }
    /* Dot-segments and empty segments go; ".." may not climb above the root. */
    uint8_t *out = req->path;
    size_t o = 0;
    out[o++] = '/';
    bool dir = true;                           /* the path ends in a slash */
    for (size_t i = 0; i < n;) {
        while (i < n && decoded[i] == '/')
            i++;
        size_t start = i;
        while (i < n && decoded[i] != '/')
            i++;
        size_t seg = i - start;
        if (seg == 0)
            break;
        dir = i < n;
        if (seg == 1 && decoded[start] == '.') {
            dir = true;
            continue;
        }
        if (seg == 2 && decoded[start] == '.' && decoded[start + 1] == '.') {
            if (o == 1)
                return 400;
            o--;                               /* back over "name/" */
            while (out[o - 1] != '/')
                o--;
            dir = true;
            continue;
        }
        if (o + seg + 1 > SP_HTTP_PATH_MAX)
            return 414;
        memcpy(out + o, decoded + start, seg);
        o += seg;
        out[o++] = '/';
    }
    if (!dir && o > 1)
        o--;
    req->path_len = (uint16_t)o;
    return take_query(s, len, path_end, req);
}

static bool take_digits(const uint8_t *s, size_t len, uint64_t *v)
{
    if (len == 0 || len > 19)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    *v = x;
    return true;
}

/* "bytes=first-last", "bytes=first-" or "bytes=-suffix"; anything else, several
 * ranges included, leaves the Range ignored (the whole representation is sent). */
static void take_range(const uint8_t *s, size_t len, struct sp_http_range *r)
{
    memset(r, 0, sizeof(*r));
    if (len < 7 || !equals_nocase(s, 6, "bytes=") || memchr(s, ',', len))
        return;
    s += 6;
    len -= 6;
    trim(&s, &len);
    const uint8_t *dash = memchr(s, '-', len);
    if (!dash)
        return;
    const uint8_t *a = s, *b = dash + 1;
    size_t alen = (size_t)(dash - s), blen = len - alen - 1;
    trim(&a, &alen);
    trim(&b, &blen);
    if (alen == 0) {
        if (!take_digits(b, blen, &r->last))
            return;
        r->suffix = 1;
    } else {
        if (!take_digits(a, alen, &r->first))
            return;
        r->last = UINT64_MAX;
        if (blen && !take_digits(b, blen, &r->last))
            return;
        if (r->last < r->first)
            return;                      /* RFC 9110 14.1.1: invalid, so ignored */
    }
    r->present = 1;
}

static void take_connection(const uint8_t *s, size_t len, bool *close, bool *keep)
{
    while (len) {
        const uint8_t *comma = memchr(s, ',', len);
        size_t n = comma ? (size_t)(comma - s) : len;
        const uint8_t *tok = s;
        size_t tlen = n;
        trim(&tok, &tlen);
        if (equals_nocase(tok, tlen, "close"))
            *close = true;
        else if (equals_nocase(tok, tlen, "keep-alive"))
            *keep = true;
        s += n;
        len -= n;
        if (len) {
            s++;
            len--;
        }
    }
}

/* RFC 9110 7.2, RFC 3986 3.2.2: Host is uri-host [":" port], or empty (a target
 * without authority); an IP literal's inside is left to its brackets. */
static bool host_valid(const uint8_t *v, size_t len)
{
    size_t i = 0;
    if (len && v[0] == '[') {
        const uint8_t *close = memchr(v, ']', len);
        if (!close)
            return false;
        for (const uint8_t *c = v + 1; c < close; c++)
            if (hex_value(*c) < 0 && *c != ':' && *c != '.' && (*c | 0x20) != 'v')
                return false;
        i = (size_t)(close - v) + 1;
    } else {
        for (; i < len && v[i] != ':'; i++)
            if (!((v[i] >= '0' && v[i] <= '9') || ((v[i] | 0x20) >= 'a' && (v[i] | 0x20) <= 'z') ||
                  strchr("-._~%!$&'()*+,;=", v[i]) != NULL) || v[i] == 0)
                return false;
    }
    if (i == len)
        return true;
    if (v[i] != ':')
        return false;
    for (i++; i < len; i++)
        if (v[i] < '0' || v[i] > '9')
            return false;
    return true;
}

struct fields {
    int hosts;
    bool close, keep, has_length, has_te;
};

/* One header line (without its line end); a status or 0. */
static uint16_t take_field(const uint8_t *s, size_t len, struct sp_http_request *req,
                           struct fields *f)
{
    if (len && (s[0] == ' ' || s[0] == '\t'))
        return 400;                            /* obsolete line folding */
    const uint8_t *colon = memchr(s, ':', len);
    if (!colon || colon == s)
        return 400;
    size_t nlen = (size_t)(colon - s);
    for (size_t i = 0; i < nlen; i++)
        if (!is_tchar(s[i]))
            return 400;                        /* whitespace before the colon included */
    const uint8_t *v = colon + 1;
    size_t vlen = len - nlen - 1;
    trim(&v, &vlen);
    if (memchr(v, 0, vlen) || memchr(v, '\r', vlen))
        return 400;                      /* RFC 9112 2.2: a bare CR is an error */
    if (equals_nocase(s, nlen, "host")) {
        if (!host_valid(v, vlen))
            return 400;                        /* RFC 9112 3.2: a MUST */
        f->hosts++;
    } else if (equals_nocase(s, nlen, "connection")) {
        take_connection(v, vlen, &f->close, &f->keep);
    } else if (equals_nocase(s, nlen, "content-length")) {
        uint64_t n;
        if (!take_digits(v, vlen, &n) || (f->has_length && n != req->content_length))
            return 400;
        f->has_length = true;
        req->content_length = n;
    } else if (equals_nocase(s, nlen, "transfer-encoding")) {
        const uint8_t *last = v;
        size_t llen = vlen;
        for (const uint8_t *c; (c = memchr(last, ',', llen)) != NULL;) {
            llen -= (size_t)(c + 1 - last);
            last = c + 1;
        }
        trim(&last, &llen);
        if (!equals_nocase(last, llen, "chunked"))
            return 501;
        f->has_te = true;
    } else if (equals_nocase(s, nlen, "if-match")) {
        req->if_match = v;
        req->if_match_len = (uint16_t)vlen;
    } else if (equals_nocase(s, nlen, "if-unmodified-since")) {
        req->if_unmodified_since = sp_http_parse_date(v, vlen);
    } else if (equals_nocase(s, nlen, "if-none-match")) {
        req->if_none_match = v;
        req->if_none_match_len = (uint16_t)vlen;
    } else if (equals_nocase(s, nlen, "if-modified-since")) {
        req->if_modified_since = sp_http_parse_date(v, vlen);
    } else if (equals_nocase(s, nlen, "if-range")) {
        req->if_range = v;
        req->if_range_len = (uint16_t)vlen;
    } else if (equals_nocase(s, nlen, "range")) {
        take_range(v, vlen, &req->range);
    }
    return 0;
}

/* The request line (without its line end); a status or 0. */
static uint16_t take_request_line(const uint8_t *s, size_t len, struct sp_http_request *req)
{
    size_t i = 0;
    while (i < len && s[i] != ' ')
        i++;
    if (i == 0 || i == len)
        return 400;
    for (size_t k = 0; k < i; k++)
        if (!((s[k] >= 'A' && s[k] <= 'Z') || s[k] == '-' || s[k] == '_'))
            return 400;
    if (i == 3 && memcmp(s, "GET", 3) == 0)
        req->method = SP_HTTP_GET;
    else if (i == 4 && memcmp(s, "HEAD", 4) == 0)
        req->method = SP_HTTP_HEAD;
    else
        req->method = SP_HTTP_OTHER;
    while (i < len && s[i] == ' ')
        i++;
    size_t target = i;
    while (i < len && s[i] != ' ')
        i++;
    size_t target_len = i - target;
    while (i < len && s[i] == ' ')
        i++;
    const uint8_t *v = s + i;
    size_t vlen = len - i;
    while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
        vlen--;
    if (vlen != 8 || memcmp(v, "HTTP/", 5) != 0 || v[6] != '.' || v[5] < '0' || v[5] > '9' ||
        v[7] < '0' || v[7] > '9')
        return 400;
    if (v[5] != '1')
        return v[5] == '0' ? 400 : 505;
    req->version = v[7] == '0' ? 10 : 11;
    if (target_len == 0)
        return 400;
    return take_path(s + target, target_len, req);
}

/* The end of the line starting at p (at its LF), or NULL. */
static const uint8_t *line_end(const uint8_t *p, const uint8_t *end)
{
    return memchr(p, '\n', (size_t)(end - p));
}

static size_t bad(struct sp_http_request *req, uint16_t status, size_t consumed)
{
    req->error = status;
    req->keep_alive = 0;
    return consumed;
}

size_t sp_http_parse_request(const uint8_t *buf, size_t len, struct sp_http_request *req)
{
    req->method = 0;
    req->version = 11;
    req->keep_alive = 0;
    req->body = SP_HTTP_NO_BODY;
    req->error = 0;
    req->path_len = 0;
    req->content_length = 0;
    req->if_modified_since = req->if_unmodified_since = -1;
    req->if_none_match = req->if_range = req->if_match = NULL;
    req->if_none_match_len = req->if_range_len = req->if_match_len = 0;
    req->query = NULL;
    req->query_len = 0;
    req->range.present = 0;

    const uint8_t *p = buf, *end = buf + len;
    while (p < end && (*p == '\r' || *p == '\n'))   /* empty lines before a request */
        p++;
    if (p - buf > SP_HTTP_BLANK_MAX)
        return bad(req, 400, len);       /* more than a stray line end: not a client */
    if (p == end)
        return 0;
    if (!is_tchar(*p))
        return bad(req, 400, len);       /* no method starts so: a TLS hello, say; no wait */
    const uint8_t *eol = line_end(p, end);
    if (!eol)
        return (size_t)(end - p) > SP_HTTP_LINE_MAX ? bad(req, 414, len) : 0;
    if ((size_t)(eol - p) > SP_HTTP_LINE_MAX)
        return bad(req, 414, len);
    const uint8_t *line = p;
    size_t line_len = (size_t)(eol - p) - (eol > p && eol[-1] == '\r');
    /* The whole head must be here before any of it is judged. */
    const uint8_t *q = eol + 1;
    unsigned nfields = 0;
    for (;;) {
        if ((size_t)(q - buf) > SP_HTTP_HEAD_MAX)
            return bad(req, 431, len);
        const uint8_t *e = line_end(q, end);
        if (!e)
            return (size_t)(end - buf) > SP_HTTP_HEAD_MAX ? bad(req, 431, len) : 0;
        if (e == q || (e == q + 1 && *q == '\r'))
            break;
        q = e + 1;
        if (++nfields > SP_HTTP_FIELDS_MAX)
            return bad(req, 431, len);
    }
    size_t consumed = (size_t)(line_end(q, end) + 1 - buf);

    uint16_t status = take_request_line(line, line_len, req);
    if (status)
        return bad(req, status, consumed);
    struct fields f = {0};
    for (q = eol + 1;;) {
        const uint8_t *e = line_end(q, end);
        size_t n = (size_t)(e - q) - (e > q && e[-1] == '\r');
        if (n == 0)
            break;
        status = take_field(q, n, req, &f);
        if (status)
            return bad(req, status, consumed);
        q = e + 1;
    }
    if ((req->version == 11 && f.hosts != 1) || f.hosts > 1 || (f.has_te && f.has_length))
        return bad(req, 400, consumed);
    req->keep_alive = req->version == 11 ? !f.close : f.keep && !f.close;
    if (f.has_te) {
        req->body = SP_HTTP_CHUNKED;
        req->keep_alive = 0;                   /* its end is not looked for */
    } else if (req->content_length) {
        req->body = SP_HTTP_LENGTH;
    }
    return consumed;
}
