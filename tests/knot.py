"""Test-harness helpers: run a reference Knot DNS server (knotd) and the stormpy
server under test as subprocesses on 127.0.0.1 with free ports.

Plain API (no pytest needed):

    with KnotServer([("example.com.", "tests/zones/example.com.zone")],
                    version="v", identity="id") as knot:
        knot.addr  # ("127.0.0.1", port)

    with StormpyServer([("example.com.", "tests/zones/example.com.zone")],
                       extra_args=["--chaos-version", "v"]) as sp:
        sp.addr

pytest fixtures (import them into a conftest.py or a test module):

    from knot import knot_server, stormpy_server      # tests/ on sys.path
    # or: pytest_plugins = ["knot"]

    def test_x(knot_server, stormpy_server):
        k = knot_server(ZONES, version="v", identity="id")
        s = stormpy_server(ZONES, ["--chaos-version", "v"])

Both fixtures are session-scoped factories; a server started with the same
arguments is reused for the whole session and all are stopped at session end.

Every wait in this module is bounded in time and iterations.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from typing import Iterable, Optional, Sequence, Tuple, Union

import dns.flags
import dns.message
import dns.rdataclass
import dns.rdatatype

try:  # pytest is optional for the plain API
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

HOST = "127.0.0.1"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZONES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zones")

ZoneSpec = Union[Tuple[str, str], str]

KNOTD_CANDIDATES = ("knotd", "/usr/sbin/knotd", "/usr/local/sbin/knotd")
KNOTC_CANDIDATES = ("knotc", "/usr/sbin/knotc", "/usr/local/sbin/knotc")


# --------------------------------------------------------------------------
# small utilities
# --------------------------------------------------------------------------

def _which(cands: Iterable[str]) -> Optional[str]:
    for c in cands:
        p = shutil.which(c) if os.sep not in c else (c if os.access(c, os.X_OK) else None)
        if p:
            return p
    return None


def knotd_path() -> Optional[str]:
    return _which(KNOTD_CANDIDATES)


def knotc_path() -> Optional[str]:
    return _which(KNOTC_CANDIDATES)


def free_port(host: str = HOST, attempts: int = 50) -> int:
    """A port that is currently free for both UDP and TCP on `host`."""
    for _ in range(attempts):
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            t.bind((host, 0))
            port = t.getsockname()[1]
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                u.bind((host, port))
            except OSError:
                continue
            finally:
                u.close()
            return port
        finally:
            t.close()
    raise RuntimeError("could not find a free UDP+TCP port")


def _norm_zones(zones: Sequence[ZoneSpec]) -> list:
    """Accept [(origin, path)] or [path]; for bare paths the origin is read from
    the first $ORIGIN directive of the file."""
    out = []
    for z in zones:
        if isinstance(z, (tuple, list)):
            origin, path = z
        else:
            path = z
            origin = None
            with open(path) as f:
                for i, line in enumerate(f):
                    if i > 200:
                        break
                    if line.upper().startswith("$ORIGIN"):
                        origin = line.split()[1]
                        break
            if origin is None:
                raise ValueError(f"no (origin, path) given and no $ORIGIN in {path}")
        origin = origin if origin.endswith(".") else origin + "."
        out.append((origin, os.path.abspath(path)))
    return out


def udp_query(wire: bytes, addr: Tuple[str, int], timeout: float = 2.0) -> Optional[bytes]:
    """Send one UDP datagram, return the first reply whose ID matches (or None on timeout)."""
    s = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.settimeout(timeout)
        s.connect(addr)
        s.send(wire)
        deadline = time.monotonic() + timeout
        for _ in range(16):  # bounded: ignore stray datagrams with another ID
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            s.settimeout(left)
            try:
                data = s.recv(65535)
            except (socket.timeout, ConnectionRefusedError):
                return None
            if len(wire) < 2 or data[:2] == wire[:2]:
                return data
        return None
    finally:
        s.close()


def tcp_query(wire: bytes, addr: Tuple[str, int], timeout: float = 3.0) -> Optional[bytes]:
    """One query over a fresh TCP connection; None if the server closes/times out."""
    deadline = time.monotonic() + timeout
    try:
        s = socket.create_connection(addr, timeout=timeout)
    except OSError:
        return None
    try:
        s.sendall(struct.pack("!H", len(wire)) + wire)

        def recv_exact(n: int) -> Optional[bytes]:
            buf = b""
            for _ in range(10000):  # bounded
                if len(buf) >= n:
                    return buf
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                s.settimeout(left)
                chunk = s.recv(n - len(buf))
                if not chunk:
                    return None
                buf += chunk
            return None

        hdr = recv_exact(2)
        if hdr is None:
            return None
        return recv_exact(struct.unpack("!H", hdr)[0])
    except (socket.timeout, OSError):
        return None
    finally:
        s.close()


def probe_wire(qname: str = "version.bind.", qtype: str = "TXT", qclass: str = "CH") -> bytes:
    q = dns.message.make_query(qname, qtype, qclass)
    q.flags = 0
    return q.to_wire()


# --------------------------------------------------------------------------
# generic subprocess server
# --------------------------------------------------------------------------

class ServerProcess:
    """A DNS server subprocess listening on HOST:port, with a readiness wait."""

    name = "server"

    def __init__(self, port: Optional[int] = None, ready_timeout: float = 15.0):
        self.port = port or free_port()
        self.ready_timeout = ready_timeout
        self.proc: Optional[subprocess.Popen] = None
        self.workdir = tempfile.mkdtemp(prefix=f"{self.name}-test-")
        self.log_path = os.path.join(self.workdir, "output.log")
        self._log = None

    @property
    def addr(self) -> Tuple[str, int]:
        return (HOST, self.port)

    # subclasses provide the command line
    def command(self) -> list:
        raise NotImplementedError

    def env(self) -> dict:
        return dict(os.environ)

    def cwd(self) -> str:
        return self.workdir

    def is_ready(self) -> bool:
        """Ready when any UDP reply arrives for a probe query."""
        return udp_query(probe_wire(), self.addr, timeout=0.3) is not None

    def output(self, limit: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
            return data[-limit:].decode("utf-8", "replace")
        except OSError:
            return ""

    def start(self) -> "ServerProcess":
        cmd = self.command()
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.cwd(), env=self.env())
        deadline = time.monotonic() + self.ready_timeout
        for _ in range(int(self.ready_timeout / 0.05) + 10):  # bounded poll
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self._close_log()
                raise RuntimeError(f"{self.name} exited early (rc={rc}); cmd={cmd}\n{self.output()}")
            if self.is_ready():
                return self
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} not ready after {self.ready_timeout}s; cmd={cmd}\n{self.output()}")

    def stop(self, timeout: float = 10.0) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self._close_log()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _close_log(self):
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()


# --------------------------------------------------------------------------
# Knot
# --------------------------------------------------------------------------

def _yaml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def knot_config(zones: Sequence[Tuple[str, str]], port: int, rundir: str,
                version: Optional[str] = None, identity: Optional[str] = None,
                listen_v6: bool = False, extra_server: str = "",
                semantic_checks: bool = False) -> str:
    """knotd configuration text.  version/identity: None = Knot's default
    ("Knot DNS x.y.z" / hostname); "" = disabled (CH queries REFUSED)."""
    lines = ["server:", f"    rundir: {rundir}", f"    listen: {HOST}@{port}"]
    if listen_v6:
        lines.append(f"    listen: ::1@{port}")
    if version is not None:
        lines.append(f"    version: {_yaml_str(version)}")
    if identity is not None:
        lines.append(f"    identity: {_yaml_str(identity)}")
    lines += ["    udp-workers: 1", "    tcp-workers: 1", "    background-workers: 1"]
    if extra_server:
        lines += ["    " + l for l in extra_server.strip().splitlines()]
    lines += ["", "database:", f"    storage: {rundir}", "",
              "template:", "  - id: default", f"    storage: {rundir}",
              "    zonefile-sync: -1", "    zonefile-load: whole", "    journal-content: none",
              f"    semantic-checks: {'on' if semantic_checks else 'off'}",
              "", "log:", "  - target: stdout", "    any: info", "", "zone:"]
    for origin, path in zones:
        lines += [f"  - domain: {_yaml_str(origin)}", f"    file: {_yaml_str(path)}"]
    return "\n".join(lines) + "\n"


class KnotServer(ServerProcess):
    name = "knotd"

    def __init__(self, zones: Sequence[ZoneSpec], version: Optional[str] = None,
                 identity: Optional[str] = None, port: Optional[int] = None,
                 ready_timeout: float = 15.0, extra_server: str = ""):
        super().__init__(port=port, ready_timeout=ready_timeout)
        self.zones = _norm_zones(zones)
        self.binary = knotd_path()
        if self.binary is None:
            raise FileNotFoundError("knotd not installed")
        self.conf_path = os.path.join(self.workdir, "knot.conf")
        with open(self.conf_path, "w") as f:
            f.write(knot_config(self.zones, self.port, self.workdir, version, identity,
                                extra_server=extra_server))

    def command(self) -> list:
        return [self.binary, "-c", self.conf_path]

    def is_ready(self) -> bool:
        """Ready when every configured zone answers SOA with AA (zones loaded)."""
        for origin, _ in self.zones:
            q = dns.message.make_query(origin, "SOA")
            r = udp_query(q.to_wire(), self.addr, timeout=0.3)
            if r is None:
                return False
            try:
                m = dns.message.from_wire(r)
            except Exception:
                return False
            if m.rcode() != 0 or not (m.flags & dns.flags.AA) or not m.answer:
                return False
        return True

    def start(self) -> "KnotServer":
        try:
            return super().start()
        except RuntimeError as e:
            raise RuntimeError(f"{e}\nconfig:\n{open(self.conf_path).read()}") from None


def knot_check_zone(origin: str, path: str, timeout: float = 60.0) -> Tuple[bool, str]:
    """Offline zone check with Knot's own loader and semantic checks (kzonecheck
    if installed, else `knotc zone-check` with semantic-checks: on — the Debian
    knot package does not ship kzonecheck).  Returns (ok, output)."""
    path = os.path.abspath(path)
    kz = shutil.which("kzonecheck")
    if kz:
        p = subprocess.run([kz, "-o", origin, path], capture_output=True, text=True, timeout=timeout)
        return p.returncode == 0, p.stdout + p.stderr
    knotc = knotc_path()
    if knotc is None:
        raise FileNotFoundError("neither kzonecheck nor knotc installed")
    d = tempfile.mkdtemp(prefix="knot-zonecheck-")
    try:
        conf = os.path.join(d, "knot.conf")
        with open(conf, "w") as f:
            f.write(knot_config([(origin, path)], 53, d, semantic_checks=True))
        p = subprocess.run([knotc, "-c", conf, "zone-check", origin],
                           capture_output=True, text=True, timeout=timeout)
        out = p.stdout + p.stderr
        # knotc prints loader errors but may exit 0 for some of them: treat any "error" as failure
        ok = p.returncode == 0 and "error" not in out.lower()
        return ok, out
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --------------------------------------------------------------------------
# stormpy
# --------------------------------------------------------------------------

def default_zone_arg(origin: str, path: str) -> list:
    """How a zone is passed on the stormpy command line (positional ZONE...).
    Override via the zone_arg parameter if the CLI wants e.g. ORIGIN=PATH."""
    return [path]


class StormpyServer(ServerProcess):
    """`python -m stormpy serve-dns ZONE... --listen 127.0.0.1:PORT --workers 1 [extra_args]`"""

    name = "stormpy"

    def __init__(self, zones: Sequence[ZoneSpec], extra_args: Sequence[str] = (),
                 port: Optional[int] = None, ready_timeout: float = 15.0,
                 python: Optional[str] = None, zone_arg=default_zone_arg,
                 workers: int = 1):
        super().__init__(port=port, ready_timeout=ready_timeout)
        self.zones = _norm_zones(zones)
        self.extra_args = list(extra_args)
        self.python = python or sys.executable
        self.zone_arg = zone_arg
        self.workers = workers

    def command(self) -> list:
        cmd = [self.python, "-m", "stormpy", "serve-dns"]
        for origin, path in self.zones:
            cmd += self.zone_arg(origin, path)
        cmd += ["--listen", f"{HOST}:{self.port}", "--workers", str(self.workers)]
        return cmd + self.extra_args

    def cwd(self) -> str:
        return REPO_ROOT  # so `-m stormpy` resolves to the work tree if not installed

    def env(self) -> dict:
        e = dict(os.environ)
        e["PYTHONPATH"] = REPO_ROOT + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
        e.setdefault("PYTHONUNBUFFERED", "1")
        return e


# --------------------------------------------------------------------------
# pytest fixtures
# --------------------------------------------------------------------------

def _key(zones, *rest):
    return (tuple(tuple(z) for z in _norm_zones(zones)),) + tuple(
        tuple(r) if isinstance(r, list) else r for r in rest)


def _reusing(start, key):
    """A session fixture body: a factory that starts each distinct server once (a
    failed start is remembered, not retried per test) and cleans all up at the end."""
    started, failed = {}, {}

    def factory(*args, **kw):
        k = key(*args, **kw)
        if k not in failed and k not in started:
            try:
                started[k] = start(*args, **kw)
            except Exception as e:
                failed[k] = e
        if k in failed:
            raise failed[k]
        return started[k]

    try:
        yield factory
    finally:
        for s in started.values():
            s.cleanup()


if pytest is not None:

    @pytest.fixture(scope="session")
    def knot_server():
        """Factory: knot_server(zones, version=None, identity=None) -> KnotServer (started).
        Skips (with the reason printed) only if knotd is not installed."""
        if knotd_path() is None:
            reason = "knotd (Knot DNS) is not installed; reference-server tests skipped"
            print(f"\nSKIP: {reason}")
            pytest.skip(reason)

        def start(zones, version=None, identity=None, tag=None):
            """tag: any value; distinct tags give distinct server instances."""
            return KnotServer(zones, version=version, identity=identity).start()

        yield from _reusing(start, lambda zones, version=None, identity=None, tag=None:
                            _key(zones, version, identity, tag))

    @pytest.fixture(scope="session")
    def stormpy_server():
        """Factory: stormpy_server(zones, extra_args=()) -> StormpyServer (started,
        answering UDP).  Stopped with SIGTERM at session end."""
        def start(zones, extra_args=(), **kw):
            """kw: passed to StormpyServer (port, ready_timeout, python, zone_arg, workers)."""
            srv = StormpyServer(zones, extra_args=extra_args, **kw)
            try:
                return srv.start()
            except Exception:
                srv.cleanup()
                raise

        yield from _reusing(start, lambda zones, extra_args=(), **kw:
                            _key(zones, list(extra_args), tuple(sorted(kw.items()))))
