"""`stormpy bench cpu`: what a reply costs in CPU, at fixed offered loads.

Set-up as `stormpy bench peers`: two namespaces joined by a veth pair, the server pinned
to --server-cpu, the generator to --client-cpu, the same zone and query mix for all.
The server side's veth receives in a NAPI thread (/sys/class/net/veth0/threaded) pinned
to the server's CPU, so the kernel's per-task times hold the receive work that
per-process CPU misses. Each point: the generator offers a fixed rate (stormpy gen in
open loop: latency counted from when each query was due), or as much as it can ("max":
closed loop); the CPU is the server's processes' and that NAPI thread's utime+stime
(per task: tick-sampled /proc/stat misreads short wake-ups in a VM) over the run,
divided by the replies.

Servers: floor (the steer program's reflect stage: every query sent back with QR set,
XDP_TX, no process), stormpy-xdp-answer (serve-dns --xdp-answer), stormpy-xdp,
stormpy-xdp-busy (--poll busy: the worker spins on its ring), stormpy-xdp-napi (--poll
napi: the kernel's preferred busy polling, the veth's napi_defer_hard_irqs 2 and
gro_flush_timeout 20 us for that run only), stormpy-packet, knot-xdp, knot, nsd (RRL
off). A server without an XDP program on the veth (knot, nsd, stormpy-packet) gets its
receive in the sender's softirq, on the generator's CPU: the table says so beside its
figure.

Output: a markdown table (median of the rounds, with their spread), PREFIX.csv, and
PREFIX.png (CPU per reply against offered load, one line per server)."""
from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
import types
from contextlib import nullcontext
from dataclasses import dataclass

from stormpy.bench import peers
from stormpy.bench.errors import BenchError, ServerFailure
from stormpy.bench.netns import IFACE, SERVER_V4, VethPair
from stormpy.bench.processes import (REPO_ROOT, log_tail, process_tree, run_to_end, start_logged,
                                     stop_all, stop_process, task_cpu_ticks)
from stormpy.bench.report import markdown_table, say, write_csv
from stormpy.bench.servers import choose_servers
from stormpy.bench.workload import write_server_workload
from stormpy.lab.veth import NoThreadedNapi, threaded_napi

VARIANTS = {
    "stormpy-xdp-answer": ["--iface", IFACE, "--backend", "xdp", "--xdp-answer", "--port", "53"],
    "stormpy-xdp": ["--iface", IFACE, "--backend", "xdp", "--port", "53"],
    "stormpy-xdp-busy": ["--iface", IFACE, "--backend", "xdp", "--poll", "busy", "--port", "53"],
    "stormpy-xdp-napi": ["--iface", IFACE, "--backend", "xdp", "--poll", "napi", "--port", "53"],
    "stormpy-packet": ["--iface", IFACE, "--backend", "packet", "--port", "53"],
}
ALL = ["floor", *VARIANTS, "knot-xdp", "knot", "nsd"]
XDP_SERVERS = {"floor", "stormpy-xdp-answer", "stormpy-xdp", "stormpy-xdp-busy", "stormpy-xdp-napi",
               "knot-xdp"}
# --poll napi's interface knobs (the kernel's AF_XDP guide has a 200 us timeout, which lost
# queries here at 100,000/s while the worker slept: docs/OPERATING.md); 0 for the rest
NAPI_DEFERRAL = {"stormpy-xdp-napi": ("2", "20000")}
FLOOR = ("import signal, sys; from stormpy import _core; "
         "p = _core.XdpProgram(sys.argv[1], 53, 'native', reflect=True); "
         "print('reflecting', flush=True); signal.pause()")
START_TIMEOUT = 30.0


why_not = peers.why_not      # the same generator choices, CPUs and tools


def unavailable(name: str):
    if name == "floor" or name.startswith("stormpy-xdp"):
        return peers.unavailable("stormpy-xdp")
    return None if name in VARIANTS else peers.unavailable(name)


def server_argv(name: str, wl, workdir: str, args) -> list:
    if name == "floor":
        return [sys.executable, "-c", FLOOR, IFACE]
    if name in VARIANTS:
        return [sys.executable, "-m", "stormpy", "serve-dns", wl.zone_path, "--cpus",
                str(args.server_cpu), "--control", "", *VARIANTS[name]]
    return peers.server_argv(name, wl, workdir, args)


def generator_argv(args, qfile: str, load: str) -> list:
    if args.generator == "kxdpgun":
        at_load = types.SimpleNamespace(**vars(args))
        at_load.qps = args.max_qps if load == "max" else int(load)
        return peers.kxdpgun_argv(at_load, qfile, args.seconds)
    rate = ["--outstanding", str(args.gen_outstanding)] if load == "max" else ["--rate", load]
    return ["taskset", "-c", str(args.client_cpu), sys.executable, "-m", "stormpy", "gen", "dns",
            f"{SERVER_V4}:53", "--queries", qfile, "--backend", "xdp", *rate, "--batch", "32",
            "--seconds", f"{args.seconds:g}", "--json"]


def parse_generator(args, out: str) -> dict:
    if args.generator == "kxdpgun":
        got = peers.parse_kxdpgun(out, args.seconds)
        got["p50_us"] = got["p99_us"] = None
        return got
    import json
    r = json.loads(out.strip().splitlines()[-1])
    lat = r.get("latency_ns") or {}
    return {"sent": r["sent"], "replies": r["received"], "offered_qps": r["send_rate"],
            "replies_per_s": r["reply_rate"],
            "p50_us": lat["p50"] / 1000 if lat.get("p50") is not None else None,
            "p99_us": lat["p99"] / 1000 if lat.get("p99") is not None else None}


@dataclass
class Point:
    server: str
    load: str
    round: int
    replies: int
    replies_per_s: float
    process_s: float
    napi_s: float
    p50_us: float | None
    p99_us: float | None

    @property
    def us_per_reply(self) -> float:
        return (self.process_s + self.napi_s) / self.replies * 1e6 if self.replies else 0.0


def start(pair: VethPair, name: str, wl, args, workdir: str):
    os.makedirs(workdir, exist_ok=True)
    pair.run(pair.server, "ip", "link", "set", IFACE, "xdp", "off")   # nothing stale left
    defer, flush = NAPI_DEFERRAL.get(name, ("0", "0"))
    pair.run(pair.server, "sh", "-c", f"echo {defer} > /sys/class/net/{IFACE}/napi_defer_hard_irqs"
             f" && echo {flush} > /sys/class/net/{IFACE}/gro_flush_timeout")
    argv = pair.argv(pair.server, "taskset", "-c", str(args.server_cpu),
                     *server_argv(name, wl, workdir, args))
    log_path = os.path.join(workdir, "server.log")
    proc = start_logged(argv, log_path, REPO_ROOT, dict(os.environ, PYTHONUNBUFFERED="1"))
    # the check asks from a kernel socket; the veth takes what a native XDP program sends
    # (XDP_TX) only while it has a program itself: held here, the generator's later
    if name == "stormpy-xdp-answer":
        pair.hold_client_program()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                stop_process(proc)
                raise ServerFailure(f"{name} exited at start: {log_tail(log_path, 2)}")
            ready = ("reflecting" in log_tail(log_path, 5) if name == "floor"
                     else not peers.check_from_client(pair, wl))
            if ready:
                return proc
            time.sleep(0.2)
    finally:
        pair.release_client_program()
    stop_process(proc)
    raise ServerFailure(f"{name} did not answer within {START_TIMEOUT:g} s: {log_tail(log_path, 2)}")


def measure(pair: VethPair, name: str, proc, wl, args, load: str, rnd: int) -> Point:
    # a veth without an XDP program has no NAPI: its receive stays in the sender's softirq
    napi = threaded_napi(pair, [args.server_cpu]) if name in XDP_SERVERS else nullcontext([])
    try:
        with napi as threads:
            time.sleep(0.5)       # the receive that ran in softirq before has moved over
            p0, n0 = task_cpu_ticks(process_tree(proc.pid)), task_cpu_ticks(threads)
            status, out = run_to_end(
                pair.argv(pair.client, *generator_argv(args, wl.query_path, load)),
                args.seconds + 30, args.generator)
            p1, n1 = task_cpu_ticks(process_tree(proc.pid)), task_cpu_ticks(threads)
    except NoThreadedNapi as e:
        raise BenchError(f"{name}: {e}") from None
    if status != 0:
        raise BenchError(f"{args.generator} failed (status {status}): "
                         + " | ".join(out.strip().splitlines()[-2:]))
    if proc.poll() is not None:
        raise ServerFailure(f"{name} exited under load")
    got = parse_generator(args, out)
    hz = os.sysconf("SC_CLK_TCK")
    return Point(name, load, rnd, got["replies"], got["replies_per_s"], (p1 - p0) / hz,
                 (n1 - n0) / hz, got["p50_us"], got["p99_us"])


def run_cpu(args) -> int:
    loads = [x.strip() for x in args.loads.split(",") if x.strip()]
    if not loads or any(x != "max" and not x.isdigit() for x in loads):
        raise BenchError("--loads: queries/s numbers and 'max', comma-separated")
    reason = why_not(args)
    if reason:
        raise BenchError(reason)
    active, notes = choose_servers(args.servers or ",".join(ALL), ALL, unavailable, "cpu")
    tmp = tempfile.mkdtemp(prefix="stormpy-cpu-")
    points: list[Point] = []
    failed: dict = {}
    try:
        wl = write_server_workload(tmp, args.names, args.queries, args.seed)
        os.chmod(tmp, 0o755)
        with VethPair() as pair:
            for rnd in range(1, args.rounds + 1):
                for name in active:
                    if name in failed:
                        continue
                    try:
                        proc = start(pair, name, wl, args, os.path.join(tmp, f"{name}-r{rnd}"))
                    except ServerFailure as e:
                        failed[name] = str(e)
                        say(f"[round {rnd}] {name}: FAILED: {e}")
                        continue
                    try:
                        for load in loads:
                            pt = measure(pair, name, proc, wl, args, load, rnd)
                            points.append(pt)
                            say(f"[round {rnd}/{args.rounds}] {name:20s} {load:>7s}: "
                                f"{pt.replies_per_s:10,.0f} replies/s, {pt.us_per_reply:6.2f} us a reply "
                                f"(process {pt.process_s:.2f} s, NAPI {pt.napi_s:.2f} s)")
                    except ServerFailure as e:
                        failed[name] = str(e)
                        say(f"[round {rnd}] {name}: FAILED: {e}")
                    finally:
                        stop_process(proc)
    finally:
        stop_all()
        if args.keep:
            say(f"cpu: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return report(args, points, failed, notes, loads)


HEADER = ["server", "offered", "replies/s", "CPU us a reply", "spread", "above the floor",
          "NAPI share", "p50 us", "p99 us", "rounds", "note"]


def summarize(points: list[Point], loads: list) -> list[dict]:
    rows, floor = [], {}
    groups: dict = {}
    for p in points:
        groups.setdefault((p.server, p.load), []).append(p)
    for (server, load), ps in groups.items():
        cost = [p.us_per_reply for p in ps]
        med = statistics.median(cost)
        cpu = sum(p.process_s + p.napi_s for p in ps)
        row = {"server": server, "offered": load,
               "replies_per_s": statistics.median(p.replies_per_s for p in ps),
               "us_per_reply": med, "spread": max(cost) - min(cost),
               "napi_share": sum(p.napi_s for p in ps) / cpu if cpu else 0.0,
               "p50_us": _median(p.p50_us for p in ps), "p99_us": _median(p.p99_us for p in ps),
               "rounds": len(ps),
               "note": "" if server in XDP_SERVERS else "receive in the sender's softirq, not counted"}
        if server == "floor":
            floor[load] = med
        rows.append(row)
    for row in rows:
        base = floor.get(row["offered"])
        row["above_floor"] = row["us_per_reply"] - base if base is not None else None
    order = {s: i for i, s in enumerate(ALL)}
    rows.sort(key=lambda r: (loads.index(r["offered"]), order.get(r["server"], 99)))
    return rows


def _median(values):
    vs = [v for v in values if v is not None]
    return statistics.median(vs) if vs else None


def _fmt(v, digits=2):
    return "" if v is None else f"{v:.{digits}f}"


def report(args, points, failed, notes, loads) -> int:
    rows = summarize(points, loads)
    table = [[r["server"], r["offered"], f"{r['replies_per_s']:,.0f}", _fmt(r["us_per_reply"]),
              _fmt(r["spread"]), _fmt(r["above_floor"]), f"{r['napi_share']:.0%}",
              _fmt(r["p50_us"], 1), _fmt(r["p99_us"], 1), str(r["rounds"]), r["note"]]
             for r in rows]
    print(markdown_table(HEADER, table))
    for n in notes:
        print(f"- {n}")
    for name, why in failed.items():
        print(f"- {name} FAILED: {why}")
    write_csv(f"{args.out}.csv", HEADER, table)
    why = plot(f"{args.out}.png", rows, loads)
    print(f"- wrote {args.out}.csv" + (f"; {why}" if why else f" and {args.out}.png"))
    return 0 if rows and not failed else 1


def plot(path: str, rows: list[dict], loads: list):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is missing, so no PNG"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for server in dict.fromkeys(r["server"] for r in rows):
        mine = {r["offered"]: r["us_per_reply"] for r in rows if r["server"] == server}
        xs = [i for i, load in enumerate(loads) if load in mine]
        ax.plot(xs, [mine[loads[i]] for i in xs], marker="o", label=server,
                linestyle="-" if server in XDP_SERVERS else "--")
    ax.set_xticks(range(len(loads)))
    ax.set_xticklabels(loads)
    ax.set_xlabel("offered load (queries/s)")
    ax.set_ylabel("CPU per reply (us)")
    ax.set_title("CPU per reply: the server's processes and NAPI\n(dashed: its receive runs in the sender's softirq)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None
