"""What `stormpy bench http` prints: a table per mode (requests/s and server CPU per
request for each server and file size, stormpy's ratio to nginx), notes on runs with
errors and servers that failed, or one JSON object; and a PNG line chart."""
from __future__ import annotations

import json
import shlex
import sys

from stormpy.bench.http import error_text, size_label
from stormpy.bench.report import markdown_table

FOOTNOTE = ("req/s: wrk's Requests/sec, the best round; us CPU/req: the server's utime+stime "
            "over all its threads and processes during that run, per completed request. "
            "! marks a run with errors (notes below).")


def _ratio(a, b) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def table(mode: str, servers: list, sizes: list, best: dict) -> str:
    header = ["size"]
    for s in servers:
        header += [f"{s} req/s", f"{s} us CPU/req"]
    ours = [s for s in servers if s.startswith("stormpy")] if "nginx" in servers else []
    for s in ours:
        header += [f"{s}/nginx req/s", f"{s}/nginx CPU/req"]
    rows = []
    for size in sizes:
        row = [size_label(size)]
        for s in servers:
            run = best.get((s, mode, size))
            if run is None:
                row += ["n/a", "n/a"]
                continue
            mark = "" if run.get("ok") else " !"
            cpu = run.get("cpu_us_per_request")
            row += [f"{run['requests_per_s']:,.0f}{mark}", "n/a" if cpu is None else f"{cpu:.1f}"]
        ng = best.get(("nginx", mode, size))
        for s in ours:
            sp = best.get((s, mode, size))
            row += [_ratio(sp and sp["requests_per_s"], ng and ng["requests_per_s"]),
                    _ratio(sp and sp.get("cpu_us_per_request"), ng and ng.get("cpu_us_per_request"))]
        rows.append(row)
    return markdown_table(header, rows)


def mode_title(args, mode: str) -> str:
    how = "keep-alive" if mode == "keep-alive" else "a new connection per request (Connection: close)"
    where = "across a veth pair" if getattr(args, "veth", False) else "on 127.0.0.1"
    return (f"{how}: wrk -t{args.threads} -c{args.connections} -d{args.seconds:g}s on CPU "
            f"{args.client_cpu}, server on CPU {args.server_cpu}, {where}, best of "
            f"{args.rounds} round(s)")


def report(args, servers: list, sizes: list, modes: list, outcome) -> None:
    best = outcome.best()
    if args.json:
        keep = ("server", "mode", "size", "requests_per_s", "cpu_us_per_request", "ok")
        print(json.dumps({
            "command": shlex.join(sys.argv),
            "settings": {"sizes": sizes, "seconds": args.seconds, "connections": args.connections,
                         "threads": args.threads, "rounds": args.rounds, "modes": modes,
                         "server_cpu": args.server_cpu, "client_cpu": args.client_cpu},
            "servers": servers, "failed": outcome.failed,
            "best": [{k: r.get(k) for k in keep} | {"errors": error_text(r)} for r in best.values()],
            "runs": outcome.runs}, indent=2))
        return
    out = []
    for mode in modes:
        out += [f"### {mode_title(args, mode)}", "", table(mode, servers, sizes, best), ""]
    out.append(FOOTNOTE)
    notes = [f"- {r['server']} {r['mode']} {size_label(r['size'])} round {r.get('round')}: "
             f"{error_text(r)}" for r in outcome.runs if not r.get("ok")]
    notes += [f"- {name} was not measured (or not fully): {why}" for name, why in outcome.failed.items()]
    if notes:
        out += ["", "Notes:"] + notes
    print("\n".join(out))


COLOURS = {"stormpy": "#c0392b", "stormpy-xdp": "#2471a3", "stormpy-xdp-precopy": "#85c1e9",
           "stormpy-packet": "#27ae60", "stormpy-packet-precopy": "#82e0aa"}


def plot(path: str, servers: list, sizes: list, modes: list, outcome, veth: bool = False):
    """Requests/s against file size (log x), a line per server and mode; None, or why no PNG."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is missing (stormpy depends on it: pip install stormpy again), so no PNG"
    best = outcome.best()
    sizes = [s for s in sizes if s > 0]  # a log axis has no 0
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lines = 0
    for server in servers:
        for mode in modes:
            points = [(s, best[(server, mode, s)]["requests_per_s"]) for s in sizes
                      if (server, mode, s) in best]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o", label=f"{server} {mode}",
                        color=COLOURS.get(server, "#7f8c8d"),
                        linestyle="-" if mode == "keep-alive" else "--")
                lines += 1
    if not lines:
        plt.close(fig)
        return "no measurement to plot"
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([size_label(s) for s in sizes])
    ax.set_xlabel("file size (bytes)")
    ax.set_ylabel("requests/s")
    ax.set_ylim(bottom=0)
    ax.set_title("static files over HTTP/1.1 " + ("across a veth pair" if veth else "on loopback")
                 + ", one server core (wrk)")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        return f"cannot write {path}: {exc}"
    finally:
        plt.close(fig)
    return None
