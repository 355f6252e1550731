"""Full frames for ring backends: scapy checks the checksums that the C core composes
incrementally from a response's stored sums (RFC 1624), without summing the payload."""
import random

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6

from stormpy import _core
from stormpy.dns.compiler import DNS_PATCHES


def table_with_one_response(payload):
    b = _core.TableBuilder()
    b.add_response(payload, DNS_PATCHES)
    b.add_key(1, b"k", 0)
    return b.finish()


@pytest.mark.parametrize("family", [4, 6])
def test_udp_checksum_from_incremental_sum(family):
    rng = random.Random(family)
    for round_ in range(200):
        stored = bytes(rng.randrange(256) for _ in range(12 + rng.randrange(300)))
        table = table_with_one_response(stored)
        message = bytes(rng.randrange(256) for _ in range(12 + rng.randrange(40)))
        question = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 260)))  # odd and even
        payload, psum = table.render(1, b"k", [message, question])
        assert payload[:2] == message[:2] and payload[12:12 + len(question)] == question

        ip = (IP(src="198.18.0.2", dst="198.18.0.1") if family == 4
              else IPv6(src="2001:2::2", dst="2001:2::1"))
        request = bytes(ip / UDP(sport=40000 + round_, dport=53) / message)
        frame = _core.udp_reply(request, payload, psum)
        parsed = IP(frame) if family == 4 else IPv6(frame)
        udp = parsed[UDP]
        assert (udp.sport, udp.dport) == (53, 40000 + round_)
        assert bytes(udp.payload) == payload
        sent = udp.chksum
        del udp.chksum
        if family == 4:
            del parsed.chksum
        rebuilt = (IP if family == 4 else IPv6)(bytes(parsed))
        assert rebuilt[UDP].chksum == sent, f"round {round_}: udp checksum"
        if family == 4:
            assert rebuilt.chksum == IP(frame).chksum
            assert (parsed.src, parsed.dst) == ("198.18.0.1", "198.18.0.2")


def test_non_udp_and_truncated_requests_are_refused():
    request = bytes(IP(src="198.18.0.2", dst="198.18.0.1") / UDP(sport=1, dport=53) / (b"x" * 20))
    assert _core.parse_udpip(request) == (4, 1, 53, 28, 20)
    for cut in range(len(request) - 20):
        assert _core.parse_udpip(request[:cut]) is None
    fragment = IP(src="198.18.0.2", dst="198.18.0.1", flags="MF") / UDP(sport=1, dport=53) / b"x"
    assert _core.parse_udpip(bytes(fragment)) is None
