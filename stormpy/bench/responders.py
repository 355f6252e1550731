"""Custom responders (stormpy/responder/): the C fast-path rules against the DNS fast
path, the Python slow path, and scapy's AnsweringMachine, in one run, no kernel I/O, no
root.

Every figure is whole Ethernet frames through the real frame worker loop on the memory
backend (`_core.run_memory_worker`, one thread, so one core):
- dns: section 2's DNS workload (--names, default 1,000 names; 80% existing names, 10% NODATA, 10%
  NXDOMAIN), exactly as `stormpy bench fastpath` runs its frames;
- kv: a key-value responder, rule `GET <key>\\r\\n` (key=slice(4, None), key_stop
  b"\\r\\n "), 1,000 keys with 20-byte values, 90% present keys and 10% absent (answered
  by the rule's default); the table is the one `Responder.run_frames` compiles, run with
  the same arguments (only the reply capture is off while timing);
- echo: the same responder's second rule, `ECHO ...`, echoing the whole payload;
- slow32, slow256: no rules, the handler `lambda pkts: [(p, p.payload) for p in pkts]`
  (UDP echo in Python), batches of 32 and 256 frames, on the echo frames;
- scapy: an AnsweringMachine subclass (is_request / make_reply) doing the same UDP echo on
  the same frames: `am.reply(Ether(frame), send_function=...)` per frame, the reply
  serialised with raw(); no sniffing and no sending, so it is scapy's per-packet cost
  without the kernel's.

Before anything is timed, each path runs once with its replies captured (the responders
through the public `Responder.run_frames`), and every reply is checked: one per query,
addresses and ports swapped, IPv4 and UDP checksums valid, the payload the expected one
(DNS: the query's ID and question with QR set). Every timed run checks its counters again
(every frame answered, by the path it is meant to take). A broken path is an error, never
a figure.

All measurements are interleaved (dns, kv, echo, slow32, slow256, scapy, then again) and
each keeps its best of --repeat. Every loop is bounded: a C loop runs --rounds times over
the frames, fewer when one round shows the loop would take more than --seconds; scapy
handles at most --scapy-packets frames and stops at --seconds.

With valgrind, callgrind counts instructions per packet inside `sp_frame_worker_run` for
dns (`stormpy.bench.fastpath`'s own child), kv, echo and slow32 (this module as a child:
`python -m stormpy.bench.responders --child KIND PACKETS SEED BATCH`); for slow32 that
includes the Python interpreter running the handler.
"""
from __future__ import annotations

import json
import random
import sys
import tempfile
import time

from stormpy._core import run_memory_worker
from stormpy.bench.callgrind import TOGGLE, count_instructions, why_no_callgrind
from stormpy.bench.errors import BenchError
from stormpy.bench.fastpath import callgrind_args
from stormpy.bench.frames import check_reply, make_frame, source_port, udp_payload
from stormpy.bench.report import count_or_na, markdown_table, say, write_csv
from stormpy.bench.workload import CompiledWorkload

PORT = 7777
KEYS = 1000
MISS_SHARE = 0.1
RULE_PATHS = ("kv", "echo")
SLOW_BATCHES = (32, 256)
PATHS = ("dns", "kv", "echo", "slow32", "slow256", "scapy")
LABELS = {"dns": "DNS fast path ({names:,} names)", "kv": "KV GET rule (1,000 keys)",
          "echo": "echo rule", "slow32": "Python slow path, batch 32",
          "slow256": "Python slow path, batch 256", "scapy": "scapy AnsweringMachine"}
SLOW_PATH_TARGET = 500_000     # packets/s, one core
RULE_TARGET = 1.20             # rule cost at most 1.2x the DNS fast path's, per query


def echo_handler(pkts):
    """The slow path measured: UDP echo in Python."""
    return [(p, p.payload) for p in pkts]


# --------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------

class ResponderWorkload:
    """The key-value + echo responder, the echo-only slow-path responder, and their
    frames (client 198.18.0.2 to 198.18.0.1:7777, one source port per frame)."""

    def __init__(self, packets: int, seed: int, port: int = PORT):
        from stormpy.responder import Responder, Template
        rng = random.Random(seed)
        self.port, self.count = port, packets
        keys = [f"user:{i:05d}".encode() for i in range(KEYS)]
        # 20 bytes: "VALUE " + 12 hex digits + CRLF
        self.values = {k: f"VALUE {rng.getrandbits(48):012x}\r\n".encode() for k in keys}
        self.default = b"NOT_FOUND\r\n"
        self.rules = Responder(port, name="bench kv+echo responder")
        self.rules.rule("get", prefix=b"GET ", key=slice(4, None), key_stop=b"\r\n ",
                        values=self.values, default=self.default)
        self.rules.rule("echo", prefix=b"ECHO ", template=Template(b"", echo=slice(0, None)))
        self.slow = Responder(port, handler=echo_handler, name="bench slow-path echo")

        self.kv_frames, self.kv_expect = [], []
        self.echo_frames, self.echo_expect = [], []
        for i in range(packets):
            if rng.random() < MISS_SHARE:
                key = f"miss:{rng.randrange(10**5):05d}".encode()
            else:
                key = keys[rng.randrange(KEYS)]
            payload = b"GET " + key + b"\r\n"
            self.kv_frames.append(make_frame(payload, source_port(i), port))
            self.kv_expect.append(self.values.get(key, self.default))
            payload = b"ECHO " + f"{rng.getrandbits(64):016x}".encode()
            self.echo_frames.append(make_frame(payload, source_port(i), port))
            self.echo_expect.append(payload)
        self._refs = {}

    def ref(self, which: str):
        """A TableRef of the compiled responder, as Responder.run_frames makes it."""
        if which not in self._refs:
            from stormpy import _core
            table, _ = (self.rules if which == "rules" else self.slow).compile()
            self._refs[which] = _core.TableRef(table, 1)
        return self._refs[which]

    def run(self, path: str, rounds: int, batch: int, capture: bool = False):
        """One run of a responder path through the worker loop: Responder.run_frames's
        call on a table compiled once (capture off unless asked)."""
        frames = self.kv_frames if path == "kv" else self.echo_frames
        app = self.rules if path in RULE_PATHS else self.slow
        return run_memory_worker(
            self.ref("rules" if path in RULE_PATHS else "slow"), frames, port=self.port,
            batch=batch, rounds=rounds, identity=None, responder=True,
            handler=app.handler, all_frames=app.all_frames, max_udp=4096,
            capture_max=(1 << 24) if capture else 0)


# --------------------------------------------------------------------------
# Reply verification (frames.check_reply checks each frame)
# --------------------------------------------------------------------------

def dns_expect(reply: bytes, query: bytes) -> str | None:
    """A DNS reply to `query`: its ID, QR set, the question as asked (0x20 case kept)."""
    if len(reply) < len(query) or reply[:2] != query[:2]:
        return "DNS ID differs"
    if not reply[2] & 0x80:
        return "QR not set"
    if reply[12:len(query)] != query[12:]:
        return "question differs"
    return None


def verify(path: str, replies: list, frames: list, expects: list) -> dict:
    """Every reply checked against its query, in order; BenchError on the first wrong one."""
    if len(replies) != len(frames):
        raise BenchError(f"{path}: {len(replies)} replies to {len(frames)} queries")
    for i, (r, q, e) in enumerate(zip(replies, frames, expects)):
        why = check_reply(r, q, e)
        if why:
            raise BenchError(f"{path}: reply {i} is wrong: {why}")
    return {"queries": len(frames), "replies": len(replies), "checked": len(replies),
            "sample_reply_payload": _sample(replies[0]) if replies else None, "ok": True}


def _sample(reply: bytes) -> str:
    """The first reply's payload: as text when it is printable ASCII, else in hex."""
    payload = udp_payload(reply)[:48]
    if all(32 <= b < 127 or b in (9, 10, 13) for b in payload):
        return payload.decode("ascii")
    return payload.hex()


def verify_all(wl: CompiledWorkload, rw: ResponderWorkload, batch: int, scapy_am) -> dict:
    """Each path once, replies captured and checked (responders via Responder.run_frames)."""
    out = {}
    replies, c = run_memory_worker(wl.ref, wl.frames, batch=batch, rounds=1)
    out["dns"] = verify("dns", replies, wl.frames, [dns_expect] * len(wl.frames))
    _check_counters("dns", c, len(wl.frames))
    for path in RULE_PATHS:
        frames, expect = ((rw.kv_frames, rw.kv_expect) if path == "kv"
                          else (rw.echo_frames, rw.echo_expect))
        replies, c = rw.rules.run_frames(frames, batch=batch)
        out[path] = verify(path, replies, frames, expect)
        _check_counters(path, c, len(frames))
    for b in SLOW_BATCHES:
        replies, c = rw.slow.run_frames(rw.echo_frames, batch=b)
        out[f"slow{b}"] = verify(f"slow{b}", replies, rw.echo_frames, rw.echo_expect)
        _check_counters(f"slow{b}", c, len(rw.echo_frames))
    n = min(len(rw.echo_frames), 2000)
    replies, _, _ = scapy_replies(scapy_am, rw.echo_frames, n, 600.0)
    out["scapy"] = verify("scapy", replies, rw.echo_frames[:n], rw.echo_expect[:n])
    return out


def _check_counters(path: str, c: dict, n: int) -> None:
    """Every frame answered, by the path meant to answer it."""
    if path == "dns":
        ok = c["tx"] == c["rx"] == n
    elif path in RULE_PATHS:
        ok = c["tx"] == c["rx"] == c["rule_answers"] == n and c["slow_path"] == 0
    else:
        ok = (c["tx"] == c["rx"] == c["slow_path"] == c["slow_replies"] == n
              and c["rule_answers"] == 0)
    bad = {k: c.get(k, 0) for k in ("handler_errors", "bad_replies", "rule_unsent", "unanswered",
                                    "tx_ring_full", "malformed", "not_ours")}
    if not ok or any(bad.values()):
        keep = ("rx", "tx", "rule_answers", "slow_path", "slow_replies", *bad)
        raise BenchError(f"{path}: not every frame was answered as expected: "
                         f"{ {k: c.get(k) for k in keep} }")


# --------------------------------------------------------------------------
# scapy
# --------------------------------------------------------------------------

def make_answering_machine(port: int = PORT):
    """scapy's AnsweringMachine doing what the slow-path handler does: UDP echo."""
    from scapy.ansmachine import AnsweringMachine
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    class UdpEcho(AnsweringMachine):
        def parse_options(self, port=PORT):
            self.port = port

        def is_request(self, req):
            return IP in req and UDP in req and req[UDP].dport == self.port

        def make_reply(self, req):
            ip, udp = req[IP], req[UDP]
            return (Ether(src=req.dst, dst=req.src) / IP(src=ip.dst, dst=ip.src) /
                    UDP(sport=udp.dport, dport=udp.sport) / bytes(udp.payload))

    return UdpEcho(port=port, verbose=0)


def scapy_replies(am, frames: list, count: int, seconds: float):
    """Up to `count` frames (cycling over `frames`) through am.reply, stopping after
    `seconds`; returns (reply frames, frames handled, ns)."""
    from scapy.compat import raw
    from scapy.layers.l2 import Ether
    out = []
    sink = lambda reply: out.append(raw(reply))   # noqa: E731 - stands in for sendp
    nframes = len(frames)
    deadline = time.perf_counter_ns() + int(seconds * 1e9)
    start = time.perf_counter_ns()
    handled = 0
    for i in range(count):
        am.reply(Ether(frames[i % nframes]), send_function=sink)
        handled += 1
        if i & 63 == 63 and time.perf_counter_ns() > deadline:
            break
    return out, handled, time.perf_counter_ns() - start


def time_scapy(am, frames: list, expect: list, count: int, seconds: float) -> dict:
    replies, handled, ns = scapy_replies(am, frames, count, seconds)
    if len(replies) != handled:
        raise BenchError(f"scapy: {len(replies)} replies to {handled} queries")
    i = handled - 1     # the last reply, checked as verify() checks them all
    why = check_reply(replies[i], frames[i % len(frames)], expect[i % len(frames)])
    if why:
        raise BenchError(f"scapy: reply {i} is wrong: {why}")
    return {"packets": handled, "ns": ns, "stopped_by_time": handled < count}


# --------------------------------------------------------------------------
# Timing the worker loop
# --------------------------------------------------------------------------

def _runner(path: str, wl: CompiledWorkload, rw: ResponderWorkload, batch: int):
    """A function of rounds -> counters for one C-loop path, capture off."""
    if path == "dns":
        return lambda rounds: run_memory_worker(wl.ref, wl.frames, batch=batch, rounds=rounds,
                                                capture_max=0)[1]
    b = int(path[4:]) if path.startswith("slow") else batch
    return lambda rounds: rw.run(path, rounds, b)[1]


def plan_rounds(run, nframes: int, path: str, rounds: int, seconds: float) -> int:
    """One warm-up round, timed: the rounds that fit in `seconds` (at most `rounds`)."""
    start = time.perf_counter_ns()
    c = run(1)
    one = max(time.perf_counter_ns() - start, 1)
    _check_counters(path, c, nframes)
    return max(1, min(rounds, int(seconds * 1e9 / one)))


def time_loop(run, nframes: int, path: str, rounds: int) -> dict:
    start = time.perf_counter_ns()
    c = run(rounds)
    ns = time.perf_counter_ns() - start
    _check_counters(path, c, nframes * rounds)
    return {"packets": c["rx"], "ns": ns, "rounds": rounds}


# --------------------------------------------------------------------------
# callgrind
# --------------------------------------------------------------------------

def callgrind_all(paths: list, packets: int, seed: int, batch: int, names: int) -> dict:
    """Instructions per packet inside sp_frame_worker_run, per path: dns exactly as `stormpy
    bench fastpath` counts its frames, the others this module's child."""
    jobs = {}
    for path in paths:
        b = int(path[4:]) if path.startswith("slow") else batch
        jobs[path] = (callgrind_args("frame", names, packets, seed, batch=b) if path == "dns" else
                      ["stormpy.bench.responders", "--child", path, str(packets), str(seed), str(b)])
    counts = count_instructions(jobs, TOGGLE["frame"], packets, 1800, "use fewer --cg-packets")
    return {path: per for path, (per, _) in counts.items()}


def _child(argv: list) -> None:
    """Run under valgrind: build the responder workload, run the measured loop once."""
    path, packets, seed, batch = argv
    rw = ResponderWorkload(int(packets), int(seed))
    rw.ref("rules" if path in RULE_PATHS else "slow")    # compiled outside the counted call
    _, c = rw.run(path, 1, int(batch))
    _check_counters(path, c, int(packets))


# --------------------------------------------------------------------------
# stormpy bench responders
# --------------------------------------------------------------------------

def responders_result(args) -> dict:
    cg_reason = None if args.callgrind is not False else "not asked for (--no-callgrind)"
    if cg_reason is None:
        cg_reason = why_no_callgrind()
    try:
        am = make_answering_machine()
    except ImportError as e:
        raise BenchError(f"scapy is needed for the comparison: {e}") from None
    with tempfile.TemporaryDirectory(prefix="stormpy-bench-resp-") as tmp:
        say(f"responders: building the workloads ({args.packets:,} frames each)")
        wl = CompiledWorkload(args.names, args.packets, args.seed, tmp)
        rw = ResponderWorkload(args.packets, args.seed)
        say("responders: checking every path's replies")
        verified = verify_all(wl, rw, args.batch, am)

        runners = {p: _runner(p, wl, rw, args.batch) for p in PATHS if p != "scapy"}
        say("responders: warming up, fitting the rounds to --seconds")
        rounds = {p: plan_rounds(run, args.packets, p, args.rounds, args.seconds)
                  for p, run in runners.items()}
        scapy_n = args.scapy_packets
        best: dict = {}
        for rep in range(args.repeat):
            for p in PATHS:
                say(f"responders: pass {rep + 1}/{args.repeat}: {p}")
                r = (time_scapy(am, rw.echo_frames, rw.echo_expect, scapy_n, args.seconds) if p == "scapy"
                     else time_loop(runners[p], args.packets, p, rounds[p]))
                r["ns_per_packet"] = r["ns"] / r["packets"]
                if p not in best or r["ns_per_packet"] < best[p]["ns_per_packet"]:
                    best[p] = r
    cg = {}
    if cg_reason is None:
        cq = min(args.cg_packets, args.packets)
        say(f"responders: counting instructions with callgrind ({cq:,} packets per path; slow)")
        cg = callgrind_all(["dns", "kv", "echo", "slow32"], cq, args.seed, args.batch, args.names)

    paths = {}
    for p in PATHS:
        b = best[p]
        paths[p] = {"label": LABELS[p].format(names=args.names), "packets": b["packets"], "rounds": b.get("rounds"),
                    "batch": int(p[4:]) if p.startswith("slow") else (None if p == "scapy"
                                                                      else args.batch),
                    "pps": round(b["packets"] / (b["ns"] / 1e9)),
                    "ns_per_packet": round(b["ns_per_packet"], 1),
                    "instructions_per_packet": cg.get(p), "verified": verified[p]}
        if p == "scapy":
            paths[p]["stopped_by_time"] = b["stopped_by_time"]

    def ratio(a, b, key="ns_per_packet"):
        x, y = paths[a][key], paths[b][key]
        return None if x is None or y is None else round(x / y, 3)

    ratios = {"kv_over_dns_ns": ratio("kv", "dns"), "echo_over_dns_ns": ratio("echo", "dns"),
              "kv_over_dns_instructions": ratio("kv", "dns", "instructions_per_packet"),
              "echo_over_dns_instructions": ratio("echo", "dns", "instructions_per_packet")}
    for p in ("slow32", "slow256", "kv", "echo"):
        ratios[f"{p}_over_scapy_pps"] = ratio("scapy", p)   # = pps(p) / pps(scapy)
    targets = {
        "rule_within_20pct_of_dns_time": ratios["kv_over_dns_ns"] <= RULE_TARGET,
        "rule_within_20pct_of_dns_instructions": (
            None if ratios["kv_over_dns_instructions"] is None
            else ratios["kv_over_dns_instructions"] <= RULE_TARGET),
        "slow_path_500k_pps": min(paths["slow32"]["pps"], paths["slow256"]["pps"]) >= SLOW_PATH_TARGET,
    }
    res = {"packets": args.packets, "rounds": args.rounds, "repeat": args.repeat,
           "batch": args.batch, "seconds": args.seconds, "scapy_packets": args.scapy_packets,
           "seed": args.seed, "dns_names": args.names, "kv_keys": KEYS, "kv_miss_share": MISS_SHARE,
           "paths": paths, "ratios": ratios, "targets": targets,
           "verified": all(v["ok"] for v in verified.values())}
    if cg_reason is not None:
        res["instructions_reason"] = cg_reason
    return res


def run_responders(args) -> int:
    res = responders_result(args)
    if args.json:
        print(json.dumps(res))
        return 0
    p, r = res["paths"], res["ratios"]
    header = ["path", "packets/s", "ns/packet", "instr/packet", "cost vs DNS", "packets/s vs scapy",
              "timed packets", "replies checked"]
    table = []
    for name in PATHS:
        x = p[name]
        vs_dns = (f"{x['ns_per_packet'] / p['dns']['ns_per_packet']:.2f}x"
                  if name != "scapy" else f"{x['ns_per_packet'] / p['dns']['ns_per_packet']:,.0f}x")
        table.append([x["label"], f"{x['pps']:,}", f"{x['ns_per_packet']:,.1f}",
                      count_or_na(x["instructions_per_packet"]), vs_dns,
                      f"{p['scapy']['ns_per_packet'] / x['ns_per_packet']:,.1f}x",
                      f"{x['packets']:,}", f"{x['verified']['checked']:,}"])
    print(markdown_table(header, table))
    t = res["targets"]
    instr = ("n/a" if r["kv_over_dns_instructions"] is None
             else f"{r['kv_over_dns_instructions']:.2f}x")
    print(f"\nKV rule against DNS, per query: time {r['kv_over_dns_ns']:.2f}x, "
          f"instructions {instr} (target <= {RULE_TARGET:.2f}x): "
          f"{'met' if t['rule_within_20pct_of_dns_time'] else 'MISSED'} on time"
          + ("" if t["rule_within_20pct_of_dns_instructions"] is None else
             f", {'met' if t['rule_within_20pct_of_dns_instructions'] else 'MISSED'} "
             "on instructions"))
    print(f"Python slow path: {p['slow32']['pps']:,} packets/s at batch 32, "
          f"{p['slow256']['pps']:,} at batch 256 (target >= {SLOW_PATH_TARGET:,}): "
          f"{'met' if t['slow_path_500k_pps'] else 'MISSED'}")
    print(f"against scapy: slow path {r['slow32_over_scapy_pps']:,.0f}x (batch 32), "
          f"KV rule {r['kv_over_scapy_pps']:,.0f}x, echo rule {r['echo_over_scapy_pps']:,.0f}x")
    print("replies: every path's replies checked before timing (count, addresses, ports, "
          "checksums, payload): " + ("ok" if res["verified"] else "FAILED"))
    if res.get("instructions_reason"):
        print(f"instructions: not counted: {res['instructions_reason']}")
    if args.csv:
        write_csv(args.csv, header, table)
    return 0




if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        sys.exit("run `stormpy bench responders` instead")
