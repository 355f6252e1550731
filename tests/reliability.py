"""Scripted fault and overload runs for docs/RELIABILITY.md (bounded in time; root).

    python3 tests/reliability.py overload [--seconds 60] [--backend xdp|packet]
    python3 tests/reliability.py reload   [--seconds 30] [--interval 0.5]
    python3 tests/reliability.py kill     [--kills 10]
    python3 tests/reliability.py tcp-abuse --server stormpy|knot|nsd [--seconds 30] [--after 60]

overload: serve-dns on a veth (AF_XDP by default) in a network namespace, its CPU
  capped by a cgroup quota so that kxdpgun on the other core can offer twice what
  it answers; first its capacity, then twice that for --seconds, sampling replies
  per second and the memory of every stormpy process (Pss) once a second.
reload: the socket backend on loopback under dnsperf at a fixed rate, the zone
  flipping between two versions and SIGHUP every --interval seconds; a checking
  client asks meanwhile and every answer must be one version's. Lost queries are
  compared with the same load without reloads.
kill: the same load, a worker killed with SIGKILL every 2 s; how long until its
  replacement serves, and the queries lost, against the same load without kills.

tcp-abuse: idle, chatty, non-reading and slow-loris TCP connections while a real client
  asks over UDP and TCP; the same for stormpy, Knot and NSD (tests/reliability_tcp.py).

Each prints a Markdown table. Namespaces and addresses as in tests/support/netns.py.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import dns.message  # noqa: E402

from support.netns import SERVER_V4, NsServer, VethPair  # noqa: E402
from support.process import pss_kib  # noqa: E402
import reliability_tcp  # noqa: E402

ZONE = os.path.join(REPO, "zones", "example.zone")
QUERIES = ["www.example.com A", "h1.example.com A", "h2.example.com AAAA", "example.com MX",
           "nothere.example.com A", "x.apps.example.com A"]


def snapshot(control):
    r = subprocess.run([sys.executable, "-m", "stormpy", "stats", "--control", control, "--json"],
                       cwd=REPO, capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout) if r.returncode == 0 else None


def total(snap, key):
    return sum(w[key] for w in snap["workers"])


@contextmanager
def cpu_quota(percent):
    """A cgroup whose processes get `percent` of one CPU (v2 cpu.max or v1 cfs quota);
    yields the cgroup.procs path to write a pid into."""
    name = f"stormpy-reliability-{os.getpid()}"
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        path = f"/sys/fs/cgroup/{name}"
        with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
            f.write("+cpu")
        os.mkdir(path)
        with open(f"{path}/cpu.max", "w") as f:
            f.write(f"{percent * 1000} 100000")
    else:
        path = f"/sys/fs/cgroup/cpu/{name}"
        os.mkdir(path)
        with open(f"{path}/cpu.cfs_period_us", "w") as f:
            f.write("100000")
        with open(f"{path}/cpu.cfs_quota_us", "w") as f:
            f.write(str(percent * 1000))
    try:
        yield f"{path}/cgroup.procs"
    finally:
        for _ in range(50):
            try:
                os.rmdir(path)
                break
            except OSError:
                time.sleep(0.1)


def kxdpgun(pair, qfile, seconds, qps):
    r = pair.run(pair.client, "kxdpgun", "-t", str(seconds), "-Q", str(qps), "-F", "0",
                 "-i", qfile, SERVER_V4, timeout=seconds + 60)
    sent = int(re.search(r"total queries:\s+(\d+)", r.stdout).group(1))
    got = int(re.search(r"total replies:\s+(\d+)", r.stdout).group(1))
    return sent / seconds, got / seconds


def overload(args):
    qfile = tempfile.mktemp(suffix=".txt")
    with open(qfile, "w") as f:
        f.write("\n".join(QUERIES) + "\n")
    control = tempfile.mktemp(suffix=".sock")
    with cpu_quota(args.quota) as procs, VethPair() as pair:
        server = NsServer(pair, [ZONE, "--iface", "veth0", "--backend", args.backend, "--cpus", "1",
                                 "--control", control])
        server.prefix = ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh"]
        with server:
            snap = snapshot(control)
            pids = [snap["pid"]] + [w["pid"] for w in snap["workers"]]
            # capacity from the server's own count: a generator sending flat out
            # misses some of the replies it gets back
            tx0, t0 = total(snapshot(control), "tx"), time.monotonic()
            kxdpgun(pair, qfile, 5, 5_000_000)
            capacity = (total(snapshot(control), "tx") - tx0) / (time.monotonic() - t0)
            target = int(2 * capacity)
            samples, memory = [], []
            load = threading.Thread(target=lambda: samples.append(kxdpgun(pair, qfile, args.seconds, target)))
            before = total(snapshot(control), "tx")
            load.start()
            per_second = []
            last, t0 = before, time.monotonic()
            while load.is_alive():
                time.sleep(1.0)
                snap = snapshot(control)
                now = total(snap, "tx")
                per_second.append((now - last) / (time.monotonic() - t0))
                last, t0 = now, time.monotonic()
                memory.append(pss_kib([snap["pid"]] + [w["pid"] for w in snap["workers"]]))
            load.join()
            served = (total(snapshot(control), "tx") - before) / args.seconds
            after = pair.query([["www.example.com", "A"]])[0]
            alive = server.proc.poll() is None and after is not None and after["answer"] == ["192.0.2.80"]
            server.stop()
        restarts = "restarted" in server.log
    offered, _ = samples[0]
    steady = per_second[1:-1] or per_second
    print(f"| backend | CPU quota | capacity (replies/s) | offered (q/s) | answered (replies/s, server) | "
          f"per-second replies min / median / max | memory Pss start → end (max) | alive after |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.backend} | {args.quota}% of a core | {capacity:,.0f} | {offered:,.0f} "
          f"({offered / capacity:.2f}×) | {served:,.0f} ({served / capacity:.2f}× capacity) | "
          f"{min(steady):,.0f} / {statistics.median(steady):,.0f} / {max(steady):,.0f} | "
          f"{memory[0] / 1024:.1f} → {memory[-1] / 1024:.1f} MiB ({max(memory) / 1024:.1f}) | "
          f"{'yes' if alive and not restarts else 'NO'} |")
    os.unlink(qfile)


class SocketServer:
    """serve-dns on loopback (socket backend, 2 workers on CPU 1) with a control socket."""

    def __init__(self, zone, port):
        self.control = tempfile.mktemp(suffix=".sock")
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "stormpy", "serve-dns", zone, "--listen",
                                      f"127.0.0.1:{port}", "--workers", "2", "--cpus", "1",
                                      "--control", self.control],
                                     cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if snapshot(self.control):
                return
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=15)
        self.log.seek(0)
        return self.log.read()


def dnsperf(port, seconds, qps):
    qfile = tempfile.mktemp(suffix=".txt")
    with open(qfile, "w") as f:
        f.write("\n".join(QUERIES) + "\n")
    r = subprocess.run(["taskset", "-c", "0", "dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", qfile,
                        "-l", str(seconds), "-Q", str(qps), "-c", "4", "-t", "2"],
                       capture_output=True, text=True, timeout=seconds + 60)
    os.unlink(qfile)
    sent = int(re.search(r"Queries sent:\s+(\d+)", r.stdout).group(1))
    lost = int(re.search(r"Queries lost:\s+(\d+)", r.stdout).group(1))
    return sent, lost


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def checking_client(port, stop, seen):
    """Asks www.example.com A over and over; every answer must be one version's."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1.0)
        while not stop.is_set():
            s.sendto(dns.message.make_query("www.example.com", "A").to_wire(), ("127.0.0.1", port))
            try:
                r = dns.message.from_wire(s.recv(4096))
                got = [rr.address for rrset in r.answer for rr in rrset]
                right = got in (["192.0.2.80"], ["192.0.2.81"]) and r.rcode() == 0
                seen["ok" if right else "wrong"] += 1
                if right:
                    seen[got[0]] = seen.get(got[0], 0) + 1
            except socket.timeout:
                seen["lost"] += 1
            time.sleep(0.001)


def under_load(seconds, qps, action, interval):
    """One run: a server, dnsperf for `seconds`, a checking client, and action(server)
    every interval (None: no action). Returns (sent, lost, checks, log, snapshot)."""
    workdir = tempfile.mkdtemp()
    zone = os.path.join(workdir, "example.zone")
    shutil.copy(ZONE, zone)
    port = free_port()
    server = SocketServer(zone, port)
    stop, seen = threading.Event(), {"ok": 0, "wrong": 0, "lost": 0}
    checker = threading.Thread(target=checking_client, args=(port, stop, seen))
    result = {}
    load = threading.Thread(target=lambda: result.update(perf=dnsperf(port, seconds, qps)))
    checker.start()
    load.start()
    extra = []
    while load.is_alive():
        time.sleep(interval)
        if action and load.is_alive():
            extra.append(action(server, zone))
    load.join()
    stop.set()
    checker.join()
    snap = snapshot(server.control)
    log = server.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    return result["perf"], seen, log, snap, extra


def flip_and_reload(server, zone):
    text = open(zone).read()
    a, b = "192.0.2.80", "192.0.2.81"
    text = text.replace(a, "@@").replace(b, a).replace("@@", b) if a in text else text.replace(b, a)
    with open(zone + ".new", "w") as f:
        f.write(text)
    os.replace(zone + ".new", zone)
    server.proc.send_signal(signal.SIGHUP)


def reload(args):
    base, base_seen, _, _, _ = under_load(args.seconds, args.qps, None, args.interval)
    (sent, lost), seen, log, snap, _ = under_load(args.seconds, args.qps, flip_and_reload, args.interval)
    print("| run | reloads (failed) | dnsperf sent | lost | checking client: right / wrong / lost "
          "| answers from each version (.80 / .81) |")
    print("|---|---|---|---|---|---|")
    print(f"| no reloads | 0 | {base[0]:,} | {base[1]:,} | {base_seen['ok']:,} / {base_seen['wrong']} / "
          f"{base_seen['lost']} | {base_seen.get('192.0.2.80', 0):,} / {base_seen.get('192.0.2.81', 0):,} |")
    print(f"| SIGHUP every {args.interval} s | {snap['reloads']} ({snap['reload_failures']}) | {sent:,} | "
          f"{lost:,} | {seen['ok']:,} / {seen['wrong']} / {seen['lost']} | "
          f"{seen.get('192.0.2.80', 0):,} / {seen.get('192.0.2.81', 0):,} |")


def kill_one(server, zone):
    """SIGKILL a worker; seconds until stats show its replacement."""
    snap = snapshot(server.control)
    index = int(time.monotonic()) % len(snap["workers"])
    old = snap["workers"][index]["pid"]
    start = time.monotonic()
    os.kill(old, signal.SIGKILL)
    while time.monotonic() - start < 5:
        w = snapshot(server.control)["workers"][index]
        if w["pid"] not in (0, old) and w["ready"]:
            return time.monotonic() - start
        time.sleep(0.005)
    return float("inf")


def kill(args):
    seconds = 2 * args.kills + 2
    base, base_seen, _, _, _ = under_load(seconds, args.qps, None, 2.0)
    (sent, lost), seen, log, snap, took = under_load(seconds, args.qps, kill_one, 2.0)
    logged = [int(m) for m in re.findall(r"restarted as pid \d+ in (\d+) ms", log)]
    print("| run | kills | replaced within (max, via stats polling) | restart logged (max) | "
          "dnsperf sent | lost | checking client: right / wrong / lost |")
    print("|---|---|---|---|---|---|---|")
    print(f"| no kills | 0 | - | - | {base[0]:,} | {base[1]:,} | {base_seen['ok']:,} / {base_seen['wrong']} / "
          f"{base_seen['lost']} |")
    print(f"| SIGKILL every 2 s | {len(took)} | {max(took) * 1000:.0f} ms | {max(logged or [0])} ms | "
          f"{sent:,} | {lost:,} | {seen['ok']:,} / {seen['wrong']} / {seen['lost']} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="run", required=True)
    o = sub.add_parser("overload")
    o.add_argument("--seconds", type=int, default=60)
    o.add_argument("--backend", choices=("xdp", "packet"), default="xdp")
    o.add_argument("--quota", type=int, default=40, help="percent of one core for the server")
    r = sub.add_parser("reload")
    r.add_argument("--seconds", type=int, default=30)
    r.add_argument("--interval", type=float, default=0.5)
    r.add_argument("--qps", type=int, default=50_000)
    k = sub.add_parser("kill")
    k.add_argument("--kills", type=int, default=10)
    k.add_argument("--qps", type=int, default=50_000)
    reliability_tcp.add_parser(sub)
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("reliability: needs root (network namespaces, cgroups)")
    {"overload": overload, "reload": reload, "kill": kill, "tcp-abuse": reliability_tcp.tcp_abuse}[args.run](args)


if __name__ == "__main__":
    main()
