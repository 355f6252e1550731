/* IPv4/IPv6 + UDP header parsing: whatever the bytes, the payload it reports lies
 * inside them, and a reply header written for it is consistent. */
#include <stdint.h>

#include "fuzz_common.h"
#include "stormpy/proto/udpip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *ip = fuzz_copy(data, size);
    struct sp_udpip u;
    if (sp_udpip_parse(ip, size, &u)) {
        if (u.family != 4 && u.family != 6)
            __builtin_trap();
        if (u.payload_off > size || u.payload_len > size - u.payload_off)
            __builtin_trap();
        uint8_t hdr[64];
        size_t n = sp_udpip_write_reply(hdr, &u, u.payload_len, 0, 64);
        if (n != sp_udpip_header_len(u.family))
            __builtin_trap();
    }
    free(ip);
    return 0;
}
