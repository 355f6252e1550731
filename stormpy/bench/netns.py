"""Two network namespaces joined by a veth pair, for the benchmarks: the server side
198.18.0.1 / 2001:2::1 and the load-generator side 198.18.0.2 / 2001:2::2 (RFC 2544
benchmarking ranges), each with interface veth0. They are created by the benchmark and
removed again on exit; nothing outside them is touched."""
from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys

from stormpy.bench.errors import BenchError
from stormpy.bench.processes import REPO_ROOT, wait_for_output

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


def _mac(ns: str) -> str:
    """The MAC address of the namespace's veth0."""
    parts = _sh("ip", "-n", ns, "-o", "link", "show", IFACE).stdout.split()
    return parts[parts.index("link/ether") + 1]


class VethPair:
    """Namespaces `server` and `client`, each with veth0; a context manager."""

    def __init__(self, queues: int = 1, prefix: str = "spb", static_neighbours: bool = True,
                 client_xdp: bool = False):
        n = f"{os.getpid() % 100000}x{next(_serial)}"
        self.client_xdp = client_xdp
        self._client_program = None
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
            self.server_mac = _mac(self.server)
            self.client_mac = _mac(self.client)
            if self.client_xdp:
                self.hold_client_program()
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

    def hold_client_program(self):
        """A veth takes the frames its peer's native XDP program sends (XDP_TX) only while
        it has an XDP program itself, as a NIC's TX ring would: stormpy's steer program,
        held by a child, steering a port nobody serves (so it passes every frame)."""
        hold = ("import sys; from stormpy import _core; "
                "p = _core.XdpProgram(sys.argv[1], 9, 'native'); print('held', flush=True); "
                "sys.stdin.read()")
        self._client_program = subprocess.Popen(
            self.argv(self.client, sys.executable, "-c", hold, IFACE), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if self._client_program.stdout.readline().strip() != "held":
            raise BenchError("client XDP program: " + self._client_program.stderr.read().strip())

    def release_client_program(self):
        if self._client_program is not None:
            self._client_program.stdin.close()
            self._client_program.wait(timeout=10)
            self._client_program = None

    def __exit__(self, *exc):
        self.release_client_program()
        for ns in (self.server, self.client):
            _sh("ip", "netns", "del", ns, check=False)

    def argv(self, ns: str, *cmd) -> list:
        return ["ip", "netns", "exec", ns, *cmd]

    def run(self, ns: str, *cmd, timeout: float = 60):
        return subprocess.run(self.argv(ns, *cmd), capture_output=True, text=True, timeout=timeout)


class ImpairedPath:
    """Namespaces `client`, `bridge` and `server`: client veth0 (198.18.4.2) is linked to
    the bridge's `left`, the bridge's `right` to server veth0 (198.18.4.1), so every
    frame between them crosses the bridge namespace, where `stormpy impair` forwards it.
    Nothing passes until it runs; the hosts know each other's MAC without ARP. The hosts'
    veths send real frames (no TSO or GSO, whole checksums), as any frame forwarder
    needs."""
    SERVER, CLIENT = "198.18.4.1", "198.18.4.2"

    def __init__(self):
        n = f"{os.getpid() % 100000}x{next(_serial)}"
        self.client, self.bridge, self.server = (f"spi-cli-{n}", f"spi-br-{n}", f"spi-srv-{n}")

    def sh(self, *cmd):
        _sh(*cmd)

    def __enter__(self):
        try:
            for ns in (self.client, self.bridge, self.server):
                self.sh("ip", "netns", "add", ns)
                self.sh("ip", "-n", ns, "link", "set", "lo", "up")
            self.sh("ip", "-n", self.client, "link", "add", "veth0", "type", "veth", "peer",
                    "name", "left", "netns", self.bridge)
            self.sh("ip", "-n", self.server, "link", "add", "veth0", "type", "veth", "peer",
                    "name", "right", "netns", self.bridge)
            for ns, addr in ((self.client, self.CLIENT), (self.server, self.SERVER)):
                self.sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "veth0")
                self.sh("ip", "-n", ns, "link", "set", "veth0", "up")
                # a frame forwarder sees real frames: whole checksums, no 64 KB segments
                self.sh("ip", "netns", "exec", ns, "ethtool", "-K", "veth0", "tx", "off",
                        "tso", "off", "gso", "off")
            for iface in ("left", "right"):
                self.sh("ip", "-n", self.bridge, "link", "set", iface, "up")
            # Static neighbours: an ARP request lost on the path, or sent before impair
            # runs, would fail the connection that waits on it (the entry goes FAILED).
            for ns, peer, peer_ns in ((self.client, self.SERVER, self.server),
                                      (self.server, self.CLIENT, self.client)):
                self.sh("ip", "-n", ns, "neigh", "replace", peer, "lladdr", _mac(peer_ns),
                        "dev", IFACE, "nud", "permanent")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for ns in (self.client, self.bridge, self.server):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def popen(self, ns, *cmd):
        env = dict(os.environ, PYTHONPATH=REPO_ROOT, PYTHONUNBUFFERED="1")
        return subprocess.Popen(["ip", "netns", "exec", ns, *cmd], cwd=REPO_ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, ns, *cmd, timeout=60):
        return subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True,
                              timeout=timeout)

    def impair(self, *args, seconds: float = 30.0) -> subprocess.Popen:
        """`stormpy impair left right *args` in the bridge namespace, once it forwards."""
        proc = self.popen(self.bridge, sys.executable, "-m", "stormpy", "impair", "left",
                          "right", *args)
        wait_for_output(proc, "impair: forwarding", seconds)
        return proc
