"""What the kernel does on the server's veth, as labs 4 and 5 measure it: the device's
sysfs knobs set inside the server namespace for one measurement and put back, the
veth's NAPI made threaded and its kernel threads pinned, exact per-task run times
(/proc/TID/schedstat, in nanoseconds: tick-sampled utime/stime misread short wake-ups
in a VM), the per-CPU packets the kernel's receive path handled (/proc/net/softnet_stat)
and the packets each of the veth's receive queues took (ethtool -S), and the server's
per-worker counters over its control socket."""
from __future__ import annotations

import contextlib
import os
import re
import subprocess

from stormpy.bench.netns import IFACE
from stormpy.bench.processes import process_tree
from stormpy.control import request
from stormpy.lab.common import LabError

SYS = f"/sys/class/net/{IFACE}"


def _sh(pair, script: str) -> str:
    """A shell line in the server namespace (`ip netns exec` mounts its own /sys there)."""
    r = pair.run(pair.server, "sh", "-c", script)
    if r.returncode != 0:
        raise LabError(f"{script}: {r.stderr.strip() or 'failed'}")
    return r.stdout


@contextlib.contextmanager
def device_knobs(pair, values: dict):
    """Write the server veth's sysfs files ({'gro_flush_timeout': 50000, 'queues/rx-0/
    rps_cpus': '3'}) for the block and put the old values back, also on an error."""
    old = {}
    try:
        for name, value in values.items():
            old[name] = _sh(pair, f"cat {SYS}/{name}").strip()
            _sh(pair, f"echo {value} > {SYS}/{name}")
        yield
    finally:
        for name, value in old.items():
            pair.run(pair.server, "sh", "-c", f"echo {value} > {SYS}/{name}")


def ethtool_features(pair, *settings: str) -> None:
    """ethtool -K on the server's veth ('gro', 'on', ...); a one-line error if refused."""
    r = pair.run(pair.server, "ethtool", "-K", IFACE, *settings)
    if r.returncode != 0:
        raise LabError(f"ethtool -K {IFACE} {' '.join(settings)}: {r.stderr.strip() or 'failed'}")


@contextlib.contextmanager
def threaded_napi(pair, cpus: list):
    """The veth's NAPI in kernel threads for the block (it has NAPI only once an XDP
    program is attached, or GRO is on), the thread of queue N pinned to cpus[N]; yields
    their ids, lowest NAPI id (first queue) first, and puts NAPI back in softirq
    afterwards. A LabError says why when this kernel will not."""
    before = set(_kthreads())
    r = pair.run(pair.server, "sh", "-c", f"echo 1 > {SYS}/threaded")
    if r.returncode != 0:
        raise LabError(f"threaded NAPI refused on the veth: {r.stderr.strip() or 'failed'}")
    try:
        new = {tid: name for tid, name in _kthreads().items() if tid not in before}
        tids = sorted(new, key=lambda tid: int(new[tid].rsplit("-", 1)[1]))
        if len(tids) != len(cpus):
            raise LabError(f"expected {len(cpus)} NAPI threads on the veth, found {len(tids)}")
        for tid, cpu in zip(tids, cpus):
            pin(tid, cpu)
        yield tids
    finally:
        pair.run(pair.server, "sh", "-c", f"echo 0 > {SYS}/threaded")


def _kthreads() -> dict:
    """Every napi/IFACE-ID kernel thread on the machine: tid -> name."""
    out = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    name = fh.read().strip()
            except OSError:
                continue
            if re.fullmatch(rf"napi/{IFACE}-\d+", name):
                out[int(pid)] = name
    return out


def pin(tid: int, cpu: int) -> None:
    try:
        os.sched_setaffinity(tid, {cpu})
    except OSError as e:
        raise LabError(f"cannot pin kernel thread {tid} to CPU {cpu}: {e.strerror}") from None


def ksoftirqd() -> list:
    """The ksoftirqd/N threads: where softirq work goes when it runs long."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    if fh.read().startswith("ksoftirqd/"):
                        out.append(int(pid))
            except OSError:
                pass
    return out


def run_ns(tids) -> int:
    """Nanoseconds on a CPU, summed over the tasks (the first field of schedstat)."""
    total = 0
    for tid in tids:
        try:
            with open(f"/proc/{tid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def threads_of(pids) -> list:
    """Every thread of the processes."""
    out = []
    for pid in pids:
        try:
            out += [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            pass
    return out


def worker_tasks(server, cpus: list) -> dict:
    """cpu -> the threads of the server's processes pinned to exactly that CPU (one frame
    or socket worker on each of cpus; the supervisor and TCP workers have other masks)."""
    out = {cpu: [] for cpu in cpus}
    for pid in process_tree(server.proc.pid):
        try:
            mask = os.sched_getaffinity(pid)
        except OSError:
            continue
        if len(mask) == 1 and next(iter(mask)) in out:
            out[next(iter(mask))] += threads_of([pid])
    return out


def softnet_processed() -> list:
    """Per CPU: packets the kernel's receive path has handled (softnet_stat's first
    column). Machine-wide: other traffic on the machine counts too."""
    with open("/proc/net/softnet_stat") as fh:
        return [int(line.split()[0], 16) for line in fh if line.strip()]


def queue_packets(pair, queues: int) -> list:
    """Per receive queue of the server's veth: the packets its NAPI took (veth counts
    them only when it receives through NAPI: with XDP, or GRO for eligible packets)."""
    out = _sh(pair, f"ethtool -S {IFACE}")
    got = dict(re.findall(r"rx_queue_(\d+)_xdp_packets:\s*(\d+)", out))
    return [int(got.get(str(q), 0)) for q in range(queues)]


def worker_rx(control: str, workers: int) -> list:
    """Queries received by each of the server's first `workers` frame or socket workers."""
    got = [w for w in request(control, "stats")["workers"] if w.get("kind") != "tcp"]
    return [int(w.get("rx", 0)) for w in got[:workers]]


def delta(after: list, before: list) -> list:
    return [a - b for a, b in zip(after, before)]


def kernel_version() -> str:
    return subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
