"""`stormpy gen`: counts against what servers say they answered (stormpy's stats, Knot's
and stormpy's rcodes asked with dnspython, a test echo server's own count), loss when
nobody answers, latency against a known delay and a per-query timing taken here, the
open loop's rate, HTTP status classes, and one-line errors."""
import heapq
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import dns.message
import dns.query
import pytest

from stormpy import _core
from support.http import HttpServerProcess
from support.netns import why_no_netns
from support.process import REPO_ROOT, free_port
from support.servers import StormpyServer
from test_cli import assert_one_line_error, stormpy

ZONE = ("example.com.", os.path.join(REPO_ROOT, "tests", "zones", "example.com.zone"))
QUERIES = [("www.example.com.", "A"), ("example.com.", "MX"), ("nope.example.com.", "A"),
           ("example.com.", "TXT"), ("example.org.", "A")]      # answered, NXDOMAIN, REFUSED
RCODE_NAMES = {0: "NOERROR", 3: "NXDOMAIN", 5: "REFUSED"}
SO_RCVBUFFORCE = 33          # Linux's; Python's socket module does not name it


@pytest.fixture
def query_file(tmp_path):
    path = tmp_path / "queries.txt"
    path.write_text("; dnsperf's format\n\n" + "".join(f"{n} {t}\n" for n, t in QUERIES))
    return str(path)


def gen(*args, timeout=60):
    """`stormpy gen ... --json`: the report, parsed."""
    r = stormpy("gen", *args, "--json", timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def expected_rcodes(addr, rounds):
    """Each query's rcode as the server itself gives it (dnspython), times `rounds`."""
    counts = {}
    for name, rdtype in QUERIES:
        rcode = dns.query.udp(dns.message.make_query(name, rdtype), addr[0], port=addr[1],
                              timeout=2).rcode()
        counts[RCODE_NAMES[rcode]] = counts.get(RCODE_NAMES[rcode], 0) + rounds
    return counts


def assert_consistent(report):
    lat = report["latency_ns"]
    assert report["sent"] == report["received"] + report["lost"]
    assert lat["count"] == report["received"]
    if lat["count"]:
        assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99_9"] <= lat["max"]


class EchoServer:
    """A UDP echo server in a thread that counts what it received; it may drop every
    Nth datagram and hold every reply `delay` seconds."""

    def __init__(self, drop_every=0, delay=0.0):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:          # its count is the truth: a thread held up must not lose datagrams
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.001 if delay else 0.05)
        self.addr = self.sock.getsockname()
        self.drop_every, self.delay = drop_every, delay
        self.received = self.answered = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self):
        held = []                       # (due, order, data, peer)
        while not self.stopping.is_set():
            try:
                data, peer = self.sock.recvfrom(4096)
                self.received += 1
                if not (self.drop_every and self.received % self.drop_every == 0):
                    heapq.heappush(held, (time.monotonic() + self.delay, self.received, data, peer))
            except socket.timeout:
                pass
            while held and held[0][0] <= time.monotonic():
                _, _, data, peer = heapq.heappop(held)
                self.sock.sendto(data, peer)
                self.answered += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join(timeout=5)
        self.sock.close()

    @property
    def target(self):
        return f"{self.addr[0]}:{self.addr[1]}"


def test_histogram_percentiles_are_exact_ranks_within_a_thousandth():
    rng = random.Random(13)
    values = [int(rng.lognormvariate(11, 1.5)) for _ in range(20000)] + list(range(2048))
    h = _core.Histogram()
    h.record(values)
    ranked = sorted(values)
    for pct in (1, 50, 90, 99, 99.9, 99.99, 100):
        exact = ranked[max(1, math.ceil(pct / 100 * len(ranked))) - 1]   # nearest rank
        got = h.percentile(pct)
        assert exact <= got <= exact + exact / 1024, (pct, exact, got)
    s = h.summary()
    assert (s["count"], s["min"], s["max"]) == (len(values), ranked[0], ranked[-1])
    small = _core.Histogram()
    small.record([5, 7, 2047])
    assert [small.percentile(p) for p in (33, 66, 100)] == [5, 7, 2047]    # exact below 2048


def test_dns_counts_match_stormpy_stats(query_file, tmp_path):
    control = str(tmp_path / "ctl.sock")
    with StormpyServer([ZONE], extra_args=["--control", control]) as server:
        def answered():
            snap = json.loads(stormpy("stats", "--control", control, "--json").stdout)
            return (sum(w["queries"] for w in snap["workers"]),
                    [sum(w["rcode"][i] for w in snap["workers"]) for i in range(6)])

        want = expected_rcodes(server.addr, 4000 // len(QUERIES))
        queries_before, rcodes_before = answered()
        r = gen("dns", f"127.0.0.1:{server.port}", "--queries", query_file, "--count", "4000",
                "--outstanding", "32", "--sockets", "4")
        queries_after, rcodes_after = answered()
    assert (r["sent"], r["received"], r["lost"]) == (4000, 4000, 0)
    assert queries_after - queries_before == 4000
    assert r["rcodes"] == want
    assert {RCODE_NAMES[i]: a - b for i, (a, b) in enumerate(zip(rcodes_after, rcodes_before))
            if a - b} == want
    assert r["loop"] == "closed" and r["latency_from"] == "send time"
    assert_consistent(r)


def test_dns_against_knot(knot_server, query_file):
    knot = knot_server([ZONE])
    r = gen("dns", f"127.0.0.1:{knot.port}", "--queries", query_file, "--count", "2000",
            "--outstanding", "16")
    assert (r["sent"], r["received"], r["lost"]) == (2000, 2000, 0)
    assert r["rcodes"] == expected_rcodes(knot.addr, 2000 // len(QUERIES))
    assert r["unmatched"] == r["late"] == 0
    assert_consistent(r)


def test_loss_counted_when_the_server_stops_mid_run(query_file):
    server = StormpyServer([ZONE]).start()
    try:
        cmd = [sys.executable, "-m", "stormpy", "gen", "dns", f"127.0.0.1:{server.port}",
               "--queries", query_file, "--rate", "2000", "--seconds", "3", "--timeout", "0.5",
               "--json"]
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        time.sleep(1.5)
        server.stop()
        out, err = proc.communicate(timeout=30)
    finally:
        server.cleanup()
    assert proc.returncode == 0, err
    r = json.loads(out)
    # sending lasts 3 s from whenever gen started, so at least 1.5 s of it (3,000
    # queries) went to a server that had stopped
    assert r["received"] > 0 and r["lost"] >= 2500, r
    assert_consistent(r)


def test_queries_to_a_port_nobody_listens_on_are_lost(query_file):
    r = gen("dns", f"127.0.0.1:{free_port()}", "--queries", query_file, "--count", "50",
            "--outstanding", "10", "--timeout", "0.2")
    assert (r["sent"], r["received"], r["lost"]) == (50, 0, 50)
    assert r["refused"] > 0                   # the kernel's ICMP port unreachable, seen
    assert r["latency_ns"]["count"] == 0
    assert_consistent(r)


def test_every_other_datagram_dropped_is_half_lost():
    with EchoServer(drop_every=2) as echo:
        r = gen("echo", echo.target, "--rate", "2000", "--count", "1000", "--timeout", "0.3")
    assert (r["sent"], r["received"], r["lost"]) == (1000, 500, 500)
    assert echo.received == 1000 and echo.answered == 500
    assert r["lost_pct"] == 50.0
    assert_consistent(r)


def test_a_delay_shows_in_the_percentiles_as_timed_here():
    delay = 0.010
    with EchoServer(delay=delay) as echo:
        r = gen("echo", echo.target, "--outstanding", "4", "--count", "200", "--size", "100")
        timed = []                            # the same exchange, timed per datagram here
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(echo.addr)
            s.settimeout(1)
            for i in range(20):
                t = time.monotonic_ns()
                s.send(i.to_bytes(8, "little") + bytes(92))
                s.recv(4096)
                timed.append(time.monotonic_ns() - t)
    lat = r["latency_ns"]
    assert (r["sent"], r["received"]) == (200, 200)
    assert lat["min"] >= delay * 1e9
    here = sorted(timed)[len(timed) // 2]
    assert abs(lat["p50"] - here) < 4e6, (lat["p50"], here)
    assert lat["p50"] < delay * 1e9 + 5e6
    assert_consistent(r)


def test_the_open_loop_keeps_its_rate_and_shows_progress():
    with EchoServer() as echo:
        cmd = ["gen", "echo", echo.target, "--rate", "2000", "--seconds", "2", "--json",
               "--progress", "on"]
        res = stormpy(*cmd)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert abs(r["sent"] - 4000) <= 200 and echo.received == r["sent"]
    assert abs(r["seconds"] - 2) < 0.1 and r["generator"]["rate_reached"] is True
    assert r["loop"] == "open" and r["latency_from"] == "scheduled send time"
    assert [l for l in res.stderr.splitlines() if l.startswith("gen:") and "sent" in l]
    assert_consistent(r)


def test_http_gets_counted_by_status_against_serve_http():
    site = os.path.join(REPO_ROOT, "examples", "site")
    with HttpServerProcess(site) as server:
        target = f"127.0.0.1:{server.port}"
        r = gen("http", target, "--outstanding", "8", "--count", "2000", "--path", "/",
                "--path", "/no-such-page")
        opened = gen("http", target, "--rate", "1000", "--seconds", "1", "--connections", "4")
    assert (r["sent"], r["received"], r["lost"]) == (2000, 2000, 0)
    assert r["status"] == {"2xx": 1000, "4xx": 1000}
    assert opened["status"] == {"2xx": opened["sent"]} and abs(opened["sent"] - 1000) <= 50
    assert r["closed"] == opened["closed"] == 0
    assert_consistent(r)
    assert_consistent(opened)


def test_the_human_report_names_every_number(query_file):
    with EchoServer() as echo:
        res = stormpy("gen", "echo", echo.target, "--count", "100")
    assert res.returncode == 0, res.stderr
    for word in ("sent", "received", "lost", "p50", "p90", "p99", "p99.9", "max"):
        assert word in res.stdout


@pytest.mark.parametrize("args, fragment", [
    (["dns", "127.0.0.1:53", "--queries", "/no/such/file"], "cannot read the query file"),
    (["dns", "127.0.0.1:53"], "needs --queries"),
    (["dns", "127.0.0.1:53", "--queries", "BADTYPE", "--count", "1"], ":2: 'BOGUS' is not a record type"),
    (["echo", "127.0.0.1:53", "--rate", "0"], "--rate: 0 must be at least 1"),
    (["echo", "127.0.0.1:53", "--rate", "fast"], "'fast' is not a whole number"),
    (["echo", "localhost", "--count", "1"], "expected ADDRESS:PORT"),
    (["echo", "127.0.0.1:53", "--size", "3"], "an echo datagram has"),
    (["http", "127.0.0.1:CLOSED", "--count", "1"], "cannot reach"),
])
def test_bad_arguments_are_one_line(args, fragment, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("www.example.com A\nwww.example.com BOGUS\n")
    args = [str(bad) if a == "BADTYPE" else a.replace("CLOSED", str(free_port())) for a in args]
    r = stormpy("gen", *args)
    if fragment.startswith("--rate") or "whole number" in fragment:
        assert r.returncode == 2 and fragment in r.stderr and "Traceback" not in r.stderr
    else:
        assert_one_line_error(r, fragment)


def test_an_unreachable_address_is_one_line(query_file):
    why = why_no_netns()
    if why:
        pytest.skip(why)
    ns = f"spgen-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m", "stormpy", "gen",
                            "dns", "198.18.0.1:53", "--queries", query_file, "--count", "1"],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    finally:
        subprocess.run(["ip", "netns", "del", ns])
    assert_one_line_error(r, "cannot reach 198.18.0.1:53", "unreachable")


def test_bench_gen_measures_the_generator_beside_dnsperf():
    if (os.cpu_count() or 1) < 2:
        pytest.skip("bench gen pins the server and the client to two CPUs")
    r = stormpy("bench", "gen", "--seconds", "0.5", "--rounds", "1", "--outstanding", "16",
                "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    assert set(results) == ({"stormpy gen", "dnsperf"} if shutil.which("dnsperf") else {"stormpy gen"})
    for runs in results.values():
        assert runs[0]["replies_s"] > 0 and runs[0]["lost_pct"] < 1 and runs[0]["client_cpu_s"] > 0


def test_bench_peers_reads_the_generators_report():
    from stormpy.bench.peers import parse_gen

    with EchoServer() as echo:
        res = stormpy("gen", "echo", echo.target, "--count", "300", "--json")
    assert res.returncode == 0, res.stderr
    got, report = parse_gen(res.stdout), json.loads(res.stdout)
    assert (got["sent"], got["replies"]) == (300, 300) == (report["sent"], report["received"])
    assert got["replies_per_s"] == report["reply_rate"] > 0
