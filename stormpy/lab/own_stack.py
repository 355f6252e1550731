"""Lab 7, write your own stack: docs/RESPONDERS.md's first two programs as a lab. A UDP
echo answered by a Python handler (examples/echo_in_python.py), then the same service as
a rule the C worker loop answers (examples/udp_echo.py), each on a UDP socket and on the
veth's AF_XDP ring. `stormpy gen echo` measures the most replies a second in closed loop
and the latency percentiles at a fixed rate in open loop; the server's tasks' CPU time
gives what a reply costs. Handout: docs/labs/07-own-stack.md."""
from __future__ import annotations

import importlib.util
import os
import sys
import time

from stormpy.bench.frames import make_frame, source_port
from stormpy.bench.netns import IFACE, SERVER_V4
from stormpy.bench.processes import REPO_ROOT
from stormpy.bench.report import write_csv
from stormpy.lab.common import (SERVER_CPU, LabError, gen_kind, latency_us, note, pyplot,
                                skip_reason_xdp, write_report)
from stormpy.lab.servers import CommandServer

NUMBER = 7
IDEA = ("write your own stack: a UDP echo in Python, then the same rule in C, on a socket "
        "and on the AF_XDP ring, measured with stormpy gen echo")
NEEDS = ("root (namespaces, veth); stormpy's examples (installed with it); AF_XDP for the "
         "ring half, skipped with the reason otherwise")
ECHO_PORT = 4321        # the examples' port
PROGRAMS = {"python": "echo_in_python.py", "C rule": "udp_echo.py"}
SECONDS, QUICK_SECONDS = 5.0, 1.5
RATE = 5000             # open loop: well below what the Python handler answers
SIZE = 64               # bytes a datagram, gen's default
LOOP_FRAMES, LOOP_ROUNDS = 4096, (4, 24)      # the worker loop alone, twice: the difference
CLOSED_LOAD = ["--outstanding", "256", "--batch", "64"]
# the client: whole frames from its veth's AF_XDP ring (a faster client than its UDP
# sockets, so that more of the load reaches the server), or sockets without AF_XDP
CLIENTS = {"xdp": ["--backend", "xdp"], "socket": ["--sockets", "4"]}
HEADER = ["program", "backend", "loop_ns_per_reply", "replies_per_s", "closed_lost_pct",
          "server_cpu_pct", "server_cpu_us_per_reply", "rate_qps", "p50_us", "p90_us",
          "p99_us", "p99_9_us", "max_us", "open_lost_pct"]
QUESTIONS = [
    "On the UDP socket, how many echoes a second did the Python handler answer, and the C "
    "rule? What is the ratio C/Python?",
    "The worker loop alone, without the kernel (loop_ns_per_reply, the memory backend): how "
    "many nanoseconds does a reply take in Python, and in C? What share is that of the "
    "server's whole CPU time per reply on the socket (server_cpu_us_per_reply)?",
    "At the fixed moderate rate, what are p50 and p99 for each program? Does Python cost "
    "latency when the server is not saturated?",
    "The same on the AF_XDP ring: Python against the C rule, in replies a second and CPU "
    "per reply. Does the ring help the C rule more than the Python handler? Why?",
    "Which was the bottleneck in each closed-loop run: the server (server_cpu_pct near "
    "100) or the generator?",
]
# From the client namespace: once the server echoes at all (a byte sent every 0.1 s from
# another socket, for at most argv[3] seconds), three datagrams of known random bytes,
# each echoed whole.
ECHO_CHECK = """
import os, socket, sys, time
deadline = time.monotonic() + float(sys.argv[3])
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as first:
    first.settimeout(0.1)
    while time.monotonic() < deadline:
        first.sendto(b"?", (sys.argv[1], int(sys.argv[2])))
        try:
            first.recv(2048)
            break
        except OSError:
            time.sleep(0.02)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.5)
for n in (1, 64, 1000):
    data = os.urandom(n); s.sendto(data, (sys.argv[1], int(sys.argv[2])))
    try:
        got = s.recv(2048)
    except OSError as e:
        sys.exit(f"no echo of {n} bytes: {e}")
    if got != data:
        sys.exit(f"{n} bytes sent, {len(got)} different bytes echoed")
"""


def program_path(program: str) -> str:
    """The tutorial's program: in the clone's examples/, or where pip installed them
    (the stormpy.examples package)."""
    name = PROGRAMS[program]
    spec = importlib.util.find_spec("stormpy.examples")
    installed = list(spec.submodule_search_locations or []) if spec else []
    for folder in [os.path.join(REPO_ROOT, "examples"), *installed]:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    raise LabError(f"lab own-stack runs the tutorial's program examples/{name}, which is "
                   f"neither in {REPO_ROOT} nor installed: reinstall stormpy")


def backend_args(backend: str) -> list:
    if backend == "socket":
        return ["--listen", f"{SERVER_V4}:{ECHO_PORT}", "--workers", "1"]
    return ["--iface", IFACE, "--backend", backend, "--queues", "1"]


def loop_ns_per_reply(program: str) -> float:
    """What the worker loop alone spends on a reply (the memory backend: frames from a
    list, replies into one, no kernel), with the program's own Responder, in this
    process. Runs of two lengths: their difference leaves out compiling; the fastest of
    three of each leaves out most of what other work on the machine took."""
    spec = importlib.util.spec_from_file_location(f"lab_{PROGRAMS[program][:-3]}",
                                                  program_path(program))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)     # its serve() is under `if __name__ == "__main__"`
    from stormpy.responder import Responder     # here: `stormpy lab list` need not load it
    responder = next(v for v in vars(module).values() if isinstance(v, Responder))
    frames = [make_frame(i.to_bytes(8, "big") + bytes(SIZE - 8), source_port(i), ECHO_PORT)
              for i in range(LOOP_FRAMES)]
    took, cpus = {}, os.sched_getaffinity(0)
    os.sched_setaffinity(0, {SERVER_CPU})       # the core the servers run on
    try:
        for rounds in LOOP_ROUNDS * 3:     # each length three times, the fastest kept
            start = time.perf_counter()
            _, counters = responder.run_frames(frames, batch=32, rounds=rounds)
            took[rounds] = min(took.get(rounds, float("inf")), time.perf_counter() - start)
            if counters["tx"] != rounds * LOOP_FRAMES:
                raise LabError(f"{PROGRAMS[program]} answered {counters['tx']} of "
                               f"{rounds * LOOP_FRAMES} echo frames on the memory backend")
    finally:
        os.sched_setaffinity(0, cpus)
    short, long = LOOP_ROUNDS
    return 1e9 * (took[long] - took[short]) / ((long - short) * LOOP_FRAMES)


def echo_problems(pair, wait: float) -> list:
    r = pair.run(pair.client, sys.executable, "-c", ECHO_CHECK, SERVER_V4, str(ECHO_PORT),
                 f"{wait:.2f}", timeout=wait + 10)
    return [] if r.returncode == 0 else [(r.stderr.strip().splitlines() or ["failed"])[-1]]


def measure(pair, work: str, program: str, backend: str, seconds: float, loop_ns: float,
            client: list) -> list:
    """One row: closed-loop throughput, then open-loop latency, on a fresh server. Both
    programs wait in poll() (--poll block): udp_echo.py's own default is to spin."""
    args = [program_path(program), "--cpus", str(SERVER_CPU), "--control", "", "--poll",
            "block", *backend_args(backend)]
    log = os.path.join(work, f"server-{program.replace(' ', '-')}-{backend}.log")
    with CommandServer(pair, PROGRAMS[program], args, lambda wait: echo_problems(pair, wait),
                       log) as server:
        cpu0 = server.cpu_seconds()
        closed = gen_kind(pair, "echo", ECHO_PORT, seconds, "--size", str(SIZE), *CLOSED_LOAD,
                          *client)
        cpu, sending = server.cpu_seconds() - cpu0, closed["seconds"]  # gen's start-up left out
        opened = gen_kind(pair, "echo", ECHO_PORT, seconds, "--size", str(SIZE), "--rate",
                          str(RATE))
    lat = latency_us(opened)
    row = [program, backend, round(loop_ns), round(closed["reply_rate"]),
           round(closed["lost_pct"], 3), round(100 * cpu / sending, 1),
           round(1e6 * cpu / max(1, closed["received"]), 2), RATE, round(lat["p50"], 1),
           round(lat["p90"], 1), round(lat["p99"], 1), round(lat["p99_9"], 1),
           round(lat["max"], 1), round(opened["lost_pct"], 3)]
    got = dict(zip(HEADER, row))
    note(f"{program:6s} {backend:6s}: {got['replies_per_s']:9,} replies/s, server CPU "
         f"{got['server_cpu_pct']:3.0f}% ({got['server_cpu_us_per_reply']:.2f} us/reply); at "
         f"{RATE:,}/s p50 {got['p50_us']:.0f} us, p99 {got['p99_us']:.0f} us")
    return row


def run(pair, wl, work: str, out: str, quick: bool) -> None:
    seconds = QUICK_SECONDS if quick else SECONDS
    backends, why = ["socket"], skip_reason_xdp()
    if why:
        note(f"the AF_XDP half is skipped: {why}")
    else:
        backends.append("xdp")
    loop = {p: loop_ns_per_reply(p) for p in PROGRAMS}
    note("the worker loop alone: " + ", ".join(f"{p} {ns:.0f} ns a reply"
                                               for p, ns in loop.items()))
    client = backends[-1]       # xdp where it runs
    rows = [measure(pair, work, p, b, seconds, loop[p], CLIENTS[client]) for b in backends
            for p in PROGRAMS]
    write_csv(os.path.join(out, "results.csv"), HEADER, rows)
    plot(os.path.join(out, "own-stack.png"), rows)
    setup = (f"The tutorial's two echo servers (examples/{PROGRAMS['python']} and "
             f"examples/{PROGRAMS['C rule']}), one worker each on CPU 0 in the server "
             f"namespace, waiting in poll(); `stormpy gen echo` ({SIZE}-byte datagrams) on CPU 1 "
             f"in the client namespace. Throughput: closed loop, {CLOSED_LOAD[1]} in flight, from "
             f"the client's {'AF_XDP ring' if client == 'xdp' else 'UDP sockets'} (`stormpy gen "
             f"{' '.join(CLIENTS[client])}`), {seconds:g} s. Latency: open loop at {RATE:,}/s, "
             f"{seconds:g} s." + (f" AF_XDP skipped: {why}." if why else ""))
    write_report(os.path.join(out, "report.md"), "Lab 7, write your own stack", setup, HEADER,
                 rows, list(zip(QUESTIONS, answers(rows, backends, why))))


def _row(rows: list, program: str, backend: str) -> dict:
    return next(dict(zip(HEADER, r)) for r in rows if r[0] == program and r[1] == backend)


def _versus(rows: list, backend: str) -> str:
    py, c = _row(rows, "python", backend), _row(rows, "C rule", backend)
    cpu_py, cpu_c = py["server_cpu_us_per_reply"], c["server_cpu_us_per_reply"]
    return (f"Python {py['replies_per_s']:,} replies/s at {cpu_py:.2f} us CPU each, C rule "
            f"{c['replies_per_s']:,} at {cpu_c:.2f} us: C/Python "
            f"{c['replies_per_s'] / max(1, py['replies_per_s']):.2f}x in replies/s, Python/C "
            f"{cpu_py / max(0.01, cpu_c):.2f}x in CPU per reply")


def _loop_share(row: dict) -> float:
    """The worker loop's part of the server's whole CPU time per reply, in percent."""
    return 100 * row["loop_ns_per_reply"] / 1000 / max(0.01, row["server_cpu_us_per_reply"])


def answers(rows: list, backends: list, why) -> list:
    py, c = _row(rows, "python", "socket"), _row(rows, "C rule", "socket")
    first = (f"Python {py['replies_per_s']:,} replies/s, C rule {c['replies_per_s']:,}: "
             f"C/Python {c['replies_per_s'] / max(1, py['replies_per_s']):.2f}x")
    loop = (f"Python {py['loop_ns_per_reply']} ns, C rule {c['loop_ns_per_reply']} ns a reply "
            f"(Python/C {py['loop_ns_per_reply'] / max(1, c['loop_ns_per_reply']):.2f}x); on "
            f"the socket the server spent {py['server_cpu_us_per_reply']:.2f} us (Python) and "
            f"{c['server_cpu_us_per_reply']:.2f} us (C) a reply, so the loop is "
            f"{_loop_share(py):.0f}% and {_loop_share(c):.0f}% of it")
    got = [dict(zip(HEADER, r)) for r in rows]
    latency = "; ".join(f"{g['program']} on {g['backend']}: p50 {g['p50_us']:.0f} us, p99 "
                        f"{g['p99_us']:.0f} us" for g in got)
    ring = _versus(rows, "xdp") if "xdp" in backends else f"AF_XDP was skipped ({why})"
    busy = "; ".join(f"{g['program']} on {g['backend']}: server core {g['server_cpu_pct']:.0f}% "
                     f"busy" for g in got)
    return [first, loop, latency, ring, busy]


def plot(path: str, rows: list) -> None:
    plt = pyplot()
    fig, (rate, lat) = plt.subplots(1, 2, figsize=(12, 4.6))
    got = [dict(zip(HEADER, r)) for r in rows]
    xs = range(len(got))
    bars = rate.bar(xs, [g["replies_per_s"] for g in got],
                    color=["#e67e22" if g["program"] == "python" else "#2471a3" for g in got])
    for bar, g in zip(bars, got):
        rate.annotate(f"{g['server_cpu_us_per_reply']:.2f} us CPU/reply\n"
                      f"loop alone {g['loop_ns_per_reply']} ns",
                      (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                      va="bottom", fontsize=8)
    rate.set_ylabel("echo replies/s (closed loop)")
    rate.margins(y=0.2)         # room for the labels above the bars
    width = 0.27
    for i, (key, name) in enumerate((("p50_us", "p50"), ("p99_us", "p99"), ("p99_9_us", "p99.9"))):
        lat.bar([x + (i - 1) * width for x in xs], [g[key] for g in got], width, label=name)
    lat.set_ylabel(f"latency, us (open loop at {RATE:,}/s)")
    lat.set_yscale("log")       # p50 in tens of us beside a p99.9 in milliseconds
    lat.set_ylim(top=8 * max(g["max_us"] for g in got))     # room for the legend
    lat.legend(ncol=3, loc="upper center")
    for ax in (rate, lat):
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"{g['program']}\n{g['backend']}" for g in got])
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Lab 7: a UDP echo in Python and in C")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
