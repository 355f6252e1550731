"""The kernel sockets a server opens: UDP sockets shared by workers (SO_REUSEPORT), TCP
listeners, and the sinks that keep the kernel quiet for ports answered on rings. Every
bind failure is one line that says why."""
from __future__ import annotations

import ipaddress
import logging
import socket
import struct

from stormpy.errors import StormpyError

log = logging.getLogger("stormpy")


def bind_error(proto: str, host: str, port: int, err: OSError) -> StormpyError:
    reason = err.strerror or str(err)
    hint = ""
    if err.errno == 13:
        hint = " (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
    elif err.errno == 98:
        hint = " (another server is using it)"
    elif err.errno == 99:
        hint = " (no interface has this address)"
    return StormpyError(f"cannot listen on {proto} {host}:{port}: {reason}{hint}")


def family_of(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


SO_BUSY_POLL = 46
BUSY_POLL_US = 50        # the kernel spins this long for a datagram before sleeping
IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)   # Python names it from 3.12 on


def _shared_port(host: str, port: int, count: int, kind: int, proto: str, prepare):
    """count sockets of `kind` bound to host:port through SO_REUSEPORT, each set up by
    prepare(sock, first) before its bind. A plain bind first makes sure no other
    process holds the port, reuseport or not."""
    family = family_of(host)
    try:
        with socket.socket(family, kind) as probe:
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if kind == socket.SOCK_STREAM:   # a listener's old connections may linger
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as e:
        raise bind_error(proto, host, port, e) from None
    socks = []
    try:
        for i in range(count):
            s = socket.socket(family, kind)
            socks.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            prepare(s, i == 0)
            s.bind((host, port))
            if kind == socket.SOCK_STREAM:   # a connection flood overflows a short queue
                s.listen(socket.SOMAXCONN)
                s.setblocking(False)
    except OSError as e:
        for s in socks:
            s.close()
        raise bind_error(proto, host, port, e) from None
    return socks


def open_udp_sockets(host: str, port: int, count: int,
                     busy_poll: bool = False) -> list[socket.socket]:
    """count UDP sockets sharing host:port, one per worker. busy_poll asks the kernel to
    spin for datagrams (SO_BUSY_POLL), where it lets us. A wildcard host gets each query's
    destination with it (IP_PKTINFO, IPV6_RECVPKTINFO), from before the bind so no query
    lacks it: the socket backend answers from that address. [::] is IPv6 only (V6ONLY,
    as Knot and NSD bind it); 0.0.0.0 serves IPv4."""
    def prepare(s, first):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 100_000))
        if ipaddress.ip_address(host).is_unspecified:
            if family_of(host) == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
            else:
                s.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
        if busy_poll:
            try:
                s.setsockopt(socket.SOL_SOCKET, SO_BUSY_POLL, BUSY_POLL_US)
            except OSError as e:
                if first:
                    log.warning("no busy polling on sockets (SO_BUSY_POLL: %s)", e.strerror)
    return _shared_port(host, port, count, socket.SOCK_DGRAM, "udp", prepare)


# A DNS-over-TCP connection's kernel send buffer: a largest answer and its length. A
# client that pipelines and never reads pinned megabytes a connection before.
TCP_SEND_BUFFER = 65536 + 2


def open_tcp_listeners(host: str, port: int, count: int, send_buffer: int = 0) -> list[socket.socket]:
    """count listening TCP sockets sharing host:port, one per worker: the kernel
    spreads connections over them. send_buffer: each connection's kernel send buffer
    (the connections inherit it), else the kernel's, which grows to megabytes for a
    client that does not read."""
    def prepare(s, first):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if send_buffer:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    return _shared_port(host, port, count, socket.SOCK_STREAM, "tcp", prepare)


def open_sinks(port: int) -> list[socket.socket]:
    """UDP sockets on the served port that are never read: the kernel still sees every
    frame a ring backend answers, and without a socket it would send ICMP port
    unreachable for each query."""
    sinks = []
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        s = socket.socket(family, socket.SOCK_DGRAM)
        try:
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
            s.bind((host, port))
        except OSError as e:
            s.close()
            for x in sinks:
                x.close()
            if e.errno == 98:
                raise StormpyError(f"UDP port {port} is in use on this host: that server would "
                                   f"answer the same queries; stop it or choose --port") from None
            raise bind_error("udp", host, port, e) from None
        sinks.append(s)
    return sinks
