"""Whole Ethernet + IPv4 + UDP frames for the memory backend. Frames are packed with struct: the benchmarks build hundreds of thousands,
and a packet library's per-frame cost would be most of a run."""
from __future__ import annotations

import struct

SERVER_MAC, CLIENT_MAC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
SERVER_V4, CLIENT_V4 = bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2])


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071); 0 over data that carries a correct one."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def source_port(i: int) -> int:
    """The client port of the i-th frame of a workload: one per frame, cycling."""
    return 1024 + i % 60000


def make_frame(payload: bytes, sport: int, dport: int = 53) -> bytes:
    """Ethernet + IPv4 + UDP around a payload, client to server, with correct checksums."""
    ulen = 8 + len(payload)
    pseudo = CLIENT_V4 + SERVER_V4 + struct.pack("!BBH", 0, 17, ulen)
    udp = struct.pack("!HHHH", sport, dport, ulen, 0) + payload
    ucs = checksum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", ucs) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0, 0x4000, 64, 17, 0, CLIENT_V4, SERVER_V4)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return SERVER_MAC + CLIENT_MAC + b"\x08\x00" + ip + udp


def udp_payload(frame: bytes) -> bytes:
    ihl = (frame[14] & 0x0F) * 4
    return frame[14 + ihl + 8:]


def check_reply(reply: bytes, query: bytes, expect) -> str | None:
    """None if `reply` is a correct UDP reply to the frame `query`, else why not. `expect`
    is the reply payload, or a function of (reply payload, query payload) -> reason."""
    if len(reply) < 42 or reply[12:14] != b"\x08\x00":
        return f"not an IPv4 frame ({len(reply)} bytes)"
    if reply[0:6] != query[6:12] or reply[6:12] != query[0:6]:
        return "MAC addresses not swapped"
    ihl = (reply[14] & 0x0F) * 4
    ip, udp = reply[14:14 + ihl], reply[14 + ihl:]
    if checksum(ip) != 0:
        return "bad IPv4 header checksum"
    if ip[9] != 17 or ip[12:16] != query[30:34] or ip[16:20] != query[26:30]:
        return "not UDP, or IP addresses not swapped"
    if struct.unpack("!H", ip[2:4])[0] != len(reply) - 14:
        return "IPv4 total length is not the frame's"
    sport, dport, ulen, ucs = struct.unpack("!HHHH", udp[:8])
    qsport, qdport = struct.unpack("!HH", query[34:38])
    if (sport, dport) != (qdport, qsport):
        return f"ports {sport}->{dport}, expected {qdport}->{qsport}"
    if ulen != len(udp):
        return "UDP length is not the frame's"
    if ucs == 0 or checksum(ip[12:20] + struct.pack("!BBH", 0, 17, ulen) + udp) != 0:
        return "bad UDP checksum"
    payload = udp[8:]
    if callable(expect):
        return expect(payload, query[42:])
    if payload != expect:
        return f"payload {payload[:40]!r}, expected {expect[:40]!r}"
    return None
