"""`stormpy gen KIND TARGET`: a load generator and latency meter. DNS queries (a query
file in dnsperf's format), UDP echo datagrams or HTTP GETs, sent at a fixed rate (open
loop) or with N outstanding (closed loop), every reply matched to its request and
timed. The loop is C (native/include/stormpy/gen/gen.h), one thread; this module opens
the sockets, builds the requests, prints a progress line a second and the report."""
from __future__ import annotations

import json
import math
import signal
import socket
import sys
import threading
import time

from stormpy import argtypes
from stormpy.config import parse_listen
from stormpy.counters import RCODES
from stormpy.errors import StormpyError

ECHO_HEADER = 8             # the sequence number the echo's reply carries back


def add_arguments(p) -> None:
    p.add_argument("kind", choices=("dns", "echo", "http"),
                   help="DNS queries over UDP, UDP echo datagrams, or HTTP GETs over TCP")
    p.add_argument("target", metavar="ADDR:PORT", help="the server ([V6ADDR]:PORT for IPv6)")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--rate", type=argtypes.positive, metavar="Q/S",
                      help="open loop: send this many requests a second, whatever comes back")
    load.add_argument("--outstanding", type=argtypes.positive, metavar="N",
                      help="closed loop: keep N requests in flight (default 16)")
    p.add_argument("--seconds", type=argtypes.seconds, metavar="S",
                   help="send for S seconds (default 10 unless --count is given)")
    p.add_argument("--count", type=argtypes.positive, metavar="N", help="send N requests")
    p.add_argument("--timeout", type=argtypes.seconds, default=1.0, metavar="S",
                   help="a request unanswered after S seconds is lost (default 1)")
    p.add_argument("--queries", "-d", metavar="FILE",
                   help="dns: the queries, one 'NAME TYPE' a line as dnsperf reads them")
    p.add_argument("--size", type=argtypes.positive, default=64, metavar="BYTES",
                   help=f"echo: datagram size ({ECHO_HEADER + 8}-1472, default 64)")
    p.add_argument("--path", action="append", default=[], metavar="PATH",
                   help="http: a path to GET, repeatable, asked in turn (default /)")
    p.add_argument("--host", metavar="NAME", help="http: the Host header (default: ADDR:PORT)")
    p.add_argument("--sockets", type=argtypes.positive, default=1, metavar="N",
                   help="dns, echo: UDP sockets (source ports) to send from (default 1)")
    p.add_argument("--connections", type=argtypes.positive, metavar="N",
                   help="http: kept-alive connections (default: --outstanding, or 16 at a --rate)")
    p.add_argument("--pipeline", type=argtypes.positive, metavar="N",
                   help="http: requests in flight on one connection, at most 64 (default: "
                   "what --outstanding needs over --connections, or 64 at a --rate)")
    p.add_argument("--backend", choices=("socket", "packet", "xdp"), default="socket",
                   help="dns, echo: the kernel's UDP sockets (default), or whole frames on an "
                   "interface's AF_PACKET or AF_XDP rings (root; docs/GEN.md)")
    p.add_argument("--iface", metavar="IFACE",
                   help="with --backend packet or xdp: the interface (default: the route's)")
    p.add_argument("--batch", type=argtypes.positive, default=32, metavar="N",
                   help="requests per sendmmsg, replies per recvmmsg (default 32, at most 256)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                   help="a line a second on stderr (default: when stderr is a terminal)")


def read_queries(path: str) -> list[bytes]:
    """A dnsperf query file: 'NAME TYPE' a line; blank lines and ';' or '#' comments skipped."""
    import dns.exception
    import dns.message
    import dns.name
    import dns.rdatatype

    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise StormpyError(f"cannot read the query file {path}: {getattr(e, 'strerror', e)}") from None
    queries = []
    for number, line in enumerate(lines, 1):
        words = line.split()
        if not words or words[0].startswith((";", "#")):
            continue
        where = f"{path}:{number}"
        if len(words) != 2:
            raise StormpyError(f"{where}: expected 'NAME TYPE', got {line.strip()!r}")
        try:
            rdtype = dns.rdatatype.from_text(words[1])
        except (dns.rdatatype.UnknownRdatatype, ValueError):
            raise StormpyError(f"{where}: {words[1]!r} is not a record type") from None
        try:
            wire = dns.message.make_query(dns.name.from_text(words[0]), rdtype).to_wire()
        except dns.exception.DNSException as e:
            raise StormpyError(f"{where}: {words[0]!r} is not a domain name ({e})") from None
        queries.append(wire)
    if not queries:
        raise StormpyError(f"{path}: no queries in it")
    return queries


def _requests(args, host: str, port: int) -> list[bytes]:
    if args.kind == "dns":
        if not args.queries:
            raise StormpyError("gen dns needs --queries FILE (one 'NAME TYPE' a line)")
        return read_queries(args.queries)
    if args.kind == "echo":
        if not ECHO_HEADER + 8 <= args.size <= 1472:
            raise StormpyError(f"--size {args.size}: an echo datagram has {ECHO_HEADER + 8} "
                               f"to 1472 bytes")
        return [bytes(args.size)]
    name = args.host or (f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    for path in args.path:
        if not path.startswith("/") or any(c in path for c in " \r\n"):
            raise StormpyError(f"--path {path!r}: a path starts with / and has no spaces")
    return [f"GET {path} HTTP/1.1\r\nHost: {name}\r\nUser-Agent: stormpy-gen\r\n\r\n".encode()
            for path in args.path or ["/"]]


def _open_sockets(args, host: str, port: int, count: int) -> list[socket.socket]:
    """count connected sockets: UDP, or TCP connections made now, each within --timeout."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    kind = socket.SOCK_STREAM if args.kind == "http" else socket.SOCK_DGRAM
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(family, kind)
            sockets.append(s)
            if kind == socket.SOCK_STREAM:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.settimeout(args.timeout)
            s.connect((host, port))
            s.setblocking(False)
    except OSError as e:
        for s in sockets:
            s.close()
        why = e.strerror or ("no answer within the timeout" if isinstance(e, TimeoutError) else e)
        raise StormpyError(f"cannot reach {args.target}: {why}") from None
    return sockets


def _load(args) -> dict:
    """The Generator's load options from the command line."""
    if args.batch > 256:
        raise StormpyError(f"--batch {args.batch}: at most 256")
    outstanding = 0 if args.rate else args.outstanding or 16
    load = dict(rate=args.rate or 0, outstanding=outstanding, count=args.count or 0,
                seconds=args.seconds or (0 if args.count else 10.0), timeout=args.timeout,
                batch=args.batch, pipeline=1)
    if args.kind == "http":
        conns = args.connections or min(outstanding or 16, 256)
        pipeline = args.pipeline or (64 if args.rate else math.ceil(outstanding / conns))
        if conns > 256 or pipeline > 64:
            raise StormpyError("http: at most 256 --connections and a --pipeline of 64; "
                               f"{outstanding} outstanding needs more connections")
        load.update(pipeline=pipeline)
        return dict(load, sockets=conns)
    if args.sockets > 256:
        raise StormpyError(f"--sockets {args.sockets}: at most 256")
    return dict(load, sockets=args.sockets)


def run(args) -> int:
    from stormpy import _core

    host, port = parse_listen(args.target, option=f"gen {args.kind}")
    requests = _requests(args, host, port)
    load = _load(args)
    count = load.pop("sockets")
    if args.iface and args.backend == "socket":
        raise StormpyError("--iface is for --backend packet or xdp")
    if args.backend == "socket":
        sockets, ring, held = _open_sockets(args, host, port, count), None, None
    else:
        if args.kind == "http":
            raise StormpyError("gen http runs over the kernel's TCP: --backend socket only")
        if count > 1:
            raise StormpyError(f"--backend {args.backend} sends from one port: --sockets 1")
        from stormpy.gen_rings import open_ring
        sockets, (ring, held) = [], open_ring(args.backend, args.iface, host, port)
    try:
        gen = _core.Generator(args.kind, sockets, requests, ring=ring, **load)
        report = _drive(gen, args)
    finally:
        for s in sockets + [held]:
            if s is not None:
                s.close()
        if ring is not None:
            ring.close()
    print(json.dumps(report) if args.json else format_report(report))
    return 0


def _drive(gen, args) -> dict:
    """Runs the generator in a thread; SIGINT or SIGTERM ends the sending early."""
    errors: list[OSError] = []

    def work():
        try:
            gen.run()
        except OSError as e:
            errors.append(e)

    thread = threading.Thread(target=work, name="stormpy-gen", daemon=True)
    old = {sig: signal.signal(sig, lambda *_: gen.stop()) for sig in (signal.SIGINT, signal.SIGTERM)}
    show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
    try:
        thread.start()
        last, last_t = gen.counters(), time.monotonic()
        while thread.is_alive():
            thread.join(1.0)
            if show and thread.is_alive():
                now, c = time.monotonic(), gen.counters()
                print(progress_line(last, c, now - last_t), file=sys.stderr, flush=True)
                last, last_t = c, now
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if errors:
        raise StormpyError(f"gen: {errors[0].strerror}")
    return build_report(args, gen.counters(), gen.latency())


def progress_line(before: dict, now: dict, seconds: float) -> str:
    elapsed = (time.monotonic_ns() - now["started_ns"]) / 1e9 if now["started_ns"] else 0.0
    inflight = now["sent"] - now["received"] - now["lost"]
    per_s = lambda key: (now[key] - before[key]) / seconds if seconds > 0 else 0.0  # noqa: E731
    return (f"gen: {elapsed:5.1f} s  sent {now['sent']} ({per_s('sent'):.0f}/s)  received "
            f"{now['received']} ({per_s('received'):.0f}/s)  lost {now['lost']}  in flight {inflight}")


def build_report(args, c: dict, latency: dict) -> dict:
    """What the run measured, as --json prints it (times in seconds, latency in ns)."""
    sending = max((c["send_end_ns"] - c["started_ns"]) / 1e9, 1e-9)
    send_rate = c["sent"] / sending
    codes = c["codes"]
    if args.kind == "dns":
        answers = {"rcodes": {RCODES.get(i, str(i)) if i < 7 else "other": n
                              for i, n in enumerate(codes) if n}}
    elif args.kind == "http":
        answers = {"status": {f"{i}xx" if 1 <= i <= 5 else "other": n
                              for i, n in enumerate(codes) if n}}
    else:
        answers = {}
    behind = args.rate is not None and send_rate < 0.95 * args.rate
    return dict(
        kind=args.kind, target=args.target, backend=args.backend, loop="open" if args.rate else "closed",
        rate=args.rate, outstanding=None if args.rate else args.outstanding or 16,
        seconds=round(sending, 6), sent=c["sent"], received=c["received"], lost=c["lost"],
        lost_pct=100.0 * c["lost"] / c["sent"] if c["sent"] else 0.0,
        send_rate=send_rate, reply_rate=c["received"] / sending,
        latency_from="scheduled send time" if args.rate else "send time",
        latency_ns=latency, **answers,
        generator=dict(rate_reached=None if args.rate is None else not behind,
                       max_lag_ns=c["max_lag_ns"], would_block=c["would_block"],
                       send_errors=c["send_errors"], window_full=c["window_full"]),
        late=c["late"], unmatched=c["unmatched"], refused=c["refused"],
        closed=c["closed"], bad_replies=c["bad_replies"])


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def format_report(r: dict) -> str:
    load = f"open loop at {r['rate']}/s" if r["loop"] == "open" else \
        f"closed loop, {r['outstanding']} outstanding"
    lat = r["latency_ns"]
    lines = [f"gen {r['kind']} {r['target']} over {r['backend']}: {load}, {r['seconds']:.3f} s "
             f"of sending",
             f"  sent      {r['sent']:>10}  {r['send_rate']:12.1f}/s",
             f"  received  {r['received']:>10}  {r['reply_rate']:12.1f}/s",
             f"  lost      {r['lost']:>10}  {r['lost_pct']:11.2f} %  (no reply within the timeout)",
             f"  latency ms from the {r['latency_from']}: p50 {_ms(lat['p50'])}  p90 "
             f"{_ms(lat['p90'])}  p99 {_ms(lat['p99'])}  p99.9 {_ms(lat['p99_9'])}  max "
             f"{_ms(lat['max'])}  (min {_ms(lat['min'])}, mean {_ms(lat['mean'])})"
             if lat["count"] else "  latency: no replies"]
    for key in ("rcodes", "status"):
        if r.get(key):
            lines.append(f"  {key}: " + " ".join(f"{k}={n}" for k, n in r[key].items()))
    odd = {k: r[k] for k in ("late", "unmatched", "refused", "closed", "bad_replies") if r[k]}
    if odd:
        lines.append("  also: " + " ".join(f"{k}={n}" for k, n in odd.items()))
    g = r["generator"]
    if g["rate_reached"] is False:
        lines.append(f"  rate not reached: the generator sent {r['send_rate']:.0f}/s of "
                     f"{r['rate']}/s (it fell up to {_ms(g['max_lag_ns'])} ms behind its schedule)")
    trouble = {k: g[k] for k in ("would_block", "send_errors", "window_full") if g[k]}
    if trouble:
        lines.append("  the generator was held back: " +
                     " ".join(f"{k}={n}" for k, n in trouble.items()))
    return "\n".join(lines)
