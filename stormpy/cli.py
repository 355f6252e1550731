"""The stormpy command line. User errors end in one line on stderr, never a traceback."""
from __future__ import annotations

import argparse
import logging
import os
import sys

from stormpy import __version__
from stormpy import argtypes
from stormpy.errors import StormpyError

# Root serves from /run like other daemons; anyone else from their own runtime dir.
DEFAULT_CONTROL = ("/run/stormpy.sock" if os.geteuid() == 0 else
                   os.path.join(os.environ.get("XDG_RUNTIME_DIR") or "/tmp", f"stormpy-{os.getuid()}.sock"))


def add_serving_arguments(s: argparse.ArgumentParser, default_port: int) -> None:
    """The options every server takes (serve-dns, and custom responders' serve())."""
    s.add_argument("--listen", action="append", default=[], metavar="ADDR:PORT",
                   help="address to serve on, repeatable; [::1]:5353 for IPv6 (default 127.0.0.1:5353 for serve-dns)")
    s.add_argument("--workers", type=argtypes.positive, default=0, metavar="N",
                   help="UDP workers per address (default: one per CPU)")
    s.add_argument("--batch", type=argtypes.positive, default=32, metavar="N",
                   help="datagrams received and sent per system call (default 32, at most 256)")
    s.add_argument("--user", metavar="NAME",
                   help="once the rings and sockets are set up, run as this user, keeping only "
                   "the capabilities needed to reopen a queue (none on sockets)")
    rings = s.add_argument_group("serving on an interface's rings instead of sockets")
    rings.add_argument("--iface", metavar="IFACE",
                       help="answer UDP on this interface's rings, one worker per RX queue")
    rings.add_argument("--backend", choices=("socket", "xdp", "packet", "netmap"), default=None,
                       help="socket (the default without --iface); xdp (AF_XDP: the default with "
                       "--iface where it can run); packet (AF_PACKET, the fallback); netmap "
                       "(built with NETMAP_INCLUDE, and /dev/netmap present)")
    rings.add_argument("--xdp-mode", choices=("auto", "native", "generic"), default="auto",
                       help="attach the XDP program in the driver (native) or generic mode (default: native, else generic)")
    rings.add_argument("--copy-mode", choices=("auto", "copy", "zerocopy"), default="auto",
                       help="AF_XDP zero-copy or copy (default: zero-copy where the driver can)")
    rings.add_argument("--mode", choices=("memcpy", "precopy"), default="memcpy",
                       help="render every reply into a TX buffer (memcpy), or send repeated "
                            "answers from ready-made copies in the backend's memory (precopy)")
    rings.add_argument("--port", type=argtypes.port, default=default_port, metavar="N",
                       help=f"UDP port served with --iface (default {default_port})")
    rings.add_argument("--queues", type=argtypes.positive, default=0, metavar="N",
                       help="workers on the interface (default: its RX queue count)")
    rings.add_argument("--cpus", type=argtypes.cpu_list, default=[], metavar="LIST",
                       help="pin worker i to the i-th CPU of LIST, e.g. 0,1 or 0-3 (sockets too)")
    rings.add_argument("--tx-flush-us", type=argtypes.flush_us, default=0, metavar="US",
                       help="under load, kick TX at most every US microseconds (the paper's dt, "
                       "e.g. 80); an idle ring flushes at once (default 0: every batch)")
    rings.add_argument("--poll", choices=("block", "busy"), default="block",
                       help="wait for frames in poll() or spin on the ring (default block)")
    s.add_argument("--control", default=None, metavar="PATH",
                   help=f"Unix socket for `stormpy stats` (default {DEFAULT_CONTROL}; '' for none)")
    s.add_argument("-v", "--verbose", action="count", default=0,
                   help="print counters every 10 s (-vv: every second)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stormpy", description="Prepackaged-response packet "
                                "processing: an authoritative DNS server with a C fast path.")
    p.add_argument("--version", action="version", version=f"stormpy {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("serve-dns", help="serve zone files over UDP and TCP",
                       description="Serve zone files as an authoritative DNS server. "
                       "SIGHUP reloads the zones; a zone that fails to load keeps the old one serving.")
    s.add_argument("zones", nargs="+", metavar="ZONE", help="RFC 1035 master file")
    s.add_argument("--origin", action="append", default=[], metavar="NAME",
                   help="zone origin, once per ZONE in the same order (default: $ORIGIN or the SOA owner)")
    s.add_argument("--max-udp", type=argtypes.max_udp, default=1232, metavar="BYTES",
                   help="largest UDP response with EDNS (default 1232)")
    rrl = s.add_argument_group("response rate limiting (off unless --rrl-rate is given)")
    rrl.add_argument("--rrl-rate", type=argtypes.positive, default=0, metavar="N",
                     help="answers per second to one source prefix, per kind of answer")
    rrl.add_argument("--rrl-slip", type=argtypes.non_negative, default=2, metavar="N",
                     help="send every Nth limited answer truncated, so real clients retry "
                     "over TCP (default 2; 0: drop them all)")
    rrl.add_argument("--rrl-ipv4-prefix", type=argtypes.prefix_bits(32), default=24, metavar="BITS",
                     help="IPv4 sources sharing a bucket (default 24)")
    rrl.add_argument("--rrl-ipv6-prefix", type=argtypes.prefix_bits(128), default=56, metavar="BITS",
                     help="IPv6 sources sharing a bucket (default 56)")
    rrl.add_argument("--rrl-allow", action="append", default=[], metavar="PREFIX",
                     help="never limit this prefix, repeatable (up to 16)")
    s.add_argument("--chaos-version", type=argtypes.txt_string, metavar="TEXT",
                   help="answer CH TXT version.bind/version.server with TEXT (default: REFUSED)")
    s.add_argument("--chaos-identity", type=argtypes.txt_string, metavar="TEXT",
                   help="answer CH TXT id.server/hostname.bind with TEXT (default: REFUSED)")
    add_serving_arguments(s, default_port=53)

    st = sub.add_parser("stats", help="per-worker counters of a running server",
                        description="Print the counters of a running serve-dns: per worker "
                        "rx, tx, drops, answers by rcode, batch sizes and TX-ring-full events.")
    st.add_argument("--control", default=DEFAULT_CONTROL, metavar="PATH",
                    help=f"the server's --control socket (default {DEFAULT_CONTROL})")
    st.add_argument("--json", action="store_true", help="print the raw JSON")

    rp = sub.add_parser("replay", help="answer the queries of a pcap file through the fast path",
                        description="Feed the frames of a pcap file through the real fast path on "
                        "the memory backend (no kernel, no root) and print its counters; --out "
                        "writes the reply frames as a pcap file.")
    rp.add_argument("zones", nargs="+", metavar="ZONE")
    rp.add_argument("--pcap", required=True, metavar="FILE", help="the frames to answer (Ethernet)")
    rp.add_argument("--out", metavar="FILE", help="write the replies here (pcap)")
    rp.add_argument("--origin", action="append", default=[], metavar="NAME",
                    help="zone origin, once per ZONE in the same order")
    rp.add_argument("--port", type=argtypes.port, default=53, help="the served UDP port (default 53)")
    rp.add_argument("--batch", type=argtypes.positive, default=32, metavar="N",
                    help="frames per batch (default 32)")
    rp.add_argument("--max-udp", type=argtypes.max_udp, default=1232, metavar="BYTES",
                    help="largest UDP answer with EDNS (default 1232)")
    rp.add_argument("--mode", choices=("memcpy", "precopy"), default="memcpy",
                    help="render every reply into a TX buffer, or send ready-made copies")

    sub.add_parser("backends", help="list the I/O backends: compiled in, usable here, and why not",
                   description="List every I/O backend, whether this build has it, and whether it "
                   "can run on this machine (or why not).")

    c = sub.add_parser("check-zone", help="compile zone files and report counts or errors",
                       description="Load and compile zone files as serve-dns would, and report "
                       "records, names, lookup keys and prepackaged responses.")
    c.add_argument("zones", nargs="+", metavar="ZONE")
    c.add_argument("--origin", action="append", default=[], metavar="NAME",
                   help="zone origin, once per ZONE in the same order")
    from stormpy.bench.cli import register as register_bench  # `stormpy bench`: stormpy/bench/
    register_bench(sub)
    return p


def _check_zone(args) -> int:
    from stormpy.dnscompile import compile_zones
    from stormpy.zone import load_zone

    if args.origin and len(args.origin) != len(args.zones):
        raise StormpyError("give one --origin per zone file, in the same order, or none")
    zones = []
    for path, origin in zip(args.zones, args.origin or [None] * len(args.zones)):
        zone = load_zone(path, origin)
        zones.append(zone)
        print(f"{path}: zone {zone.origin.to_text()} loaded, {zone.record_count} records")
    _, stats = compile_zones(zones)
    print(f"compiled {stats.zones} zone(s): {stats.records} records, {stats.names} names, "
          f"{stats.keys} lookup keys, {stats.responses} prepackaged responses, "
          f"{stats.memory_bytes} bytes of table")
    return 0


def _stats(args) -> int:
    import json
    import socket as socketlib

    from stormpy.server import format_worker

    try:
        with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(args.control)
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except (FileNotFoundError, ConnectionRefusedError):
        raise StormpyError(f"no server is listening on {args.control} (see serve-dns --control)") from None
    except OSError as e:
        raise StormpyError(f"{args.control}: {e.strerror or e}") from None
    snap = json.loads(data)
    if args.json:
        print(json.dumps(snap, indent=2))
        return 0
    print(f"pid {snap['pid']}, {snap['backend']} backend, {snap['zones']} zone(s), "
          f"{snap['records']} records; tcp queries {snap['tcp_queries']}, reloads {snap['reloads']} "
          f"(failed {snap['reload_failures']})")
    for i, w in enumerate(snap["workers"]):
        print(f"worker {i}: {format_worker(w)}")
    return 0


def _replay(args) -> int:
    from stormpy import _core
    from stormpy.pcap import read_frames, write_frames
    from stormpy.server import format_counters
    from stormpy.dnscompile import compile_zones
    from stormpy.zone import load_zone

    if args.origin and len(args.origin) != len(args.zones):
        raise StormpyError("give one --origin per zone file, in the same order, or none")
    zones = [load_zone(p, o) for p, o in zip(args.zones, args.origin or [None] * len(args.zones))]
    table, _ = compile_zones(zones)
    frames = read_frames(args.pcap)
    ref = _core.TableRef(table, 1)
    replies, c = _core.run_memory_worker(ref, frames, port=args.port, batch=args.batch,
                                         max_udp=args.max_udp,
                                         capture_max=len(frames) * 2050 if args.out else 0,
                                         mode=args.mode)
    if args.out:
        write_frames(args.out, replies)
    c.update(tcp_queries=0)
    precopy = (f" precopy hits={c['precopy_hits']} fills={c['precopy_fills']} "
               f"fallbacks={c['precopy_fallbacks']}" if args.mode == "precopy" else "")
    print(f"{len(frames)} frames: {format_counters(c)} not_ours={c['not_ours']} "
          f"malformed={c['malformed']} bad_source={c['bad_source']}{precopy}")
    return 0


def _backends(args) -> int:
    from stormpy.backends import report

    print(f"{'backend':8} {'compiled':9} {'usable':7} why not")
    for name, compiled, usable, why in report():
        print(f"{name:8} {'yes' if compiled else 'no':9} {'yes' if usable else 'no':7} {why}".rstrip())
    return 0


def serving_config(args, default_listen: tuple[str, int], **extra):
    """A DnsConfig from add_serving_arguments()'s options; StormpyError on a bad mix."""
    from stormpy.server import DnsConfig, parse_listen

    logging.basicConfig(level=logging.INFO, format="%(asctime)s stormpy: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr)
    backend = args.backend
    if backend is None:
        from stormpy.backends import why_unusable
        backend = ("xdp" if why_unusable("xdp") is None else "packet") if args.iface else "socket"
    if backend != "socket" and not args.iface:
        raise StormpyError(f"--backend {backend} needs --iface")
    if args.iface and backend == "socket":
        raise StormpyError("--iface serves on rings: use --backend packet, or --listen for sockets")
    if args.mode != "memcpy" and not args.iface:
        raise StormpyError(f"--mode {args.mode} is for frame backends: it needs --iface")
    if args.iface and args.listen:
        raise StormpyError("--listen is for the socket backend; with --iface use --port")
    return DnsConfig(listen=[parse_listen(x, default_listen[1]) for x in args.listen] or
                     [default_listen], workers=args.workers, batch=args.batch,
                     stats_interval={0: 0.0, 1: 10.0}.get(args.verbose, 1.0),
                     iface=args.iface, backend=backend, queues=args.queues, port=args.port,
                     cpus=args.cpus, busy_poll=args.poll == "busy", xdp_mode=args.xdp_mode,
                     copy_mode=args.copy_mode, tx_flush_us=args.tx_flush_us, mode=args.mode,
                     control=DEFAULT_CONTROL if args.control is None else (args.control or None),
                     control_required=bool(args.control), user=args.user, **extra)


def _serve_dns(args) -> int:
    from stormpy.server import serve_dns

    cfg = serving_config(args, ("127.0.0.1", 5353), zones=args.zones, origins=args.origin,
                         max_udp=args.max_udp, chaos_version=args.chaos_version,
                         chaos_identity=args.chaos_identity, rrl_rate=args.rrl_rate,
                         rrl_slip=args.rrl_slip, rrl_ipv4_prefix=args.rrl_ipv4_prefix,
                         rrl_ipv6_prefix=args.rrl_ipv6_prefix, rrl_allow=args.rrl_allow)
    serve_dns(cfg)
    return 0


def _bench(args) -> int:
    from stormpy.bench.cli import run
    return run(args)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return {"serve-dns": _serve_dns, "check-zone": _check_zone,
                "backends": _backends, "stats": _stats, "replay": _replay,
                "bench": _bench}[args.command](args)
    except StormpyError as e:
        print(f"stormpy: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
