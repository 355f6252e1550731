/* A master file read with ldns, record by record; see zone.h.
 *
 * The file is cut into records here (parentheses, quotes, comments), so this side
 * knows each record's line, whether it states its TTL, and every $ directive; ldns
 * parses each record's text. Anything whose meaning could differ from dnspython's
 * reading (the reference) is declined, and the Python loader reads that file. */
#include "stormpy/zone/zone.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ldns/ldns.h>

#include "read_check.h"

bool sp_zone_reader_available(void)
{
    return true;
}

struct reader {
    struct sp_zone *z;
    const char *text;
    size_t len, pos;
    unsigned line;           /* of the next byte */
    char *record;            /* the record being cut out, NUL-terminated */
    size_t record_cap;
    ldns_rdf *origin, *prev;
    ldns_buffer *rdata;
    uint32_t default_ttl;
    bool have_ttl;           /* a $TTL has been seen */
    bool zone_origin_set;
    uint8_t zone_origin[SP_ZONE_NAME_MAX];
    size_t zone_origin_len;
    char base[4096];         /* the directory of the file being read: its $INCLUDE
                                paths start there, as in Knot DNS */
};

static int decline(struct reader *r, unsigned line, const char *why, const char *detail)
{
    snprintf(r->z->why, sizeof(r->z->why), "line %u: %s%s%s", line, why, detail ? ": " : "",
             detail ? detail : "");
    return SP_ZONE_DECLINED;
}

/* The next record's text, without comments and with parentheses blanked, into
 * r->record; its first line in *line. 0 at the end, 1 with a record, -1 out of memory. */
static int next_record(struct reader *r, unsigned *line)
{
    size_t out = 0;
    int depth = 0;
    bool quoted = false, any = false;
    *line = r->line;
    while (r->pos < r->len) {
        if (out + 3 > r->record_cap) {
            size_t cap = r->record_cap ? r->record_cap * 2 : 4096;
            char *p = realloc(r->record, cap);
            if (p == NULL)
                return -1;
            r->record_cap = cap;
            r->record = p;
        }
        char c = r->text[r->pos++];
        if (c == '\\' && r->pos < r->len) {         /* an escape: both bytes as they are */
            r->record[out++] = c;
            c = r->text[r->pos++];
            if (c == '\n')
                r->line++;
            r->record[out++] = c;
            any = true;
            continue;
        }
        if (quoted) {
            if (c == '"')
                quoted = false;
            else if (c == '\n')
                r->line++;
            r->record[out++] = c;
            continue;
        }
        if (c == ';') {                             /* a comment, to the end of its line */
            while (r->pos < r->len && r->text[r->pos] != '\n')
                r->pos++;
            continue;
        }
        if (c == '\n') {
            r->line++;
            if (depth == 0) {
                if (any)
                    break;
                out = 0;                            /* a blank line: the record starts later */
                *line = r->line;
                continue;
            }
            c = ' ';
        } else if (c == '(' || c == ')') {
            depth += c == '(' ? 1 : -1;
            c = ' ';
        } else if (c == '"') {
            quoted = true;
        }
        if (!isspace((unsigned char)c))
            any = true;
        r->record[out++] = c;
    }
    if (!any)
        return 0;
    r->record[out] = 0;
    return (depth != 0 || quoted) ? 2 : 1;
}

/* Whether a record states its TTL (RFC 1035's [TTL] [class] or [class] [TTL] after
 * the owner): the first field starts with a digit, or the first is a class and the
 * second does. A type never starts with a digit; its rdata may ("ns A 192.0.2.1"). */
static bool states_ttl(const char *text)
{
    const char *p = text;
    if (!isspace((unsigned char)*p))
        while (*p && !isspace((unsigned char)*p))
            p++;
    for (int field = 0; field < 2; field++) {
        while (isspace((unsigned char)*p))
            p++;
        if (isdigit((unsigned char)*p))
            return true;
        const char *start = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if (!sp_zone_is_class(start, (size_t)(p - start)))
            return false;
    }
    return false;
}

/* "[owner] class TTL type" as ldns reads it, "[owner] TTL class type" (RFC 1035 allows
 * both orders; dnspython reads both): the two fields swapped in place. */
static void ttl_first(char *text)
{
    char *p = text;
    if (!isspace((unsigned char)*p))
        while (*p && !isspace((unsigned char)*p))
            p++;
    char *field[2];
    size_t len[2];
    for (int i = 0; i < 2; i++) {
        while (isspace((unsigned char)*p))
            p++;
        field[i] = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        len[i] = (size_t)(p - field[i]);
    }
    if (!sp_zone_is_class(field[0], len[0]) || !isdigit((unsigned char)*field[1]))
        return;
    char swapped[64];
    size_t gap = (size_t)(field[1] - field[0]) - len[0];
    if (len[0] + len[1] + gap > sizeof(swapped))
        return;
    memcpy(swapped, field[1], len[1]);
    memcpy(swapped + len[1], field[0] + len[0], gap);
    memcpy(swapped + len[1] + gap, field[0], len[0]);
    memcpy(field[0], swapped, len[0] + len[1] + gap);
}

static int directive(struct reader *r, unsigned line)
{
    char *word = r->record, *arg = word;
    while (*arg && !isspace((unsigned char)*arg))
        arg++;
    if (*arg)
        *arg++ = 0;
    while (isspace((unsigned char)*arg))
        arg++;
    char *end = arg + strlen(arg);
    while (end > arg && isspace((unsigned char)end[-1]))
        *--end = 0;
    if (strcasecmp(word, "$TTL") == 0) {
        if (!sp_zone_ttl_valid(arg, strlen(arg), &r->default_ttl))
            return decline(r, line, "a $TTL dnspython does not read", arg);
        r->have_ttl = true;
        return SP_ZONE_OK;
    }
    if (strcasecmp(word, "$ORIGIN") != 0)
        return decline(r, line, "a directive left to dnspython", word);   /* $GENERATE */
    if (end == arg || end[-1] != '.')
        return decline(r, line, "a relative $ORIGIN", arg);
    ldns_rdf *origin = ldns_dname_new_frm_str(arg);
    if (origin == NULL)
        return decline(r, line, "a $ORIGIN ldns does not read", arg);
    ldns_rdf_deep_free(r->origin);
    r->origin = origin;
    if (!r->zone_origin_set) {
        r->zone_origin_len = ldns_rdf_size(origin);
        memcpy(r->zone_origin, ldns_rdf_data(origin), r->zone_origin_len);
        r->zone_origin_set = true;
    }
    return SP_ZONE_OK;
}

static int record(struct reader *r, unsigned line)
{
    if (!r->zone_origin_set)
        return decline(r, line, "a record before any $ORIGIN", NULL);
    if (!states_ttl(r->record) && !r->have_ttl)
        return decline(r, line, "a record without a TTL before any $TTL", NULL);
    ttl_first(r->record);
    ldns_rr *rr = NULL;
    ldns_status s = ldns_rr_new_frm_str(&rr, r->record, r->default_ttl, r->origin, &r->prev);
    if (s != LDNS_STATUS_OK)
        return decline(r, line, "ldns", ldns_get_errorstr_by_id(s));
    int rc = SP_ZONE_OK;
    ldns_rdf *owner = ldns_rr_owner(rr);
    ldns_buffer_clear(r->rdata);
    const char *refused = NULL;
    bool too_long = ldns_rdf_size(owner) > SP_ZONE_NAME_MAX;
    for (size_t i = 0; i < ldns_rr_rd_count(rr); i++)   /* ldns joins names to the origin */
        too_long |= ldns_rdf_get_type(ldns_rr_rdf(rr, i)) == LDNS_RDF_TYPE_DNAME &&
                    ldns_rdf_size(ldns_rr_rdf(rr, i)) > SP_ZONE_NAME_MAX;   /* unchecked */
    if (too_long)
        rc = decline(r, line, "a name longer than 255 octets", NULL);
    else if (ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN)
        rc = decline(r, line, "a class other than IN", NULL);
    else if (ldns_rr_rdata2buffer_wire(r->rdata, rr) != LDNS_STATUS_OK)
        rc = decline(r, line, "rdata ldns cannot write", NULL);
    else if ((refused = sp_zone_record_refused(r->record, rr, ldns_buffer_begin(r->rdata),
                                                ldns_buffer_position(r->rdata))) != NULL)
        rc = decline(r, line, "for dnspython to judge", refused);
    else
        rc = sp_zone_add_record(r->z, ldns_rdf_data(owner), ldns_rdf_size(owner),
                                (uint16_t)ldns_rr_get_type(rr), ldns_rr_ttl(rr),
                                ldns_buffer_begin(r->rdata), ldns_buffer_position(r->rdata));
    ldns_rr_free(rr);
    return rc;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 65536 > cap) {
            cap = cap ? cap * 2 : 1 << 20;
            char *p = realloc(buf, cap);
            if (p == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    bool failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static int read_file(struct reader *r, const char *path, unsigned depth);

static void set_base(struct reader *r, const char *path)
{
    snprintf(r->base, sizeof(r->base), "%s", path);
    char *slash = strrchr(r->base, '/');
    if (slash != NULL)
        *slash = 0;                 /* "/x": "", and include() adds the "/" */
    else
        snprintf(r->base, sizeof(r->base), ".");
}

/* $INCLUDE file [origin]: the file read with the origin given (else the current one);
 * the origin, owner and $TTL come back afterwards, as in dnspython. Relative paths
 * start from the including file's directory, as Knot DNS and the Python loader read
 * them. */
static int include(struct reader *r, char *arg, unsigned line, unsigned depth)
{
    char *file = arg, *origin = arg;
    while (*origin && !isspace((unsigned char)*origin))
        origin++;
    if (*origin)
        *origin++ = 0;
    while (isspace((unsigned char)*origin))
        origin++;
    if (*file == 0 || *file == '"' || depth >= 8 || strpbrk(origin, " \t") != NULL)
        return decline(r, line, "an $INCLUDE left to dnspython", file);
    char path[4096];
    int n = *file == '/' ? snprintf(path, sizeof(path), "%s", file)
                         : snprintf(path, sizeof(path), "%s/%s", r->base, file);
    if (n < 0 || (size_t)n >= sizeof(path))
        return decline(r, line, "an $INCLUDE path too long", NULL);
    ldns_rdf *saved_origin = r->origin ? ldns_rdf_clone(r->origin) : NULL;
    ldns_rdf *saved_prev = r->prev ? ldns_rdf_clone(r->prev) : NULL;
    uint32_t saved_ttl = r->default_ttl;
    bool saved_have_ttl = r->have_ttl;
    int rc = SP_ZONE_OK;
    if (*origin) {
        if (origin[strlen(origin) - 1] != '.')
            rc = decline(r, line, "a relative $INCLUDE origin", origin);
        ldns_rdf *o = rc == SP_ZONE_OK ? ldns_dname_new_frm_str(origin) : NULL;
        if (rc == SP_ZONE_OK && o == NULL)
            rc = decline(r, line, "an $INCLUDE origin ldns does not read", origin);
        if (o != NULL) {
            ldns_rdf_deep_free(r->origin);
            r->origin = o;
        }
    }
    if (rc == SP_ZONE_OK)
        rc = read_file(r, path, depth + 1);
    ldns_rdf_deep_free(r->origin);
    ldns_rdf_deep_free(r->prev);
    r->prev = saved_prev;
    r->origin = saved_origin;
    r->have_ttl = saved_have_ttl;
    r->default_ttl = saved_ttl;
    return rc;
}

static int read_records(struct reader *r, unsigned depth)
{
    for (size_t i = 0; i < r->len; i++)   /* dnspython reads UTF-8 and judges the rest */
        if ((unsigned char)r->text[i] >= 0x80 || r->text[i] == 0)
            return decline(r, 1, "bytes other than ASCII", NULL);
    unsigned line;
    int got;
    while ((got = next_record(r, &line)) > 0) {
        if (got == 2)
            return decline(r, line, "an unclosed parenthesis or quote", NULL);
        int rc;
        if (strncasecmp(r->record, "$INCLUDE", 8) == 0 && isspace((unsigned char)r->record[8])) {
            char arg[4096];
            snprintf(arg, sizeof(arg), "%s", r->record + 9);   /* the next file reuses record */
            char *end = arg + strlen(arg);
            while (end > arg && isspace((unsigned char)end[-1]))
                *--end = 0;
            char *start = arg;
            while (isspace((unsigned char)*start))
                start++;
            rc = include(r, start, line, depth);
        } else {
            rc = r->record[0] == '$' ? directive(r, line) : record(r, line);
        }
        if (rc != SP_ZONE_OK)
            return rc;
    }
    return got < 0 ? SP_ZONE_NOMEM : SP_ZONE_OK;
}

static int read_file(struct reader *r, const char *path, unsigned depth)
{
    size_t len;
    char *text = slurp(path, &len);
    if (text == NULL) {
        snprintf(r->z->why, sizeof(r->z->why), "%s: cannot read: %s", path, strerror(errno));
        return SP_ZONE_DECLINED;
    }
    const char *saved_text = r->text;
    size_t saved_len = r->len, saved_pos = r->pos;
    unsigned saved_line = r->line;
    char saved_base[sizeof(r->base)];
    memcpy(saved_base, r->base, sizeof(saved_base));
    set_base(r, path);
    r->len = len;
    r->text = text;
    r->pos = 0;
    r->line = 1;
    int rc = read_records(r, depth);
    r->text = saved_text;
    r->len = saved_len;
    r->pos = saved_pos;
    r->line = saved_line;
    memcpy(r->base, saved_base, sizeof(r->base));
    free(text);
    return rc;
}

int sp_zone_read(struct sp_zone *z, const char *path, const char *origin)
{
    struct reader r = {.z = z, .line = 1};
    r.rdata = ldns_buffer_new(4096);
    int rc = r.rdata ? SP_ZONE_OK : SP_ZONE_NOMEM;
    if (rc == SP_ZONE_OK && origin != NULL) {
        r.origin = ldns_dname_new_frm_str(origin);
        if (r.origin == NULL || ldns_rdf_size(r.origin) > SP_ZONE_NAME_MAX) {
            rc = decline(&r, 0, "an origin ldns does not read", origin);
        } else {
            r.zone_origin_len = ldns_rdf_size(r.origin);
            memcpy(r.zone_origin, ldns_rdf_data(r.origin), r.zone_origin_len);
            r.zone_origin_set = true;
        }
    }
    if (rc == SP_ZONE_OK)
        rc = read_file(&r, path, 0);
    if (rc == SP_ZONE_OK && !r.zone_origin_set)
        rc = decline(&r, r.line, "no $ORIGIN", NULL);
    if (rc == SP_ZONE_OK)
        rc = sp_zone_finish(z, r.zone_origin, r.zone_origin_len);
    ldns_rdf_deep_free(r.origin);
    ldns_rdf_deep_free(r.prev);
    if (r.rdata)
        ldns_buffer_free(r.rdata);
    free(r.record);
    return rc;
}

/* One record as a master file line, through ldns's printer. */
static int write_record(FILE *f, const struct sp_zone *z, const struct sp_zone_rrset *s,
                        const struct sp_zone_rdata *d)
{
    static uint8_t wire[SP_ZONE_NAME_MAX + 10 + 65536];
    const struct sp_zone_name *n = &z->names[s->name];
    size_t len = n->len;
    memcpy(wire, z->arena + n->off, len);
    uint8_t fixed[10] = {(uint8_t)(s->type >> 8), (uint8_t)s->type, 0, 1,
                         (uint8_t)(s->ttl >> 24), (uint8_t)(s->ttl >> 16), (uint8_t)(s->ttl >> 8),
                         (uint8_t)s->ttl, (uint8_t)(d->len >> 8), (uint8_t)d->len};
    memcpy(wire + len, fixed, sizeof(fixed));
    memcpy(wire + len + sizeof(fixed), z->rdata_arena + d->off, d->len);
    ldns_rr *rr = NULL;
    size_t pos = 0;
    if (ldns_wire2rr(&rr, wire, len + sizeof(fixed) + d->len, &pos, LDNS_SECTION_ANSWER)
        != LDNS_STATUS_OK)
        return SP_ZONE_DECLINED;
    ldns_rr_print(f, rr);
    ldns_rr_free(rr);
    return SP_ZONE_OK;
}

/* A name's RRsets, but for skip (the SOA, written first). */
static int write_name(FILE *f, const struct sp_zone *z, uint32_t name, uint32_t skip)
{
    const struct sp_zone_name *n = &z->names[name];
    int rc = SP_ZONE_OK;
    for (uint32_t i = 0; rc == SP_ZONE_OK && (!n->dead || n->hidden) && i < n->nrrsets; i++) {
        const struct sp_zone_rrset *s = &z->rrsets[n->first_rrset + i];
        for (uint32_t k = 0; rc == SP_ZONE_OK && n->first_rrset + i != skip && k < s->count; k++)
            rc = write_record(f, z, s, &z->rdatas[s->first + k]);
    }
    return rc;
}

int sp_zone_write(struct sp_zone *z, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -errno;
    ldns_rdf *origin = ldns_dname_new_frm_data(z->names[z->origin].len,
                                               sp_zone_name_wire(z, z->origin));
    int rc = origin != NULL ? SP_ZONE_OK : SP_ZONE_NOMEM;
    if (origin != NULL) {
        fputs("$ORIGIN ", f);
        ldns_rdf_print(f, origin);
        fputs("\n", f);
        ldns_rdf_deep_free(origin);
        rc = write_record(f, z, &z->rrsets[z->soa], &z->rdatas[z->rrsets[z->soa].first]);
    }
    for (uint32_t id = 0; rc == SP_ZONE_OK && id < z->nnames; id++)
        rc = write_name(f, z, id, z->soa);
    int err = ferror(f) ? errno : 0;
    if (fclose(f) != 0 && err == 0)
        err = errno;
    if (rc != SP_ZONE_OK)
        snprintf(z->why, sizeof(z->why), "ldns cannot print a record of this zone");
    return err ? -err : rc;
}
