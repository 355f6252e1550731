"""The stormpy command line. User errors end in one line on stderr, never a traceback."""
from __future__ import annotations

import argparse
import os
import sys

from stormpy import __version__, argtypes
from stormpy.config import DEFAULT_CONTROL, add_serving_arguments
from stormpy.errors import StormpyError

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

    h = sub.add_parser("serve-http", help="serve a directory over HTTP/1.1",
                       description="Serve the files under SITE as a static web server (Sandstorm): "
                       "every answer is built at start-up. SIGHUP reloads the site; a site that "
                       "fails to load keeps the old one serving.")
    h.add_argument("site", metavar="SITE", help="the directory to serve")
    h.add_argument("--max-connections", type=argtypes.positive, default=1024, metavar="N",
                   help="open connections per worker; the oldest idle one makes room (default 1024)")
    h.add_argument("--request-timeout", type=argtypes.seconds, default=10.0, metavar="S",
                   help="a request must arrive whole within S seconds, else 408 (default 10)")
    h.add_argument("--keepalive-timeout", type=argtypes.seconds, default=30.0, metavar="S",
                   help="close a kept-alive connection idle for S seconds (default 30)")
    h.add_argument("--send-timeout", type=argtypes.seconds, default=30.0, metavar="S",
                   help="close a connection whose client reads nothing for S seconds (default 30)")
    add_serving_arguments(h, default_port=80)

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

    im = sub.add_parser("impair", help="forward frames between two interfaces with loss, "
                        "duplication, delay and reordering",
                        description="Join two links with a lossy, slow, reordering path (what "
                        "netem does, for kernels without it). Root; run it in a namespace that "
                        "holds both interfaces. The hosts on either side must send real frames: "
                        "ethtool -K IFACE tx off tso off gso off on their interfaces. Prints each "
                        "direction's counters at the end.")
    from stormpy.impair import add_arguments as add_impair_arguments
    add_impair_arguments(im)

    tp = sub.add_parser("tap", help="capture what a running server's ring workers receive "
                        "and send (pcapng)",
                        description="Copy the frames a running server's ring workers receive "
                        "and send, which tcpdump cannot see on AF_XDP, into a pcapng file or "
                        "standard output (stormpy tap -w - | wireshark -k -i -). The workers copy "
                        "only while a tap is attached; it detaches at -c, --duration, SIGINT or "
                        "SIGTERM, and a tap that dies is detached within two seconds.")
    from stormpy.tap import add_arguments as add_tap_arguments
    add_tap_arguments(tp)

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
    from stormpy.dns.compiler import compile_zones
    from stormpy.dns.zone import load_zones

    zones = load_zones(args.zones, args.origin)
    for zone in zones:
        print(f"{zone.path}: zone {zone.origin.to_text()} loaded, {zone.record_count} records")
    _, stats = compile_zones(zones)
    print(f"compiled {stats.zones} zone(s): {stats.records} records, {stats.names} names, "
          f"{stats.keys} lookup keys, {stats.responses} prepackaged responses, "
          f"{stats.memory_bytes} bytes of table")
    return 0


def _stats(args) -> int:
    import json

    from stormpy.control import read_snapshot
    from stormpy.server import format_worker

    snap = read_snapshot(args.control)
    if args.json:
        print(json.dumps(snap, indent=2))
        return 0
    if "site" in snap:
        from stormpy.http.server import format_http_worker
        print(f"pid {snap['pid']}, {snap['backend']} backend, serving {snap['serving']}; "
              f"reloads {snap['reloads']} (failed {snap['reload_failures']})")
        for i, w in enumerate(snap["workers"]):
            print(f"worker {i}: {format_http_worker(w)}")
        return 0
    print(f"pid {snap['pid']}, {snap['backend']} backend, {snap['zones']} zone(s), "
          f"{snap['records']} records; tcp queries {snap['tcp_queries']}, reloads {snap['reloads']} "
          f"(failed {snap['reload_failures']})")
    for i, w in enumerate(snap["workers"]):
        print(f"worker {i}: {format_worker(w)}")
    return 0


def _replay(args) -> int:
    from stormpy import _core
    from stormpy.dns.compiler import compile_zones
    from stormpy.dns.zone import load_zones
    from stormpy.pcap import read_frames, write_frames
    from stormpy.server import format_counters

    table, _ = compile_zones(load_zones(args.zones, args.origin))
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


def _serve_dns(args) -> int:
    from stormpy.config import serving_config
    from stormpy.dns.server import DnsConfig, serve_dns

    cfg = serving_config(args, ("127.0.0.1", 5353), DnsConfig, zones=args.zones, origins=args.origin,
                         max_udp=args.max_udp, chaos_version=args.chaos_version,
                         chaos_identity=args.chaos_identity, rrl_rate=args.rrl_rate,
                         rrl_slip=args.rrl_slip, rrl_ipv4_prefix=args.rrl_ipv4_prefix,
                         rrl_ipv6_prefix=args.rrl_ipv6_prefix, rrl_allow=args.rrl_allow)
    serve_dns(cfg)
    return 0


def _serve_http(args) -> int:
    from stormpy.config import serving_config
    from stormpy.http.server import HttpConfig, serve_http

    cfg = serving_config(args, ("127.0.0.1", 8080), HttpConfig, wildcard=True, site=args.site,
                         max_connections=args.max_connections,
                         request_timeout=args.request_timeout,
                         idle_timeout=args.keepalive_timeout, send_timeout=args.send_timeout)
    serve_http(cfg)
    return 0


def _impair(args) -> int:
    from stormpy.impair import run
    return run(args)


def _tap(args) -> int:
    from stormpy.tap import run
    return run(args)


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
        return {"serve-dns": _serve_dns, "serve-http": _serve_http, "impair": _impair,
                "tap": _tap,
                "check-zone": _check_zone,
                "backends": _backends, "stats": _stats, "replay": _replay,
                "bench": _bench}[args.command](args)
    except StormpyError as e:
        print(f"stormpy: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:      # `stormpy stats | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
