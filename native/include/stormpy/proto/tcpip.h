/*
 * IPv4/IPv6 + TCP headers for backends that own the whole frame (a TCP of stormpy's
 * own on the rings). Parse/write pair, like udpip.h: sp_tcpip_parse() validates a
 * received segment, its options included, and finds its payload;
 * sp_tcpip_write_reply() writes the headers of a segment back to its sender, the TCP
 * checksum composed from the payload's partial sum (a prepackaged segment's stored
 * sum) and the header, never summed over the payload again.
 */
#ifndef STORMPY_PROTO_TCPIP_H
#define STORMPY_PROTO_TCPIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SP_TCP_HEADER_LEN 20
#define SP_TCP_SACK_BLOCKS 4

enum sp_tcp_flag {
    SP_TCP_FIN = 0x01, SP_TCP_SYN = 0x02, SP_TCP_RST = 0x04, SP_TCP_PSH = 0x08,
    SP_TCP_ACK = 0x10, SP_TCP_URG = 0x20, SP_TCP_ECE = 0x40, SP_TCP_CWR = 0x80,
};

/* The options stormpy reads (RFC 9293 MSS, RFC 7323 window scale and timestamps,
 * RFC 2018 SACK); any other option is skipped by its length. */
struct sp_tcp_options {
    bool has_mss, has_wscale, sack_permitted, has_timestamps;
    uint16_t mss;
    uint8_t wscale;                  /* capped at 14 (RFC 7323 2.3) */
    uint8_t nsack;
    uint32_t ts_val, ts_ecr;
    uint32_t sack[SP_TCP_SACK_BLOCKS][2];   /* left and right edges */
};

struct sp_tcpip {
    uint8_t family;                  /* 4 or 6 */
    uint8_t src[16], dst[16];
    uint16_t sport, dport;
    uint32_t seq, ack;
    uint8_t flags;                   /* enum sp_tcp_flag */
    uint16_t window;                 /* as sent: not yet scaled */
    size_t l4_off;                   /* the TCP header, from the start of the IP header */
    size_t payload_off, payload_len;
    struct sp_tcp_options opt;
};

/* Parses an IP packet (no link header). False when truncated, not TCP, a fragment,
 * with IPv6 extension headers, a data offset outside the segment, or options whose
 * lengths run past the header. IPv4 options are skipped. */
bool sp_tcpip_parse(const uint8_t *ip, size_t len, struct sp_tcpip *t);

/* True when the IPv4 header checksum and the TCP checksum of a packet that
 * sp_tcpip_parse() accepted are right (a CHECKSUM_PARTIAL field from this host is
 * accepted, as in udpip.h). */
bool sp_tcpip_checksums_ok(const uint8_t *ip, const struct sp_tcpip *t);

/* What one segment of a reply says. */
struct sp_tcp_segment {
    uint32_t seq, ack;
    uint8_t flags;
    uint16_t window;                 /* as sent */
    /* A SYN-ACK's options: the MSS always; window scale and SACK-permitted when the
     * peer offered them (set has_wscale, sack_permitted). NULL: no options. */
    const struct sp_tcp_options *syn;
};

/* Length of the IP and TCP headers sp_tcpip_write_reply() writes. */
size_t sp_tcpip_header_len(uint8_t family, const struct sp_tcp_segment *seg);

/* Writes the IP and TCP headers of seg, from to's destination back to its source,
 * in front of a payload of payload_len bytes (already at out + header length) whose
 * partial sum is payload_sum. Returns the header length. */
size_t sp_tcpip_write_reply(uint8_t *out, const struct sp_tcpip *to, const struct sp_tcp_segment *seg,
                            size_t payload_len, uint32_t payload_sum, uint8_t ttl);

/* The same headers for a segment (or a GSO frame, io.h's sp_gather) whose checksum
 * the kernel or the NIC finishes: the field holds the pseudo-header's sum over
 * payload_len, as a kernel leaves it under CHECKSUM_PARTIAL. */
size_t sp_tcpip_write_offload(uint8_t *out, const struct sp_tcpip *to, const struct sp_tcp_segment *seg,
                              size_t payload_len, uint8_t ttl);

#endif
