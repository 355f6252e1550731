"""A server's configuration: the serving options every server takes on the command line
(add_serving_arguments), checked and turned into a ServerConfig (serving_config)."""
from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import socket
from dataclasses import dataclass, field

from stormpy import argtypes
from stormpy.errors import StormpyError
from stormpy.logs import LOG_HELP, setup_logging

# Root serves from /run like other daemons; anyone else from their own runtime dir.
DEFAULT_CONTROL = ("/run/stormpy.sock" if os.geteuid() == 0 else
                   os.path.join(os.environ.get("XDG_RUNTIME_DIR") or "/tmp", f"stormpy-{os.getuid()}.sock"))


@dataclass
class ServerConfig:
    """What every server takes: where and how its workers serve (the command line's
    serving options). An application's config adds its own fields."""
    listen: list[tuple[str, int]] = field(default_factory=lambda: [("127.0.0.1", 5353)])
    workers: int = 0
    batch: int = 32
    max_udp: int = 1232
    stats_interval: float = 0.0
    control: str | None = None       # Unix socket answering `stormpy ctl`
    control_group: str | None = None # its group, whose members may use it too (mode 0660)
    control_required: bool = False   # False: the default path, given up with a warning if taken
    iface: str | None = None         # serve on this interface's rings instead of sockets
    backend: str = "socket"          # socket | packet
    queues: int = 0                  # frame workers (default: the device's RX queues)
    port: int = 53                   # the UDP/TCP port served with --iface
    cpus: list[int] = field(default_factory=list)
    poll: str = "block"              # block | busy | napi (napi: AF_XDP only)
    xdp_mode: str = "auto"           # auto | native | generic
    tx_flush_us: int = 0             # 0: kick TX every batch
    copy_mode: str = "auto"          # auto | copy | zerocopy
    tx_limit: int = 0                # AF_XDP: bytes in flight on the TX ring at most (0: off)
    user: str | None = None          # run as this user once rings and sockets are set up
    mode: str = "memcpy"             # memcpy | precopy (frame backends only)
    rrl_rate: int = 0                # response rate limiting: answers/s per prefix (0: off)
    rrl_slip: int = 2                # every Nth limited answer goes out truncated (0: none)
    rrl_ipv4_prefix: int = 24
    rrl_ipv6_prefix: int = 56
    rrl_allow: list[str] = field(default_factory=list)   # prefixes never limited
    metrics: tuple[str, int] | None = None   # Prometheus exposition (stormpy.metrics)
    # `stormpy serve -c FILE`: the file and its bytes' digest at start, so that a reload
    # can say the file changed (a reload reads the zones or the site, not the file)
    config_file: str | None = None
    config_digest: str = ""
    tap_buffer: int = 4              # MiB per ring worker for `stormpy tap` (0: no tap)


def parse_listen(text: str, default_port: int = 53, option: str = "--listen") -> tuple[str, int]:
    """ADDR:PORT, [V6ADDR]:PORT, or a bare ADDR (default_port); 0.0.0.0 and [::] serve
    every address of their family (see sockets.open_udp_sockets). option names the
    option in errors."""
    host, port = text, str(default_port)
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise StormpyError(f"{option} {text}: expected [ADDRESS]:PORT")
        port = rest[1:] or str(default_port)
    elif text.count(":") == 1:
        host, port = text.split(":")
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        host = socket.inet_ntop(family, socket.inet_pton(family, host))   # one spelling each
        number = int(port)
        if not 0 < number < 65536:
            raise ValueError
    except (OSError, ValueError):
        raise StormpyError(f"{option} {text}: expected ADDRESS:PORT with a numeric address "
                           f"and a port from 1 to 65535") from None
    return host, number


def parse_allow(texts: list[str]) -> list[tuple[int, bytes, int]]:
    """--rrl-allow prefixes as (family, packed network, length)."""
    if len(texts) > 16:
        raise StormpyError(f"{len(texts)} --rrl-allow prefixes: at most 16")
    out = []
    for text in texts:
        try:
            net = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise StormpyError(f"--rrl-allow {text}: expected a prefix like 192.0.2.0/24 "
                               f"or 2001:db8::/48") from None
        out.append((net.version, net.network_address.packed, net.prefixlen))
    return out


def add_serving_arguments(s: argparse.ArgumentParser, default_port: int) -> None:
    """The options every server takes (serve-dns, and custom responders' serve())."""
    s.add_argument("--listen", action="append", default=[], metavar="ADDR:PORT",
                   help="address to serve on, repeatable; [::1]:5353 for IPv6, 0.0.0.0:53 or [::]:53 for "
                   "every address; a bare address serves on --port (default 127.0.0.1:5353 for "
                   "serve-dns)")
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
                       help=f"UDP port served with --iface, and on a --listen address given "
                            f"without one (default {default_port})")
    rings.add_argument("--queues", type=argtypes.positive, default=0, metavar="N",
                       help="workers on the interface (default: its RX queue count)")
    rings.add_argument("--cpus", type=argtypes.cpu_list, default=[], metavar="LIST",
                       help="pin worker i to the i-th CPU of LIST, e.g. 0,1 or 0-3 (sockets too)")
    rings.add_argument("--tx-flush-us", type=argtypes.flush_us, default=0, metavar="US",
                       help="under load, kick TX at most every US microseconds (the paper's dt, "
                       "e.g. 80); an idle ring flushes at once (default 0: every batch)")
    rings.add_argument("--tx-limit", type=argtypes.tx_limit, default=0, metavar="BYTES",
                       help="AF_XDP: keep at most BYTES of replies in flight on the TX ring, "
                       "like the kernel's byte queue limits; at the limit replies wait and no "
                       "frames are taken from RX (default 0: no limit)")
    rings.add_argument("--poll", choices=("block", "busy", "napi"), default="block",
                       help="wait for frames in poll(), spin on the ring, or (AF_XDP) have the "
                       "kernel busy-poll the queue's NAPI in the worker while frames flow and "
                       "block when they stop (default block)")
    rings.add_argument("--tap-buffer", type=argtypes.tap_buffer, default=4, metavar="MIB",
                       help="each worker's ring for `stormpy tap`, in MiB (default 4; memory is "
                       "taken only while a tap runs; 0: no tap)")
    s.add_argument("--control", default=None, metavar="PATH",
                   help=f"Unix socket for `stormpy ctl` (default {DEFAULT_CONTROL}; '' for "
                   f"none); mode 0600: root and the server's user only")
    s.add_argument("--control-group", metavar="NAME",
                   help="let this group's members use the control socket too (mode 0660)")
    s.add_argument("--metrics", metavar="ADDR:PORT",
                   help="serve Prometheus metrics at http://ADDR:PORT/metrics, e.g. "
                   "127.0.0.1:9153 or [::1]:9153 (docs/OPERATING.md lists them)")
    s.add_argument("--log", default="stderr", metavar="stderr|syslog|FILE", help=LOG_HELP)
    s.add_argument("-v", "--verbose", action="count", default=0,
                   help="print counters every 10 s (-vv: every second)")


def serving_config(args, default_listen: tuple[str, int], config=ServerConfig, **extra):
    """A `config` (ServerConfig or an application's subclass) from
    add_serving_arguments()'s options and `extra` fields; StormpyError on a bad mix."""
    setup_logging(args.log)
    backend = args.backend
    if backend is None and args.iface:
        from stormpy.backends import why_unusable
        why = why_unusable("xdp")
        backend = "xdp" if why is None else "packet"
        if why is not None:
            logging.getLogger("stormpy").warning("--iface %s: AF_XDP %s; serving on AF_PACKET",
                                                 args.iface, why)
    backend = backend or "socket"
    if backend != "socket" and not args.iface:
        raise StormpyError(f"--backend {backend} needs --iface")
    if args.iface and backend == "socket":
        raise StormpyError("--iface serves on rings: use --backend packet, or --listen for sockets")
    if args.mode != "memcpy" and not args.iface:
        raise StormpyError(f"--mode {args.mode} is for frame backends: it needs --iface")
    if args.poll == "napi" and backend != "xdp":
        raise StormpyError("--poll napi is for --backend xdp (the kernel busy-polls AF_XDP "
                           "sockets); --poll busy spins on any ring")
    if args.tx_limit and backend != "xdp":
        raise StormpyError("--tx-limit is for --backend xdp (it counts on the completion ring)")
    if args.iface and args.listen:
        raise StormpyError("--listen is for the socket backend; with --iface use --port")
    listen = [parse_listen(x, args.port) for x in args.listen]
    twice = next((a for i, a in enumerate(listen) if a in listen[:i]), None)
    if twice:       # else the second bind reads as another server holding the port
        host = f"[{twice[0]}]" if ":" in twice[0] else twice[0]
        raise StormpyError(f"--listen {host}:{twice[1]} is given twice")
    # a bare address: the protocol's port (as Knot DNS and nginx read one), not the
    # default address's, which is unprivileged for a first try
    return config(listen=listen or
                     [default_listen], workers=args.workers, batch=args.batch,
                     stats_interval={0: 0.0, 1: 10.0}.get(args.verbose, 1.0),
                     iface=args.iface, backend=backend, queues=args.queues, port=args.port,
                     cpus=args.cpus, poll=args.poll, xdp_mode=args.xdp_mode,
                     copy_mode=args.copy_mode, tx_flush_us=args.tx_flush_us, mode=args.mode,
                     tx_limit=args.tx_limit,
                     tap_buffer=args.tap_buffer,
                     control=DEFAULT_CONTROL if args.control is None else (args.control or None),
                     control_required=bool(args.control), control_group=args.control_group,
                     user=args.user, metrics=parse_listen(args.metrics, 9153, "--metrics")
                     if args.metrics else None, **extra)
