/* A build without ldns: every zone is read by the Python loader (setup.py picks this
 * file or read.c). */
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
