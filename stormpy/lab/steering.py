"""Lab 4, steering (seeds 000 and 001): a veth with two receive queues, two serve-dns
workers (one pinned to each CPU), and `stormpy gen` sending from many source ports.
Which CPU runs the kernel's receive of each query, and is it the CPU of the worker that
answers it? On UDP sockets without steering, with RPS (rps_cpus) and with RPS and RFS
(rps_sock_flow_entries, rps_flow_cnt); on AF_XDP, where the veth's receive queue is
chosen by the sender and stormpy's XDP program hands queue N to worker N. Per-task run
times, per-CPU receive counts, per-worker counters, and single-flow probes for flow
locality. Handout: docs/labs/04-steering.md."""
from __future__ import annotations

import contextlib
import os
import time

from stormpy.bench.netns import IFACE, SERVER_V4
from stormpy.bench.report import write_csv
from stormpy.lab import veth
from stormpy.lab.common import (PORT, LabError, Server, gen, latency_us, legend_over_data, note,
                                pyplot, skip_reason_xdp, sysctls, write_report)

NUMBER = 4
IDEA = ("RSS-like spreading on a two-queue veth by the XDP program against RPS and RFS on "
        "sockets: per-CPU load, flow locality, latency (seeds 000, 001)")
NEEDS = ("root (namespaces, a two-queue veth, RPS/RFS settings put back afterwards), nft; "
         "AF_XDP and threaded NAPI for the XDP variant, skipped with the reason otherwise")
QUEUES = 2              # the lab's veth pair gets two receive and two transmit queues
CPUS = [0, 1]           # worker N on CPU N; `stormpy gen` shares CPU 1 (two cores only)
FLOWS = 16              # gen's source ports under load
RATE = 10000
SECONDS, QUICK_SECONDS = 6.0, 2.0
PROBES, QUICK_PROBES = 12, 3        # single-flow runs for flow locality
PROBE_QUERIES = 400
ALL_CPUS = format(sum(1 << c for c in CPUS), "x")
RPS = {f"queues/rx-{q}/rps_cpus": ALL_CPUS for q in range(QUEUES)}
RFS = {**RPS, **{f"queues/rx-{q}/rps_flow_cnt": 2048 for q in range(QUEUES)}}
RFS_SYSCTL = {"net.core.rps_sock_flow_entries": 32768}
# label -> (backend, the veth's sysfs files, sysctls), held while it is measured
VARIANTS = {
    "socket, no steering": ("socket", {}, {}),
    "socket RPS": ("socket", RPS, {}),
    "socket RPS+RFS": ("socket", RFS, RFS_SYSCTL),
    "xdp, 2 queues": ("xdp", {}, {}),
}
HEADER = ["variant", "backend", "flows", "rate_qps", "p50_us", "p90_us", "p99_us", "p99_9_us",
          "max_us", "lost_pct", "worker0_share_pct", "rx_on_cpu0_pct", "queue0_share_pct",
          "worker0_cpu_pct", "worker1_cpu_pct", "kernel_threads_cpu_pct",
          "server_cpu_us_per_query", "probed_flows", "local_flows_pct"]
QUESTIONS = [
    "Without steering, on which CPU did the kernel receive the queries (rx_on_cpu0_pct), "
    "how did the two workers share them, and did the veth's receive queues count any?",
    "With RPS (rps_cpus on both queues), how did the receive work spread over the two CPUs, "
    "and what share of the probed flows was received on the CPU of the worker that answered "
    "it? Seed 001 expects RPS to spread the softirq load but not to follow the application.",
    "With RFS added (rps_sock_flow_entries, rps_flow_cnt), what share of the flows was local? "
    "Seed 001: RPS with RFS delivers each flow to the CPU where its application reads it.",
    "On AF_XDP, how did the veth's two receive queues share the flows (the sender's transmit "
    "queue picks the receiver's queue), and were the flows local to their worker?",
    "Which variant gave the lowest p50 and p99, and the least CPU per query? What would a real "
    "multi-queue NIC add (seed 000: RSS hashing, the indirection table, flow steering rules)?",
]


class Side:
    """The server of one backend and what the lab reads of it: its workers' tasks per
    CPU, the veth's NAPI threads (XDP only), the counters."""

    def __init__(self, pair, server, control: str, backend: str, napi: list, input_cpus):
        self.pair, self.server, self.control, self.backend = pair, server, control, backend
        self.napi, self.input_cpus = napi, input_cpus
        self.workers = veth.worker_threads(control, CPUS)
        self.softirq = veth.ksoftirqd()

    def snapshot(self) -> dict:
        return {"rx": veth.worker_rx(self.control),
                "input": self.input_cpus(),
                "queues": veth.queue_packets(self.pair, QUEUES),
                "worker_ns": [veth.run_ns(tids) for tids in self.workers],
                "napi_ns": [veth.run_ns([t]) for t in self.napi],
                "kernel_ns": veth.run_ns(self.napi + self.softirq),
                "t": time.monotonic()}

    def received_on(self, before: dict, after: dict) -> list:
        """Per CPU: queries whose kernel receive ran there. Sockets: nftables' count at
        the input hook. XDP: the packets of the queue whose NAPI thread is pinned there."""
        key = "queues" if self.backend == "xdp" else "input"
        return veth.delta(after[key], before[key])


def start(pair, wl, work: str, backend: str) -> tuple:
    control = os.path.join(work, f"control-{backend}.sock")
    if backend == "socket":
        args = ["--listen", f"{SERVER_V4}:{PORT}", "--workers", str(len(CPUS))]
    else:
        args = ["--iface", IFACE, "--backend", "xdp", "--port", str(PORT), "--queues", str(QUEUES)]
    args += ["--cpus", ",".join(map(str, CPUS)), "--control", control]
    return Server(pair, wl, args, os.path.join(work, f"server-{backend}.log")), control


def probe(side: Side) -> bool:
    """One flow (one source port, PROBE_QUERIES queries): is the CPU that received it the
    CPU of the worker that answered it?"""
    before = side.snapshot()
    gen(side.pair, side.server.wl, 10, "--count", str(PROBE_QUERIES), "--outstanding", "4",
        "--sockets", "1")
    after = side.snapshot()
    answered = veth.delta(after["rx"], before["rx"])
    worker = max(range(len(CPUS)), key=lambda i: answered[i])
    if side.backend == "xdp":       # the NAPI thread that worked, by its own run time
        napi = veth.delta(after["napi_ns"], before["napi_ns"])
        where = max(range(len(napi)), key=lambda i: napi[i])
    else:
        got = side.received_on(before, after)
        where = max(range(len(CPUS)), key=lambda i: got[i])
    return where == worker


def measure(side: Side, label: str, seconds: float, probes: int) -> list:
    _, knobs, settings = VARIANTS[label]
    with sysctls(settings), veth.device_knobs(side.pair, knobs):
        before = side.snapshot()
        report = gen(side.pair, side.server.wl, seconds, "--rate", str(RATE), "--sockets",
                     str(FLOWS))
        after = side.snapshot()
        local = sum(probe(side) for _ in range(probes))
    wall = after["t"] - before["t"]
    answered = veth.delta(after["rx"], before["rx"])
    received_on = side.received_on(before, after)
    queues = veth.delta(after["queues"], before["queues"])
    worker_ns = veth.delta(after["worker_ns"], before["worker_ns"])
    kernel_ns = after["kernel_ns"] - before["kernel_ns"]
    lat, total = latency_us(report), max(1, sum(answered))
    row = [label, side.backend, FLOWS, RATE, round(lat["p50"], 1), round(lat["p90"], 1),
           round(lat["p99"], 1), round(lat["p99_9"], 1), round(lat["max"], 1),
           round(report["lost_pct"], 3), round(100 * answered[0] / total, 1),
           round(100 * received_on[0] / max(1, sum(received_on)), 1),
           round(100 * queues[0] / max(1, sum(queues)), 1),
           round(100 * worker_ns[0] / 1e9 / wall, 1), round(100 * worker_ns[1] / 1e9 / wall, 1),
           round(100 * kernel_ns / 1e9 / wall, 1),
           round((sum(worker_ns) + kernel_ns) / 1e3 / max(1, report["received"]), 2), probes,
           round(100 * local / max(1, probes), 1)]
    note(f"{label:20s} p50 {row[4]:6.0f} us  p99 {row[6]:7.0f} us  worker 0 {row[10]:5.1f}%  "
         f"rx on CPU 0 {row[11]:5.1f}%  local flows {row[18]:5.1f}%")
    return row


def run_backend(pair, wl, work: str, backend: str, seconds: float, probes: int) -> list:
    server, control = start(pair, wl, work, backend)
    # on XDP, the veth's NAPI (there now that the program is attached) in one thread per
    # queue, pinned to the CPU of the queue's worker: what IRQ affinity does for a NIC
    with server, (veth.threaded_napi(pair, CPUS) if backend == "xdp"
                  else contextlib.nullcontext([])) as napi, \
            veth.input_cpu_counters(pair, PORT, CPUS) as input_cpus:
        side = Side(pair, server, control, backend, napi, input_cpus)
        return [measure(side, label, seconds, probes)
                for label, (b, _, _) in VARIANTS.items() if b == backend]


def run(pair, wl, work: str, out: str, quick: bool) -> None:
    seconds, probes = (QUICK_SECONDS, QUICK_PROBES) if quick else (SECONDS, PROBES)
    for name in RFS_SYSCTL:
        if not os.path.exists("/proc/sys/" + name.replace(".", "/")):
            raise LabError(f"this kernel has no {name} sysctl (RPS/RFS need CONFIG_RPS)")
    rows = run_backend(pair, wl, work, "socket", seconds, probes)
    why = skip_reason_xdp()
    if not why:
        try:
            rows += run_backend(pair, wl, work, "xdp", seconds, probes)
        except veth.NoThreadedNapi as e:
            why = str(e)
    if why:
        note(f"the AF_XDP variant is skipped: {why}")
    write_csv(os.path.join(out, "results.csv"), HEADER, rows)
    plot(os.path.join(out, "steering.png"), rows)
    setup = (f"A veth pair with {QUEUES} receive and {QUEUES} transmit queues (kernel "
             f"{veth.kernel_version()}). serve-dns with one worker pinned to each of CPUs "
             f"{CPUS[0]} and {CPUS[1]}; `stormpy gen` on CPU 1 in the client namespace, open loop "
             f"at {RATE:,} q/s from {FLOWS} source ports for {seconds:g} s per variant, then "
             f"{probes} single-flow probes of {PROBE_QUERIES} queries. CPU: run time of each "
             f"task (/proc/TID/schedstat) over the load run; kernel threads are the veth's "
             f"threaded NAPI (XDP only) and ksoftirqd. Receive CPU: nftables' meta cpu at the "
             f"input hook (sockets), the queue's NAPI thread (XDP)."
             + (f" AF_XDP skipped: {why}." if why else ""))
    write_report(os.path.join(out, "report.md"), "Lab 4, steering", setup, HEADER, rows,
                 list(zip(QUESTIONS, answers({r[0]: r for r in rows}))))


def _spread(row: list) -> str:
    return (f"receive on CPU 0 {row[11]:.0f}% / CPU 1 {100 - row[11]:.0f}%, worker 0 answered "
            f"{row[10]:.0f}%, worker 1 {100 - row[10]:.0f}%")


def _local(row: list) -> str:
    return f"{row[18]:.0f}% of {row[17]} probed flows local"


def answers(rows: dict) -> list:
    none, rps, rfs = rows["socket, no steering"], rows["socket RPS"], rows["socket RPS+RFS"]
    first = (f"{_spread(none)}; the veth's queues took {none[12]:.0f}% / {100 - none[12]:.0f}%"
             if none[12] else f"{_spread(none)}; the veth's queues counted no packets (no NAPI)")
    first += f"; {_local(none)}"
    second = f"{_spread(rps)}; {_local(rps)} (no steering: {_local(none)})"
    third = f"{_spread(rfs)}; {_local(rfs)} (RPS alone: {_local(rps)})"
    xdp = rows.get("xdp, 2 queues")
    fourth = (f"queue 0 took {xdp[12]:.0f}% and queue 1 {100 - xdp[12]:.0f}% of the packets; "
              f"worker 0 answered {xdp[10]:.0f}%; {_local(xdp)}" if xdp else
              "the AF_XDP variant was skipped on this machine (see the set-up)")
    best = min(rows.values(), key=lambda r: r[4])
    cheap = min(rows.values(), key=lambda r: r[16])
    fifth = (f"lowest p50: {best[0]} ({best[4]:.0f} us, p99 {best[6]:.0f} us); least CPU: "
             f"{cheap[0]} ({cheap[16]:.1f} us/query); all: "
             + "; ".join(f"{r[0]} p50 {r[4]:.0f} us, p99 {r[6]:.0f} us, {r[16]:.1f} us/query"
                         for r in rows.values()))
    return [first, second, third, fourth, fifth]


def plot(path: str, rows: list) -> None:
    plt = pyplot()
    fig, (spread, cpu, lat) = plt.subplots(1, 3, figsize=(15, 4.8))
    xs, width = range(len(rows)), 0.27
    for i, (col, name) in enumerate(((11, "queries received on CPU 0"),
                                     (10, "queries answered by worker 0 (CPU 0)"),
                                     (18, "probed flows received on their worker's CPU"))):
        spread.bar([x + (i - 1) * width for x in xs], [r[col] for r in rows], width, label=name)
    spread.set_ylabel("%")
    spread.set_ylim(0, 100)
    legend_over_data(spread, ncol=1, room=0.25)
    bottom = [0.0] * len(rows)
    for col, name in ((13, "worker 0 (CPU 0)"), (14, "worker 1 (CPU 1)"),
                      (15, "NAPI threads, ksoftirqd")):
        cpu.bar(xs, [r[col] for r in rows], bottom=bottom, label=name)
        bottom = [b + r[col] for b, r in zip(bottom, rows)]
    cpu.set_ylim(0, 1.4 * max(bottom + [1]))     # room for the legend above the bars
    cpu.set_ylabel(f"% of one core at {RATE:,} q/s")
    cpu.legend(fontsize=8)
    for i, (col, name) in enumerate(((4, "p50"), (6, "p99"), (7, "p99.9"))):
        lat.bar([x + (i - 1) * width for x in xs], [r[col] for r in rows], width, label=name)
    lat.set_ylabel(f"latency, us (open loop at {RATE:,} q/s)")
    lat.set_yscale("log")
    legend_over_data(lat)
    for ax in (spread, cpu, lat):
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r[0] for r in rows], rotation=20, ha="right")
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Lab 4: steering on a two-queue veth")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
