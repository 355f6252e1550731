"""serve-http under test, and a raw HTTP/1.1 client that sees exactly what was sent:
several answers on one connection, heads without bodies, the connection's close.

    with HttpServerProcess(site, extra_args=[...]) as server: ...
    answers = exchange(server.addr, b"GET / HTTP/1.1\\r\\nHost: a\\r\\n\\r\\n" * 2, count=2)
"""
from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Optional, Sequence

from stormpy.bench.processes import wait_for_output
from support.process import HOST, REPO_ROOT, ServerProcess
from support.servers import StormpyServer


@dataclass
class Answer:
    status: int
    reason: str
    headers: dict = field(default_factory=dict)    # lower-case name -> value (last wins)
    body: bytes = b""
    raw_head: bytes = b""


def _parse_head(raw: bytes) -> Answer:
    lines = raw.decode("latin-1").split("\r\n")
    version, status, reason = (lines[0].split(" ", 2) + [""])[:3]
    assert version == "HTTP/1.1", f"status line {lines[0]!r}"
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(status), reason, headers, raw_head=raw)


def parse_answers(data: bytes, heads_only: Sequence[bool] = ()) -> tuple[list[Answer], bytes]:
    """The complete answers at the start of data, and what follows them. heads_only[i]:
    answer i has no body whatever its Content-Length says (it answers a HEAD)."""
    out = []
    while True:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            return out, data
        answer = _parse_head(data[:end])
        length = int(answer.headers.get("content-length", "0"))
        if answer.status == 304 or (len(out) < len(heads_only) and heads_only[len(out)]):
            length = 0
        if len(data) < end + 4 + length:
            return out, data
        answer.body = data[end + 4:end + 4 + length]
        data = data[end + 4 + length:]
        out.append(answer)


def exchange(addr, request: bytes, count: int = 1, heads_only: Sequence[bool] = (),
             timeout: float = 5.0) -> tuple[list[Answer], bool]:
    """Send request bytes on a new connection and read until `count` answers arrived or
    the server closed. Returns the answers and whether the server closed."""
    family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(addr)
        s.sendall(request)
        data, closed = b"", False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answers, _ = parse_answers(data, heads_only)
            if len(answers) >= count:
                s.settimeout(0.1)     # a close that follows at once is part of the answer
            try:
                chunk = s.recv(1 << 20)
            except socket.timeout:
                if len(answers) >= count:
                    break
                continue
            if not chunk:
                closed = True
                break
            data += chunk
        answers, _ = parse_answers(data, heads_only)
        return answers, closed


def get(addr, path: str, headers: Optional[dict] = None, method: str = "GET",
        version: str = "HTTP/1.1") -> Answer:
    """One request on its own connection."""
    host = f"[{addr[0]}]" if ":" in addr[0] else addr[0]     # as clients write an IPv6 one
    lines = [f"{method} {path} {version}", f"Host: {host}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")
    answers, _ = exchange(addr, request, heads_only=[method == "HEAD"])
    assert answers, f"no answer to {method} {path}"
    return answers[0]


class HttpServerProcess(ServerProcess):
    """`python -m stormpy serve-http SITE --listen HOST:PORT --workers N [extra_args]`"""

    name = "stormpy-http"

    def __init__(self, site: str, extra_args: Sequence[str] = (), port: Optional[int] = None,
                 workers: int = 1, host: str = HOST, ready_timeout: float = 15.0):
        super().__init__(port=port, ready_timeout=ready_timeout)
        self.site = str(site)
        self.extra_args = list(extra_args)
        self.workers = workers
        self.host = host

    @property
    def addr(self):
        return (self.host, self.port)

    def command(self) -> list:
        where = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        return [sys.executable, "-m", "stormpy", "serve-http", self.site, "--listen", where,
                "--workers", str(self.workers), "--control", ""] + self.extra_args

    def cwd(self) -> str:
        return REPO_ROOT

    env = StormpyServer.env

    def is_ready(self) -> bool:
        try:
            answers, _ = exchange(self.addr, b"HEAD / HTTP/1.0\r\n\r\n", heads_only=[True],
                                  timeout=0.5)
        except OSError:
            return False
        return bool(answers)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()


def curl_digests(run, ns, host, paths, timeout=60, retries=5):
    """Every path fetched by one curl run in namespace ns (one kept-alive connection),
    through run(ns, *cmd, timeout=); the SHA-256 of each body. --fail-early: curl's
    status is otherwise the last transfer's, and an earlier one's failure left unseen."""
    where = f"[{host}]" if ":" in host else host
    cmd = ["curl", "-sS", "--fail", "--fail-early", "-g", "--max-time", str(timeout),
           "--retry", str(retries), "--retry-connrefused", "--retry-delay", "0"]
    outs = [f"/tmp/sp-curl-{os.getpid()}-{time.monotonic_ns()}-{i}" for i in range(len(paths))]
    for out, path in zip(outs, paths):
        cmd += ["-o", out, f"http://{where}{urllib.parse.quote(path)}"]
    try:
        r = run(ns, *cmd, timeout=timeout + 30)
        assert r.returncode == 0, r.stderr
        digests = []
        for out in outs:
            with open(out, "rb") as f:
                digests.append(hashlib.sha256(f.read()).hexdigest())
        return digests
    finally:
        for out in outs:
            if os.path.exists(out):
                os.unlink(out)


def serve_on_rings(ns, root, backend="xdp", *extra):
    """serve-http on namespace ns's veth0 rings, once it says it serves; backend: a name,
    or (name, mode). Its stdout and stderr share one pipe, for stop_server()."""
    name, mode = backend if isinstance(backend, tuple) else (backend, "memcpy")
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "stormpy",
                             "serve-http", str(root), "--iface", "veth0", "--backend", name,
                             "--mode", mode, "--control", "", *extra], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for_output(proc, "info: serving")
    return proc


def stop_server(proc) -> str:
    """SIGTERM; what the server wrote after it said it serves (its exit summary)."""
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=15)
    return out
