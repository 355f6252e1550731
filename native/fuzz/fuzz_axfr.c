/* An AXFR from a primary (zone/axfr.h): each input a stream of length-prefixed
 * messages, as TCP carries them, for the zone "example.", with the query id 0x1234.
 * An odd first byte says the query was TSIG-signed, so the TSIG checks run too. */
#include <stddef.h>
#include <stdint.h>

#include "stormpy/zone/axfr.h"
#include "stormpy/zone/zone.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t origin[] = "\7example";     /* and the literal's NUL: the root */
    static const uint8_t mac[32];
    if (size < 1)
        return 0;
    struct sp_zone *z = sp_zone_new();
    if (!z)
        return 0;
    struct sp_zone_axfr_config cfg = {.origin = origin, .origin_len = sizeof(origin), .id = 0x1234};
    if (data[0] & 1) {
        cfg.key_name = "xfrkey.";
        cfg.key_secret = "c3Rvcm1weSBmdXp6IGtleSBvZiAzMiBieXRlcyEhISE=";
        cfg.algorithm = "hmac-sha256.";
        cfg.request_mac = mac;
        cfg.request_mac_len = sizeof(mac);
    }
    struct sp_zone_axfr *a = sp_zone_axfr_new(z, &cfg);
    int rc = SP_ZONE_OK;
    size_t at = 1;
    while (a && rc == SP_ZONE_OK && at + 2 <= size) {
        size_t n = (size_t)data[at] << 8 | data[at + 1];
        at += 2;
        n = n < size - at ? n : size - at;
        rc = sp_zone_axfr_message(a, data + at, n, 1700000000);
        at += n;
    }
    if (rc == SP_ZONE_AXFR_DONE)
        sp_zone_finish(z, origin, sizeof(origin));
    sp_zone_axfr_free(a);
    sp_zone_free(z);
    return 0;
}
