"""The query's UDP checksum on the frame paths. They check it from the sums the DNS parse
makes of the message on its way (sp_frame_parse_unchecked), and sum the datagram again
only where the parse did not (a compressed name, a message cut short). Every byte of a
datagram damaged must be caught, and the same damage with its checksum repaired must
not be, on every path: one frame at a time, in groups with prefetch stages, precopy.
scapy recomputes each checksum: the oracle is the kernel's rule, not the server's."""
import random
import socket
import struct

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether

from conftest import EXAMPLE_ZONE
from stormpy import _core
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone

CLIENT_MAC, SERVER_MAC = "02:00:00:00:00:02", "02:00:00:00:00:01"
OPT = b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00"               # 1232 bytes, no options
COOKIE = b"\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x0c\x00\x0a\x00\x08" + bytes(range(1, 9))


def wire_name(name):
    return b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"


IDS = random.Random(2026)


def message(name, qtype=1, counts=(1, 0, 0, 0), after=b"", flags=0x0100, question=None):
    head = struct.pack("!HH4H", IDS.randrange(65536), flags, *counts)
    q = question if question is not None else wire_name(name) + struct.pack("!HH", qtype, 1)
    return head + q + after


# Questions of odd and even length (what follows them lies at odd or even offsets),
# with nothing, an OPT or an OPT with a cookie after them; then the messages the parse
# leaves to the long way, and one it declines after its question.
PAYLOADS = [
    message("www.example.com"),
    message("ab.example.com"),
    message("www.example.com", after=OPT),
    message("ab.example.com", qtype=28, after=OPT),
    message("nothere.example.com", counts=(1, 0, 0, 1), after=COOKIE),
    message("a-rather-longer-label.and-another-one.example.com", counts=(1, 0, 0, 1), after=OPT),
    message("", question=b"\x03www\xc0\x0b\x00\x01\x00\x01"),      # compressed: the root in the header
    message("www.example.com", flags=0x8100),                      # a response: dropped
    message("www.example.com", counts=(0, 0, 0, 0)),               # no question: FORMERR
    message("", question=b"\x07example"),                          # cut short: FORMERR
    message("www.example.com") + b"\x01\x02\x03",                  # bytes after it: FORMERR
]


def frame(payload, family, vlan=None):
    l3 = (IP(src="198.18.0.2", dst="198.18.0.1") if family == 4
          else IPv6(src="2001:2::2", dst="2001:2::1"))
    eth = Ether(src=CLIENT_MAC, dst=SERVER_MAC)
    if vlan is not None:
        eth = eth / Dot1Q(vlan=vlan)
    return bytes(eth / l3 / UDP(sport=40000, dport=53) / payload)


def udp_start(f):
    pkt = Ether(f)
    return len(f) - len(bytes(pkt[UDP]))


def pseudo_sum(pkt):
    """The pseudo-header's sum alone, as a sender handing the NIC CHECKSUM_PARTIAL
    leaves it in the field."""
    l3 = pkt[IP] if IP in pkt else pkt[IPv6]
    udp_len = len(bytes(pkt[UDP]))
    if IP in pkt:
        words = bytes(map(int, (l3.src + "." + l3.dst).split(".")))
    else:
        words = socket.inet_pton(socket.AF_INET6, l3.src) + socket.inet_pton(socket.AF_INET6, l3.dst)
    total = sum(struct.unpack(f"!{len(words) // 2}H", words)) + 17 + udp_len
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return total


def kernel_accepts(f):
    pkt = Ether(f)
    sent = pkt[UDP].chksum
    if sent == 0:
        return IP in pkt
    if sent == pseudo_sum(pkt):
        return True
    del pkt[UDP].chksum
    return Ether(bytes(pkt))[UDP].chksum == sent


def repaired(f):
    pkt = Ether(f)
    del pkt[UDP].chksum
    return bytes(pkt)


def damaged_frames(seed):
    """Each payload in each family, VLAN tagged or not, with one bit flipped at every
    byte of its UDP datagram but the ports' and length's (which make it another port's,
    or no datagram): (frames the checksum gives away, the same repaired)."""
    rng = random.Random(seed)
    caught, repairs = [], []
    for payload in PAYLOADS:
        for family, vlan in ((4, None), (6, None), (4, 9), (6, 9)):
            good = frame(payload, family, vlan)
            assert kernel_accepts(good)
            start = udp_start(good)
            for at in range(start, len(good)):
                if at - start in (2, 3, 4, 5):
                    continue           # another port, or a length that no longer fits
                bad = bytearray(good)
                bad[at] ^= 1 << rng.randrange(8)
                bad = bytes(bad)
                if kernel_accepts(bad):
                    continue           # a field flipped to 0 ("none") or to the pseudo-header's sum
                caught.append(bad)
                repairs.append(repaired(bad))
    return caught, repairs


@pytest.fixture(scope="module")
def small():
    table, _ = compile_zones([load_zone(EXAMPLE_ZONE)])
    return _core.TableRef(table, 1)


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """An index past sp_table_worth_prefetching()'s 256 KB: frames answered in groups."""
    from stormpy.bench.workload import CompiledWorkload
    wl = CompiledWorkload(3000, 10, 20261121, str(tmp_path_factory.mktemp("large")))
    info = wl.table.info()
    assert info["slots"] * 8 + info["keys"] * 24 > 256 * 1024
    return wl.ref


PATHS = [("small", "memcpy", 1), ("small", "memcpy", 32), ("small", "precopy", 32),
         ("large", "memcpy", 32), ("large", "precopy", 5)]


@pytest.mark.parametrize("table,mode,batch", PATHS)
def test_every_damaged_byte_is_caught(request, table, mode, batch):
    ref = request.getfixturevalue(table)
    caught, repairs = damaged_frames(seed=batch)
    replies, c = _core.run_memory_worker(ref, caught, batch=batch, mode=mode, precopy_min=0)
    assert replies == [] and c["malformed"] == len(caught) > 1800
    replies, c = _core.run_memory_worker(ref, repairs, batch=batch, mode=mode, precopy_min=0)
    assert c["malformed"] == 0
    assert len(replies) > len(repairs) // 2           # most are still queries (or FORMERRs)
    # and with the NIC's word for the UDP checksum, nothing is summed at all
    replies, c = _core.run_memory_worker(ref, caught, batch=batch, mode=mode, precopy_min=0,
                                         l4_verified=True)
    assert c["malformed"] < len(caught) // 5          # the UDP and IP headers' own damage


@pytest.mark.parametrize("table,mode,batch", PATHS)
def test_checksum_partial_from_this_host_is_answered(request, table, mode, batch):
    """A veth peer on this host leaves the pseudo-header's sum in the field
    (CHECKSUM_PARTIAL): the kernel trusts it, and so does every path, for every kind
    of message, the long way's included."""
    ref = request.getfixturevalue(table)
    frames = []
    for payload in PAYLOADS:
        for family in (4, 6):
            pkt = Ether(frame(payload, family))
            pkt[UDP].chksum = pseudo_sum(pkt)
            frames.append(bytes(pkt))
    want, _ = _core.run_memory_worker(ref, [frame(p, fam) for p in PAYLOADS for fam in (4, 6)],
                                      batch=batch, mode=mode, precopy_min=0)
    replies, c = _core.run_memory_worker(ref, frames, batch=batch, mode=mode, precopy_min=0)
    assert c["malformed"] == 0
    assert len(replies) == len(want) >= 2 * (len(PAYLOADS) - 2)
