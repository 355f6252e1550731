"""Writes what the fuzz harnesses need into OUT: table.bin, a compiled zone (the
differential test's zones, compiled by stormpy), and seed corpora built from real
queries for those zones (dnspython writes the queries, scapy the frames).

    python make_inputs.py OUT
"""
import os
import random
import struct
import sys
import tempfile

import dns.edns
import dns.message
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.inet6 import ICMPv6EchoRequest, ICMPv6ND_NS, IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))
from support import signing  # noqa: E402
from stormpy.dns.compiler import compile_zones  # noqa: E402
from stormpy.dns.zone import load_zone  # noqa: E402
from stormpy.http.site import compile_site  # noqa: E402

ZONES = [("example.com.", "example.com.zone"), ("example.net.", "example.net.zone"),
         ("gen.example.", "gen.example.zone")]
TYPES = ["A", "AAAA", "MX", "TXT", "NS", "SOA", "CNAME", "DS", "ANY", "SRV", "PTR"]
MAC, PEER = "02:00:00:00:00:01", "02:00:00:00:00:02"


def queries(zones, rng):
    names = sorted({str(n.derelativize(z.origin)) for z in zones for n in z.zone.nodes} | {
                   "nothere.example.com.", "x.y.old.signed.example.", "q.x.wild.nsec.example.",
                   "zz.signed.example.", "q.x.wild.signed.example.", "a.b.old.nsec.example.",
                                                               "a.b.nowhere.example.net.",
                                                               "example.org."})
    out = []
    for name in names:
        for qtype in rng.sample(TYPES, 3):
            mixed = "".join(c.upper() if rng.random() < 0.5 else c for c in name)
            q = dns.message.make_query(mixed, qtype, want_dnssec=rng.random() < 0.3,
                                       use_edns=0 if rng.random() < 0.6 else None,
                                       payload=rng.choice([512, 1232, 4096]))
            q.id = rng.randrange(65536)
            out.append(q.to_wire())
    compressed = bytes.fromhex("abcd01000001000000000000") + b"\x03www\xc0\x10" + \
        b"\x07example\x03com\x00\x00\x01\x00\x01"
    return out + [compressed]


def frames(wires, rng):
    out = []
    for i, w in enumerate(wires):
        l3 = IP(src="198.18.0.2", dst="198.18.0.1") if i % 2 else IPv6(src="2001:2::2", dst="2001:2::1")
        eth = Ether(src=PEER, dst=MAC)
        if i % 5 == 0:
            eth = eth / Dot1Q(vlan=rng.randrange(1, 4095))
        out.append(bytes(eth / l3 / UDP(sport=rng.randrange(1024, 65536), dport=53) / w))
    eth = Ether(src=PEER, dst=MAC)
    out += [bytes(Ether(src=PEER, dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="198.18.0.1", psrc="198.18.0.2")),
            bytes(eth / IP(src="198.18.0.2", dst="198.18.0.1") / ICMP() / b"ping"),
            bytes(eth / IPv6(src="2001:2::2", dst="2001:2::1") / ICMPv6EchoRequest(data=b"ping")),
            bytes(Ether(src=PEER, dst="33:33:ff:00:00:01") /
                  IPv6(src="2001:2::2", dst="ff02::1:ff00:1") / ICMPv6ND_NS(tgt="2001:2::1"))]
    return out


RULES_PORT = 7000   # fuzz_rules.c serves this port


def rules_frames(rng):
    """Frames for fuzz_rules: the key-value responder's commands, short payloads,
    both families, a VLAN tag, and what is not UDP to its port."""
    payloads = [b"GET k\r\n", b"GET k", b"GET big\r\n", b"GET nothere\r\n", b"GET \r\n",
                b"ECHO x", b"ECHO hello\r\n", b"ECHO ", b"\x12\x34IDabcdef", b"\x12\x34ID",
                b"SLOW", b"DEL k\r\n", b"DEL nothere\r\n", b"G", b"", b"x" * 300]
    out = []
    for i, p in enumerate(payloads):
        l3 = IP(src="198.18.0.2", dst="198.18.0.1") if i % 2 == 0 else IPv6(src="2001:2::2", dst="2001:2::1")
        eth = Ether(src=PEER, dst=MAC)
        if i % 4 == 3:
            eth = eth / Dot1Q(vlan=rng.randrange(1, 4095))
        out.append(bytes(eth / l3 / UDP(sport=rng.randrange(1024, 65536), dport=RULES_PORT) / p))
    eth = Ether(src=PEER, dst=MAC)
    out += [bytes(eth / IP(src="198.18.0.2", dst="198.18.0.1") / UDP(sport=5000, dport=53) / b"GET k"),
            bytes(Ether(src=PEER, dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="198.18.0.1", psrc="198.18.0.2")),
            bytes(eth / IP(src="198.18.0.2", dst="198.18.0.1") / ICMP() / b"ping")]
    return out


def site_table(directory):
    """A small site with a file of every kind the answers distinguish."""
    files = {"index.html": b"<h1>home</h1>", "a.txt": b"0123456789" * 10, "empty.txt": b"",
             "docs/index.html": b"docs", "docs/big.bin": bytes(range(256)) * 300,
             "noindex/x.css": b"body{}", "with space.txt": b"space"}
    for name, data in files.items():
        path = os.path.join(directory, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.utime(path, (1_700_000_000, 1_700_000_000))
    table, _ = compile_site(directory, now=1_700_000_000)
    return table.flat_bytes()


HTTP_SEEDS = [
    b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=5-20\r\n\r\nGET /docs HTTP/1.0\r\n\r\n",
    b"HEAD /docs/big.bin HTTP/1.1\r\nHost: a\r\nRange: bytes=-100\r\nIf-Range: \"6553f100-12c00\"\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: a\r\nIf-None-Match: W/\"x\", \"6553f100-64\"\r\n\r\n",
    b"GET /a.txt HTTP/1.1\r\nHost: a\r\nIf-Modified-Since: Tue, 14 Nov 2023 22:13:20 GMT\r\n\r\n",
    b"GET /with%20space.txt?q=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    b"GET http://h/docs/./../a.txt HTTP/1.1\r\nHost: a\r\n\r\n",
    b"POST /a.txt HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /empty.txt HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    b"GET / HTTP/2.0\r\n\r\n",
    b"GET /docs?x=1 HTTP/1.1\r\nHost: a\r\n\r\nHEAD /noindex?a=%20b#f HTTP/1.1\r\nHost: a\r\n\r\n",
]


def tcp_segments():
    """SYNs with every option, data with SACK blocks, over IPv4 and IPv6."""
    from scapy.layers.inet import TCP
    opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None), ("WScale", 7)]
    out = []
    for ip in (IP(src="198.18.0.2", dst="198.18.0.1"), IPv6(src="2001:2::2", dst="2001:2::1")):
        out.append(bytes(ip / TCP(sport=40000, dport=80, flags="S", options=opts)))
        out.append(bytes(ip / TCP(sport=40000, dport=80, flags="PA", seq=7, ack=9,
                                  options=[("SAck", (1, 2, 3, 4))]) / HTTP_SEEDS[1]))
    return out


def ring_sack_steps():
    """fuzz_ring_sack: a flight, then duplicate ACKs with SACK blocks above a hole,
    the probe, more ACKs, a timeout (op % 5: send, ACK, timeout, probe, clock)."""
    def ack(offset, blocks):
        out = bytes([1]) + struct.pack("!I", 0xffff0000 | (offset + 0x1000)) + bytes([len(blocks)])
        return out + b"".join(struct.pack("!HH", (0x2000 + left) >> 2, size)
                              for left, size in blocks)
    flight = bytes([0])
    holes = ack(0, [(1460, 1460)]) + ack(0, [(1460, 2920)]) + ack(0, [(1460, 4380)])
    seeds = []
    for first in (b"\x01\x03", b"\x00\x03", b"\x01\x00"):
        seeds.append(first + flight + holes + flight + bytes([4, 3]) + flight + ack(2920, [])
                     + flight + bytes([2]) + flight + ack(14600, []))
    return seeds


def axfr_streams():
    """fuzz_axfr's inputs: an unsigned AXFR of a small zone for example. (query id
    0x1234) in one message and in three, each message length-prefixed as on TCP."""
    import dns.rrset
    soa = dns.rrset.from_text("example.", 300, "IN", "SOA", "ns.example. h.example. 7 1 2 3 4")
    body = [dns.rrset.from_text("example.", 300, "IN", "NS", "ns.example."),
            dns.rrset.from_text("ns.example.", 300, "IN", "A", "192.0.2.1"),
            dns.rrset.from_text("*.w.example.", 300, "IN", "MX", "10 ns.example."),
            dns.rrset.from_text("c.example.", 300, "IN", "CNAME", "ns.example.")]
    query = dns.message.make_query("example.", "AXFR")
    query.id = 0x1234

    def stream(parts):
        out = b""
        for part in parts:
            r = dns.message.make_response(query)
            r.answer = part
            wire = r.to_wire()
            out += struct.pack("!H", len(wire)) + wire
        return out
    return [b"\0" + stream([[soa, *body, soa]]),
            b"\0" + stream([[soa, body[0]], body[1:3], [body[3], soa]])]


def write(directory, items):
    os.makedirs(directory, exist_ok=True)
    for i, data in enumerate(items):
        with open(os.path.join(directory, f"seed-{i:04d}"), "wb") as f:
            f.write(data)


def signed_zones(directory):
    """tests/zones/signed.example.zone signed with NSEC3 (nsec3.c's hashing and
    splicing, DNAME), and again as nsec.example. with NSEC (the gap lists), when
    ldns-signzone is there (make deps-test installs it)."""
    if not signing.available():
        return []
    source = os.path.join(REPO, "tests", "zones", "signed.example.zone")
    renamed = os.path.join(directory, "nsec.example.zone")
    with open(source) as f, open(renamed, "w") as out:
        out.write(f.read().replace("signed.example.", "nsec.example."))
    return [load_zone(signing.sign_zone(source, "signed.example.", directory, nsec3=True)),
            load_zone(signing.sign_zone(renamed, "nsec.example.", directory, nsec3=False))]


def main(out):
    zones = [load_zone(os.path.join(REPO, "tests", "zones", f), origin) for origin, f in ZONES]
    keys = tempfile.TemporaryDirectory()
    zones += signed_zones(keys.name)
    table, _ = compile_zones(zones)
    os.makedirs(out, exist_ok=True)
    blob = table.flat_bytes()
    rng = random.Random(20261121)
    wires = queries(zones, rng)
    ether = frames(wires, rng)
    write(os.path.join(out, "seeds", "fuzz_dns"), wires)
    write(os.path.join(out, "seeds", "fuzz_frame"), ether)
    write(os.path.join(out, "seeds", "fuzz_udpip"),
          [f[18:] if f[12:14] == b"\x81\x00" else f[14:] for f in ether])
    rules = rules_frames(rng)
    write(os.path.join(out, "seeds", "fuzz_rules"), rules)
    write(os.path.join(out, "seeds", "fuzz_http"), HTTP_SEEDS)
    write(os.path.join(out, "seeds", "fuzz_tcpip"), tcp_segments())
    write(os.path.join(out, "seeds", "fuzz_ring_sack"), ring_sack_steps())
    # records as (owner, type, data) byte triples: a cut with glue, a wildcard, a CNAME loop
    write(os.path.join(out, "seeds", "fuzz_zone"), [bytes([0x40, 1, 0, 0x43, 1, 0, 0x40 | 1, 1, 0x43,
                                                           0x82, 0, 1, 0x42, 2, 0x81, 0x41, 2, 0x42])])
    write(os.path.join(out, "seeds", "fuzz_axfr"), axfr_streams())
    with tempfile.TemporaryDirectory() as site:
        with open(os.path.join(out, "site.bin"), "wb") as f:
            f.write(site_table(site))
    with open(os.path.join(out, "table.bin.tmp"), "wb") as f:   # last: make sees it only whole
        f.write(blob)
    os.replace(os.path.join(out, "table.bin.tmp"), os.path.join(out, "table.bin"))
    print(f"make_inputs: table.bin and {len(wires)} queries, {len(ether)} + {len(rules)} frames as seeds")


if __name__ == "__main__":
    main(sys.argv[1])
