"""What every lab does: a server namespace and a client namespace joined by a veth pair
(the benchmarks' VethPair, 198.18.0.1 and .2), stormpy serve-dns started in one and
waited for, `stormpy gen` run in the other, the server's CPU time read per task, kernel
sysctls set for one measurement and always put back, and the three outputs: a CSV, a
PNG (matplotlib) and a report with the handout's questions answered in numbers."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time

from stormpy.bench.errors import BenchError
from stormpy.bench.netns import IFACE, SERVER_V4, VethPair
from stormpy.bench.peers import check_from_client
from stormpy.bench.processes import (REPO_ROOT, log_tail, process_tree, run_to_end,
                                     start_logged, stop_process, task_cpu_ticks)
from stormpy.bench.report import markdown_table, say
from stormpy.errors import StormpyError

SERVER_CPU, CLIENT_CPU = 0, 1   # the server's worker and the generator each get a core
START_TIMEOUT = 30.0
PORT = 53
READY_WAIT = 2.0    # at most this long a check, between looks at whether the server exited


class LabError(StormpyError):
    """A lab that cannot go on: printed as one line."""


def skip_reason_xdp():
    """None when AF_XDP can run here, else why not (one line)."""
    from stormpy.backends import why_unusable
    why = why_unusable("xdp")
    return f"AF_XDP cannot run here: {why}" if why else None


def ring_args(backend: str) -> list:
    """serve-dns options for one worker on the server's veth, or on one UDP socket."""
    if backend == "socket":
        return ["--listen", f"{SERVER_V4}:{PORT}", "--workers", "1"]
    return ["--iface", IFACE, "--backend", backend, "--port", str(PORT), "--queues", "1"]


class Server:
    """stormpy serve-dns in the server namespace, pinned to SERVER_CPU, answering the
    workload's sample questions correctly before it is used; stopped on the way out."""
    NAME = "serve-dns"

    def __init__(self, pair: VethPair, wl, extra: list, log_path: str):
        self.pair, self.wl, self.log_path = pair, wl, log_path
        self.argv = pair.argv(pair.server, "taskset", "-c", str(SERVER_CPU), sys.executable,
                              "-m", "stormpy", "serve-dns", wl.zone_path, "--cpus",
                              str(SERVER_CPU), "--control", "", *extra)
        self.proc = None

    def __enter__(self):
        self.pair.run(self.pair.server, "ip", "link", "set", IFACE, "xdp", "off")  # none stale
        self.proc = start_logged(self.argv, self.log_path, REPO_ROOT,
                                 dict(os.environ, PYTHONUNBUFFERED="1"))
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self):
        deadline, problems = time.monotonic() + START_TIMEOUT, ["not started"]
        while time.monotonic() < deadline:  # bounded by time
            if self.proc.poll() is not None:
                raise LabError(f"{self.NAME} exited with status {self.proc.returncode}: "
                               f"{log_tail(self.log_path, 2) or '(no output)'}")
            problems = self.problems(min(READY_WAIT, max(0.1, deadline - time.monotonic())))
            if not problems:
                return
            time.sleep(0.05)
        raise LabError(f"{self.NAME} did not answer correctly within {START_TIMEOUT:g} s: "
                       f"{'; '.join(problems)}")

    def problems(self, wait: float) -> list:
        """What is still wrong with the server's answers (empty: ready), once it answers
        at all or `wait` seconds have passed; a lab's own server (serve-http, a responder)
        checks its own."""
        return check_from_client(self.pair, self.wl, wait=wait)

    def cpu_seconds(self) -> float:
        """utime+stime of every thread of the server's processes so far (/proc/PID/task)."""
        return task_cpu_ticks(process_tree(self.proc.pid)) / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc):
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None


def gen(pair: VethPair, wl, seconds: float, *load) -> dict:
    """`stormpy gen dns` from the client namespace on CLIENT_CPU: its JSON report."""
    return gen_kind(pair, "dns", PORT, seconds, "--queries", wl.query_path, *load)


def gen_kind(pair: VethPair, kind: str, port: int, seconds: float, *load) -> dict:
    """`stormpy gen KIND` (dns, echo, http) at the server's PORT from the client
    namespace on CLIENT_CPU: its JSON report."""
    argv = pair.argv(pair.client, "taskset", "-c", str(CLIENT_CPU), sys.executable, "-m",
                     "stormpy", "gen", kind, f"{SERVER_V4}:{port}", "--seconds", f"{seconds:g}",
                     "--json", *load)
    try:
        status, out = run_to_end(argv, seconds + 30, "stormpy gen")
    except BenchError as e:
        raise LabError(str(e)) from None
    try:
        report = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        report = None
    if status != 0 or not isinstance(report, dict):
        raise LabError(f"stormpy gen failed (status {status}): "
                       + " | ".join(out.strip().splitlines()[-2:]))
    return report


def latency_us(report: dict) -> dict:
    """gen's percentiles in microseconds: p50, p90, p99, p99_9, max."""
    ns = report["latency_ns"]
    return {k: ns[k] / 1e3 for k in ("p50", "p90", "p99", "p99_9", "max")}


@contextlib.contextmanager
def sysctls(values: dict):
    """Set kernel sysctls ({'net.core.busy_poll': '50'}) for the block, and put the old
    values back afterwards, also on an error or Ctrl-C."""
    old = {}
    try:
        for name, value in values.items():
            path = "/proc/sys/" + name.replace(".", "/")
            with open(path) as fh:
                old[path] = fh.read().strip()
            with open(path, "w") as fh:
                fh.write(str(value))
        yield
    finally:
        for path, value in old.items():
            with open(path, "w") as fh:
                fh.write(value)


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    try:
        import matplotlib
    except ImportError:
        raise LabError("the labs plot with matplotlib, which is missing: install stormpy again "
                       "(pip install stormpy), which depends on it") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def legend_over_data(ax, *twins, ncol: int = 3, room: float = 0.3) -> None:
    """One legend for ax and its twin axes, in a band at the top that each axis keeps
    clear of data (room: the band's share of the height): a legend placed over the data
    by matplotlib's "best" hides points whenever the lines cross the whole panel."""
    handles, labels = [], []
    for a in (ax, *twins):
        h, l = a.get_legend_handles_labels()
        handles += h
        labels += l
        bottom, top = a.get_ylim()
        if a.get_yscale() == "log":
            a.set_ylim(bottom, top * (top / bottom) ** (room / (1 - room)))
        else:
            a.set_ylim(bottom, top + (top - bottom) * room / (1 - room))
    ax.legend(handles, labels, loc="upper center", ncol=ncol, fontsize=8)


def write_report(path: str, title: str, setup: str, header: list, rows: list,
                 answers: list) -> None:
    """report.md: the set-up, the measured table, and each handout question followed by
    the numbers that answer it."""
    out = [f"# {title}: results", "", setup, "", markdown_table(header, rows), "",
           "## Questions", ""]
    for n, (question, measured) in enumerate(answers, 1):
        out += [f"{n}. {question}", "", f"   *Measured:* {measured}", ""]
    with open(path, "w") as fh:
        fh.write("\n".join(out))


def note(text: str) -> None:
    say(f"lab: {text}")
