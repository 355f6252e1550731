"""The `stormpy bench` command line. `register()` adds it to stormpy's own parser;
`main()` runs it alone (`python -m stormpy.bench`). Errors are one line, never a
traceback. Importing this module is cheap: each benchmark is imported when it runs."""
from __future__ import annotations

import argparse
import sys

from stormpy.argtypes import number_list, positive
from stormpy.bench.errors import BenchError

DESCRIPTION = ("Benchmarks behind docs/PERFORMANCE.md, one command per table. fastpath, sweep, "
               "responders and compile need no root; peers needs root and the Debian packages knot, "
               "knot-dnsutils and nsd; sockets needs dnsperf; http needs wrk and nginx.")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError("must be in (0, 600] seconds")
    return value


DEFAULT_STORMPY_CMD = (
    "{python} -m stormpy serve-dns {zone} --listen 127.0.0.1:{port} --workers {workers}"
)


def _workload_args(p, rounds_default, queries_default=10000):
    p.add_argument("--queries", type=positive, default=queries_default, metavar="N",
                   help=f"recorded queries (default {queries_default}): 80%% existing names "
                   "with random 0x20 case, 10%% NODATA, 10%% NXDOMAIN")
    p.add_argument("--rounds", type=positive, default=rounds_default, metavar="N",
                   help=f"times the queries are answered per measurement (default {rounds_default})")
    p.add_argument("--seed", type=int, default=20261121, help="zone and query seed")
    _output_args(p)


def _output_args(p, csv: bool = True) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    if csv:
        p.add_argument("--csv", metavar="FILE", help="also write the table as CSV")


def build_parser(p: argparse.ArgumentParser = None) -> argparse.ArgumentParser:
    if p is None:
        p = argparse.ArgumentParser(prog="stormpy bench", description=DESCRIPTION)
    sub = p.add_subparsers(dest="bench", metavar="BENCH")

    f = sub.add_parser("fastpath", help="the fast path alone on the memory backend (no root)",
                       description="Recorded queries through the real fast path from the "
                       "in-memory backend, no kernel I/O, no root: queries/s on one core, ns "
                       "and (with valgrind) instructions per query, for the DNS layer and for "
                       "whole frames in memcpy and precopy mode.")
    f.add_argument("--names", type=number_list, default=[1000], metavar="LIST",
                   help="zone sizes in names, e.g. 1,1000,10000 (default 1000): one row each")
    _workload_args(f, 200)
    f.add_argument("--batch", type=positive, default=32, metavar="N", help="frames per batch (default 32)")
    f.add_argument("--repeat", type=positive, default=3, metavar="N",
                   help="measurements per figure, the best is kept (default 3)")
    f.add_argument("--no-callgrind", dest="callgrind", action="store_false", default=None,
                   help="skip the instruction count even when valgrind is present")
    f.add_argument("--cg-queries", type=positive, default=10000, metavar="N",
                   help="queries answered once under callgrind (default 10000)")
    f.add_argument("--annotate", action="store_true",
                   help="also list where the DNS layer's instructions go, per function")
    f.set_defaults(run="fastpath")

    s = sub.add_parser("sweep", help="batch size, zone size, answer size: precopy against memcpy (no root)",
                       description="The paper's sweeps on the memory backend: batch 1 to 64, zone "
                       "size 1 to 1,000,000 names, or answer size (a TXT answer of each size at every "
                       "name; precopy also with every answer copied); memcpy and precopy side by side.")
    s.add_argument("axis", choices=("batch", "zone", "answer"))
    s.add_argument("--sizes", type=number_list, default=[100, 200, 400, 800, 1200], metavar="LIST",
                   help="DNS answer sizes in bytes for axis answer (default 100,200,400,800,1200)")
    s.add_argument("--batches", type=number_list, default=[1, 2, 4, 8, 16, 32, 64], metavar="LIST",
                   help="batch sizes for axis batch (default 1,2,4,8,16,32,64)")
    s.add_argument("--names", dest="zone_names", type=number_list, default=None, metavar="LIST",
                   help="zone sizes: axis zone (default 1,10000,1000000), axes batch and answer "
                   "use the first (default 1000)")
    s.add_argument("--batch", type=positive, default=32, metavar="N",
                   help="batch size for axis zone (default 32)")
    s.add_argument("--passes", type=positive, default=3, metavar="N",
                   help="times the whole grid is measured, interleaved; each cell keeps its best (default 3)")
    _workload_args(s, 50)
    s.set_defaults(run="sweep")

    co = sub.add_parser("cores", help="one worker per CPU at once against one alone (no root)",
                        description="The frame worker on the memory backend, alone on the first "
                        "CPU, then one per CPU at once (a process each, pinned, one shared table): "
                        "aggregate frames/s against one worker's, rounds alternating.")
    co.add_argument("--names", type=positive, default=1000, metavar="N",
                    help="zone size in names (default 1000)")
    co.add_argument("--workers", type=positive, default=None, metavar="N",
                    help="workers at once (default: one per CPU this process may use)")
    co.add_argument("--mode", choices=("memcpy", "precopy"), default="memcpy")
    co.add_argument("--rrl", type=positive, default=0, metavar="RATE",
                    help="response rate limiting at RATE answers/s per source (default off)")
    co.add_argument("--repeat", type=positive, default=5, metavar="N",
                    help="rounds of (one worker, all workers) (default 5)")
    _workload_args(co, 300)
    co.set_defaults(run="cores")

    c = sub.add_parser("compile", help="zone compile time and peak memory, beside Knot DNS",
                       description="Time and peak memory to compile zones of 1k, 100k and 1M "
                       "records (stormpy check-zone, in a child process), beside Knot DNS "
                       "loading the same files (knotd until it answers, and kzonecheck).")
    c.add_argument("--records", type=number_list, default=[1000, 100_000, 1_000_000], metavar="LIST",
                   help="zone sizes in records (default 1k,100k,1M)")
    c.add_argument("--rounds", type=positive, default=3, metavar="N",
                   help="loads of each file per tool, the best is kept (default 3)")
    c.add_argument("--no-knot", dest="knot", action="store_false", help="stormpy only")
    c.add_argument("--python-path", action="store_true",
                   help="also the Python reference path (dnspython and compiler.py): slow")
    c.add_argument("--timeout", type=positive, default=1800, metavar="S",
                   help="seconds one load may take (default 1800)")
    c.add_argument("--signed", choices=["nsec", "nsec3"],
                   help="sign each zone first (ldns-signzone, ECDSA P-256): about 3 records "
                        "a source record")
    c.add_argument("--seed", type=int, default=20261121)
    _output_args(c)
    c.set_defaults(run="compile")

    ix = sub.add_parser("ixfr", help="a secondary's swap after a small IXFR, per zone size (no root)",
                        description="dnspython reads a zone (as a transfer would), it goes into "
                        "the C store and compiles; a 3-record IXFR delta is applied in place; the "
                        "seconds from there to a new table.")
    ix.add_argument("--records", type=number_list, default=[100_000, 1_000_000], metavar="LIST",
                    help="zone sizes in records (default 100k,1M)")
    _output_args(ix)
    ix.set_defaults(run="ixfr")

    no = sub.add_parser("notify", help="a Knot primary's change to stormpy's answer, as a "
                        "secondary (loopback, no root)",
                        description="Knot DNS serves the compile bench's zone on 127.0.0.1 and "
                        "stormpy follows it as a secondary; each round a dynamic update on Knot "
                        "adds one record, timed until stormpy answers it (NOTIFY, IXFR, the "
                        "table edited).")
    no.add_argument("--records", type=number_list, default=[1_000_000], metavar="N",
                    help="zone size in records (default 1M)")
    no.add_argument("--rounds", type=positive, default=5, help="updates, one at a time (default 5)")
    no.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    no.set_defaults(run="notify")

    pe = sub.add_parser("peers", help="kxdpgun load on Knot (XDP, sockets), NSD and stormpy (root)",
                        description="One kxdpgun load across a veth pair between two network "
                        "namespaces, server and generator pinned to different CPUs, the same zone "
                        "and query mix for every server: Knot DNS in XDP mode and on sockets, NSD, "
                        "and stormpy on AF_XDP, AF_PACKET (memcpy and precopy) and sockets. Best of "
                        "N interleaved rounds; replies/s, the share of the offered load answered, "
                        "stormpy's ratio to each peer; a CSV and a PNG bar chart.")
    pe.add_argument("--servers", default=None, metavar="LIST",
                    help="comma-separated, measured in this order each round (default: all: "
                    "stormpy-xdp,stormpy-xdp-precopy,stormpy-packet,stormpy-packet-precopy,"
                    "stormpy-socket,knot-xdp,knot,nsd)")
    pe.add_argument("-l", "--seconds", type=_seconds, default=10.0, metavar="S",
                    help="kxdpgun -t per measurement (default 10)")
    pe.add_argument("--rounds", type=positive, default=3, metavar="N", help="rounds (default 3)")
    pe.add_argument("--warmup", type=float, default=1.0, metavar="S",
                    help="unmeasured kxdpgun seconds before each measurement (default 1; 0: none)")
    pe.add_argument("--qps", type=positive, default=2_000_000, metavar="N",
                    help="offered load, kxdpgun -Q (default 2000000: more than any server here answers)")
    pe.add_argument("--kxdpgun-batch", type=positive, default=32, metavar="N", help="kxdpgun -b (default 32)")
    pe.add_argument("--generator", choices=("kxdpgun", "stormpy-gen"), default="kxdpgun",
                    help="the load: kxdpgun at --qps, or stormpy gen on AF_XDP in closed loop "
                    "(--gen-outstanding in flight, --kxdpgun-batch a batch)")
    pe.add_argument("--gen-outstanding", type=positive, default=256, metavar="N",
                    help="stormpy gen --outstanding (default 256)")
    pe.add_argument("--names", type=positive, default=1000, metavar="N", help="names in the zone (default 1000)")
    pe.add_argument("--queries", type=positive, default=100_000, metavar="N",
                    help="lines in the query file (default 100000)")
    pe.add_argument("--seed", type=int, default=20240101)
    pe.add_argument("--server-cpu", type=int, default=0, metavar="CPU", help="the server's CPU (default 0)")
    pe.add_argument("--client-cpu", type=int, default=1, metavar="CPU", help="kxdpgun's CPU (default 1)")
    pe.add_argument("--out", default="bench-peers", metavar="PREFIX",
                    help="write PREFIX.csv and PREFIX.png (default bench-peers)")
    _output_args(pe, csv=False)
    pe.add_argument("--keep", action="store_true", help="keep the temporary directory (configs, logs)")
    pe.set_defaults(run="peers")

    cp = sub.add_parser("cpu", help="CPU per reply at fixed loads: stormpy (in the driver, AF_XDP, "
                        "AF_PACKET), Knot (XDP, sockets), NSD and an XDP_TX floor (root)",
                        description="CPU per reply at fixed offered loads across a veth pair: the "
                        "server's processes plus its side's threaded NAPI, both pinned to "
                        "--server-cpu, per task. Servers: an XDP_TX reflector (the floor), "
                        "serve-dns --xdp-answer, stormpy on AF_XDP and AF_PACKET, Knot DNS in XDP "
                        "mode and on sockets, NSD with RRL off. Median and spread of the rounds, "
                        "each server's cost above the floor, latency from stormpy gen; a CSV and "
                        "a PNG plot.")
    cp.add_argument("--servers", default=None, metavar="LIST",
                    help="comma-separated (default: floor,stormpy-xdp-answer,stormpy-xdp,"
                    "stormpy-xdp-busy,stormpy-packet,knot-xdp,knot,nsd)")
    cp.add_argument("--loads", default="10000,50000,100000,200000,max", metavar="LIST",
                    help="offered queries/s, and max: as many as the generator can (default "
                    "10000,50000,100000,200000,max)")
    cp.add_argument("-l", "--seconds", type=_seconds, default=5.0, metavar="S",
                    help="seconds per point (default 5)")
    cp.add_argument("--rounds", type=positive, default=3, metavar="N", help="rounds (default 3)")
    cp.add_argument("--generator", choices=("stormpy-gen", "kxdpgun"), default="stormpy-gen",
                    help="stormpy gen on AF_XDP (open loop at a rate, latency percentiles; "
                    "default) or kxdpgun -Q")
    cp.add_argument("--gen-outstanding", type=positive, default=256, metavar="N",
                    help="queries in flight at max (default 256)")
    cp.add_argument("--max-qps", type=positive, default=5_000_000, metavar="N",
                    help="kxdpgun -Q at max (default 5000000)")
    cp.add_argument("--kxdpgun-batch", type=positive, default=32, metavar="N", help="kxdpgun -b")
    cp.add_argument("--names", type=positive, default=1000, metavar="N", help="names in the zone (default 1000)")
    cp.add_argument("--queries", type=positive, default=100_000, metavar="N",
                    help="lines in the query file (default 100000)")
    cp.add_argument("--seed", type=int, default=20240101)
    cp.add_argument("--server-cpu", type=int, default=0, metavar="CPU", help="the server's CPU (default 0)")
    cp.add_argument("--client-cpu", type=int, default=1, metavar="CPU", help="the generator's CPU (default 1)")
    cp.add_argument("--out", default="bench-cpu", metavar="PREFIX",
                    help="write PREFIX.csv and PREFIX.png (default bench-cpu)")
    cp.add_argument("--keep", action="store_true", help="keep the temporary directory (configs, logs)")
    cp.set_defaults(run="cpu")

    r = sub.add_parser("responders", help="custom responders: rules, Python slow path, scapy (no root)",
                       description="Custom responders on the memory backend, side by side in "
                       "one run: a key-value GET rule and an echo rule against the DNS fast path "
                       "(the same frame worker loop; ns and, with valgrind, instructions per "
                       "query), a Python slow-path UDP echo at batch 32 and 256, and scapy's "
                       "AnsweringMachine doing the same echo on the same frames. Every path's "
                       "replies are checked before it is timed.")
    r.add_argument("--packets", type=positive, default=10000, metavar="N",
                   help="frames in each workload (default 10000)")
    r.add_argument("--names", type=positive, default=1000, metavar="N",
                   help="names in the DNS zone compared with (default 1000, as bench fastpath)")
    r.add_argument("--rounds", type=positive, default=100, metavar="N",
                   help="times the frames are replayed per measurement of a C loop, at most "
                   "(default 100; fewer when --seconds would be passed)")
    r.add_argument("--repeat", type=positive, default=3, metavar="N",
                   help="interleaved passes over every path; each keeps its best (default 3)")
    r.add_argument("--batch", type=positive, default=32, metavar="N",
                   help="frames per batch for DNS and the rules (default 32)")
    r.add_argument("--seconds", type=_seconds, default=20.0, metavar="S",
                   help="time bound of one measurement (default 20)")
    r.add_argument("--scapy-packets", type=positive, default=20000, metavar="N",
                   help="frames through scapy's AnsweringMachine per measurement, at most "
                   "(default 20000)")
    r.add_argument("--no-callgrind", dest="callgrind", action="store_false", default=None,
                   help="skip the instruction counts even when valgrind is present")
    r.add_argument("--cg-packets", type=positive, default=10000, metavar="N",
                   help="packets answered once per path under callgrind (default 10000)")
    r.add_argument("--seed", type=int, default=20261121, help="workload seed")
    _output_args(r)
    r.set_defaults(run="responders")

    so = sub.add_parser("sockets", help="the socket backend against NSD and Knot on loopback (dnsperf)",
                        description="stormpy's socket backend against Knot DNS and NSD over UDP on "
                        "127.0.0.1 with dnsperf, one pinned worker each, interleaved rounds.",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _sockets_args(so)
    so.set_defaults(run="sockets")

    h = sub.add_parser("http", help="static files over HTTP: stormpy serve-http beside nginx (wrk)",
                       description="Static files of each size from stormpy serve-http and from "
                       "nginx (Debian's defaults), one worker each pinned to --server-cpu, loaded "
                       "by wrk on --client-cpu over 127.0.0.1: requests/s, the server's CPU time "
                       "per request, stormpy's ratio to nginx; keep-alive, and with --close also a "
                       "new connection per request. A server that fails is named in one line and "
                       "the others are still measured.")
    _http_args(h)
    h.set_defaults(run="http")

    hl = sub.add_parser("http-loss", help="serve-http beside nginx through a lossy path (root)",
                        description="The paper's loss experiment: stormpy serve-http and nginx in "
                        "a server namespace, wrk in a client namespace, stormpy impair between "
                        "them; throughput with no loss and with each --loss, side by side.")
    hl.add_argument("--loss", type=_percent_list, default=[1.0], metavar="LIST",
                    help="loss percentages after the lossless run (default 1)")
    hl.add_argument("--sizes", default="64k,1m", metavar="LIST",
                    help="file sizes, k and m are powers of 1024 (default 64k,1m)")
    hl.add_argument("--seconds", type=_seconds, default=5.0, metavar="S",
                    help="wrk -d per measurement (default 5)")
    hl.add_argument("--connections", type=positive, default=8, metavar="N",
                    help="wrk -c (default 8)")
    hl.add_argument("--json", action="store_true", help="print one JSON object")
    hl.set_defaults(run="http-loss")

    g = sub.add_parser("gen", help="stormpy gen's own rate and CPU per query beside dnsperf's",
                       description="stormpy gen and dnsperf in turn against the same stormpy "
                       "serve-dns on 127.0.0.1 (one worker on --server-cpu, the client on "
                       "--client-cpu), closed loop with --outstanding queries: replies/s, the "
                       "client's CPU per query and how busy each core was.")
    from stormpy.bench.gen import add_arguments as add_gen_arguments
    add_gen_arguments(g)
    g.set_defaults(run="gen")
    return p


def _percent_list(text: str) -> list:
    try:
        values = [float(x.rstrip("%")) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected percentages like 1,5") from None
    if not values or not all(0 < v < 100 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: percentages above 0 and below 100")
    return values


def _http_args(p) -> None:
    p.add_argument("--sizes", default="1k,16k,64k,256k,1m", metavar="LIST",
                   help="file sizes, k and m are powers of 1024 (default 1k,16k,64k,256k,1m)")
    p.add_argument("--seconds", type=_seconds, default=5.0, metavar="S",
                   help="wrk -d per measurement (default 5)")
    p.add_argument("--connections", type=positive, default=32, metavar="N",
                   help="wrk -c, open connections (default 32)")
    p.add_argument("--threads", type=positive, default=1, metavar="N", help="wrk -t (default 1)")
    p.add_argument("--close", action="store_true",
                   help="also measure a new connection per request (wrk -H 'Connection: close')")
    p.add_argument("--rounds", type=positive, default=1, metavar="N",
                   help="rounds, servers interleaved; each cell keeps its best (default 1)")
    p.add_argument("--servers", default=None, metavar="LIST",
                   help="comma-separated, measured in this order each round (default "
                   "stormpy,nginx; with --veth stormpy,stormpy-xdp,stormpy-xdp-precopy,"
                   "stormpy-packet,stormpy-packet-precopy,nginx)")
    p.add_argument("--veth", action="store_true",
                   help="across a veth pair between two namespaces (root), so that stormpy's own "
                   "TCP on AF_XDP (stormpy-xdp) and AF_PACKET (stormpy-packet), in memcpy and "
                   "precopy mode, can be measured")
    p.add_argument("--server-cpu", type=int, default=0, metavar="CPU",
                   help="the CPU of the server's worker (default 0)")
    p.add_argument("--client-cpu", type=int, default=1, metavar="CPU", help="wrk's CPU (default 1)")
    p.add_argument("--start-timeout", type=_seconds, default=30.0, metavar="S",
                   help="seconds a server may take to accept connections (default 30)")
    p.add_argument("--stormpy-cmd", default=None, metavar="TEMPLATE",
                   help="stormpy's command; {python} {site} {port} {cpu} are substituted (default: "
                   "{python} -m stormpy serve-http {site} --listen 127.0.0.1:{port} --workers 1 "
                   "--cpus {cpu})")
    p.add_argument("--plot", metavar="FILE", help="also write a PNG: requests/s against file size")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (site, logs)")
    _output_args(p, csv=False)


def _sockets_args(p) -> None:
    """`bench sockets`'s options; their ranges are checked when it runs (one-line errors)."""
    p.add_argument("--servers", default="stormpy,knot,nsd",
                   help="comma-separated list, measured in this order every round")
    p.add_argument("-l", "--seconds", type=float, default=10.0, help="dnsperf -l per measurement")
    p.add_argument("--rounds", type=int, default=3, help="rounds (servers interleaved per round)")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured dnsperf seconds before each run (0: none)")
    p.add_argument("--names", type=int, default=1000, help="names in the generated zone")
    p.add_argument("--queries", type=int, default=100000, help="lines in the dnsperf query file")
    p.add_argument("--seed", type=int, default=20240101, help="random seed for zone and queries")
    p.add_argument("--variant", choices=["pinned1", "unpinned2", "both"], default="pinned1",
                   help="pinned1: 1 worker on --server-cpus; unpinned2: 2 workers, no taskset")
    p.add_argument("--server-cpus", default="0", help="taskset CPU list for the pinned server")
    p.add_argument("--client-cpus", default="1", help="taskset CPU list for dnsperf ('' = unpinned)")
    p.add_argument("--clients", "-c", type=int, default=24, help="dnsperf -c (UDP sockets)")
    p.add_argument("--outstanding", "-q", type=int, default=200, help="dnsperf -q (max in flight)")
    p.add_argument("--threads", "-T", type=int, default=6, help="dnsperf -T")
    p.add_argument("--timeout", type=float, default=1.0, help="dnsperf -t (seconds before a query counts as lost)")
    p.add_argument("--input", choices=["binary", "text"], default="binary",
                   help="dnsperf query file format: binary (-B, cheaper for dnsperf) or text")
    p.add_argument("--edns", action="store_true", help="send EDNS0 (dnsperf -e)")
    p.add_argument("--dnsperf-extra", default="", help="extra dnsperf arguments (shell-quoted string)")
    p.add_argument("--dnsperf", default="dnsperf", help="dnsperf binary")
    p.add_argument("--stormpy-python", default=sys.executable, help="python used for stormpy ({python})")
    p.add_argument("--stormpy-cmd", default=DEFAULT_STORMPY_CMD,
                   help="stormpy command template; {python} {zone} {port} {workers} are substituted")
    p.add_argument("--noise-limit", type=float, default=10.0,
                   help="percent of one CPU that other processes may use during a run before "
                        "it is measured again")
    p.add_argument("--noise-retries", type=int, default=2,
                   help="extra measurements allowed per round when the machine was noisy")
    p.add_argument("--nsd-minimal-responses", choices=["yes", "no"], default="yes",
                   help="NSD minimal-responses (yes: no NS/glue added to answers, like Knot)")
    p.add_argument("--start-timeout", type=float, default=30.0, help="seconds to wait for a server to answer")
    p.add_argument("--base-port", type=int, default=0,
                   help="use ports BASE, BASE+1, ... (one per server) instead of free random ports")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as markdown")
    p.add_argument("--csv", metavar="FILE", help="write the summary table as CSV")
    p.add_argument("--raw-csv", metavar="FILE", help="write one CSV row per measurement")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (zone, configs, logs)")
    p.add_argument("--verbose", "-v", action="store_true", help="print dnsperf output of every run")


def register(subparsers) -> None:
    """Add `bench` to stormpy's subcommands; the handler is `run(args)`."""
    b = subparsers.add_parser("bench", help="benchmarks: fastpath, sweep, cores, responders, compile, ixfr, notify, peers, cpu, "
                              "sockets, http, http-loss",
                              description=DESCRIPTION)
    build_parser(b)


def run(args) -> int:
    """Run the parsed `stormpy bench ...`; BenchError becomes one line and status 2."""
    which = getattr(args, "run", None)
    if which is None:
        print("stormpy bench: choose one of fastpath, sweep, cores, responders, compile, ixfr, notify, peers, cpu, sockets, "
              "http, http-loss, gen (stormpy bench -h)", file=sys.stderr)
        return 2
    try:
        if which == "fastpath":
            from stormpy.bench.fastpath import run_fastpath
            return run_fastpath(args)
        if which == "sweep":
            if args.zone_names is None:
                args.zone_names = [1, 10_000, 1_000_000] if args.axis == "zone" else [1000]
            from stormpy.bench.fastpath import run_sweep
            return run_sweep(args)
        if which == "responders":
            from stormpy.bench.responders import run_responders
            return run_responders(args)
        if which == "ixfr":
            from stormpy.bench.ixfr import run_ixfr
            return run_ixfr(args)
        if which == "cores":
            from stormpy.bench.cores import run_cores
            return run_cores(args)
        if which == "compile":
            from stormpy.bench.zonecompile import run_compile
            return run_compile(args)
        if which == "notify":
            from stormpy.bench.notify import run_notify
            args.records = args.records[0]
            return run_notify(args)
        if which == "peers":
            from stormpy.bench.peers import run_peers
            return run_peers(args)
        if which == "cpu":
            from stormpy.bench.cpu import run_cpu
            return run_cpu(args)
        if which == "http":
            from stormpy.bench.http import run_http
            return run_http(args)
        if which == "gen":
            from stormpy.bench.gen import run_gen_bench
            return run_gen_bench(args)
        if which == "http-loss":
            from stormpy.bench.http_loss import run_http_loss
            return run_http_loss(args)
        from stormpy.bench.sockets import run_from_args
        return run_from_args(args)
    except BenchError as e:
        print(f"stormpy bench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stormpy bench: interrupted", file=sys.stderr)
        return 130


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run(args)
