"""Run inside the client namespace: send the malformed corpus as raw frames to the
server across the veth and report every UDP reply from port 53, as JSON.

    ns_malformed.py IFACE SERVER_MAC SERVER_V4 SERVER_V6 CLIENT_V4 CLIENT_V6

Each case gets its own UDP source port, so a reply names the case it answers.
The DNS-level corpus is test_malformed.corpus(); the L2-L4 cases are built here."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from scapy.config import conf  # noqa: E402
from scapy.layers.dns import DNS, DNSQR  # noqa: E402
from scapy.layers.inet import IP, UDP, IPOption_NOP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.sendrecv import AsyncSniffer, sendp  # noqa: E402

from test_malformed import corpus  # noqa: E402

FIRST_PORT = 20000


def wait_for_quiet(seen, quiet=1.5, most=20.0):
    """Until no reply has been sniffed for `quiet` seconds (at most `most`): on a loaded
    host the sniffer, in Python, reads the last burst's replies well after they came."""
    deadline, last, since = time.monotonic() + most, -1, time.monotonic()
    while time.monotonic() < deadline:
        if seen[0] != last:
            last, since = seen[0], time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.1)


def l2l4_cases(eth, v4, v6, good):
    """(name, frame, expect): expect is "answer" (a good query, however wrapped) or
    "silence"."""
    def udp4(port, **ip):
        return eth / IP(src=v4[1], dst=v4[0], **ip) / UDP(sport=port, dport=53)
    cases = []
    add = cases.append
    add(("ip-options", lambda p: udp4(p, options=[IPOption_NOP()] * 4) / good, "answer"))
    add(("ipv6", lambda p: eth / IPv6(src=v6[1], dst=v6[0]) / UDP(sport=p, dport=53) / good, "answer"))
    add(("udp-checksum-absent", lambda p: _with(udp4(p) / good, UDP, chksum=0), "answer"))
    add(("bad-udp-checksum", lambda p: _with(udp4(p) / good, UDP, chksum=0x1234), "silence"))
    add(("bad-ip-checksum", lambda p: _with(udp4(p) / good, IP, chksum=0x1234), "silence"))
    add(("ipv6-no-udp-checksum", lambda p: _with(eth / IPv6(src=v6[1], dst=v6[0]) /
                                                 UDP(sport=p, dport=53) / good, UDP, chksum=0), "silence"))
    add(("ip-total-length-long", lambda p: _with(udp4(p) / good, IP, len=400), "silence"))
    add(("ip-total-length-short", lambda p: _with(udp4(p) / good, IP, len=24), "silence"))
    add(("ip-ihl-4", lambda p: _with(udp4(p) / good, IP, ihl=4), "silence"))
    add(("udp-length-long", lambda p: _with(udp4(p) / good, UDP, len=300), "silence"))
    add(("udp-length-short", lambda p: _with(udp4(p) / good, UDP, len=7), "silence"))
    add(("fragment-first", lambda p: udp4(p, flags="MF") / good, "silence"))
    add(("fragment-later", lambda p: udp4(p, frag=4) / good, "silence"))
    add(("source-port-0", lambda p: eth / IP(src=v4[1], dst=v4[0]) / UDP(sport=0, dport=53) /
         DNS(id=p, qd=DNSQR(qname="www.example.com")), "silence"))
    add(("source-broadcast", lambda p: eth / IP(src="255.255.255.255", dst=v4[0]) /
         UDP(sport=p, dport=53) / good, "silence"))
    add(("source-multicast", lambda p: eth / IP(src="224.0.0.5", dst=v4[0]) /
         UDP(sport=p, dport=53) / good, "silence"))
    add(("source-zero", lambda p: eth / IP(src="0.0.0.0", dst=v4[0]) / UDP(sport=p, dport=53) / good,
         "silence"))
    add(("ether-source-group", lambda p: _with(udp4(p) / good, Ether, src="01:00:5e:00:00:05"),
         "silence"))
    add(("ipv6-source-multicast", lambda p: eth / IPv6(src="ff02::1", dst=v6[0]) /
         UDP(sport=p, dport=53) / good, "silence"))
    for cut in (14, 20, 33, 41, 45, 50):
        add((f"truncated-frame-{cut}", lambda p, cut=cut: bytes(udp4(p) / good)[:cut], "silence"))
    return cases


def _with(pkt, layer, **fields):
    """pkt rebuilt, then the fields of one layer overwritten (lengths and sums stay wrong)."""
    pkt = pkt.__class__(bytes(pkt))
    for k, v in fields.items():
        setattr(pkt[layer], k, v)
    return pkt


def main():
    iface, server_mac, sv4, sv6, cv4, cv6 = sys.argv[1:7]
    conf.verb = 0
    eth = Ether(dst=server_mac)
    good = DNS(id=0x4242, rd=1, qd=DNSQR(qname="www.example.com", qtype="A"))
    dns_cases = corpus()
    l2 = l2l4_cases(eth, (sv4, cv4), (sv6, cv6), good)
    frames, meta = [], []
    for i, (name, data) in enumerate(dns_cases):
        if len(data) > 1400:      # one frame only: the socket test sends the oversized one
            continue
        frames.append(eth / IP(src=cv4, dst=sv4) / UDP(sport=FIRST_PORT + i, dport=53) / data)
        meta.append(("dns", i, name))
    for j, (name, build, expect) in enumerate(l2l4_cases(eth, (sv4, cv4), (sv6, cv6), good)):
        port = FIRST_PORT + len(dns_cases) + j
        built = build(port)
        frames.append(built if isinstance(built, bytes) else bytes(built))
        meta.append(("l2", j, name, expect, port))
    seen = [0]

    def count(_packet):
        seen[0] += 1

    sniffer = AsyncSniffer(iface=iface, store=True, prn=count,
                           lfilter=lambda p: UDP in p and p[UDP].sport == 53 and p[Ether].src == server_mac)
    sniffer.start()
    time.sleep(0.5)
    for start in range(0, len(frames), 200):          # bounded bursts the rings can hold
        sendp(frames[start:start + 200], iface=iface)
        time.sleep(0.05)
    wait_for_quiet(seen)
    replies = sniffer.stop()
    out = []
    for r in replies:
        l3 = r[IP] if IP in r else r[IPv6]
        out.append({"dport": r[UDP].dport, "dst_mac": r[Ether].dst, "dst_ip": l3.dst,
                    "payload": bytes(r[UDP].payload).hex()})
    json.dump({"meta": meta, "replies": out, "l2_names": [c[0] for c in l2]}, sys.stdout)


if __name__ == "__main__":
    main()
