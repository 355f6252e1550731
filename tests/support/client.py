"""The tests' one DNS client: dnspython messages or raw bytes over UDP and TCP, with every
wait bounded; and the raw payload/line exchanges the responder tests use."""
from __future__ import annotations

import socket
import struct
import time
from typing import Optional, Tuple

import dns.message
import dns.query


def udp(msg, addr, timeout=2.0):
    """Send a dns.message (or raw bytes) over UDP; the parsed answer or None."""
    wire = msg if isinstance(msg, (bytes, bytearray)) else msg.to_wire()
    data = udp_query(bytes(wire), addr, timeout)
    return None if data is None else dns.message.from_wire(data)


def tcp_many(msgs, addr, timeout=3.0):
    """Several queries on one TCP connection, all written before reading (RFC 7766
    pipelining); the parsed answers in order."""
    deadline = time.monotonic() + timeout
    with socket.create_connection(addr, timeout=timeout) as s:
        for m in msgs:
            w = m.to_wire()
            s.sendall(struct.pack("!H", len(w)) + w)
        out = []
        for _ in msgs:
            head = _recv_exact(s, 2, deadline)
            body = head and _recv_exact(s, struct.unpack("!H", head)[0], deadline)
            if body is None:
                raise ConnectionError("server closed the connection")
            out.append(dns.message.from_wire(body))
        return out


def _recv_exact(s: socket.socket, n: int, deadline: float) -> Optional[bytes]:
    """n bytes from s, or None if it closes or the deadline passes first."""
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        s.settimeout(left)
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def udp_query(wire: bytes, addr: Tuple[str, int], timeout: float = 2.0) -> Optional[bytes]:
    """Send one UDP datagram, return the first reply whose ID matches (or None on timeout)."""
    s = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.settimeout(timeout)
        s.connect(addr)
        s.send(wire)
        deadline = time.monotonic() + timeout
        for _ in range(16):  # bounded: ignore stray datagrams with another ID
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            s.settimeout(left)
            try:
                data = s.recv(65535)
            except (socket.timeout, ConnectionRefusedError):
                return None
            if len(wire) < 2 or data[:2] == wire[:2]:
                return data
        return None
    finally:
        s.close()


def tcp_query(wire: bytes, addr: Tuple[str, int], timeout: float = 3.0) -> Optional[bytes]:
    """One query over a fresh TCP connection; None if the server closes/times out."""
    deadline = time.monotonic() + timeout
    try:
        s = socket.create_connection(addr, timeout=timeout)
    except OSError:
        return None
    try:
        s.sendall(struct.pack("!H", len(wire)) + wire)
        head = _recv_exact(s, 2, deadline)
        return head and _recv_exact(s, struct.unpack("!H", head)[0], deadline)
    except (socket.timeout, OSError):
        return None
    finally:
        s.close()


def probe_wire(qname: str = "version.bind.", qtype: str = "TXT", qclass: str = "CH") -> bytes:
    q = dns.message.make_query(qname, qtype, qclass)
    q.flags = 0
    return q.to_wire()


def summary(name: str, qtype: str, server: str, port: int, tcp: bool = False,
            payload: Optional[int] = None, timeout: float = 2.0) -> Optional[dict]:
    """Ask with dnspython; the answer as {rcode, aa, tc, answer, question} (JSON-able),
    or None when nothing came back. payload: an EDNS buffer size, if any."""
    q = dns.message.make_query(name, qtype, use_edns=0 if payload else None, payload=payload or 512)
    try:
        ask = dns.query.tcp if tcp else dns.query.udp
        r = ask(q, server, port=port, timeout=timeout)
    except Exception:
        return None
    return {"rcode": r.rcode(), "aa": bool(r.flags & 0x0400), "tc": bool(r.flags & 0x0200),
            "answer": sorted(str(rd) for rrset in r.answer for rd in rrset),
            "question": r.question[0].name.to_text()}


def udp_payloads(host, port, timeout, payloads):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    out = []
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        for p in payloads:
            s.sendto(bytes.fromhex(p), (host, port))
            try:
                while True:
                    data, peer = s.recvfrom(65535)
                    if peer[1] == port:
                        out.append(data.hex())
                        break
            except socket.timeout:
                out.append(None)
    return out


def tcp_lines(host, port, timeout, lines):
    out = []
    with socket.create_connection((host, port), timeout=timeout) as s:
        f = s.makefile("rwb")
        for line in lines:
            f.write(line.encode() + b"\n")
            f.flush()
            out.append(f.readline().decode().rstrip("\n"))
    return out
