# Protocol helpers for the control plane and tests (included by _core.pyx): IP/UDP
# reply headers and checksums. See native/include/stormpy/proto/.

def udp_reply(const uint8_t[:] request_ip, const uint8_t[:] payload, uint32_t payload_sum,
              uint8_t ttl=64):
    """IP+UDP reply headers + payload for a received IP packet, the checksum taken
    from payload_sum (no pass over the payload). None if the request is not UDP."""
    cdef sp_udpip u
    cdef uint8_t hdr[48]
    cdef size_t n
    if not sp_udpip_parse(&request_ip[0], len(request_ip), &u):
        return None
    n = sp_udpip_write_reply(hdr, &u, len(payload), payload_sum, ttl)
    return PyBytes_FromStringAndSize(<char *>hdr, n) + bytes(payload)


def parse_udpip(const uint8_t[:] ip):
    """(family, sport, dport, payload offset, payload length) or None."""
    cdef sp_udpip u
    if len(ip) == 0 or not sp_udpip_parse(&ip[0], len(ip), &u):
        return None
    return u.family, u.sport, u.dport, u.payload_off, u.payload_len


def csum_partial(const uint8_t[:] data):
    return sp_csum_partial(&data[0] if len(data) else NULL, len(data), 0)
