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

    from support.servers import knot_server, stormpy_server      # tests/ on sys.path

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
import subprocess
import sys
import tempfile
from typing import Optional, Sequence, Tuple

import dns.flags
import dns.message

from stormpy.bench.servers import write_knot_config
from support.client import udp_query
from support.process import HOST, REPO_ROOT, ServerProcess, ZoneSpec, norm_zones, which

try:  # pytest is optional for the plain API
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

KNOTD_CANDIDATES = ("knotd", "/usr/sbin/knotd", "/usr/local/sbin/knotd")
KNOTC_CANDIDATES = ("knotc", "/usr/sbin/knotc", "/usr/local/sbin/knotc")


def knotd_path() -> Optional[str]:
    return which(KNOTD_CANDIDATES)


def knotc_path() -> Optional[str]:
    return which(KNOTC_CANDIDATES)


def knot_config(zones: Sequence[Tuple[str, str]], port: int, rundir: str,
                version: Optional[str] = None, identity: Optional[str] = None,
                semantic_checks: bool = False, nsid: Optional[str] = None) -> dict:
    """knotd's configuration.  version/identity: None = Knot's default
    ("Knot DNS x.y.z" / hostname); "" = disabled (CH queries REFUSED). nsid: the same
    (Knot's default NSID is the hostname)."""
    server = {"rundir": rundir, "listen": f"{HOST}@{port}"}
    if version is not None:
        server["version"] = version
    if identity is not None:
        server["identity"] = identity
    if nsid is not None:
        server["nsid"] = nsid
    server.update({"udp-workers": 1, "tcp-workers": 1, "background-workers": 1})
    return {"server": server,
            "database": {"storage": rundir},
            "template": [{"id": "default", "storage": rundir, "zonefile-sync": -1,
                          "zonefile-load": "whole", "journal-content": "none",
                          "semantic-checks": semantic_checks}],
            "log": [{"target": "stdout", "any": "info"}],
            "zone": [{"domain": origin, "file": path} for origin, path in zones]}


class KnotServer(ServerProcess):
    name = "knotd"

    def __init__(self, zones: Sequence[ZoneSpec], version: Optional[str] = None,
                 identity: Optional[str] = None, port: Optional[int] = None,
                 ready_timeout: float = 15.0, nsid: Optional[str] = None):
        super().__init__(port=port, ready_timeout=ready_timeout)
        self.zones = norm_zones(zones)
        self.binary = knotd_path()
        if self.binary is None:
            raise FileNotFoundError("knotd not installed")
        self.conf_path = os.path.join(self.workdir, "knot.conf")
        write_knot_config(self.conf_path, knot_config(self.zones, self.port, self.workdir,
                                                      version, identity, nsid=nsid),
                           "stormpy tests")

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
        write_knot_config(conf, knot_config([(origin, path)], 53, d, semantic_checks=True),
                          "stormpy tests")
        p = subprocess.run([knotc, "-c", conf, "zone-check", origin],
                           capture_output=True, text=True, timeout=timeout)
        out = p.stdout + p.stderr
        # knotc prints loader errors but may exit 0 for some of them: treat any "error" as failure
        ok = p.returncode == 0 and "error" not in out.lower()
        return ok, out
    finally:
        shutil.rmtree(d, ignore_errors=True)


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
        self.zones = norm_zones(zones)
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


def _key(zones, *rest):
    return (tuple(tuple(z) for z in norm_zones(zones)),) + tuple(
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
        """Factory: knot_server(zones, version=None, identity=None, nsid=None) -> KnotServer
        (started).
        Skips (with the reason printed) only if knotd is not installed."""
        if knotd_path() is None:
            reason = "knotd (Knot DNS) is not installed; reference-server tests skipped"
            print(f"\nSKIP: {reason}")
            pytest.skip(reason)

        def start(zones, version=None, identity=None, tag=None, nsid=None):
            """tag: any value; distinct tags give distinct server instances."""
            return KnotServer(zones, version=version, identity=identity, nsid=nsid).start()

        yield from _reusing(start, lambda zones, version=None, identity=None, tag=None, nsid=None:
                            _key(zones, version, identity, tag, nsid))

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
