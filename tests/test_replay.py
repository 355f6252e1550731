"""`stormpy replay`: a pcap through the fast path on the memory backend, replies
written as a pcap that scapy reads back."""
import subprocess
import sys

from scapy.layers.dns import DNS, DNSQR
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.utils import rdpcap, wrpcap, wrpcapng

from conftest import EXAMPLE_ZONE, REPO
from test_cli import assert_one_line_error

CLIENT, SERVER = "02:00:00:00:00:02", "02:00:00:00:00:01"


def stormpy(*args):
    return subprocess.run([sys.executable, "-m", "stormpy", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60)


def queries():
    eth = Ether(src=CLIENT, dst=SERVER)
    v4 = IP(src="198.18.0.2", dst="198.18.0.1")
    v6 = IPv6(src="2001:2::2", dst="2001:2::1")
    return [eth / v4 / UDP(sport=1000 + i, dport=53) / DNS(id=i, qd=DNSQR(qname=n, qtype=t))
            for i, (n, t) in enumerate([("www.example.com", "A"), ("nothere.example.com", "A"),
                                        ("example.org", "A"), ("www.example.com", "AAAA")])] + \
        [eth / v6 / UDP(sport=2000, dport=53) / DNS(id=99, qd=DNSQR(qname="www.example.com")),
         Ether(src=CLIENT, dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="198.18.0.1"),
         eth / v4 / UDP(sport=3000, dport=53) / b"\x00\x01"]          # too short for DNS


def test_replay_answers_a_capture_and_writes_replies(tmp_path):
    src, out = tmp_path / "in.pcapng", tmp_path / "out.pcap"
    wrpcapng(str(src), queries())                    # pcapng in, pcap out

    r = stormpy("replay", EXAMPLE_ZONE, "--pcap", str(src), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("7 frames: udp rx=7 tx=5 ") and "not_ours=1" in r.stdout, r.stdout
    replies = rdpcap(str(out))
    assert len(replies) == 5
    by_id = {p[DNS].id: p for p in replies}
    assert by_id[0][DNS].an[0].rdata == "192.0.2.80" and by_id[0][IP].dst == "198.18.0.2"
    assert by_id[1][DNS].rcode == 3 and by_id[2][DNS].rcode == 5
    assert by_id[99][IPv6].dst == "2001:2::2" and by_id[99][UDP].dport == 2000
    assert all(p[Ether].dst == CLIENT and p[UDP].sport == 53 for p in replies)


def test_replay_errors_are_one_line(tmp_path):
    assert_one_line_error(stormpy("replay", EXAMPLE_ZONE, "--pcap", str(tmp_path / "none.pcap")),
                          "none.pcap: no such file")
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture file at all")
    assert_one_line_error(stormpy("replay", EXAMPLE_ZONE, "--pcap", str(junk)), "not a pcap")
    raw = tmp_path / "raw.pcap"
    wrpcap(str(raw), [IP(dst="198.18.0.1") / UDP()])      # raw IP: link type 101, no Ethernet
    assert_one_line_error(stormpy("replay", EXAMPLE_ZONE, "--pcap", str(raw)), "not Ethernet")


def test_replay_precopy_copies_answers_from_the_minimum_length(tmp_path):
    """The example zone's answers are all shorter than the default minimum: copied only
    with --precopy-min-bytes 0, and the replies are memcpy mode's bytes either way."""
    src = tmp_path / "in.pcap"
    wrpcap(str(src), queries())
    outs = {}
    for name, extra in [("memcpy", []), ("default", ["--mode", "precopy"]),
                        ("all", ["--mode", "precopy", "--precopy-min-bytes", "0"])]:
        outs[name] = tmp_path / f"{name}.pcap"
        r = stormpy("replay", EXAMPLE_ZONE, "--pcap", str(src), "--out", str(outs[name]), *extra)
        assert r.returncode == 0, r.stderr
        if name == "default":
            assert "precopy hits=0 fills=0 " in r.stdout, r.stdout
        if name == "all":   # the four answers from the table; REFUSED is not one
            assert "precopy hits=0 fills=4 " in r.stdout, r.stdout
    replies = {name: sorted(bytes(p) for p in rdpcap(str(out))) for name, out in outs.items()}
    assert len(replies["memcpy"]) == 5
    assert replies["default"] == replies["memcpy"] == replies["all"]
    assert_one_line_error(stormpy("replay", EXAMPLE_ZONE, "--pcap", str(src),
                                  "--precopy-min-bytes", "0"), "--mode precopy")
