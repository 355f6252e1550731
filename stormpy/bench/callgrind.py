"""Instruction counts with valgrind's callgrind: stable on a noisy machine where time is
not. Each count runs a benchmark module again as a child under valgrind (`python -m
MODULE --child ...`), collecting only inside one C function (TOGGLE)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from stormpy.bench.errors import BenchError

TOGGLE = {"dns": "sp_dns_answer", "frame": "sp_frame_worker_run"}


def why_no_callgrind():
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (apt-get install valgrind)"
    return None


def count_instructions(jobs: dict, toggle: str, per: int, timeout: float, hint: str,
                       annotate: tuple = (), top: int = 8) -> dict:
    """Instructions per unit inside `toggle`, for each job (name -> the child's arguments
    after `python -m`), divided by `per` units. Two children run at a time: counts do not
    depend on the machine's load. Returns name -> (per unit, the functions they go to when
    the name is in `annotate` (the `top` biggest), else None)."""
    results = {}
    with tempfile.TemporaryDirectory(prefix="stormpy-cg-") as tmp:
        pending, running = list(jobs), []
        while pending or running:
            while pending and len(running) < 2:
                name = pending.pop(0)
                out = os.path.join(tmp, f"cg.{name}")
                argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        f"--toggle-collect={toggle}", sys.executable, "-m", *jobs[name]]
                running.append((name, out, subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                                            stderr=subprocess.PIPE, text=True),
                                time.monotonic()))
            name, out, proc, started = running.pop(0)
            try:
                _, err = proc.communicate(timeout=max(1.0, timeout - (time.monotonic() - started)))
            except subprocess.TimeoutExpired:
                for _, _, p, _ in running + [(name, out, proc, started)]:
                    p.kill()
                    p.wait()
                raise BenchError(f"valgrind ran for more than {timeout / 60:.0f} minutes ({name}); "
                                 f"{hint}") from None
            m = re.search(r"Collected : (\d+)", err)
            if proc.returncode != 0 or not m:
                last = (err.strip().splitlines() or ["no output"])[-1]
                raise BenchError(f"valgrind failed on {name} (status {proc.returncode}): {last}")
            results[name] = (round(int(m.group(1)) / per, 1),
                             annotate_functions(out, per, top) if name in annotate else None)
    return results


def annotate_functions(cg_out: str, nqueries: int, top: int = 8) -> list:
    """Exclusive instruction counts per function from callgrind_annotate: the biggest
    `top`, as (function, share %, per query)."""
    if shutil.which("callgrind_annotate") is None:
        return []
    # every function (threshold 100%), and no source listings to mistake for functions
    r = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", cg_out],
                       capture_output=True, text=True, timeout=600)
    rows, total = [], None
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(\S.*)$", line)
        if m and "PROGRAM TOTALS" in line:
            total = int(m.group(1).replace(",", ""))
            continue
        if m and total:
            count = int(m.group(1).replace(",", ""))
            fn = m.group(3).split(":", 1)[-1].split(" [")[0].strip()
            rows.append((fn, round(100.0 * count / total, 1), round(count / nqueries, 1)))
        if len(rows) >= top:
            break
    return rows
