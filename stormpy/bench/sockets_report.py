"""What `stormpy bench sockets` prints and writes: the machine, one summary row per server
and variant, stormpy's ratio to each peer, notes on what limits the figures, and the
markdown, CSV and per-measurement CSV files."""
from __future__ import annotations

import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Optional

from stormpy.bench.processes import find_tool, rmem_default
from stormpy.bench.report import markdown_table, without_thousands, write_csv

SUMMARY_COLUMNS = ["server", "variant", "replies/s best", "replies/s median", "lost % (best)",
                   "avg latency ms (best)", "server cores busy %", "server procs CPU %",
                   "server CPU us/reply", "dnsperf core busy %", "resp bytes", "rounds", "check"]
RAW_COLUMNS = ["server", "variant", "round", "qps", "sent", "completed", "lost",
               "avg_latency_ms", "latency_sd_ms", "req_bytes", "resp_bytes",
               "server_cores_busy_pct", "server_procs_cpu_pct", "dnsperf_core_busy_pct",
               "dnsperf_proc_cpu_pct", "steal_pct", "other_procs_cpu_pct",
               "server_cpu_us_per_reply", "dnsperf_cpu_us_per_query", "udp_rcvbuf_drops",
               "attempts", "rcodes"]
FOOTNOTE = ("best = highest replies/s over the rounds; lost % and latency are from that round. "
            "CPU columns are medians over the rounds, 100 = one core: 'cores busy' is /proc/stat "
            "busy time (incl. softirq) of the CPUs the server is pinned to (n/a when "
            "unpinned), 'procs' is the server's own process-tree CPU time, and 'us/reply' is that "
            "CPU time plus the softirq time on its pinned CPUs, divided by replies (median), "
            "which stays meaningful when dnsperf, not the server, is the bottleneck.")


def _first_line(cmd: list, pattern: Optional[str] = None) -> str:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "n/a"
    text = (res.stdout + res.stderr).strip()
    if pattern:
        m = re.search(pattern, text)
        return m.group(0) if m else "n/a"
    return text.splitlines()[0] if text else "n/a"


def machine_info(dnsperf: str, specs: dict) -> list:
    cpu_model = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = [
        ("command", shlex.join([sys.executable] + sys.argv)),
        ("date", time.strftime("%Y-%m-%d %H:%M:%S %Z")),
        ("nproc", str(os.cpu_count())),
        ("cpu", cpu_model),
        ("kernel", f"{platform.system()} {platform.release()}"),
        ("python", platform.python_version()),
        ("dnsperf", _first_line([dnsperf, "-h"], r"Version \S+")),
        ("knotd", _first_line(["knotd", "-V"]) if find_tool("knotd") else "not installed"),
        ("nsd", _first_line(["nsd", "-v"]) if find_tool("nsd") else "not installed"),
    ]
    if "stormpy" in specs:
        info.append(("stormpy", _first_line(specs["stormpy"].version_cmd)))
    return info


def _med(values) -> float:
    return statistics.median(list(values))


@dataclass
class Summary:
    server: str
    variant: str
    rounds: list  # of PerfResult
    problems: list
    failed: bool = False  # the server failed later on and was dropped

    @property
    def best(self):
        return max(self.rounds, key=lambda r: r.qps)

    @property
    def median_qps(self) -> float:
        return _med(r.qps for r in self.rounds)

    @property
    def median_us(self) -> float:
        return _med(r.us_per_reply for r in self.rounds)

    def row(self) -> list:
        b = self.best
        return [
            self.server, self.variant, f"{b.qps:,.0f}", f"{self.median_qps:,.0f}",
            f"{b.lost_pct:.3f}", f"{b.avg_latency_s * 1000:.3f}",
            f"{_med(r.server_core_busy_pct for r in self.rounds):.0f}" if self.variant == "pinned1" else "n/a",
            f"{_med(r.server_cpu_pct for r in self.rounds):.0f}",
            f"{self.median_us:.2f}",
            f"{_med(r.client_core_busy_pct for r in self.rounds):.0f}",
            str(b.resp_size), str(len(self.rounds)),
            "FAILED" if self.failed else ("SUSPECT" if self.problems else "ok"),
        ]


def ratio_lines(summaries: list) -> list:
    lines = []
    for variant in dict.fromkeys(s.variant for s in summaries):
        group = {s.server: s for s in summaries if s.variant == variant}
        sp = group.get("stormpy")
        if sp is None:
            continue
        for peer, s in group.items():
            if peer == "stormpy":
                continue
            lines.append(f"- {variant}: stormpy / {peer} = {sp.best.qps / s.best.qps:.2f}x replies/s (best), "
                         f"{sp.median_qps / s.median_qps:.2f}x (median); CPU per reply "
                         f"{sp.median_us / s.median_us:.2f}x of {peer}'s (lower is better)")
    return lines


def summary_notes(s: Summary, noise_limit: float) -> list:
    """What limits one server's figures: suspect replies, dnsperf as the bottleneck, noise,
    full receive buffers, CPU steal."""
    notes = []
    if s.problems:
        notes.append(f"- {s.server} ({s.variant}) SUSPECT: {'; '.join(sorted(set(s.problems)))}")
    busy = _med(r.server_core_busy_pct for r in s.rounds)
    if s.variant == "pinned1" and busy < 90:
        notes.append(f"- {s.server}: its core was only {busy:.0f}% busy, so dnsperf (not the "
                     f"server) limited it; treat {s.best.qps:,.0f}/s as a lower bound")
    noisy = [r for r in s.rounds if r.other_cpu_pct > noise_limit]
    if noisy:
        notes.append(f"- {s.server} ({s.variant}): in {len(noisy)} of {len(s.rounds)} rounds other "
                     f"processes used >{noise_limit:g}% CPU (up to {max(r.other_cpu_pct for r in noisy):.0f}%); "
                     f"the machine was noisy, trust 'best' more than 'median'")
    drops = max(r.rcvbuf_drops for r in s.rounds)
    if drops:
        notes.append(f"- {s.server} ({s.variant}): up to {drops:,} UDP datagrams dropped in a run "
                     f"because a socket receive buffer was full (the server's, most likely: "
                     f"many servers keep the {rmem_default()}-byte default); lower -q to avoid it")
    steal = max(r.steal_pct for r in s.rounds)
    if steal > 5:
        notes.append(f"- {s.server} ({s.variant}): up to {steal:.0f}% CPU steal by the hypervisor")
    return notes


def write_report(args, header: list, notes: list, results: dict, problems: dict, failed: dict,
                 raw_rows: list, stormpy_measured: bool) -> int:
    """Print the results and write the files asked for; the exit status (1: a server
    failed or looked suspect)."""
    summaries = [Summary(name, variant, rs, problems.get((name, variant), []), name in failed)
                 for (name, variant), rs in results.items()]
    rows = [s.row() for s in summaries]
    ratios = ratio_lines(summaries)
    notes = notes + [f"- {name} FAILED and was dropped: {msg}" for name, msg in failed.items()]
    for s in summaries:
        notes += summary_notes(s, args.noise_limit)
    if stormpy_measured and not ratios:
        notes.append("- no stormpy ratio: stormpy or every peer has no result")

    report = ["## Results", "", markdown_table(SUMMARY_COLUMNS, rows), ""]
    if ratios:
        report += ["stormpy ratio:", ""] + ratios + [""]
    if notes:
        report += ["Notes:", ""] + notes + [""]
    report += [FOOTNOTE, ""]
    print("\n".join(report), flush=True)

    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write("# DNS socket peers benchmark\n\n" + "\n".join(header) + "\n\n"
                     + "\n".join(report))
    if args.csv:
        write_csv(args.csv, SUMMARY_COLUMNS, without_thousands(rows))
    if args.raw_csv:
        write_csv(args.raw_csv, RAW_COLUMNS, raw_rows)
    return 1 if failed or any(s.problems for s in summaries) else 0
