"""`stormpy bench http-loss`: the paper's loss experiment. stormpy serve-http (on the
kernel's TCP, and with its own TCP on AF_XDP) and nginx serve the same site from a
server namespace; wrk in a client namespace reaches them
through `stormpy impair` in a bridge namespace (ImpairedPath: no netem on this
kernel), first with no loss, then with each --loss. Throughput in MB/s and requests/s
per file size, stormpy/nginx as a ratio, in one run.

stormpy-xdp against nginx compares stormpy's own TCP's loss recovery with the
kernel's, as the paper did against FreeBSD's."""
from __future__ import annotations

import hashlib
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from stormpy.bench.errors import BenchError
from stormpy.bench.http import parse_sizes, parse_wrk, size_label
from stormpy.bench.netns import ImpairedPath, why_no_netns
from stormpy.bench.nginx import nginx_path, write_nginx_config
from stormpy.bench.processes import wait_for_output
from stormpy.bench.report import say
from stormpy.bench.site import bin_name, make_site, sha256_of

# stormpy on the kernel's TCP, stormpy's own TCP on AF_XDP, nginx
PORTS = {"stormpy": 80, "stormpy-xdp": 81, "nginx": 8080}


def _start(path: ImpairedPath, site: Path, workdir: Path) -> dict:
    """Both servers in the server namespace; {name: Popen}."""
    serve = [sys.executable, "-m", "stormpy", "serve-http", str(site), "--control", ""]
    procs = {"stormpy": path.popen(path.server, *serve, "--listen",
                                   f"{path.SERVER}:{PORTS['stormpy']}", "--workers", "1"),
             "stormpy-xdp": path.popen(path.server, *serve, "--iface", "veth0", "--backend",
                                       "xdp", "--port", str(PORTS["stormpy-xdp"]))}
    conf = write_nginx_config(workdir / "nginx", site, PORTS["nginx"], path.SERVER)
    procs["nginx"] = path.popen(path.server, nginx_path(), "-p", str(workdir / "nginx"), "-e",
                                str(workdir / "nginx" / "error.log"), "-c", str(conf), "-g",
                                "daemon off;")
    return procs


def _check(path: ImpairedPath, sizes: list, digests: dict) -> None:
    """Every measured file from each server, whole and right, through the path."""
    for name, port in PORTS.items():
        for size in sizes:
            out = f"/tmp/stormpy-loss-{port}-{size}"
            r = path.run(path.client, "curl", "-sS", "--fail", "--retry", "20",
                         "--retry-connrefused", "--retry-delay", "0", "--max-time", "60", "-o",
                         out, f"http://{path.SERVER}:{port}{bin_name(size)}", timeout=90)
            data = Path(out).read_bytes() if Path(out).exists() else b""
            Path(out).unlink(missing_ok=True)
            if r.returncode != 0 or hashlib.sha256(data).hexdigest() != digests[bin_name(size)]:
                raise BenchError(f"{name}: {bin_name(size)} did not arrive whole through the "
                                 f"path: {r.stderr.strip() or 'wrong bytes'}")


def _wrk(path: ImpairedPath, port: int, size: int, args) -> dict:
    r = path.run(path.client, "wrk", "-t1", f"-c{args.connections}", f"-d{args.seconds:g}s",
                 "--latency", f"http://{path.SERVER}:{port}{bin_name(size)}",
                 timeout=args.seconds + 60)
    try:
        return parse_wrk(r.stdout)
    except ValueError:
        raise BenchError(f"wrk failed: {r.stderr.strip() or r.stdout.strip()}") from None


def run_http_loss(args) -> int:
    why = why_no_netns()
    for tool in ("wrk", "curl", "ethtool"):
        why = why or (None if shutil.which(tool) else f"{tool} is not installed")
    why = why or (None if nginx_path() else "nginx is not installed (apt-get install nginx)")
    if why:
        raise BenchError(why)
    sizes = parse_sizes(args.sizes)
    results = []
    with tempfile.TemporaryDirectory(prefix="stormpy-http-loss-") as tmp, ImpairedPath() as path:
        site = Path(tmp) / "site"
        make_site(site, sizes=sizes)
        digests = sha256_of(site)
        procs = _start(path, site, Path(tmp))
        try:
            for name in ("stormpy", "stormpy-xdp"):
                wait_for_output(procs[name], "info: serving")
            for loss in [0.0] + args.loss:
                impair = path.impair("--loss", str(loss))
                try:
                    _check(path, sizes, digests)
                    for size in sizes:
                        row = {"loss": loss, "size": size}
                        for name, port in PORTS.items():
                            row[name] = _wrk(path, port, size, args)
                            say(f"  {name} {loss:g}% loss {size_label(size)}: "
                                f"{row[name]['transfer_bytes_per_s'] / 1e6:,.1f} MB/s")
                        results.append(row)
                finally:
                    impair.send_signal(signal.SIGINT)
                    impair.communicate(timeout=15)
        finally:
            for p in procs.values():
                p.send_signal(signal.SIGTERM)
            for p in procs.values():
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    _report(results, args)
    return 0


def _report(results: list, args) -> None:
    if args.json:
        import json
        print(json.dumps({"connections": args.connections, "seconds": args.seconds,
                          "results": results}, indent=2))
        return
    names = list(PORTS)
    print(f"\n### through stormpy impair: wrk -t1 -c{args.connections} -d{args.seconds:g}s, "
          f"client and servers in namespaces (MB/s, and the ratio to nginx)\n")
    print("| loss | size | " + " | ".join(f"{n} MB/s" for n in names) + " | " +
          " | ".join(f"{n}/nginx" for n in names if n != "nginx") + " |")
    print("|---|---|" + "---|" * (2 * len(names) - 1))
    for r in results:
        mbs = {n: r[n]["transfer_bytes_per_s"] / 1e6 for n in names}
        marks = {n: "!" if r[n]["errors"] else "" for n in names}
        ratios = [f"{mbs[n] / mbs['nginx']:.2f}x" if mbs["nginx"] else "-"
                  for n in names if n != "nginx"]
        print(f"| {r['loss']:g}% | {size_label(r['size'])} | " +
              " | ".join(f"{mbs[n]:,.1f}{marks[n]}" for n in names) + " | " +
              " | ".join(ratios) + " |")
