/* IPv4/IPv6 + TCP: any bytes through sp_tcpip_parse() and the checksum check; a
 * segment that parses gets a reply (a SYN-ACK with every option for a SYN, data
 * otherwise) that must parse again, with right checksums and the fields it was
 * written with. */
#include <stdint.h>

#include "fuzz_common.h"
#include "stormpy/proto/csum.h"
#include "stormpy/proto/tcpip.h"

#define CHECK(cond)                  \
    do {                             \
        if (!(cond))                 \
            __builtin_trap();        \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *ip = fuzz_copy(data, size);
    struct sp_tcpip t;
    if (sp_tcpip_parse(ip, size, &t)) {
        CHECK(t.payload_off + t.payload_len <= size);
        CHECK(t.opt.nsack <= SP_TCP_SACK_BLOCKS && t.opt.wscale <= 14);
        (void)sp_tcpip_checksums_ok(ip, &t);
        struct sp_tcp_options syn = {.has_mss = true, .mss = 1460, .has_wscale = true,
                                     .wscale = 7, .sack_permitted = true};
        struct sp_tcp_segment seg = {.seq = t.ack, .ack = t.seq + 1, .window = 512,
                                     .flags = SP_TCP_ACK | (t.flags & SP_TCP_SYN),
                                     .syn = (t.flags & SP_TCP_SYN) ? &syn : NULL};
        uint8_t out[2048];
        size_t n = t.payload_len < 1400 ? t.payload_len : 1400;
        size_t hl = sp_tcpip_header_len(t.family, &seg);
        memcpy(out + hl, ip + t.payload_off, n);
        CHECK(sp_tcpip_write_reply(out, &t, &seg, n, sp_csum_partial(out + hl, n, 0), 64) == hl);
        struct sp_tcpip back;
        CHECK(sp_tcpip_parse(out, hl + n, &back));
        CHECK(sp_tcpip_checksums_ok(out, &back));
        CHECK(back.seq == seg.seq && back.ack == seg.ack && back.payload_len == n);
        CHECK(back.sport == t.dport && back.dport == t.sport);
        CHECK(!seg.syn || (back.opt.mss == 1460 && back.opt.wscale == 7 && back.opt.sack_permitted));
    }
    free(ip);
    return 0;
}
