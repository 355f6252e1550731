"""serve-http on the kernel's TCP (the embedded default, no root): real clients (curl,
wget) download the generated site byte-exact, keep-alive and pipelining, timeouts, a
full connection table, reloads, and the one-line errors."""
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse

import pytest

from stormpy.bench.site import make_site, sha256_of
from support.http import HttpServerProcess, exchange, get
from support.process import REPO_ROOT, free_port, has_ipv6_loopback

CURL, WGET = shutil.which("curl"), shutil.which("wget")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("http-site") / "site"
    files = make_site(root)
    return root, files, sha256_of(root)


@pytest.fixture(scope="module")
def server(site):
    with HttpServerProcess(site[0], workers=2) as s:
        yield s


def url(addr, path):
    host = f"[{addr[0]}]" if ":" in addr[0] else addr[0]
    return f"http://{host}:{addr[1]}{urllib.parse.quote(path)}"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
def test_curl_downloads_every_file_on_one_kept_alive_connection(server, site, tmp_path):
    _, files, digests = site
    paths = sorted(files)
    cmd = [CURL, "-sS", "--fail", "-w", "%{num_connects} %{http_code}\\n"]
    for i, path in enumerate(paths):
        cmd += ["-o", str(tmp_path / f"out{i}"), url(server.addr, path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[1::2] == ["200"] * len(paths)
    assert sum(int(n) for n in lines[0::2]) == 1, "curl opened more than one connection"
    for i, path in enumerate(paths):
        assert sha((tmp_path / f"out{i}").read_bytes()) == digests[path], path


@pytest.mark.skipif(WGET is None, reason="wget is not installed")
def test_wget_mirrors_the_site_from_its_index(server, site, tmp_path):
    root, files, digests = site
    out = subprocess.run([WGET, "-q", "-r", "-l", "3", "-nH", "-P", str(tmp_path),
                          url(server.addr, "/")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = {p: sha((tmp_path / p.lstrip("/")).read_bytes())
           for p in files if (tmp_path / p.lstrip("/")).exists()}
    # what the index links to, and what those pages link to, arrives whole
    linked = [p for p in files if p.startswith("/f-") or p in ("/index.html", "/docs/a.txt",
                                                                 "/style.css", "/img.png")]
    for path in linked:
        assert got.get(path) == digests[path], path


def test_new_connections_in_parallel_get_right_bytes(server, site):
    _, files, digests = site
    import concurrent.futures
    paths = [p for p in sorted(files) if files[p] <= 1 << 20] * 4
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda p: get(server.addr, urllib.parse.quote(p)), paths))
    for path, a in zip(paths, answers):
        assert a.status == 200 and sha(a.body) == digests[path], path


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback on this host")
def test_ipv6(site):
    _, files, digests = site
    with HttpServerProcess(site[0], host="::1") as s:
        a = get(s.addr, "/f-65536.bin")
        assert a.status == 200 and sha(a.body) == digests["/f-65536.bin"]
        if CURL:
            out = subprocess.run([CURL, "-sS", "-g", url(s.addr, "/docs/a.txt")],
                                 capture_output=True, timeout=30)
            assert sha(out.stdout) == digests["/docs/a.txt"]


def test_pipelined_requests_answered_in_order(server, site):
    _, _, digests = site
    request = b"".join(f"{m} {p} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
                       for m, p in [("GET", "/f-1024.bin"), ("HEAD", "/f-16384.bin"),
                                    ("GET", "/nope"), ("GET", "/f-1000.bin")] * 5)
    answers, closed = exchange(server.addr, request, count=20,
                               heads_only=[False, True, False, False] * 5)
    assert not closed
    assert [a.status for a in answers] == [200, 200, 404, 200] * 5
    assert all(sha(a.body) == digests["/f-1024.bin"] for a in answers[0::4])
    assert all(a.body == b"" and a.headers["content-length"] == "16384" for a in answers[1::4])


def test_close_after_http10_and_after_a_bad_request(server):
    answers, closed = exchange(server.addr, b"GET /docs/a.txt HTTP/1.0\r\n\r\n"
                                            b"GET /docs/a.txt HTTP/1.0\r\n\r\n", count=2)
    assert len(answers) == 1 and closed and answers[0].headers["connection"] == "close"
    answers, closed = exchange(server.addr, b"BAD\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n",
                               count=2)
    assert [a.status for a in answers] == [400] and closed


def test_a_request_body_is_skipped_not_taken_for_a_request(server):
    request = (b"POST /docs/a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 30\r\n\r\n" +
               b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\n"[:30] +
               b"GET /docs/a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
    answers, _ = exchange(server.addr, request, count=2)
    assert [a.status for a in answers] == [405, 200]


def test_slow_request_gets_408_and_idle_connections_make_room(site):
    with HttpServerProcess(site[0], extra_args=["--request-timeout", "0.5",
                                                "--max-connections", "8"]) as s:
        started = time.monotonic()
        answers, closed = exchange(s.addr, b"GET / HTTP/1.1\r\nHo", count=1, timeout=5)
        assert [a.status for a in answers] == [408] and closed
        assert 0.4 < time.monotonic() - started < 3
        # eight idle kept-alive connections fill the table; a new client still gets in
        idle = []
        for _ in range(8):
            c = socket.create_connection(s.addr, timeout=5)
            c.sendall(b"GET /docs/a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
            c.recv(65536)
            idle.append(c)
        try:
            for _ in range(3):
                assert get(s.addr, "/docs/a.txt").status == 200
            dropped = 0
            for c in idle:              # the evicted ones are closed by now
                c.settimeout(0.2)
                try:
                    dropped += c.recv(1) == b""
                except OSError:
                    dropped += 1
            assert dropped >= 1
        finally:
            for c in idle:
                c.close()


def test_a_client_that_stops_reading_is_cut_and_others_are_served(site):
    with HttpServerProcess(site[0], extra_args=["--send-timeout", "1"]) as s:
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.connect(s.addr)
        stuck.sendall(b"GET /f-8388608.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        try:
            assert get(s.addr, "/docs/a.txt").status == 200
            time.sleep(2.5)
            stuck.settimeout(5)
            total = 0
            for _ in range(10000):          # drain what was sent before the cut
                chunk = stuck.recv(1 << 20)
                if not chunk:
                    break
                total += len(chunk)
            assert total < 8 << 20
        except ConnectionResetError:
            pass
        finally:
            stuck.close()


def test_reload_serves_new_files_and_a_failed_reload_keeps_the_old(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    (root / "a.txt").write_text("one")
    big = os.urandom(24 << 20)     # more than the socket buffers hold
    (root / "big.bin").write_bytes(big)
    with HttpServerProcess(root) as s:
        # a download in flight across a reload still gets the old bytes whole
        slow = socket.create_connection(s.addr, timeout=10)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 18)
        slow.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        first = slow.recv(4096)
        (root / "a.txt").write_text("two")
        (root / "big.bin").write_bytes(b"replaced")
        s.proc.send_signal(signal.SIGHUP)
        for _ in range(100):
            if get(s.addr, "/a.txt").body == b"two":
                break
            time.sleep(0.05)
        assert get(s.addr, "/a.txt").body == b"two"
        data = first
        while True:
            chunk = slow.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        slow.close()
        assert data.endswith(big) and data.split(b"\r\n\r\n", 1)[1] == big
        shutil.rmtree(root)
        s.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert get(s.addr, "/a.txt").body == b"two"
        assert "reload failed" in s.output() and "no such directory" in s.output()


def _reloaded(s, count: int) -> None:
    for _ in range(200):
        if s.output().count("reloaded") >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"reload {count} not done: {s.output()[-500:]}")


def test_downloads_held_across_many_reloads_never_hold_up_new_requests(tmp_path):
    """A worker keeps each table its unfinished replies point into. Five slow
    downloads, each from its own site version, once left it no room to pin the
    current table: new requests hung until the request timeout and got a 408 or
    nothing. Then a reload must also free the old tables once the downloads end."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "a.txt").write_text("v0")
    big = os.urandom(16 << 20)     # far more than the socket buffers hold
    (root / "big.bin").write_bytes(big)
    slow = []
    with HttpServerProcess(root, ["--request-timeout", "3", "--send-timeout", "60"]) as s:
        for version in range(1, 6):
            c = socket.create_connection(s.addr, timeout=10)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c.sendall(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            assert c.recv(64).startswith(b"HTTP/1.1 200")
            slow.append(c)
            (root / "a.txt").write_text(f"v{version}")
            s.proc.send_signal(signal.SIGHUP)
            _reloaded(s, version)
        started = time.monotonic()
        assert get(s.addr, "/a.txt").body == b"v5"
        assert time.monotonic() - started < 1.5
        for c in slow:
            c.close()
        (root / "a.txt").write_text("v6")
        s.proc.send_signal(signal.SIGHUP)
        _reloaded(s, 6)
        assert get(s.addr, "/a.txt").body == b"v6"


def run_cli(*args, timeout=20):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    return subprocess.run([sys.executable, "-m", "stormpy", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO_ROOT, env=env)


def test_start_errors_are_one_line(tmp_path, server):
    out = run_cli("serve-http", str(tmp_path / "missing"), "--control", "")
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "no such directory" in out.stderr
    out = run_cli("serve-http", str(tmp_path), "--listen", f"127.0.0.1:{server.port}",
                  "--control", "")
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "in use" in out.stderr
    for args, why in ((["--iface", "lo", "--backend", "netmap"], "netmap"), (["--gso", "on"], "--iface"),
                      (["--iface", "nosuch0"], "nosuch0" if os.geteuid() == 0 else "")):
        out = run_cli("serve-http", str(tmp_path), "--control", "", *args)
        assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
        assert why in out.stderr and "Traceback" not in out.stderr


def test_a_wildcard_listener_answers_on_loopback(site):
    with HttpServerProcess(site[0], host="0.0.0.0") as s:
        assert get(("127.0.0.1", s.port), "/docs/a.txt").status == 200


def test_stats_shows_http_counters(site, tmp_path):
    import json
    control = str(tmp_path / "ctl.sock")
    s = HttpServerProcess(site[0], port=free_port())
    cmd = s.command()
    cmd[cmd.index("--control") + 1] = control
    s.command = lambda: cmd

    def counters():
        out = run_cli("stats", "--control", control, "--json")
        assert out.returncode == 0, out.stderr
        w = json.loads(out.stdout)["workers"][0]
        return w["http_requests"], w["http_status"][2], w["http_status"][4]

    with s:
        before = counters()
        for _ in range(3):
            get(s.addr, "/docs/a.txt")
        get(s.addr, "/nope")
        after = counters()
        assert [b - a for a, b in zip(before, after)] == [4, 3, 1]
        out = run_cli("stats", "--control", control)
        assert out.returncode == 0 and f"requests={after[0]} 2xx={after[1]} 4xx=1" in out.stdout


def test_the_example_site_serves_what_a_browser_asks_for():
    root = os.path.join(REPO_ROOT, "examples", "site")
    with HttpServerProcess(root) as s:
        for path, kind in (("/", "text/html"), ("/style.css", "text/css"),
                           ("/app.js", "text/javascript"), ("/storm.svg", "image/svg+xml"),
                           ("/docs/", "text/html")):
            a = get(s.addr, path)
            assert a.status == 200 and a.headers["content-type"] == kind, path
            name = path.lstrip("/") + ("index.html" if path.endswith("/") else "")
            with open(os.path.join(root, name), "rb") as f:
                assert a.body == f.read(), path
        assert get(s.addr, "/docs").headers["location"] == "/docs/"


REDIRECTS = [("/docs?x=1", "/docs/?x=1"), ("/docs", "/docs/"), ("/docs?", "/docs/"),
             ("/docs?a=%20b&c=%E2%82%AC", "/docs/?a=%20b&c=%E2%82%AC")]


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_curl_sees_a_directory_redirect_keep_the_query(server, method):
    """As nginx: /dir?q moves to /dir/?q, the query as sent (escapes left alone), and
    an empty query is none; curl asks for them all on one kept-alive connection."""
    where = f"http://{server.addr[0]}:{server.addr[1]}"
    cmd = [CURL, "-sS", "-w", "%{http_code} %header{location} %{num_connects}\\n"]
    cmd += ["--head"] if method == "HEAD" else []
    for target, _ in REDIRECTS:
        cmd += ["-o", "/dev/null", where + target]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.rsplit(" ", 1)[0] for line in lines] == [f"301 {loc}" for _, loc in REDIRECTS]
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == 1


def test_a_redirect_with_a_query_is_the_bare_one_but_for_it(server):
    """Pipelined on one connection: HEAD and GET of /docs?x=1 and GET of /docs. The
    answers differ only in the query (and a Date that may have ticked), HEAD's only in
    its missing body, and the connection stays open."""
    requests = b"".join(f"{m} {t} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
                        for m, t in (("HEAD", "/docs?x=1"), ("GET", "/docs?x=1"), ("GET", "/docs")))
    answers, closed = exchange(server.addr, requests, count=3, heads_only=[True, False, False])
    assert len(answers) == 3 and not closed
    head, with_query, bare = answers
    assert [a.headers["location"] for a in answers] == ["/docs/?x=1", "/docs/?x=1", "/docs/"]

    def undated(a):
        return b"\r\n".join(line for line in a.raw_head.split(b"\r\n")
                             if not line.startswith(b"Date: "))

    assert undated(head) == undated(with_query) and head.body == b""
    assert undated(with_query).replace(b"/docs/?x=1", b"/docs/") == undated(bare)
    assert with_query.body == bare.body and bare.headers["connection"] == "keep-alive"


def test_slow_loris_connections_filling_the_pool_do_not_keep_a_client_out(site):
    with HttpServerProcess(site[0], extra_args=["--max-connections", "16"]) as s:
        loris = []
        try:
            for _ in range(40):          # more than the pool: each sends a head, never ends it
                c = socket.create_connection(s.addr, timeout=5)
                c.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ")
                loris.append(c)
            time.sleep(0.2)
            started = time.monotonic()
            for _ in range(5):
                assert get(s.addr, "/docs/a.txt").status == 200
            assert time.monotonic() - started < 3       # not after the 10 s request timeout
        finally:
            for c in loris:
                c.close()


def worker_cpu_seconds(server) -> float:
    """utime+stime of the server's worker processes."""
    pid = server.proc.pid
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        children = f.read().split()
    ticks = 0
    for child in children:
        with open(f"/proc/{child}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def test_a_half_closed_client_that_does_not_read_costs_no_cpu(site):
    with HttpServerProcess(site[0]) as s:
        c = socket.create_connection(s.addr, timeout=5)
        c.sendall(b"GET /f-8388608.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        c.shutdown(socket.SHUT_WR)
        before = worker_cpu_seconds(s)
        time.sleep(1.5)
        spent = worker_cpu_seconds(s) - before
        data = b""
        while len(data) < (8 << 20):            # the answer is still whole afterwards
            chunk = c.recv(1 << 20)
            if not chunk:
                break
            data += chunk
        c.close()
        assert spent < 0.3, f"the worker spun: {spent:.2f} s of CPU in 1.5 s"
        assert data.split(b"\r\n\r\n", 1)[1] == (site[0] / "f-8388608.bin").read_bytes()


def test_requests_before_a_half_close_are_all_answered(server):
    request = (b"GET /f-65536.bin HTTP/1.1\r\nHost: t\r\n\r\n" +
               b"GET /docs/a.txt HTTP/1.1\r\nHost: t\r\n\r\n" * 11)
    with socket.create_connection(server.addr, timeout=5) as c:
        c.sendall(request)
        c.shutdown(socket.SHUT_WR)             # more than the pipeline holds, then the FIN
        data = b""
        while True:
            chunk = c.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    from support.http import parse_answers
    answers, rest = parse_answers(data)
    assert [a.status for a in answers] == [200] * 12 and rest == b""


def test_a_partial_request_after_a_whole_one_is_timed(site):
    with HttpServerProcess(site[0], extra_args=["--request-timeout", "0.5",
                                                "--send-timeout", "20"]) as s:
        started = time.monotonic()
        answers, closed = exchange(s.addr, b"GET /docs/a.txt HTTP/1.1\r\nHost: t\r\n\r\nGE",
                                   count=2, timeout=8)
        assert [a.status for a in answers] == [200, 408] and closed
        assert time.monotonic() - started < 3


def test_line_ends_alone_are_refused_without_spinning(site):
    with HttpServerProcess(site[0]) as s:
        before = worker_cpu_seconds(s)
        answers, closed = exchange(s.addr, b"\r\n" * 20000, count=1, timeout=5)
        assert [a.status for a in answers] == [400] and closed
        assert worker_cpu_seconds(s) - before < 0.5
