"""stormpy impair between two namespaces (this kernel has no netem): frames cross only
while it runs, and under loss, duplication, reordering and delay real clients still
download serve-http's files byte-exact from the kernel's TCP, while the counters show
the impairment happened."""
import os
import signal
import subprocess
import sys
import time

import pytest

from stormpy.bench.nginx import nginx_path
from stormpy.bench.processes import wait_for_output
from stormpy.bench.site import make_site, sha256_of
from support.http import curl_digests
from support.netns import ImpairedPath, why_no_netns
from support.process import REPO_ROOT

NO_NETNS = why_no_netns()
pytestmark = pytest.mark.skipif(NO_NETNS is not None, reason=f"{NO_NETNS}")
FILES = ["/f-1024.bin", "/f-65536.bin", "/f-1048576.bin", "/index.html"]


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    root = tmp_path_factory.mktemp("impair-site") / "site"
    make_site(root, sizes=(1024, 65536, 1 << 20))
    with ImpairedPath() as p:
        server = p.popen(p.server, sys.executable, "-m", "stormpy", "serve-http", str(root),
                         "--listen", f"{p.SERVER}:80", "--workers", "1", "--control", "")
        try:
            wait_for_output(server, "info: serving")
            p.digests = sha256_of(root)
            yield p
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=10)


class Impair:
    def __init__(self, p, *args):
        self.p, self.args = p, args

    def __enter__(self):
        self.proc = self.p.impair(*self.args)
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        out, err = self.proc.communicate(timeout=15)
        self.counters = {}
        for line in out.splitlines():
            name, _, rest = line.partition(": ")
            self.counters[name] = {k: int(v) for k, v in (f.split("=") for f in rest.split())}
        assert self.proc.returncode == 0, err


def download(p, paths, timeout=60):
    """Every path on one curl run (one kept-alive connection); their SHA-256s."""
    return curl_digests(p.run, p.client, p.SERVER, paths, timeout, retries=0)


def test_nothing_crosses_without_it(path):
    r = path.run(path.client, "ping", "-c", "1", "-W", "1", path.SERVER, timeout=10)
    assert r.returncode != 0


@pytest.mark.parametrize("args,counter", [
    ((), None),
    (("--loss", "1"), "lost"),
    (("--loss", "5%"), "lost"),
    (("--duplicate", "5"), "duplicated"),
    (("--reorder", "5", "--reorder-delay", "3"), "reordered"),
    (("--loss", "2", "--duplicate", "2", "--reorder", "2", "--delay", "5"), "lost"),
])
def test_downloads_are_byte_exact_through_the_impairment(path, args, counter):
    with Impair(path, *args) as im:
        got = download(path, FILES * 2)
    assert got == [path.digests[f] for f in FILES * 2]
    ways = list(im.counters.values())
    assert len(ways) == 2 and all(w["received"] > 0 and w["sent"] > 0 for w in ways)
    if counter is None:
        assert all(w["sent"] == w["received"] for w in ways)
        assert sum(w["lost"] + w["duplicated"] + w["reordered"] for w in ways) == 0
    else:
        assert sum(w[counter] for w in ways) > 0, im.counters
    for w in ways:
        assert w["overflow"] == w["oversized"] == 0
        assert w["sent"] == w["received"] - w["lost"] + w["duplicated"]


def test_delay_shows_in_the_round_trip(path):
    with Impair(path, "--delay", "10"):
        r = path.run(path.client, "ping", "-c", "3", "-i", "0.2", "-W", "2", path.SERVER,
                     timeout=20)
    assert r.returncode == 0, r.stdout + r.stderr
    rtts = [float(x.split("time=")[1].split()[0]) for x in r.stdout.splitlines() if "time=" in x]
    assert len(rtts) == 3 and all(19.0 <= t < 60 for t in rtts), rtts


def test_one_way_leaves_the_return_path_alone(path):
    with Impair(path, "--loss", "5", "--one-way") as im:
        download(path, FILES)
    forward, back = im.counters["left->right"], im.counters["right->left"]
    assert forward["lost"] > 0 and back["lost"] == 0 and back["sent"] == back["received"]


def test_bad_interface_is_one_line(path):
    r = path.run(path.bridge, sys.executable, "-m", "stormpy", "impair", "left", "nosuch0",
                 timeout=20)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "nosuch0" in r.stderr, r.stderr


def test_a_syn_flood_does_not_keep_real_clients_out(path):
    """Spoofed SYNs (from 198.19.0.0/16, routed back into the client namespace, where
    they die) fill the server's SYN queue; the kernel's SYN cookies keep serve-http
    reachable on the embedded default."""
    route = path.run(path.server, "ip", "route", "replace", "198.19.0.0/16", "via", path.CLIENT)
    assert route.returncode == 0, route.stderr
    before = nstat(path, "TcpExtSyncookiesSent")
    with Impair(path):
        flood = path.popen(path.client, sys.executable, os.path.join("tests", "ns_client.py"),
                           "synflood", path.SERVER, "80", "40000", "4")
        try:
            time.sleep(0.5)
            fetched = 0
            for _ in range(10):
                fetched += download(path, ["/index.html"], timeout=5) == [path.digests["/index.html"]]
            assert flood.poll() is None, "the flood ended before the clients did"
        finally:
            out, err = flood.communicate(timeout=30)
    assert fetched == 10
    assert int(out) > 10000, err
    assert nstat(path, "TcpExtSyncookiesSent") - before > 0


def nstat(p, counter):
    r = p.run(p.server, "nstat", "-az", counter)
    return int(next(line.split()[1] for line in r.stdout.splitlines() if counter in line))


@pytest.mark.skipif(nginx_path() is None, reason="nginx is not installed")
def test_the_loss_benchmark_measures_both_servers_through_the_path():
    import json
    env = dict(os.environ, PYTHONPATH=REPO_ROOT)
    r = subprocess.run([sys.executable, "-m", "stormpy", "bench", "http-loss", "--seconds", "1",
                        "--sizes", "64k", "--loss", "5", "--json"], capture_output=True,
                       text=True, timeout=180, env=env, cwd=REPO_ROOT)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["results"]
    assert [(row["loss"], row["size"]) for row in rows] == [(0.0, 65536), (5.0, 65536)]
    for row in rows:
        for name in ("stormpy", "nginx"):
            assert row[name]["requests"] > 0 and row[name]["errors"] == 0, row
        assert row["stormpy-xdp"]["requests"] > 0, row       # its own TCP on AF_XDP
    # lost frames cost throughput, for both
    for name in ("stormpy", "nginx"):
        assert rows[1][name]["transfer_bytes_per_s"] < rows[0][name]["transfer_bytes_per_s"]


def test_it_stops_with_one_line_when_an_interface_goes_away():
    with ImpairedPath() as p:
        proc = p.impair()
        p.sh("ip", "-n", p.bridge, "link", "del", "left")   # takes its peer with it
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=10)
            raise AssertionError(f"impair kept running without its interface: {out} {err}")
    assert proc.returncode == 1 and "No such device" in err and "Traceback" not in err, err
