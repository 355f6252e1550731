"""Worker processes under the supervisor: a worker that dies is replaced at once,
keeps its counters, and the server still stops cleanly. The ring backends get the
same test body in test_rings.py."""
import json
import os
import signal
import subprocess
import sys
import time

import dns.message
import dns.rcode

from conftest import EXAMPLE_ZONE, REPO
from stormpy.control import read_snapshot
from support.client import tcp_many, udp

ZONES = [("example.com.", EXAMPLE_ZONE)]


def snapshot(control):
    """The server's counters, read from its control socket in this process (polling
    through `stormpy stats` would add a Python start-up to every look)."""
    return read_snapshot(control)


def test_stats_command_reads_the_same_snapshot(stormpy_server, tmp_path):
    control = str(tmp_path / "ctl.sock")
    stormpy_server(ZONES, ["--control", control], workers=2)
    r = subprocess.run([sys.executable, "-m", "stormpy", "stats", "--control", control, "--json"],
                       cwd=REPO, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert [w["pid"] for w in json.loads(r.stdout)["workers"]] == \
        [w["pid"] for w in snapshot(control)["workers"]]


def wait_for_replacement(control, index, old_pid, limit=5.0):
    """Seconds until worker `index` runs under a new pid that has opened its backend."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        w = snapshot(control)["workers"][index]
        if w["pid"] not in (0, old_pid) and w["ready"]:
            return time.monotonic() - start, w
        time.sleep(0.02)
    raise AssertionError(f"worker {index} was not replaced within {limit} s")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def answered(addr, count):
    """How many of `count` queries (each from a new source port, so SO_REUSEPORT
    spreads them over every worker) are answered correctly."""
    ok = 0
    for i in range(count):
        r = udp(dns.message.make_query("www.example.com", "A"), addr, timeout=1.0)
        ok += r is not None and r.rcode() == dns.rcode.NOERROR and len(r.answer) == 1
    return ok


def test_killed_worker_is_replaced_and_keeps_its_counters(stormpy_server, tmp_path):
    control = str(tmp_path / "ctl.sock")
    srv = stormpy_server(ZONES, ["--control", control], workers=2)
    assert answered(srv.addr, 40) == 40
    before = snapshot(control)
    pids = [w["pid"] for w in before["workers"]]
    assert [w["kind"] for w in before["workers"]] == ["frames", "frames", "tcp"]
    assert all(pids) and len(set(pids)) == 3 and srv.proc.pid not in pids
    rx_before = [w["rx"] for w in before["workers"][:2]]
    assert all(rx_before), "both UDP workers should have taken queries"

    os.kill(pids[0], signal.SIGKILL)
    took, w = wait_for_replacement(control, 0, pids[0])
    assert took < 1.0, f"replaced after {took:.2f} s"
    assert w["restarts"] == 1 and w["rx"] >= rx_before[0]     # counters continue
    assert answered(srv.addr, 40) == 40
    after = snapshot(control)["workers"]
    assert after[0]["rx"] > rx_before[0] and after[1]["pid"] == pids[1]
    assert not alive(pids[0])


def test_killed_tcp_worker_is_replaced_and_keeps_its_counters(stormpy_server, tmp_path):
    control = str(tmp_path / "ctl.sock")
    srv = stormpy_server(ZONES, ["--control", control], workers=1)
    query = dns.message.make_query("www.example.com", "A")
    assert len(tcp_many([query] * 3, srv.addr)) == 3
    before = snapshot(control)["workers"][1]
    assert before["kind"] == "tcp" and before["queries"] == 3
    os.kill(before["pid"], signal.SIGKILL)
    took, w = wait_for_replacement(control, 1, before["pid"])
    assert took < 1.0, f"replaced after {took:.2f} s"
    assert tcp_many([query], srv.addr)[0].answer[0][0].address == "192.0.2.80"
    after = snapshot(control)["workers"][1]
    assert after["restarts"] == 1 and after["queries"] == 4 and after["tcp_connections"] == 2


def test_every_worker_killed_at_once(stormpy_server, tmp_path):
    control = str(tmp_path / "ctl.sock")
    srv = stormpy_server(ZONES, ["--control", control], workers=2)
    pids = [w["pid"] for w in snapshot(control)["workers"]]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    for i, pid in enumerate(pids):
        wait_for_replacement(control, i, pid)
    assert answered(srv.addr, 20) == 20
    assert tcp_many([dns.message.make_query("www.example.com", "A")], srv.addr)[0].answer
    assert sum(w["restarts"] for w in snapshot(control)["workers"]) == len(pids) == 3


def test_stop_leaves_no_worker_and_the_server_dying_takes_them(stormpy_server, tmp_path):
    control = str(tmp_path / "ctl.sock")
    srv = stormpy_server(ZONES, ["--control", control], workers=2)
    pids = [w["pid"] for w in snapshot(control)["workers"]]
    srv.stop()
    assert srv.proc.returncode == 0
    assert not any(alive(p) for p in pids)

    control = str(tmp_path / "ctl2.sock")
    srv = stormpy_server(ZONES, ["--control", control], workers=2)
    pids = [w["pid"] for w in snapshot(control)["workers"]]
    srv.proc.kill()                       # no chance to clean up: the kernel must
    srv.proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids), "a worker outlived its server"
