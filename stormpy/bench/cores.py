"""`stormpy bench cores`: does one worker per queue scale with the cores?

The frame worker on the memory backend (the loop of `stormpy bench fastpath`, whole
frames, no kernel I/O), first alone on the first CPU, then one worker per CPU at once,
each a process of its own pinned to its CPU, all reading the same table in shared memory
through one TableRef, as serve-dns's workers do. Each worker replays the same recorded
queries from its own memory "queue". Aggregate frames per second over the wall time from
the first worker's start to the last one's end, against one worker's; the two measurements
alternate, round after round, and the ratio is taken per round.

A second CPU that is busy with something else (another job, this machine's own
interrupts) shows as a ratio below N: run it on a quiet machine. `--rrl RATE` turns
response rate limiting on, whose buckets are the one thing the workers share and write
per answer; the recorded queries all come from one address, so every worker updates the
same few buckets: the worst case for that sharing. The two-queue veth with
a generator on a third CPU needs three CPUs; on fewer it is skipped with the reason.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import tempfile
import time

from stormpy._core import TableRef, run_memory_worker
from stormpy.bench.errors import BenchError
from stormpy.bench.report import markdown_table, say, write_csv
from stormpy.bench.workload import CompiledWorkload


def _worker(ref, frames, index: int, cpu: int, rounds: int, mode: str, start, done) -> None:
    """One worker process: pinned, waits for the common start, runs, reports its frames."""
    os.sched_setaffinity(0, {cpu})
    start.wait()
    began = time.monotonic_ns()
    _, counters = run_memory_worker(ref, frames, worker=index, rounds=rounds, capture_max=0,
                                    mode=mode)
    done.put((index, counters["rx"], counters["tx"], began, time.monotonic_ns()))


def measure(ref, frames, cpus: list[int], rounds: int, mode: str) -> dict:
    """len(cpus) workers at once; frames/s from the first worker's start to the last one's end."""
    ctx = multiprocessing.get_context("fork")       # the children share ref's mapping
    start, done = ctx.Barrier(len(cpus) + 1), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(ref, frames, i, cpu, rounds, mode, start, done))
             for i, cpu in enumerate(cpus)]
    for p in procs:
        p.start()
    start.wait()
    results = [done.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode:
            raise BenchError(f"a worker process exited with status {p.exitcode}")
    rx, tx = sum(r[1] for r in results), sum(r[2] for r in results)
    if tx == 0:
        raise BenchError(f"the workers answered none of {rx} frames")
    seconds = (max(r[4] for r in results) - min(r[3] for r in results)) / 1e9
    return {"workers": len(cpus), "frames": rx, "answered": tx, "seconds": seconds,
            "qps": tx / seconds}


def cores_rows(args) -> dict:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise BenchError("this machine gives stormpy one CPU: there is nothing to scale to")
    wanted = cpus[:args.workers] if args.workers else cpus
    with tempfile.TemporaryDirectory(prefix="stormpy-cores-") as tmp:
        say(f"cores: compiling a zone of {args.names:,} names")
        wl = CompiledWorkload(args.names, args.queries, args.seed, tmp)
        ref = TableRef(wl.table, len(wanted))
        if args.rrl:
            ref.set_rrl(rate=args.rrl)
        one, many = [], []
        for r in range(args.repeat):
            say(f"cores: round {r + 1}/{args.repeat}: 1 worker, then {len(wanted)} at once")
            one.append(measure(ref, wl.frames, wanted[:1], args.rounds, args.mode))
            many.append(measure(ref, wl.frames, wanted, args.rounds, args.mode))
    ratios = [m["qps"] / o["qps"] for o, m in zip(one, many)]
    return {"names": args.names, "keys": wl.stats.keys, "mode": args.mode, "cpus": wanted,
            "rrl": args.rrl,
            "one_qps": [round(o["qps"]) for o in one], "all_qps": [round(m["qps"]) for m in many],
            "ratios": [round(x, 3) for x in ratios], "ratio_median": round(statistics.median(ratios), 3),
            "ratio_best": round(max(ratios), 3), "ratio_worst": round(min(ratios), 3),
            "frames": [m["frames"] for m in one + many],
            "answered_share": round(min(m["answered"] / m["frames"] for m in one + many), 4),
            "veth": _why_no_veth(cpus)}


def _why_no_veth(cpus: list[int]) -> str:
    if len(cpus) < 3:
        return (f"skipped: the two-queue veth needs a third CPU for the generator, and this "
                f"machine has {len(cpus)}")
    return "not measured here: use `stormpy lab run steering` (two-queue veth, AF_XDP)"


def run_cores(args) -> int:
    out = cores_rows(args)
    if args.json:
        print(json.dumps(out))
        return 0
    header = ["round", "1 worker q/s", f"{len(out['cpus'])} workers q/s", "ratio"]
    table = [[i + 1, f"{o:,}", f"{a:,}", f"{x:.2f}x"]
             for i, (o, a, x) in enumerate(zip(out["one_qps"], out["all_qps"], out["ratios"]))]
    print(markdown_table(header, table))
    rrl = f", RRL at {out['rrl']:,}/s" if out["rrl"] else ""
    print(f"\n{out['names']:,} names ({out['keys']:,} keys), {out['mode']}{rrl}, CPUs {out['cpus']}: "
          f"{len(out['cpus'])} workers give {out['ratio_median']:.2f}x one worker (median; "
          f"{out['ratio_worst']:.2f}-{out['ratio_best']:.2f}x)")
    print(f"veth: {out['veth']}")
    if args.csv:
        write_csv(args.csv, header, table)
    return 0
