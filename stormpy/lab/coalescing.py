"""Lab 5, coalescing (seed 003): interrupt coalescing in its software form. A NIC that
waits before it interrupts lets the CPU take many packets per interrupt; the kernel's
own form is napi_defer_hard_irqs with gro_flush_timeout: after a poll that found
nothing, NAPI keeps the device's notification off and a timer polls again after the
timeout. On the veth that notification is the sender's wake-up of the receiving NAPI.
One serve-dns worker on AF_XDP (the XDP program gives the veth its NAPI), the delay
swept; for each, the most replies a second (closed loop), latency at a fixed rate, CPU
per reply of the server (the veth's NAPI runs in the sender's softirq, outside it) and
the worker's batch size. Controls: the timeout without deferral, NAPI in a kernel thread
pinned beside the worker, and the UDP socket backend, where veth has no NAPI for them.
Handout: docs/labs/05-coalescing.md."""
from __future__ import annotations

import contextlib
import os
import time

from stormpy.bench.netns import IFACE, SERVER_V4
from stormpy.bench.report import write_csv
from stormpy.lab import veth
from stormpy.lab.common import (PORT, SERVER_CPU, Server, gen, latency_us, legend_over_data, note,
                                pyplot, skip_reason_xdp, write_report)

NUMBER = 5
IDEA = ("napi_defer_hard_irqs and gro_flush_timeout on the veth, the software form of "
        "interrupt coalescing: latency against throughput and CPU per reply (seed 003)")
NEEDS = ("root (namespaces, veth settings); AF_XDP for the sweep and threaded NAPI for one "
         "control, each skipped with the reason otherwise (the socket control still runs)")
DELAYS_US = [0, 10, 20, 50, 100, 200, 500, 1000]
QUICK_DELAYS_US = [0, 100, 500]
DEFER = 2               # empty polls NAPI may keep the notification off for
CONTROL_US = 200        # the controls' timeout
RATE = 10000            # open loop, well below saturation
OUTSTANDING = 64        # closed loop
SECONDS, QUICK_SECONDS = 4.0, 1.5
THREADED = "xdp threaded NAPI, 0 us"   # the receive in a thread beside the worker
HEADER = ["variant", "backend", "gro_flush_timeout_us", "napi_defer_hard_irqs", "replies_per_s",
          "rate_qps", "p50_us", "p90_us", "p99_us", "p99_9_us", "max_us", "lost_pct",
          "server_cpu_pct", "server_cpu_us_per_reply", "mean_batch"]
QUESTIONS = [
    "With no delay (gro_flush_timeout 0), what are p50 and p99 at the fixed rate, the most "
    "replies a second, and the server's CPU per reply? This is the baseline.",
    "As the delay grows with napi_defer_hard_irqs on, how do p50 and p99 follow it? Seed 003 "
    "cut its latency from about 345 us to 95 us by shortening the NIC's coalescing delay.",
    "Does the delay buy anything: more replies a second, less CPU per reply, larger batches "
    "(mean_batch)? At which delay, if any, does it pay?",
    "gro_flush_timeout alone, without napi_defer_hard_irqs: does it change anything here? "
    "Why not, for DNS queries that GRO does not merge?",
    "On the socket backend with the same settings: does the latency move? What does veth do "
    "with UDP packets from a sender with TSO on, without an XDP program?",
    "The sweep runs the veth's NAPI in the sender's softirq, so its CPU is not in the "
    "server's. With NAPI in a kernel thread pinned beside the worker (threaded 1), it is: "
    "what does the receive cost per reply, and the thread's scheduling hop in p50 and p99?",
]


class Side:
    """serve-dns on one backend, and what a row reads of it: the worker's tasks and its
    batch counters."""

    def __init__(self, pair, wl, work: str, backend: str):
        self.pair, self.backend = pair, backend
        self.control = os.path.join(work, f"control-{backend}.sock")
        args = (["--listen", f"{SERVER_V4}:{PORT}", "--workers", "1"] if backend == "socket"
                else ["--iface", IFACE, "--backend", "xdp", "--port", str(PORT), "--queues", "1"])
        self.server = Server(pair, wl, args + ["--control", self.control],
                             os.path.join(work, f"server-{backend}.log"))

    def __enter__(self):
        self.server.__enter__()
        try:
            self.worker = veth.worker_threads(self.control, [SERVER_CPU])[0]
        except BaseException:
            self.server.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        self.server.__exit__()

    def batches(self) -> tuple:
        """(frames received, batches) of the worker so far."""
        w = veth.frame_workers(self.control)[0]
        return int(w.get("rx", 0)), sum(w.get("batch_hist", []))


def measure(side: Side, label: str, delay_us: int, defer: int, seconds: float,
            threaded: bool = False) -> list:
    """One row. threaded: the veth's NAPI in a kernel thread pinned beside the worker,
    so the server's CPU covers the receive; otherwise it runs in the sender's softirq,
    on gen's CPU, where no per-task time can tell it apart from gen's own."""
    knobs = {"gro_flush_timeout": delay_us * 1000, "napi_defer_hard_irqs": defer}
    with veth.device_knobs(side.pair, knobs), \
            (veth.threaded_napi(side.pair, [SERVER_CPU]) if threaded
             else contextlib.nullcontext([])) as napi:
        closed = gen(side.pair, side.server.wl, seconds, "--outstanding", str(OUTSTANDING))
        tasks = side.worker + napi
        ns0, (rx0, b0), t0 = veth.run_ns(tasks), side.batches(), time.monotonic()
        opened = gen(side.pair, side.server.wl, seconds, "--rate", str(RATE))
        ns, (rx, b) = veth.run_ns(tasks) - ns0, side.batches()
        wall = time.monotonic() - t0
    lat, replies = latency_us(opened), max(1, opened["received"])
    row = [label, side.backend, delay_us, defer, round(closed["reply_rate"]), RATE,
           round(lat["p50"], 1), round(lat["p90"], 1), round(lat["p99"], 1),
           round(lat["p99_9"], 1), round(lat["max"], 1), round(opened["lost_pct"], 3),
           round(100 * ns / 1e9 / wall, 1), round(ns / 1e3 / replies, 2),
           round((rx - rx0) / max(1, b - b0), 2)]
    note(f"{label:28s} {row[4]:8,} replies/s; at {RATE:,} q/s p50 {row[6]:6.0f} us, p99 "
         f"{row[8]:6.0f} us, server CPU/reply {row[13]:5.1f} us, "
         f"batch {row[14]:.1f}")
    return row


def run(pair, wl, work: str, out: str, quick: bool) -> None:
    delays, seconds = (QUICK_DELAYS_US, QUICK_SECONDS) if quick else (DELAYS_US, SECONDS)
    rows, why, no_thread = [], skip_reason_xdp(), None
    if why:
        note(f"the AF_XDP sweep is skipped: {why}")
    else:
        with Side(pair, wl, work, "xdp") as side:
            rows += [measure(side, f"xdp defer {DEFER}, {d} us", d, DEFER, seconds)
                     for d in delays]
            rows.append(measure(side, f"xdp timeout only, {CONTROL_US} us", CONTROL_US, 0,
                                seconds))
            try:
                rows.append(measure(side, THREADED, 0, 0, seconds, threaded=True))
            except veth.NoThreadedNapi as e:
                no_thread = str(e)
                note(f"the threaded NAPI row is skipped: {no_thread}")
    with Side(pair, wl, work, "socket") as side:
        rows += [measure(side, f"socket defer {DEFER}, {d} us", d, DEFER, seconds)
                 for d in (0, CONTROL_US)]
    write_csv(os.path.join(out, "results.csv"), HEADER, rows)
    plot(os.path.join(out, "coalescing.png"), rows)
    setup = (f"One serve-dns worker on CPU {SERVER_CPU} (kernel {veth.kernel_version()}), "
             f"`stormpy gen` on CPU 1: closed loop with {OUTSTANDING} in flight for the most "
             f"replies a second, then open loop at {RATE:,} q/s for latency, CPU per reply and "
             f"the worker's mean batch, {seconds:g} s each. Delays: "
             f"{', '.join(map(str, delays))} us with napi_defer_hard_irqs {DEFER}; controls at "
             f"{CONTROL_US} us. Server CPU: run time of the worker's tasks (/proc/TID/schedstat), "
             f"and of the veth's NAPI thread in the threaded row; elsewhere the veth's NAPI "
             f"runs in gen's softirq on CPU 1 and is not in it."
             + (f" AF_XDP skipped: {why}." if why else "")
             + (f" Threaded NAPI skipped: {no_thread}." if no_thread else ""))
    write_report(os.path.join(out, "report.md"), "Lab 5, coalescing", setup, HEADER, rows,
                 list(zip(QUESTIONS, answers(rows))))


def _at(row: list) -> str:
    return (f"p50 {row[6]:.0f} us, p99 {row[8]:.0f} us, {row[4]:,} replies/s, server "
            f"CPU/reply {row[13]:.1f} us, batch {row[14]:.1f}")


def answers(rows: list) -> list:
    sweep = [r for r in rows if r[0].startswith("xdp defer")]
    sock = [r for r in rows if r[1] == "socket"]
    if not sweep:
        skipped = "the AF_XDP sweep was skipped on this machine (see the set-up)"
        return [skipped, skipped, skipped, skipped,
                f"0 us: {_at(sock[0])}; {CONTROL_US} us: {_at(sock[1])}", skipped]
    base = sweep[0]
    follows = "; ".join(f"{r[2]} us: p50 {r[6]:.0f} us, p99 {r[8]:.0f} us" for r in sweep)
    best = min(sweep, key=lambda r: r[13])
    most = max(sweep, key=lambda r: r[4])
    rate = (f"no delay gave more replies/s than 0 us ({base[4]:,})" if most is base else
            f"most replies/s at {most[2]} us ({most[4]:,} against {base[4]:,} at 0 us)")
    cpu = (f"no delay took less server CPU per reply than 0 us ({base[13]:.1f} us)"
           if best is base else
           f"least server CPU per reply at {best[2]} us ({best[13]:.1f} against "
           f"{base[13]:.1f} us at 0 us)")
    pays = (f"{rate}; {cpu}; "
            f"mean batch from {base[14]:.1f} at 0 us to {sweep[-1][14]:.1f} at {sweep[-1][2]} us")
    only = next(r for r in rows if r[0].startswith("xdp timeout only"))
    thread = next((r for r in rows if r[0] == THREADED), None)
    return [f"0 us: {_at(base)}", follows, pays,
            f"timeout only, {CONTROL_US} us: {_at(only)}; against 0 us: {_at(base)}",
            f"0 us: {_at(sock[0])}; {CONTROL_US} us with defer {DEFER}: {_at(sock[1])}",
            f"in softirq: {_at(base)}; in a thread pinned beside the worker: "
            + (_at(thread) if thread else "not measured, this kernel refused (see the set-up)")]


def plot(path: str, rows: list) -> None:
    plt = pyplot()
    fig, (lat, cost) = plt.subplots(1, 2, figsize=(12, 4.8))
    sweep = [r for r in rows if r[0].startswith("xdp defer")]
    # the x axis is the delay; 0 us sits at 1 us on the log scale
    xs = [max(1, r[2]) for r in sweep]
    for col, name, style in ((6, "p50", "o-"), (8, "p99", "s--"), (9, "p99.9", "^:")):
        lat.plot(xs, [r[col] for r in sweep], style, label=f"xdp {name}")
    for r in rows:
        if r not in sweep:
            lat.scatter([max(1, r[2])], [r[6]], marker="x", s=60, label=f"{r[0]} p50")
    lat.plot(xs, xs, color="grey", linewidth=0.8, label="y = delay")
    lat.set_ylabel(f"latency, us (open loop at {RATE:,} q/s)")
    for ax in (lat, cost):
        ax.set_xscale("log")
        ax.set_xlabel("gro_flush_timeout, us (0 drawn at 1)")
        ax.grid(True, alpha=0.3)
    lat.set_yscale("log")
    lat.legend(fontsize=7)
    if sweep:
        cost.plot(xs, [r[13] for r in sweep], "o-", color="#c0392b", label="server CPU per reply")
        cost.plot(xs, [r[14] for r in sweep], "^:", color="#7f8c8d",
                  label="worker's mean batch, frames")
        twin = cost.twinx()
        twin.plot(xs, [r[4] / 1e3 for r in sweep], "s--", label="replies/s (thousands)")
        twin.set_ylabel("closed-loop replies/s, thousands")
        twin.set_ylim(bottom=0)
        cost.set_ylim(bottom=0)
        legend_over_data(cost, twin, ncol=2)
    cost.set_ylabel("server CPU per reply, us; mean batch")
    fig.suptitle(f"Lab 5: coalescing (napi_defer_hard_irqs {DEFER}, veth, AF_XDP)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
