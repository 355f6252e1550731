"""Lab 6, TX queues and bufferbloat (seed 004, byte queue limits). Part 1, the kernel's
queues: the client's veth is cut to a slow link (tbf), a bounded UDP flood from the
client keeps it saturated, and `stormpy gen` measures DNS latency through the queue in
front of it: a long txqueuelen (pfifo takes its limit from it) against a short one and
a byte-limited bfifo. Part 2, stormpy's own rings: an AF_XDP server whose TX kicks wait
for a slow flush (--tx-flush-us stands in for a slow device) under closed-loop load, with
its BQL-style --tx-limit swept. Handout: docs/labs/06-txqueues.md."""
from __future__ import annotations

import json
import os
import sys
import time

from stormpy.bench.netns import IFACE, SERVER_V4
from stormpy.bench.processes import REPO_ROOT, start_logged, stop_process
from stormpy.bench.report import write_csv
from stormpy.control import request
from stormpy.lab.common import (SERVER_CPU, LabError, Server, gen, latency_us, legend_over_data,
                                note, pyplot, ring_args, skip_reason_xdp, write_report)

NUMBER = 6
IDEA = ("TX queues and bufferbloat: DNS latency through a saturated slow link with a long "
        "txqueuelen, a short one and a byte-limited bfifo; a BQL-style byte limit on "
        "stormpy's own TX ring (seed 004)")
NEEDS = ("root (namespaces, veth, tc qdiscs tbf/pfifo/bfifo, removed with the namespaces); "
         "AF_XDP for the ring half, skipped with the reason otherwise")
LINK_MBIT = 20              # the slow link: tbf on the client's veth, queries' direction
FLOOD_SIZE = 1400           # bulk datagrams: payload bytes
FLOOD_RATE = 2 * LINK_MBIT * 1_000_000 // (8 * (FLOOD_SIZE + 42))   # twice the link
FLOOD_SOCKETS = 16          # one socket's send buffer alone cannot fill 1000 packets
SINK_PORT = 9               # discard: a socket in the server namespace that never reads
DNS_RATE = 200              # the probe: light, so it adds no queue of its own
SECONDS, QUICK_SECONDS = 6.0, 2.0
BFIFO_BYTES = 15000         # about 6 ms of the link
FILL_TIMEOUT = 5.0          # the flood's start-up and the longest queue's fill, at most
# label -> (txqueuelen, the qdisc under tbf, bulk traffic on)
KERNEL = {
    "idle link, txqueuelen 1000": (1000, ["pfifo"], False),
    "txqueuelen 1000": (1000, ["pfifo"], True),
    "txqueuelen 100": (100, ["pfifo"], True),
    "txqueuelen 10": (10, ["pfifo"], True),
    f"bfifo {BFIFO_BYTES} B": (1000, ["bfifo", "limit", str(BFIFO_BYTES)], True),
}
QUICK_KERNEL = ["txqueuelen 1000", "txqueuelen 10", f"bfifo {BFIFO_BYTES} B"]
FLUSH_US = 1000             # part 2: the "slow device": a TX kick at most every ms
OUTSTANDING = 256         # enough replies at once to fill the larger limits
LIMITS = [0, 16384, 4096, 1024, 256]
# "no limit" runs under one it never reaches, so its peak in flight is counted too
UNREACHED = (1 << 30) - 1
QUICK_LIMITS = [0, 1024]
HEADER = ["part", "variant", "limit_bytes", "rate_qps", "p50_us", "p90_us", "p99_us",
          "p99_9_us", "max_us", "lost_pct", "replies_per_s", "queue_drops", "tx_held",
          "tx_inflight_peak"]
QUESTIONS = [
    "With bulk traffic through the long queue (txqueuelen 1000), what are the DNS p50 and "
    "p99, against the idle link? How many milliseconds of queue is that, and how does it "
    "compare with what the link needs to send 1000 bulk packets?",
    "With txqueuelen 10, what are p50 and p99, and how many DNS queries were lost? What did "
    "the short queue trade for its latency?",
    "The bfifo limits bytes, not packets: what latency and loss did it give? Why does a byte "
    "limit suit a queue in front of a link better than a packet count (the seed's e1000 "
    "descriptors carried 64 bytes to 4 KB)?",
    "On stormpy's AF_XDP ring with a slow TX flush, how many bytes were in flight on the TX "
    "ring at most without a limit, and with the smallest --tx-limit? What were p50 and "
    "replies/s in both, and how many replies were held back?",
    "The seed's BQL cut the bytes queued from about 3 MB to 66-194 KB and multiplied a "
    "high-priority flow's transactions by 4-15. Which of your limits keeps throughput "
    "within 10% of no limit? What would you set, and why not smaller?",
]


def tc(pair, *args) -> None:
    r = pair.run(pair.client, "tc", *args)
    if r.returncode != 0:
        raise LabError(f"tc {' '.join(args)}: {r.stderr.strip() or 'failed'} (this lab needs "
                       f"the tbf, pfifo and bfifo qdiscs)")


def shape_link(pair, txqueuelen: int, child: list) -> None:
    """tbf at LINK_MBIT on the client's veth, with `child` as its queue."""
    r = pair.run(pair.client, "ip", "link", "set", IFACE, "txqueuelen", str(txqueuelen))
    if r.returncode != 0:
        raise LabError(f"ip link set {IFACE} txqueuelen: {r.stderr.strip() or 'failed'}")
    tc(pair, "qdisc", "replace", "dev", IFACE, "root", "handle", "1:", "tbf", "rate",
       f"{LINK_MBIT}mbit", "burst", "32kb", "latency", "2s")
    tc(pair, "qdisc", "replace", "dev", IFACE, "parent", "1:1", "handle", "10:", *child)


def queue_drops(pair) -> int:
    """Packets the queue under tbf dropped so far (tc -s -j)."""
    r = pair.run(pair.client, "tc", "-s", "-j", "qdisc", "show", "dev", IFACE)
    try:
        return sum(q.get("drops", 0) for q in json.loads(r.stdout) if q.get("parent") == "1:1")
    except ValueError:
        raise LabError(f"tc -s -j qdisc show: {r.stderr.strip() or 'unreadable'}") from None


class Flood:
    """A bounded UDP flood from the client at twice the link's rate, into a socket in the
    server namespace that never reads (the kernel drops what overflows it)."""

    def __init__(self, pair, work: str, seconds: float):
        self.pair, self.work, self.seconds = pair, work, seconds
        self.procs = []

    def __enter__(self):
        sink = (f"import socket, time; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                f"s.bind(('{SERVER_V4}', {SINK_PORT})); time.sleep({self.seconds + 30:g})")
        self.procs.append(start_logged(self.pair.argv(self.pair.server, sys.executable, "-c",
                                                      sink), os.path.join(self.work, "sink.log")))
        argv = self.pair.argv(self.pair.client, "taskset", "-c", str(SERVER_CPU),
                              sys.executable, "-m", "stormpy", "gen", "echo",
                              f"{SERVER_V4}:{SINK_PORT}", "--rate", str(FLOOD_RATE), "--size",
                              str(FLOOD_SIZE), "--sockets", str(FLOOD_SOCKETS), "--seconds",
                              f"{self.seconds:g}", "--timeout", "0.1", "--progress", "off")
        drops = queue_drops(self.pair)
        self.procs.append(start_logged(argv, os.path.join(self.work, "flood.log"), REPO_ROOT))
        try:
            # the queue fills: full once it drops (1000 bulk packets take 577 ms), and
            # measured from then on however long the sender took to start
            deadline = time.monotonic() + FILL_TIMEOUT
            while queue_drops(self.pair) == drops and time.monotonic() < deadline:
                if self.procs[-1].poll() is not None:
                    raise LabError(f"the bulk sender exited with status "
                                   f"{self.procs[-1].returncode}")
                time.sleep(0.05)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            stop_process(proc, grace=1.0)
        self.procs = []


def kernel_row(pair, wl, work: str, label: str, seconds: float) -> list:
    txqueuelen, child, bulk = KERNEL[label]
    shape_link(pair, txqueuelen, child)
    if bulk:
        with Flood(pair, work, seconds + 2):
            report = gen(pair, wl, seconds, "--rate", str(DNS_RATE), "--timeout", "3")
    else:
        report = gen(pair, wl, seconds, "--rate", str(DNS_RATE), "--timeout", "3")
    drops = queue_drops(pair)
    tc(pair, "qdisc", "del", "dev", IFACE, "root")
    lat = latency_us(report)
    note(f"{label:28s} p50 {lat['p50'] / 1e3:8.2f} ms  p99 {lat['p99'] / 1e3:8.2f} ms  "
         f"DNS lost {report['lost_pct']:5.1f}%  queue drops {drops}")
    return ["kernel", label, 0, DNS_RATE, *_lat(lat), round(report["lost_pct"], 3),
            round(report["reply_rate"]), drops, 0, 0]


def _lat(lat: dict) -> list:
    return [round(lat[k], 1) for k in ("p50", "p90", "p99", "p99_9", "max")]


def ring_row(pair, wl, work: str, limit: int, seconds: float) -> list:
    control = os.path.join(work, f"control-{limit}")
    extra = ["--tx-flush-us", str(FLUSH_US), "--control", control]
    extra += ["--tx-limit", str(limit or UNREACHED)]
    log = os.path.join(work, f"server-xdp-{limit}.log")
    with Server(pair, wl, ring_args("xdp") + extra, log):
        report = gen(pair, wl, seconds, "--outstanding", str(OUTSTANDING), "--timeout", "3")
        worker = request(control, "stats")["workers"][0]
    lat = latency_us(report)
    label = f"tx-limit {limit}" if limit else "no limit"
    note(f"{label:16s} {report['reply_rate']:9,.0f} replies/s  p50 {lat['p50']:8.0f} us  "
         f"held {worker['tx_held']:,}  peak in flight {worker['tx_inflight_peak']:,} B")
    return ["ring", label, limit, round(report["reply_rate"]), *_lat(lat),
            round(report["lost_pct"], 3), round(report["reply_rate"]), 0, worker["tx_held"],
            worker["tx_inflight_peak"]]


def run(pair, wl, work: str, out: str, quick: bool) -> None:
    seconds = QUICK_SECONDS if quick else SECONDS
    labels = QUICK_KERNEL if quick else list(KERNEL)
    with Server(pair, wl, ring_args("socket"), os.path.join(work, "server-socket.log")):
        rows = [kernel_row(pair, wl, work, label, seconds) for label in labels]
    why = skip_reason_xdp()
    if why:
        note(f"the AF_XDP half is skipped: {why}")
    else:
        rows += [ring_row(pair, wl, work, limit, seconds)
                 for limit in (QUICK_LIMITS if quick else LIMITS)]
    write_csv(os.path.join(out, "results.csv"), HEADER, rows)
    plot(os.path.join(out, "txqueues.png"), rows)
    setup = (f"Client veth cut to {LINK_MBIT} Mbit/s by tbf (queries' direction), the queue "
             f"under it a pfifo (its limit the txqueuelen) or a bfifo. Bulk: `stormpy gen "
             f"echo` at {FLOOD_RATE:,} datagrams/s of {FLOOD_SIZE} B from {FLOOD_SOCKETS} "
             f"sockets (twice the link), into a socket that never reads. Probe: `stormpy gen "
             f"dns` at {DNS_RATE} q/s for {seconds:g} s against one serve-dns socket worker. "
             f"Ring half: one AF_XDP worker with --tx-flush-us {FLUSH_US} (a slow device), "
             f"closed loop with {OUTSTANDING} in flight, --tx-limit swept."
             + (f" AF_XDP skipped: {why}." if why else ""))
    write_report(os.path.join(out, "report.md"), "Lab 6, TX queues and bufferbloat", setup,
                 HEADER, rows, list(zip(QUESTIONS, answers(rows))))


def _ms(row: list) -> str:
    return f"p50 {row[4] / 1e3:.2f} ms, p99 {row[6] / 1e3:.2f} ms"


def answers(rows: list) -> list:
    k = {r[1]: r for r in rows if r[0] == "kernel"}
    ring = [r for r in rows if r[0] == "ring"]
    long_, short, bfifo = k["txqueuelen 1000"], k["txqueuelen 10"], k[f"bfifo {BFIFO_BYTES} B"]
    drain_ms = 1000 * 8 * (FLOOD_SIZE + 42) * 1000 / (LINK_MBIT * 1e6)
    idle = k.get("idle link, txqueuelen 1000")
    first = (f"loaded {_ms(long_)}" + (f"; idle {_ms(idle)}" if idle else "")
             + f"; 1000 bulk packets take {drain_ms:.0f} ms at {LINK_MBIT} Mbit/s")
    second = (f"{_ms(short)}, {short[9]:.1f}% of DNS queries lost (the long queue: "
              f"{long_[9]:.1f}%); the queue dropped {short[11]:,} packets")
    third = f"{_ms(bfifo)}, {bfifo[9]:.1f}% of DNS queries lost, {bfifo[11]:,} queue drops"
    if not ring:
        return [first, second, third, "AF_XDP was skipped", "AF_XDP was skipped"]
    off, tight = ring[0], ring[-1]
    fourth = (f"no limit: at most {off[13]:,} B in flight, {off[10]:,} replies/s, p50 "
              f"{off[4]:.0f} us; {tight[1]}: at most {tight[13]:,} B in flight, {tight[10]:,} "
              f"replies/s, p50 {tight[4]:.0f} us, {tight[12]:,} replies held back")
    kept = [r for r in ring[1:] if r[10] >= 0.9 * off[10]]
    fifth = ("; ".join(f"{r[1]}: {r[10] / off[10]:.0%} of the throughput, p50 {r[4]:.0f} us"
                       for r in ring[1:]) if off[10] else "no throughput without a limit")
    fifth += (f"; the smallest within 10%: {kept[-1][1]}" if kept else
              "; none stayed within 10%")
    return [first, second, third, fourth, fifth]


def plot(path: str, rows: list) -> None:
    plt = pyplot()
    ring = [r for r in rows if r[0] == "ring"]
    fig, axes = plt.subplots(1, 2 if ring else 1, figsize=(12 if ring else 7, 4.8),
                             squeeze=False)
    left = axes[0][0]
    kernel = [r for r in rows if r[0] == "kernel"]
    xs = range(len(kernel))
    for i, (col, name) in enumerate(((4, "p50"), (6, "p99"))):
        left.bar([x + (i - 0.5) * 0.4 for x in xs], [r[col] / 1e3 for r in kernel], 0.4,
                 label=name)
    for x, r in zip(xs, kernel):
        left.annotate(f"{r[9]:.0f}% lost", (x, r[6] / 1e3), ha="center", va="bottom",
                      fontsize=8)
    left.set_xticks(list(xs))
    left.set_xticklabels([r[1] for r in kernel], rotation=20, ha="right")
    left.set_ylabel("DNS latency, ms")
    left.set_title(f"{DNS_RATE} q/s through a saturated {LINK_MBIT} Mbit/s link", fontsize=10)
    left.set_yscale("log")
    legend_over_data(left, ncol=2)   # and room for the losses written over the bars
    left.grid(True, axis="y", alpha=0.3)
    if ring:
        right = axes[0][1]
        names = [r[1] for r in ring]
        right.plot(names, [r[4] for r in ring], marker="o", label="p50, us")
        right.plot(names, [r[6] for r in ring], marker="s", linestyle="--", label="p99, us")
        right.set_yscale("log")
        right.set_ylabel("latency, us (closed loop)")
        twin = right.twinx()
        twin.plot(names, [r[10] for r in ring], marker="^", color="#c0392b", label="replies/s")
        twin.set_ylabel("replies/s")
        twin.set_ylim(bottom=0)
        right.set_title(f"AF_XDP TX byte limit, closed loop, {OUTSTANDING} in flight",
                        fontsize=10)
        right.set_xlabel(f"AF_XDP --tx-limit (bytes), --tx-flush-us {FLUSH_US}")
        legend_over_data(right, twin)
        right.grid(True, alpha=0.3)
    fig.suptitle("Lab 6: TX queues and bufferbloat")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
