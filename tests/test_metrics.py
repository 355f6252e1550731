"""--metrics ADDR:PORT: the exposition read by prometheus_client's own parser, whose
values move with real queries and requests by exactly what was sent; reloads, zone
serials, DNS over TCP; IPv6; a busy port or a bad address as one line."""
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import dns.message
import dns.rcode
import dns.zone
import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.client import tcp_query, udp
from support.http import HttpServerProcess, get
from support.process import REPO_ROOT, free_port, has_ipv6_loopback
from support.responders import Site, example
from support.servers import StormpyServer
from test_privileges import REASON as PRIVILEGES_SKIP
from test_supervisor import snapshot, wait_for_replacement

EXAMPLE_NET = f"{REPO_ROOT}/tests/zones/example.net.zone"


def scrape(host: str, port: int) -> dict:
    """{(sample name, sorted labels): value}, parsed by prometheus_client."""
    where = f"[{host}]" if ":" in host else host
    with urllib.request.urlopen(f"http://{where}:{port}/metrics", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def total(samples: dict, name: str, **labels) -> float:
    """The sum of name's samples whose labels include `labels`."""
    return sum(v for (n, ls), v in samples.items()
               if n == name and all(dict(ls).get(k) == v2 for k, v2 in labels.items()))


def tcp_workers(samples: dict) -> set:
    """The labels of the TCP workers (they have a connections gauge)."""
    return {dict(ls)["worker"] for (n, ls) in samples if n == "stormpy_dns_tcp_connections_open"}


def scrape_until(port: int, until, host="127.0.0.1", seconds: float = 10.0) -> dict:
    """The first scrape for which until(samples) holds (or the last, after `seconds`)."""
    deadline = time.monotonic() + seconds
    while True:
        samples = scrape(host, port)
        if until(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(0.05)


def settled(port: int, until=lambda samples: True, host="127.0.0.1") -> dict:
    """A scrape once until(samples) holds and the UDP workers' sent frames equal their
    DNS answers: a worker publishes its I/O counters only after the batch whose replies
    went out, so a scrape in between sees the answer and not yet the frame."""
    def answers_sent(samples):
        udp_answers = total(samples, "stormpy_dns_answers_total") - \
            sum(total(samples, "stormpy_dns_answers_total", worker=w) for w in tcp_workers(samples))
        return total(samples, "stormpy_tx_packets_total") == udp_answers
    return scrape_until(port, lambda s: until(s) and answers_sent(s), host)


def soa_serial(path) -> int:
    """The serial as dnspython reads the master file."""
    zone = dns.zone.from_file(str(path), origin="example.com.", relativize=False)
    return zone.get_rdataset("example.com.", "SOA")[0].serial


def rcode_of(msg) -> str:
    return dns.rcode.to_text(msg.rcode())


def test_dns_metrics_move_with_queries(example_zone_copy):
    port = free_port()
    with StormpyServer([("example.com.", str(example_zone_copy)), ("example.net.", EXAMPLE_NET)],
                       ["--control", "", "--metrics", f"127.0.0.1:{port}"], workers=2) as srv:
        before = settled(port)
        assert total(before, "stormpy_zone_serial", zone="example.com.") == \
            soa_serial(example_zone_copy)
        assert total(before, "stormpy_worker_up") == 3      # two for UDP, one for TCP
        for _ in range(5):
            assert rcode_of(udp(dns.message.make_query("www.example.com", "A"), srv.addr)) == "NOERROR"
        for i in range(3):
            assert rcode_of(udp(dns.message.make_query(f"nope{i}.example.com", "A"), srv.addr)) == "NXDOMAIN"
        assert rcode_of(udp(dns.message.make_query("example.net", "SOA"), srv.addr)) == "NOERROR"
        after = settled(port, lambda s: total(s, "stormpy_dns_answers_total") -
                        total(before, "stormpy_dns_answers_total") >= 9)

        def moved(name, **labels):
            return total(after, name, **labels) - total(before, name, **labels)
        assert moved("stormpy_rx_packets_total") == 9
        assert moved("stormpy_tx_packets_total") == 9
        assert moved("stormpy_dns_answers_total", rcode="NOERROR") == 6
        assert moved("stormpy_dns_answers_total", rcode="NXDOMAIN") == 3
        assert moved("stormpy_dns_zone_answers_total", zone="example.com.") == 8
        assert moved("stormpy_dns_zone_answers_total", zone="example.net.") == 1
        assert moved("stormpy_batch_size_sum") == 9          # the histogram's sum: frames
        assert 1 <= moved("stormpy_batch_size_count") <= 9
        assert moved("stormpy_batch_size_bucket", le="+Inf") == moved("stormpy_batch_size_count")

        # DNS over TCP, answered by the TCP worker
        assert tcp_workers(after) == {"2"}
        wire = dns.message.make_query("www.example.com", "A").to_wire()
        assert tcp_query(wire, srv.addr) is not None
        after_tcp = settled(port, lambda s: total(s, "stormpy_dns_answers_total", worker="2") == 1)
        assert total(after_tcp, "stormpy_dns_answers_total", worker="2", rcode="NOERROR") - \
            total(after, "stormpy_dns_answers_total", worker="2", rcode="NOERROR") == 1
        assert total(after_tcp, "stormpy_dns_tcp_connections_total", result="accepted") >= 1

        # a reload: counted, timed, and the new serial shown
        serial = soa_serial(example_zone_copy)
        text = example_zone_copy.read_text()
        assert str(serial) in text
        example_zone_copy.write_text(text.replace(str(serial), str(serial + 1)))
        srv.proc.send_signal(signal.SIGHUP)
        reloaded = settled(port, lambda s: total(s, "stormpy_reloads_total") >= 1)
        assert total(reloaded, "stormpy_reloads_total") == 1
        assert total(reloaded, "stormpy_reload_duration_seconds") > 0
        assert total(reloaded, "stormpy_zone_serial", zone="example.com.") == serial + 1
        assert soa_serial(example_zone_copy) == serial + 1
        # the zone keeps its counter across the reload
        assert total(reloaded, "stormpy_dns_zone_answers_total", zone="example.com.") == \
            total(after_tcp, "stormpy_dns_zone_answers_total", zone="example.com.")


def test_dns_tcp_connection_left_idle_times_out():
    """A connection that sends nothing is open, then closed after the idle limit."""
    port = free_port()
    with StormpyServer([("example.com.", f"{REPO_ROOT}/zones/example.zone")],
                       ["--control", "", "--metrics", f"127.0.0.1:{port}",
                        "--tcp-idle-timeout", "2"]) as srv, \
            socket.create_connection(srv.addr, timeout=20) as idle:
        opened = scrape_until(port, lambda s: total(s, "stormpy_dns_tcp_connections_open") == 1)
        assert total(opened, "stormpy_dns_tcp_connections_total", result="idle_timeout") == 0
        assert idle.recv(1) == b""                   # closed by the server, within 20 s
        closed = scrape_until(port, lambda s: total(s, "stormpy_dns_tcp_connections_open") == 0)
        assert total(closed, "stormpy_dns_tcp_connections_total", result="idle_timeout") == 1
        assert total(closed, "stormpy_dns_tcp_connections_total", result="accepted") == 1


def run_serve_dns(*args, timeout=30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stormpy", "serve-dns",
                           f"{REPO_ROOT}/zones/example.zone", "--control", "", "--workers", "1",
                           "--listen", f"127.0.0.1:{free_port()}", *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)


def test_busy_metrics_port_is_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = run_serve_dns("--metrics", f"127.0.0.1:{port}")
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert errors == [f"stormpy: error: --metrics 127.0.0.1:{port}: Address already in use"], r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("text", ["localhost:9153", "127.0.0.1:99999", "[::1"])
def test_bad_metrics_address_is_one_line(text):
    r = run_serve_dns("--metrics", text)
    assert r.returncode == 1
    assert r.stderr.strip().startswith(f"stormpy: error: --metrics {text}: expected"), r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_http_metrics_on_ipv6(tmp_path):
    if not has_ipv6_loopback():
        pytest.skip("no IPv6 loopback")
    (tmp_path / "index.html").write_text("hello\n")
    with socket.socket(socket.AF_INET6) as probe:      # a port free on ::1
        probe.bind(("::1", 0))
        port = probe.getsockname()[1]
    with HttpServerProcess(tmp_path, ["--metrics", f"[::1]:{port}"], workers=2) as srv:
        before = settled(port, host="::1")
        for _ in range(3):
            assert get(srv.addr, "/index.html").status == 200
        assert get(srv.addr, "/missing").status == 404
        after = settled(port, lambda s: total(s, "stormpy_http_requests_total") -
                        total(before, "stormpy_http_requests_total") >= 4, host="::1")

        def moved(name, **labels):
            return total(after, name, **labels) - total(before, name, **labels)
        assert moved("stormpy_http_requests_total", status="2xx") == 3
        assert moved("stormpy_http_requests_total", status="4xx") == 1
        assert moved("stormpy_http_connections_total") == 4
        assert moved("stormpy_http_sent_bytes_total") > 4 * len("hello\n")
        assert total(after, "stormpy_worker_restarts_total") == 0
        assert not any(name == "stormpy_rx_packets_total" for name, _ in after)  # kernel's TCP
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"http://[::1]:{port}/other", timeout=5)


def test_responder_metrics_count_its_handler():
    """A custom responder (its Python handler answers each datagram) has them too."""
    port, metrics = free_port(), free_port()
    with Site("socket") as site:
        site.start(example("echo_in_python.py"), port, "--metrics", f"127.0.0.1:{metrics}",
                   ready=lambda: site.udp(port, [b"ping"], 0.3) == [b"ping"])
        before = scrape("127.0.0.1", metrics)
        payloads = [b"one", b"two", b"three"]
        assert site.udp(port, payloads) == payloads
        after = scrape_until(metrics, lambda s: total(s, "stormpy_tx_packets_total") -
                             total(before, "stormpy_tx_packets_total") >= 3)
        for name in ("stormpy_slow_path_total", "stormpy_slow_replies_total",
                     "stormpy_rx_packets_total", "stormpy_tx_packets_total"):
            assert total(after, name) - total(before, name) == 3, name
        assert total(after, "stormpy_handler_errors_total") == 0


@pytest.mark.skipif(PRIVILEGES_SKIP is not None, reason=PRIVILEGES_SKIP or "")
def test_metrics_after_dropping_to_nobody(tmp_path):
    """Bound before --user drops root, served after; a killed worker is counted."""
    port, control = free_port(), str(tmp_path / "ctl.sock")
    with StormpyServer([("example.com.", f"{REPO_ROOT}/zones/example.zone")],
                       ["--control", control, "--user", "nobody",
                        "--metrics", f"127.0.0.1:{port}"], workers=2) as srv:
        assert rcode_of(udp(dns.message.make_query("www.example.com", "A"), srv.addr)) == "NOERROR"
        assert total(settled(port), "stormpy_worker_restarts_total") == 0
        old = snapshot(control)["workers"][1]["pid"]
        os.kill(old, signal.SIGKILL)
        wait_for_replacement(control, 1, old)
        after = settled(port, lambda s: total(s, "stormpy_worker_up") == 2)
        assert total(after, "stormpy_worker_restarts_total", worker="1") == 1
        assert total(after, "stormpy_worker_restarts_total", worker="0") == 0


def test_the_drivers_answers_are_counted_with_the_workers():
    """--xdp-answer: the XDP program's answers join the per-rcode answers as worker "xdp"
    and add to their zone's answers."""
    import types
    import dns.name
    from prometheus_client import CollectorRegistry, generate_latest
    from stormpy import metrics

    worker = {"rcode": [5, 0, 0, 1] + [0] * 13, "zone_answers": [0, 6] + [0] * 62,
              "truncated": 0, "rrl_dropped": 0, "rrl_slipped": 0}
    driver = {"xdp_answered": 9, "xdp_passed": 6, "xdp_rcode": [7, 0, 0, 2] + [0] * 12,
              "xdp_zone_answers": [0, 9] + [0] * 62}
    server = types.SimpleNamespace(xdp=types.SimpleNamespace(counters=lambda: driver),
                                   zone_slots={dns.name.from_text("example.com."): 1},
                                   stats=types.SimpleNamespace(serials={}), serves_tcp=False)

    class Families:
        def collect(self):
            return metrics._dns_metrics(server, [worker])
    registry = CollectorRegistry()
    registry.register(Families())
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for f in text_string_to_metric_families(generate_latest(registry).decode())
           for s in f.samples}
    answers = "stormpy_dns_answers_total"
    assert got[(answers, (("rcode", "NOERROR"), ("worker", "0")))] == 5
    assert got[(answers, (("rcode", "NOERROR"), ("worker", "xdp")))] == 7
    assert got[(answers, (("rcode", "NXDOMAIN"), ("worker", "xdp")))] == 2
    assert got[("stormpy_dns_zone_answers_total", (("zone", "example.com."),))] == 15
