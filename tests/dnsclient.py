"""Small dnspython helpers for the end-to-end tests."""
import socket
import struct

import dns.message
import dns.query


def udp(msg, addr, timeout=2.0):
    """Send a dns.message (or raw bytes) over UDP; the parsed answer or None."""
    wire = msg if isinstance(msg, (bytes, bytearray)) else msg.to_wire()
    family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(wire, addr)
        try:
            data, _ = s.recvfrom(65535)
        except socket.timeout:
            return None
    return dns.message.from_wire(data)


def tcp_many(msgs, addr, timeout=3.0):
    """Several queries on one TCP connection, all written before reading (RFC 7766
    pipelining); the parsed answers in order."""
    with socket.create_connection(addr, timeout=timeout) as s:
        for m in msgs:
            w = m.to_wire()
            s.sendall(struct.pack("!H", len(w)) + w)
        out = []
        for _ in msgs:
            (n,) = struct.unpack("!H", _recv(s, 2))
            out.append(dns.message.from_wire(_recv(s, n)))
        return out


def _recv(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    return buf
