"""What every benchmark prints and writes: progress lines, a markdown table, a CSV file,
a PNG bar chart."""
from __future__ import annotations

import csv
import sys


def say(*args) -> None:
    """Progress lines go to stderr, so that stdout holds only the result (JSON, table)."""
    print(*args, file=sys.stderr, flush=True)


def markdown_table(header: list, rows: list) -> str:
    out = ["| " + " | ".join(map(str, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(out)


def count_or_na(value) -> str:
    """A count for a table cell: '1,234', or 'n/a' when it was not counted."""
    return "n/a" if value is None else f"{value:,.0f}"


def write_csv(path: str, header: list, rows: list) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def without_thousands(rows: list) -> list:
    """Table cells as a CSV wants them: '1,234' becomes '1234'."""
    return [[c.replace(",", "") if isinstance(c, str) else c for c in row] for row in rows]


def bar_chart(path: str, labels: list, values: list, title: str, ylabel: str):
    """Write a PNG bar chart; returns None, or a one-line reason it was not written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is missing (stormpy depends on it: pip install stormpy again), so no PNG"
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
