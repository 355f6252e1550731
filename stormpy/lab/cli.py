"""The `stormpy lab` command line: `list` and `run NAME [--quick] [--out DIR]`. A run
builds its namespaces, measures, and removes them again, also when it fails or is
interrupted; every error is one line."""
from __future__ import annotations

import os
import tempfile

from stormpy.bench.errors import BenchError
from stormpy.bench.netns import VethPair, why_no_netns
from stormpy.bench.processes import Interrupted, stopping_children_on_signals
from stormpy.bench.report import say
from stormpy.bench.workload import write_server_workload
from stormpy.lab import LABS, lab_module
from stormpy.lab.common import LabError, pyplot

# The zone's names and the query file `stormpy gen dns` sends from (the same mix of 80%
# existing names, 10% NODATA and 10% NXDOMAIN, drawn from one seed). Every gen parses the
# whole file before it sends, 10,000 queries in about 0.5 s: --quick's shorter file is the
# first 2,000 of the same draws, still twice the names.
NAMES, QUERIES, QUICK_QUERIES, SEED = 1000, 10000, 2000, 20261123


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="lab_command", metavar="list|run", required=True)
    sub.add_parser("list", help="the labs: name, idea, what they need",
                   description="List the labs, each with its idea and what it needs to run.")
    r = sub.add_parser("run", help="run one lab: namespaces, measurements, plot and report",
                       description="Build the lab's namespaces, run its measurements, remove "
                       "the namespaces, and write DIR/results.csv, DIR/NAME.png and "
                       "DIR/report.md (the handout's questions with the measured numbers).")
    r.add_argument("name", metavar="NAME", help="a lab from `stormpy lab list`")
    r.add_argument("--quick", action="store_true",
                   help="fewer points and shorter runs: under a minute, for CI")
    r.add_argument("--out", metavar="DIR", help="where the results go (default ./lab-NAME)")


def list_labs() -> int:
    rows = sorted(((name, lab_module(name)) for name in LABS), key=lambda row: row[1].NUMBER)
    width = max(len(name) for name, _ in rows)
    for name, lab in rows:
        print(f"{name:{width}}  {lab.NUMBER:2d}. {lab.IDEA}\n{'':{width}}      needs: {lab.NEEDS}")
    return 0


def run_lab(args) -> int:
    lab = lab_module(args.name)
    if lab is None:
        raise LabError(f"no lab {args.name!r}; the labs are: {', '.join(LABS)}")
    reason = why_no_netns()
    if reason:
        raise LabError(f"lab {args.name} {reason}")
    pyplot()        # no matplotlib: say so now, not after the measurements
    out = os.path.abspath(args.out or f"lab-{args.name}")
    if os.path.exists(out) and not os.path.isdir(out):
        raise LabError(f"--out {out}: exists and is not a directory")
    try:
        os.makedirs(out, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):     # writable: known now, not after the run
            pass
    except OSError as e:
        raise LabError(f"--out {out}: cannot write there ({e.strerror})") from None
    try:
        with stopping_children_on_signals(), \
                tempfile.TemporaryDirectory(prefix=f"stormpy-lab-{args.name}-") as work:
            wl = write_server_workload(work, NAMES, QUICK_QUERIES if args.quick else QUERIES,
                                       SEED)
            with VethPair(prefix="spl", queues=getattr(lab, "QUEUES", 1)) as pair:
                lab.run(pair, wl, work, out, args.quick)
    except (KeyboardInterrupt, Interrupted):
        say(f"lab {args.name}: interrupted; namespaces removed, settings restored")
        return 130
    except BenchError as e:
        raise LabError(str(e)) from None
    except OSError as e:        # writing the results, say (a full disk): one line
        where = f" ({e.filename})" if e.filename else ""
        raise LabError(f"lab {args.name}: {e.strerror or e}{where}") from None
    say(f"lab {args.name}: wrote {out}/results.csv, {out}/{args.name}.png, {out}/report.md")
    return 0


def run(args) -> int:
    return list_labs() if args.lab_command == "list" else run_lab(args)
