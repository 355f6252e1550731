"""`stormpy bench http`: static files over HTTP/1.1 on 127.0.0.1, stormpy's `serve-http`
beside nginx (Debian's defaults), with wrk.

For each round, for each server (one worker pinned to --server-cpu): start it on a free
port, check that it serves every measured file byte for byte, then for each mode
(keep-alive; with --close also a new connection per request, `Connection: close`) and
each file size run

    taskset -c CLIENT wrk -tT -cN -dSs --latency [-H 'Connection: close'] http://127.0.0.1:PORT/f-SIZE.bin

and stop it. The server's CPU time is utime+stime summed over every thread
(/proc/PID/task/*/stat) of every one of its processes (stormpy's supervisor and workers,
nginx's master and worker), read before and after each wrk run; divided by the requests
wrk completed it gives microseconds of server CPU per request, which stays meaningful when
wrk, not the server, is the bottleneck. Over several rounds the run with the most
requests/s is kept. A run with socket errors or non-2xx/3xx answers is kept but marked.

A server that does not start, serves wrong bytes or dies is reported in one line naming
it; the others are still measured. Exit status: 0 all clean, 1 a server failed or a run
had errors, 2 usage or environment error, 130 interrupted."""
from __future__ import annotations

import hashlib
import http.client
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from stormpy.bench.errors import BenchError, ServerFailure
from stormpy.bench.nginx import NginxServer, nginx_path, port_accepts
from stormpy.bench.processes import (REPO_ROOT, Interrupted, cpu_times, log_tail, pick_free_port,
                                     process_tree, run_to_end, start_logged, stop_process,
                                     stopping_children_on_signals, task_cpu_ticks)
from stormpy.bench.report import say
from stormpy.bench.site import bin_name, make_site, sha256_of

HOST = "127.0.0.1"
SERVERS = ("stormpy", "nginx")
MODES = {"keep-alive": [], "close": ["-H", "Connection: close"]}
DEFAULT_STORMPY_CMD = ("{python} -m stormpy serve-http {site} --listen 127.0.0.1:{port} "
                       "--workers 1 --cpus {cpu}")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_BYTES = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "PB": 1 << 50}
_TIME_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def parse_sizes(text: str) -> list:
    """'1k,16k,1m' -> [1024, 16384, 1048576] (k, m, g are powers of 1024)."""
    sizes = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*([kmgKMG]?)\s*", part)
        if not m:
            raise BenchError(f"--sizes: {part.strip()!r} is not a size like 1000, 16k or 1m")
        size = int(m.group(1)) * _UNITS[m.group(2).lower()]
        if size > 1 << 30:
            raise BenchError(f"--sizes: {part.strip()} is more than 1g")
        sizes.append(size)
    return sorted(set(sizes))


def size_label(size: int) -> str:
    for unit, mult in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if size >= mult and size % mult == 0:
            return f"{size // mult}{unit}"
    return str(size)


# --------------------------------------------------------------------------
# wrk
# --------------------------------------------------------------------------

def _amount(text: str, units: dict) -> float:
    m = re.fullmatch(r"([\d.]+)([A-Za-z]*)", text)
    if not m or m.group(2) not in units:
        raise ValueError(f"unexpected amount {text!r} in wrk's output")
    return float(m.group(1)) * units[m.group(2)]


def parse_wrk(text: str) -> dict:
    """wrk's report (with --latency) as numbers: requests, seconds, bytes read, requests/s,
    transfer bytes/s, latency in us (avg, stdev, max, p50, p75, p90, p99), non-2xx/3xx
    answers, socket errors by kind and in total. ValueError when it is not a report."""
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
    total = re.search(r"^\s*(\d+) requests in ([\d.]+\w+), ([\d.]+\w+) read", text, re.M)
    if not rps or not total:
        raise ValueError("no 'Requests/sec' and 'N requests in' lines in wrk's output")
    out = {"requests": int(total.group(1)), "seconds": _amount(total.group(2), _TIME_US) / 1e6,
           "bytes_read": int(_amount(total.group(3), _BYTES)), "requests_per_s": float(rps.group(1))}
    transfer = re.search(r"^Transfer/sec:\s+(\S+)", text, re.M)
    out["transfer_bytes_per_s"] = _amount(transfer.group(1), _BYTES) if transfer else None
    latency = {}
    m = re.search(r"^\s*Latency\s+(\S+)\s+(\S+)\s+(\S+)", text, re.M)
    if m:
        latency.update(zip(("avg", "stdev", "max"), (_amount(v, _TIME_US) for v in m.groups())))
    for pct, value in re.findall(r"^\s*(50|75|90|99)%\s+(\S+)", text, re.M):
        latency[f"p{pct}"] = _amount(value, _TIME_US)
    out["latency_us"] = latency
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    out["non_2xx_3xx"] = int(non2xx.group(1)) if non2xx else 0
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    kinds = ("connect", "read", "write", "timeout")
    out["socket_errors"] = dict(zip(kinds, map(int, sock.groups()))) if sock else dict.fromkeys(kinds, 0)
    out["errors"] = out["non_2xx_3xx"] + sum(out["socket_errors"].values())
    return out


def error_text(run: dict) -> str:
    """What went wrong in a run, in a few words; '' for a clean run."""
    if run.get("failed"):
        return run["failed"]
    parts = [f"{run['non_2xx_3xx']} non-2xx/3xx"] if run["non_2xx_3xx"] else []
    parts += [f"{n} {kind}" for kind, n in run["socket_errors"].items() if n]
    return ", ".join(parts) + (" socket errors" if any(run["socket_errors"].values()) else "")


def wrk_argv(args, port: int, size: int, mode: str) -> list:
    return (["taskset", "-c", str(args.client_cpu), "wrk", f"-t{args.threads}",
             f"-c{args.connections}", f"-d{args.seconds:g}s", "--latency", *MODES[mode],
             f"http://{HOST}:{port}{bin_name(size)}"])


# --------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------

class StormpyHttp:
    """`stormpy serve-http` from the command template, in its own process group."""

    name = "stormpy"

    def __init__(self, args, site: Path, port: int, workdir: Path):
        self.argv = shlex.split((args.stormpy_cmd or DEFAULT_STORMPY_CMD).format(
            python=shlex.quote(sys.executable), site=shlex.quote(str(site)), port=port,
            cpu=args.server_cpu))
        self.port, self.log = port, workdir / "stormpy.log"
        self.timeout = args.start_timeout
        self.proc = None

    def start(self) -> "StormpyHttp":
        try:
            self.proc = start_logged(self.argv, str(self.log), cwd=REPO_ROOT)
        except OSError as exc:
            raise ServerFailure(f"stormpy: cannot run {self.argv[0]}: {exc}") from None
        deadline = time.monotonic() + self.timeout
        for _ in range(int(self.timeout / 0.05) + 10):  # bounded
            if self.proc.poll() is not None:
                why = self.log_tail() or f"status {self.proc.returncode}"
                raise ServerFailure(f"stormpy exited at start ({shlex.join(self.argv)}): {why}")
            if port_accepts(HOST, self.port):
                return self
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        raise ServerFailure(f"stormpy did not accept on {HOST}:{self.port} within {self.timeout:g} s")

    def log_tail(self, lines: int = 1) -> str:
        return log_tail(str(self.log), lines)

    def pids(self) -> list:
        return process_tree(self.proc.pid) if self.proc and self.proc.poll() is None else []

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


def start_server(name: str, args, site: Path, workdir: Path):
    port = pick_free_port(set())
    if name == "nginx":
        server = NginxServer(site, port, HOST, cpu=args.server_cpu, workdir=workdir / "nginx",
                             ready_timeout=args.start_timeout,
                             worker_connections=max(768, 2 * args.connections))
    else:
        server = StormpyHttp(args, site, port, workdir)
    try:
        return server.start()
    except BaseException:
        server.stop()
        raise


def check_files(name: str, port: int, sizes: list, digests: dict) -> None:
    """ServerFailure unless every measured file comes back whole and right."""
    for size in sizes:
        path = bin_name(size)
        conn = http.client.HTTPConnection(HOST, port, timeout=30)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ServerFailure(f"{name}: GET {path} failed: {exc}") from None
        finally:
            conn.close()
        if resp.status != 200 or hashlib.sha256(body).hexdigest() != digests[path]:
            raise ServerFailure(f"{name}: GET {path} gave status {resp.status} and {len(body)} "
                                f"bytes, not 200 and the file's {size} bytes")


def alive(server) -> bool:
    return server.proc is not None and server.proc.poll() is None


def measure(server, args, size: int, mode: str) -> dict:
    """One wrk run against a started server, with the server's CPU time around it."""
    argv = wrk_argv(args, server.port, size, mode)
    pids = server.pids()
    before = task_cpu_ticks(pids)
    try:
        status, out = run_to_end(argv, args.seconds + 60, "wrk")
    except BenchError as exc:  # wrk overran its time: the run failed, the bench goes on
        status, out = -1, str(exc)
    pids_after = [p for p in server.pids() if p not in pids]
    ticks = task_cpu_ticks(pids) - before + task_cpu_ticks(pids_after)
    run = {"server": server.name, "mode": mode, "size": size, "command": shlex.join(argv)}
    if not alive(server):
        why = server.log_tail()
        raise ServerFailure(f"{server.name} died during the {mode} run of {size_label(size)}"
                            + (f": {why}" if why else ""))
    try:
        run.update(parse_wrk(out))
    except ValueError:
        last = (out.strip().splitlines() or ["no output"])[-1]
        run.update(failed=f"wrk failed (status {status}): {last}", requests=0, requests_per_s=0.0)
        return run
    hz = os.sysconf("SC_CLK_TCK")
    run["server_cpu_s"] = ticks / hz
    run["cpu_us_per_request"] = ticks / hz * 1e6 / run["requests"] if run["requests"] else None
    run["ok"] = status == 0 and run["errors"] == 0
    if status != 0:
        run["failed"] = f"wrk exited with status {status}"
    return run


# --------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------

@dataclass
class Outcome:
    runs: list = field(default_factory=list)      # every measurement
    failed: dict = field(default_factory=dict)    # server -> one-line reason

    def best(self) -> dict:
        """(server, mode, size) -> the run with the most requests/s, clean runs first."""
        out: dict = {}
        for run in self.runs:
            key = (run["server"], run["mode"], run["size"])
            rank = (bool(run.get("ok")), run["requests_per_s"])
            if key not in out or rank > (bool(out[key].get("ok")), out[key]["requests_per_s"]):
                out[key] = run
        return out


def preflight(args) -> list:
    """The servers to measure, in order; BenchError for what makes the run impossible."""
    if not sys.platform.startswith("linux"):
        raise BenchError("Linux only (uses /proc and taskset)")
    for tool in ("wrk", "taskset"):
        if shutil.which(tool) is None:
            raise BenchError(f"{tool} not found; install it: apt-get install "
                             f"{'wrk' if tool == 'wrk' else 'util-linux'}")
    from stormpy.bench.http_veth import SERVERS as VETH_SERVERS
    known = VETH_SERVERS if args.veth else SERVERS
    listed = args.servers or ",".join(known)
    servers = [s.strip() for s in listed.split(",") if s.strip()]
    unknown = [s for s in servers if s not in known]
    if unknown or not servers:
        raise BenchError(f"--servers: unknown {', '.join(unknown) or '(none given)'}; "
                         f"choose from {','.join(known)}")
    online = set(cpu_times())
    for opt, cpu in (("--server-cpu", args.server_cpu), ("--client-cpu", args.client_cpu)):
        if cpu not in online:
            raise BenchError(f"{opt} {cpu}: no such CPU online (online: {sorted(online)})")
    if args.server_cpu == args.client_cpu:
        raise BenchError("--server-cpu and --client-cpu must differ")
    if args.connections < args.threads:
        raise BenchError("--connections must be at least --threads (wrk needs a connection per thread)")
    if not 0 < args.seconds <= 600:
        raise BenchError("--seconds must be in (0, 600]")
    return list(dict.fromkeys(servers))


def measure_all(args, servers: list, sizes: list, site: Path, digests: dict, workdir: Path,
                modes: list) -> Outcome:
    outcome = Outcome()
    if "nginx" in servers and nginx_path() is None:
        outcome.failed["nginx"] = "nginx is not installed (apt-get install nginx)"
        print(f"stormpy bench http: {outcome.failed['nginx']}", file=sys.stderr)
    for rnd in range(1, args.rounds + 1):
        for name in servers:
            if name in outcome.failed:
                continue
            say(f"round {rnd}/{args.rounds}: {name}")
            server = None
            try:
                server = start_server(name, args, site, workdir)
                check_files(name, server.port, sizes, digests)
                for mode in modes:
                    for size in sizes:
                        run = measure(server, args, size, mode)
                        run["round"] = rnd
                        outcome.runs.append(run)
                        say(f"  {name} {mode} {size_label(size)}: {run['requests_per_s']:,.0f} req/s"
                            + (f"  ({error_text(run)})" if not run.get("ok") else ""))
            except ServerFailure as exc:
                outcome.failed[name] = str(exc)
                print(f"stormpy bench http: {exc}", file=sys.stderr)
            finally:
                if server is not None:
                    server.stop()
    return outcome


def run_http(args) -> int:
    from stormpy.bench.http_report import plot, report
    servers = preflight(args)
    sizes = parse_sizes(args.sizes)
    modes = ["keep-alive", "close"] if args.close else ["keep-alive"]
    workdir = Path(tempfile.mkdtemp(prefix="stormpy-bench-http-"))
    try:
        with stopping_children_on_signals():
            site = workdir / "site"
            if args.veth:
                from stormpy.bench.http_veth import measure_veth
                outcome = measure_veth(args, servers, sizes, modes)
            else:
                say(f"site: {len(make_site(site, sizes=sizes))} files in {site}")
                digests = sha256_of(site)
                outcome = measure_all(args, servers, sizes, site, digests, workdir, modes)
    except Interrupted:
        raise KeyboardInterrupt from None
    finally:
        if args.keep:
            say(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    report(args, servers, sizes, modes, outcome)
    if args.plot:
        why = plot(args.plot, servers, sizes, modes, outcome, veth=args.veth)
        if why:
            print(f"stormpy bench http: --plot: {why}", file=sys.stderr)
    clean = not outcome.failed and all(run.get("ok") for run in outcome.runs)
    return 0 if clean else 1

