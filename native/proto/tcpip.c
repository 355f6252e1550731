/* IPv4/IPv6 + TCP parse/write pair. See tcpip.h. */
#include "stormpy/proto/tcpip.h"

#include <string.h>

#include "stormpy/proto/csum.h"
#include "stormpy/proto/ip.h"
#include "stormpy/proto/wire.h"

#define PROTO_TCP 6
#define OPT_END 0
#define OPT_NOP 1
#define OPT_MSS 2
#define OPT_WSCALE 3
#define OPT_SACK_PERMITTED 4
#define OPT_SACK 5
#define OPT_TIMESTAMPS 8
#define WSCALE_MAX 14

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Options between the fixed header and the data offset; false when one runs past. */
static bool parse_options(const uint8_t *p, size_t len, struct sp_tcp_options *o)
{
    memset(o, 0, sizeof(*o));
    for (size_t i = 0; i < len;) {
        uint8_t kind = p[i];
        if (kind == OPT_END)
            break;
        if (kind == OPT_NOP) {
            i++;
            continue;
        }
        if (i + 1 >= len || p[i + 1] < 2 || i + p[i + 1] > len)
            return false;
        uint8_t olen = p[i + 1];
        const uint8_t *v = p + i + 2;
        if (kind == OPT_MSS && olen == 4) {
            o->has_mss = true;
            o->mss = sp_get16(v);
        } else if (kind == OPT_WSCALE && olen == 3) {
            o->has_wscale = true;
            o->wscale = v[0] > WSCALE_MAX ? WSCALE_MAX : v[0];
        } else if (kind == OPT_SACK_PERMITTED && olen == 2) {
            o->sack_permitted = true;
        } else if (kind == OPT_TIMESTAMPS && olen == 10) {
            o->has_timestamps = true;
            o->ts_val = get32(v);
            o->ts_ecr = get32(v + 4);
        } else if (kind == OPT_SACK && (olen - 2) % 8 == 0) {
            for (size_t k = 0; k < (size_t)(olen - 2) / 8 && o->nsack < SP_TCP_SACK_BLOCKS; k++) {
                o->sack[o->nsack][0] = get32(v + 8 * k);
                o->sack[o->nsack][1] = get32(v + 8 * k + 4);
                o->nsack++;
            }
        }
        i += olen;
    }
    return true;
}

static bool parse_tcp(const uint8_t *ip, size_t l4, size_t end, struct sp_tcpip *t)
{
    if (l4 + SP_TCP_HEADER_LEN > end)
        return false;
    const uint8_t *h = ip + l4;
    size_t off = (size_t)(h[12] >> 4) * 4;
    if (off < SP_TCP_HEADER_LEN || l4 + off > end)
        return false;
    if (!parse_options(h + SP_TCP_HEADER_LEN, off - SP_TCP_HEADER_LEN, &t->opt))
        return false;
    t->sport = sp_get16(h);
    t->dport = sp_get16(h + 2);
    t->seq = get32(h + 4);
    t->ack = get32(h + 8);
    t->flags = h[13];
    t->window = sp_get16(h + 14);
    t->l4_off = l4;
    t->payload_off = l4 + off;
    t->payload_len = end - l4 - off;
    return true;
}

bool sp_tcpip_parse(const uint8_t *ip, size_t len, struct sp_tcpip *t)
{
    struct sp_ip h;
    return sp_ip_parse(ip, len, PROTO_TCP, &t->family, t->src, t->dst, &h) &&
           parse_tcp(ip, h.l4, h.end, t);
}

/* The pseudo-header's partial sum for a TCP segment of tcp_len bytes. */
static uint32_t pseudo_sum(uint8_t family, const uint8_t *src, const uint8_t *dst,
                           size_t tcp_len)
{
    size_t alen = family == 4 ? 4 : 16;
    uint32_t sum = sp_csum_partial(src, alen, 0);
    sum = sp_csum_partial(dst, alen, sum);
    return sum + PROTO_TCP + (uint32_t)tcp_len;
}

bool sp_tcpip_checksums_ok(const uint8_t *ip, const struct sp_tcpip *t)
{
    if (t->family == 4 && sp_csum_fold(sp_csum_partial(ip, (size_t)(ip[0] & 0x0f) * 4, 0)) != 0)
        return false;
    size_t tcp_len = t->payload_off - t->l4_off + t->payload_len;
    uint32_t sum = pseudo_sum(t->family, t->src, t->dst, tcp_len);
    if (sp_get16(ip + t->l4_off + 16) == sp_csum_reduce(sum))
        return true;                     /* CHECKSUM_PARTIAL from this host */
    return sp_csum_fold(sp_csum_partial(ip + t->l4_off, tcp_len, sum)) == 0;
}

static size_t options_len(const struct sp_tcp_segment *seg)
{
    if (!seg->syn)
        return 0;
    return 4 + (seg->syn->has_wscale ? 4 : 0) + (seg->syn->sack_permitted ? 4 : 0);
}

size_t sp_tcpip_header_len(uint8_t family, const struct sp_tcp_segment *seg)
{
    return (family == 4 ? SP_IPV4_HEADER_LEN : SP_IPV6_HEADER_LEN) + SP_TCP_HEADER_LEN +
           options_len(seg);
}

/* The IP and TCP headers with the checksum field 0; returns the TCP header. */
static uint8_t *write_headers(uint8_t *out, const struct sp_tcpip *to, const struct sp_tcp_segment *seg,
                              size_t payload_len, uint8_t ttl)
{
    size_t ip_len = to->family == 4 ? SP_IPV4_HEADER_LEN : SP_IPV6_HEADER_LEN;
    size_t tcp_len = SP_TCP_HEADER_LEN + options_len(seg);
    sp_ip_write_reply(out, to->family, to->dst, to->src, PROTO_TCP, tcp_len + payload_len, ttl);
    uint8_t *h = out + ip_len;
    sp_put16(h, to->dport);
    sp_put16(h + 2, to->sport);
    put32(h + 4, seg->seq);
    put32(h + 8, seg->ack);
    h[12] = (uint8_t)((tcp_len / 4) << 4);
    h[13] = seg->flags;
    sp_put16(h + 14, seg->window);
    sp_put16(h + 16, 0);
    sp_put16(h + 18, 0);
    if (seg->syn) {
        uint8_t *o = h + SP_TCP_HEADER_LEN;
        o[0] = OPT_MSS;
        o[1] = 4;
        sp_put16(o + 2, seg->syn->mss);
        o += 4;
        if (seg->syn->sack_permitted) {
            o[0] = OPT_NOP;
            o[1] = OPT_NOP;
            o[2] = OPT_SACK_PERMITTED;
            o[3] = 2;
            o += 4;
        }
        if (seg->syn->has_wscale) {
            o[0] = OPT_NOP;
            o[1] = OPT_WSCALE;
            o[2] = 3;
            o[3] = seg->syn->wscale;
        }
    }
    return h;
}

size_t sp_tcpip_write_reply(uint8_t *out, const struct sp_tcpip *to, const struct sp_tcp_segment *seg,
                            size_t payload_len, uint32_t payload_sum, uint8_t ttl)
{
    uint8_t *h = write_headers(out, to, seg, payload_len, ttl);
    size_t tcp_len = SP_TCP_HEADER_LEN + options_len(seg);
    uint32_t sum = pseudo_sum(to->family, to->dst, to->src, tcp_len + payload_len);
    sum = sp_csum_partial(h, tcp_len, sum);
    /* the payload starts at an even offset in the segment: tcp_len is a multiple of 4 */
    sum = sp_csum_add(sum, payload_sum);
    sp_put16(h + 16, sp_csum_fold(sum));
    return (size_t)(h - out) + tcp_len;
}

size_t sp_tcpip_write_offload(uint8_t *out, const struct sp_tcpip *to, const struct sp_tcp_segment *seg,
                              size_t payload_len, uint8_t ttl)
{
    uint8_t *h = write_headers(out, to, seg, payload_len, ttl);
    size_t tcp_len = SP_TCP_HEADER_LEN + options_len(seg);
    uint32_t sum = pseudo_sum(to->family, to->dst, to->src, tcp_len + payload_len);
    sp_put16(h + 16, (uint16_t)sp_csum_reduce(sum));
    return (size_t)(h - out) + tcp_len;
}
