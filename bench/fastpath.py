"""The DNS fast path alone: queries answered in one C loop from the in-process table,
no sockets. Prints queries/s and ns/query for the DNS layer, and for whole Ethernet
frames through the frame worker on the memory backend; with --callgrind, runs itself
under valgrind and reports instructions per query inside sp_dns_answer (stable on a
noisy machine, unlike time).

    python3 bench/fastpath.py [--names 1000] [--rounds 200] [--mode memcpy|precopy|both] [--callgrind]
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import time

import dns.message

from stormpy import _core
from stormpy.dnscompile import compile_zones
from stormpy.zone import load_zone


def make_zone(path, names, seed):
    rng = random.Random(seed)
    with open(path, "w") as f:
        f.write("$ORIGIN bench.example.\n$TTL 3600\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n"
                "@ NS ns1\nns1 A 192.0.2.53\n")
        for i in range(names):
            f.write(f"host{i} A 192.0.2.{i % 250 + 1}\nhost{i} AAAA 2001:db8::{i:x}\n")
            if i % 10 == 0:
                f.write(f'host{i} TXT "v={rng.getrandbits(64):x}"\n')


def make_queries(names, count, seed):
    """80% existing names (A, AAAA, TXT), 10% NODATA, 10% NXDOMAIN; random 0x20 case."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        roll = rng.random()
        host = f"host{rng.randrange(names)}.bench.example"
        if roll < 0.8:
            qtype = rng.choice(["A", "A", "A", "AAAA"])
        elif roll < 0.9:
            qtype = "MX"
        else:
            host, qtype = f"nx{rng.randrange(10**6)}.bench.example", "A"
        host = "".join(c.upper() if rng.random() < 0.5 else c for c in host)
        out.append(dns.message.make_query(host, qtype).to_wire())
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--names", type=int, default=1000)
    p.add_argument("--queries", type=int, default=10000)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--seed", type=int, default=20261121)
    p.add_argument("--mode", choices=("memcpy", "precopy", "both"), default="memcpy",
                   help="how the frame path sends replies (both: one run of each)")
    p.add_argument("--callgrind", action="store_true", help="count instructions with valgrind")
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        zone = os.path.join(tmp, "bench.zone")
        make_zone(zone, args.names, args.seed)
        table, stats = compile_zones([load_zone(zone)])
        queries = make_queries(args.names, args.queries, args.seed)
        result = {"names": args.names, "keys": stats.keys, "queries": args.queries}
        if os.environ.get("STORMPY_FASTPATH_CHILD"):
            table.bench_dns(queries, 1)
            return
        table.bench_dns(queries, 2)   # warm caches
        answered, nbytes, ns = table.bench_dns(queries, args.rounds)
        n = args.queries * args.rounds
        result.update(answered=answered / args.rounds, qps=round(n / (ns / 1e9)),
                      ns_per_query=round(ns / n, 1), bytes_per_answer=round(nbytes / answered, 1))
        for mode in ("memcpy", "precopy") if args.mode == "both" else (args.mode,):
            result.update(frame_path(zone, queries, args.rounds, mode))
        if args.callgrind:
            result["instructions_per_query"] = callgrind(args)
        print(json.dumps(result))


def frame_path(zone, queries, rounds, mode="memcpy"):
    """Whole frames (Ethernet/IPv4/UDP) through the frame worker and the memory backend,
    replies rendered (memcpy) or sent from the precopy pool."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    table, _ = compile_zones([load_zone(zone)])
    ref = _core.TableRef(table, 1)
    head = Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01") / IP(src="198.18.0.2", dst="198.18.0.1")
    frames = [bytes(head / UDP(sport=1024 + i % 60000, dport=53) / q) for i, q in enumerate(queries)]
    ref.run_frames(frames, rounds=2, capture_max=0, mode=mode)
    start = time.perf_counter_ns()
    _, c = ref.run_frames(frames, rounds=rounds, capture_max=0, mode=mode)
    ns = time.perf_counter_ns() - start
    out = {"frame_qps": round(c["tx"] / (ns / 1e9)), "frame_ns_per_query": round(ns / c["rx"], 1)}
    if mode == "precopy":
        out.update(hits=c["precopy_hits"], fills=c["precopy_fills"],
                   fallbacks=c["precopy_fallbacks"])
    return {(k if mode == "memcpy" else f"precopy_{k}".replace("precopy_precopy_", "precopy_")): v
            for k, v in out.items()}


def callgrind(args):
    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        env = dict(os.environ, STORMPY_FASTPATH_CHILD="1")
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            "--toggle-collect=sp_dns_answer", sys.executable, __file__,
                            "--names", str(args.names), "--queries", str(args.queries),
                            "--seed", str(args.seed)], env=env, capture_output=True, text=True)
        m = re.search(r"Collected : (\d+)", r.stderr)
        if r.returncode != 0 or not m:
            raise SystemExit(f"valgrind failed: {r.stderr[-500:]}")
        return round(int(m.group(1)) / args.queries, 1)


if __name__ == "__main__":
    main()
