"""`stormpy gen --backend packet|xdp`: the requests as whole frames. On the memory
backend, scapy reads every frame the generator wrote (addresses, ports, MACs, both
checksums) and the replies it is handed are matched; across a veth pair between two
namespaces, queries on AF_PACKET and AF_XDP are answered by serve-dns, and the counts
agree with its stats and its rcodes with what it answers a client."""
import json
import socket
import subprocess
import sys

import dns.message
import pytest
from scapy.all import DNS, DNSQR, IP, UDP, Ether, IPv6, raw

from stormpy import _core
from support.backends import RINGS
from support.netns import CLIENT_V4, CLIENT_V6, SERVER_V4, SERVER_V6, NsServer, VethPair
from test_cli import assert_one_line_error, stormpy

ZONE = "tests/zones/example.com.zone"
QUESTIONS = [["www.example.com", "A"], ["nope.example.com", "A"], ["example.org", "A"]]
CLIENT_MAC, SERVER_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"


@pytest.mark.parametrize("family, client, server, l3", [(4, CLIENT_V4, SERVER_V4, IP),
                                                        (6, CLIENT_V6, SERVER_V6, IPv6)])
def test_frames_written_and_replies_matched_on_the_memory_backend(family, client, server, l3):
    af = socket.AF_INET if family == 4 else socket.AF_INET6
    replies = [raw(Ether(src=SERVER_MAC, dst=CLIENT_MAC) / l3(src=server, dst=client) /
                   UDP(sport=53, dport=40000) /
                   DNS(id=i, qr=1, rcode=3 if i % 2 else 0, qd=DNSQR(qname="www.example.com.")))
               for i in range(64)]
    replies.insert(11, replies[10])                                # a duplicate
    ring = _core.GenRing.memory(replies)
    ring.path(socket.inet_pton(af, client), socket.inet_pton(af, server),
              bytes.fromhex(CLIENT_MAC.replace(":", "")), bytes.fromhex(SERVER_MAC.replace(":", "")),
              40000, 53)
    query = dns.message.make_query("www.example.com.", "A").to_wire()
    gen = _core.Generator("dns", None, [query], outstanding=32, count=64, batch=32,
                          timeout=0.2, ring=ring)
    gen.run()
    c = gen.counters()
    sent = ring.captured()
    ring.close()
    assert (c["sent"], c["received"], c["lost"]) == (64, 64, 0)
    assert c["codes"][0] == c["codes"][3] == 32 and c["unmatched"] == 1
    assert len(sent) == 64
    for i, frame in enumerate(sent):
        f = Ether(frame)
        assert (f.src, f.dst, f[l3].src, f[l3].dst) == (CLIENT_MAC, SERVER_MAC, client, server)
        assert (f[UDP].sport, f[UDP].dport, f[DNS].id, f[DNS].qr) == (40000, 53, i, 0)
        assert bytes(f[UDP].payload)[2:] == query[2:]
        again = f.copy()                   # scapy computes the checksums we should have
        del again[UDP].chksum
        if family == 4:
            del again[IP].chksum
            assert Ether(raw(again))[IP].chksum == f[IP].chksum
        assert Ether(raw(again))[UDP].chksum == f[UDP].chksum


@pytest.mark.parametrize("target", [f"{SERVER_V4}:53", f"[{SERVER_V6}]:53"])
@pytest.mark.parametrize("backend", RINGS)
def test_queries_on_the_rings_are_answered_and_counted(backend, target, tmp_path):
    control = str(tmp_path / "ctl.sock")
    queries = tmp_path / "queries.txt"
    queries.write_text("".join(f"{n} {t}\n" for n, t in QUESTIONS))
    with VethPair() as pair, NsServer(pair, [ZONE, "--listen", f"{SERVER_V4}:53", "--listen",
                                             f"[{SERVER_V6}]:53", "--control", control]):
        want = {}
        for answer in pair.query(QUESTIONS, server=target.rsplit(":", 1)[0].strip("[]")):
            name = {0: "NOERROR", 3: "NXDOMAIN", 5: "REFUSED"}[answer["rcode"]]
            want[name] = want.get(name, 0) + 1000
        before = _queries(control)
        r = pair.run(pair.client, sys.executable, "-m", "stormpy", "gen", "dns", target,
                     "--queries", str(queries), "--count", "3000", "--outstanding", "16",
                     "--backend", backend, "--timeout", "0.5", "--json")
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)
        answered = _queries(control) - before
        leftover = pair.run(pair.client, "ip", "-j", "link", "show", "veth0").stdout
    assert (report["sent"], report["received"], report["lost"]) == (3000, 3000, 0), report
    assert report["backend"] == backend and report["rcodes"] == want and answered == 3000
    assert '"xdp"' not in leftover                  # the generator's XDP program is gone


def _queries(control):
    r = subprocess.run([sys.executable, "-m", "stormpy", "stats", "--json", "--control", control],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return sum(w["queries"] for w in json.loads(r.stdout)["workers"])


@pytest.mark.parametrize("args, fragment", [
    (["http", "127.0.0.1:80", "--backend", "packet"], "--backend socket only"),
    (["echo", "127.0.0.1:7", "--backend", "packet"], "needs an Ethernet interface"),
    (["echo", "127.0.0.1:7", "--iface", "eth0"], "--iface is for --backend packet or xdp"),
    (["echo", "127.0.0.1:7", "--backend", "xdp", "--sockets", "2"], "sends from one port"),
])
def test_ring_arguments_are_one_line(args, fragment):
    assert_one_line_error(stormpy("gen", *args), fragment)
