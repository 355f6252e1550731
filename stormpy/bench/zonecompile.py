"""Zone compile: time and peak memory to turn zones of 1k, 100k and 1M records into a
table, beside Knot DNS loading the same files.

Each load runs in a child process of its own, so its peak memory (the kernel's high-water
mark of resident memory, `ru_maxrss` or `VmHWM`) is the load's alone:
- stormpy in one process (what `stormpy check-zone` does): read the file (ldns, the C
  path; dnspython where C declines the zone) and build the table; the time excludes the
  interpreter's start, the memory is the whole process's. With --python-path, the
  Python reference path too (dnspython and compiler.py).
- `stormpy serve-dns FILE` on loopback: from start until it answers the SOA (the compile
  plus start-up, sockets, one worker).
- `knotd` on loopback: from start until it answers the SOA with NOERROR (Knot loads a zone
  in the background and answers SERVFAIL until it is in).
- `kzonecheck FILE`: Knot's zone parser and semantic checks alone.
Every wait is bounded by --timeout; every child is stopped on the way out.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from stormpy.bench.errors import BenchError
from stormpy.bench.probe import ask
from stormpy.bench.processes import (REPO_ROOT, find_tool, peak_kib, pick_free_port, run_child,
                                     stop_process)
from stormpy.bench.report import markdown_table, say, write_csv
from stormpy.bench.servers import configure_knot
from stormpy.bench.signing import available as signing_available, sign_zone
from stormpy.bench.workload import ZONE_ORIGIN, write_compile_zone


COMPILE_CHILD = """
import json, os, resource, sys, time
os.environ["STORMPY_ZONE_LOADER"] = sys.argv[2]
from stormpy.dns.compiler import compile_zones
from stormpy.dns.native import NativeZone
from stormpy.dns.zone import load_zone
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
c0, t0 = cpu(), time.perf_counter()
zone = load_zone(sys.argv[1])
t1 = time.perf_counter()
table, stats = compile_zones([zone])
t2 = time.perf_counter()
print(json.dumps({"read": t1 - t0, "compile": t2 - t1, "cpu": cpu() - c0, "keys": stats.keys,
                  "table_bytes": stats.memory_bytes,
                  "path": "C" if isinstance(zone, NativeZone) else "Python",
                  "compiled_in": stats.compiled_in}))
"""


def _serve_until_soa(argv: list, port: int, timeout: float, cwd=None) -> tuple[float, int]:
    """Start a server, poll the SOA until NOERROR; (seconds to the answer, peak KiB)."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd,
                            start_new_session=True)
    try:
        while time.monotonic() < start + timeout:
            if proc.poll() is not None:
                last = (proc.stderr.read().decode(errors="replace").strip().splitlines()
                        or ["no output"])[-1]
                raise BenchError(f"{os.path.basename(argv[0])} exited during start-up: {last}")
            r = ask(port, ZONE_ORIGIN, "SOA", timeout=0.05)
            if r is not None and r.rcode() == 0 and r.answer:
                return time.monotonic() - start, peak_kib(proc.pid)
            time.sleep(0.01)
        raise BenchError(f"{os.path.basename(argv[0])} did not answer within {timeout:g} s (--timeout)")
    finally:
        stop_process(proc, grace=10.0)


def compile_rows(args) -> list[dict]:
    py = sys.executable
    tools = [("stormpy: read + compile, in one process", "c")]
    if args.python_path:   # the reference path: minutes at 1M records
        tools.append(("stormpy, Python path (dnspython): read + compile", "python"))
    tools.append(("stormpy serve-dns (start to first answer)", "serve"))
    if args.knot:
        if find_tool("knotd") is None:
            raise BenchError("knotd not found: apt-get install knot (or --no-knot)")
        tools.append(("knotd (start to first answer)", "knotd"))
        if find_tool("kzonecheck") is not None:  # not in every Debian release's packages
            tools.append(("kzonecheck", "kzonecheck"))
        else:
            say("compile: kzonecheck not installed, so only knotd loads the zones on Knot's side")
    if args.signed and not signing_available():
        raise BenchError("--signed needs ldns-signzone and ldns-keygen: apt-get install ldnsutils")
    rows = []
    with tempfile.TemporaryDirectory(prefix="stormpy-compile-") as tmp:
        for records in args.records:
            zone = os.path.join(tmp, f"bench-{records}.zone")
            say(f"compile: writing a zone of {records:,} records")
            write_compile_zone(zone, records)
            if args.signed:
                say(f"compile: signing it ({args.signed.upper()}, ldns-signzone)")
                keys = os.path.join(tmp, f"keys-{records}")
                os.makedirs(keys)
                zone = sign_zone(zone, ZONE_ORIGIN, keys, args.signed == "nsec3")
            best: dict = {}
            for rnd in range(args.rounds):
                for label, kind in tools:  # interleaved: every tool once per round
                    say(f"compile: {records:,} records, round {rnd + 1}/{args.rounds}: {label}")
                    port = pick_free_port(set())
                    if kind in ("c", "python"):
                        _, kib, out = run_child([py, "-c", COMPILE_CHILD, zone, kind], args.timeout,
                                                REPO_ROOT)
                        got = json.loads(out.strip().splitlines()[-1])
                        res = (got["read"] + got["compile"], kib, got)
                    elif kind == "serve":
                        res = _serve_until_soa([py, "-m", "stormpy", "serve-dns", zone, "--listen",
                                                f"127.0.0.1:{port}", "--workers", "1", "--control", ""],
                                               port, args.timeout, REPO_ROOT)
                    elif kind == "knotd":
                        work = os.path.join(tmp, f"knot-{records}-{rnd}")
                        os.makedirs(work)
                        argv, _ = configure_knot(work, zone, port, 1, log_level="error")
                        res = _serve_until_soa(argv, port, args.timeout)
                    else:
                        res = run_child([find_tool("kzonecheck"), "-o", ZONE_ORIGIN, zone], args.timeout)[:2]
                    if label not in best or res[0] < best[label][0]:
                        best[label] = res
            for label, _ in tools:
                seconds, kib = best[label][:2]
                row = {"records": records, "tool": label, "seconds": round(seconds, 6),
                       "peak_mib": round(kib / 1024, 1), "signed": args.signed or "no"}
                if len(best[label]) > 2:  # stormpy's own split
                    got = best[label][2]
                    row.update(read_s=round(got["read"], 3), compile_s=round(got["compile"], 3),
                               cpu_s=round(got["cpu"], 3), path=got["path"], keys=got["keys"],
                               table_mib=round(got["table_bytes"] / 2**20, 1))
                    row["compiled_in"] = got["compiled_in"]   # NSEC3: read in C, compiled in Python
                    row["tool"] += f" [read in {got['path']}, compiled in {got['compiled_in']}]"
                rows.append(row)
    return rows


def run_compile(args) -> int:
    rows = compile_rows(args)
    if args.json:
        print(json.dumps({"rows": rows}))
        return 0
    ref = {r["records"]: r for r in rows if r["tool"].startswith("knotd")}
    header = ["records", "what", "seconds (best)", "of which compile", "CPU seconds",
              "peak memory MiB", "table MiB", "time vs knotd", "memory vs knotd"]
    table = []
    for r in rows:
        k = ref.get(r["records"])
        table.append([f"{r['records']:,}", r["tool"], f"{r['seconds']:.3f}",
                      f"{r['compile_s']:.3f}" if "compile_s" in r else "",
                      f"{r['cpu_s']:.3f}" if "cpu_s" in r else "",
                      f"{r['peak_mib']:,.1f}", f"{r['table_mib']:,.1f}" if "table_mib" in r else "",
                      f"{r['seconds'] / k['seconds']:.2f}x" if k else "n/a",
                      f"{r['peak_mib'] / k['peak_mib']:.2f}x" if k and k["peak_mib"] else "n/a"])
    if args.signed:
        print(f"zones signed with ldns-signzone ({args.signed.upper()}); records counts the "
              f"source records\n")
    print(markdown_table(header, table))
    if args.csv:
        write_csv(args.csv, header, table)
    return 0
