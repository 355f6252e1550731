"""Zone compile: time and peak memory to turn zones of 1k, 100k and 1M records into a
table, beside Knot DNS loading the same files.

Each load runs in a child process of its own, so its peak memory (the kernel's high-water
mark of resident memory, `ru_maxrss` or `VmHWM`) is the load's alone:
- stormpy in one process (what `stormpy check-zone` does): read the file with dnspython,
  then resolve every answer and build the table; the time excludes the interpreter's
  start, the memory is the whole process's.
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
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from stormpy.bench.common import BenchError, markdown_table, say, write_csv

ORIGIN = "bench.example."


def make_zone(path: str, records: int) -> None:
    """Exactly `records` records: SOA, NS, glue, then names with an A and an AAAA each."""
    if records < 4:
        raise BenchError("a zone needs at least 4 records here (SOA, NS, glue, one name)")
    with open(path, "w") as f:
        f.write(f"$ORIGIN {ORIGIN}\n$TTL 3600\n@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n"
                "@ IN NS ns1\nns1 IN A 192.0.2.53\n")
        for i in range(records - 3):
            n = i // 2
            if i % 2 == 0:
                f.write(f"host{n} IN A 10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}\n")
            else:
                f.write(f"host{n} IN AAAA 2001:db8::{n >> 16:x}:{n & 0xffff:x}\n")


COMPILE_CHILD = """
import json, sys, time
from stormpy.dnscompile import compile_zones
from stormpy.zone import load_zone
t0 = time.perf_counter()
zone = load_zone(sys.argv[1])
t1 = time.perf_counter()
table, stats = compile_zones([zone])
t2 = time.perf_counter()
print(json.dumps({"read": t1 - t0, "compile": t2 - t1, "keys": stats.keys,
                  "table_bytes": stats.memory_bytes}))
"""


def _run_child(argv: list, timeout: float, cwd=None) -> tuple[float, int, str]:
    """Run to completion; (wall seconds, peak RSS KiB, output). BenchError when it fails."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                            start_new_session=True)
    deadline = start + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            wall = time.monotonic() - start
            out = proc.stdout.read().decode(errors="replace")
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                last = (out.strip().splitlines() or ["no output"])[-1]
                raise BenchError(f"{os.path.basename(argv[0])} failed (status {proc.returncode}): {last}")
            return wall, ru.ru_maxrss, out
        if time.monotonic() > deadline:
            _kill(proc)
            raise BenchError(f"{os.path.basename(argv[0])} took more than {timeout:g} s (--timeout)")
        time.sleep(0.005)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


def _peak_kib(pid: int) -> int:
    """VmHWM of pid and its children (KiB)."""
    total = 0
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            pids += [int(p) for p in fh.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def _serve_until_soa(argv: list, port: int, timeout: float, cwd=None) -> tuple[float, int]:
    """Start a server, poll the SOA until NOERROR; (seconds to the answer, peak KiB)."""
    from stormpy.bench.sockets import TYPE_CODES, udp_ask
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd,
                            start_new_session=True)
    try:
        while time.monotonic() < start + timeout:
            if proc.poll() is not None:
                last = (proc.stderr.read().decode(errors="replace").strip().splitlines()
                        or ["no output"])[-1]
                raise BenchError(f"{os.path.basename(argv[0])} exited during start-up: {last}")
            r = udp_ask(port, ORIGIN, TYPE_CODES["SOA"], timeout=0.05)
            if r is not None and r.rcode == 0 and r.answers:
                return time.monotonic() - start, _peak_kib(proc.pid)
            time.sleep(0.01)
        raise BenchError(f"{os.path.basename(argv[0])} did not answer within {timeout:g} s (--timeout)")
    finally:
        _kill(proc)


def knot_conf(workdir: str, zone: str, port: int) -> str:
    conf = os.path.join(workdir, "knot.conf")
    os.makedirs(os.path.join(workdir, "db"), exist_ok=True)
    with open(conf, "w") as fh:
        fh.write(f"""server:
    rundir: "{workdir}"
    listen: 127.0.0.1@{port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: "{workdir}/db"
log:
  - target: stderr
    any: error
template:
  - id: default
    storage: "{os.path.dirname(zone)}"
    file: "{os.path.basename(zone)}"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
    semantic-checks: off
zone:
  - domain: {ORIGIN}
""")
    return conf


def _which(cmd: str):
    return shutil.which(cmd) or next((p for p in (f"/usr/sbin/{cmd}", f"/sbin/{cmd}")
                                      if os.access(p, os.X_OK)), None)


def compile_rows(args) -> list[dict]:
    from stormpy.bench.sockets import REPO_ROOT, pick_free_port
    py = sys.executable
    tools = [("stormpy: read + compile, in one process", "check")]
    tools.append(("stormpy serve-dns (start to first answer)", "serve"))
    if args.knot:
        if _which("knotd") is None:
            raise BenchError("knotd not found: apt-get install knot (or --no-knot)")
        tools.append(("knotd (start to first answer)", "knotd"))
        if _which("kzonecheck") is not None:  # not in every Debian release's packages
            tools.append(("kzonecheck", "kzonecheck"))
        else:
            say("compile: kzonecheck not installed, so only knotd loads the zones on Knot's side")
    rows = []
    with tempfile.TemporaryDirectory(prefix="stormpy-compile-") as tmp:
        for records in args.records:
            zone = os.path.join(tmp, f"bench-{records}.zone")
            say(f"compile: writing a zone of {records:,} records")
            make_zone(zone, records)
            best: dict = {}
            for rnd in range(args.rounds):
                for label, kind in tools:  # interleaved: every tool once per round
                    say(f"compile: {records:,} records, round {rnd + 1}/{args.rounds}: {label}")
                    port = pick_free_port(set())
                    if kind == "check":
                        _, kib, out = _run_child([py, "-c", COMPILE_CHILD, zone], args.timeout, REPO_ROOT)
                        got = json.loads(out.strip().splitlines()[-1])
                        res = (got["read"] + got["compile"], kib, got)
                    elif kind == "serve":
                        res = _serve_until_soa([py, "-m", "stormpy", "serve-dns", zone, "--listen",
                                                f"127.0.0.1:{port}", "--workers", "1", "--control", ""],
                                               port, args.timeout, REPO_ROOT)
                    elif kind == "knotd":
                        work = os.path.join(tmp, f"knot-{records}-{rnd}")
                        os.makedirs(work)
                        res = _serve_until_soa([_which("knotd"), "-c", knot_conf(work, zone, port)], port,
                                               args.timeout)
                    else:
                        res = _run_child([_which("kzonecheck"), "-o", ORIGIN, zone], args.timeout)[:2]
                    if label not in best or res[0] < best[label][0]:
                        best[label] = res
            for label, _ in tools:
                seconds, kib = best[label][:2]
                row = {"records": records, "tool": label, "seconds": round(seconds, 3),
                       "peak_mib": round(kib / 1024, 1)}
                if len(best[label]) > 2:  # stormpy's own split
                    got = best[label][2]
                    row.update(read_s=round(got["read"], 3), compile_s=round(got["compile"], 3),
                               keys=got["keys"], table_mib=round(got["table_bytes"] / 2**20, 1))
                rows.append(row)
    return rows


def run_compile(args) -> int:
    rows = compile_rows(args)
    if args.json:
        print(json.dumps({"rows": rows}))
        return 0
    ref = {r["records"]: r for r in rows if r["tool"].startswith("knotd")}
    header = ["records", "what", "seconds (best)", "of which compile", "peak memory MiB",
              "table MiB", "time vs knotd", "memory vs knotd"]
    table = []
    for r in rows:
        k = ref.get(r["records"])
        table.append([f"{r['records']:,}", r["tool"], f"{r['seconds']:.3f}",
                      f"{r['compile_s']:.3f}" if "compile_s" in r else "",
                      f"{r['peak_mib']:,.1f}", f"{r['table_mib']:,.1f}" if "table_mib" in r else "",
                      f"{r['seconds'] / k['seconds']:.2f}x" if k else "n/a",
                      f"{r['peak_mib'] / k['peak_mib']:.2f}x" if k and k["peak_mib"] else "n/a"])
    print(markdown_table(header, table))
    if args.csv:
        write_csv(args.csv, header, table)
    return 0
