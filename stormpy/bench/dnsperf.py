"""dnsperf as `bench sockets` runs it: its command line, one measured run with the CPU
it and the server cost, and its output read into a PerfResult."""
from __future__ import annotations

import re
import resource
import shlex
import time
from dataclasses import dataclass, field

from stormpy.bench.errors import BenchError, ServerFailure
from stormpy.bench.processes import (LOOPBACK, busy_pct, cpu_delta_seconds, cpu_set, cpu_times,
                                     run_to_end, task_seconds, tree_cpu_ticks, udp_rcvbuf_errors)


@dataclass
class PerfResult:
    sent: int = 0
    completed: int = 0
    lost: int = 0
    lost_pct: float = 0.0
    qps: float = 0.0
    runtime: float = 0.0
    avg_latency_s: float = 0.0
    latency_sd_s: float = 0.0
    req_size: int = 0
    resp_size: int = 0
    rcodes: dict = field(default_factory=dict)
    server_cpu_pct: float = 0.0  # CPU time of the server's process tree / wall
    client_cpu_pct: float = 0.0  # CPU time of dnsperf / wall
    server_core_busy_pct: float = 0.0  # /proc/stat busy % of the server CPU set (incl. softirq)
    client_core_busy_pct: float = 0.0  # same for the dnsperf CPU set
    steal_pct: float = 0.0  # hypervisor steal over all CPUs
    server_cpu_s: float = 0.0  # CPU seconds of the server's process tree during the run
    server_softirq_s: float = 0.0  # irq+softirq seconds on the pinned server CPUs (0 if unpinned)
    client_cpu_s: float = 0.0  # CPU seconds of dnsperf
    other_cpu_pct: float = 0.0  # CPU used by processes other than server and dnsperf (noise)
    attempts: int = 1  # measurements made for this round (noise retries)
    rcvbuf_drops: int = 0  # UDP "receive buffer full" drops, system-wide, during the run
    raw: str = ""  # dnsperf output

    @property
    def us_per_reply(self) -> float:
        """Server CPU microseconds per reply: process time plus, when pinned, the
        softirq time on its CPUs (on loopback the kernel delivers each reply into
        dnsperf's socket in softirq on the server's CPU, and does not charge that
        to the process).  Unlike replies/s it does not depend on whether dnsperf
        managed to saturate the server."""
        cost = self.server_cpu_s + self.server_softirq_s
        return 1e6 * cost / self.completed if self.completed else float("nan")

    @property
    def client_us_per_query(self) -> float:
        return 1e6 * self.client_cpu_s / self.sent if self.sent else float("nan")


def _grab(pattern: str, text: str, conv=float, default=0):
    m = re.search(pattern, text)
    return conv(m.group(1)) if m else default


def parse_dnsperf(text: str) -> PerfResult:
    r = PerfResult(raw=text)
    r.sent = _grab(r"Queries sent:\s+(\d+)", text, int)
    r.completed = _grab(r"Queries completed:\s+(\d+)", text, int)
    r.lost = _grab(r"Queries lost:\s+(\d+)", text, int)
    r.lost_pct = 100.0 * r.lost / r.sent if r.sent else 0.0
    r.qps = _grab(r"Queries per second:\s+([\d.]+)", text)
    r.runtime = _grab(r"Run time \(s\):\s+([\d.]+)", text)
    r.avg_latency_s = _grab(r"Average Latency \(s\):\s+([\d.]+)", text)
    r.latency_sd_s = _grab(r"Latency StdDev \(s\):\s+([\d.]+)", text)
    r.req_size = _grab(r"Average packet size:\s+request (\d+)", text, int)
    r.resp_size = _grab(r"Average packet size:.*response (\d+)", text, int)
    m = re.search(r"Response codes:\s+(.*)", text)
    if m:
        for code, count in re.findall(r"([A-Z]+)\s+(\d+)\s+\(", m.group(1)):
            r.rcodes[code] = int(count)
    if "Queries per second" not in text:
        raise BenchError("could not parse dnsperf output: " + " | ".join(text.strip().splitlines()[-3:]))
    return r


def dnsperf_argv(args, port, seconds: float, query_path: str) -> list:
    argv = []
    if args.client_cpus:
        argv += ["taskset", "-c", args.client_cpus]
    argv += [args.dnsperf] + (["-B"] if args.input == "binary" else [])
    argv += ["-s", LOOPBACK, "-p", str(port), "-d", query_path,
             "-l", f"{seconds:g}", "-c", str(args.clients), "-q", str(args.outstanding),
             "-T", str(args.threads), "-t", f"{args.timeout:g}"]
    if args.edns and args.input == "text":  # binary queries carry their own OPT RR
        argv.append("-e")
    argv += shlex.split(args.dnsperf_extra)
    return argv


def dnsperf_display(args, query_path: str) -> str:
    return shlex.join(dnsperf_argv(args, "PORT", args.seconds, query_path))


def run_dnsperf(args, wl, server, seconds: float) -> PerfResult:
    """One dnsperf run against the RunningServer `server`, with what it cost in CPU."""
    qfile = wl.binary_path if args.input == "binary" else wl.query_path
    argv = dnsperf_argv(args, server.port, seconds, qfile)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0 = tree_cpu_ticks(server.proc.pid)
    st0 = cpu_times()
    drops0 = udp_rcvbuf_errors()
    t0 = time.monotonic()
    status, out = run_to_end(argv, seconds + args.timeout + 30, "dnsperf")
    wall = time.monotonic() - t0
    st1 = cpu_times()
    drops1 = udp_rcvbuf_errors()
    cpu1 = tree_cpu_ticks(server.proc.pid)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if status != 0:
        raise BenchError(f"dnsperf failed (status {status}): "
                         + " | ".join(out.strip().splitlines()[-3:]))
    if server.proc.poll() is not None:
        raise ServerFailure(f"{server.spec.name} exited (status {server.proc.returncode}) during the run: "
                            f"{server.log_tail()}")
    res = parse_dnsperf(out)
    res.server_cpu_s = cpu_delta_seconds(cpu0, cpu1)
    res.server_cpu_pct = 100.0 * res.server_cpu_s / wall
    client_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    res.client_cpu_pct = 100.0 * client_cpu / wall
    res.server_core_busy_pct, _ = busy_pct(st0, st1, server.cpu_list)
    res.client_core_busy_pct, _ = busy_pct(st0, st1, cpu_set(args.client_cpus))
    _, res.steal_pct = busy_pct(st0, st1, sorted(st1))
    res.client_cpu_s = client_cpu
    res.rcvbuf_drops = drops1 - drops0
    if server.pinned:
        res.server_softirq_s = task_seconds(st0, st1, server.cpu_list, idx=4)
    other = task_seconds(st0, st1) - res.server_cpu_s - client_cpu
    res.other_cpu_pct = max(0.0, 100.0 * other / wall)
    return res
