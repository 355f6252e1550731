/* A build without ldns: every zone is read by the Python loader (setup.py picks this
 * file or read.c). */
#include "stormpy/zone/axfr.h"
#include "stormpy/zone/zone.h"

#include <stdio.h>

bool sp_zone_reader_available(void)
{
    return false;
}

int sp_zone_read(struct sp_zone *z, const char *path, const char *origin)
{
    (void)path;
    (void)origin;
    snprintf(z->why, sizeof(z->why), "this build has no ldns");
    return SP_ZONE_DECLINED;
}

int sp_zone_write(struct sp_zone *z, const char *path)
{
    (void)path;
    snprintf(z->why, sizeof(z->why), "this build has no ldns");
    return SP_ZONE_DECLINED;
}

struct sp_zone_axfr *sp_zone_axfr_new(struct sp_zone *z, const struct sp_zone_axfr_config *cfg)
{
    (void)cfg;
    snprintf(z->why, sizeof(z->why), "this build has no ldns");
    return NULL;
}

int sp_zone_axfr_message(struct sp_zone_axfr *a, const uint8_t *wire, size_t len, uint64_t now)
{
    (void)a, (void)wire, (void)len, (void)now;
    return SP_ZONE_DECLINED;
}

void sp_zone_axfr_free(struct sp_zone_axfr *a)
{
    (void)a;
}
