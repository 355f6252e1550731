# Protocol helpers for the control plane and tests (included by _core.pyx): IP/UDP
# and IP/TCP reply headers and checksums. See native/include/stormpy/proto/.

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


def csum_prefix(const uint8_t[:] data, size_t stride):
    """data's prefix sums, one per stride bytes (csum.h sp_csum_prefix), as the bytes of
    a host-order uint16 array."""
    if stride == 0 or stride % 2:
        raise ValueError("stride must be even")
    cdef size_t n = len(data)
    out = bytearray(2 * ((n + stride - 1) // stride + 1))
    cdef uint8_t[:] view = out
    with nogil:
        sp_csum_prefix(&data[0] if n else NULL, n, stride, <uint16_t *>&view[0])
    return bytes(out)


def parse_tcpip(const uint8_t[:] ip):
    """A TCP segment's fields as a dict (checksums_ok included), or None."""
    cdef sp_tcpip t
    if len(ip) == 0 or not sp_tcpip_parse(&ip[0], len(ip), &t):
        return None
    o = t.opt
    return dict(family=t.family, sport=t.sport, dport=t.dport, seq=t.seq, ack=t.ack,
                flags=t.flags, window=t.window, payload_off=t.payload_off,
                payload_len=t.payload_len, checksums_ok=sp_tcpip_checksums_ok(&ip[0], &t),
                mss=o.mss if o.has_mss else None, wscale=o.wscale if o.has_wscale else None,
                sack_permitted=o.sack_permitted,
                timestamps=(o.ts_val, o.ts_ecr) if o.has_timestamps else None,
                sack=[(o.sack[i][0], o.sack[i][1]) for i in range(o.nsack)])


def tcp_reply(const uint8_t[:] request_ip, uint32_t seq, uint32_t ack, uint8_t flags,
              uint16_t window, const uint8_t[:] payload=b"", syn=None, uint8_t ttl=64):
    """IP+TCP headers of a segment back to the sender of request_ip, then payload; the
    checksum from the payload's partial sum. syn: dict(mss=, wscale=, sack_permitted=)
    for a SYN-ACK's options. None if the request is not TCP."""
    cdef sp_tcpip t
    cdef sp_tcp_segment seg
    cdef sp_tcp_options o
    cdef uint8_t hdr[96]
    cdef size_t n
    if len(request_ip) == 0 or not sp_tcpip_parse(&request_ip[0], len(request_ip), &t):
        return None
    memset(&seg, 0, sizeof(seg))
    memset(&o, 0, sizeof(o))
    seg.seq, seg.ack, seg.flags, seg.window = seq, ack, flags, window
    if syn is not None:
        o.has_mss, o.mss = True, syn["mss"]
        o.has_wscale = syn.get("wscale") is not None
        o.wscale = syn.get("wscale") or 0
        o.sack_permitted = bool(syn.get("sack_permitted"))
        seg.syn = &o
    payload_sum = sp_csum_partial(&payload[0] if len(payload) else NULL, len(payload), 0)
    n = sp_tcpip_write_reply(hdr, &t, &seg, len(payload), payload_sum, ttl)
    return PyBytes_FromStringAndSize(<char *>hdr, n) + bytes(payload)
