"""An inbound zone transfer over TCP (RFC 5936, RFC 1995), read off the socket at the
primary's pace and parsed at ours.

dnspython's dns.query.inbound_xfr reads a message, parses it, then reads the next:
on a zone of a million records the parse is the slower side, the socket's buffer
fills, and a primary with a short I/O timeout (Knot DNS's tcp-io-timeout, 500 ms)
closes the connection before the end. Here a thread drains the socket into memory
while dnspython's Inbound applies the messages to the zone, each checked and its TSIG
verified as dns.query does it; or, for an AXFR, while C parses and checks them into a
C store (axfr_in_c: zone/axfr.h), the records never in Python.
"""
from __future__ import annotations

import base64
import queue
import socket
import struct
import threading
import time

import dns.exception
import dns.message
import dns.query
import dns.rdatatype
import dns.xfr

BUFFERED_MAX = 1 << 30          # bytes held unparsed: a transfer past this is refused


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError("the connection closed before the transfer's end")
        data += chunk
    return bytes(data)


def _drain(sock: socket.socket, messages: queue.Queue, stop: threading.Event) -> None:
    """Each length-prefixed message into messages; an exception last, when one ends it."""
    held = 0
    try:
        while not stop.is_set():
            (length,) = struct.unpack("!H", _read_exactly(sock, 2))
            wire = _read_exactly(sock, length)
            held += length
            if held > BUFFERED_MAX:
                raise dns.exception.FormError(f"over {BUFFERED_MAX >> 20} MiB of transfer "
                                              f"waiting to be parsed")
            messages.put(wire)
    except (OSError, EOFError, dns.exception.DNSException) as e:
        messages.put(e)


def inbound_xfr(where: str, port: int, zone, query: dns.message.Message, timeout: float,
                lifetime: float) -> None:
    """The transfer query asks for into zone (a transaction manager), as
    dns.query.inbound_xfr does over TCP. Raises what it raises, or EOFError."""
    rdtype = query.question[0].rdtype
    serial = dns.xfr.extract_serial_from_query(query)
    _transfer(where, port, query, timeout, lifetime,
              lambda messages, deadline: _apply(zone, query, rdtype, serial, messages, deadline))


def axfr_in_c(where: str, port: int, query: dns.message.Message, key, timeout: float,
              lifetime: float):
    """The AXFR query asks for, into a C store (an _core.NativeZone, grouped). Raises
    what inbound_xfr raises, or _core.ZoneDeclined (the transfer is dnspython's then)."""
    from stormpy import _core
    store = _core.NativeZone()

    def feed(messages, deadline):
        signed = {} if key is None else {
            "key_name": key.name.to_text(), "algorithm": key.algorithm.to_text(),
            "key_secret": base64.b64encode(key.secret).decode(), "request_mac": query.mac}
        into = _core.AxfrInto(store, query.question[0].name.to_wire(), query.id, **signed)
        while not into.message(_next(messages, deadline)):
            pass
    _transfer(where, port, query, timeout, lifetime, feed)
    return store


def _transfer(where: str, port: int, query: dns.message.Message, timeout: float,
              lifetime: float, apply) -> None:
    """query sent over TCP, then apply(messages, deadline) while a thread drains the
    answer's messages into that queue."""
    deadline = time.monotonic() + lifetime
    family = socket.AF_INET6 if ":" in where else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect((where, port))
        wire = query.to_wire()
        sock.sendall(struct.pack("!H", len(wire)) + wire)
        messages: queue.Queue = queue.Queue()
        stop = threading.Event()
        reader = threading.Thread(target=_drain, args=(sock, messages, stop), daemon=True)
        reader.start()
        try:
            apply(messages, deadline)
        finally:
            stop.set()
            try:
                sock.shutdown(socket.SHUT_RDWR)     # the reader's recv returns
            except OSError:
                pass                                # the primary closed it already
            reader.join(timeout)


def _next(messages: queue.Queue, deadline: float) -> bytes:
    """The next message the reader drained, or what ended it raised."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise dns.exception.Timeout()
    try:
        item = messages.get(timeout=left)
    except queue.Empty:
        raise dns.exception.Timeout() from None
    if isinstance(item, BaseException):
        raise item
    return item


def _apply(zone, query, rdtype, serial, messages: queue.Queue, deadline: float) -> None:
    with dns.xfr.Inbound(zone, rdtype, serial, False) as inbound:
        done, first, tsig_ctx = False, True, None
        while not done:
            item = _next(messages, deadline)
            r = dns.message.from_wire(item, keyring=query.keyring, request_mac=query.mac,
                                      xfr=True, origin=zone.from_wire_origin(),
                                      tsig_ctx=tsig_ctx, multi=True,
                                      one_rr_per_rrset=rdtype == dns.rdatatype.IXFR)
            if not query.is_response(r, xfr_continuation=not first):
                raise dns.query.BadResponse()
            first = False
            done = inbound.process_message(r)
            tsig_ctx = r.tsig_ctx
