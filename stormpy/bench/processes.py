"""The benchmarks' child processes and what they cost: finding tools, starting servers
and load generators in process groups of their own and always stopping them, free
ports, and CPU accounting from /proc (per CPU, per process tree, per task)."""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import time
from typing import Optional

from stormpy.argtypes import cpu_list
from stormpy.bench.errors import BenchError

LOOPBACK = "127.0.0.1"
# The directory holding the stormpy package: `python -m stormpy` works from there even
# without an install.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_LIVE: dict = {}  # pid -> Popen, every child we must stop on exit


def find_tool(command: str) -> Optional[str]:
    """The command's path, looking in the sbin directories too (Debian puts knotd, nsd and
    kxdpgun there, outside a normal user's PATH); None when it is not installed."""
    return shutil.which(command) or next(
        (p for p in (f"/usr/sbin/{command}", f"/sbin/{command}") if os.access(p, os.X_OK)), None)


# --------------------------------------------------------------------------
# Children: started in their own process group, always stopped
# --------------------------------------------------------------------------

def track(proc: subprocess.Popen) -> subprocess.Popen:
    """Remember a child so that stop_all() stops it."""
    _LIVE[proc.pid] = proc
    return proc


def untrack(proc: subprocess.Popen) -> None:
    """Forget a child that was stopped some other way than stop_process()."""
    _LIVE.pop(proc.pid, None)


def stop_process(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """Stop a child we started (and its process group, which it leads)."""
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)  # pgid == pid: start_new_session=True
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
    # Reap anything left in its group (e.g. NSD children) with SIGKILL.
    try:
        os.killpg(proc.pid, 0)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _LIVE.pop(proc.pid, None)


def stop_all() -> None:
    for proc in list(_LIVE.values()):
        stop_process(proc, grace=3.0)


class Interrupted(BaseException):
    """Raised from signal handlers (SIGTERM/SIGHUP) to unwind and clean up."""


def _on_signal(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


@contextlib.contextmanager
def stopping_children_on_signals():
    """SIGTERM and SIGHUP unwind as Interrupted, and SIGINT as KeyboardInterrupt even when
    it was ignored (a script's `cmd &`); every tracked child is stopped on the way out."""
    old = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    old[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        stop_all()
        for sig, handler in old.items():
            signal.signal(sig, handler)


def start_logged(argv: list, log_path: str, cwd: Optional[str] = None,
                 env: Optional[dict] = None) -> subprocess.Popen:
    """A tracked server process, its stdout and stderr in log_path."""
    with open(log_path, "wb") as log:
        return track(subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True, env=env))


def log_tail(log_path: str, lines: int) -> str:
    """The last lines of a log, joined on one line; '' when there is none."""
    try:
        with open(log_path, "rb") as fh:
            text = fh.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def wait_for_output(proc: subprocess.Popen, text: str, seconds: float = 30.0) -> str:
    """What proc wrote to its stderr pipe (its stdout when stderr goes there) up to and
    including `text`, its sign of being ready. BenchError, the process killed, when its
    output ends first or it does not say so within `seconds`. Reads the pipe's
    descriptor, not its text wrapper, so that communicate() later gets the rest."""
    fd = (proc.stderr or proc.stdout).fileno()
    seen = b""
    deadline = time.monotonic() + seconds
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        ready = select.select([fd], [], [], max(0.0, min(left, 0.5)))[0] if left > 0 else []
        chunk = os.read(fd, 65536) if ready else b""
        if ready and chunk:
            seen += chunk
        elif ready or left <= 0:
            if proc.poll() is None:
                proc.kill()
            status = proc.wait(timeout=10)
            why = f"exit status {status}" if ready else f"not within {seconds:g} s"
            shown = seen.decode("utf-8", "replace").strip().replace("\n", " | ")
            raise BenchError(f"{' '.join(map(str, proc.args[:6]))}: not ready ({why}): "
                             f"{shown or '(no output)'}")
    return seen.decode("utf-8", "replace")


def run_to_end(argv: list, limit: float, name: str) -> tuple[int, str]:
    """A tracked load generator run to its end: (status, stdout and stderr). It is stopped
    when it overruns `limit` seconds (BenchError) or the run is interrupted."""
    try:
        proc = track(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, start_new_session=True))
    except OSError as exc:
        raise BenchError(f"cannot run {name}: {exc}") from exc
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        stop_process(proc, grace=1.0)
        raise BenchError(f"{name} did not finish within {limit:.0f} s") from None
    except BaseException:  # Ctrl-C, SIGTERM: do not leave it running
        stop_process(proc, grace=1.0)
        raise
    _LIVE.pop(proc.pid, None)
    return proc.returncode, out


def run_child(argv: list, timeout: float, cwd=None) -> tuple[float, int, str]:
    """Run to completion; (wall seconds, peak RSS KiB, output). BenchError when it fails."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                            start_new_session=True)
    deadline = start + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            wall = time.monotonic() - start
            out = proc.stdout.read().decode(errors="replace")
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                last = (out.strip().splitlines() or ["no output"])[-1]
                raise BenchError(f"{os.path.basename(argv[0])} failed (status {proc.returncode}): {last}")
            return wall, ru.ru_maxrss, out
        if time.monotonic() > deadline:
            stop_process(proc, grace=10.0)
            raise BenchError(f"{os.path.basename(argv[0])} took more than {timeout:g} s (--timeout)")
        time.sleep(0.005)


def peak_kib(pid: int) -> int:
    """VmHWM of pid and its children (KiB)."""
    total = 0
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            pids += [int(p) for p in fh.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


# --------------------------------------------------------------------------
# Ports
# --------------------------------------------------------------------------

def port_is_free(port: int) -> bool:
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                return False
    return True


def pick_free_port(used: set) -> int:
    for _ in range(200):  # bounded
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((LOOPBACK, 0))
            port = s.getsockname()[1]
        if port not in used and port_is_free(port):
            used.add(port)
            return port
    raise BenchError("could not find a free UDP+TCP port on 127.0.0.1")


# --------------------------------------------------------------------------
# CPU accounting
# --------------------------------------------------------------------------

def cpu_times() -> dict:
    """cpu index -> (busy, total, steal, task, irq) jiffies from /proc/stat.

    task = user + nice + system: time charged to processes (softirq/irq time
    is not charged to any process when the kernel accounts it separately)."""
    out = {}
    with open("/proc/stat") as fh:
        for line in fh:
            m = re.match(r"cpu(\d+)\s+(.*)", line)
            if not m:
                continue
            v = [int(x) for x in m.group(2).split()] + [0] * 10
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            busy = user + nice + system + irq + softirq + steal
            out[int(m.group(1))] = (busy, busy + idle + iowait, steal, user + nice + system,
                                    irq + softirq)
    return out


def cpu_set(spec: Optional[str]) -> list:
    """The CPUs of a taskset list ('0', '0,1', '0-3'); every online CPU when it is empty
    (unpinned). BenchError when it is not a CPU list."""
    if not spec:
        return sorted(cpu_times())
    try:
        return cpu_list(spec)
    except argparse.ArgumentTypeError as exc:
        raise BenchError(str(exc)) from None


def task_seconds(before: dict, after: dict, cpus: Optional[list] = None, idx: int = 3) -> float:
    """Seconds of task time (idx 3) or irq+softirq time (idx 4) over cpus (default all)."""
    hz = os.sysconf("SC_CLK_TCK")
    cpus = sorted(after) if cpus is None else cpus
    return sum(after[c][idx] - before[c][idx] for c in cpus if c in before and c in after) / hz


def busy_pct(before: dict, after: dict, cpus: list) -> tuple[float, float]:
    """Average busy % and steal % over cpus between two cpu_times() snapshots."""
    busy = total = steal = 0
    for c in cpus:
        if c in before and c in after:
            busy += after[c][0] - before[c][0]
            total += after[c][1] - before[c][1]
            steal += after[c][2] - before[c][2]
    if total <= 0:
        return 0.0, 0.0
    return 100.0 * busy / total, 100.0 * steal / total


def _proc_stat_fields(pid) -> Optional[list]:
    """The fields of /proc/PID/stat after the command name (field 3 on), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()


def tree_cpu_ticks(root: int) -> dict:
    """pid -> utime+stime (clock ticks) for root and all its descendants."""
    kids: dict = {}
    for entry in os.listdir("/proc"):
        fields = _proc_stat_fields(entry) if entry.isdigit() else None
        if fields is not None:
            kids.setdefault(int(fields[1]), []).append(int(entry))
    out = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        fields = _proc_stat_fields(pid)
        if fields is None:
            continue
        out[pid] = int(fields[11]) + int(fields[12])
        todo.extend(kids.get(pid, []))
    return out


def process_tree(root: int) -> list:
    """root and every live descendant, from /proc/PID/task/TID/children (each thread's
    children), or from every process's parent pid where the kernel lacks that file."""
    if not os.path.exists(f"/proc/{root}/task/{root}/children"):
        return list(tree_cpu_ticks(root))
    out, todo = [], [root]
    while todo and len(out) < 100_000:  # bounded
        pid = todo.pop()
        out.append(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
            except OSError:
                pass
    return out


def task_cpu_ticks(pids) -> int:
    """utime+stime (clock ticks) summed over every thread (/proc/PID/task/*/stat) of pids."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            fields = _proc_stat_fields(f"{pid}/task/{tid}")
            if fields is not None:
                total += int(fields[11]) + int(fields[12])
    return total


def cpu_delta_seconds(before: dict, after: dict) -> float:
    hz = os.sysconf("SC_CLK_TCK")
    return sum(v - before.get(pid, 0) for pid, v in after.items()) / hz


def rmem_default() -> str:
    try:
        with open("/proc/sys/net/core/rmem_default") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def udp_rcvbuf_errors() -> int:
    """System-wide count of UDP datagrams dropped because a socket buffer was full."""
    try:
        with open("/proc/net/snmp") as fh:
            rows = [line.split() for line in fh if line.startswith("Udp:")]
        return int(rows[1][rows[0].index("RcvbufErrors")])
    except (OSError, IndexError, ValueError):
        return 0
