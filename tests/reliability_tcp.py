"""`reliability.py tcp-abuse`: DNS over TCP under abuse, the same for stormpy, Knot and NSD.

    .venv/bin/python tests/reliability.py tcp-abuse [--server stormpy,knot,nsd] [--seconds 30] [--after 60]
        [--idle 5000] [--chatty 500] [--non-reading 400] [--slow-loris 200] [--stormpy-arg=ARG ...]

Three namespaces on one bridge: the server (198.18.10.1, port 53), an attacker holding 16
addresses (198.18.10.16-31) and a real client (198.18.10.2). For --seconds the attacker
(tests/ns_tcp_abuse.py attack) keeps its idle, chatty, non-reading and slow-loris
connections open, reopening what the server cuts, while the client (ns_tcp_abuse.py
client) asks every 20 ms, UDP and TCP in turn. The server's memory (Pss of its process
and all its descendants) is sampled at idle, during the abuse, and for --after seconds
after it. Prints one Markdown table row and one JSON line; exits 1 when the client got
under 99% of its answers on either protocol, memory did not come back within 10% of
idle, or the server no longer answers.

Each server runs with its defaults, as its packaging starts it: stormpy and NSD with the
open-file limit systemd gives a service (1024, hard 524288), Knot with its unit's
LimitNOFILE=1048576 (its tcp-max-clients default is half of it); a hard limit this
process may not raise caps them (the JSON line says what each server had).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import dns.zone

from stormpy.bench.servers import write_knot_config
from stormpy.bench.netns import _sh as sh
from stormpy.bench.processes import stop_process
from support.netns import VethPair
from support.process import process_tree, pss_kib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ZONE = os.path.join(REPO, "zones", "example.zone")
LOAD = os.path.join(HERE, "ns_tcp_abuse.py")
SERVER, CLIENT, PORT = "198.18.10.1", "198.18.10.2", 53
ATTACKERS = [f"198.18.10.{16 + i}" for i in range(16)]
CLIENT_INTERVAL = 0.02
SYSTEMD_NOFILE = (1024, 524288)     # a systemd service that sets no LimitNOFILE
MIN_ANSWERED = 99.0                 # percent of the real client's questions, each protocol
MEMORY_SLACK = 1.10                 # memory after the abuse against idle


class AbuseNet(VethPair):
    """The server and client namespaces of a VethPair, and an attacker's, all on a bridge
    in the server namespace; created on entry, removed on exit (also after an error)."""

    def __init__(self):
        super().__init__()
        self.attacker = self.server.replace("-srv-", "-atk-")

    def __enter__(self):
        try:
            for ns in (self.server, self.attacker, self.client):
                sh("ip", "netns", "add", ns)
                sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", self.server, "link", "add", "br0", "type", "bridge")
            sh("ip", "-n", self.server, "addr", "add", f"{SERVER}/24", "dev", "br0")
            sh("ip", "-n", self.server, "link", "set", "br0", "up")
            for ns, port, addrs in ((self.attacker, "to-atk", ATTACKERS), (self.client, "to-cli", [CLIENT])):
                sh("ip", "-n", self.server, "link", "add", port, "type", "veth", "peer", "name", "veth0",
                   "netns", ns)
                sh("ip", "-n", self.server, "link", "set", port, "master", "br0", "up")
                for addr in addrs:
                    sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "veth0")
                sh("ip", "-n", ns, "link", "set", "veth0", "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for ns in (self.server, self.attacker, self.client):
            sh("ip", "netns", "del", ns, check=False)


def stormpy_command(workdir, zone, stormpy_args):
    return ([sys.executable, "-m", "stormpy", "serve-dns", zone, "--listen", f"{SERVER}:{PORT}",
             *stormpy_args], SYSTEMD_NOFILE)


def knot_command(workdir, zone, _):
    knotd = shutil.which("knotd") or shutil.which("knotd", path="/usr/sbin:/usr/local/sbin")
    if knotd is None:
        raise RuntimeError("knotd is not installed: apt-get install knot")
    conf = {"server": {"rundir": workdir, "pidfile": f"{workdir}/knot.pid", "listen": f"{SERVER}@{PORT}"},
            "control": {"listen": f"{workdir}/knot.sock"},
            "database": {"storage": workdir},
            "log": [{"target": "stderr", "any": "notice"}],
            "template": [{"id": "default", "storage": workdir, "file": zone,
                          "zonefile-sync": -1, "journal-content": "none"}],
            "zone": [{"domain": "example.com"}]}
    path = os.path.join(workdir, "knot.conf")
    write_knot_config(path, conf, "stormpy reliability tcp-abuse")
    return [knotd, "-c", path], (1048576, 1048576)


def nsd_path():
    found = shutil.which("nsd") or shutil.which("nsd", path="/usr/sbin")
    if found is None and shutil.which("apt-get"):
        print("reliability: installing nsd (Debian's package also enables its own nsd.service)", file=sys.stderr)
        subprocess.run("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nsd",
                       shell=True, capture_output=True, timeout=600)
        found = shutil.which("nsd", path="/usr/sbin")
    return found


def nsd_command(workdir, zone, _):
    nsd = nsd_path()
    if nsd is None:
        raise RuntimeError("nsd is not installed and could not be: apt-get install nsd")
    # Debian's nsd.conf sets only log-only-syslog; its compiled-in paths are moved into
    # workdir and it runs as root rather than as `nsd`; everything else is its default
    conf = os.path.join(workdir, "nsd.conf")
    with open(conf, "w") as f:
        f.write(f"""server:
    ip-address: {SERVER}
    port: {PORT}
    username: ""
    database: "{workdir}/nsd.db"
    zonelistfile: "{workdir}/zone.list"
    xfrdfile: "{workdir}/xfrd.state"
    xfrdir: "{workdir}"
    pidfile: "{workdir}/nsd.pid"
    logfile: "{workdir}/nsd.log"
zone:
    name: example.com
    zonefile: "{zone}"
""")
    return [nsd, "-d", "-c", conf], SYSTEMD_NOFILE


def zone_for_all(workdir):
    """zones/example.zone with its $GENERATE expanded (Knot reads no $GENERATE): one file
    that all three servers load."""
    path = os.path.join(workdir, "example.zone")
    with open(path, "w") as f:
        f.write(dns.zone.from_file(ZONE, relativize=True).to_text(want_origin=True))
    return path


SERVERS = {"stormpy": stormpy_command, "knot": knot_command, "nsd": nsd_command}


def open_file_limit(wanted):
    """The server's RLIMIT_NOFILE: as its packaging sets it, or as near as this process may
    (without CAP_SYS_RESOURCE the hard limit cannot rise)."""
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, wanted)
    except (ValueError, OSError):
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted[0], hard), min(wanted[1], hard)))


def start_server(net, argv, nofile, log):
    env = dict(os.environ, PYTHONPATH=REPO, PYTHONUNBUFFERED="1")
    return subprocess.Popen(["ip", "netns", "exec", net.server, *argv], cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=lambda: open_file_limit(nofile))


def open_files_of(pid):
    """The soft and hard open-file limits a process runs with, from /proc."""
    with open(f"/proc/{pid}/limits") as f:
        line = next(line for line in f if line.startswith("Max open files"))
    return [int(v) if v.isdigit() else v for v in line.split()[3:5]]


def answers(net, tcp):
    """Whether the server answers www.example.com A from the client namespace."""
    got = net.query([["www.example.com", "A"]], server=SERVER, port=PORT, tcp=tcp, timeout=1.0)[0]
    return got is not None and got["answer"] == ["192.0.2.80"]


def wait_ready(net, proc, log):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if answers(net, tcp=False) and answers(net, tcp=True):
            return
        time.sleep(0.2)
    log.seek(0)
    said = " ".join(log.read()[-1000:].split())
    raise RuntimeError(f"the server {'exited' if proc.poll() is not None else 'did not answer within 30 s'}"
                       f"; it said: {said}")


def processes_pss(pid):
    """Each process of the server's tree as "name pid": its Pss in MiB (which one grew)."""
    out = {}
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/comm") as f:
                out[f"{f.read().strip()} {p}"] = mib(pss_kib([p]))
        except OSError:
            pass
    return out


def mib(kib):
    return round(kib / 1024, 1)


def run_load(net, seconds, counts, sample):
    """The attacker and the real client for `seconds`, calling sample() twice a second
    meanwhile; returns (attack, client) as they reported them."""
    env = dict(os.environ, PYTHONPATH=HERE)
    sides = [(net.attacker, ["attack", SERVER, str(PORT), ",".join(ATTACKERS), str(seconds),
                             ",".join(str(n) for n in counts)]),
             (net.client, ["client", SERVER, str(PORT), str(seconds), str(CLIENT_INTERVAL)])]
    procs = [subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, LOAD, *args], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for ns, args in sides]
    try:
        deadline = time.monotonic() + seconds + 60
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            sample()
            time.sleep(0.5)
        results = []
        for p in procs:
            out, err = p.communicate(timeout=5)
            if p.returncode != 0:
                raise RuntimeError(f"{LOAD} failed: {err.strip()[-2000:]}")
            results.append(json.loads(out))
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)


def abuse_run(server, seconds, after, counts, stormpy_args=()):
    """One run against `server`; returns its figures (see report())."""
    with AbuseNet() as net, tempfile.TemporaryDirectory(prefix="tcp-abuse-") as workdir:
        argv, nofile = SERVERS[server](workdir, zone_for_all(workdir), stormpy_args)
        log = tempfile.TemporaryFile(mode="w+")
        proc = start_server(net, argv, nofile, log)
        try:
            wait_ready(net, proc, log)
            nofile = open_files_of(proc.pid)
            pss = lambda: pss_kib(process_tree(proc.pid))  # noqa: E731
            idle = []
            for _ in range(5):
                idle.append(pss())
                time.sleep(0.5)
            by_process = {"idle": processes_pss(proc.pid)}
            during = []
            attack, client = run_load(net, seconds, counts, lambda: during.append(pss()))
            later = []
            for _ in range(int(after)):
                time.sleep(1.0)
                later.append(pss())
            by_process["after"] = processes_pss(proc.pid)
            # asked as a resolver does: again when a try gets nothing
            alive = proc.poll() is None and all(any(answers(net, tcp) for _ in range(3))
                                                for tcp in (False, True))
        finally:
            stop_process(proc, grace=20)
            log.seek(0)
            server_log = log.read()
            log.close()
    return {"server": server, "seconds": seconds, "after": after, "counts": counts,
            "stormpy_args": list(stormpy_args), "client": client, "attack": attack, "alive": alive,
            "open_files_limit": nofile,
            "pss_mib": {"idle": mib(statistics.median(idle)), "peak": mib(max(during + idle)),
                        "after": mib(later[-1]) if later else None,
                        "after_series": [mib(k) for k in later[::10]],
                        "by_process": by_process},
            "server_log_tail": server_log[-1500:]}


def answered_percent(side):
    return 100.0 * side["answered"] / side["asked"] if side["asked"] else 0.0


def verdict(result):
    """The list of what failed; empty when the run passed."""
    failed = [f"{proto.upper()} {answered_percent(result['client'][proto]):.1f}% < {MIN_ANSWERED:g}%"
              for proto in ("udp", "tcp") if answered_percent(result["client"][proto]) < MIN_ANSWERED]
    mem = result["pss_mib"]
    if mem["after"] is not None and mem["after"] > MEMORY_SLACK * mem["idle"]:
        failed.append(f"memory {mem['after']} MiB > idle {mem['idle']} MiB + 10%")
    if not result["alive"]:
        failed.append("server no longer answers")
    return failed


HEADER = ("| server | real client UDP answered | TCP answered (refused / closed / timed out) | "
          "latency p50 / p99 UDP; TCP (ms) | abuse open at end: idle / chatty / non-reading / slow-loris | "
          "cut by the server, count (median after): idle / chatty / non-reading / slow-loris | "
          "chatty answers / questions | Pss idle → peak → after (MiB) | verdict |\n"
          "|---|---|---|---|---|---|---|---|---|")


def duration(seconds):
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def row(result):
    c, a, mem = result["client"], result["attack"], result["pss_mib"]
    lat = lambda p, k: f"{c[p]['latency_ms'][k]:.1f}" if c[p]["latency_ms"] else "-"  # noqa: E731
    cut = lambda k: f"{a[k]['cut']:,} ({duration(a[k]['cut_after_median'])})" if a[k]["cut"] else "0"  # noqa: E731
    after = f"{mem['after']} (+{result['after']} s)" if mem["after"] is not None else "not measured"
    held = " / ".join(f"{a[k]['open_at_end']:,}" for k in ("idle", "chatty", "nonread", "loris"))
    failed = verdict(result)
    return (f"| {result['server']} | {c['udp']['answered']:,} / {c['udp']['asked']:,} "
            f"({answered_percent(c['udp']):.1f}%) | {c['tcp']['answered']:,} / {c['tcp']['asked']:,} "
            f"({answered_percent(c['tcp']):.1f}%; {c['tcp']['refused']} / {c['tcp']['closed']} / "
            f"{c['tcp']['timed_out']}) | {lat('udp', 'p50')} / {lat('udp', 'p99')}; "
            f"{lat('tcp', 'p50')} / {lat('tcp', 'p99')} | "
            f"{held} | "
            f"{' / '.join(cut(k) for k in ('idle', 'chatty', 'nonread', 'loris'))} | "
            f"{a['chatty']['answers']:,} / {a['chatty']['queries']:,} | "
            f"{mem['idle']} → {mem['peak']} → {after} | {'; '.join(failed) if failed else 'pass'} |")


def server_list(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SERVERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown server {', '.join(unknown) or text!r} "
                                         f"(known: {', '.join(SERVERS)})")
    return names


def add_parser(sub):
    t = sub.add_parser("tcp-abuse", help="DNS over TCP under abuse (stormpy, Knot or NSD)")
    t.add_argument("--server", type=server_list, default=["stormpy"], metavar="stormpy,knot,nsd",
                   help="the server, or a comma-separated list run one after another (one table)")
    t.add_argument("--seconds", type=int, default=30, help="how long the abuse lasts")
    t.add_argument("--after", type=int, default=60, help="seconds of memory samples after it")
    t.add_argument("--idle", type=int, default=5000, help="connections that send nothing")
    t.add_argument("--chatty", type=int, default=500, help="connections asking every 1-5 s")
    t.add_argument("--non-reading", type=int, default=400, help="connections that write and never read")
    t.add_argument("--slow-loris", type=int, default=200, help="connections sending a byte a second")
    t.add_argument("--stormpy-arg", action="append", default=[], metavar="ARG",
                   help="one more serve-dns argument (repeat it), e.g. --stormpy-arg=--workers=1")


def tcp_abuse(args):
    # a SIGTERM (timeout, Ctrl-C's cousin) unwinds too: namespaces and servers removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("reliability: terminated"))
    counts = [args.idle, args.chatty, args.non_reading, args.slow_loris]
    print(HEADER, flush=True)
    failed = False
    for server in args.server:
        try:
            result = abuse_run(server, args.seconds, args.after, counts, args.stormpy_arg)
        except RuntimeError as e:
            sys.exit(f"reliability: {server}: {e}")
        print(row(result))
        print(json.dumps(result), flush=True)
        failed = failed or bool(verdict(result))
    if failed:
        sys.exit(1)
