"""Lab 1, batching (the paper's fig. 8b): one serve-dns worker answers with --batch 1 to
256, on a UDP socket (recvmmsg/sendmmsg) and on the veth's AF_XDP ring. For each batch
size, `stormpy gen` measures the most replies a second it gets in closed loop, then the
latency percentiles at a fixed, moderate rate in open loop. Handout: docs/labs/01-batching.md."""
from __future__ import annotations

import os
import time

from stormpy.bench.report import write_csv
from stormpy.lab.common import (Server, gen, latency_us, note, pyplot, ring_args,
                                skip_reason_xdp, write_report)

NUMBER = 1
IDEA = "throughput and latency against the batch size 1-256, sockets against AF_XDP (paper fig. 8b)"
NEEDS = "root (namespaces, veth); AF_XDP for the ring half, skipped with the reason otherwise"
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
QUICK_BATCHES = [1, 32, 256]
SECONDS, QUICK_SECONDS = 5.0, 1.5
RATE = 10000            # open loop: well below what either backend answers at batch 1
OUTSTANDING = 128       # closed loop: enough in flight to fill the largest batch
BACKENDS = {"socket": "sockets (recvmmsg/sendmmsg)", "xdp": "AF_XDP ring"}
HEADER = ["backend", "batch", "replies_per_s", "closed_lost_pct", "server_cpu_pct", "rate_qps", "p50_us",
          "p90_us", "p99_us", "p99_9_us", "max_us", "open_lost_pct"]
QUESTIONS = [
    "How many replies a second did the socket backend give at batch 1, and at batch 32? "
    "The paper saw more than 2x from 1 to 32 for Namestorm: what factor do you see?",
    "The same for the AF_XDP ring: batch 1 against batch 32.",
    "From which batch size on does throughput grow by less than 10% when the batch doubles "
    "(or the next measured size)? Was the server's core saturated there (server_cpu_pct "
    "near 100), or was something else the limit?",
    "At the fixed moderate rate, what are p50 and p99 at batch 1 and at the largest batch? "
    "Does a large batch cost latency when the server is not saturated? Why (or why not)?",
    "At batch 32, which backend gives more replies a second, and by what factor?",
]


def measure(pair, wl, work: str, backend: str, batch: int, seconds: float) -> list:
    """One row: closed-loop throughput, then open-loop latency, on a fresh server."""
    log = os.path.join(work, f"server-{backend}-{batch}.log")
    with Server(pair, wl, ring_args(backend) + ["--batch", str(batch)], log) as server:
        cpu0, t0 = server.cpu_seconds(), time.monotonic()
        closed = gen(pair, wl, seconds, "--outstanding", str(OUTSTANDING), "--sockets", "4",
                     "--batch", "64")
        busy = 100 * (server.cpu_seconds() - cpu0) / (time.monotonic() - t0)
        opened = gen(pair, wl, seconds, "--rate", str(RATE))
    lat = latency_us(opened)
    note(f"{backend:6s} batch {batch:3d}: {closed['reply_rate']:10,.0f} replies/s, server CPU "
         f"{busy:3.0f}%; at "
         f"{RATE:,} q/s p50 {lat['p50']:.0f} us, p99 {lat['p99']:.0f} us")
    return [backend, batch, round(closed["reply_rate"]), round(closed["lost_pct"], 3),
            round(busy, 1), RATE,
            round(lat["p50"], 1), round(lat["p90"], 1), round(lat["p99"], 1),
            round(lat["p99_9"], 1), round(lat["max"], 1), round(opened["lost_pct"], 3)]


def run(pair, wl, work: str, out: str, quick: bool) -> None:
    batches, seconds = (QUICK_BATCHES, QUICK_SECONDS) if quick else (BATCHES, SECONDS)
    backends, skipped = ["socket"], {}
    why = skip_reason_xdp()
    if why:
        skipped["xdp"] = why
        note(f"the AF_XDP half is skipped: {why}")
    else:
        backends.append("xdp")
    rows = [measure(pair, wl, work, b, n, seconds) for b in backends for n in batches]
    write_csv(os.path.join(out, "results.csv"), HEADER, rows)
    plot(os.path.join(out, "batching.png"), rows, backends)
    setup = (f"One serve-dns worker on CPU 0 in the server namespace, `stormpy gen` on CPU 1 "
             f"in the client namespace, a veth pair between them. Throughput: closed loop, "
             f"{OUTSTANDING} queries in flight, {seconds:g} s. Latency: open loop at {RATE:,} q/s, "
             f"{seconds:g} s. Batch sizes: {', '.join(map(str, batches))}."
             + "".join(f" {BACKENDS[b]} skipped: {why}." for b, why in skipped.items()))
    write_report(os.path.join(out, "report.md"), "Lab 1, batching", setup, HEADER, rows,
                 list(zip(QUESTIONS, answers(rows, backends, skipped))))


def _by(rows: list, backend: str) -> dict:
    return {r[1]: r for r in rows if r[0] == backend}


def _gain(rows: list, backend: str, small: int, large: int) -> str:
    got = _by(rows, backend)
    a, b = got[small][2], got[large][2]
    return (f"{a:,} replies/s at batch {small} (server CPU {got[small][4]:.0f}%), {b:,} at "
            f"batch {large} (server CPU {got[large][4]:.0f}%): {b / a:.2f}x" if a else
            f"{a} replies/s at batch {small}")


def _flattens(rows: list, backend: str) -> str:
    got = sorted(_by(rows, backend).items())
    for (n, r), (m, s) in zip(got, got[1:]):
        if s[2] < 1.10 * r[2]:
            return (f"{backend}: from batch {n} ({r[2]:,} replies/s, server CPU {r[4]:.0f}%; "
                    f"{s[2]:,} at {m})")
    n, r = got[-1]
    return f"{backend}: still growing at batch {n} ({r[2]:,} replies/s)"


def answers(rows: list, backends: list, skipped: dict) -> list:
    big = max(r[1] for r in rows)
    mid = 32 if 32 in _by(rows, "socket") else big
    xdp = (_gain(rows, "xdp", 1, mid) if "xdp" in backends else
           f"skipped ({skipped['xdp']}); sockets gave {_by(rows, 'socket')[mid][2]:,} at batch {mid}")
    latency = "; ".join(f"{b}: p50 {_by(rows, b)[1][6]:.0f} us and p99 {_by(rows, b)[1][8]:.0f} us "
                        f"at batch 1, p50 {_by(rows, b)[big][6]:.0f} us and p99 "
                        f"{_by(rows, b)[big][8]:.0f} us at batch {big}" for b in backends)
    if "xdp" in backends:
        s, x = _by(rows, "socket")[mid][2], _by(rows, "xdp")[mid][2]
        faster = (f"AF_XDP {x:,} against sockets {s:,} replies/s at batch {mid}: "
                  f"{x / s:.2f}x" if s else f"sockets gave {s}")
    else:
        faster = f"only sockets measured: {_by(rows, 'socket')[mid][2]:,} replies/s at batch {mid}"
    return [_gain(rows, "socket", 1, mid), xdp, "; ".join(_flattens(rows, b) for b in backends),
            latency, faster]


def plot(path: str, rows: list, backends: list) -> None:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for b in backends:
        got = sorted(_by(rows, b).items())
        xs = [n for n, _ in got]
        left.plot(xs, [r[2] for _, r in got], marker="o", label=BACKENDS[b])
        right.plot(xs, [r[6] for _, r in got], marker="o", label=f"{b} p50")
        right.plot(xs, [r[8] for _, r in got], marker="s", linestyle="--", label=f"{b} p99")
    batches = sorted({r[1] for r in rows})
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches, [str(n) for n in batches])
        ax.set_xlabel("serve-dns --batch")
        ax.grid(True, alpha=0.3)
        ax.legend()
    left.set_ylabel("replies/s (closed loop)")
    left.set_ylim(bottom=0)
    right.set_ylabel(f"latency, us (open loop at {RATE:,} q/s)")
    right.set_yscale("log")     # p99 can be 100 times p50 on a busy machine
    fig.suptitle("Lab 1: batching")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
