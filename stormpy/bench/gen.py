"""`stormpy bench gen`: `stormpy gen`'s own rate and cost beside dnsperf's, against the
same stormpy serve-dns on loopback: one server worker pinned to --server-cpu, each
client in turn pinned to --client-cpu, closed loop with the same number of queries
outstanding, interleaved rounds (the machine is noisy). What matters is the client's
CPU per query and how busy its core was: a client whose core is not saturated while
the server's is, is not the bottleneck."""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time

from stormpy.argtypes import positive, seconds
from stormpy.bench.cli import DEFAULT_STORMPY_CMD
from stormpy.bench.dnsperf import run_dnsperf
from stormpy.bench.errors import BenchError
from stormpy.bench.processes import (busy_pct, cpu_set, cpu_times, pick_free_port, run_to_end,
                                     stopping_children_on_signals)
from stormpy.bench.report import markdown_table, say
from stormpy.bench.servers import RunningServer, stormpy_spec
from stormpy.bench.workload import write_server_workload


def add_arguments(p) -> None:
    p.add_argument("--seconds", type=seconds, default=5.0, metavar="S",
                   help="each measurement (default 5)")
    p.add_argument("--rounds", type=positive, default=3, metavar="N",
                   help="rounds, each client once per round (default 3, at most 20)")
    p.add_argument("--outstanding", type=positive, default=200, metavar="N",
                   help="queries in flight, for both clients (default 200)")
    p.add_argument("--sockets", type=positive, default=4, metavar="N",
                   help="gen --sockets (default 4)")
    p.add_argument("--server-cpu", default="0", metavar="CPU", help="default 0")
    p.add_argument("--client-cpu", default="1", metavar="CPU", help="default 1")
    p.add_argument("--dnsperf", default="dnsperf", help="dnsperf's path (default: on PATH)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _gen_argv(args, port: int, query_path: str) -> list:
    return ["taskset", "-c", args.client_cpu, sys.executable, "-m", "stormpy", "gen", "dns",
            f"127.0.0.1:{port}", "--queries", query_path, "--outstanding", str(args.outstanding),
            "--sockets", str(args.sockets), "--batch", "64", "--seconds", f"{args.seconds:g}",
            "--json"]


def _run_gen(args, port: int, query_path: str, server) -> dict:
    ru0, st0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_times(), time.monotonic()
    status, out = run_to_end(_gen_argv(args, port, query_path), args.seconds + 30, "stormpy gen")
    wall, st1 = time.monotonic() - t0, cpu_times()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if status != 0:
        raise BenchError(f"stormpy gen failed (status {status}): {out.strip()[-300:]}")
    r = json.loads(out.strip().splitlines()[-1])
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return dict(replies_s=r["reply_rate"], lost_pct=r["lost_pct"], client_cpu_s=cpu,
                queries=r["sent"], client_busy=busy_pct(st0, st1, cpu_set(args.client_cpu))[0],
                server_busy=busy_pct(st0, st1, server.cpu_list)[0], wall=wall,
                latency=f"p50 {r['latency_ns']['p50'] / 1e6:.2f} ms, p99 "
                        f"{r['latency_ns']['p99'] / 1e6:.2f} ms")


def _run_dnsperf(args, wl, server) -> dict:
    perf_args = argparse.Namespace(client_cpus=args.client_cpu, dnsperf=args.dnsperf,
                                   input="binary", clients=24, threads=6,
                                   outstanding=args.outstanding, timeout=1.0, edns=False,
                                   dnsperf_extra="")
    r = run_dnsperf(perf_args, wl, server, args.seconds)
    return dict(replies_s=r.qps, lost_pct=r.lost_pct, client_cpu_s=r.client_cpu_s,
                queries=r.sent, client_busy=r.client_core_busy_pct,
                server_busy=r.server_core_busy_pct,
                latency=f"mean {r.avg_latency_s * 1e3:.2f} ms (no percentiles)")


def run_gen_bench(args) -> int:
    if args.seconds > 600 or args.rounds > 20:
        raise BenchError("--seconds must be at most 600 and --rounds at most 20")
    if shutil.which("taskset") is None:
        raise BenchError("taskset not found; install util-linux")
    have_dnsperf = shutil.which(args.dnsperf) is not None
    results: dict = {"stormpy gen": []}
    if have_dnsperf:
        results["dnsperf"] = []
    with tempfile.TemporaryDirectory(prefix="stormpy-bench-gen-") as d, \
            stopping_children_on_signals():
        wl = write_server_workload(d, 1000, 10000, 20261121)
        port = pick_free_port(set())
        spec = stormpy_spec(sys.executable, DEFAULT_STORMPY_CMD)
        with RunningServer(spec, wl, os.path.join(d, "server"), port, 1, args.server_cpu,
                           30.0) as server:
            for n in range(args.rounds):
                say(f"round {n + 1} of {args.rounds}")
                results["stormpy gen"].append(_run_gen(args, port, wl.query_path, server))
                if have_dnsperf:
                    results["dnsperf"].append(_run_dnsperf(args, wl, server))
    rows = []
    for client, runs in results.items():
        best = max(runs, key=lambda r: r["replies_s"])
        cpu_us = 1e6 * sum(r["client_cpu_s"] for r in runs) / max(1, sum(r["queries"] for r in runs))
        rows.append([client, f"{best['replies_s']:,.0f}", f"{best['lost_pct']:.2f}",
                     f"{cpu_us:.1f}", f"{best['client_busy']:.0f}", f"{best['server_busy']:.0f}",
                     best["latency"]])
    if args.json:
        print(json.dumps(results))
        return 0
    shown = ["python3" if a == sys.executable else a for a in _gen_argv(args, "PORT", "queries.txt")]
    print(f"`{' '.join(shown)}` beside `dnsperf -B -c 24 "
          f"-T 6 -q {args.outstanding}`, stormpy serve-dns with one worker on CPU "
          f"{args.server_cpu}, best of {args.rounds} round(s) of {args.seconds:g} s\n")
    print(markdown_table(["client", "replies/s", "lost %", "client CPU us/query",
                          "client core busy %", "server core busy %", "latency"], rows))
    if not have_dnsperf:
        print(f"\ndnsperf is not installed ({args.dnsperf!r}): apt-get install dnsperf")
    return 0
