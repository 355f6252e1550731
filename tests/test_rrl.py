"""Response rate limiting: a flood from one prefix is held to the rate (every
slip-th limited answer truncated), while other sources and allow-listed ones are
answered. The memory backend and the socket backend here; a spoofed flood across
a veth in test_rings.py."""
import socket
import time

import dns.flags
import dns.message
import pytest
from scapy.layers.dns import DNS, DNSQR
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from conftest import EXAMPLE_ZONE
from stormpy import _core
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone
from test_cli import assert_one_line_error, stormpy

CLIENT_MAC, SERVER_MAC = "02:00:00:00:00:02", "02:00:00:00:00:01"


def ref_with_rrl(**kw):
    table, _ = compile_zones([load_zone(EXAMPLE_ZONE)])
    ref = _core.TableRef(table, 1)
    ref.set_rrl(**kw)
    return ref


def frame(src, i, name="www.example.com"):
    return bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC) / IP(src=src, dst="198.18.0.1") /
                 UDP(sport=1024 + i, dport=53) / DNS(id=i, rd=1, qd=DNSQR(qname=name)))


def split(replies):
    """(full answers, truncated answers) by destination address."""
    full, tc = {}, {}
    for r in replies:
        p = Ether(r)
        bucket = tc if p[DNS].tc else full
        bucket[p[IP].dst] = bucket.get(p[IP].dst, 0) + 1
    return full, tc


def test_flood_from_one_prefix_is_limited_and_others_are_not():
    ref = ref_with_rrl(rate=20, slip=2)
    flood = [frame(f"198.19.5.{i % 250 + 1}", i) for i in range(400)]      # one /24, spread
    normal = [frame("198.18.0.2", 1000 + i) for i in range(15)]
    frames = [f for pair in zip(flood[:15], normal) for f in pair] + flood[15:]
    start = time.monotonic()
    replies, c = _core.run_memory_worker(ref, frames)
    seconds = int(time.monotonic() - start) + 1                      # windows the run touched
    full, tc = split(replies)
    assert full.get("198.18.0.2") == 15                              # the normal client
    flooded = sum(n for dst, n in full.items() if dst.startswith("198.19.5."))
    assert 20 <= flooded <= 20 * (seconds + 1)
    slipped = sum(tc.values())
    limited = 400 - flooded
    assert c["rrl_slipped"] == slipped and abs(slipped - limited / 2) <= 1
    assert c["rrl_dropped"] == limited - slipped
    # a slip is header and question only, TC set, so a real client retries over TCP
    p = Ether(next(r for r in replies if Ether(r)[DNS].tc))
    assert p[DNS].ancount == 0 and p[DNS].nscount == 0 and p[DNS].qd[0].qname == b"www.example.com."


def test_kinds_are_counted_apart_and_the_allow_list_is_never_limited():
    ref = ref_with_rrl(rate=5, slip=0, allow=[(4, bytes([198, 19, 7, 0]), 24)])
    www = [frame("198.19.5.1", i) for i in range(30)]
    nx = [frame("198.19.5.1", 100 + i, f"n{i}.example.com") for i in range(30)]    # NXDOMAIN
    allowed = [frame("198.19.7.9", 200 + i) for i in range(30)]
    replies, c = _core.run_memory_worker(ref, www + nx + allowed)
    full, tc = split(replies)
    assert tc == {} and full["198.19.7.9"] == 30
    assert 10 <= full["198.19.5.1"] <= 20       # 5 (or 10 across a second) per kind
    assert c["rrl_dropped"] == 60 - full["198.19.5.1"]


def test_socket_backend_limits_one_source_but_not_another(stormpy_server):
    srv = stormpy_server([("example.com.", EXAMPLE_ZONE)],
                         ["--rrl-rate", "10", "--rrl-slip", "0", "--rrl-ipv4-prefix", "32"], workers=1)
    def ask(source, count):
        answered = 0
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((source, 0))
            s.settimeout(0.3)
            for i in range(count):
                q = dns.message.make_query("www.example.com", "A")
                s.sendto(q.to_wire(), srv.addr)
            try:
                while True:
                    r = dns.message.from_wire(s.recv(4096))
                    answered += not r.flags & dns.flags.TC
            except socket.timeout:
                pass
        return answered
    start = time.monotonic()
    flood = ask("127.0.0.1", 200)
    seconds = int(time.monotonic() - start) + 1
    assert 10 <= flood <= 10 * (seconds + 1), flood
    assert ask("127.0.0.3", 5) == 5               # another /32: its own bucket


def test_rrl_options_are_checked():
    assert_one_line_error(stormpy("serve-dns", EXAMPLE_ZONE, "--rrl-rate", "5", "--rrl-allow", "x/8"),
                          "--rrl-allow x/8")
    r = stormpy("serve-dns", EXAMPLE_ZONE, "--rrl-ipv4-prefix", "33")
    assert r.returncode == 2 and "at most 32 bits" in r.stderr


def test_the_counters_line_names_what_rate_limiting_held_back():
    from stormpy.counters import format_counters
    base = dict(rx=10, tx=4, dropped=0, truncated=0, tcp_queries=0, rcode=[4] + [0] * 16)
    assert "rrl" not in format_counters(base)
    line = format_counters(dict(base, rrl_dropped=5, rrl_slipped=1))
    assert "dropped=0" in line and "rrl_dropped=5 rrl_slipped=1" in line
