"""A server under test as a subprocess on 127.0.0.1 with a free port, ready when it
answers; every wait bounded in time and iterations."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from typing import Iterable, Optional, Sequence, Tuple, Union

from support.client import probe_wire, udp_query

HOST = "127.0.0.1"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ZoneSpec = Union[Tuple[str, str], str]


def which(cands: Iterable[str]) -> Optional[str]:
    for c in cands:
        p = shutil.which(c) if os.sep not in c else (c if os.access(c, os.X_OK) else None)
        if p:
            return p
    return None


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


def pss_kib(pids) -> int:
    """Proportional set size of these processes together (shared pages counted once)."""
    kib = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                kib += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return kib


def process_tree(pid: int) -> list:
    """pid and every process descended from it (workers, their helpers), as /proc shows now."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, ()))
    return tree


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def norm_zones(zones: Sequence[ZoneSpec]) -> list:
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


class ServerProcess(ABC):
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

    @abstractmethod
    def command(self) -> list:
        """The server's command line."""

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
