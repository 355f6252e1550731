"""`stormpy bench sockets`: side-by-side UDP benchmark of authoritative DNS servers on loopback.

Compares stormpy with Knot DNS and NSD using dnsperf, on 127.0.0.1 only.

What it does:

1. Generates, into a fresh temporary directory, one zone ``bench.example.``
   with N names (A on every name, about half with AAAA, a fifth with MX, a
   fifth with TXT; SOA, NS and glue at the apex) and a query file: 80 %
   existing name/type (70 % of those A), 10 % NODATA (existing name, absent
   type), 10 % NXDOMAIN.  A fixed seed makes the inputs byte-identical
   between runs.  The queries are also written in dnsperf's binary ``-B``
   format (same wire bytes, less dnsperf CPU per query).
2. For each variant, for each round, for each server (interleaved: A B C,
   A B C, ... because the machine is noisy): starts the server in the
   foreground on its own free port -- pinned1: ONE worker under
   ``taskset -c 0``; unpinned2: two workers, no taskset -- waits until it
   answers a UDP query, checks it answers correctly (NOERROR + the right A
   record for three names, NXDOMAIN, NODATA), runs a 1 s warm-up, runs
   dnsperf under ``taskset -c 1`` for ``-l`` seconds, checks it still
   answers correctly, and stops it.  A run during which other processes
   used more than ``--noise-limit`` % CPU is measured again (bounded).
3. Prints the machine, the exact command line and a markdown table: best and
   median replies/s, loss, latency, CPU use, reply size, plus stormpy's
   ratio to each peer.  ``--markdown``, ``--csv`` and ``--raw-csv`` write it
   to files too.

Reading the CPU columns: a saturated single-worker server keeps its core
near 100 % busy.  On a 2-CPU machine dnsperf on the other core costs about
as much per query as the server does, so a fast server is often *not*
saturated (the notes say so), and its replies/s is a lower bound.  The
``server CPU us/reply`` column (process CPU + softirq on its pinned core,
per reply) still compares servers fairly in that case.

dnsperf defaults ``-T 6 -c 24 -q 200 -t 1`` come from measurements on a
2-vCPU VM.  With ``-T 1 -c 4 -q 200`` dnsperf's own core saturated at
~150-175k q/s before Knot or NSD did; more dnsperf threads on the same core
cut its CPU per query (~6 -> ~4.5-5.5 us) and reach ~205-225k q/s, which
keeps NSD ~95 % busy.  More outstanding queries buy nothing once dnsperf is
the limit, and above ~250 they overflow a server socket that keeps the
default 208 KiB receive buffer (Knot does, NSD enlarges its own), so ``-q``
stays at 200, where the worst-case queue fits the default buffer and any
loss is the server's own doing.  ``-t 1``: a lost query blocks one slot for
1 s instead of dnsperf's default 5 s.

Run as root on Linux, e.g.:

    stormpy bench sockets                        # all servers, 10 s x 3 rounds
    stormpy bench sockets -l 5 --rounds 2 --servers knot,nsd
    stormpy bench sockets --variant both --markdown out.md --csv out.csv

The stormpy command is a template (``--stormpy-cmd``) with ``{python}``,
``{zone}``, ``{port}`` and ``{workers}``; it runs from the directory that holds
the stormpy package (the repository root in a checkout).
stormpy is skipped with a message when ``{python} -c 'import stormpy'`` fails.

Bounded everywhere: dnsperf gets ``-l`` and a hard timeout, readiness
polling has a deadline, rounds and retries are finite.  Every server and
dnsperf runs in its own process group and is stopped on exit, on errors,
on Ctrl-C and on SIGTERM/SIGHUP.  Exit status: 0 ok, 1 a server failed or
looked suspect, 2 usage/environment error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import random
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from stormpy.bench.common import BenchError  # one line, exit status 2

# The directory holding the stormpy package: `python -m stormpy` works from there even
# without an install.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZONE_ORIGIN = "bench.example."
ZONE_FILE_NAME = "bench.example.zone"
LOOPBACK = "127.0.0.1"

DEFAULT_STORMPY_CMD = (
    "{python} -m stormpy serve-dns {zone} --listen 127.0.0.1:{port} --workers {workers}"
)

TYPE_CODES = {"A": 1, "NS": 2, "SOA": 6, "MX": 15, "TXT": 16, "AAAA": 28, "SRV": 33, "CAA": 257}
RCODE_NAMES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


class ServerFailure(BenchError):
    """One server misbehaved (did not start, failed the sanity check, died)."""


class Interrupted(BaseException):
    """Raised from signal handlers (SIGTERM/SIGHUP) to unwind and clean up."""


# --------------------------------------------------------------------------
# Workload generation (deterministic)
# --------------------------------------------------------------------------


@dataclass
class Workload:
    zone_path: str
    query_path: str  # dnsperf text format
    binary_path: str  # the same queries in dnsperf -B format
    n_names: int
    n_queries: int
    mix: dict  # category -> count
    samples: list  # (existing name, its A address) for the sanity check
    nodata_name: str  # existing name without AAAA
    nxdomain_name: str
    expected_nxdomain_share: float


def _name(i: int) -> str:
    return f"host{i:06d}"


def _a_of(i: int) -> str:
    n = i + 1  # host000000 -> 10.0.0.1
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def _aaaa_of(i: int) -> str:
    return f"2001:db8::{(i >> 16) & 0xffff:x}:{i & 0xffff:x}"


def generate_workload(directory: str, n_names: int, n_queries: int, seed: int,
                      edns: bool = False) -> Workload:
    """Write the zone file and the dnsperf query file; return what was made."""
    if n_names < 10:
        raise BenchError("--names must be at least 10")  # samples need distinct names
    rng = random.Random(seed)
    has_aaaa = [rng.random() < 0.5 for _ in range(n_names)]
    has_mx = [rng.random() < 0.2 for _ in range(n_names)]
    has_txt = [rng.random() < 0.2 for _ in range(n_names)]
    # Make sure every category has at least one member.
    has_aaaa[1] = has_mx[2] = has_txt[3] = True
    has_aaaa[0] = False  # host000000: sample name, also used for NODATA AAAA

    lines = [
        f"$ORIGIN {ZONE_ORIGIN}",
        "$TTL 3600",
        "@\tIN\tSOA\tns1 hostmaster 2024010101 7200 3600 1209600 3600",
        "@\tIN\tNS\tns1",
        "@\tIN\tNS\tns2",
        f"ns1\tIN\tA\t{LOOPBACK}",
        "ns2\tIN\tA\t127.0.0.2",
        "mail\tIN\tA\t10.255.0.25",
        "mail\tIN\tAAAA\t2001:db8:ffff::25",
    ]
    for i in range(n_names):
        nm = _name(i)
        lines.append(f"{nm}\tIN\tA\t{_a_of(i)}")
        if has_aaaa[i]:
            lines.append(f"{nm}\tIN\tAAAA\t{_aaaa_of(i)}")
        if has_mx[i]:
            # Half point at an in-zone mail host (exercises additional-section
            # processing), half at the name itself.
            target = "mail" if i % 2 else nm
            lines.append(f"{nm}\tIN\tMX\t10 {target}")
        if has_txt[i]:
            lines.append(f'{nm}\tIN\tTXT\t"v=bench1 id={i} seed={seed}"')
    zone_path = os.path.join(directory, ZONE_FILE_NAME)
    with open(zone_path, "w", encoding="ascii") as fh:
        fh.write("\n".join(lines) + "\n")

    aaaa_names = [i for i in range(n_names) if has_aaaa[i]]
    mx_names = [i for i in range(n_names) if has_mx[i]]
    txt_names = [i for i in range(n_names) if has_txt[i]]
    no_aaaa = [i for i in range(n_names) if not has_aaaa[i]]

    queries = []
    mix = {"A": 0, "AAAA": 0, "MX": 0, "TXT": 0, "NODATA": 0, "NXDOMAIN": 0}
    for _ in range(n_queries):
        r = rng.random()
        if r < 0.80:  # existing name and type: mostly A
            t = rng.random()
            if t < 0.70:
                queries.append(f"{_name(rng.randrange(n_names))}.{ZONE_ORIGIN} A")
                mix["A"] += 1
            elif t < 0.85:
                queries.append(f"{_name(rng.choice(aaaa_names))}.{ZONE_ORIGIN} AAAA")
                mix["AAAA"] += 1
            elif t < 0.93:
                queries.append(f"{_name(rng.choice(mx_names))}.{ZONE_ORIGIN} MX")
                mix["MX"] += 1
            else:
                queries.append(f"{_name(rng.choice(txt_names))}.{ZONE_ORIGIN} TXT")
                mix["TXT"] += 1
        elif r < 0.90:  # NODATA: name exists, type does not
            if rng.random() < 0.5:
                queries.append(f"{_name(rng.choice(no_aaaa))}.{ZONE_ORIGIN} AAAA")
            else:
                queries.append(f"{_name(rng.randrange(n_names))}.{ZONE_ORIGIN} SRV")
            mix["NODATA"] += 1
        else:  # NXDOMAIN
            queries.append(f"nx{rng.randrange(10**9):09d}.{ZONE_ORIGIN} A")
            mix["NXDOMAIN"] += 1
    query_path = os.path.join(directory, "queries.txt")
    with open(query_path, "w", encoding="ascii") as fh:
        fh.write("\n".join(queries) + "\n")
    # Same queries in dnsperf's -B format (2-byte length + wire message): dnsperf
    # then skips parsing text for every query it sends, which matters because on
    # a small machine dnsperf's own CPU is the limit.  Same bytes on the wire as
    # the text mode (dnsperf sets RD and rewrites the ID in both modes).
    binary_path = os.path.join(directory, "queries.bin")
    with open(binary_path, "wb") as fh:
        for line in queries:
            qname, qtype = line.split()
            msg = build_query(0, qname, TYPE_CODES[qtype], flags=0x0100, edns=edns)
            fh.write(struct.pack("!H", len(msg)) + msg)

    return Workload(
        zone_path=zone_path,
        query_path=query_path,
        binary_path=binary_path,
        n_names=n_names,
        n_queries=n_queries,
        mix=mix,
        samples=[(f"{_name(i)}.{ZONE_ORIGIN}", _a_of(i)) for i in (0, n_names // 2, n_names - 1)],
        nodata_name=f"{_name(0)}.{ZONE_ORIGIN}",
        nxdomain_name=f"does-not-exist-{seed}.{ZONE_ORIGIN}",
        expected_nxdomain_share=mix["NXDOMAIN"] / n_queries,
    )


# --------------------------------------------------------------------------
# Minimal DNS wire helpers (sanity checks and readiness polling)
# --------------------------------------------------------------------------


def build_query(qid: int, name: str, qtype: int, flags: int = 0, edns: bool = False) -> bytes:
    header = struct.pack("!HHHHHH", qid, flags, 1, 0, 0, 1 if edns else 0)
    wire = b""
    for label in name.rstrip(".").split("."):
        raw = label.encode("ascii")
        wire += bytes([len(raw)]) + raw
    msg = header + wire + b"\x00" + struct.pack("!HH", qtype, 1)
    if edns:  # OPT RR exactly as dnsperf -e sends it: payload 4096, no flags
        msg += b"\x00" + struct.pack("!HHIH", 41, 4096, 0, 0)
    return msg


def _skip_name(msg: bytes, off: int) -> int:
    for _ in range(256):  # bounded: a name cannot have more labels
        length = msg[off]
        if length == 0:
            return off + 1
        if length & 0xC0 == 0xC0:
            return off + 2
        off += 1 + length
    raise ValueError("name too long")


@dataclass
class Reply:
    qid: int
    flags: int
    rcode: int
    answers: list  # (type, rdata bytes)
    size: int

    @property
    def qr(self) -> bool:
        return bool(self.flags & 0x8000)

    @property
    def aa(self) -> bool:
        return bool(self.flags & 0x0400)


def parse_reply(msg: bytes) -> Reply:
    qid, flags, qd, an, _ns, _ar = struct.unpack("!HHHHHH", msg[:12])
    off = 12
    for _ in range(qd):
        off = _skip_name(msg, off) + 4
    answers = []
    for _ in range(an):
        off = _skip_name(msg, off)
        rtype, _rclass, _ttl, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
        off += 10
        answers.append((rtype, msg[off:off + rdlen]))
        off += rdlen
    return Reply(qid=qid, flags=flags, rcode=flags & 0xF, answers=answers, size=len(msg))


def udp_ask(port: int, name: str, qtype: int, timeout: float = 0.5,
            host: str = LOOPBACK) -> Optional[Reply]:
    """One UDP query to host:port (default 127.0.0.1); None on timeout / unreachable."""
    qid = random.randrange(1, 65535)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.sendto(build_query(qid, name, qtype), (host, port))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:  # bounded by time
                data, _ = sock.recvfrom(65535)
                reply = parse_reply(data)
                if reply.qid == qid:
                    return reply
        except (socket.timeout, ConnectionRefusedError, OSError, ValueError, struct.error):
            return None
    return None


def _rcode(r: Reply) -> str:
    return RCODE_NAMES.get(r.rcode, str(r.rcode))


def sanity_check(port: int, wl: Workload, host: str = LOOPBACK) -> list:
    """Ask a few questions with known answers; return a list of problems."""
    problems = []
    for name, want in wl.samples:
        r = udp_ask(port, name, TYPE_CODES["A"], timeout=2.0, host=host)
        if r is None:
            problems.append(f"no reply to {name} A")
            continue
        addrs = [socket.inet_ntoa(rd) for t, rd in r.answers if t == TYPE_CODES["A"] and len(rd) == 4]
        if not r.qr:
            problems.append(f"{name} A: QR bit not set")
        if r.rcode != 0:
            problems.append(f"{name} A: rcode {_rcode(r)}, want NOERROR")
        if addrs != [want]:
            problems.append(f"{name} A: answer {addrs}, want [{want}]")
        if not r.aa:
            problems.append(f"{name} A: AA bit not set")
    r = udp_ask(port, wl.nxdomain_name, TYPE_CODES["A"], timeout=2.0, host=host)
    if r is None or r.rcode != 3 or r.answers:
        got = "no reply" if r is None else f"rcode {_rcode(r)}, {len(r.answers)} answers"
        problems.append(f"{wl.nxdomain_name} A: {got}, want NXDOMAIN")
    r = udp_ask(port, wl.nodata_name, TYPE_CODES["AAAA"], timeout=2.0, host=host)
    if r is None or r.rcode != 0 or r.answers:
        got = "no reply" if r is None else f"rcode {_rcode(r)}, {len(r.answers)} answers"
        problems.append(f"{wl.nodata_name} AAAA: {got}, want NOERROR/NODATA")
    return problems


# --------------------------------------------------------------------------
# Process management
# --------------------------------------------------------------------------

_LIVE: dict = {}  # pid -> Popen, every child we must stop on exit


def _on_signal(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


def stop_process(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """Stop a child we started (and its process group, which it leads)."""
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)  # pgid == pid: start_new_session=True
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
    # Reap anything left in its group (e.g. NSD children) with SIGKILL.
    try:
        os.killpg(proc.pid, 0)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _LIVE.pop(proc.pid, None)


def stop_all() -> None:
    for proc in list(_LIVE.values()):
        stop_process(proc, grace=3.0)


def port_is_free(port: int) -> bool:
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                return False
    return True


def pick_free_port(used: set) -> int:
    for _ in range(200):  # bounded
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((LOOPBACK, 0))
            port = s.getsockname()[1]
        if port not in used and port_is_free(port):
            used.add(port)
            return port
    raise BenchError("could not find a free UDP+TCP port on 127.0.0.1")


def _proc_children() -> dict:
    kids: dict = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rfind(b")") + 2:].split()
        kids.setdefault(int(rest[1]), []).append(int(entry))
    return kids


def tree_cpu_ticks(root: int) -> dict:
    """pid -> utime+stime (clock ticks) for root and all its descendants."""
    kids = _proc_children()
    out = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rfind(b")") + 2:].split()
        out[pid] = int(rest[11]) + int(rest[12])
        todo.extend(kids.get(pid, []))
    return out


def cpu_times() -> dict:
    """cpu index -> (busy, total, steal, task) jiffies from /proc/stat.

    task = user + nice + system: time charged to processes (softirq/irq time
    is not charged to any process when the kernel accounts it separately)."""
    out = {}
    with open("/proc/stat") as fh:
        for line in fh:
            m = re.match(r"cpu(\d+)\s+(.*)", line)
            if not m:
                continue
            v = [int(x) for x in m.group(2).split()] + [0] * 10
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            busy = user + nice + system + irq + softirq + steal
            out[int(m.group(1))] = (busy, busy + idle + iowait, steal, user + nice + system,
                                    irq + softirq)
    return out


def task_seconds(before: dict, after: dict, cpus: Optional[list] = None, idx: int = 3) -> float:
    """Seconds of task time (idx 3) or irq+softirq time (idx 4) over cpus (default all)."""
    hz = os.sysconf("SC_CLK_TCK")
    cpus = sorted(after) if cpus is None else cpus
    return sum(after[c][idx] - before[c][idx] for c in cpus if c in before and c in after) / hz


def _rmem_default() -> str:
    try:
        with open("/proc/sys/net/core/rmem_default") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def udp_rcvbuf_errors() -> int:
    """System-wide count of UDP datagrams dropped because a socket buffer was full."""
    try:
        with open("/proc/net/snmp") as fh:
            rows = [line.split() for line in fh if line.startswith("Udp:")]
        return int(rows[1][rows[0].index("RcvbufErrors")])
    except (OSError, IndexError, ValueError):
        return 0


def parse_cpu_list(spec: Optional[str]) -> list:
    """'0', '0,1', '0-3' -> [0, ...]; None/'' -> every online CPU."""
    if not spec:
        return sorted(cpu_times())
    cpus = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def busy_pct(before: dict, after: dict, cpus: list) -> tuple[float, float]:
    """Average busy % and steal % over cpus between two cpu_times() snapshots."""
    busy = total = steal = 0
    for c in cpus:
        if c in before and c in after:
            busy += after[c][0] - before[c][0]
            total += after[c][1] - before[c][1]
            steal += after[c][2] - before[c][2]
    if total <= 0:
        return 0.0, 0.0
    return 100.0 * busy / total, 100.0 * steal / total


def cpu_delta_seconds(before: dict, after: dict) -> float:
    hz = os.sysconf("SC_CLK_TCK")
    return sum(v - before.get(pid, 0) for pid, v in after.items()) / hz


# --------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------


@dataclass
class ServerSpec:
    name: str
    binary: str  # for availability checks
    version_cmd: list
    configure: Callable  # (workdir, wl, port, workers) -> (argv, cwd)
    available: Callable = None  # () -> Optional[str] reason when unavailable

    def unavailable_reason(self) -> Optional[str]:
        if self.available is not None:
            return self.available()
        if shutil.which(self.binary) is None:
            return f"{self.binary} not found in PATH"
        return None


def configure_knot(workdir: str, wl: Workload, port: int, workers: int,
                   address: str = LOOPBACK, xdp_iface: Optional[str] = None):
    """Knot on sockets at address@port; with xdp_iface, also in XDP mode on that interface."""
    os.makedirs(os.path.join(workdir, "db"), exist_ok=True)
    conf = os.path.join(workdir, "knot.conf")
    xdp = f"xdp:\n    listen: {xdp_iface}@{port}\n    udp: on\n" if xdp_iface else ""
    with open(conf, "w") as fh:
        fh.write(f"""\
# Generated by stormpy bench sockets
server:
    rundir: "{workdir}"
    pidfile: "{workdir}/knot.pid"
    listen: {address}@{port}
    udp-workers: {workers}
    tcp-workers: 1
    background-workers: 1
    # No automatic NSID/identity in replies (only sent when asked anyway).
    nsid: ""
    identity: ""
    version: ""
{xdp}control:
    listen: "{workdir}/knot.sock"
database:
    storage: "{workdir}/db"
log:
  - target: stderr
    any: warning
template:
  - id: default
    storage: "{os.path.dirname(wl.zone_path)}"
    file: "{os.path.basename(wl.zone_path)}"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
    semantic-checks: off
zone:
  - domain: {ZONE_ORIGIN}
""")
    return [shutil.which("knotd") or "knotd", "-c", conf, "-s", os.path.join(workdir, "knot.sock")], workdir


def configure_nsd(workdir: str, wl: Workload, port: int, workers: int, minimal: str = "yes",
                  address: str = LOOPBACK):
    conf = os.path.join(workdir, "nsd.conf")
    with open(conf, "w") as fh:
        fh.write(f"""\
# Generated by stormpy bench sockets
server:
    ip-address: {address}@{port}
    port: {port}
    do-ip4: yes
    do-ip6: no
    server-count: {workers}
    reuseport: {"yes" if workers > 1 else "no"}
    username: ""
    chroot: ""
    zonesdir: "{os.path.dirname(wl.zone_path)}"
    database: ""
    zonelistfile: "{workdir}/zone.list"
    xfrdfile: "{workdir}/xfrd.state"
    xfrdir: "{workdir}"
    pidfile: "{workdir}/nsd.pid"
    logfile: "{workdir}/nsd.log"
    verbosity: 0
    zonefiles-write: 0
    # NSD otherwise adds the apex NS RRset and its glue to every positive
    # answer (Knot never does); "yes" keeps the reply sizes comparable.
    minimal-responses: {minimal}
    # Debian builds NSD with --enable-ratelimit and RRL is ON by default
    # (about 200 qps per /24): every dnsperf query comes from 127.0.0.1, so it
    # must be off or NSD drops/truncates most replies.
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: {ZONE_ORIGIN}
    zonefile: "{os.path.basename(wl.zone_path)}"
""")
    return [shutil.which("nsd") or "nsd", "-d", "-c", conf], workdir


def make_stormpy_spec(args) -> ServerSpec:
    def configure(workdir, wl, port, workers):
        cmd = args.stormpy_cmd.format(
            python=shlex.quote(args.stormpy_python), zone=shlex.quote(wl.zone_path),
            port=port, workers=workers,
        )
        return shlex.split(cmd), REPO_ROOT

    def available():
        try:
            res = subprocess.run(
                [args.stormpy_python, "-c", "import stormpy"], cwd=REPO_ROOT,
                capture_output=True, text=True, timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"cannot run {args.stormpy_python}: {exc}"
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["import failed"])[-1]
            return f"`{args.stormpy_python} -c 'import stormpy'` failed ({last})"
        return None

    return ServerSpec(
        name="stormpy", binary=args.stormpy_python,
        version_cmd=[args.stormpy_python, "-c",
                     "import stormpy; print(getattr(stormpy, '__version__', 'unknown'))"],
        configure=configure, available=available,
    )


def all_specs(args) -> dict:
    return {
        "stormpy": make_stormpy_spec(args),
        "knot": ServerSpec("knot", "knotd", ["knotd", "-V"], configure_knot),
        "nsd": ServerSpec("nsd", "nsd", ["nsd", "-v"],
                          lambda d, wl, p, w: configure_nsd(d, wl, p, w, args.nsd_minimal_responses)),
    }


class RunningServer:
    """A server process we started; a context manager that always stops it."""

    def __init__(self, spec: ServerSpec, wl: Workload, workdir: str, port: int,
                 workers: int, cpus: Optional[str], start_timeout: float):
        self.spec = spec
        self.port = port
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        argv, cwd = spec.configure(workdir, wl, port, workers)
        if cpus is not None:
            argv = ["taskset", "-c", cpus] + argv
        self.argv = argv
        self.log_path = os.path.join(workdir, "server.log")
        self.start_timeout = start_timeout
        self.wl = wl
        self.proc: Optional[subprocess.Popen] = None
        self.cwd = cwd
        self.cpu_list = parse_cpu_list(cpus)
        self.pinned = cpus is not None

    def __enter__(self):
        if not port_is_free(self.port):
            raise BenchError(f"port {LOOPBACK}:{self.port} is busy (UDP or TCP); "
                             f"pick another --base-port or stop what holds it")
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                self.argv, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        except OSError as exc:
            raise ServerFailure(f"{self.spec.name}: cannot start {self.argv[0]}: {exc}") from exc
        finally:
            log.close()
        _LIVE[self.proc.pid] = self.proc
        try:
            self._wait_ready()
        except BaseException:
            stop_process(self.proc)
            raise
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            stop_process(self.proc)
        return False

    def log_tail(self, n: int = 3) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                lines = fh.read().decode("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    def _wait_ready(self):
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:  # bounded by time
            if self.proc.poll() is not None:
                raise ServerFailure(
                    f"{self.spec.name} exited with status {self.proc.returncode} during start-up: "
                    f"{self.log_tail() or '(no output)'} [log: {self.log_path}, see --keep]")
            if udp_ask(self.port, self.wl.samples[0][0], TYPE_CODES["A"], timeout=0.2) is not None:
                return
            time.sleep(0.05)
        raise ServerFailure(f"{self.spec.name} did not answer on {LOOPBACK}:{self.port} within "
                            f"{self.start_timeout:g} s: {self.log_tail() or '(no output)'} "
                            f"[log: {self.log_path}, see --keep]")


# --------------------------------------------------------------------------
# dnsperf
# --------------------------------------------------------------------------


@dataclass
class PerfResult:
    sent: int = 0
    completed: int = 0
    lost: int = 0
    lost_pct: float = 0.0
    qps: float = 0.0
    runtime: float = 0.0
    avg_latency_s: float = 0.0
    latency_sd_s: float = 0.0
    req_size: int = 0
    resp_size: int = 0
    rcodes: dict = field(default_factory=dict)
    server_cpu_pct: float = 0.0  # CPU time of the server's process tree / wall
    client_cpu_pct: float = 0.0  # CPU time of dnsperf / wall
    server_core_busy_pct: float = 0.0  # /proc/stat busy % of the server CPU set (incl. softirq)
    client_core_busy_pct: float = 0.0  # same for the dnsperf CPU set
    steal_pct: float = 0.0  # hypervisor steal over all CPUs
    server_cpu_s: float = 0.0  # CPU seconds of the server's process tree during the run
    server_softirq_s: float = 0.0  # irq+softirq seconds on the pinned server CPUs (0 if unpinned)
    client_cpu_s: float = 0.0  # CPU seconds of dnsperf
    other_cpu_pct: float = 0.0  # CPU used by processes other than server and dnsperf (noise)
    attempts: int = 1  # measurements made for this round (noise retries)
    rcvbuf_drops: int = 0  # UDP "receive buffer full" drops, system-wide, during the run
    raw: str = ""  # dnsperf output

    @property
    def us_per_reply(self) -> float:
        """Server CPU microseconds per reply: process time plus, when pinned, the
        softirq time on its CPUs (on loopback the kernel delivers each reply into
        dnsperf's socket in softirq on the server's CPU, and does not charge that
        to the process).  Unlike replies/s it does not depend on whether dnsperf
        managed to saturate the server."""
        cost = self.server_cpu_s + self.server_softirq_s
        return 1e6 * cost / self.completed if self.completed else float("nan")

    @property
    def client_us_per_query(self) -> float:
        return 1e6 * self.client_cpu_s / self.sent if self.sent else float("nan")


def _grab(pattern: str, text: str, conv=float, default=0):
    m = re.search(pattern, text)
    return conv(m.group(1)) if m else default


def parse_dnsperf(text: str) -> PerfResult:
    r = PerfResult(raw=text)
    r.sent = _grab(r"Queries sent:\s+(\d+)", text, int)
    r.completed = _grab(r"Queries completed:\s+(\d+)", text, int)
    r.lost = _grab(r"Queries lost:\s+(\d+)", text, int)
    r.lost_pct = 100.0 * r.lost / r.sent if r.sent else 0.0
    r.qps = _grab(r"Queries per second:\s+([\d.]+)", text)
    r.runtime = _grab(r"Run time \(s\):\s+([\d.]+)", text)
    r.avg_latency_s = _grab(r"Average Latency \(s\):\s+([\d.]+)", text)
    r.latency_sd_s = _grab(r"Latency StdDev \(s\):\s+([\d.]+)", text)
    r.req_size = _grab(r"Average packet size:\s+request (\d+)", text, int)
    r.resp_size = _grab(r"Average packet size:.*response (\d+)", text, int)
    m = re.search(r"Response codes:\s+(.*)", text)
    if m:
        for code, count in re.findall(r"([A-Z]+)\s+(\d+)\s+\(", m.group(1)):
            r.rcodes[code] = int(count)
    if "Queries per second" not in text:
        raise BenchError("could not parse dnsperf output: " + " | ".join(text.strip().splitlines()[-3:]))
    return r


def dnsperf_argv(args, port, seconds: float, query_path: str) -> list:
    argv = []
    if args.client_cpus:
        argv += ["taskset", "-c", args.client_cpus]
    argv += [args.dnsperf] + (["-B"] if args.input == "binary" else [])
    argv += ["-s", LOOPBACK, "-p", str(port), "-d", query_path,
             "-l", f"{seconds:g}", "-c", str(args.clients), "-q", str(args.outstanding),
             "-T", str(args.threads), "-t", f"{args.timeout:g}"]
    if args.edns and args.input == "text":  # binary queries carry their own OPT RR
        argv.append("-e")
    argv += shlex.split(args.dnsperf_extra)
    return argv


def dnsperf_display(args, query_path: str) -> str:
    return shlex.join(dnsperf_argv(args, "PORT", args.seconds, query_path))


def run_dnsperf(args, wl: Workload, server: RunningServer, seconds: float) -> PerfResult:
    qfile = wl.binary_path if args.input == "binary" else wl.query_path
    argv = dnsperf_argv(args, server.port, seconds, qfile)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0 = tree_cpu_ticks(server.proc.pid)
    st0 = cpu_times()
    drops0 = udp_rcvbuf_errors()
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
    except OSError as exc:
        raise BenchError(f"cannot run dnsperf: {exc}") from exc
    _LIVE[proc.pid] = proc
    limit = seconds + args.timeout + 30
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        stop_process(proc, grace=1.0)
        raise BenchError(f"dnsperf did not finish within {limit:.0f} s")
    except BaseException:  # Ctrl-C, SIGTERM: do not leave dnsperf running
        stop_process(proc, grace=1.0)
        raise
    _LIVE.pop(proc.pid, None)
    wall = time.monotonic() - t0
    st1 = cpu_times()
    drops1 = udp_rcvbuf_errors()
    cpu1 = tree_cpu_ticks(server.proc.pid)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise BenchError(f"dnsperf failed (status {proc.returncode}): "
                         + " | ".join(out.strip().splitlines()[-3:]))
    if server.proc.poll() is not None:
        raise ServerFailure(f"{server.spec.name} exited (status {server.proc.returncode}) during the run: "
                            f"{server.log_tail()}")
    res = parse_dnsperf(out)
    res.server_cpu_s = cpu_delta_seconds(cpu0, cpu1)
    res.server_cpu_pct = 100.0 * res.server_cpu_s / wall
    client_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    res.client_cpu_pct = 100.0 * client_cpu / wall
    res.server_core_busy_pct, _ = busy_pct(st0, st1, server.cpu_list)
    res.client_core_busy_pct, _ = busy_pct(st0, st1, parse_cpu_list(args.client_cpus))
    _, res.steal_pct = busy_pct(st0, st1, sorted(st1))
    res.client_cpu_s = client_cpu
    res.rcvbuf_drops = drops1 - drops0
    if server.pinned:
        res.server_softirq_s = task_seconds(st0, st1, server.cpu_list, idx=4)
    other = task_seconds(st0, st1) - res.server_cpu_s - client_cpu
    res.other_cpu_pct = max(0.0, 100.0 * other / wall)
    return res


def check_rcode_mix(res: PerfResult, wl: Workload) -> list:
    """A server that answers wrongly (REFUSED, SERVFAIL, no NXDOMAIN...) is flagged."""
    problems = []
    total = sum(res.rcodes.values())
    if total == 0:
        return ["no responses"]
    other = {k: v for k, v in res.rcodes.items() if k not in ("NOERROR", "NXDOMAIN")}
    if sum(other.values()) > 0.001 * total:
        problems.append("unexpected rcodes " + ", ".join(f"{k}={v}" for k, v in other.items()))
    nx = res.rcodes.get("NXDOMAIN", 0) / total
    if abs(nx - wl.expected_nxdomain_share) > 0.02:
        problems.append(f"NXDOMAIN share {nx:.1%}, expected {wl.expected_nxdomain_share:.1%}")
    return problems


# --------------------------------------------------------------------------
# Machine info and reporting
# --------------------------------------------------------------------------


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


def machine_info(args, specs: dict) -> list:
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
        ("dnsperf", _first_line([args.dnsperf, "-h"], r"Version \S+")),
        ("knotd", _first_line(["knotd", "-V"]) if shutil.which("knotd") else "not installed"),
        ("nsd", _first_line(["nsd", "-v"]) if shutil.which("nsd") else "not installed"),
    ]
    if "stormpy" in specs:
        info.append(("stormpy", _first_line(specs["stormpy"].version_cmd)))
    return info


@dataclass
class Summary:
    server: str
    variant: str
    rounds: list  # of PerfResult
    problems: list
    failed: bool = False  # the server failed later on and was dropped

    @property
    def best(self) -> PerfResult:
        return max(self.rounds, key=lambda r: r.qps)

    @property
    def median_qps(self) -> float:
        return statistics.median(r.qps for r in self.rounds)

    @property
    def median_us(self) -> float:
        return statistics.median(r.us_per_reply for r in self.rounds)


SUMMARY_COLUMNS = ["server", "variant", "replies/s best", "replies/s median", "lost % (best)",
                   "avg latency ms (best)", "server cores busy %", "server procs CPU %",
                   "server CPU us/reply", "dnsperf core busy %", "resp bytes", "rounds", "check"]


def _med(values) -> float:
    return statistics.median(list(values))


def summary_rows(summaries: list) -> list:
    rows = []
    for s in summaries:
        b = s.best
        rows.append([
            s.server, s.variant, f"{b.qps:,.0f}", f"{s.median_qps:,.0f}", f"{b.lost_pct:.3f}",
            f"{b.avg_latency_s * 1000:.3f}",
            f"{_med(r.server_core_busy_pct for r in s.rounds):.0f}" if s.variant == "pinned1" else "n/a",
            f"{_med(r.server_cpu_pct for r in s.rounds):.0f}",
            f"{s.median_us:.2f}",
            f"{_med(r.client_core_busy_pct for r in s.rounds):.0f}",
            str(b.resp_size), str(len(s.rounds)),
            "FAILED" if s.failed else ("SUSPECT" if s.problems else "ok"),
        ])
    return rows


def markdown_table(header: list, rows: list) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


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


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
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


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Benchmark stormpy vs Knot DNS vs NSD over UDP on 127.0.0.1 with dnsperf.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_arguments(p)
    return p.parse_args(argv)


def preflight(args) -> None:
    if not sys.platform.startswith("linux"):
        raise BenchError("Linux only (uses /proc and taskset)")
    if shutil.which(args.dnsperf) is None:
        raise BenchError(f"dnsperf not found ({args.dnsperf!r}); install it: apt-get install dnsperf")
    if shutil.which("taskset") is None and (args.client_cpus or args.variant != "unpinned2"):
        raise BenchError("taskset not found; install util-linux")
    online = set(cpu_times())
    for opt, spec in (("--server-cpus", args.server_cpus), ("--client-cpus", args.client_cpus)):
        if not spec:
            continue
        try:
            cpus = parse_cpu_list(spec)
        except ValueError:
            raise BenchError(f"{opt} {spec!r} is not a CPU list like 0 or 0,1 or 0-3") from None
        if not cpus or not set(cpus) <= online:
            raise BenchError(f"{opt} {spec!r} names CPUs that are not online (online: "
                             f"{','.join(map(str, sorted(online)))})")
    if args.client_cpus and args.variant != "unpinned2" and (
            set(parse_cpu_list(args.server_cpus)) & set(parse_cpu_list(args.client_cpus))):
        print("warning: server and dnsperf share CPUs; the comparison measures both",
              file=sys.stderr)
    if os.geteuid() != 0:
        print("warning: not running as root; NSD/Knot may fail to start", file=sys.stderr)
    ncpu = os.cpu_count() or 1
    if ncpu < 2:
        print("warning: fewer than 2 CPUs; server and dnsperf will share a core", file=sys.stderr)
    if args.seconds <= 0 or args.seconds > 3600:
        raise BenchError("-l must be in (0, 3600] seconds")
    if args.rounds < 1 or args.rounds > 100:
        raise BenchError("--rounds must be in 1..100")
    try:
        args.stormpy_cmd.format(python="python", zone="zone", port=53, workers=1)
    except (KeyError, IndexError, ValueError) as exc:
        raise BenchError(f"--stormpy-cmd: bad template ({exc!r}); use {{python}} {{zone}} "
                         f"{{port}} {{workers}}") from None
    if not 10 <= args.names <= 1_000_000:
        raise BenchError("--names must be in 10..1000000")
    if not 1 <= args.queries <= 10_000_000:
        raise BenchError("--queries must be in 1..10000000")
    if args.base_port and not 1024 <= args.base_port <= 65535 - 3:
        raise BenchError("--base-port must be in 1024..65532")
    if args.threads < 1 or args.clients < args.threads or args.outstanding < 1:
        raise BenchError("need -T >= 1, -c >= -T and -q >= 1")
    if not 0 < args.start_timeout <= 600 or not 0 < args.timeout <= 60:
        raise BenchError("--start-timeout must be in (0, 600] and --timeout in (0, 60]")
    if args.noise_retries < 0 or args.noise_retries > 10:
        raise BenchError("--noise-retries must be in 0..10")
    if args.warmup < 0 or args.warmup > 60:
        raise BenchError("--warmup must be in 0..60 seconds")


def _run_one(args, spec: ServerSpec, wl: Workload, workdir: str, port: int, workers: int,
             cpus: Optional[str]) -> PerfResult:
    with RunningServer(spec, wl, workdir, port, workers, cpus, args.start_timeout) as srv:
        bad = sanity_check(srv.port, wl)
        if bad:
            raise ServerFailure(f"{spec.name} fails the sanity check: {'; '.join(bad)}")
        if args.warmup > 0:
            run_dnsperf(args, wl, srv, args.warmup)
        best: Optional[PerfResult] = None
        for attempt in range(1 + args.noise_retries):  # bounded
            res = run_dnsperf(args, wl, srv, args.seconds)
            res.attempts = attempt + 1
            if best is None or res.other_cpu_pct < best.other_cpu_pct:
                best = res
            if res.other_cpu_pct <= args.noise_limit:
                break
            print(f"    {spec.name}: other processes used {res.other_cpu_pct:.0f}% CPU during the run "
                  f"(limit {args.noise_limit:g}%), "
                  + ("measuring again" if attempt < args.noise_retries else "keeping the quietest run"),
                  flush=True)
        bad = sanity_check(srv.port, wl)  # still answering correctly after the load?
        if bad:
            raise ServerFailure(f"{spec.name} fails the sanity check after the run: {'; '.join(bad)}")
        return best


def main(argv=None) -> int:
    return main_args(parse_args(argv))


def main_args(args) -> int:
    preflight(args)
    specs = all_specs(args)
    wanted = [s.strip() for s in args.servers.split(",") if s.strip()]
    for w in wanted:
        if w not in specs:
            raise BenchError(f"unknown server {w!r} (known: {', '.join(specs)})")
    if len(set(wanted)) != len(wanted):
        raise BenchError("--servers lists a server twice")
    active = []
    notes = []
    for w in wanted:
        reason = specs[w].unavailable_reason()
        if reason:
            print(f"skipping {w}: {reason}", file=sys.stderr, flush=True)
            notes.append(f"- {w} not measured: {reason}")
        else:
            active.append(specs[w])
    if not active:
        raise BenchError("no server available to benchmark")

    variants = {"pinned1": [("pinned1", 1, args.server_cpus)],
                "unpinned2": [("unpinned2", 2, None)],
                "both": [("pinned1", 1, args.server_cpus), ("unpinned2", 2, None)]}[args.variant]

    header = [f"- {k}: {v}" for k, v in machine_info(args, {s.name: s for s in active})]
    tmp = tempfile.mkdtemp(prefix="stormpy-bench-")
    results: dict = {}  # (server, variant) -> list[PerfResult]
    problems: dict = {}  # (server, variant) -> list[str]
    failed: dict = {}  # server -> error message; not run again
    raw_rows = []
    try:
        wl = generate_workload(tmp, args.names, args.queries, args.seed, args.edns)
        header += [
            f"- workload: zone {ZONE_ORIGIN} with {wl.n_names} names, {wl.n_queries} queries "
            f"(seed {args.seed}): " + ", ".join(f"{k} {100.0 * v / wl.n_queries:.1f}%"
                                                for k, v in wl.mix.items()),
            f"- dnsperf: {dnsperf_display(args, 'QUERIES')}  (QUERIES: the query file in "
            + ("dnsperf binary -B format" if args.input == "binary" else "text format")
            + (", with an EDNS0 OPT record, payload 4096" if args.edns else ", no EDNS") + ")",
            f"- servers: " + ", ".join(s.name for s in active)
            + f"; variants: " + ", ".join(
                f"{v} ({w} worker{'s' if w > 1 else ''}, "
                + (f"taskset -c {c}" if c is not None else "unpinned") + ")" for v, w, c in variants)
            + f"; {args.rounds} rounds of {args.seconds:g} s (+{args.warmup:g} s warm-up), interleaved",
            f"- NSD minimal-responses: {args.nsd_minimal_responses}",
        ]
        print("# DNS socket peers benchmark\n")
        print("\n".join(header))
        print(f"- temp dir: {tmp}{' (kept)' if args.keep else ''}\n", flush=True)

        used_ports: set = set()
        ports = {}
        for i, spec in enumerate(active):
            ports[spec.name] = args.base_port + i if args.base_port else pick_free_port(used_ports)

        for variant, workers, cpus in variants:
            for rnd in range(1, args.rounds + 1):
                for spec in active:
                    if spec.name in failed:
                        continue
                    workdir = os.path.join(tmp, f"{spec.name}-{variant}-r{rnd}")
                    tag = f"[{variant} round {rnd}/{args.rounds}] {spec.name:8s}"
                    try:
                        res = _run_one(args, spec, wl, workdir, ports[spec.name], workers, cpus)
                    except ServerFailure as exc:
                        failed[spec.name] = str(exc)
                        print(f"{tag} error: {exc}", file=sys.stderr, flush=True)
                        continue
                    mix_problems = check_rcode_mix(res, wl)
                    if mix_problems:
                        problems.setdefault((spec.name, variant), []).extend(mix_problems)
                    results.setdefault((spec.name, variant), []).append(res)
                    raw_rows.append([spec.name, variant, rnd, f"{res.qps:.1f}", res.sent, res.completed,
                                     res.lost, f"{res.avg_latency_s * 1000:.4f}",
                                     f"{res.latency_sd_s * 1000:.4f}", res.req_size, res.resp_size,
                                     f"{res.server_core_busy_pct:.1f}", f"{res.server_cpu_pct:.1f}",
                                     f"{res.client_core_busy_pct:.1f}", f"{res.client_cpu_pct:.1f}",
                                     f"{res.steal_pct:.1f}", f"{res.other_cpu_pct:.1f}",
                                     f"{res.us_per_reply:.3f}", f"{res.client_us_per_query:.3f}",
                                     res.rcvbuf_drops, res.attempts,
                                     " ".join(f"{k}={v}" for k, v in res.rcodes.items())])
                    flag = f"  SUSPECT: {'; '.join(mix_problems)}" if mix_problems else ""
                    if res.rcvbuf_drops:
                        flag = f"  rcvbuf drops {res.rcvbuf_drops:,}" + flag
                    print(f"{tag} {res.qps:10,.0f} replies/s  lost {res.lost_pct:.3f}%  "
                          f"lat {res.avg_latency_s * 1000:.3f} ms  server "
                          + (f"cores {res.server_core_busy_pct:.0f}% " if cpus is not None else "")
                          + f"(procs {res.server_cpu_pct:.0f}%, {res.us_per_reply:.2f} us/reply)  dnsperf core {res.client_core_busy_pct:.0f}% "
                          f"(proc {res.client_cpu_pct:.0f}%)  others {res.other_cpu_pct:.0f}%  resp {res.resp_size} B{flag}", flush=True)
                    if args.verbose:
                        print(res.raw)
    finally:
        stop_all()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    summaries = [Summary(name, variant, rs, problems.get((name, variant), []), name in failed)
                 for (name, variant), rs in results.items()]
    table = markdown_table(SUMMARY_COLUMNS, summary_rows(summaries))
    ratios = ratio_lines(summaries)
    for name, msg in failed.items():
        notes.append(f"- {name} FAILED and was dropped: {msg}")
    for s in summaries:
        if s.problems:
            notes.append(f"- {s.server} ({s.variant}) SUSPECT: {'; '.join(sorted(set(s.problems)))}")
        busy = _med(r.server_core_busy_pct for r in s.rounds)
        if s.variant == "pinned1" and busy < 90:
            notes.append(f"- {s.server}: its core was only {busy:.0f}% busy, so dnsperf (not the "
                         f"server) limited it; treat {s.best.qps:,.0f}/s as a lower bound")
        noisy = [r for r in s.rounds if r.other_cpu_pct > args.noise_limit]
        if noisy:
            notes.append(f"- {s.server} ({s.variant}): in {len(noisy)} of {len(s.rounds)} rounds other "
                         f"processes used >{args.noise_limit:g}% CPU (up to {max(r.other_cpu_pct for r in noisy):.0f}%); "
                         f"the machine was noisy, trust 'best' more than 'median'")
        drops = max(r.rcvbuf_drops for r in s.rounds)
        if drops:
            notes.append(f"- {s.server} ({s.variant}): up to {drops:,} UDP datagrams dropped in a run "
                         f"because a socket receive buffer was full (the server's, most likely: "
                         f"many servers keep the {_rmem_default()}-byte default); lower -q to avoid it")
        steal = max(r.steal_pct for r in s.rounds)
        if steal > 5:
            notes.append(f"- {s.server} ({s.variant}): up to {steal:.0f}% CPU steal by the hypervisor")
    if "stormpy" in [s.name for s in active] and not ratios:
        notes.append("- no stormpy ratio: stormpy or every peer has no result")

    report = ["## Results", "", table, ""]
    if ratios:
        report += ["stormpy ratio:", ""] + ratios + [""]
    if notes:
        report += ["Notes:", ""] + notes + [""]
    report += ["best = highest replies/s over the rounds; lost % and latency are from that round. "
               "CPU columns are medians over the rounds, 100 = one core: 'cores busy' is /proc/stat "
               "busy time (incl. softirq) of the CPUs the server is pinned to (n/a when "
               "unpinned), 'procs' is the server's own process-tree CPU time, and 'us/reply' is that "
               "CPU time plus the softirq time on its pinned CPUs, divided by replies (median), "
               "which stays meaningful when dnsperf, not the server, is the bottleneck.", ""]
    print("\n".join(report), flush=True)

    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write("# DNS socket peers benchmark\n\n" + "\n".join(header) + "\n\n"
                     + "\n".join(report))
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(SUMMARY_COLUMNS)
            for row in summary_rows(summaries):
                w.writerow([c.replace(",", "") for c in row])
    if args.raw_csv:
        with open(args.raw_csv, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["server", "variant", "round", "qps", "sent", "completed", "lost",
                        "avg_latency_ms", "latency_sd_ms", "req_bytes", "resp_bytes",
                        "server_cores_busy_pct", "server_procs_cpu_pct", "dnsperf_core_busy_pct",
                        "dnsperf_proc_cpu_pct", "steal_pct", "other_procs_cpu_pct",
                        "server_cpu_us_per_reply", "dnsperf_cpu_us_per_query", "udp_rcvbuf_drops",
                        "attempts", "rcodes"])
            w.writerows(raw_rows)
    return 1 if failed or any(s.problems for s in summaries) else 0


def run_from_args(args) -> int:
    """Run with parsed arguments: every server stops on exit, error, Ctrl-C, SIGTERM or
    SIGHUP. BenchError propagates (the caller prints it as one line)."""
    old = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    # Also when started from a script with SIGINT ignored (e.g. "cmd &"), so
    # that Ctrl-C / kill -INT always stops every server cleanly.
    old[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return main_args(args)
    except (KeyboardInterrupt, Interrupted):
        print("error: interrupted; all servers stopped", file=sys.stderr)
        return 130
    finally:
        stop_all()
        for sig, handler in old.items():
            signal.signal(sig, handler)


def entry(argv=None) -> int:
    try:
        return run_from_args(parse_args(argv))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(entry())
