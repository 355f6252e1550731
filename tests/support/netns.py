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
from stormpy.bench.netns import ImpairedPath  # noqa: F401

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

    def __init__(self, queues=1, client_xdp=False):
        super().__init__(queues, prefix="sp", static_neighbours=False, client_xdp=client_xdp)

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


def stop_process(proc):
    """SIGTERM, then SIGKILL after 10 s; waits for it either way."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


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
        stop_process(self.proc)
        self.log = self.proc.stdout.read()
        return self.proc.returncode

    def __exit__(self, *exc):
        self.stop()

