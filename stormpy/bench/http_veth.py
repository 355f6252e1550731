"""`stormpy bench http --veth`: the same measurement as `bench http`, across a veth pair
between two namespaces, so that stormpy's own TCP on the rings can be in it.

The servers run one at a time in the server namespace, each pinned to --server-cpu:
stormpy serve-http on the kernel's TCP (`stormpy`), with its own TCP on AF_XDP
(`stormpy-xdp`) and on AF_PACKET (`stormpy-packet`), each also in precopy mode
(`-precopy`), and nginx. wrk runs in the client
namespace on --client-cpu. Before a server is measured every file is fetched through
the pair with curl and checked byte for byte. CPU per request is the server's processes'
utime+stime: the receive work of the veth runs in the sender's softirq (the client's
CPU) for every server alike, so it is in no server's figure."""
from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stormpy.bench.errors import BenchError, ServerFailure
from stormpy.bench.http import MODES, Outcome, error_text, parse_sizes, parse_wrk, size_label
from stormpy.bench.netns import SERVER_V4, VethPair, why_no_netns
from stormpy.bench.nginx import nginx_path, write_nginx_config
from stormpy.bench.processes import REPO_ROOT, process_tree, task_cpu_ticks
from stormpy.bench.report import say
from stormpy.bench.site import bin_name, make_site, sha256_of

SERVERS = ("stormpy", "stormpy-xdp", "stormpy-xdp-precopy", "stormpy-packet",
           "stormpy-packet-precopy", "nginx")
PORT = 80


def _server_argv(name: str, site: Path, workdir: Path, cpu: int) -> list:
    if name == "nginx":
        conf = write_nginx_config(workdir / "nginx", site, PORT, SERVER_V4, cpu=cpu)
        return ["taskset", "-c", str(cpu), nginx_path(), "-p", str(workdir / "nginx"), "-e",
                str(workdir / "nginx" / "error.log"), "-c", str(conf), "-g", "daemon off;"]
    serve = [sys.executable, "-m", "stormpy", "serve-http", str(site), "--control", "",
             "--cpus", str(cpu)]
    if name == "stormpy":
        return serve + ["--listen", f"{SERVER_V4}:{PORT}", "--workers", "1"]
    mode = "precopy" if name.endswith("-precopy") else "memcpy"
    return serve + ["--port", str(PORT), "--iface", "veth0", "--backend", name.split("-")[1],
                    "--mode", mode]


class NsServer:
    """One server in the pair's server namespace, in its own process group."""

    def __init__(self, pair: VethPair, name: str, site: Path, workdir: Path, cpu: int):
        self.pair, self.name = pair, name
        self.argv = _server_argv(name, site, workdir, cpu)
        self.log = workdir / f"{name}.log"
        self.proc = None

    def __enter__(self) -> "NsServer":
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(["ip", "netns", "exec", self.pair.server, *self.argv],
                                         cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def why(self) -> str:
        lines = self.log.read_text(errors="replace").strip().splitlines() if self.log.exists() else []
        return lines[-1] if lines else f"status {self.proc.returncode}"


def _check(pair: VethPair, server: NsServer, sizes: list, digests: dict, workdir: Path) -> None:
    """Every measured file, fetched through the pair and compared; waits for the start."""
    for size in sizes:
        out = workdir / "fetched"
        r = pair.run(pair.client, "curl", "-sS", "--fail", "--retry", "30", "--retry-connrefused",
                     "--retry-delay", "0", "--retry-max-time", "15", "--max-time", "30", "-o",
                     str(out), f"http://{SERVER_V4}:{PORT}{bin_name(size)}", timeout=60)
        data = out.read_bytes() if out.exists() else b""
        out.unlink(missing_ok=True)
        if not server.alive():
            raise ServerFailure(f"{server.name} exited: {server.why()}")
        if r.returncode != 0 or hashlib.sha256(data).hexdigest() != digests[bin_name(size)]:
            raise ServerFailure(f"{server.name}: {bin_name(size)} did not arrive whole: "
                                f"{r.stderr.strip() or 'wrong bytes'}")


def _measure(pair: VethPair, server: NsServer, args, size: int, mode: str) -> dict:
    argv = ["taskset", "-c", str(args.client_cpu), "wrk", f"-t{args.threads}",
            f"-c{args.connections}", f"-d{args.seconds:g}s", "--latency", *MODES[mode],
            f"http://{SERVER_V4}:{PORT}{bin_name(size)}"]
    pids = process_tree(server.proc.pid)
    before = task_cpu_ticks(pids)
    run = {"server": server.name, "mode": mode, "size": size, "command": shlex.join(argv)}
    try:
        r = pair.run(pair.client, *argv, timeout=args.seconds + 60)
    except subprocess.TimeoutExpired:    # wrk overran: the run failed, the bench goes on
        run.update(failed=f"wrk did not end within {args.seconds + 60:g} s", requests=0,
                   requests_per_s=0.0)
        return run
    ticks = task_cpu_ticks(pids) - before
    if not server.alive():
        raise ServerFailure(f"{server.name} died in the {mode} run of {size_label(size)}: "
                            f"{server.why()}")
    try:
        run.update(parse_wrk(r.stdout))
    except ValueError:
        last = ((r.stderr or r.stdout).strip().splitlines() or ["no output"])[-1]
        run.update(failed=f"wrk failed (status {r.returncode}): {last}", requests=0,
                   requests_per_s=0.0)
        return run
    hz = os.sysconf("SC_CLK_TCK")
    run["server_cpu_s"] = ticks / hz
    run["cpu_us_per_request"] = ticks / hz * 1e6 / run["requests"] if run["requests"] else None
    run["ok"] = r.returncode == 0 and run["errors"] == 0
    return run


def measure_veth(args, servers: list, sizes: list, modes: list) -> Outcome:
    why = why_no_netns()
    for tool in ("wrk", "curl", "taskset"):
        why = why or (None if shutil.which(tool) else f"{tool} is not installed")
    if why:
        raise BenchError(f"--veth: {why}")
    outcome = Outcome()
    if "nginx" in servers and nginx_path() is None:
        outcome.failed["nginx"] = "nginx is not installed (apt-get install nginx)"
    with tempfile.TemporaryDirectory(prefix="stormpy-bench-veth-") as tmp, VethPair() as pair:
        workdir = Path(tmp)
        site = workdir / "site"
        make_site(site, sizes=sizes)
        digests = sha256_of(site)
        for rnd in range(1, args.rounds + 1):
            for name in servers:
                if name in outcome.failed:
                    continue
                say(f"round {rnd}/{args.rounds}: {name} (veth)")
                try:
                    with NsServer(pair, name, site, workdir, args.server_cpu) as server:
                        time.sleep(0.5)
                        _check(pair, server, sizes, digests, workdir)
                        for mode in modes:
                            for size in sizes:
                                run = _measure(pair, server, args, size, mode)
                                run["round"] = rnd
                                outcome.runs.append(run)
                                say(f"  {name} {mode} {size_label(size)}: "
                                    f"{run['requests_per_s']:,.0f} req/s"
                                    + (f"  ({error_text(run)})" if not run.get("ok") else ""))
                except ServerFailure as exc:
                    outcome.failed[name] = str(exc)
                    print(f"stormpy bench http: {exc}", file=sys.stderr)
    return outcome
