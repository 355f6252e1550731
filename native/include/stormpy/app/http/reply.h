/*
 * Choosing and composing the answer to one parsed request from a compiled site
 * (site.h). Nothing is copied but a few header lines: an answer is a list of byte
 * ranges (iovecs), most of them pointing into the table.
 *
 *   struct sp_http_date date;             (once a second)
 *   sp_http_date_set(&date, time(NULL));
 *   struct sp_http_reply r;
 *   sp_http_answer(t, site, &req, &date, &r);
 *   writev(fd, r.iov, r.niov);        (or cut the same bytes into TCP segments)
 */
#ifndef STORMPY_APP_HTTP_REPLY_H
#define STORMPY_APP_HTTP_REPLY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "stormpy/app/http/request.h"
#include "stormpy/app/http/site.h"

#define SP_HTTP_REPLY_IOV 5
/* The longest query (its '?' included) a redirect carries on; a longer one is a 414.
 * It is copied into the answer, whose bytes must outlive the request's (a sender
 * keeps the answer, not the request), so every queued answer has room for one. */
#define SP_HTTP_QUERY_MAX 1024
#define SP_HTTP_EXTRA_MAX (SP_HTTP_QUERY_MAX + 128)

/* The Date an answer carries and its sum, in the form of site.h's stored sums (the
 * Date is a blob shorter than a stride), both made once a second, never per answer. */
struct sp_http_date {
    uint8_t text[SP_HTTP_DATE_LEN];
    uint16_t sums[2];                  /* sp_csum_prefix() of text: 0, its partial sum */
};

/* Sets d to the second `second` (seconds since the epoch). */
void sp_http_date_set(struct sp_http_date *d, int64_t second);

/* Where an iov's bytes lie in a blob with stored prefix sums (site.h): their sum is
 * read from the sums, not computed, when they are cut into segments. */
struct sp_http_stored {
    const uint8_t *sums;               /* the blob's, NULL: the iov's bytes are summed */
    uint32_t first;                    /* the iov's first byte's offset in the blob */
    uint32_t size;                     /* the blob's length */
};

struct sp_http_reply {
    struct iovec iov[SP_HTTP_REPLY_IOV];
    struct sp_http_stored stored[SP_HTTP_REPLY_IOV];
    int niov;
    uint16_t status;
    bool close;                        /* close the connection once this is sent */
    uint64_t len;                      /* bytes in iov, in all */
    int body_iov;                      /* the iov of body bytes, -1 for none */
    uint64_t body_at;                  /* its first byte's offset in the answer */
    struct sp_http_date date;
    /* a redirect's query and CRLF, Content-Range, Content-Length, Connection, CRLF */
    uint8_t extra[SP_HTTP_EXTRA_MAX];
};

/* The answer to req from t's site, dated `date`. The reply points into t and into
 * itself: it must not be moved, and t must outlive it. */
void sp_http_answer(const struct sp_table *t, const struct sp_http_site *site,
                   const struct sp_http_request *req, const struct sp_http_date *date,
                   struct sp_http_reply *out);

/* Copies len bytes of the answer, from byte off on, to out (a TCP segment's payload)
 * and returns their partial checksum (csum.h). The sum of the head, the Date and the
 * body comes from their stored sums, so it costs the same for 64 bytes as for 9000;
 * only the server's few lines (extra) and the edges of a stride are summed. */
uint32_t sp_http_reply_copy(const struct sp_http_reply *r, uint64_t off, size_t len, uint8_t *out);

/* The same bytes, not copied: up to max iovecs pointing at them, in order. Returns
 * how many, or 0 when len is 0 or they would take more than max. */
unsigned sp_http_reply_slice(const struct sp_http_reply *r, uint64_t off, size_t len,
                             struct iovec *out, unsigned max);

/* The answer with error status `status` (408 for a request that timed out). */
void sp_http_answer_error(const struct sp_table *t, const struct sp_http_site *site,
                         uint16_t status, bool head_only, const struct sp_http_date *date,
                         struct sp_http_reply *out);

#endif
