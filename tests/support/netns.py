"""Test hosts in network namespaces: a server and a client joined by a veth pair,
numbered from 198.18.0.0/15 and 2001:2::/48, removed again afterwards. Every wait
here is bounded."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from stormpy.bench import netns as bench_netns
from stormpy.bench.netns import CLIENT_V4, CLIENT_V6, SERVER_V4, SERVER_V6  # noqa: F401

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def why_no_netns():
    """None when network namespaces and veth can be made here, else the reason."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    if shutil.which("ip") is None:
        return "iproute2 ('ip') is not installed"
    probe = f"sp-probe-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot create a network namespace: {r.stderr.strip()}"
    try:
        r = subprocess.run(["ip", "-n", probe, "link", "set", "lo", "up"], capture_output=True, text=True)
        if r.returncode != 0:
            return f"cannot enter a network namespace: {r.stderr.strip()}"
        r = subprocess.run(["ip", "-n", probe, "link", "add", "spprobe0", "type", "veth", "peer",
                            "name", "spprobe1"], capture_output=True, text=True)
        if r.returncode != 0:
            return f"cannot create a veth pair: {r.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class VethPair(bench_netns.VethPair):
    """Namespaces `server` and `client`, each with interface veth0 (the benchmarks'
    pair, with the kernel's ARP and NDP left as they are)."""

    def __init__(self, queues=1):
        super().__init__(queues, prefix="sp", static_neighbours=False)

    def run(self, ns, *cmd, timeout=60):
        return subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True,
                              timeout=timeout)

    def query(self, questions, server=SERVER_V4, port=53, tcp=False, timeout=2.0):
        """Ask from the client namespace; [{rcode, answer: [...]} or None] per question."""
        script = os.path.join(REPO, "tests", "ns_client.py")
        r = self.run(self.client, sys.executable, script, "dns", server, str(port), "tcp" if tcp else "udp",
                     str(timeout), json.dumps(questions), timeout=30 + timeout * len(questions))
        if r.returncode != 0:
            raise RuntimeError(f"ns_client failed: {r.stderr.strip()}")
        return json.loads(r.stdout)


class NsServer:
    """`stormpy serve-dns` inside the server namespace, ready when it answers."""

    def __init__(self, pair, args):
        self.pair = pair
        self.args = args
        self.log = ""
        self.prefix = []      # a command that execs the rest (e.g. to enter a cgroup)

    def __enter__(self):
        cmd = [*self.prefix, "ip", "netns", "exec", self.pair.server, sys.executable, "-m",
               "stormpy", "serve-dns", *self.args]
        env = dict(os.environ, PYTHONPATH=REPO, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.proc.stdout.read()}")
            if self.pair.query([["www.example.com", "A"]], timeout=0.5)[0] is not None:
                return self
        self.__exit__()
        raise RuntimeError("server did not answer within 20 s")

    def stop(self):
        if self.log:
            return self.proc.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log = self.proc.stdout.read()
        return self.proc.returncode

    def __exit__(self, *exc):
        self.stop()


class ImpairedPath:
    """Namespaces `client`, `bridge` and `server`: client veth0 (198.18.4.2) is linked to
    the bridge's `left`, the bridge's `right` to server veth0 (198.18.4.1), so every
    frame between them crosses the bridge namespace, where `stormpy impair` forwards it.
    Nothing passes until it runs. The hosts' veths send real frames (no TSO or GSO, whole
    checksums), as any frame forwarder needs."""
    SERVER, CLIENT = "198.18.4.1", "198.18.4.2"

    def __init__(self):
        n = f"{os.getpid() % 100000}"
        self.client, self.bridge, self.server = (f"spi-cli-{n}", f"spi-br-{n}", f"spi-srv-{n}")

    def sh(self, *cmd):
        r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")

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
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for ns in (self.client, self.bridge, self.server):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def popen(self, ns, *cmd):
        env = dict(os.environ, PYTHONPATH=REPO, PYTHONUNBUFFERED="1")
        return subprocess.Popen(["ip", "netns", "exec", ns, *cmd], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, ns, *cmd, timeout=60):
        return subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True,
                              timeout=timeout)
