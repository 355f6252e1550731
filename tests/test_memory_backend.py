"""Whole frames through the real worker loop on the memory backend: scapy builds the
queries and checks every reply frame (addresses, VLAN tag, IP and UDP checksums), and
the DNS payload must equal what the socket path answers for the same query."""
import random

import pytest
from scapy.layers.dns import DNS, DNSQR, DNSRROPT
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether

from conftest import EXAMPLE_ZONE
from stormpy import _core
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone

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
    replies, counters = _core.run_memory_worker(ref, frames)
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
    replies, c = _core.run_memory_worker(ref, others)
    assert replies == [] and c["not_ours"] == len(others) and c["queries"] == 0


def test_sources_that_must_never_be_answered(tables):
    ref, _ = tables
    bad = [query(mac="01:00:5e:00:00:01"),                 # multicast source MAC
           query(src="224.0.0.1"), query(src="255.255.255.255"), query(src="0.0.0.0"),
           query(dst="255.255.255.255"), query(sport=0),
           query(family=6, src="ff02::1"), query(family=6, src="::")]
    replies, c = _core.run_memory_worker(ref, bad)
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
    replies, c = _core.run_memory_worker(ref, frames)
    assert c["rx"] == len(frames)
    for rep in replies:
        r = Ether(rep)
        assert UDP in r and r[UDP].sport == 53 and checksums_valid(rep)
        assert r[DNS].qr == 1


def test_batches_and_rounds(tables):
    ref, _ = tables
    frames = [query(sport=1000 + i) for i in range(10)]
    replies, c = _core.run_memory_worker(ref, frames, batch=4, rounds=3)
    assert c["rx"] == 30 and c["tx"] == 30 and len(replies) == 30
    assert c["batches"] == 8                             # 7 full batches of 4, then 2
    assert c["batch_hist"][2] == 7 and c["batch_hist"][1] == 1


OWN = {"mac": bytes.fromhex("020000000001"), "ipv4": bytes([198, 18, 0, 1]),
       "ipv6": bytes.fromhex("20010002000000000000000000000001")}


def test_own_stack_answers_arp_icmp_and_ndp(tables):
    """With the interface owned (netmap), ARP, ping and IPv6 neighbor discovery for our
    addresses are ours to answer; scapy checks every reply."""
    from scapy.layers.inet6 import ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS, \
        ICMPv6NDOptDstLLAddr
    from scapy.layers.l2 import ARP
    from scapy.layers.inet import ICMP
    from scapy.packet import Raw
    ref, _ = tables
    client = Ether(src=CLIENT_MAC, dst=SERVER_MAC)
    frames = [
        bytes(Ether(src=CLIENT_MAC, dst="ff:ff:ff:ff:ff:ff") /
              ARP(op=1, hwsrc=CLIENT_MAC, psrc="198.18.0.2", pdst="198.18.0.1")),
        bytes(client / IP(src="198.18.0.2", dst="198.18.0.1", options=[]) / ICMP(type=8, id=7, seq=3) / b"ping!"),
        bytes(client / IPv6(src="2001:2::2", dst="2001:2::1") / ICMPv6EchoRequest(id=9, seq=1, data=b"hi")),
        bytes(Ether(src=CLIENT_MAC, dst="33:33:ff:00:00:01") /
              IPv6(src="2001:2::2", dst="ff02::1:ff00:1", hlim=255) / ICMPv6ND_NS(tgt="2001:2::1")),
        # not for us: other addresses, a DAD probe, an NS with the wrong hop limit
        bytes(Ether(src=CLIENT_MAC, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, psrc="198.18.0.2", pdst="198.18.0.9")),
        bytes(client / IP(src="198.18.0.2", dst="198.18.0.9") / ICMP(type=8)),
        bytes(Ether(src=CLIENT_MAC, dst="33:33:ff:00:00:01") /
              IPv6(src="::", dst="ff02::1:ff00:1", hlim=255) / ICMPv6ND_NS(tgt="2001:2::1")),
        bytes(Ether(src=CLIENT_MAC, dst="33:33:ff:00:00:01") /
              IPv6(src="2001:2::2", dst="ff02::1:ff00:1", hlim=64) / ICMPv6ND_NS(tgt="2001:2::1")),
    ]
    replies, c = _core.run_memory_worker(ref, frames, own=OWN)
    assert c["stack_replies"] == 4 and len(replies) == 4
    arp, ping, ping6, na = (Ether(r) for r in replies)
    assert arp[ARP].op == 2 and arp[ARP].hwsrc == "02:00:00:00:00:01" and arp[ARP].psrc == "198.18.0.1"
    assert arp[ARP].pdst == "198.18.0.2" and arp.dst == CLIENT_MAC
    assert ping[ICMP].type == 0 and (ping[ICMP].id, ping[ICMP].seq) == (7, 3)
    assert ping[Raw].load == b"ping!" and ping[IP].dst == "198.18.0.2"   # then Ethernet padding
    for pkt in (ping, ping6, na):
        again = Ether(bytes(pkt))
        layer = ICMP if ICMP in pkt else (ICMPv6EchoReply if ICMPv6EchoReply in pkt else ICMPv6ND_NA)
        field = "chksum" if layer is ICMP else "cksum"      # scapy's names differ
        sent = getattr(again[layer], field)
        delattr(again[layer], field)
        if IP in again:
            del again[IP].chksum
        assert getattr(Ether(bytes(again))[layer], field) == sent, layer.__name__
    assert ping6[ICMPv6EchoReply].id == 9 and ping6[IPv6].dst == "2001:2::2"
    assert na[ICMPv6ND_NA].tgt == "2001:2::1" and na[ICMPv6ND_NA].S == 1 and na[IPv6].hlim == 255
    assert na[ICMPv6NDOptDstLLAddr].lladdr == "02:00:00:00:00:01"
    # without own_stack, the same frames are the kernel's
    replies, c = _core.run_memory_worker(ref, frames)
    assert replies == [] and c["stack_replies"] == 0


def test_bad_checksums_are_dropped_as_the_kernel_would(tables):
    """Ring backends see frames before the kernel checks them: a bad IPv4 header or UDP
    checksum, or a zero UDP checksum over IPv6, gets no answer; a zero (absent) UDP
    checksum over IPv4 is fine. Unless the kernel vouched for the UDP checksum."""
    ref, _ = tables
    def with_udp_sum(family, value):
        pkt = Ether(query(family))
        pkt[UDP].chksum = value
        return bytes(pkt)
    good4, good6 = Ether(query(4)), Ether(query(6))
    bad_ip = Ether(query(4))
    bad_ip[IP].chksum = (good4[IP].chksum + 1) & 0xffff
    bad_udp4 = with_udp_sum(4, (good4[UDP].chksum ^ 0x0100) or 1)
    bad_udp6 = with_udp_sum(6, (good6[UDP].chksum ^ 0x0100) or 1)
    replies, c = _core.run_memory_worker(ref, [bytes(bad_ip), bad_udp4, bad_udp6, with_udp_sum(6, 0)])
    assert replies == [] and c["malformed"] == 4
    replies, c = _core.run_memory_worker(ref, [with_udp_sum(4, 0), bytes(good4), bytes(good6)])
    assert len(replies) == 3 and c["malformed"] == 0
    # A NIC that verified the UDP checksum (AF_PACKET's TP_STATUS_CSUM_VALID): the
    # datagram is not summed again, so the damaged sums pass; the IPv4 header and
    # IPv6's zero checksum are still checked.
    replies, c = _core.run_memory_worker(ref, [bad_udp4, bad_udp6], l4_verified=True)
    assert len(replies) == 2 and c["malformed"] == 0
    replies, c = _core.run_memory_worker(ref, [bytes(bad_ip), with_udp_sum(6, 0)], l4_verified=True)
    assert replies == [] and c["malformed"] == 2


def test_own_stack_never_answers_a_group_address(tables):
    """Found by fuzz_frame (native/fuzz/regressions/fuzz_frame): an ARP request whose
    sender hardware address is multicast got a reply to that group. Neither ARP nor
    ping from a group MAC is answered; a ping larger than the MTU is not echoed."""
    from scapy.layers.inet import ICMP
    from scapy.layers.l2 import ARP
    ref, _ = tables
    group = "5f:fc:00:00:00:01"
    frames = [bytes(Ether(src=CLIENT_MAC, dst="ff:ff:ff:ff:ff:ff") /
                    ARP(op=1, hwsrc=group, psrc="198.18.0.2", pdst="198.18.0.1")),
              bytes(Ether(src=group, dst="ff:ff:ff:ff:ff:ff") /
                    ARP(op=1, hwsrc=CLIENT_MAC, psrc="198.18.0.2", pdst="198.18.0.1")),
              bytes(Ether(src=group, dst=SERVER_MAC) / IP(src="198.18.0.2", dst="198.18.0.1") /
                    ICMP(type=8)),
              bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC) / IP(src="198.18.0.2", dst="198.18.0.1") /
                    ICMP(type=8) / (b"x" * 1600))]
    replies, c = _core.run_memory_worker(ref, frames, own=OWN, identity=dict(OWN, addresses=[OWN["ipv4"]], mtu=1500))
    assert replies == [] and c["stack_replies"] == 0
    ok, c = _core.run_memory_worker(ref, [bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC) /
                                  IP(src="198.18.0.2", dst="198.18.0.1") / ICMP(type=8) / (b"x" * 1400))],
                           own=OWN, identity=dict(OWN, addresses=[OWN["ipv4"]], mtu=1500))
    assert len(ok) == 1 and c["stack_replies"] == 1


def test_tx_flush_interval_batches_kicks(tables):
    """--tx-flush-us: under load one kick covers many batches; when the input runs dry
    the last replies are still kicked out."""
    ref, _ = tables
    frames = [query(sport=2000 + i) for i in range(64)]
    _, every = _core.run_memory_worker(ref, frames, batch=4, rounds=4)
    _, flushed = _core.run_memory_worker(ref, frames, batch=4, rounds=4, tx_flush_us=10_000_000)
    assert every["kicks"] == every["batches"] == 64
    assert flushed["tx"] == every["tx"] == 256
    assert flushed["kicks"] == 2      # the first batch, then once when RX ran dry


def raw_query(family, payload, sport):
    l3 = (IP(src="198.18.0.2", dst="198.18.0.1") if family == 4
          else IPv6(src="2001:2::2", dst="2001:2::1"))
    return bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC) / l3 / UDP(sport=sport, dport=53) / payload)


@pytest.mark.parametrize("family", [4, 6])
def test_every_kind_of_answer_has_right_checksums(tables, family):
    """The reply's UDP checksum is composed from the table's stored sums and the
    question's (summed while parsed), not summed over the reply: scapy recomputes it for
    answers with odd and even question lengths, with EDNS (OPT appended), without their
    additional section or truncated, from a wildcard, and for answers made on the spot."""
    ref, same = tables
    payloads = []
    for name, qtype in [("WwW.example.com", "A"), ("a.example.com", "A"), ("ab.example.com", "A"),
                        ("nothere.example.com", "AAAA"), ("x.y.apps.example.com", "A"),
                        ("big.example.com", "TXT"), ("huge.example.com", "TXT"),
                        ("example.com", "MX"), ("example.org", "A")]:
        payloads.append(bytes(DNS(id=7, rd=1, qd=DNSQR(qname=name, qtype=qtype))))
        for size, do in [(4096, 0), (600, 1)]:
            opt = DNSRROPT(rclass=size, z=0x8000 if do else 0)
            payloads.append(bytes(DNS(id=9, rd=1, qd=DNSQR(qname=name, qtype=qtype), ar=opt)))
    payloads.append(b"\x00\x08\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03www\xc0\x0b\x00\x01\x00\x01")
    payloads.append(b"\x00\x08\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03www")   # FORMERR
    payloads.append(b"\x00\x08\x11\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01")  # NOTIMP
    frames = [raw_query(family, p, 41000 + i) for i, p in enumerate(payloads)]
    replies, counters = _core.run_memory_worker(ref, frames)
    assert len(replies) == len(frames)
    for req, rep in zip(frames, replies):
        assert checksums_valid(rep), Ether(rep).summary()
        assert bytes(Ether(rep)[UDP].payload) == same.dns_answer(bytes(Ether(req)[UDP].payload))
