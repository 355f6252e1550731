"""serve-dns end to end: dnspython queries over UDP and TCP against a running server."""
import random

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from conftest import EXAMPLE_ZONE
from support.client import tcp_many, udp

ZONES = [("example.com.", EXAMPLE_ZONE)]


@pytest.fixture(scope="module")
def server(stormpy_server):
    return stormpy_server(ZONES, workers=2)


def a_records(resp):
    return sorted(r.address for rrset in resp.answer if rrset.rdtype == dns.rdatatype.A for r in rrset)


def test_answers_a_record_over_udp(server):
    r = udp(dns.message.make_query("www.example.com", "A"), server.addr)
    assert r.rcode() == dns.rcode.NOERROR
    assert r.flags & dns.flags.AA and r.flags & dns.flags.QR
    assert a_records(r) == ["192.0.2.80"]


def test_question_comes_back_in_the_clients_case(server):
    name = "".join(random.choice((c.upper(), c.lower())) for c in "www.example.com")
    q = dns.message.make_query(name, "AAAA")
    r = udp(q, server.addr)
    assert r.id == q.id
    assert r.question[0].name.to_text(omit_final_dot=True) == name   # byte for byte
    assert str(r.answer[0][0]) == "2001:db8::80"


def test_cname_and_nxdomain_and_refused(server):
    r = udp(dns.message.make_query("ftp.example.com", "A"), server.addr)
    assert [rr.rdtype for rr in r.answer] == [dns.rdatatype.CNAME, dns.rdatatype.A]
    r = udp(dns.message.make_query("missing.example.com", "A"), server.addr)
    assert r.rcode() == dns.rcode.NXDOMAIN and r.authority[0].rdtype == dns.rdatatype.SOA
    r = udp(dns.message.make_query("www.example.org", "A"), server.addr)
    assert r.rcode() == dns.rcode.REFUSED and not r.answer


def test_generate_and_wildcard_records(server):
    assert a_records(udp(dns.message.make_query("h4.example.com", "A"), server.addr)) == ["192.0.2.4"]
    r = udp(dns.message.make_query("a.b.apps.example.com", "A"), server.addr)
    assert a_records(r) == ["192.0.2.100"]
    assert r.answer[0].name == dns.name.from_text("a.b.apps.example.com")


def test_tcp_several_queries_on_one_connection(server):
    names = ["www.example.com", "mail.example.com", "nope.example.com", "example.com"]
    qs = [dns.message.make_query(n, "A") for n in names]
    rs = tcp_many(qs, server.addr)
    assert [r.id for r in rs] == [q.id for q in qs]
    assert a_records(rs[0]) == ["192.0.2.80"]
    assert a_records(rs[1]) == ["192.0.2.25"]
    assert rs[2].rcode() == dns.rcode.NXDOMAIN
    assert a_records(rs[3]) == ["192.0.2.1"]


def test_udp_and_tcp_give_the_same_answer(server):
    q = dns.message.make_query("example.com", "MX", use_edns=0)
    over_udp = udp(q, server.addr)
    (over_tcp,) = tcp_many([q], server.addr)
    assert over_udp.answer == over_tcp.answer and over_udp.additional == over_tcp.additional


def test_a_response_with_qr_set_is_never_answered(server):
    q = dns.message.make_query("www.example.com", "A")
    q.flags |= dns.flags.QR
    assert udp(q, server.addr, timeout=0.5) is None
    # and the server still answers afterwards
    assert udp(dns.message.make_query("www.example.com", "A"), server.addr) is not None


def test_ipv6_listen(stormpy_server, tmp_path):
    import socket
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
    except OSError as e:
        pytest.skip(f"no IPv6 loopback on this machine: {e}")
    from support.process import free_port
    port = free_port()
    srv = stormpy_server(ZONES, ["--listen", f"[::1]:{port}"], workers=1)
    r = udp(dns.message.make_query("www.example.com", "AAAA"), ("::1", port))
    assert r is not None and str(r.answer[0][0]) == "2001:db8::80"
    (t,) = tcp_many([dns.message.make_query("www.example.com", "A")], ("::1", port))
    assert a_records(t) == ["192.0.2.80"]
    assert srv.proc.poll() is None


def test_cd_bit_is_copied(server):
    """RFC 4035 section 3.1.6: the CD bit of a query is copied into the response,
    on data, negative and error answers alike."""
    for name, rdclass in (("www.example.com", "IN"), ("gone.example.com", "IN"),
                          ("www.example.org", "IN"), ("version.bind", "CH")):
        for cd in (0, dns.flags.CD):
            q = dns.message.make_query(name, "TXT" if rdclass == "CH" else "A", rdclass=rdclass)
            q.flags |= cd
            r = udp(q, server.addr)
            assert r.flags & dns.flags.CD == cd, (name, cd)


def test_stats_reports_per_worker_counters(stormpy_server, tmp_path):
    import json
    import subprocess
    import sys
    control = str(tmp_path / "ctl.sock")
    srv = stormpy_server(ZONES, ["--control", control, "--chaos-identity", "stats"], workers=2)
    for i in range(20):
        assert udp(dns.message.make_query(f"h{i % 5 + 1}.example.com", "A"), srv.addr) is not None
    assert udp(dns.message.make_query("gone.example.com", "A"), srv.addr).rcode() == dns.rcode.NXDOMAIN
    r = subprocess.run([sys.executable, "-m", "stormpy", "stats", "--control", control, "--json"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)
    udp_workers = [w for w in snap["workers"] if w["kind"] == "frames"]
    assert len(udp_workers) == 2 and [w["kind"] for w in snap["workers"]][2:] == ["tcp"]
    assert sum(w["rx"] for w in udp_workers) >= 22      # the readiness probe asks too
    assert sum(w["rcode"][3] for w in snap["workers"]) == 1
    assert tcp_many([dns.message.make_query("h1.example.com", "A")], srv.addr)[0].answer
    text = subprocess.run([sys.executable, "-m", "stormpy", "stats", "--control", control],
                          capture_output=True, text=True, timeout=30).stdout
    assert "worker 0: rx=" in text and "worker 1: rx=" in text
    assert "worker 2: tcp queries=1 connections=1 " in text, text
