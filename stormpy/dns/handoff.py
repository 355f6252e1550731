"""The server process's end of what the C workers hand up (native/include/stormpy/app/
dns/handoff.h): UDP NOTIFY (and UPDATE, IXFR over UDP) with their sender, and TCP
connections whose query is an AXFR or IXFR.

Why this design: the fast path stays QUERY-only and pays nothing for it (the test is
where the table had no answer), and everything about transfers is dnspython in the
one process that owns the zones. A Unix datagram socket made before the workers fork
carries each message whole; a connection rides along as a descriptor (SCM_RIGHTS),
so the transfer continues on the client's own TCP connection. A UDP answer leaves
from a socket on the served port: the workers' own (sockets) or the sinks (rings)."""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import struct
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import dns.exception
import dns.flags
import dns.message
import dns.opcode
import dns.rcode

from stormpy.dns.transfer import (TransferPolicy, error_reply, is_tsig_error, keyring_of,
                                  one_line, parse_message, same_address, serve_stream,
                                  transfer_replies)

log = logging.getLogger("stormpy")

# Connections handed up are served by threads of their own, not the default executor's,
# which reloads need; a bounded number of them, and fewer from one source than there are
# threads, so that one source never holds them all.
STREAM_THREADS = 4
STREAM_MOST = 64             # handed-up connections served or waiting; past it, closed
STREAM_PER_SOURCE = 2
REFUSALS_LOG_SECONDS = 10.0  # refused connections are summed up in one line this often
# A transfer's send buffer: the DNS listeners fix their connections' small
# (sockets.TCP_SEND_BUFFER), which would hold a large zone to a buffer a round trip.
TRANSFER_SEND_BUFFER = 4 << 20

HEADER = struct.Struct("=BBH16s16s")     # struct sp_dns_handoff
IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)     # Linux's, where Python lacks the name
KIND_UDP, KIND_TCP = 1, 2
MAX_MESSAGE = 65536 + HEADER.size


class Handoff:
    """The socket pair; workers get worker_fd, the event loop reads the other end."""

    def __init__(self):
        self.up, self.down = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.up.setblocking(False)
        for s in (self.up, self.down):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)

    @property
    def worker_fd(self) -> int:
        return self.down.fileno()

    def fds(self) -> set[int]:
        return {self.up.fileno(), self.down.fileno()}

    def start(self, on_datagram, on_stream) -> None:
        """on_datagram(message, (address, port), local address or None); on_stream(socket,
        bytes read)."""
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(self.up.fileno(), self._read, on_datagram, on_stream)

    def _read(self, on_datagram, on_stream) -> None:
        for _ in range(64):                  # a burst, then the loop's other work
            try:
                data, fds, _, _ = socket.recv_fds(self.up, MAX_MESSAGE, 1)
            except (BlockingIOError, InterruptedError):
                return
            if len(data) < HEADER.size:
                for fd in fds:
                    socket.close(fd)
                continue
            kind, family, port, addr, local = HEADER.unpack_from(data)
            body = data[HEADER.size:]
            if kind == KIND_TCP and fds:
                on_stream(socket.socket(fileno=fds[0]), body)
            elif kind == KIND_UDP:
                size = 4 if family == 4 else 16
                to = ipaddress.ip_address(local[:size]) if any(local[:size]) else None
                on_datagram(body, (str(ipaddress.ip_address(addr[:size])), port), to)

    def close(self) -> None:
        if getattr(self, "loop", None) is not None and not self.loop.is_closed():
            self.loop.remove_reader(self.up.fileno())
        self.up.close()
        self.down.close()


def _pktinfo(local) -> tuple[int, int, bytes]:
    """The control message that makes a wildcard socket send from local."""
    if local.version == 4:      # struct in_pktinfo: ifindex, spec_dst, addr
        return socket.IPPROTO_IP, IP_PKTINFO, struct.pack("=i4s4s", 0, local.packed, bytes(4))
    return socket.IPPROTO_IPV6, socket.IPV6_PKTINFO, struct.pack("=16si", local.packed, 0)


def answer_notify(wire: bytes, sender: str, secondaries: dict, keys: list) -> tuple[bytes | None, object]:
    """A NOTIFY's answer (RFC 1996 3.7: the same opcode, QR and AA set, signed when the
    NOTIFY was) and the secondary to refresh, or None when it is refused. Anything
    else handed up (UPDATE, IXFR over UDP) gets NOTAUTH, as the fast path gave before."""
    try:
        msg = parse_message(wire, keyring_of(keys))
    except dns.exception.DNSException as e:
        what = "bad TSIG" if is_tsig_error(e) else "malformed"
        log.warning("NOTIFY from %s refused: %s (%s)", sender, what, one_line(e))
        return error_reply(wire, dns.rcode.NOTAUTH if is_tsig_error(e) else dns.rcode.FORMERR), None
    reply = dns.message.make_response(msg)
    reply.flags |= dns.flags.AA
    if msg.opcode() != dns.opcode.NOTIFY or len(msg.question) != 1:
        reply.set_rcode(dns.rcode.NOTAUTH if msg.opcode() == dns.opcode.UPDATE or
                        msg.opcode() == dns.opcode.QUERY else dns.rcode.NOTIMP)
        return reply.to_wire(), None
    name = msg.question[0].name
    secondary = secondaries.get(name)
    refusal = None
    if secondary is None:
        refusal = "not a secondary zone here"
    elif not same_address(sender, secondary.primary[0]):
        refusal = f"not from the primary {secondary.primary[0]}"
    elif secondary.key is not None and msg.keyname != secondary.key.name:
        refusal = "not signed with the zone's TSIG key"
    if refusal is not None:
        log.warning("NOTIFY for %s from %s refused: %s", name, sender, refusal)
        reply.set_rcode(dns.rcode.NOTAUTH)        # as the fast path answers any NOTIFY
        return reply.to_wire(), None
    log.info("NOTIFY for %s from %s", name, sender)
    return reply.to_wire(), secondary


class TransferService:
    """What the server does with what the workers hand up."""

    def __init__(self, handoff: Handoff, secondaries: list, policy: TransferPolicy, keys: list,
                 find_zone, reply_sockets, journal=None):
        self.handoff, self.policy, self.keys, self.journal = handoff, policy, keys, journal
        self.secondaries = {s.origin: s for s in secondaries}
        self.find_zone = find_zone            # name -> served Zone or NativeZone, or None
        self.reply_sockets = reply_sockets    # () -> UDP sockets on the served port
        self.pool = ThreadPoolExecutor(STREAM_THREADS, thread_name_prefix="stormpy-transfer")
        self.streams: Counter = Counter()     # handed-up connections by source (loop thread)
        self.refusals: Counter = Counter()    # refused since the last line, by reason
        self.refusals_logged = -REFUSALS_LOG_SECONDS
        self.refusals_flush = None            # the timer that says the rest

    def start(self) -> None:
        self.handoff.start(self.on_datagram, self.on_stream)

    def on_datagram(self, wire: bytes, sender: tuple[str, int], local) -> None:
        reply, secondary = answer_notify(wire, sender[0], self.secondaries, self.keys)
        if reply:
            self._send(reply, sender, local)
        if secondary is not None:
            secondary.notify()

    def _send(self, reply: bytes, to: tuple[str, int], local) -> None:
        """From the address the message was sent to (local, when known): a primary
        drops an answer from another (Knot: "unexpected source"). A socket bound to it,
        else a wildcard one told the source (IP_PKTINFO), else any of the family."""
        family = socket.AF_INET6 if ":" in to[0] else socket.AF_INET
        ours = [s for s in self.reply_sockets() if s.family == family]
        if not ours:
            return
        bound = {ipaddress.ip_address(s.getsockname()[0]): s for s in ours}
        wildcard = bound.get(ipaddress.ip_address("::" if family == socket.AF_INET6 else "0.0.0.0"))
        try:
            if local is not None and local in bound:
                bound[local].sendto(reply, to)
            elif local is not None and wildcard is not None:
                wildcard.sendmsg([reply], [_pktinfo(local)], 0, to)
            else:
                ours[0].sendto(reply, to)
        except OSError as e:
            log.warning("answer to %s:%d not sent: %s", to[0], to[1], e)

    def on_stream(self, sock: socket.socket, received: bytes) -> None:
        try:
            peer = sock.getpeername()[0]
        except OSError:
            sock.close()
            return
        if not self._may_ask(peer):
            # nobody this server transfers to or takes NOTIFY from: refused here, at once,
            # with no thread (a client could otherwise hold every one)
            self._refuse(sock, received, peer, "source not in --transfer-allow, nor a primary",
                         dns.rcode.NOTAUTH)
            return
        if sum(self.streams.values()) >= STREAM_MOST or self.streams[peer] >= STREAM_PER_SOURCE:
            self._refuse(sock, received, peer, "too many transfer connections open",
                         dns.rcode.REFUSED)
            return
        loop = asyncio.get_running_loop()
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, TRANSFER_SEND_BUFFER)
            done = loop.run_in_executor(self.pool, serve_stream, sock, received,
                                        lambda wire, p: self._stream_message(loop, wire, p))
        except (RuntimeError, OSError):       # the server is stopping: no new threads
            sock.close()
            return
        self.streams[peer] += 1
        done.add_done_callback(lambda _: self._stream_done(peer))

    def _stream_done(self, peer: str) -> None:
        self.streams[peer] -= 1
        if not self.streams[peer]:
            del self.streams[peer]

    def _may_ask(self, peer: str) -> bool:
        return (self.policy.allows_address(peer) or
                any(same_address(peer, s.primary[0]) for s in self.secondaries.values()))

    def _refuse(self, sock: socket.socket, received: bytes, peer: str, why: str,
                rcode: int) -> None:
        """rcode to the first message, if the socket takes it now; then closed. Counted,
        and said in one line at most every REFUSALS_LOG_SECONDS."""
        try:
            size = struct.unpack_from("!H", received)[0] if len(received) >= 2 else 0
            reply = error_reply(received[2:2 + size], rcode) if size else None
            if reply:
                sock.send(struct.pack("!H", len(reply)) + reply, socket.MSG_DONTWAIT)
        except OSError:
            pass
        finally:
            sock.close()
        self.refusals[why] += 1
        self.refusals_last = peer
        wait = self.refusals_logged + REFUSALS_LOG_SECONDS - time.monotonic()
        if wait <= 0:
            self._say_refusals()
        elif self.refusals_flush is None:
            self.refusals_flush = asyncio.get_running_loop().call_later(wait, self._say_refusals)

    def _say_refusals(self) -> None:
        self.refusals_flush = None
        if self.refusals:
            self.refusals_logged = time.monotonic()
            log.warning("TCP connection(s) for transfers or NOTIFY refused: %s (last from %s)",
                        ", ".join(f"{n} {w}" for w, n in self.refusals.items()),
                        self.refusals_last)
            self.refusals.clear()

    def close(self) -> None:
        if self.refusals_flush is not None:
            self.refusals_flush.cancel()
        self._say_refusals()
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _stream_message(self, loop, wire: bytes, peer: str) -> list[bytes]:
        """In the connection's thread: a NOTIFY (Knot sends it over TCP) or a transfer."""
        if len(wire) > 2 and (wire[2] >> 3) & 0xF == dns.opcode.NOTIFY:
            reply, secondary = answer_notify(wire, peer, self.secondaries, self.keys)
            if secondary is not None:
                loop.call_soon_threadsafe(secondary.notify)
            return [reply] if reply else []
        return transfer_replies(wire, peer, self.find_zone, self.policy, self.journal)
