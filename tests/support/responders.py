"""Running the examples/ responders for tests: one place that starts an example
and talks to it, on the socket backend (loopback) or on a ring backend across a
veth pair (server and client in their own namespaces), so one test body runs on
every backend."""
import json
import os
import subprocess
import sys
import time

from support.netns import CLIENT_V4, SERVER_V4, VethPair, stop_process  # noqa: F401

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIENT = os.path.join(REPO, "tests", "ns_client.py")


def example(name):
    return os.path.join(REPO, "examples", name)


class Site:
    """Where a responder runs: backend 'socket' (loopback) or a ring backend."""

    def __init__(self, backend):
        self.backend = backend
        self.pair = None
        self.procs = []

    def __enter__(self):
        if self.backend != "socket":
            self.pair = VethPair().__enter__()
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            stop(p)
        if self.pair:
            self.pair.__exit__(*exc)

    @property
    def address(self):
        return "127.0.0.1" if self.pair is None else SERVER_V4

    def _in(self, ns, cmd):
        return cmd if self.pair is None else ["ip", "netns", "exec", ns, *cmd]

    def start(self, script, port, *args, ready=None):
        """The example on this site; ready() -> bool says it answers (20 s at most)."""
        where = (["--listen", f"127.0.0.1:{port}"] if self.pair is None else
                 ["--iface", "veth0", "--backend", self.backend, "--port", str(port)])
        cmd = self._in(self.pair and self.pair.server,
                       [sys.executable, script, *where, "--control", "", *args])
        env = dict(os.environ, PYTHONPATH=REPO, PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.procs.append(proc)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{script} exited: {proc.stdout.read()}")
            if ready is None or ready():
                return proc
            time.sleep(0.1)
        raise RuntimeError(f"{script} did not answer within 20 s")

    def client(self, kind, port, items, timeout=1.0, host=None, ns="client"):
        """Run ns_client.py from the client namespace (or the server's, ns='server')."""
        host = host or self.address
        ns_name = None if self.pair is None else getattr(self.pair, ns)
        cmd = self._in(ns_name, [sys.executable, CLIENT, kind, host, str(port), str(timeout),
                                 json.dumps(items)])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30 + timeout * len(items))
        if r.returncode != 0:
            raise RuntimeError(f"ns_client failed: {r.stderr.strip()}")
        return r.stdout

    def udp(self, port, payloads, timeout=1.0):
        out = json.loads(self.client("udp", port, [p.hex() for p in payloads], timeout))
        return [None if x is None else bytes.fromhex(x) for x in out]

    def tcp_control(self, port, lines):
        """Lines to the example's control port, which listens on the server's loopback."""
        return json.loads(self.client("tcp", port, lines, 2.0, host="127.0.0.1", ns="server"))


def stop(proc):
    """SIGTERM, then the output; the exit status must be 0."""
    stop_process(proc)
    if not hasattr(proc, "log"):
        proc.log = proc.stdout.read()
    return proc.log
