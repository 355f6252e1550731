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

The sweeps (`stormpy bench sweep batch|zone`) reuse the frame loop: batch size 1..64, zone
size 1..1,000,000 names, each cell measured in memcpy and precopy mode side by side.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

from stormpy.bench.common import BenchError, markdown_table, say, write_csv

SERVER_MAC, CLIENT_MAC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
SERVER_V4, CLIENT_V4 = bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2])
TYPES = {"A": 1, "MX": 15, "TXT": 16, "AAAA": 28}


# --------------------------------------------------------------------------
# Workload: the zone and queries of docs/PERFORMANCE.md section 2 (same seed, same mix)
# --------------------------------------------------------------------------

def make_zone(path: str, names: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w") as f:
        f.write("$ORIGIN bench.example.\n$TTL 3600\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n"
                "@ NS ns1\nns1 A 192.0.2.53\n")
        for i in range(names):
            # two groups: one IPv6 group holds 16 bits, and past 65,535 names i does not
            f.write(f"host{i} A 192.0.2.{i % 250 + 1}\nhost{i} AAAA 2001:db8::{i >> 16:x}:{i & 0xffff:x}\n")
            if i % 10 == 0:
                f.write(f'host{i} TXT "v={rng.getrandbits(64):x}"\n')


def query_wire(qid: int, name: str, qtype: int) -> bytes:
    """A query as dnspython's make_query writes it: RD set, one question, no EDNS."""
    labels = b"".join(bytes([len(l)]) + l.encode() for l in name.split("."))
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", qtype, 1)


def make_queries(names: int, count: int, seed: int) -> list[bytes]:
    """80% existing names (A, AAAA), 10% NODATA (MX), 10% NXDOMAIN; random 0x20 case. The
    random draws are those of the earlier bench/fastpath.py, so the same seed gives the same
    questions as the figures recorded with it."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        roll = rng.random()
        host = f"host{rng.randrange(names)}.bench.example"
        if roll < 0.8:
            qtype = rng.choice(["A", "A", "A", "AAAA"])
        elif roll < 0.9:
            qtype = "MX"
        else:
            host, qtype = f"nx{rng.randrange(10**6)}.bench.example", "A"
        host = "".join(c.upper() if rng.random() < 0.5 else c for c in host)
        out.append(query_wire(i & 0xFFFF, host, TYPES[qtype]))  # the ID draws nothing from rng
    return out


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def make_frame(payload: bytes, sport: int, dport: int = 53) -> bytes:
    """Ethernet + IPv4 + UDP around a DNS payload, with correct checksums."""
    ulen = 8 + len(payload)
    pseudo = CLIENT_V4 + SERVER_V4 + struct.pack("!BBH", 0, 17, ulen)
    udp = struct.pack("!HHHH", sport, dport, ulen, 0) + payload
    ucs = _csum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", ucs) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0, 0x4000, 64, 17, 0, CLIENT_V4, SERVER_V4)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    return SERVER_MAC + CLIENT_MAC + b"\x08\x00" + ip + udp


class Workload:
    """A compiled zone of `names` names and its recorded queries, as payloads and frames."""

    def __init__(self, names: int, queries: int, seed: int, tmpdir: str):
        from stormpy.dnscompile import compile_zones
        from stormpy.zone import load_zone
        self.names, self.count, self.seed = names, queries, seed
        self.zone = os.path.join(tmpdir, f"bench-{names}.zone")
        make_zone(self.zone, names, seed)
        self.table, self.stats = compile_zones([load_zone(self.zone)])
        self.queries = make_queries(names, queries, seed)
        self.frames = [make_frame(q, 1024 + i % 60000) for i, q in enumerate(self.queries)]
        self._ref = None

    @property
    def ref(self):
        """A TableRef publishing the table. Publishing hands the table over, so the DNS
        loop, which needs the unpublished table, must run first."""
        if self._ref is None:
            from stormpy import _core
            self._ref = _core.TableRef(self.table, 1)
        return self._ref


# --------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------

def time_dns(wl: Workload, rounds: int, repeat: int) -> dict:
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


def time_frames(wl: Workload, rounds: int, repeat: int, mode: str = "memcpy", batch: int = 32) -> dict:
    """Best of `repeat` runs of the frame worker on the memory backend."""
    from stormpy._core import run_memory_worker
    run_memory_worker(wl.ref, wl.frames, batch=batch, rounds=1, capture_max=0, mode=mode)  # warm
    best = None
    for _ in range(repeat):
        start = time.perf_counter_ns()
        _, c = run_memory_worker(wl.ref, wl.frames, batch=batch, rounds=rounds, capture_max=0,
                                 mode=mode)
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

TOGGLE = {"dns": "sp_dns_answer", "frame": "sp_frame_worker_run"}


def why_no_callgrind():
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (apt-get install valgrind)"
    return None


def callgrind(names: int, queries: int, seed: int, what: str, mode: str = "memcpy",
              batch: int = 32, rounds: int = 1, annotate: bool = False):
    """Instructions per query inside TOGGLE[what], counted by callgrind on a child process
    that builds the same workload and runs it `rounds` times. Returns (per query,
    per-function rows or None)."""
    with tempfile.TemporaryDirectory(prefix="stormpy-cg-") as tmp:
        out = os.path.join(tmp, "cg.out")
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                f"--toggle-collect={TOGGLE[what]}", sys.executable, "-m", "stormpy.bench.fastpath",
                "--child", what, str(names), str(queries), str(seed), mode, str(batch), str(rounds)]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        except subprocess.TimeoutExpired:
            raise BenchError("valgrind ran for more than an hour; use fewer --queries") from None
        m = re.search(r"Collected : (\d+)", r.stderr)
        if r.returncode != 0 or not m:
            last = (r.stderr.strip().splitlines() or ["no output"])[-1]
            raise BenchError(f"valgrind failed (status {r.returncode}): {last}")
        per_query = round(int(m.group(1)) / (queries * rounds), 1)
        rows = annotate_functions(out, queries * rounds) if annotate else None
        return per_query, rows


def annotate_functions(cg_out: str, nqueries: int, top: int = 8) -> list:
    """Exclusive instruction counts per function from callgrind_annotate: the biggest
    `top`, as (function, share %, per query)."""
    if shutil.which("callgrind_annotate") is None:
        return []
    r = subprocess.run(["callgrind_annotate", cg_out], capture_output=True, text=True, timeout=600)
    rows, total = [], None
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(\S.*)$", line)
        if m and "PROGRAM TOTALS" in line:
            total = int(m.group(1).replace(",", ""))
            continue
        if m and total:
            count = int(m.group(1).replace(",", ""))
            fn = m.group(3).split(":", 1)[-1].split(" [")[0].strip()
            rows.append((fn, round(100.0 * count / total, 1), round(count / nqueries, 1)))
        if len(rows) >= top:
            break
    return rows


def _child(argv: list) -> None:
    """Run under valgrind: build the workload, then run the measured loop once."""
    what, names, queries, seed, mode, batch, rounds = argv
    names, queries, seed, batch, rounds = map(int, (names, queries, seed, batch, rounds))
    with tempfile.TemporaryDirectory(prefix="stormpy-cgchild-") as tmp:
        wl = Workload(names, queries, seed, tmp)
        if what == "dns":
            wl.table.bench_dns(wl.queries, rounds)
        else:
            from stormpy._core import run_memory_worker
            run_memory_worker(wl.ref, wl.frames, batch=batch, rounds=rounds, capture_max=0,
                              mode=mode)


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
            wl = Workload(names, args.queries, args.seed, tmp)
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
                res["instructions_per_query"], _ = callgrind(names, cq, args.seed, "frame",
                                                             batch=args.batch)
                res["dns_instructions_per_query"], fns = callgrind(
                    names, cq, args.seed, "dns", annotate=args.annotate)
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
              _i(r["dns_instructions_per_query"]), _m(r["qps"]), r["ns_per_query"],
              _i(r["instructions_per_query"]), _m(r["precopy_qps"]), f"{r['precopy_over_memcpy']:.2f}x"]
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


def _i(v) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


# --------------------------------------------------------------------------
# stormpy bench sweep batch|zone
# --------------------------------------------------------------------------

def sweep_rows(args) -> list[dict]:
    """One row per cell; memcpy and precopy measured back to back in every cell, and the
    whole grid `args.passes` times over (interleaved), keeping each cell's best."""
    if args.axis == "batch":
        cells = [(args.zone_names[0], b) for b in args.batches]
    else:
        cells = [(n, args.batch) for n in args.zone_names]
    best: dict = {}
    with tempfile.TemporaryDirectory(prefix="stormpy-sweep-") as tmp:
        workloads = {}
        for names in dict.fromkeys(n for n, _ in cells):
            say(f"sweep: compiling a zone of {names:,} names")
            workloads[names] = Workload(names, args.queries, args.seed, tmp)
        for p in range(args.passes):
            for names, batch in cells:
                say(f"sweep: pass {p + 1}/{args.passes}: {names:,} names, batch {batch}")
                for mode in ("memcpy", "precopy"):
                    r = time_frames(workloads[names], args.rounds, 1, mode, batch)
                    key = (names, batch, mode)
                    if key not in best or r["qps"] > best[key]["qps"]:
                        best[key] = r
        rows = []
        for names, batch in cells:
            m, pc = best[(names, batch, "memcpy")], best[(names, batch, "precopy")]
            rows.append({"names": names, "keys": workloads[names].stats.keys, "batch": batch,
                         "memcpy_qps": m["qps"], "memcpy_ns_per_query": m["ns_per_query"],
                         "precopy_qps": pc["qps"], "precopy_ns_per_query": pc["ns_per_query"],
                         "precopy_over_memcpy": round(pc["qps"] / m["qps"], 3)})
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
    first = "batch 1" if args.axis == "batch" else f"{rows[0]['names']:,} names"
    first = f"vs {first}" if args.axis == "zone" else f"vs batch {rows[0]['batch']}"
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
    if len(sys.argv) == 9 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        sys.exit("run `stormpy bench fastpath` instead")
