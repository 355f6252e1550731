"""Every benchmark's zones and queries, generated from a seed so that a run can be
repeated byte for byte.

- the server workload (`bench sockets`, `bench peers`): zone bench.example. with N names
  (A on every name, about half with AAAA, a fifth with MX, a fifth with TXT) and a query
  file: 80% existing name/type (70% of those A), 10% NODATA, 10% NXDOMAIN; in dnsperf's
  text format and its binary -B format;
- the fast-path workload (`bench fastpath`, `bench sweep`, `bench responders`): an A and
  an AAAA per name, a TXT on every tenth; queries 80% existing (A, AAAA), 10% NODATA (MX),
  10% NXDOMAIN, each name in random 0x20 case; compiled into a table;
- the answer-size workload (`bench sweep answer`): a TXT answer of a chosen size at
  every name, queried with EDNS;
- the compile workload (`bench compile`): exactly N records.
The three zones differ because the figures in docs/PERFORMANCE.md were measured on them.
"""
from __future__ import annotations

import os
import random
import struct
from dataclasses import dataclass

import dns.flags
import dns.message
import dns.rdatatype

from stormpy.bench.errors import BenchError
from stormpy.bench.frames import make_frame, source_port

ZONE_ORIGIN = "bench.example."
ZONE_FILE_NAME = "bench.example.zone"


def query_wire(qid: int, name: str, rdtype: int, rd: bool = True, edns: bool = False) -> bytes:
    """A query as dnspython's make_query writes it (one question, class IN; with edns an
    OPT record of payload 4096 and no flags, as dnsperf -e sends it). Packed with struct:
    workloads hold up to millions of queries, and a dns.message costs 30 times more; the
    first query of every workload is checked against dnspython (same_as_dnspython)."""
    header = struct.pack("!HHHHHH", qid, 0x0100 if rd else 0, 1, 0, 0, 1 if edns else 0)
    labels = b"".join(bytes([len(l)]) + l.encode("ascii") for l in name.rstrip(".").split("."))
    msg = header + labels + b"\0" + struct.pack("!HH", rdtype, 1)
    if edns:
        msg += b"\0" + struct.pack("!HHIH", dns.rdatatype.OPT, 4096, 0, 0)
    return msg


def same_as_dnspython(wire: bytes, qid: int, name: str, rdtype: int, rd: bool = True,
                      edns: bool = False) -> None:
    """BenchError unless dnspython writes the same query as query_wire did."""
    q = (dns.message.make_query(name, rdtype, use_edns=0, payload=4096) if edns
         else dns.message.make_query(name, rdtype, use_edns=False))
    q.id = qid
    if not rd:
        q.flags &= ~dns.flags.RD
    if q.to_wire() != wire:
        raise BenchError(f"the query for {name} differs from dnspython's: {wire.hex()}")


# --------------------------------------------------------------------------
# The server workload: bench sockets, bench peers
# --------------------------------------------------------------------------

@dataclass
class ServerWorkload:
    zone_path: str
    query_path: str  # dnsperf text format
    binary_path: str  # the same queries in dnsperf -B format
    n_names: int
    n_queries: int
    mix: dict  # category -> count
    samples: list  # (existing name, its A address) for the answer check
    nodata_name: str  # existing name without AAAA
    nxdomain_name: str
    expected_nxdomain_share: float


def _host(i: int) -> str:
    return f"host{i:06d}"


def _a_of(i: int) -> str:
    n = i + 1  # host000000 -> 10.0.0.1
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def _server_zone_lines(n_names: int, seed: int, rng: random.Random) -> tuple[list, dict]:
    has_aaaa = [rng.random() < 0.5 for _ in range(n_names)]
    has_mx = [rng.random() < 0.2 for _ in range(n_names)]
    has_txt = [rng.random() < 0.2 for _ in range(n_names)]
    # Make sure every category has at least one member.
    has_aaaa[1] = has_mx[2] = has_txt[3] = True
    has_aaaa[0] = False  # host000000: sample name, also used for NODATA AAAA
    lines = [f"$ORIGIN {ZONE_ORIGIN}", "$TTL 3600",
             "@\tIN\tSOA\tns1 hostmaster 2024010101 7200 3600 1209600 3600",
             "@\tIN\tNS\tns1", "@\tIN\tNS\tns2", "ns1\tIN\tA\t127.0.0.1", "ns2\tIN\tA\t127.0.0.2",
             "mail\tIN\tA\t10.255.0.25", "mail\tIN\tAAAA\t2001:db8:ffff::25"]
    for i in range(n_names):
        nm = _host(i)
        lines.append(f"{nm}\tIN\tA\t{_a_of(i)}")
        if has_aaaa[i]:
            lines.append(f"{nm}\tIN\tAAAA\t2001:db8::{(i >> 16) & 0xffff:x}:{i & 0xffff:x}")
        if has_mx[i]:
            # Half point at an in-zone mail host (exercises additional-section
            # processing), half at the name itself.
            lines.append(f"{nm}\tIN\tMX\t10 {'mail' if i % 2 else nm}")
        if has_txt[i]:
            lines.append(f'{nm}\tIN\tTXT\t"v=bench1 id={i} seed={seed}"')
    groups = {"AAAA": [i for i in range(n_names) if has_aaaa[i]],
              "MX": [i for i in range(n_names) if has_mx[i]],
              "TXT": [i for i in range(n_names) if has_txt[i]],
              "no AAAA": [i for i in range(n_names) if not has_aaaa[i]]}
    return lines, groups


def _server_queries(n_names: int, n_queries: int, groups: dict, rng: random.Random):
    queries = []
    mix = {"A": 0, "AAAA": 0, "MX": 0, "TXT": 0, "NODATA": 0, "NXDOMAIN": 0}
    for _ in range(n_queries):
        r = rng.random()
        if r < 0.80:  # existing name and type: mostly A
            t = rng.random()
            kind = "A" if t < 0.70 else "AAAA" if t < 0.85 else "MX" if t < 0.93 else "TXT"
            i = rng.randrange(n_names) if kind == "A" else rng.choice(groups[kind])
            queries.append(f"{_host(i)}.{ZONE_ORIGIN} {kind}")
        elif r < 0.90:  # NODATA: name exists, type does not
            kind = "NODATA"
            if rng.random() < 0.5:
                queries.append(f"{_host(rng.choice(groups['no AAAA']))}.{ZONE_ORIGIN} AAAA")
            else:
                queries.append(f"{_host(rng.randrange(n_names))}.{ZONE_ORIGIN} SRV")
        else:
            kind = "NXDOMAIN"
            queries.append(f"nx{rng.randrange(10**9):09d}.{ZONE_ORIGIN} A")
        mix[kind] += 1
    return queries, mix


def write_server_workload(directory: str, n_names: int, n_queries: int, seed: int,
                          edns: bool = False) -> ServerWorkload:
    """Write the zone file and the dnsperf query files; return what was made."""
    if n_names < 10:
        raise BenchError("--names must be at least 10")  # samples need distinct names
    rng = random.Random(seed)
    lines, groups = _server_zone_lines(n_names, seed, rng)
    zone_path = os.path.join(directory, ZONE_FILE_NAME)
    with open(zone_path, "w", encoding="ascii") as fh:
        fh.write("\n".join(lines) + "\n")
    queries, mix = _server_queries(n_names, n_queries, groups, rng)
    query_path = os.path.join(directory, "queries.txt")
    with open(query_path, "w", encoding="ascii") as fh:
        fh.write("\n".join(queries) + "\n")
    # Same queries in dnsperf's -B format (2-byte length + wire message): dnsperf
    # then skips parsing text for every query it sends, which matters because on
    # a small machine dnsperf's own CPU is the limit.  Same bytes on the wire as
    # the text mode (dnsperf sets RD and rewrites the ID in both modes).
    binary_path = os.path.join(directory, "queries.bin")
    with open(binary_path, "wb") as fh:
        for n, line in enumerate(queries):
            qname, qtype = line.split()
            msg = query_wire(0, qname, dns.rdatatype.from_text(qtype), edns=edns)
            if n == 0:
                same_as_dnspython(msg, 0, qname, dns.rdatatype.from_text(qtype), edns=edns)
            fh.write(struct.pack("!H", len(msg)) + msg)
    return ServerWorkload(
        zone_path=zone_path, query_path=query_path, binary_path=binary_path,
        n_names=n_names, n_queries=n_queries, mix=mix,
        samples=[(f"{_host(i)}.{ZONE_ORIGIN}", _a_of(i)) for i in (0, n_names // 2, n_names - 1)],
        nodata_name=f"{_host(0)}.{ZONE_ORIGIN}",
        nxdomain_name=f"does-not-exist-{seed}.{ZONE_ORIGIN}",
        expected_nxdomain_share=mix["NXDOMAIN"] / n_queries)


# --------------------------------------------------------------------------
# The fast-path workload: bench fastpath, sweep, responders
# --------------------------------------------------------------------------

def write_fastpath_zone(path: str, names: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w") as f:
        f.write(f"$ORIGIN {ZONE_ORIGIN}\n$TTL 3600\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n"
                "@ NS ns1\nns1 A 192.0.2.53\n")
        for i in range(names):
            # two groups: one IPv6 group holds 16 bits, and past 65,535 names i does not
            f.write(f"host{i} A 192.0.2.{i % 250 + 1}\nhost{i} AAAA 2001:db8::{i >> 16:x}:{i & 0xffff:x}\n")
            if i % 10 == 0:
                f.write(f'host{i} TXT "v={rng.getrandbits(64):x}"\n')


def fastpath_queries(names: int, count: int, seed: int) -> list[bytes]:
    """80% existing names (A, AAAA), 10% NODATA (MX), 10% NXDOMAIN; random 0x20 case. The
    random draws are those docs/PERFORMANCE.md's figures were measured with, so the same
    seed gives the same questions."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        roll = rng.random()
        host = f"host{rng.randrange(names)}.bench.example"
        if roll < 0.8:
            qtype = rng.choice(["A", "A", "A", "AAAA"])
        elif roll < 0.9:
            qtype = "MX"
        else:
            host, qtype = f"nx{rng.randrange(10**6)}.bench.example", "A"
        host = "".join(c.upper() if rng.random() < 0.5 else c for c in host)
        # the ID draws nothing from rng
        out.append(query_wire(i & 0xFFFF, host, dns.rdatatype.from_text(qtype)))
        if i == 0:
            same_as_dnspython(out[0], 0, host, dns.rdatatype.from_text(qtype))
    return out


# The answer-size workload (`bench sweep answer`): a TXT RRset per name, its answer
# (header, question, records, OPT) about a chosen size; every answer distinct.
ANSWER_FIXED = 12 + len("t000000.bench.example") + 2 + 4 + 11   # header, question, OPT
ANSWER_RECORD = 2 + 10 + 1                                      # pointer, fixed part, length


def write_answer_zone(path: str, names: int, answer_bytes: int) -> None:
    """Each name's TXT answer about answer_bytes long (at least one record of a few bytes),
    its strings at most 200 bytes each, starting with the name's number."""
    left = max(answer_bytes - ANSWER_FIXED, ANSWER_RECORD + 8)
    lengths = []
    while left >= ANSWER_RECORD + 8:
        n = min(200, left - ANSWER_RECORD)
        lengths.append(n)
        left -= n + ANSWER_RECORD
    with open(path, "w") as f:
        f.write(f"$ORIGIN {ZONE_ORIGIN}\n$TTL 3600\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n"
                "@ NS ns1\nns1 A 192.0.2.53\n")
        for i in range(names):
            for k, n in enumerate(lengths):
                f.write(f't{i:06d} TXT "{i:06d}{k:02d}{"x" * (n - 8)}"\n')


def answer_queries(names: int, count: int, seed: int) -> list[bytes]:
    """TXT at random names, random 0x20 case, with EDNS (room for the answers)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        host = "".join(c.upper() if rng.random() < 0.5 else c
                       for c in f"t{rng.randrange(names):06d}.bench.example")
        out.append(query_wire(i & 0xFFFF, host, dns.rdatatype.TXT, edns=True))
        if i == 0:
            same_as_dnspython(out[0], 0, host, dns.rdatatype.TXT, edns=True)
    return out


class CompiledWorkload:
    """A compiled zone of `names` names and its recorded queries, as payloads and frames:
    the fast-path workload, or with answer_bytes the answer-size one."""

    def __init__(self, names: int, queries: int, seed: int, tmpdir: str, answer_bytes: int = 0):
        from stormpy.dns.compiler import compile_zones
        from stormpy.dns.zone import load_zone
        self.names, self.count, self.seed = names, queries, seed
        self.zone = os.path.join(tmpdir, f"bench-{names}-{answer_bytes}.zone")
        if answer_bytes:
            write_answer_zone(self.zone, names, answer_bytes)
        else:
            write_fastpath_zone(self.zone, names, seed)
        self.table, self.stats = compile_zones([load_zone(self.zone)])
        self.queries = (answer_queries(names, queries, seed) if answer_bytes
                        else fastpath_queries(names, queries, seed))
        self.frames = [make_frame(q, source_port(i)) for i, q in enumerate(self.queries)]
        self._ref = None

    @property
    def ref(self):
        """A TableRef publishing the table in shared memory, as serve-dns places it for
        its workers (huge pages where shmem_enabled allows). Publishing hands the table
        over, so the DNS loop, which needs the unpublished table, must run first."""
        if self._ref is None:
            from stormpy.table_region import shared_table_ref
            self._ref = shared_table_ref(self.table, 1)
        return self._ref


# --------------------------------------------------------------------------
# The compile workload: bench compile
# --------------------------------------------------------------------------

def write_compile_zone(path: str, records: int) -> None:
    """Exactly `records` records: SOA, NS, glue, then names with an A and an AAAA each."""
    if records < 4:
        raise BenchError("a zone needs at least 4 records here (SOA, NS, glue, one name)")
    with open(path, "w") as f:
        f.write(f"$ORIGIN {ZONE_ORIGIN}\n$TTL 3600\n@ IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n"
                "@ IN NS ns1\nns1 IN A 192.0.2.53\n")
        for i in range(records - 3):
            n = i // 2
            if i % 2 == 0:
                f.write(f"host{n} IN A 10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}\n")
            else:
                f.write(f"host{n} IN AAAA 2001:db8::{n >> 16:x}:{n & 0xffff:x}\n")
