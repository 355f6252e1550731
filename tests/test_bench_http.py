"""`stormpy bench http`: wrk's report parsed from real captured runs, sizes, the table's
marks and ratios, and short end-to-end runs against nginx (no timing is asserted)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from stormpy.bench import BenchError
from stormpy.bench.http import Outcome, error_text, parse_sizes, parse_wrk, size_label
from stormpy.bench.http_report import table
from stormpy.bench.nginx import nginx_path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Captured from `taskset -c 1 wrk -t1 -c32 -d1s --latency URL` against bench/nginx.py's nginx.
WRK_KEEPALIVE_64K = """\
Running 1s test @ http://127.0.0.1:18090/f-65536.bin
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.97ms    9.57ms  48.25ms   88.48%
    Req/Sec    55.63k     4.61k   59.54k    90.00%
  Latency Distribution
     50%  387.00us
     75%  623.00us
     90%   17.47ms
     99%   41.12ms
  55296 requests in 1.00s, 3.39GB read
Requests/sec:  55232.43
Transfer/sec:      3.38GB
"""

WRK_MISSING_404 = """\
Running 1s test @ http://127.0.0.1:18090/missing
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   299.61us  120.97us   3.04ms   98.77%
    Req/Sec   108.86k     2.28k  112.71k    72.73%
  Latency Distribution
     50%  288.00us
     75%  306.00us
     90%  324.00us
     99%  447.00us
  118655 requests in 1.10s, 34.85MB read
  Non-2xx or 3xx responses: 118655
Requests/sec: 107834.95
Transfer/sec:     31.67MB
"""

# -c64 against an nginx with worker_connections 16: most connections are reset.
WRK_SOCKET_ERRORS = """\
Running 1s test @ http://127.0.0.1:18091/f-1024.bin
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.10ms  781.92us   2.34ms   45.45%
    Req/Sec   201.00      0.00   201.00    100.00%
  Latency Distribution
     50%    1.22ms
     75%    1.83ms
     90%    2.28ms
     99%    2.34ms
  121 requests in 1.10s, 151.01KB read
  Socket errors: connect 0, read 29850, write 0, timeout 0
Requests/sec:    109.64
Transfer/sec:    136.84KB
"""


def test_parse_wrk_keepalive_run():
    r = parse_wrk(WRK_KEEPALIVE_64K)
    assert r["requests"] == 55296 and r["seconds"] == pytest.approx(1.0)
    assert r["requests_per_s"] == pytest.approx(55232.43)
    assert r["transfer_bytes_per_s"] == pytest.approx(3.38 * (1 << 30))
    assert r["bytes_read"] == int(3.39 * (1 << 30))
    assert r["latency_us"] == pytest.approx({"avg": 3970, "stdev": 9570, "max": 48250, "p50": 387,
                                             "p75": 623, "p90": 17470, "p99": 41120})
    assert r["errors"] == 0 and r["non_2xx_3xx"] == 0
    assert r["socket_errors"] == {"connect": 0, "read": 0, "write": 0, "timeout": 0}


def test_parse_wrk_counts_non_2xx_answers_as_errors():
    r = parse_wrk(WRK_MISSING_404)
    assert r["requests"] == 118655 and r["non_2xx_3xx"] == 118655 and r["errors"] == 118655
    assert r["transfer_bytes_per_s"] == pytest.approx(31.67 * (1 << 20))
    assert r["seconds"] == pytest.approx(1.1)
    assert error_text(r) == "118655 non-2xx/3xx"


def test_parse_wrk_counts_socket_errors():
    r = parse_wrk(WRK_SOCKET_ERRORS)
    assert r["socket_errors"] == {"connect": 0, "read": 29850, "write": 0, "timeout": 0}
    assert r["errors"] == 29850 and r["requests"] == 121
    assert r["bytes_read"] == int(151.01 * 1024)
    assert error_text(r) == "29850 read socket errors"


def test_parse_wrk_rejects_what_is_not_a_report():
    with pytest.raises(ValueError):
        parse_wrk("unable to connect to 127.0.0.1:18099 Connection refused\n")
    with pytest.raises(ValueError):
        parse_wrk(WRK_KEEPALIVE_64K.replace("Transfer/sec:      3.38GB", "Transfer/sec: 3.38XB"))


def test_sizes():
    assert parse_sizes("1k,16k,64k,256k,1m") == [1024, 16384, 65536, 262144, 1 << 20]
    assert parse_sizes("1000, 0,1K,1000") == [0, 1000, 1024]
    assert [size_label(s) for s in (0, 1000, 1024, 1 << 20, 3 << 20)] == ["0", "1000", "1k", "1m", "3m"]
    for bad in ("1x", "", "k", "2g"):
        with pytest.raises(BenchError):
            parse_sizes(bad)


def test_table_marks_runs_with_errors_and_gives_ratios():
    def run(server, rps, cpu, text):
        return {"server": server, "mode": "keep-alive", "size": 1024, "round": 1,
                "cpu_us_per_request": cpu, **parse_wrk(text.replace("55232.43", str(rps))),
                "ok": parse_wrk(text)["errors"] == 0}
    out = Outcome(runs=[run("stormpy", 20000, 5.0, WRK_KEEPALIVE_64K),
                        run("nginx", 10000, 10.0, WRK_KEEPALIVE_64K),
                        run("nginx", 109.64, 3.0, WRK_SOCKET_ERRORS)])
    best = out.best()  # the clean run is kept over the one with errors
    assert best[("nginx", "keep-alive", 1024)]["requests_per_s"] == 10000
    text = table("keep-alive", ["stormpy", "nginx"], [1024], best)
    assert "| 1k | 20,000 | 5.0 | 10,000 | 10.0 | 2.00x | 0.50x |" in text
    alone = Outcome(runs=[out.runs[2]])
    assert "| 1k | 110 ! | 3.0 |" in table("keep-alive", ["nginx"], [1024], alone.best())


def bench(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "stormpy.bench", "http", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


needs_wrk_and_nginx = pytest.mark.skipif(
    nginx_path() is None or shutil.which("wrk") is None or len(os.sched_getaffinity(0)) < 2,
    reason="needs nginx, wrk and two CPUs")


@needs_wrk_and_nginx
def test_nginx_alone_gives_figures_for_every_size_and_mode():
    r = bench("--servers", "nginx", "--seconds", "1", "--sizes", "1k,64k", "--close",
              "--connections", "8", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["failed"] == {}
    cells = {(b["mode"], b["size"]) for b in out["best"]}
    assert cells == {(m, s) for m in ("keep-alive", "close") for s in (1024, 65536)}
    for b in out["best"]:
        assert b["ok"] and b["requests_per_s"] > 0 and b["cpu_us_per_request"] > 0
    assert any("Connection: close" in run["command"] for run in out["runs"])


@needs_wrk_and_nginx
def test_a_server_that_does_not_start_is_named_and_the_others_are_measured():
    r = bench("--servers", "stormpy,nginx", "--seconds", "1", "--sizes", "1k",
              "--stormpy-cmd", "{python} -c 'raise SystemExit(\"no server here\")'")
    assert r.returncode == 1
    failures = [line for line in r.stderr.splitlines() if line.startswith("stormpy bench http: ")]
    assert len(failures) == 1 and "stormpy exited at start" in failures[0]
    assert "no server here" in failures[0]
    assert "| 1k | n/a | n/a |" in r.stdout  # stormpy's columns; nginx's have figures
    assert "stormpy was not measured" in r.stdout


def test_table_gives_each_stormpy_server_its_ratio_to_nginx():
    def run(server, rps, cpu):
        return {"server": server, "mode": "keep-alive", "size": 1024, "round": 1,
                "cpu_us_per_request": cpu, **parse_wrk(WRK_KEEPALIVE_64K.replace("55232.43", str(rps))),
                "ok": True}
    out = Outcome(runs=[run("stormpy-xdp", 30000, 2.0), run("stormpy-packet", 5000, 8.0),
                        run("nginx", 10000, 10.0)])
    text = table("keep-alive", ["stormpy-xdp", "stormpy-packet", "nginx"], [1024], out.best())
    assert "stormpy-xdp/nginx req/s" in text and "stormpy-packet/nginx CPU/req" in text
    assert text.splitlines()[-1].endswith("| 3.00x | 0.20x | 0.50x | 0.80x |")


@needs_wrk_and_nginx
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("curl") is None,
                    reason="--veth needs root (namespaces) and curl")
def test_veth_measures_the_rings_beside_nginx():
    """Every server across the pair, the rings included: each checked byte for byte
    (a server serving wrong bytes would be named as failed) and measured."""
    from support.backends import NO_NETNS, NO_XDP
    if NO_NETNS or NO_XDP:
        pytest.skip(NO_NETNS or NO_XDP)
    r = bench("--veth", "--seconds", "1", "--sizes", "1k,64k", "--connections", "8", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["failed"] == {} and out["servers"] == [
        "stormpy", "stormpy-xdp", "stormpy-xdp-precopy", "stormpy-packet", "stormpy-packet-precopy",
        "nginx"]
    assert {(b["server"], b["size"]) for b in out["best"]} == \
        {(s, n) for s in out["servers"] for n in (1024, 65536)}
    for b in out["best"]:
        assert b["ok"] and b["requests_per_s"] > 0 and b["cpu_us_per_request"] > 0, b
