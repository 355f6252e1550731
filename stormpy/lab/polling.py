"""Lab 3, polling (seed 000): how a server waits for the next query. On a UDP socket it
sleeps in recvmmsg (blocking), or the kernel spins on the device's NAPI context first
(SO_BUSY_POLL, or the net.core.busy_read / busy_poll sysctls for every socket); on the
AF_XDP ring it sleeps in poll() or spins on the ring (--poll busy). At a light load,
`stormpy gen` measures the latency percentiles and /proc/PID/task/*/stat the CPU time
the server's tasks spent. Handout: docs/labs/03-polling.md."""
from __future__ import annotations

import os
import time

from stormpy.bench.netns import IFACE
from stormpy.bench.report import write_csv
from stormpy.lab.common import (LabError, Server, gen, latency_us, note, pyplot, ring_args,
                                skip_reason_xdp, sysctls, write_report)

NUMBER = 3
IDEA = ("blocking against busy polling (SO_BUSY_POLL, the busy_read/busy_poll sysctls, "
        "spinning on the AF_XDP ring): latency at light load and the CPU it costs (seed 000)")
NEEDS = ("root (namespaces, veth, sysctls, put back afterwards); AF_XDP for the ring half, "
         "skipped with the reason otherwise")
BUSY_US = 50            # the seed's --busy-poll=50, and stormpy's own SO_BUSY_POLL value
SYSCTLS = {"net.core.busy_read": BUSY_US, "net.core.busy_poll": BUSY_US}
RATE = 2000             # light load: the server is idle most of the time
SECONDS, QUICK_SECONDS = 8.0, 2.5
# label -> (backend, serve-dns options, sysctls held while it runs)
VARIANTS = {
    "socket blocking": ("socket", [], {}),
    "socket SO_BUSY_POLL": ("socket", ["--poll", "busy"], {}),
    "socket busy sysctls": ("socket", [], SYSCTLS),
    "xdp blocking": ("xdp", ["--poll", "block"], {}),
    "xdp busy": ("xdp", ["--poll", "busy"], {}),
}
HEADER = ["variant", "backend", "rate_qps", "p50_us", "p90_us", "p99_us", "p99_9_us", "max_us",
          "lost_pct", "server_cpu_pct", "server_cpu_us_per_query"]
QUESTIONS = [
    "On the socket backend, what are p50 and p99 blocking and with SO_BUSY_POLL? The seed "
    "saw the minimum round trip fall by 7 us (44 to 37 us): how many microseconds do you save?",
    "Do the net.core.busy_read and busy_poll sysctls give the same as the socket option? "
    "What would they change for every other program on the machine?",
    "On the AF_XDP ring, what are p50 and p99 blocking in poll() and spinning on the ring? "
    "The seed's user-space busy loop took the mean from about 60 us to 38 us.",
    "How much of a core did the server's tasks use in each variant, at this light load, and "
    "how many microseconds of CPU is that per query?",
    "For each microsecond of p50 that busy polling saved on the ring, how much CPU did it "
    "cost? When is that worth it?",
]


def measure(pair, wl, work: str, label: str, seconds: float) -> list:
    """One row: a fresh server, an open-loop run at RATE, the server's CPU time over it."""
    backend, extra, settings = VARIANTS[label]
    log = os.path.join(work, f"server-{label.replace(' ', '-')}.log")
    with sysctls(settings), Server(pair, wl, ring_args(backend) + extra, log) as server:
        cpu0, t0 = server.cpu_seconds(), time.monotonic()
        report = gen(pair, wl, seconds, "--rate", str(RATE))
        cpu, wall = server.cpu_seconds() - cpu0, time.monotonic() - t0
    lat = latency_us(report)
    received = max(1, report["received"])
    row = [label, backend, RATE, round(lat["p50"], 1), round(lat["p90"], 1),
           round(lat["p99"], 1), round(lat["p99_9"], 1), round(lat["max"], 1),
           round(report["lost_pct"], 3), round(100 * cpu / wall, 1),
           round(1e6 * cpu / received, 1)]
    note(f"{label:20s} p50 {row[3]:7.1f} us  p99 {row[5]:7.1f} us  server CPU {row[9]:5.1f}%")
    return row


def run(pair, wl, work: str, out: str, quick: bool) -> None:
    seconds = QUICK_SECONDS if quick else SECONDS
    why = skip_reason_xdp()
    labels = [v for v, (b, _, _) in VARIANTS.items() if b == "socket" or not why]
    if why:
        note(f"the AF_XDP half is skipped: {why}")
    for name in SYSCTLS:
        if not os.path.exists("/proc/sys/" + name.replace(".", "/")):
            raise LabError(f"this kernel has no {name} sysctl")
    # veth runs a NAPI context only with GRO on (or an XDP program): without one there is
    # nothing for socket busy polling to spin on.
    r = pair.run(pair.server, "ethtool", "-K", IFACE, "gro", "on")
    if r.returncode != 0:
        raise LabError(f"ethtool -K {IFACE} gro on: {r.stderr.strip() or 'failed'}")
    rows = [measure(pair, wl, work, label, seconds) for label in labels]
    write_csv(os.path.join(out, "results.csv"), HEADER, rows)
    plot(os.path.join(out, "polling.png"), rows)
    setup = (f"One serve-dns worker on CPU 0 in the server namespace (GRO on its veth, so "
             f"veth has a NAPI context to poll), `stormpy gen` on CPU 1 in the client "
             f"namespace, open loop at {RATE:,} q/s for {seconds:g} s per variant. Busy "
             f"polling spins {BUSY_US} us. Server CPU: utime+stime of every task of the "
             f"server's processes (/proc/PID/task/TID/stat) over the run."
             + (f" AF_XDP skipped: {why}." if why else ""))
    write_report(os.path.join(out, "report.md"), "Lab 3, polling", setup, HEADER, rows,
                 list(zip(QUESTIONS, answers({r[0]: r for r in rows}))))


def _lat(row: list) -> str:
    return f"p50 {row[3]:.0f} us, p99 {row[5]:.0f} us"


def _change(us: float) -> str:
    return f"{abs(us):.0f} us {'lower' if us <= 0 else 'higher'}"


def _saved(before: list, after: list) -> str:
    return f"p50 {_change(after[3] - before[3])}, p99 {_change(after[5] - before[5])}"


def answers(rows: dict) -> list:
    block, so, sysctl = rows["socket blocking"], rows["socket SO_BUSY_POLL"], \
        rows["socket busy sysctls"]
    first = f"blocking {_lat(block)}; SO_BUSY_POLL {_lat(so)}: {_saved(block, so)}"
    second = (f"sysctls {_lat(sysctl)} against SO_BUSY_POLL {_lat(so)}; the sysctls are "
              f"machine-wide ({BUSY_US} us for every socket's blocking read and poll)")
    cpu = "; ".join(f"{r[0]} {r[9]:.1f}% of a core ({r[10]:.0f} us/query)" for r in rows.values())
    if "xdp busy" not in rows:
        return [first, second, "AF_XDP was skipped; the socket variants: "
                + "; ".join(f"{r[0]} {_lat(r)}" for r in rows.values()), cpu,
                f"AF_XDP was skipped; with SO_BUSY_POLL p50 was {_change(so[3] - block[3])} "
                f"for {so[9] - block[9]:+.1f}% of a core"]
    xb, xs = rows["xdp blocking"], rows["xdp busy"]
    third = f"blocking {_lat(xb)}; busy {_lat(xs)}: {_saved(xb, xs)}"
    saved, extra = xb[3] - xs[3], xs[9] - xb[9]
    per = (f"{extra / saved:.1f}% of a core per us saved" if saved > 0 else
           "busy polling saved nothing here")
    fifth = (f"on the ring: p50 {_change(-saved)} for {extra:+.1f}% of a core ({per}); on "
             f"the socket: p50 {_change(so[3] - block[3])} for {so[9] - block[9]:+.1f}% of a core")
    return [first, second, third, cpu, fifth]


def plot(path: str, rows: list) -> None:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    xs = range(len(rows))
    width = 0.27
    for i, (col, name) in enumerate(((3, "p50"), (5, "p99"), (6, "p99.9"))):
        left.bar([x + (i - 1) * width for x in xs], [r[col] for r in rows], width, label=name)
    left.set_ylabel(f"latency, us (open loop at {RATE:,} q/s)")
    left.set_yscale("log")      # p50 in tens of us beside a p99.9 in milliseconds
    left.legend()
    right.bar(xs, [r[9] for r in rows], color="#c0392b")
    right.set_ylabel("server CPU, % of one core")
    for ax in (left, right):
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r[0] for r in rows], rotation=25, ha="right")
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Lab 3: polling")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
