"""`stormpy lab`: the list, one-line errors, and each lab's --quick run as root in its own
namespaces, its outputs read back as a student would: the CSV by Python's csv module,
the PNG by matplotlib, the report against the handout's own questions; nothing left
behind (namespaces, servers, sysctls), also after Ctrl-C."""
import csv
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from stormpy.bench.processes import process_tree
from support.netns import why_no_netns
from support.process import REPO_ROOT
from test_cli import assert_one_line_error, stormpy

NO_NETNS = why_no_netns()
needs_netns = pytest.mark.skipif(NO_NETNS is not None, reason=f"{NO_NETNS}")
BUSY_SYSCTLS = ("/proc/sys/net/core/busy_read", "/proc/sys/net/core/busy_poll")
HANDOUTS = {"batching": "01-batching.md", "precopy": "02-precopy.md", "polling": "03-polling.md",
            "steering": "04-steering.md", "coalescing": "05-coalescing.md", "txqueues": "06-txqueues.md",
            "own-stack": "07-own-stack.md"}
RFS_SYSCTL = "/proc/sys/net/core/rps_sock_flow_entries"


def lab_namespaces() -> set:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("spl-")}


def read_sysctls() -> dict:
    out = {}
    for path in BUSY_SYSCTLS:
        with open(path) as fh:
            out[path] = fh.read().strip()
    return out


def handout_questions(name: str) -> list:
    """The numbered questions under '## Questions' in the lab's handout."""
    with open(os.path.join(REPO_ROOT, "docs", "labs", HANDOUTS[name])) as fh:
        text = fh.read()
    section = text.split("\n## Questions\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. (.+)$", section, re.M)


def check_outputs(out, name: str, columns: list) -> list:
    """The three files, read back; the CSV's rows as dicts."""
    with open(out / "results.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == columns
        rows = list(reader)
    assert rows
    for row in rows:
        for key in columns:
            if key.endswith(("_us", "_qps", "_per_s", "_pct", "_per_query")):
                value = float(row[key])
                assert math.isfinite(value) and value >= 0, (key, row)
        assert "rate_qps" not in row or float(row["rate_qps"]) > 0
        assert 0 < float(row["p50_us"]) <= float(row["p90_us"]) <= float(row["p99_us"]) \
            <= float(row["max_us"]), row

    png = (out / f"{name}.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert b"Matplotlib" in png[:4096]          # the Software text chunk matplotlib writes
    import matplotlib.image
    height, width = matplotlib.image.imread(str(out / f"{name}.png")).shape[:2]
    assert width > 600 and height > 300

    report = (out / "report.md").read_text()
    questions = handout_questions(name)
    assert len(questions) >= 4
    blocks = report.split("\n## Questions\n", 1)[1]
    for n, question in enumerate(questions, 1):
        got = re.search("^" + re.escape(f"{n}. {question}") + r"\n\n   \*Measured:\* (.+)$", blocks,
                        re.M)
        assert got and re.search(r"\d", got.group(1)), (question, got)
    assert not re.search(r"\{|\}|\bnan\b|\binf\b|None", report), report
    return rows


def test_lab_list():
    r = stormpy("lab", "list")
    assert r.returncode == 0, r.stderr
    for name, number in (("batching", 1), ("polling", 3)):
        line = next(l for l in r.stdout.splitlines() if l.startswith(name))
        assert f"{number}. " in line
    assert r.stdout.count("needs: root") == len(HANDOUTS)
    for handout in HANDOUTS.values():
        assert os.path.exists(os.path.join(REPO_ROOT, "docs", "labs", handout))


def test_unknown_lab_is_one_line():
    assert_one_line_error(stormpy("lab", "run", "nope"), "no lab 'nope'", "batching, polling")


def test_lab_without_root_is_one_line():
    """As a user without root (root's tests run it as nobody)."""
    if os.geteuid() != 0:
        assert_one_line_error(stormpy("lab", "run", "batching", "--quick"), "needs root")
        return
    import importlib
    import pkgutil

    import stormpy.lab
    from stormpy import cli
    from support.users import run_as
    # nobody may not read this tree: what the command imports is imported here first
    for m in pkgutil.iter_modules(stormpy.lab.__path__):
        importlib.import_module(f"stormpy.lab.{m.name}")
    rc, out, err = run_as(lambda: cli.main(["lab", "run", "batching", "--quick"]))
    assert rc == 1 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and "needs root" in err, err


@needs_netns
def test_batching_quick(tmp_path):
    before = lab_namespaces()
    start = time.monotonic()
    r = stormpy("lab", "run", "batching", "--quick", "--out", str(tmp_path), timeout=180)
    assert r.returncode == 0, r.stderr
    took = time.monotonic() - start
    rows = check_outputs(tmp_path, "batching",
                         ["backend", "batch", "replies_per_s", "closed_lost_pct", "server_cpu_pct", "rate_qps",
                          "p50_us", "p90_us", "p99_us", "p99_9_us", "max_us", "open_lost_pct"])
    xdp_skipped = "AF_XDP half is skipped" in r.stderr
    backends = ["socket"] + ([] if xdp_skipped else ["xdp"])
    assert [(row["backend"], int(row["batch"])) for row in rows] == \
        [(b, n) for b in backends for n in (1, 32, 256)]
    for row in rows:
        assert float(row["replies_per_s"]) > 1000, row
        assert float(row["closed_lost_pct"]) < 5 and float(row["open_lost_pct"]) < 5, row
    assert lab_namespaces() <= before
    print(f"lab batching --quick took {took:.0f} s")


@needs_netns
def test_polling_quick_restores_sysctls(tmp_path):
    before, sysctls = lab_namespaces(), read_sysctls()
    r = stormpy("lab", "run", "polling", "--quick", "--out", str(tmp_path), timeout=180)
    assert r.returncode == 0, r.stderr
    rows = check_outputs(tmp_path, "polling",
                         ["variant", "backend", "rate_qps", "p50_us", "p90_us", "p99_us",
                          "p99_9_us", "max_us", "lost_pct", "server_cpu_pct",
                          "server_cpu_us_per_query"])
    by = {row["variant"]: row for row in rows}
    assert {"socket blocking", "socket SO_BUSY_POLL", "socket busy sysctls"} <= set(by)
    if "xdp busy" in by:
        # a ring that spins takes a core (what other work leaves of it) even at this light
        # load; one that sleeps in poll() a few percent
        spinning, sleeping = (float(by[v]["server_cpu_pct"]) for v in ("xdp busy", "xdp blocking"))
        assert spinning > max(25.0, 2 * sleeping), (spinning, sleeping)
    for row in rows:
        assert float(row["lost_pct"]) < 5, row
    assert read_sysctls() == sysctls
    assert lab_namespaces() <= before


@needs_netns
def test_ctrl_c_tears_down_and_restores(tmp_path):
    """Ctrl-C while the busy sysctls are set: status 130, the sysctls put back, the
    namespaces and the server gone."""
    before, sysctls = lab_namespaces(), read_sysctls()
    proc = subprocess.Popen([sys.executable, "-m", "stormpy", "lab", "run", "polling", "--quick",
                             "--out", str(tmp_path)], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:   # bounded
            if read_sysctls() != sysctls:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        assert read_sysctls() != sysctls, "the sysctl variant never started"
        time.sleep(0.5)
        children = process_tree(proc.pid)[1:]      # the server and its workers among them
        assert children
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    assert read_sysctls() == sysctls
    assert lab_namespaces() <= before
    assert not [pid for pid in children if os.path.exists(f"/proc/{pid}")]


@needs_netns
def test_precopy_quick(tmp_path):
    """Both modes on the AF_XDP ring, DNS and HTTP; the generator's reply count against
    the bytes the kernel counted on the client's veth."""
    before = lab_namespaces()
    r = stormpy("lab", "run", "precopy", "--quick", "--out", str(tmp_path), timeout=180)
    if "compares two modes of the AF_XDP ring" in r.stderr:
        pytest.skip(r.stderr.strip())       # no AF_XDP on this machine
    assert r.returncode == 0, r.stderr
    rows = check_outputs(tmp_path, "precopy",
                         ["proto", "mode", "reply_bytes", "replies_per_s", "wire_mbit_per_s",
                          "server_cpu_pct", "server_cpu_us_per_reply", "p50_us", "p90_us",
                          "p99_us", "max_us", "lost_pct"])
    assert [(row["proto"], row["mode"], int(row["reply_bytes"])) for row in rows
            if row["proto"] == "http"] == \
        [("http", m, n) for m in ("memcpy", "precopy") for n in (1024, 65536)]
    assert [row["mode"] for row in rows if row["proto"] == "dns"] == ["memcpy", "precopy"]
    for row in rows:
        replies, wire = float(row["replies_per_s"]), float(row["wire_mbit_per_s"])
        assert replies > 500 and float(row["lost_pct"]) < 5, row
        assert float(row["server_cpu_us_per_reply"]) > 0, row
        if row["proto"] == "dns":        # the mean frame: headers and a short answer
            assert 60 < int(row["reply_bytes"]) < 600, row
        else:                            # every body crossed the veth, and headers too
            body_mbit = replies * int(row["reply_bytes"]) * 8 / 1e6
            assert body_mbit * 0.95 < wire < body_mbit * 1.5 + 50, row
    assert lab_namespaces() <= before


def test_own_stack_handout_shows_the_programs_it_runs():
    """The handout walks through the two programs the lab measures: verbatim."""
    with open(os.path.join(REPO_ROOT, "docs", "labs", HANDOUTS["own-stack"])) as fh:
        blocks = re.findall(r"`(examples/[\w.]+)`:\n\n```python\n(.*?)```", fh.read(), re.S)
    assert [path for path, _ in blocks] == ["examples/echo_in_python.py", "examples/udp_echo.py"]
    for path, code in blocks:
        with open(os.path.join(REPO_ROOT, path)) as fh:
            assert code == fh.read(), f"{path} differs from the handout"


@needs_netns
def test_own_stack_quick(tmp_path):
    """The tutorial's Python echo and C rule: both answered every echo, the C loop alone
    is faster per reply than the Python one."""
    before = lab_namespaces()
    r = stormpy("lab", "run", "own-stack", "--quick", "--out", str(tmp_path), timeout=180)
    assert r.returncode == 0, r.stderr
    rows = check_outputs(tmp_path, "own-stack",
                         ["program", "backend", "loop_ns_per_reply", "replies_per_s",
                          "closed_lost_pct", "server_cpu_pct", "server_cpu_us_per_reply",
                          "rate_qps", "p50_us", "p90_us", "p99_us", "p99_9_us", "max_us",
                          "open_lost_pct"])
    backends = ["socket"] + ([] if "AF_XDP half is skipped" in r.stderr else ["xdp"])
    assert [(row["program"], row["backend"]) for row in rows] == \
        [(p, b) for b in backends for p in ("python", "C rule")]
    for row in rows:
        assert float(row["replies_per_s"]) > 1000, row
        assert float(row["closed_lost_pct"]) < 5 and float(row["open_lost_pct"]) < 5, row
    loop = {row["program"]: float(row["loop_ns_per_reply"]) for row in rows}
    assert 0 < loop["C rule"] < loop["python"], loop
    assert lab_namespaces() <= before


def read_file(path: str) -> str:
    with open(path) as fh:
        return fh.read().strip()


@needs_netns
def test_steering_quick(tmp_path):
    """Two workers on a two-queue veth: without steering the kernel receives every query
    on the sender's CPU; RPS spreads it; on AF_XDP each queue's NAPI thread feeds the
    worker on its own CPU, so every probed flow is local. The RFS sysctl is put back."""
    before, rfs = lab_namespaces(), read_file(RFS_SYSCTL)
    start = time.monotonic()
    r = stormpy("lab", "run", "steering", "--quick", "--out", str(tmp_path), timeout=180)
    assert r.returncode == 0, r.stderr
    took = time.monotonic() - start
    rows = check_outputs(tmp_path, "steering",
                         ["variant", "backend", "flows", "rate_qps", "p50_us", "p90_us",
                          "p99_us", "p99_9_us", "max_us", "lost_pct", "worker0_share_pct",
                          "rx_on_cpu0_pct", "queue0_share_pct", "worker0_cpu_pct",
                          "worker1_cpu_pct", "kernel_threads_cpu_pct",
                          "server_cpu_us_per_query", "probed_flows", "local_flows_pct"])
    by = {row["variant"]: row for row in rows}
    assert {"socket, no steering", "socket RPS", "socket RPS+RFS"} <= set(by)
    for row in rows:
        assert float(row["lost_pct"]) < 5, row
        assert 5 < float(row["worker0_share_pct"]) < 95, row      # 16 flows, two workers
        assert int(row["probed_flows"]) == 3, row
    assert float(by["socket, no steering"]["rx_on_cpu0_pct"]) < 25      # gen is on CPU 1
    assert 10 < float(by["socket RPS"]["rx_on_cpu0_pct"]) < 90
    if "xdp, 2 queues" in by:
        xdp = by["xdp, 2 queues"]
        assert 5 < float(xdp["queue0_share_pct"]) < 95, xdp
        assert float(xdp["local_flows_pct"]) == 100, xdp
        assert float(xdp["kernel_threads_cpu_pct"]) > 0, xdp
    else:
        assert "AF_XDP variant is skipped" in r.stderr
    assert read_file(RFS_SYSCTL) == rfs
    assert lab_namespaces() <= before
    print(f"lab steering --quick took {took:.0f} s")


@needs_netns
def test_coalescing_quick(tmp_path):
    """With napi_defer_hard_irqs on, a 500 us gro_flush_timeout holds queries back (p50
    grows with it) and the worker takes them in larger batches."""
    before = lab_namespaces()
    start = time.monotonic()
    r = stormpy("lab", "run", "coalescing", "--quick", "--out", str(tmp_path), timeout=180)
    assert r.returncode == 0, r.stderr
    took = time.monotonic() - start
    rows = check_outputs(tmp_path, "coalescing",
                         ["variant", "backend", "gro_flush_timeout_us", "napi_defer_hard_irqs",
                          "replies_per_s", "rate_qps", "p50_us", "p90_us", "p99_us",
                          "p99_9_us", "max_us", "lost_pct", "server_cpu_pct",
                          "server_cpu_us_per_reply", "mean_batch"])
    by = {row["variant"]: row for row in rows}
    assert {"socket defer 2, 0 us", "socket defer 2, 200 us"} <= set(by)
    for row in rows:
        assert float(row["lost_pct"]) < 5 and float(row["replies_per_s"]) > 1000, row
    if "xdp defer 2, 0 us" in by:
        none, held = by["xdp defer 2, 0 us"], by["xdp defer 2, 500 us"]
        assert float(held["p50_us"]) > 150, held    # most queries wait for the timer
        assert float(held["mean_batch"]) > float(none["mean_batch"]), (none, held)
        assert "xdp threaded NAPI, 0 us" in by or "threaded NAPI row is skipped" in r.stderr
    else:
        assert "AF_XDP sweep is skipped" in r.stderr
    assert lab_namespaces() <= before
    print(f"lab coalescing --quick took {took:.0f} s")


def lab6_leftovers() -> list:
    """The bulk sender and the sink of lab 6, should any outlive it."""
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ")
        except OSError:
            continue
        if b"gen echo 198.18.0.1:9 " in cmd or b"('198.18.0.1', 9)" in cmd:
            left.append(pid)
    return left


@needs_netns
def test_txqueues_quick(tmp_path):
    """Through a saturated 20 Mbit/s link a 1000-packet queue costs DNS hundreds of
    milliseconds, a 10-packet one milliseconds and most queries, a 15 KB bfifo
    milliseconds and (nearly) no queries; on the AF_XDP ring --tx-limit holds replies
    back and never has more bytes in flight than it allows."""
    from stormpy.lab.txqueues import HEADER
    before = lab_namespaces()
    r = stormpy("lab", "run", "txqueues", "--quick", "--out", str(tmp_path), timeout=180)
    assert r.returncode == 0, r.stderr
    rows = check_outputs(tmp_path, "txqueues", HEADER)
    kernel = {row["variant"]: row for row in rows if row["part"] == "kernel"}
    assert list(kernel) == ["txqueuelen 1000", "txqueuelen 10", "bfifo 15000 B"]
    p50 = {k: float(row["p50_us"]) for k, row in kernel.items()}
    lost = {k: float(row["lost_pct"]) for k, row in kernel.items()}
    assert p50["txqueuelen 1000"] > 150_000, p50          # 1000 x 1442 B take 577 ms
    assert p50["txqueuelen 10"] < 50_000 and p50["bfifo 15000 B"] < 50_000, p50
    assert lost["txqueuelen 10"] > 20 and lost["bfifo 15000 B"] < lost["txqueuelen 10"] / 2, lost
    assert all(int(row["queue_drops"]) > 0 for row in kernel.values())
    ring = {int(row["limit_bytes"]): row for row in rows if row["part"] == "ring"}
    if "AF_XDP half is skipped" not in r.stderr:
        assert set(ring) == {0, 1024}
        assert int(ring[0]["tx_held"]) == 0 and int(ring[0]["tx_inflight_peak"]) > 0
        assert int(ring[1024]["tx_held"]) > 0, ring[1024]
        assert 0 < int(ring[1024]["tx_inflight_peak"]) <= 1024, ring[1024]
        assert all(float(row["replies_per_s"]) > 1000 for row in ring.values())
    assert lab_namespaces() <= before
    assert not lab6_leftovers()


def test_own_stack_finds_the_programs_pip_installed(tmp_path, monkeypatch):
    """Without a clone (REPO_ROOT has no examples/), lab own-stack runs the copies that
    pip installs as the stormpy.examples package (pyproject's package-dir)."""
    import stormpy
    from stormpy.lab import own_stack
    installed = tmp_path / "site" / "examples"
    installed.mkdir(parents=True)
    for name in own_stack.PROGRAMS.values():
        (installed / name).write_text("# the installed copy\n")
    monkeypatch.setattr(own_stack, "REPO_ROOT", str(tmp_path / "no-clone"))
    package_path = list(stormpy.__path__)
    monkeypatch.setattr(stormpy, "__path__", [*package_path, str(tmp_path / "site")])
    sys.modules.pop("stormpy.examples", None)
    try:
        for program, name in own_stack.PROGRAMS.items():
            assert own_stack.program_path(program) == str(installed / name)
    finally:
        sys.modules.pop("stormpy.examples", None)
    monkeypatch.setattr(stormpy, "__path__", package_path)
    with pytest.raises(own_stack.LabError, match="reinstall stormpy"):
        own_stack.program_path("python")


@needs_netns
def test_an_out_directory_that_cannot_be_written_is_said_before_measuring(tmp_path):
    """A run measured for minutes, then ended in a traceback writing its results."""
    a_file = tmp_path / "afile"
    a_file.write_text("")
    for out, words in ((a_file, "exists and is not a directory"),
                       (a_file / "below", "cannot write there")):
        started = time.monotonic()
        assert_one_line_error(stormpy("lab", "run", "polling", "--quick", "--out", str(out)),
                              f"--out {out}", words)
        assert time.monotonic() - started < 20
