"""Whole frames through the real worker loop on the memory backend: scapy builds the
queries and checks every reply frame (addresses, VLAN tag, IP and UDP checksums), and
the DNS payload must equal what the socket path answers for the same query."""
import random

import pytest
from scapy.layers.dns import DNS, DNSQR
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether

from conftest import EXAMPLE_ZONE
from stormpy import _core
from stormpy.dnscompile import compile_zones
from stormpy.zone import load_zone

CLIENT_MAC, SERVER_MAC = "02:00:00:00:00:02", "02:00:00:00:00:01"


@pytest.fixture(scope="module")
def tables():
    table, _ = compile_zones([load_zone(EXAMPLE_ZONE)])
    same, _ = compile_zones([load_zone(EXAMPLE_ZONE)])
    return _core.TableRef(table, 1), same


def query(family=4, vlan=None, name="www.example.com", qtype="A", sport=40000, dport=53, **ip):
    l3 = (IP(src=ip.get("src", "198.18.0.2"), dst=ip.get("dst", "198.18.0.1")) if family == 4
          else IPv6(src=ip.get("src", "2001:2::2"), dst=ip.get("dst", "2001:2::1")))
    eth = Ether(src=ip.get("mac", CLIENT_MAC), dst=SERVER_MAC)
    if vlan is not None:
        eth = eth / Dot1Q(vlan=vlan)
    return bytes(eth / l3 / UDP(sport=sport, dport=dport) /
                 DNS(id=random.randrange(65536), rd=1, qd=DNSQR(qname=name, qtype=qtype)))


def checksums_valid(frame):
    pkt = Ether(frame)
    l3 = pkt[IP] if IP in pkt else pkt[IPv6]
    sent_udp = pkt[UDP].chksum
    del pkt[UDP].chksum
    if IP in pkt:
        sent_ip = pkt[IP].chksum
        del pkt[IP].chksum
    again = Ether(bytes(pkt))
    ok = again[UDP].chksum == sent_udp
    if IP in pkt:
        ok = ok and again[IP].chksum == sent_ip
    return ok and l3 is not None


@pytest.mark.parametrize("family,vlan", [(4, None), (6, None), (4, 7), (6, 4094)])
def test_reply_frames(tables, family, vlan):
    ref, same = tables
    frames = [query(family, vlan, name, qtype, sport=40000 + i)
              for i, (name, qtype) in enumerate([("WwW.example.com", "A"), ("example.com", "MX"),
                                                  ("nothere.example.com", "AAAA"),
                                                  ("a.b.apps.example.com", "A"),
                                                  ("host.lab.example.com", "A"),
                                                  ("example.org", "A")])]
    replies, counters = ref.run_frames(frames)
    assert len(replies) == len(frames) and counters["tx"] == len(frames)
    for req, rep in zip(frames, replies):
        q, r = Ether(req), Ether(rep)
        assert (r.src, r.dst) == (q.dst, q.src)
        assert (Dot1Q in r) == (vlan is not None) and (vlan is None or r[Dot1Q].vlan == vlan)
        l3q, l3r = (q[IP], r[IP]) if family == 4 else (q[IPv6], r[IPv6])
        assert (l3r.src, l3r.dst) == (l3q.dst, l3q.src)
        assert (r[UDP].sport, r[UDP].dport) == (53, q[UDP].sport)
        assert checksums_valid(rep)
        # the frame path answers exactly what the socket path answers
        assert bytes(r[UDP].payload) == same.dns_answer(bytes(q[UDP].payload))


def test_frames_that_are_not_ours_get_no_reply(tables):
    ref, _ = tables
    eth = Ether(src=CLIENT_MAC, dst=SERVER_MAC)
    others = [bytes(Ether(src=CLIENT_MAC, dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="198.18.0.1")),
              bytes(eth / IP(src="198.18.0.2", dst="198.18.0.1") / ICMP()),
              bytes(eth / IP(src="198.18.0.2", dst="198.18.0.1") / TCP(sport=1, dport=53)),
              query(dport=5353),
              bytes(eth / IP(src="198.18.0.2", dst="198.18.0.1", flags="MF") / UDP(sport=1, dport=53) / (b"x" * 20))]
    replies, c = ref.run_frames(others)
    assert replies == [] and c["not_ours"] == len(others) and c["queries"] == 0


def test_sources_that_must_never_be_answered(tables):
    ref, _ = tables
    bad = [query(mac="01:00:5e:00:00:01"),                 # multicast source MAC
           query(src="224.0.0.1"), query(src="255.255.255.255"), query(src="0.0.0.0"),
           query(dst="255.255.255.255"), query(sport=0),
           query(family=6, src="ff02::1"), query(family=6, src="::")]
    replies, c = ref.run_frames(bad)
    assert replies == [] and c["bad_source"] == len(bad)


def test_truncated_and_random_frames(tables):
    ref, _ = tables
    good = query()
    rng = random.Random(3)
    frames = [good[:n] for n in range(len(good))]
    frames += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))) for _ in range(500)]
    for _ in range(500):                                 # damage inside a valid frame
        f = bytearray(query(family=rng.choice([4, 6]), vlan=rng.choice([None, 3])))
        f[rng.randrange(14, len(f))] ^= 1 << rng.randrange(8)
        frames.append(bytes(f))
    replies, c = ref.run_frames(frames)
    assert c["rx"] == len(frames)
    for rep in replies:
        r = Ether(rep)
        assert UDP in r and r[UDP].sport == 53 and checksums_valid(rep)
        assert r[DNS].qr == 1


def test_batches_and_rounds(tables):
    ref, _ = tables
    frames = [query(sport=1000 + i) for i in range(10)]
    replies, c = ref.run_frames(frames, batch=4, rounds=3)
    assert c["rx"] == 30 and c["tx"] == 30 and len(replies) == 30
    assert c["batches"] == 8                             # 7 full batches of 4, then 2
    assert c["batch_hist"][2] == 7 and c["batch_hist"][1] == 1
