"""What the kernel does on the server's veth, as labs 4 and 5 measure it: the device's
sysfs knobs set inside the server namespace for one measurement and put back, the
veth's NAPI made threaded and its kernel threads pinned, exact per-task run times
(/proc/TID/schedstat, in nanoseconds: tick-sampled utime/stime misread short wake-ups
in a VM), the CPU each query was received on (nftables' meta cpu, in the namespace) and
the packets each of the veth's receive queues took (ethtool -S), and the server's
per-worker counters over its control socket."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time

from stormpy.bench.netns import IFACE
from stormpy.control import request
from stormpy.lab.common import LabError

SYS = f"/sys/class/net/{IFACE}"


class NoThreadedNapi(LabError):
    """This kernel will not run the veth's NAPI in threads: the variants that need it
    are skipped with this reason."""
NFT_TABLE = "stormpy_lab"


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


@contextlib.contextmanager
def threaded_napi(pair, cpus: list):
    """The veth's NAPI in kernel threads for the block (it has NAPI only once an XDP
    program is attached, or GRO is on), the thread of queue N pinned to cpus[N]; yields
    their ids, lowest NAPI id (first queue) first, and puts NAPI back in softirq
    afterwards. NoThreadedNapi says why when this kernel will not."""
    before = set(_kthreads())
    r = pair.run(pair.server, "sh", "-c", f"echo 1 > {SYS}/threaded")
    if r.returncode != 0:
        raise NoThreadedNapi(f"threaded NAPI refused on the veth: {r.stderr.strip() or 'failed'}")
    try:
        deadline = time.monotonic() + 5     # the kernel starts them once it sees the flag
        while True:
            new = {tid: name for tid, name in _kthreads().items() if tid not in before}
            if len(new) >= len(cpus) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        tids = sorted(new, key=lambda tid: int(new[tid].rsplit("-", 1)[1]))
        if len(tids) != len(cpus):
            raise NoThreadedNapi(f"expected {len(cpus)} NAPI threads on the veth, found {len(tids)}")
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


def frame_workers(control: str) -> list:
    """The server's frame or socket workers' counters (not its TCP workers'), in worker
    order, each with its pid, from its control socket (what `stormpy stats` prints)."""
    return [w for w in request(control, "stats")["workers"] if w.get("kind") != "tcp"]


def worker_threads(control: str, cpus: list) -> list:
    """Per worker: its threads, checked to be pinned to cpus[N] (serve-dns --cpus)."""
    out = []
    for w, cpu in zip(frame_workers(control), cpus):
        try:
            mask = os.sched_getaffinity(w["pid"])
        except OSError:
            mask = set()
        if mask != {cpu}:
            raise LabError(f"serve-dns worker {w['pid']} is not pinned to CPU {cpu}")
        out.append(threads_of([w["pid"]]))
    return out


@contextlib.contextmanager
def input_cpu_counters(pair, port: int, cpus: list):
    """An nftables table in the server namespace counting the UDP packets to port that
    reach the input hook on each CPU: the CPU the kernel's receive (after any RPS) ran
    on. Yields a function that reads the counts, in the order of cpus. Namespace-local,
    unlike /proc/net/softnet_stat; packets an XDP program redirects never get here."""
    if shutil.which("nft") is None:
        raise LabError("nft not found: apt-get install nftables")
    rules = "\n".join(f"udp dport {port} meta cpu {cpu} counter" for cpu in cpus)
    ruleset = (f"table inet {NFT_TABLE} {{\nchain input {{\ntype filter hook input priority 0; "
               f"policy accept;\n{rules}\n}}\n}}\n")
    r = subprocess.run(pair.argv(pair.server, "nft", "-f", "-"), input=ruleset,
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise LabError(f"nft: {r.stderr.strip() or 'failed'}")

    def read() -> list:
        out = json.loads(_sh(pair, f"nft -j list table inet {NFT_TABLE}"))["nftables"]
        return [next(e["counter"]["packets"] for e in item["rule"]["expr"] if "counter" in e)
                for item in out if "rule" in item]
    try:
        yield read
    finally:
        pair.run(pair.server, "nft", "delete", "table", "inet", NFT_TABLE)


def queue_packets(pair, queues: int) -> list:
    """Per receive queue of the server's veth: the packets its NAPI took (veth counts
    them only when it receives through NAPI: with XDP, or GRO for eligible packets)."""
    out = _sh(pair, f"ethtool -S {IFACE}")
    got = dict(re.findall(r"rx_queue_(\d+)_xdp_packets:\s*(\d+)", out))
    return [int(got.get(str(q), 0)) for q in range(queues)]


def worker_rx(control: str) -> list:
    """Queries received by each of the server's frame or socket workers."""
    return [int(w.get("rx", 0)) for w in frame_workers(control)]


def delta(after: list, before: list) -> list:
    return [a - b for a, b in zip(after, before)]


def kernel_version() -> str:
    return subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
