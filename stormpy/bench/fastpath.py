"""The fast path alone: recorded queries answered from the in-process table, no kernel I/O,
no root.

Two loops are timed, both in C without the GIL:
- the DNS layer: every query through `sp_dns_answer`, the function the workers call;
- whole frames (Ethernet, IPv4, UDP, DNS) through the real frame worker on the memory
  backend (`_core.run_memory_worker`), replies rendered into a TX buffer (memcpy) or sent
  from the pre-copy pool (precopy).

With valgrind present, callgrind counts instructions per query, which is stable on a
noisy machine where time is not: inside `sp_dns_answer` for the DNS layer, and inside
`sp_frame_worker_run` (parse, answer, checksums, memory-backend RX/TX) for frames. The
counting runs this module again under valgrind as a child (`python -m
stormpy.bench.fastpath CHILD-ARGS`), on the same zone and queries.

The sweeps (`stormpy bench sweep batch|zone|answer`) reuse the frame loop: batch size
1..64, zone size 1..1,000,000 names, answer size 100..1,200 bytes, each cell measured in
memcpy and precopy mode side by side (and, for answer sizes, precopy with every answer
copied: `--precopy-min-bytes 0`).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from stormpy._core import TapRegion, run_memory_worker
from stormpy.bench.callgrind import TOGGLE, count_instructions, why_no_callgrind
from stormpy.bench.errors import BenchError
from stormpy.bench.report import count_or_na, markdown_table, say, write_csv
from stormpy.bench.workload import CompiledWorkload


# --------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------

def time_dns(wl: CompiledWorkload, rounds: int, repeat: int) -> dict:
    """Best of `repeat` runs of the DNS layer over all queries, `rounds` times over."""
    wl.table.bench_dns(wl.queries, 2)  # warm the caches
    best = None
    for _ in range(repeat):
        answered, nbytes, ns = wl.table.bench_dns(wl.queries, rounds)
        if best is None or ns < best[2]:
            best = (answered, nbytes, ns)
    answered, nbytes, ns = best
    n = wl.count * rounds
    return {"dns_qps": round(n / (ns / 1e9)), "dns_ns_per_query": round(ns / n, 1),
            "answered_share": round(answered / n, 4),
            "bytes_per_answer": round(nbytes / answered, 1) if answered else 0.0}


def time_frames(wl: CompiledWorkload, rounds: int, repeat: int, mode: str = "memcpy", batch: int = 32,
                precopy_min: int | None = None) -> dict:
    """Best of `repeat` runs of the frame worker on the memory backend. precopy_min: the
    pool's minimum answer length (None: serve-dns's default)."""
    kw = dict(batch=batch, capture_max=0, mode=mode, precopy_min=precopy_min)
    run_memory_worker(wl.ref, wl.frames, rounds=1, **kw)  # warm
    best = None
    for _ in range(repeat):
        start = time.perf_counter_ns()
        _, c = run_memory_worker(wl.ref, wl.frames, rounds=rounds, **kw)
        ns = time.perf_counter_ns() - start
        if best is None or ns < best[0]:
            best = (ns, c)
    ns, c = best
    if c["tx"] == 0:
        raise BenchError(f"the frame worker answered none of {c['rx']} frames ({mode}); "
                         f"counters: {c}")
    out = {"qps": round(c["tx"] / (ns / 1e9)), "ns_per_query": round(ns / c["rx"], 1),
           "answered_share": round(c["tx"] / c["rx"], 4)}
    if mode == "precopy":
        out.update(precopy_hits=c["precopy_hits"], precopy_fills=c["precopy_fills"],
                   precopy_fallbacks=c["precopy_fallbacks"])
    return out


# --------------------------------------------------------------------------
# callgrind
# --------------------------------------------------------------------------

def callgrind_args(what: str, names: int, queries: int, seed: int, mode: str = "memcpy",
                   batch: int = 32, rounds: int = 1, tap: str = "none") -> list:
    """The arguments of this module as the child counted under valgrind. tap (frames):
    none, or a `stormpy tap` region given to the worker and "detached" or "attached"."""
    return ["stormpy.bench.fastpath", "--child", what, str(names), str(queries), str(seed), mode,
            str(batch), str(rounds), tap]


def _child(argv: list) -> None:
    """Run under valgrind: build the workload, then run the measured loop once."""
    what, names, queries, seed, mode, batch, rounds, tap = argv
    names, queries, seed, batch, rounds = map(int, (names, queries, seed, batch, rounds))
    with tempfile.TemporaryDirectory(prefix="stormpy-cgchild-") as tmp:
        wl = CompiledWorkload(names, queries, seed, tmp)
        if what == "dns":
            wl.table.bench_dns(wl.queries, rounds)
        else:
            region = None
            if tap != "none":
                region = TapRegion.create(os.path.join(tmp, "tap"), 1, 64 << 20, 2048)
                if tap == "attached":
                    region.attach(os.getpid())
            run_memory_worker(wl.ref, wl.frames, batch=batch, rounds=rounds, capture_max=0,
                              mode=mode, tap=region)


# --------------------------------------------------------------------------
# stormpy bench fastpath
# --------------------------------------------------------------------------

def fastpath_rows(args) -> list[dict]:
    """One result per --names value."""
    results = []
    cg_reason = None if args.callgrind is not False else "not asked for (--no-callgrind)"
    if cg_reason is None:
        cg_reason = why_no_callgrind()
    with tempfile.TemporaryDirectory(prefix="stormpy-bench-") as tmp:
        for names in args.names:
            say(f"fastpath: {names} names: compiling")
            wl = CompiledWorkload(names, args.queries, args.seed, tmp)
            res = {"names": names, "keys": wl.stats.keys, "queries": args.queries,
                   "rounds": args.rounds, "batch": args.batch}
            say(f"fastpath: {names} names: timing the DNS layer and the frame worker")
            res.update(time_dns(wl, args.rounds, args.repeat))
            frames = {m: time_frames(wl, args.rounds, args.repeat, m, args.batch)
                      for m in ("memcpy", "precopy")}
            res.update({k: v for k, v in frames["memcpy"].items() if k != "answered_share"})
            res.update({f"precopy_{k}".replace("precopy_precopy_", "precopy_"): v
                        for k, v in frames["precopy"].items() if k != "answered_share"})
            res["precopy_over_memcpy"] = round(frames["precopy"]["qps"] / frames["memcpy"]["qps"], 3)
            res["answered_share"] = frames["memcpy"]["answered_share"]
            if cg_reason is None:
                say(f"fastpath: {names} names: counting instructions with callgrind "
                    f"({args.cg_queries} queries; slow)")
                cq = min(args.cg_queries, args.queries)
                counts = {what: count_instructions(
                    {what: callgrind_args(what, names, cq, args.seed, batch=args.batch)},
                    TOGGLE[what], cq, 3600, "use fewer --queries",
                    annotate=(what,) if args.annotate else ())[what] for what in ("frame", "dns")}
                res["instructions_per_query"] = counts["frame"][0]
                res["dns_instructions_per_query"], fns = counts["dns"]
                if args.annotate:
                    res["dns_functions"] = [{"function": f, "share_pct": s, "per_query": p}
                                            for f, s, p in fns]
            else:
                res["instructions_per_query"] = None
                res["dns_instructions_per_query"] = None
                res["instructions_reason"] = cg_reason
            results.append(res)
    return results


def run_fastpath(args) -> int:
    rows = fastpath_rows(args)
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else {"rows": rows}))
        return 0
    header = ["zone names", "lookup keys", "DNS layer q/s", "DNS ns/query", "DNS instr/query",
              "frames q/s (memcpy)", "frame ns/query", "frame instr/query",
              "frames q/s (precopy)", "precopy/memcpy"]
    table = [[f"{r['names']:,}", f"{r['keys']:,}", _m(r["dns_qps"]), r["dns_ns_per_query"],
              count_or_na(r["dns_instructions_per_query"]), _m(r["qps"]), r["ns_per_query"],
              count_or_na(r["instructions_per_query"]), _m(r["precopy_qps"]), f"{r['precopy_over_memcpy']:.2f}x"]
             for r in rows]
    print(markdown_table(header, table))
    if rows[0].get("instructions_reason"):
        print(f"\ninstructions: not counted: {rows[0]['instructions_reason']}")
    for r in rows:
        if r.get("dns_functions"):
            print(f"\nwhere the DNS layer's instructions go ({r['names']:,} names, exclusive):\n")
            print(markdown_table(["function", "share", "per query"],
                                 [[f"`{f['function']}`", f"{f['share_pct']}%", f"≈ {f['per_query']:.0f}"]
                                  for f in r["dns_functions"]]))
    if args.csv:
        write_csv(args.csv, header, table)
    return 0


def _m(qps) -> str:
    return f"{qps / 1e6:.2f} M"




# --------------------------------------------------------------------------
# stormpy bench sweep batch|zone|answer
# --------------------------------------------------------------------------

# (label, mode, precopy_min): precopy as serve-dns runs it, and with every answer copied
SWEEP_MODES = [("memcpy", "memcpy", None), ("precopy", "precopy", None)]
EVERY_ANSWER = ("precopy_all", "precopy", 0)


def sweep_rows(args) -> list[dict]:
    """One row per cell; the modes measured back to back in every cell, and the whole
    grid `args.passes` times over (interleaved), keeping each cell's best. A cell is
    (names, batch, answer bytes; 0: the fast-path workload's answers)."""
    modes = SWEEP_MODES + ([EVERY_ANSWER] if args.axis == "answer" else [])
    if args.axis == "batch":
        cells = [(args.zone_names[0], b, 0) for b in args.batches]
    elif args.axis == "zone":
        cells = [(n, args.batch, 0) for n in args.zone_names]
    else:
        cells = [(args.zone_names[0], args.batch, size) for size in args.sizes]
    best: dict = {}
    with tempfile.TemporaryDirectory(prefix="stormpy-sweep-") as tmp:
        workloads = {}
        for names, _, size in dict.fromkeys((n, 0, s) for n, _, s in cells):
            say(f"sweep: compiling a zone of {names:,} names" + (f", {size}-byte answers" if size else ""))
            workloads[names, size] = CompiledWorkload(names, args.queries, args.seed, tmp, size)
        for p in range(args.passes):
            for names, batch, size in cells:
                say(f"sweep: pass {p + 1}/{args.passes}: {names:,} names, batch {batch}"
                    + (f", {size}-byte answers" if size else ""))
                for label, mode, least in modes:
                    r = time_frames(workloads[names, size], args.rounds, 1, mode, batch, least)
                    key = (names, batch, size, label)
                    if key not in best or r["qps"] > best[key]["qps"]:
                        best[key] = r
        rows = []
        for names, batch, size in cells:
            m = best[(names, batch, size, "memcpy")]
            row = {"names": names, "keys": workloads[names, size].stats.keys, "batch": batch,
                   "memcpy_qps": m["qps"], "memcpy_ns_per_query": m["ns_per_query"]}
            if size:
                row["answer_bytes"] = size
            for label, _, _ in modes[1:]:
                pc = best[(names, batch, size, label)]
                row.update({f"{label}_qps": pc["qps"], f"{label}_ns_per_query": pc["ns_per_query"],
                            f"{label}_over_memcpy": round(pc["qps"] / m["qps"], 3),
                            f"{label}_hits": pc["precopy_hits"]})
            rows.append(row)
    base = rows[0]
    for r in rows:
        r["memcpy_vs_first"] = round(r["memcpy_qps"] / base["memcpy_qps"], 3)
        r["precopy_vs_first"] = round(r["precopy_qps"] / base["precopy_qps"], 3)
    return rows


def run_sweep(args) -> int:
    rows = sweep_rows(args)
    if args.json:
        print(json.dumps({"axis": args.axis, "rows": rows}))
        return 0
    if args.axis == "answer":
        header = ["answer bytes", "zone names", "memcpy q/s", "memcpy ns/query",
                  "precopy q/s", "precopy ns/query", "precopy/memcpy", "precopy hits",
                  "every answer copied q/s", "every answer copied ns/query",
                  "every answer copied/memcpy"]
        table = [[f"{r['answer_bytes']:,}", f"{r['names']:,}", _m(r["memcpy_qps"]),
                  r["memcpy_ns_per_query"], _m(r["precopy_qps"]), r["precopy_ns_per_query"],
                  f"{r['precopy_over_memcpy']:.2f}x", f"{r['precopy_hits']:,}",
                  _m(r["precopy_all_qps"]), r["precopy_all_ns_per_query"],
                  f"{r['precopy_all_over_memcpy']:.2f}x"] for r in rows]
    else:
        first = f"vs {rows[0]['names']:,} names" if args.axis == "zone" else f"vs batch {rows[0]['batch']}"
        header = ["zone names", "lookup keys", "batch", "memcpy q/s", "memcpy ns/query", "precopy q/s",
                  "precopy ns/query", "precopy/memcpy", f"memcpy {first}", f"precopy {first}"]
        table = [[f"{r['names']:,}", f"{r['keys']:,}", r["batch"], _m(r["memcpy_qps"]),
                  r["memcpy_ns_per_query"], _m(r["precopy_qps"]), r["precopy_ns_per_query"],
                  f"{r['precopy_over_memcpy']:.2f}x", f"{r['memcpy_vs_first']:.2f}x",
                  f"{r['precopy_vs_first']:.2f}x"] for r in rows]
    print(markdown_table(header, table))
    if args.csv:
        write_csv(args.csv, header, table)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 10 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        sys.exit("run `stormpy bench fastpath` instead")
