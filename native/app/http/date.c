/* HTTP-dates (RFC 9110 §5.6.7), both ways. See stormpy/app/http/request.h. */
#include <string.h>

#include "stormpy/app/http/request.h"
#include "stormpy/app/http/site.h"

static const char DAYS[7][4] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};  /* from 1970-01-01 */
static const char MONTHS[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Days since 1970-01-01 of a proleptic Gregorian date (month 1-12). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static void put2(uint8_t *o, int v)
{
    o[0] = (uint8_t)('0' + v / 10);
    o[1] = (uint8_t)('0' + v % 10);
}

void sp_http_format_date(int64_t t, uint8_t *out)
{
    int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400;
    int64_t secs = t - days * 86400, y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    if (y < 0 || y > 9999)
        y = y < 0 ? 0 : 9999;
    memcpy(out, DAYS[((days % 7) + 7) % 7], 3);
    memcpy(out + 3, ", ", 2);
    put2(out + 5, d);
    out[7] = ' ';
    memcpy(out + 8, MONTHS[m - 1], 3);
    out[11] = ' ';
    put2(out + 12, (int)(y / 100));
    put2(out + 14, (int)(y % 100));
    out[16] = ' ';
    put2(out + 17, (int)(secs / 3600));
    out[19] = ':';
    put2(out + 20, (int)(secs / 60 % 60));
    out[22] = ':';
    put2(out + 23, (int)(secs % 60));
    memcpy(out + 25, " GMT", 4);
}

static int number(const uint8_t *s, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int month(const uint8_t *s)
{
    for (int i = 0; i < 12; i++)
        if (memcmp(s, MONTHS[i], 3) == 0)
            return i + 1;
    return -1;
}

/* "hh:mm:ss" in seconds, or -1. */
static int64_t clock_time(const uint8_t *s)
{
    if (s[2] != ':' || s[5] != ':')
        return -1;
    int h = number(s, 2), mi = number(s + 3, 2), se = number(s + 6, 2);
    if (h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 60)
        return -1;
    return h * 3600 + mi * 60 + se;
}

static int64_t assemble(int64_t y, int m, int d, int64_t secs)
{
    if (y < 0 || m < 1 || d < 1 || d > 31 || secs < 0)
        return -1;
    return days_from_civil(y, m, d) * 86400 + secs;
}

int64_t sp_http_parse_date(const uint8_t *s, size_t len)
{
    const uint8_t *comma = memchr(s, ',', len);
    if (len == 29 && comma == s + 3) {         /* Sun, 06 Nov 1994 08:49:37 GMT */
        if (memcmp(s + 25, " GMT", 4) != 0 || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' ||
            s[16] != ' ')
            return -1;
        return assemble(number(s + 12, 4), month(s + 8), number(s + 5, 2), clock_time(s + 17));
    }
    if (comma && len >= 30 && (size_t)(s + len - comma) == 24) {  /* Sunday, 06-Nov-94 08:49:37 GMT */
        const uint8_t *p = comma + 2;
        if (comma[1] != ' ' || p[2] != '-' || p[6] != '-' || p[9] != ' ' ||
            memcmp(p + 18, " GMT", 4) != 0)
            return -1;
        int yy = number(p + 7, 2);
        if (yy < 0)
            return -1;
        return assemble(yy < 70 ? 2000 + yy : 1900 + yy, month(p + 3), number(p, 2),
                        clock_time(p + 10));
    }
    if (len == 24 && !comma) {                 /* Sun Nov  6 08:49:37 1994 */
        if (s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ')
            return -1;
        int d = s[8] == ' ' ? number(s + 9, 1) : number(s + 8, 2);
        return assemble(number(s + 20, 4), month(s + 4), d, clock_time(s + 11));
    }
    return -1;
}
