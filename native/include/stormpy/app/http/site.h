/*
 * A static site compiled into a table (engine/table.h): every answer an HTTP server
 * can give, built before the first request.
 *
 * The table's keys are request paths as they name a resource: percent-decoded,
 * dot-segments resolved, without the query ("/", "/docs/", "/docs", "/a b.txt";
 * tag 0). Each key leads to the head response of one entry, whose `user` field is
 * the entry's index in the site, the table's program (sp_table_program()).
 *
 * An entry's responses are stored as separate table responses:
 *   head          the status line and header lines, each ending in CRLF, without the
 *                 blank line that ends the header section; the caller appends
 *                 Connection (and, for some statuses, Content-Range) and the blank
 *                 line. Its Date value (SP_HTTP_DATE_LEN bytes at head_date) is a
 *                 placeholder the server overwrites with the current second.
 *   body          the content (a blob: it may be larger than a packet);
 *   not_modified  the 304 head (files only);
 *   partial       the 206 head without Content-Length (files only);
 *   etag          the entity tag, quotes included (files only);
 *   sums          the body's one's-complement prefix sums, one per SP_HTTP_SUM_STRIDE
 *                 bytes: a TCP segment cut anywhere from the body gets its payload's
 *                 checksum from two stored sums and at most two short edges, never
 *                 by summing the whole payload.
 *   head_sums, not_modified_sums, partial_sums
 *                 each head's prefix sums in the same form, of its bytes before the
 *                 Date and then of those after it (two blobs, sums one after the
 *                 other): the Date's own sum is made once a second (reply.h), so a
 *                 segment holding a head sums none of its bytes.
 * Responses are never patched per request: the fields that vary (Date, Connection,
 * Content-Range, a redirect's query) are composed around them, so a sender points at
 * stored bytes. A redirect's head ends with its Location line, so the request's query
 * goes between that line's value and its CRLF (as nginx, "/dir?q" moves to "/dir/?q").
 */
#ifndef STORMPY_APP_HTTP_SITE_H
#define STORMPY_APP_HTTP_SITE_H

#include <stdint.h>

#include "stormpy/app/http/request.h"
#include "stormpy/engine/table.h"

#define SP_HTTP_SITE_MAGIC 0x53505354u    /* "SPST" */
#define SP_HTTP_NONE UINT32_MAX           /* no such response */

enum sp_http_entry_flags {
    SP_HTTP_FILE = 1,          /* a file: conditional and range requests apply */
    SP_HTTP_CLOSES = 2,        /* the connection closes after this answer */
    SP_HTTP_REDIRECT = 4,      /* its head ends with Location: a query goes at its end */
};

/* The body bytes per stored sum (sums below). */
#define SP_HTTP_SUM_STRIDE 64

/* Laid out without padding: stormpy/http/site.py packs it as "<9I6HqQ". */
struct sp_http_entry {
    uint32_t head, body, not_modified, partial, etag;  /* table responses */
    uint32_t sums;             /* the body's prefix sums (sp_csum_prefix(), host order) */
    uint32_t head_sums, not_modified_sums, partial_sums;   /* the heads', around the Date */
    uint16_t status;
    uint16_t head_date, not_modified_date, partial_date;   /* Date offsets */
    uint16_t flags;
    uint16_t sum_stride;       /* SP_HTTP_SUM_STRIDE when the sums are set */
    int64_t mtime;             /* seconds since the epoch (Last-Modified) */
    uint64_t size;             /* the body's length */
};

/* The error answers every site has, by status. */
enum sp_http_error {
    SP_HTTP_E400, SP_HTTP_E403, SP_HTTP_E404, SP_HTTP_E405, SP_HTTP_E408, SP_HTTP_E414,
    SP_HTTP_E416, SP_HTTP_E431, SP_HTTP_E501, SP_HTTP_E505, SP_HTTP_E412,
    SP_HTTP_ERRORS
};

/* Packed as "<2I" and the error entries' indices, padded to sizeof(struct
 * sp_http_site), then the entries. */
struct sp_http_site {
    uint32_t magic;
    uint32_t nentries;
    uint32_t error[SP_HTTP_ERRORS];    /* entry index of each error answer */
    struct sp_http_entry entry[];
};

/* The site in table t, or NULL when t holds none (or a malformed one). */
const struct sp_http_site *sp_http_site_of(const struct sp_table *t);

/* The entry for error `status` (400, 404, ...); the 400 entry for a status the site
 * has no entry for. */
const struct sp_http_entry *sp_http_error_entry(const struct sp_http_site *site, uint16_t status);

#endif
