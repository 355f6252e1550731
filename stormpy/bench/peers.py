"""`stormpy bench peers`: every server answers the same kxdpgun load across one veth pair.

Set-up: two network namespaces joined by a veth pair (server 198.18.0.1, load generator
198.18.0.2; static neighbour entries, so no ARP in the traffic). The server is pinned to
--server-cpu with taskset, kxdpgun to --client-cpu with its own -F. Every server gets the
same zone and the same query file (the server workload of stormpy/bench/workload.py, as
`stormpy bench sockets` uses: 80% existing name/type, 10% NODATA, 10% NXDOMAIN, fixed seed).

Servers (--servers picks and orders them):
- stormpy-xdp, stormpy-xdp-precopy: `serve-dns --iface veth0 --backend xdp [--mode precopy]`
- stormpy-packet, stormpy-packet-precopy: the same on AF_PACKET
- stormpy-socket: `serve-dns --listen 198.18.0.1:53 --workers 1`
- knot-xdp: knotd with `xdp: listen: veth0@53` (one UDP worker)
- knot: knotd on sockets, one UDP worker
- nsd: one server process, RRL off, minimal responses

Run: for each round, for each server in turn (interleaved, the machine is noisy): start
it, wait until it answers the sample questions correctly from the client namespace, run
kxdpgun for --seconds at --qps offered load, check the answers again, stop it. A server
that fails is dropped from later rounds and reported. Best of the rounds is kept.

Output: a markdown table (replies/s best and median, offered q/s, share of the offered
load answered, server core busy, rcode check), stormpy's ratio to each peer, PREFIX.csv
(one row per server), PREFIX-rounds.csv (one row per measurement) and PREFIX.png (a bar
chart; needs matplotlib). Every wait is bounded, every server and kxdpgun runs in its
own process group and is stopped on exit, and the namespaces are deleted.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from stormpy.bench.errors import BenchError, ServerFailure
from stormpy.bench.netns import IFACE, SERVER_V4, VethPair, why_no_netns
from stormpy.bench.probe import probe_spec, rcode_mix_problems
from stormpy.bench.processes import (REPO_ROOT, busy_pct, cpu_times, find_tool, log_tail,
                                     run_to_end, start_logged, stop_all, stop_process)
from stormpy.bench.report import bar_chart, markdown_table, say, without_thousands, write_csv
from stormpy.bench.servers import choose_servers, configure_knot, configure_nsd
from stormpy.bench.workload import write_server_workload

STORMPY_VARIANTS = {
    "stormpy-xdp": ["--iface", IFACE, "--backend", "xdp", "--port", "53"],
    "stormpy-xdp-precopy": ["--iface", IFACE, "--backend", "xdp", "--mode", "precopy", "--port", "53"],
    "stormpy-packet": ["--iface", IFACE, "--backend", "packet", "--port", "53"],
    "stormpy-packet-precopy": ["--iface", IFACE, "--backend", "packet", "--mode", "precopy",
                               "--port", "53"],
    "stormpy-socket": ["--listen", f"{SERVER_V4}:53", "--workers", "1"],
}
PEERS = ("knot-xdp", "knot", "nsd")
ALL = list(STORMPY_VARIANTS) + list(PEERS)
START_TIMEOUT = 30.0


def why_not(args):
    """None when the peers benchmark can run, else one line saying why not."""
    reason = why_no_netns()
    if reason:
        return f"peers {reason}"
    if args.generator == "kxdpgun" and find_tool("kxdpgun") is None:
        return "kxdpgun not found: apt-get install knot-dnsutils"
    if shutil.which("taskset") is None:
        return "taskset not found: apt-get install util-linux"
    online = os.sched_getaffinity(0)
    for opt, cpu in (("--server-cpu", args.server_cpu), ("--client-cpu", args.client_cpu)):
        if cpu not in online:
            return f"{opt} {cpu} is not an online CPU (online: {','.join(map(str, sorted(online)))})"
    if args.server_cpu == args.client_cpu:
        return "--server-cpu and --client-cpu must differ"
    return None


def server_argv(name: str, wl, workdir: str, args) -> list:
    """The server's command line (run inside the server namespace, under taskset)."""
    if name in STORMPY_VARIANTS:
        return [sys.executable, "-m", "stormpy", "serve-dns", wl.zone_path, "--cpus",
                str(args.server_cpu), "--control", "", *STORMPY_VARIANTS[name]]
    if name in ("knot", "knot-xdp"):
        argv, _ = configure_knot(workdir, wl.zone_path, 53, 1, address=SERVER_V4,
                                 xdp_iface=IFACE if name == "knot-xdp" else None)
        return argv
    argv, _ = configure_nsd(workdir, wl.zone_path, 53, 1, "yes", address=SERVER_V4)
    return argv


def unavailable(name: str):
    if name in ("knot", "knot-xdp") and find_tool("knotd") is None:
        return "knotd not found: apt-get install knot"
    if name == "nsd" and find_tool("nsd") is None:
        return "nsd not found: apt-get install nsd"
    if name in STORMPY_VARIANTS and "xdp" in name:
        from stormpy.backends import why_unusable
        why = why_unusable("xdp")
        if why:
            return f"AF_XDP: {why}"
    return None


# --------------------------------------------------------------------------
# Checking answers from the client namespace
# --------------------------------------------------------------------------

def check_from_client(pair: VethPair, wl, timeout: float = 20, wait: float = 0) -> list:
    """Ask the sample questions from the client namespace (wait > 0: once the server
    answers at all, within wait seconds); the list of problems."""
    try:
        r = pair.run(pair.client, sys.executable, "-m", "stormpy.bench.probe",
                     probe_spec(wl, 53, SERVER_V4), *([f"{wait:.2f}"] if wait > 0 else []),
                     timeout=timeout + wait)
    except subprocess.TimeoutExpired:
        return ["the answer check did not finish"]
    if r.returncode != 0:
        return [f"the answer check failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}"]
    return json.loads(r.stdout)


# --------------------------------------------------------------------------
# One measurement
# --------------------------------------------------------------------------

@dataclass
class Result:
    server: str
    round: int
    sent: int = 0
    replies: int = 0
    offered_qps: float = 0.0
    replies_per_s: float = 0.0
    rcodes: dict = field(default_factory=dict)
    server_core_busy_pct: float = 0.0
    client_core_busy_pct: float = 0.0
    problems: list = field(default_factory=list)

    @property
    def answered_share(self) -> float:
        return self.replies / self.sent if self.sent else 0.0


def parse_kxdpgun(text: str, seconds: float) -> dict:
    m_q = re.search(r"total queries:\s+(\d+)\s+\((\d+) pps\)", text)
    m_r = re.search(r"total replies:\s+(\d+)\s+\((\d+) pps\)", text)
    if not m_q:
        raise BenchError("could not read kxdpgun's output: "
                         + " | ".join(text.strip().splitlines()[-3:]))
    rcodes = {k: int(v) for k, v in re.findall(r"responded (\w+):\s+(\d+)", text)}
    sent, replies = int(m_q.group(1)), int(m_r.group(1)) if m_r else 0
    return {"sent": sent, "replies": replies, "offered_qps": float(m_q.group(2)),
            "replies_per_s": float(m_r.group(2)) if m_r else 0.0, "rcodes": rcodes}


def kxdpgun_argv(args, qfile: str, seconds: float) -> list:
    return [find_tool("kxdpgun"), "-t", f"{seconds:g}", "-Q", str(args.qps), "-b",
            str(args.kxdpgun_batch), "-F", str(args.client_cpu), "-I", IFACE, "-i", qfile,
            "-p", "53", SERVER_V4]


def gen_argv(args, qfile: str, seconds: float) -> list:
    """`stormpy gen` on AF_XDP in closed loop: as many replies as the server gives."""
    return ["taskset", "-c", str(args.client_cpu), sys.executable, "-m", "stormpy", "gen", "dns",
            f"{SERVER_V4}:53", "--queries", qfile, "--backend", "xdp", "--outstanding",
            str(args.gen_outstanding), "--batch", str(args.kxdpgun_batch), "--seconds",
            f"{seconds:g}", "--json"]


def parse_gen(text: str) -> dict:
    try:
        r = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise BenchError("could not read stormpy gen's report: "
                         + " | ".join(text.strip().splitlines()[-3:])) from None
    return {"sent": r["sent"], "replies": r["received"], "offered_qps": r["send_rate"],
            "replies_per_s": r["reply_rate"], "rcodes": r.get("rcodes", {})}


def run_kxdpgun(pair: VethPair, args, qfile: str, seconds: float) -> tuple[dict, float, float]:
    """One bounded run of the load generator (kxdpgun, or stormpy gen with --generator);
    (parsed output, server core busy %, client core busy %)."""
    gen = args.generator == "stormpy-gen"
    argv = pair.argv(pair.client, *(gen_argv if gen else kxdpgun_argv)(args, qfile, seconds))
    st0 = cpu_times()
    status, out = run_to_end(argv, seconds + 30, args.generator)
    st1 = cpu_times()
    if status != 0:
        raise BenchError(f"{args.generator} failed (status {status}): "
                         + " | ".join(out.strip().splitlines()[-2:]))
    server_busy, _ = busy_pct(st0, st1, [args.server_cpu])
    client_busy, _ = busy_pct(st0, st1, [args.client_cpu])
    return (parse_gen(out) if gen else parse_kxdpgun(out, seconds)), server_busy, client_busy


def measure(pair: VethPair, name: str, wl, args, workdir: str, rnd: int) -> Result:
    os.makedirs(workdir, exist_ok=True)
    pair.run(pair.server, "ip", "link", "set", IFACE, "xdp", "off")  # nothing stale left
    argv = pair.argv(pair.server, "taskset", "-c", str(args.server_cpu),
                     *server_argv(name, wl, workdir, args))
    log_path = os.path.join(workdir, "server.log")
    proc = start_logged(argv, log_path, REPO_ROOT, dict(os.environ, PYTHONUNBUFFERED="1"))

    def tail():
        return log_tail(log_path, 2) or "(no output)"

    try:
        deadline = time.monotonic() + START_TIMEOUT
        problems = ["not started"]
        while time.monotonic() < deadline:  # bounded by time
            if proc.poll() is not None:
                raise ServerFailure(f"{name} exited with status {proc.returncode} during "
                                            f"start-up: {tail()}")
            problems = check_from_client(pair, wl)
            if not problems:
                break
            time.sleep(0.2)
        if problems:
            raise ServerFailure(f"{name} did not answer correctly within {START_TIMEOUT:g} s: "
                                        f"{'; '.join(problems)}; {tail()}")
        if args.warmup > 0:
            run_kxdpgun(pair, args, wl.query_path, min(args.warmup, 60))
        got, sbusy, cbusy = run_kxdpgun(pair, args, wl.query_path, args.seconds)
        if proc.poll() is not None:
            raise ServerFailure(f"{name} exited (status {proc.returncode}) under load: {tail()}")
        res = Result(server=name, round=rnd, server_core_busy_pct=sbusy, client_core_busy_pct=cbusy,
                     **got)
        bad = check_from_client(pair, wl)
        if bad:
            raise ServerFailure(f"{name} answers wrongly after the load: {'; '.join(bad)}")
        res.problems = rcode_mix_problems(res.rcodes, wl.expected_nxdomain_share)
        return res
    finally:
        stop_process(proc)


# --------------------------------------------------------------------------
# The whole run
# --------------------------------------------------------------------------

def run_peers(args) -> int:
    reason = why_not(args)
    if reason:
        raise BenchError(reason)
    active, notes = choose_servers(args.servers or ",".join(ALL), ALL, unavailable, "peers")

    tmp = tempfile.mkdtemp(prefix="stormpy-peers-")
    results: dict = {n: [] for n in active}
    failed: dict = {}
    try:
        wl = write_server_workload(tmp, args.names, args.queries, args.seed)
        os.chmod(tmp, 0o755)  # nsd may drop privileges before reading the zone
        with VethPair() as pair:
            for rnd in range(1, args.rounds + 1):
                for n in active:
                    if n in failed:
                        continue
                    tag = f"[round {rnd}/{args.rounds}] {n:24s}"
                    try:
                        res = measure(pair, n, wl, args, os.path.join(tmp, f"{n}-r{rnd}"), rnd)
                    except ServerFailure as e:
                        failed[n] = str(e)
                        say(f"{tag} FAILED: {e}")
                        continue
                    results[n].append(res)
                    flag = f"  SUSPECT: {'; '.join(res.problems)}" if res.problems else ""
                    say(f"{tag} {res.replies_per_s:12,.0f} replies/s of {res.offered_qps:,.0f} offered "
                        f"({res.answered_share:.1%}), server core {res.server_core_busy_pct:.0f}%, "
                        f"kxdpgun core {res.client_core_busy_pct:.0f}%{flag}")
    finally:
        stop_all()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            say(f"peers: kept {tmp}")
    return report(args, results, failed, notes)


SUMMARY = ["server", "replies/s best", "replies/s median", "offered q/s (best)",
           "answered (best)", "server core busy %", "kxdpgun core busy %", "rounds", "check"]


def summarize(results: dict, failed: dict) -> list[dict]:
    rows = []
    for n, rs in results.items():
        if not rs:
            continue
        best = max(rs, key=lambda r: r.replies_per_s)
        rows.append({"server": n, "best": best.replies_per_s,
                     "median": statistics.median(r.replies_per_s for r in rs),
                     "offered": best.offered_qps, "answered_share": best.answered_share,
                     "server_busy": statistics.median(r.server_core_busy_pct for r in rs),
                     "client_busy": statistics.median(r.client_core_busy_pct for r in rs),
                     "rounds": len(rs),
                     "check": "FAILED later" if n in failed else
                     ("SUSPECT" if any(r.problems for r in rs) else "ok")})
    return rows


def ratios(rows: list[dict]) -> tuple[list, list]:
    mine = [r for r in rows if r["server"].startswith("stormpy")]
    peers = [r for r in rows if not r["server"].startswith("stormpy")]
    header = ["stormpy against"] + [p["server"] for p in peers]
    table = [[m["server"]] + [f"{m['best'] / p['best']:.2f}x" if p["best"] else "n/a" for p in peers]
             for m in mine]
    return header, table


def report(args, results: dict, failed: dict, notes: list) -> int:
    rows = summarize(results, failed)
    for n, msg in failed.items():
        notes.append(f"- {n} FAILED and was dropped: {msg}")
    if args.json:
        print(json.dumps({"rows": rows, "notes": notes,
                          "rounds": [r.__dict__ | {"answered_share": r.answered_share}
                                     for rs in results.values() for r in rs]}))
    table = [[r["server"], f"{r['best']:,.0f}", f"{r['median']:,.0f}", f"{r['offered']:,.0f}",
              f"{r['answered_share']:.1%}", f"{r['server_busy']:.0f}", f"{r['client_busy']:.0f}",
              r["rounds"], r["check"]] for r in rows]
    rh, rt = ratios(rows)
    if not args.json:
        load = (f"stormpy gen --backend xdp --outstanding {args.gen_outstanding} --batch "
                f"{args.kxdpgun_batch} --seconds {args.seconds:g}" if args.generator == "stormpy-gen"
                else f"kxdpgun -Q {args.qps} -b {args.kxdpgun_batch} -t {args.seconds:g}")
        print(f"{load}, best of {args.rounds} rounds; server on CPU {args.server_cpu}, "
              f"the load generator (the kxdpgun column) on CPU {args.client_cpu}\n")
        print(markdown_table(SUMMARY, table))
        if rt and len(rh) > 1:
            print("\nstormpy's ratio to each peer (replies/s, best against best):\n")
            print(markdown_table(rh, rt))
        if notes:
            print("\n" + "\n".join(notes))
    if rows:
        write_csv(f"{args.out}.csv", SUMMARY, without_thousands(table))
        write_csv(f"{args.out}-rounds.csv",
                  ["server", "round", "sent", "replies", "offered_qps", "replies_per_s",
                   "answered_share", "server_core_busy_pct", "kxdpgun_core_busy_pct", "rcodes"],
                  [[r.server, r.round, r.sent, r.replies, r.offered_qps, r.replies_per_s,
                    f"{r.answered_share:.4f}", f"{r.server_core_busy_pct:.1f}",
                    f"{r.client_core_busy_pct:.1f}", " ".join(f"{k}={v}" for k, v in r.rcodes.items())]
                   for rs in results.values() for r in rs])
        why = bar_chart(f"{args.out}.png", [r["server"] for r in rows], [r["best"] for r in rows],
                        f"replies/s under kxdpgun -Q {args.qps} (best of {args.rounds})", "replies/s")
        say(f"peers: wrote {args.out}.csv, {args.out}-rounds.csv"
            + (f"; {why}" if why else f", {args.out}.png"))
    return 1 if failed or any(r["check"] != "ok" for r in rows) else 0
