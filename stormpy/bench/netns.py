"""Two network namespaces joined by a veth pair, for the benchmarks: the server side
198.18.0.1 / 2001:2::1 and the load-generator side 198.18.0.2 / 2001:2::2 (RFC 2544
benchmarking ranges), each with interface veth0. They are created by the benchmark and
removed again on exit; nothing outside them is touched."""
from __future__ import annotations

import itertools
import os
import shutil
import subprocess

from stormpy.bench.errors import BenchError

SERVER_V4, CLIENT_V4 = "198.18.0.1", "198.18.0.2"
SERVER_V6, CLIENT_V6 = "2001:2::1", "2001:2::2"
IFACE = "veth0"
_serial = itertools.count()


def why_no_netns():
    """None when namespaces and a veth pair can be made here, else the reason (one line)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, XDP programs); run it as root"
    if shutil.which("ip") is None:
        return "ip not found: apt-get install iproute2"
    return None


def _sh(*cmd, check=True):
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise BenchError(f"{' '.join(cmd)}: {r.stderr.strip() or 'failed'}")
    return r


class VethPair:
    """Namespaces `server` and `client`, each with veth0; a context manager."""

    def __init__(self, queues: int = 1, prefix: str = "spb", static_neighbours: bool = True):
        n = f"{os.getpid() % 100000}x{next(_serial)}"
        self.server, self.client = f"{prefix}-srv-{n}", f"{prefix}-cli-{n}"
        self.queues = queues
        self.iface = IFACE
        self.static_neighbours = static_neighbours
        self.server_mac = self.client_mac = None

    def __enter__(self):
        try:
            for ns in (self.server, self.client):
                _sh("ip", "netns", "add", ns)
                _sh("ip", "-n", ns, "link", "set", "lo", "up")
            q = ["numrxqueues", str(self.queues), "numtxqueues", str(self.queues)]
            _sh("ip", "-n", self.server, "link", "add", IFACE, *q, "type", "veth",
                "peer", "name", IFACE, "netns", self.client, *q)
            for ns, v4, v6 in ((self.server, SERVER_V4, SERVER_V6), (self.client, CLIENT_V4, CLIENT_V6)):
                _sh("ip", "-n", ns, "addr", "add", f"{v4}/24", "dev", IFACE)
                _sh("ip", "-n", ns, "addr", "add", f"{v6}/64", "dev", IFACE, "nodad")
                _sh("ip", "-n", ns, "link", "set", IFACE, "up")
            self.server_mac = self._mac(self.server)
            self.client_mac = self._mac(self.client)
            if not self.static_neighbours:
                return self
            # Static neighbours: no ARP in the measured traffic, on either side.
            _sh("ip", "-n", self.server, "neigh", "replace", CLIENT_V4, "lladdr", self.client_mac,
                "dev", IFACE, "nud", "permanent")
            _sh("ip", "-n", self.client, "neigh", "replace", SERVER_V4, "lladdr", self.server_mac,
                "dev", IFACE, "nud", "permanent")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _mac(self, ns: str) -> str:
        with_ns = _sh("ip", "-n", ns, "-o", "link", "show", IFACE).stdout
        parts = with_ns.split()
        return parts[parts.index("link/ether") + 1]

    def __exit__(self, *exc):
        for ns in (self.server, self.client):
            _sh("ip", "netns", "del", ns, check=False)

    def argv(self, ns: str, *cmd) -> list:
        return ["ip", "netns", "exec", ns, *cmd]

    def run(self, ns: str, *cmd, timeout: float = 60):
        return subprocess.run(self.argv(ns, *cmd), capture_output=True, text=True, timeout=timeout)
