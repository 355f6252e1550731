"""The IPv4/IPv6 + TCP parse/write pair (native/proto/tcpip.c), scapy as the oracle:
what scapy builds parses to the same fields, what stormpy writes scapy reads back with
the same fields and checksums it agrees with; damaged and truncated segments are
refused, every option length is checked."""
import random

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6

from stormpy import _core

C4, S4 = "198.18.0.2", "198.18.0.1"
C6, S6 = "2001:2::2", "2001:2::1"
OPTIONS = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (123456, 0)), ("NOP", None),
           ("WScale", 7)]


def segment(v6=False, **kw):
    ip = IPv6(src=C6, dst=S6) if v6 else IP(src=C4, dst=S4)
    payload = kw.pop("payload", b"")
    return bytes(ip / TCP(sport=40000, dport=80, **kw) / payload)


@pytest.mark.parametrize("v6", [False, True])
def test_a_syn_parses_with_its_options(v6):
    t = _core.parse_tcpip(segment(v6, flags="S", seq=1000, window=64240, options=OPTIONS))
    assert t["family"] == (6 if v6 else 4) and (t["sport"], t["dport"]) == (40000, 80)
    assert (t["seq"], t["flags"], t["window"]) == (1000, 0x02, 64240)
    assert (t["mss"], t["wscale"], t["sack_permitted"]) == (1460, 7, True)
    assert t["timestamps"] == (123456, 0) and t["checksums_ok"]
    assert t["payload_len"] == 0


def test_data_sack_blocks_and_payload():
    raw = segment(flags="PA", seq=5, ack=77, payload=b"GET / HTTP/1.1\r\n\r\n",
                  options=[("SAck", (100, 200, 300, 400)), ("NOP", None), ("NOP", None)])
    t = _core.parse_tcpip(raw)
    assert t["sack"] == [(100, 200), (300, 400)] and t["ack"] == 77
    assert raw[t["payload_off"]:t["payload_off"] + t["payload_len"]] == b"GET / HTTP/1.1\r\n\r\n"
    assert t["checksums_ok"]


def test_wscale_is_capped_at_14():
    assert _core.parse_tcpip(segment(flags="S", options=[("WScale", 20)]))["wscale"] == 14


def test_damage_is_seen():
    raw = bytearray(segment(flags="PA", payload=b"abcdef"))
    raw[-1] ^= 1
    assert _core.parse_tcpip(bytes(raw))["checksums_ok"] is False
    raw = bytearray(segment(flags="PA", payload=b"abcdef"))
    raw[8] ^= 1                          # the IPv4 TTL: the header checksum breaks
    assert _core.parse_tcpip(bytes(raw))["checksums_ok"] is False


def test_truncated_and_inconsistent_segments_are_refused():
    raw = segment(flags="S", options=OPTIONS)
    for cut in range(len(raw)):
        assert _core.parse_tcpip(raw[:cut]) is None, cut
    bad = bytearray(raw)
    bad[20 + 12] = 0x40                  # data offset 16 bytes: below the header
    assert _core.parse_tcpip(bytes(bad)) is None
    bad = bytearray(raw)
    bad[20 + 12] = 0xf0                  # 60 bytes: past the segment
    assert _core.parse_tcpip(bytes(bad)) is None
    bad = bytearray(raw)
    bad[20 + 20 + 1] = 40                # the MSS option says it is 40 bytes long
    assert _core.parse_tcpip(bytes(bad)) is None
    udp = bytearray(raw)
    udp[9] = 17
    assert _core.parse_tcpip(bytes(udp)) is None
    frag = bytearray(raw)
    frag[6] |= 0x20                      # more fragments
    assert _core.parse_tcpip(bytes(frag)) is None


def test_random_bytes_never_crash_and_options_stay_inside():
    rng = random.Random(7)
    base = segment(flags="S", options=OPTIONS)
    for _ in range(3000):
        raw = bytearray(base)
        for _ in range(rng.randint(1, 6)):
            raw[rng.randrange(20, len(raw))] = rng.randrange(256)
        t = _core.parse_tcpip(bytes(raw[:rng.randint(20, len(raw))]))
        if t is not None:
            assert t["payload_off"] + t["payload_len"] <= len(raw)


@pytest.mark.parametrize("v6", [False, True])
def test_a_syn_ack_scapy_reads_back(v6):
    syn = segment(v6, flags="S", seq=1000, options=OPTIONS)
    out = _core.tcp_reply(syn, seq=5000, ack=1001, flags=0x12, window=65535,
                          syn=dict(mss=1440, wscale=7, sack_permitted=True))
    pkt = IPv6(out) if v6 else IP(out)
    tcp = pkt[TCP]
    assert (pkt.src, pkt.dst) == ((S6, C6) if v6 else (S4, C4))
    assert (tcp.sport, tcp.dport, tcp.seq, tcp.ack, str(tcp.flags)) == (80, 40000, 5000, 1001, "SA")
    opts = dict((k, v) for k, v in tcp.options if k != "NOP")
    assert opts == {"MSS": 1440, "SAckOK": b"", "WScale": 7}
    assert_checksums(out, v6)


@pytest.mark.parametrize("v6", [False, True])
@pytest.mark.parametrize("size", [0, 1, 2, 3, 1399, 1460])
def test_data_segments_scapy_reads_back(v6, size):
    req = segment(v6, flags="A", seq=1, ack=1)
    payload = bytes(random.Random(size).randrange(256) for _ in range(size))
    out = _core.tcp_reply(req, seq=0xFFFFFFF0, ack=0x12345678, flags=0x18, window=1234,
                          payload=payload)
    pkt = IPv6(out) if v6 else IP(out)
    assert bytes(pkt[TCP].payload) == payload and pkt[TCP].window == 1234
    assert pkt[TCP].seq == 0xFFFFFFF0 and pkt[TCP].ack == 0x12345678
    assert_checksums(out, v6)
    t = _core.parse_tcpip(out)
    assert t["checksums_ok"] and t["payload_len"] == size


def assert_checksums(raw, v6):
    """scapy's own checksums, recomputed, equal the ones stormpy wrote."""
    pkt = IPv6(raw) if v6 else IP(raw)
    fresh = pkt.copy()
    del fresh[TCP].chksum
    if not v6:
        del fresh.chksum
        assert IP(bytes(fresh)).chksum == pkt.chksum
    assert (IPv6 if v6 else IP)(bytes(fresh))[TCP].chksum == pkt[TCP].chksum
