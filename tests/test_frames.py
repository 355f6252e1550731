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


@pytest.mark.parametrize("family", [4, 6])
def test_udp_checksum_with_moved_pointers(family):
    """A variable answer's compression pointers move with the question (SHIFT patches):
    their change to the checksum is composed, not summed, at odd and even offsets, for
    questions longer and shorter than the stored one."""
    rng = random.Random(family + 10)
    for round_ in range(200):
        stored_question = rng.randrange(6, 40)
        stored = bytearray(rng.randrange(256) for _ in range(12 + rng.randrange(8, 200)))
        spots = sorted(rng.sample(range(12, len(stored) - 1, 2), 3))
        spots = [at + rng.randrange(2) for at in spots]   # some at odd offsets
        spots = [at for i, at in enumerate(spots) if i == 0 or at >= spots[i - 1] + 2]
        for at in spots:   # pointers with room for any question's length either way
            stored[at:at + 2] = (0xc000 | rng.randrange(300, 0x3e00)).to_bytes(2, "big")
        patches = DNS_PATCHES + tuple((_core.PATCH_SHIFT, 1, at, 0, stored_question, 0)
                                      for at in spots)
        b = _core.TableBuilder()
        b.add_response(bytes(stored), patches)
        b.add_key(1, b"k", 0)
        table = b.finish()
        message = bytes(rng.randrange(256) for _ in range(12 + rng.randrange(40)))
        question = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 260)))
        payload, psum = table.render(1, b"k", [message, question])
        moved = len(question) - stored_question
        for at in spots:
            want = 0xc000 | ((int.from_bytes(stored[at:at + 2], "big") + moved) & 0x3fff)
            assert int.from_bytes(payload[at + len(question):at + len(question) + 2], "big") == want
        ip = (IP(src="198.18.0.2", dst="198.18.0.1") if family == 4
              else IPv6(src="2001:2::2", dst="2001:2::1"))
        request = bytes(ip / UDP(sport=40000 + round_, dport=53) / message)
        parsed = (IP if family == 4 else IPv6)(_core.udp_reply(request, payload, psum))
        sent = parsed[UDP].chksum
        del parsed[UDP].chksum
        rebuilt = (IP if family == 4 else IPv6)(bytes(parsed))
        assert rebuilt[UDP].chksum == sent, f"round {round_}: udp checksum"


def test_non_udp_and_truncated_requests_are_refused():
    request = bytes(IP(src="198.18.0.2", dst="198.18.0.1") / UDP(sport=1, dport=53) / (b"x" * 20))
    assert _core.parse_udpip(request) == (4, 1, 53, 28, 20)
    for cut in range(len(request) - 20):
        assert _core.parse_udpip(request[:cut]) is None
    fragment = IP(src="198.18.0.2", dst="198.18.0.1", flags="MF") / UDP(sport=1, dport=53) / b"x"
    assert _core.parse_udpip(bytes(fragment)) is None
