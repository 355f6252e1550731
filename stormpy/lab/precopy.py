"""Lab 2, pre-copy against memcpy (the paper's figs. 6-7, and 8a for DNS): one worker on
the server veth's AF_XDP ring renders every reply into a TX buffer (--mode memcpy) or
sends it from a pool of ready-made copies in the UMEM (--mode precopy). `stormpy gen`
loads it in closed loop with DNS queries, then with HTTP GETs of one file size at a time
(1 KB to 1 MB) from serve-http's own TCP; the server's tasks' CPU time gives its cost
per reply, the client veth's byte counter the wire rate. Handout: docs/labs/02-precopy.md."""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from stormpy.bench.netns import IFACE, SERVER_V4
from stormpy.bench.report import write_csv
from stormpy.bench.site import bin_name, make_site, sha256_of
from stormpy.lab.common import (SERVER_CPU, LabError, Server, gen, gen_kind, latency_us, note,
                                pyplot, ring_args, skip_reason_xdp, write_report)
from stormpy.lab.servers import CommandServer, client_received

NUMBER = 2
IDEA = ("pre-copy against memcpy on the AF_XDP ring: DNS, and HTTP by file size 1 KB-1 MB "
        "(paper figs. 6-7)")
NEEDS = "root (namespaces, veth), AF_XDP (both modes run on its ring), curl"
HTTP_PORT = 80
SIZES = [1024, 4096, 16384, 65536, 262144, 1048576]
QUICK_SIZES = [1024, 65536]
SECONDS, QUICK_SECONDS = 4.0, 1.5
DNS_ROUNDS, QUICK_DNS_ROUNDS = 3, 1     # the modes alternate; each keeps its best round
DNS_LOAD = ["--outstanding", "256", "--backend", "xdp", "--batch", "64"]
HTTP_OUTSTANDING = 16   # kept-alive connections, one GET in flight on each
# label -> serve-http options: memcpy sends one frame a segment like precopy does, so
# the two differ by the copy alone; memcpy+gso hands the kernel 64 KB at a time
HTTP_MODES = {"memcpy": ["--mode", "memcpy", "--gso", "off"],
              "precopy": ["--mode", "precopy"],
              "memcpy+gso": ["--mode", "memcpy", "--gso", "on"]}
QUICK_HTTP_MODES = ["memcpy", "precopy"]
HEADER = ["proto", "mode", "reply_bytes", "replies_per_s", "wire_mbit_per_s", "server_cpu_pct",
          "server_cpu_us_per_reply", "p50_us", "p90_us", "p99_us", "max_us", "lost_pct"]
QUESTIONS = [
    "DNS: how many replies a second, and how many microseconds of server CPU per reply, "
    "in memcpy and in precopy mode? The paper's Namestorm was faster with memcpy (fig. 8a): "
    "what is precopy/memcpy here?",
    "HTTP, one frame a segment in both modes: requests a second and CPU per request at "
    "1 KB and at the largest file, and precopy/memcpy at each. The paper saw memcpy "
    "marginally slower with DDIO (fig. 6) and 30% slower on 2006 hardware (fig. 7).",
    "Does precopy's advantage (or loss) grow or shrink with the file size? Where does "
    "the wire rate (wire_mbit_per_s) stop growing, and was the server's core busy there?",
    "At the largest file, what does memcpy+gso (64 KB handed to the kernel at a time) give "
    "against one frame a segment? What costs more on this machine: the copy, or the frame?",
    "The paper's precopy saves the CPU a copy because the NIC reads the ready frame by DMA. "
    "On a veth, AF_XDP runs in copy mode: who copies each frame anyway, and what does that "
    "leave precopy to save?",
]


class SiteCheck:
    """serve-http is ready when every measured file arrives whole through the pair
    (curl in the client namespace, SHA-256 against the site's)."""

    def __init__(self, pair, site: Path, sizes: list, work: str):
        self.pair, self.sizes, self.fetched = pair, sizes, os.path.join(work, "fetched")
        self.digests = sha256_of(site)

    def __call__(self, wait: float) -> list:     # curl is refused at once until it listens
        for size in self.sizes:
            r = self.pair.run(self.pair.client, "curl", "-sS", "--fail", "--max-time", "5", "-o",
                              self.fetched, f"http://{SERVER_V4}:{HTTP_PORT}{bin_name(size)}",
                              timeout=10)
            got = hashlib.sha256(Path(self.fetched).read_bytes()).hexdigest() \
                if r.returncode == 0 else None
            if got != self.digests[bin_name(size)]:
                return [f"{bin_name(size)} did not arrive whole: "
                        f"{r.stderr.strip() or 'wrong bytes'}"]
        return []


def loaded(pair, server, run) -> tuple:
    """run() (a `stormpy gen`) against the server: its report, the server's CPU seconds,
    the seconds gen spent sending (its own start-up left out), and the bytes and frames
    the client's veth received meanwhile."""
    cpu0, rx0 = server.cpu_seconds(), client_received(pair)
    report = run()
    rx1 = client_received(pair)
    return (report, server.cpu_seconds() - cpu0, report["seconds"], rx1[0] - rx0[0],
            rx1[1] - rx0[1])


def row(proto: str, mode: str, size: float, measured: tuple) -> list:
    report, cpu, sending, rx_bytes, _ = measured
    lat, received = latency_us(report), max(1, report["received"])
    out = [proto, mode, round(size), round(report["reply_rate"]),
           round(rx_bytes * 8 / sending / 1e6, 1), round(100 * cpu / sending, 1),
           round(1e6 * cpu / received, 2), round(lat["p50"], 1), round(lat["p90"], 1),
           round(lat["p99"], 1), round(lat["max"], 1), round(report["lost_pct"], 3)]
    note(f"{proto} {mode:10s} {size:8.0f} B: {out[3]:9,} replies/s, {out[4]:7.1f} Mbit/s, "
         f"server CPU {out[5]:3.0f}%, {out[6]:6.2f} us/reply")
    return out


def measure_dns(pair, wl, work: str, mode: str, seconds: float) -> list:
    log = os.path.join(work, f"server-dns-{mode}.log")
    # every answer from the pool: the lab compares the two ways, not serve-dns's choice
    every = ["--precopy-min-bytes", "0"] if mode == "precopy" else []
    with Server(pair, wl, ring_args("xdp") + ["--mode", mode] + every, log) as server:
        measured = loaded(pair, server, lambda: gen(pair, wl, seconds, *DNS_LOAD))
    return row("dns", mode, measured[3] / max(1, measured[4]), measured)   # mean reply frame


def measure_http(pair, site: Path, check, work: str, mode: str, sizes: list,
                 seconds: float) -> list:
    args = ["-m", "stormpy", "serve-http", str(site), "--cpus", str(SERVER_CPU), "--control", "",
            "--iface", IFACE, "--backend", "xdp", "--port", str(HTTP_PORT), *HTTP_MODES[mode]]
    rows = []
    with CommandServer(pair, "serve-http", args, check,
                       os.path.join(work, f"server-http-{mode}.log")) as server:
        for size in sizes:
            load = ["--outstanding", str(HTTP_OUTSTANDING), "--path", bin_name(size)]
            measured = loaded(pair, server, lambda: gen_kind(pair, "http", HTTP_PORT, seconds,
                                                             *load))
            rows.append(row("http", mode, size, measured))
    return rows


def run(pair, wl, work: str, out: str, quick: bool) -> None:
    why = skip_reason_xdp()
    if why:
        raise LabError(f"lab precopy compares two modes of the AF_XDP ring: {why}")
    if shutil.which("curl") is None:
        raise LabError("lab precopy checks every file with curl, which is not installed "
                       "(apt-get install curl)")
    sizes, seconds = (QUICK_SIZES, QUICK_SECONDS) if quick else (SIZES, SECONDS)
    modes = QUICK_HTTP_MODES if quick else list(HTTP_MODES)
    site = Path(work) / "site"
    make_site(site, sizes=sizes)
    check = SiteCheck(pair, site, sizes, work)
    rounds = QUICK_DNS_ROUNDS if quick else DNS_ROUNDS
    dns = [measure_dns(pair, wl, work, mode, seconds) for _ in range(rounds)
           for mode in ("memcpy", "precopy")]
    rows = [max((r for r in dns if r[1] == mode), key=lambda r: r[3])
            for mode in ("memcpy", "precopy")]
    for mode in modes:
        rows += measure_http(pair, site, check, work, mode, sizes, seconds)
    write_csv(os.path.join(out, "results.csv"), HEADER, rows)
    plot(os.path.join(out, "precopy.png"), rows)
    setup = (f"One worker on CPU 0 on the server veth's AF_XDP ring (copy mode: veth has no "
             f"zero-copy), `stormpy gen` on CPU 1 in the client namespace, closed loop, "
             f"{seconds:g} s a point. DNS: serve-dns, best of {rounds} alternating round(s), "
             f"{DNS_LOAD[1]} queries in flight, sent as "
             f"whole frames from the client veth's AF_XDP ring (`stormpy gen --backend xdp`); "
             f"reply_bytes is the mean frame the client's veth received. "
             f"HTTP: serve-http's own TCP, {HTTP_OUTSTANDING} kept-alive connections with one "
             f"GET each; reply_bytes is the file's size; modes: {', '.join(modes)}. Server CPU: "
             f"utime+stime of the server's tasks; wire rate: the client veth's rx_bytes.")
    write_report(os.path.join(out, "report.md"), "Lab 2, pre-copy against memcpy", setup, HEADER,
                 rows, list(zip(QUESTIONS, answers(rows))))


def _get(rows: list, proto: str, mode: str, size=None) -> list:
    return next(r for r in rows if r[0] == proto and r[1] == mode and size in (None, r[2]))


def _cost(r: list) -> str:
    return f"{r[3]:,} replies/s at {r[6]:.2f} us CPU each (server core {r[5]:.0f}% busy)"


def _ratio(rows: list, size: int, a: str = "precopy", b: str = "memcpy") -> str:
    x, y = _get(rows, "http", a, size), _get(rows, "http", b, size)
    return (f"{a}/{b} {x[3] / max(1, y[3]):.2f}x in requests/s, {x[6] / max(0.01, y[6]):.2f}x "
            f"in CPU per request")


def _speedup(rows: list, size: int) -> float:
    """precopy/memcpy in requests a second at one file size."""
    return _get(rows, "http", "precopy", size)[3] / max(1, _get(rows, "http", "memcpy", size)[3])


def _most(rows: list, mode: str) -> str:
    mine = [r for r in rows if r[1] == mode]
    return (f"{mode} {max(r[4] for r in mine):,.0f} Mbit/s at most (core "
            f"{max(r[5] for r in mine):.0f}% busy at most)")


def answers(rows: list) -> list:
    dm, dp = _get(rows, "dns", "memcpy"), _get(rows, "dns", "precopy")
    sizes = sorted({r[2] for r in rows if r[0] == "http"})
    small, big = sizes[0], sizes[-1]
    http = "; ".join(f"{s:,} B: memcpy {_cost(_get(rows, 'http', 'memcpy', s))}, precopy "
                     f"{_cost(_get(rows, 'http', 'precopy', s))}; {_ratio(rows, s)}"
                     for s in (small, big))
    trend = "; ".join(f"{s:,} B {_speedup(rows, s):.2f}x" for s in sizes)
    http_rows = [r for r in rows if r[0] == "http"]
    wire = "; ".join(_most(http_rows, m) for m in dict.fromkeys(r[1] for r in http_rows))
    if any(r[1] == "memcpy+gso" for r in rows):
        gso = (f"at {big:,} B memcpy+gso {_cost(_get(rows, 'http', 'memcpy+gso', big))}; "
               f"{_ratio(rows, big, 'memcpy+gso', 'memcpy')}")
    else:
        gso = (f"memcpy+gso not measured in --quick; one frame a segment at {big:,} B: "
               f"{_cost(_get(rows, 'http', 'memcpy', big))}")
    why = (f"precopy/memcpy measured: DNS {dp[3] / max(1, dm[3]):.2f}x, HTTP {trend}; the "
           f"veth's AF_XDP copy mode copies every sent frame into an skb in the kernel")
    return [f"memcpy {_cost(dm)}; precopy {_cost(dp)}; precopy/memcpy {dp[3] / max(1, dm[3]):.2f}x "
            f"in replies/s, {dp[6] / max(0.01, dm[6]):.2f}x in CPU per reply; mean reply frame "
            f"{dm[2]} B", http, f"precopy/memcpy in requests/s by size: {trend}; {wire}", gso, why]


def plot(path: str, rows: list) -> None:
    plt = pyplot()
    fig, (dns, rate, cpu) = plt.subplots(1, 3, figsize=(15, 4.6))
    dns_rows = [r for r in rows if r[0] == "dns"]
    bars = dns.bar([r[1] for r in dns_rows], [r[3] for r in dns_rows], color=["#2471a3", "#85c1e9"])
    for bar, r in zip(bars, dns_rows):
        dns.annotate(f"{r[6]:.2f} us CPU/reply",
                     (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                     va="bottom", fontsize=9)
    dns.set_ylabel("DNS replies/s (closed loop)")
    dns.set_title("DNS on the AF_XDP ring")
    for mode in dict.fromkeys(r[1] for r in rows if r[0] == "http"):
        got = sorted((r for r in rows if r[0] == "http" and r[1] == mode), key=lambda r: r[2])
        xs = [r[2] / 1024 for r in got]
        rate.plot(xs, [r[3] for r in got], marker="o", label=mode)
        cpu.plot(xs, [r[6] for r in got], marker="o", label=mode)
    rate.set_ylabel("HTTP requests/s (closed loop)")
    cpu.set_ylabel("server CPU per request, us")
    rate.set_title("HTTP by file size")
    cpu.set_title("what a reply costs the server")
    for ax in (rate, cpu):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        sizes = sorted({r[2] for r in rows if r[0] == "http"})
        ax.set_xticks([s / 1024 for s in sizes], [f"{s // 1024:g}" for s in sizes])
        ax.set_xlabel("file size, KB")
        ax.legend()
    for ax in (dns, rate, cpu):
        ax.grid(True, alpha=0.3)
    fig.suptitle("Lab 2: pre-copy against memcpy (AF_XDP in copy mode on a veth)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
