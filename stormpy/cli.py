"""The stormpy command line. User errors end in one line on stderr, never a traceback."""
from __future__ import annotations

import argparse
import os
import sys

from stormpy import __version__, argtypes
from stormpy.config import add_serving_arguments
from stormpy.errors import StormpyError

class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser (and its own subcommands'): an argument it does not know is
    its error, shown with its usage. argparse would hand it up to `stormpy`, whose usage
    says nothing about the subcommand's options."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extra = super().parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return namespace, extra


def _add_precopy_min(parser) -> None:
    parser.add_argument("--precopy-min-bytes", type=argtypes.non_negative, default=None,
                        metavar="BYTES", help="with --mode precopy, answers shorter than BYTES "
                        "are rendered as in memcpy mode, where that is faster (default 384; 0: "
                        "copy every answer)")


def _check_precopy_min(precopy_min, mode: str) -> None:
    if precopy_min is not None and mode != "precopy":
        raise StormpyError("--precopy-min-bytes is for --mode precopy")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="stormpy", description="Prepackaged-response packet "
                                "processing: an authoritative DNS server with a C fast path.")
    p.add_argument("--version", action="version", version=f"stormpy {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)

    s = sub.add_parser("serve-dns", help="serve zone files over UDP and TCP",
                       description="Serve zone files as an authoritative DNS server. "
                       "SIGHUP reloads the zones; a zone that fails to load keeps the old one serving.")
    s.add_argument("zones", nargs="*", metavar="ZONE", help="RFC 1035 master file")
    s.add_argument("--origin", action="append", default=[], metavar="NAME",
                   help="zone origin, once per ZONE in the same order (default: $ORIGIN or the SOA owner)")
    s.add_argument("--max-udp", type=argtypes.max_udp, default=1232, metavar="BYTES",
                   help="largest UDP response with EDNS (default 1232)")
    _add_precopy_min(s)
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
    drv = s.add_argument_group("answers in the driver (--iface with --backend xdp)")
    drv.add_argument("--xdp-answer", action=argparse.BooleanOptionalAction, default=None,
                     help="answer in the XDP program itself (XDP_TX, no socket, no copy) the "
                     "IPv4 queries whose answers fit in 512 bytes: the names and types the "
                     "zones hold, A and AAAA at every name, NXDOMAIN and NODATA; the rest goes "
                     "to the workers (default: on with --backend xdp, except with --rrl-rate "
                     "and on a veth in native mode, whose peer drops XDP_TX frames unless it "
                     "has an XDP program too)")
    drv.add_argument("--xdp-answer-entries", type=argtypes.positive, default=100_000, metavar="N",
                     help="answers the driver holds at most, about 900 bytes of kernel memory "
                     "each (default 100000)")
    tcp = s.add_argument_group("DNS over TCP (each TCP worker an epoll loop in C)")
    tcp.add_argument("--tcp-workers", type=argtypes.positive, default=1, metavar="N",
                     help="TCP worker processes per listening address (default 1)")
    tcp.add_argument("--tcp-max-clients", type=argtypes.positive, default=8192, metavar="N",
                     help="connections open at once over all TCP workers, memory for them "
                     "taken at start; a full server closes its oldest idle one for a new one "
                     "(default 8192)")
    tcp.add_argument("--tcp-max-per-source", type=argtypes.non_negative, default=100, metavar="N",
                     help="connections one address (an IPv6 /64) may hold; 0: no limit "
                     "(default 100)")
    tcp.add_argument("--tcp-io-timeout", type=argtypes.seconds, default=0.5, metavar="S",
                     help="a query must arrive, and an answer leave, within S seconds of its "
                     "first byte (default 0.5)")
    tcp.add_argument("--tcp-idle-timeout", type=argtypes.seconds, default=10.0, metavar="S",
                     help="close a connection without a query for S seconds, less once half "
                     "of --tcp-max-clients are open (default 10)")
    xfr = s.add_argument_group("zone transfers (RFC 1995, 1996, 5936; TSIG RFC 8945)")
    xfr.add_argument("--secondary", action="append", default=[], metavar="ZONE",
                     help="follow ZONE from its --primary: AXFR at start, the SOA's refresh, "
                     "retry and expire timers, NOTIFY, IXFR; repeatable")
    xfr.add_argument("--primary", action="append", default=[], metavar="ADDR[:PORT]",
                     help="the primary of the --secondary zones: one for all, or one per "
                     "--secondary in the same order")
    xfr.add_argument("--tsig", metavar="NAME:ALG:SECRET",
                     help="TSIG key (e.g. hmac-sha256, secret in base64) for transfers in and "
                     "out and for NOTIFY; with it, unsigned ones are refused")
    xfr.add_argument("--zone-dir", metavar="DIR",
                     help="where transferred zones are kept, so a restart serves at once "
                     "(default: the working directory; with serve -c, the file's)")
    xfr.add_argument("--transfer-allow", action="append", default=[], metavar="PREFIX",
                     help="let this prefix transfer zones (AXFR, IXFR) from this server; "
                     "repeatable (default: nobody)")
    xfr.add_argument("--notify", action="append", default=[], metavar="ADDR[:PORT]",
                     help="send NOTIFY to this secondary when a zone's serial changes "
                     "(signed with --tsig); repeatable")
    s.add_argument("--chaos-version", type=argtypes.txt_string, metavar="TEXT",
                   help="answer CH TXT version.bind/version.server with TEXT (default: REFUSED)")
    s.add_argument("--chaos-identity", type=argtypes.txt_string, metavar="TEXT",
                   help="answer CH TXT id.server/hostname.bind with TEXT (default: REFUSED)")
    s.add_argument("--nsid", type=argtypes.nsid, default=b"", metavar="ID",
                   help="send ID to queries that ask for the server's identifier (NSID, RFC "
                   "5001; dig +nsid): text, or 0x and hex digits; at most 128 bytes "
                   "(default: none)")
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
    h.add_argument("--gso", choices=("auto", "on", "off"), default="auto",
                   help="with --iface: hand the kernel up to 64 KB of an answer at a time to cut "
                   "into segments (TSO/GSO), through a TX-only packet socket beside the rings; off: one frame a "
                   "segment, each from a ready copy in --mode precopy (default: on in memcpy "
                   "mode, off in precopy mode)")
    add_serving_arguments(h, default_port=80)
    from stormpy.configfile import register as register_config   # serve -c, check-config
    register_config(sub)

    from stormpy.ctl import register as register_ctl   # `stormpy ctl`, `stormpy stats`
    register_ctl(sub)

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
    _add_precopy_min(rp)

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

    gn = sub.add_parser("gen", help="load generator and latency meter: DNS, UDP echo or HTTP, "
                        "open or closed loop",
                        description="Send DNS queries, UDP echo datagrams or HTTP GETs to a "
                        "server at a fixed rate (--rate, open loop) or with N in flight "
                        "(--outstanding, closed loop), match every reply to its request, and "
                        "report sent, received, lost, rates and latency percentiles. At a "
                        "--rate, latency counts from when each request was due, so a sender or "
                        "server that falls behind shows in it (coordinated omission corrected).")
    from stormpy.gen import add_arguments as add_gen_arguments
    add_gen_arguments(gn)

    lb = sub.add_parser("lab", help="the labs: run a seed's experiment in namespaces, get a "
                        "plot and a report", description="Labs for a course on specialized "
                        "network stacks (docs/labs/): each builds network namespaces joined by a "
                        "veth pair, measures with `stormpy gen`, and writes a CSV, a plot and a "
                        "report answering its handout's questions.")
    from stormpy.lab.cli import add_arguments as add_lab_arguments
    add_lab_arguments(lb)

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


def _ctl(args) -> int:
    from stormpy.ctl import run
    return run(args)


def _replay(args) -> int:
    from stormpy import _core
    from stormpy.dns.compiler import compile_zones
    from stormpy.dns.zone import load_zones
    from stormpy.pcap import read_frames, write_frames
    from stormpy.counters import format_counters

    _check_precopy_min(args.precopy_min_bytes, args.mode)
    table, _ = compile_zones(load_zones(args.zones, args.origin))
    frames = read_frames(args.pcap)
    ref = _core.TableRef(table, 1)
    replies, c = _core.run_memory_worker(ref, frames, port=args.port, batch=args.batch,
                                         max_udp=args.max_udp,
                                         capture_max=len(frames) * 2050 if args.out else 0,
                                         mode=args.mode, precopy_min=args.precopy_min_bytes)
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


def dns_config(args):
    """serve-dns's DnsConfig from its options (the command line's or a config file's)."""
    from stormpy.config import serving_config
    from stormpy.dns.server import DnsConfig

    cfg = serving_config(args, ("127.0.0.1", 5353), DnsConfig, zones=args.zones, origins=args.origin,
                         max_udp=args.max_udp, chaos_version=args.chaos_version,
                         chaos_identity=args.chaos_identity, nsid=args.nsid,
                         rrl_rate=args.rrl_rate,
                         rrl_slip=args.rrl_slip, rrl_ipv4_prefix=args.rrl_ipv4_prefix,
                         rrl_ipv6_prefix=args.rrl_ipv6_prefix, rrl_allow=args.rrl_allow,
                         tcp_workers=args.tcp_workers, tcp_max_clients=args.tcp_max_clients,
                         tcp_max_per_source=args.tcp_max_per_source,
                         tcp_io_timeout=args.tcp_io_timeout, tcp_idle_timeout=args.tcp_idle_timeout,
                         secondaries=args.secondary, primaries=args.primary, tsig=args.tsig,
                         zone_dir=args.zone_dir or ".", transfer_allow=args.transfer_allow,
                         notify=args.notify, xdp_answer=args.xdp_answer,
                         xdp_answer_entries=args.xdp_answer_entries,
                         precopy_min=args.precopy_min_bytes)
    _check_precopy_min(cfg.precopy_min, cfg.mode)
    if cfg.xdp_answer is None:
        from stormpy.dns.xdp import answers_by_default
        cfg.xdp_answer = answers_by_default(cfg)
    elif cfg.xdp_answer and (not cfg.iface or cfg.backend != "xdp"):
        raise StormpyError("--xdp-answer answers in the AF_XDP program: it needs --iface "
                           "and --backend xdp")
    if cfg.xdp_answer and cfg.rrl_rate:
        raise StormpyError("--xdp-answer with --rrl-rate: answers in the driver are not "
                           "rate-limited; use one or the other")
    if not cfg.zones and not cfg.secondaries:
        raise StormpyError("nothing to serve: give zone files or --secondary ZONE")
    from stormpy.dns.server import transfer_settings
    transfer_settings(cfg)
    return cfg


def http_config(args):
    """serve-http's HttpConfig from its options (the command line's or a config file's)."""
    from stormpy.config import serving_config
    from stormpy.http.server import HttpConfig

    if args.gso == "on" and not args.iface:
        raise StormpyError("--gso on is for stormpy's own TCP on the rings: it needs --iface")
    cfg = serving_config(args, ("127.0.0.1", 8080), HttpConfig, site=args.site,
                         max_connections=args.max_connections,
                         request_timeout=args.request_timeout,
                         idle_timeout=args.keepalive_timeout, send_timeout=args.send_timeout,
                         gso=args.gso == "on" or (args.gso == "auto" and args.mode == "memcpy"))
    return cfg


def _serve_dns(args) -> int:
    from stormpy.dns.server import serve_dns
    serve_dns(dns_config(args))
    return 0


def _serve_http(args) -> int:
    from stormpy.http.server import serve_http
    serve_http(http_config(args))
    return 0


def _config_command(args) -> int:
    from stormpy import configfile
    from stormpy.checkconfig import check
    return {"serve": configfile.serve, "check-config": check}[args.command](args)


def _impair(args) -> int:
    from stormpy.impair import run
    return run(args)


def _tap(args) -> int:
    from stormpy.tap import run
    return run(args)


def _gen(args) -> int:
    from stormpy.gen import run
    return run(args)


def _lab(args) -> int:
    from stormpy.lab.cli import run
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
    if args.command in ("serve-dns", "serve-http", "serve"):
        from stormpy.reloads import defer_sighup
        defer_sighup()
    try:
        return {"serve-dns": _serve_dns, "serve-http": _serve_http, "impair": _impair,
                "tap": _tap, "gen": _gen, "lab": _lab,
                "check-zone": _check_zone, "serve": _config_command, "check-config": _config_command,
                "backends": _backends, "stats": _ctl, "ctl": _ctl, "replay": _replay,
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
