"""What every benchmark shares: the one-line error, checks for tools and root, CPU lists,
and the three outputs (a markdown table, a CSV file, a PNG bar chart)."""
from __future__ import annotations

import csv
import os
import shutil
import sys


class BenchError(Exception):
    """A user-facing error: printed as one line, no traceback."""


def need_tool(command: str, package: str) -> str:
    """The tool's path, or BenchError naming the Debian package."""
    path = shutil.which(command) or next(
        (p for p in (f"/usr/sbin/{command}", f"/sbin/{command}") if os.access(p, os.X_OK)), None)
    if path is None:
        raise BenchError(f"{command} not found: apt-get install {package}")
    return path


def why_not_root(what: str):
    """None as root, else the one-line reason `what` cannot run."""
    if os.geteuid() != 0:
        return f"{what} needs root (network namespaces, XDP programs); run it as root"
    return None


def cpu_count_online() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def markdown_table(header: list, rows: list) -> str:
    out = ["| " + " | ".join(map(str, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(out)


def write_csv(path: str, header: list, rows: list) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def bar_chart(path: str, labels: list, values: list, title: str, ylabel: str):
    """Write a PNG bar chart; returns None, or a one-line reason it was not written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'stormpy[bench]'), so no PNG"
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(labels)), 4.5))
    bars = ax.bar(range(len(labels)), values, color=["#c0392b" if l.startswith("stormpy") else "#7f8c8d"
                                                     for l in labels])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    for b, v in zip(bars, values):
        ax.annotate(f"{v / 1000:,.0f}k", (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def say(*args) -> None:
    """Progress lines go to stderr, so that stdout holds only the result (JSON, table)."""
    print(*args, file=sys.stderr, flush=True)
