"""Zone transfers' protocol glue (RFC 5936 AXFR, RFC 1995 IXFR, RFC 1996 NOTIFY, RFC 8945
TSIG), on dnspython: TSIG keys from the command line, the NOTIFY answer, and the
outbound side, AXFR and IXFR served to the addresses and keys allowed.

This is the control plane's: the C workers hand a NOTIFY or a transfer's connection up
(native/include/stormpy/app/dns/handoff.h, stormpy/dns/handoff.py) and never see the
answer. Transfers out run in a thread each, on a blocking socket with a deadline."""
from __future__ import annotations

import base64
import binascii
import io
import ipaddress
import logging
import socket
import struct
import time
from dataclasses import dataclass, field

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.serial
import dns.tsig
import dns.zone

from stormpy.dns.journal import Journal, soa_rrset
from stormpy.errors import StormpyError

log = logging.getLogger("stormpy")

TSIG_ALGORITHMS = ("hmac-sha256", "hmac-sha384", "hmac-sha512", "hmac-sha224", "hmac-sha1",
                   "hmac-md5")
MESSAGE_BUDGET = 16000        # bytes of records per transfer message (at most 65535)
MESSAGE_CAP = 65535 - 1024    # one large record's most: room for header, question, OPT, TSIG
TRANSFER_SECONDS = 60.0       # the longest one outbound transfer may take
QUERY_WAIT_SECONDS = 5.0      # the longest a transfer connection waits for its query


def parse_tsig(text: str) -> dns.tsig.Key:
    """--tsig NAME:ALG:SECRET (SECRET in base64, as knotc and tsig-keygen print it)."""
    parts = text.split(":", 2)
    if len(parts) != 3 or not all(parts):
        raise StormpyError(f"--tsig {text!r}: expected NAME:ALGORITHM:SECRET "
                           f"(e.g. key1:hmac-sha256:c2VjcmV0)")
    name, algorithm, secret = parts
    if algorithm.lower() not in TSIG_ALGORITHMS:
        raise StormpyError(f"--tsig {name}: unknown algorithm {algorithm!r} "
                           f"(one of {', '.join(TSIG_ALGORITHMS)})")
    try:
        raw = base64.b64decode(secret, validate=True)
        return dns.tsig.Key(dns.name.from_text(name), raw, algorithm.lower())
    except (binascii.Error, ValueError):
        raise StormpyError(f"--tsig {name}: the secret is not base64") from None
    except dns.exception.DNSException as e:
        raise StormpyError(f"--tsig {name}: {e}") from None


def parse_address(text: str, option: str = "--primary", default_port: int = 53) -> tuple[str, int]:
    """ADDR, ADDR:PORT, [V6ADDR]:PORT or a bare IPv6 address, checked."""
    host, port = text, default_port
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            port = _port(option, text, rest.removeprefix(":"))
    elif text.count(":") == 1:
        host, rest = text.split(":")
        port = _port(option, text, rest)
    try:
        return str(ipaddress.ip_address(host)), port
    except ValueError:
        raise StormpyError(f"{option} {text!r}: not an IP address (ADDR or ADDR:PORT)") from None


def _port(option: str, text: str, port: str) -> int:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise StormpyError(f"{option} {text!r}: the port must be 1-65535")
    return int(port)


def same_address(a: str, b: str) -> bool:
    try:
        x, y = ipaddress.ip_address(a), ipaddress.ip_address(b)
    except ValueError:
        return False
    x = getattr(x, "ipv4_mapped", None) or x
    y = getattr(y, "ipv4_mapped", None) or y
    return x == y


def newer(serial: int, than: int) -> bool:
    """RFC 1982: serial is ahead of than."""
    return dns.serial.Serial(serial) > than


def keyring_of(keys: list[dns.tsig.Key]) -> dict | None:
    return {k.name: k for k in keys} or None


def error_reply(wire: bytes, rcode: int) -> bytes | None:
    """An answer with only the header and the question echoed, for a message that
    cannot be trusted or parsed (a bad TSIG: RFC 8945 5.2 answers it unsigned)."""
    if len(wire) < 12:
        return None
    ident, flags, qdcount = struct.unpack("!HHH", wire[:6])
    question = b""
    if qdcount == 1:
        end = 12
        while end < len(wire) and wire[end] != 0 and wire[end] < 64:
            end += 1 + wire[end]
        if end + 5 <= len(wire) and wire[end] == 0:
            question = wire[12:end + 5]
    flags = (flags & 0x7900) | 0x8000 | (rcode & 0xF)     # opcode and RD kept, QR set
    return struct.pack("!HHHHHH", ident, flags, 1 if question else 0, 0, 0, 0) + question


def is_tsig_error(e: Exception) -> bool:
    """A message signed with a key not known here, or whose signature or time is wrong."""
    return isinstance(e, (dns.message.UnknownTSIGKey, dns.tsig.BadSignature, dns.tsig.BadKey,
                          dns.tsig.BadTime, dns.tsig.BadAlgorithm, dns.tsig.PeerError))


def parse_message(wire: bytes, keyring: dict | None) -> dns.message.Message:
    """Raises dns.exception.DNSException (bad TSIG included) on anything wrong."""
    return dns.message.from_wire(wire, keyring=keyring, one_rr_per_rrset=False)


# -- outbound transfers --------------------------------------------------------------

@dataclass
class TransferPolicy:
    """Who may transfer zones from this server: an address in allow and, when keys
    are given, a query signed with one of them. Nobody by default."""
    allow: list = field(default_factory=list)     # ip_network
    keys: list = field(default_factory=list)      # dns.tsig.Key

    @classmethod
    def from_options(cls, allow: list[str], keys: list[dns.tsig.Key]) -> "TransferPolicy":
        nets = []
        for text in allow:
            try:
                nets.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                raise StormpyError(f"--transfer-allow {text!r}: not an address or prefix") from None
        return cls(nets, keys)

    @property
    def enabled(self) -> bool:
        return bool(self.allow)

    def allows_address(self, address: str) -> bool:
        """Whether address is in the allow list (TSIG aside)."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        ip = getattr(ip, "ipv4_mapped", None) or ip
        return any(ip in net for net in self.allow)

    def refusal(self, address: str, msg: dns.message.Message) -> str | None:
        """Why this query may not transfer, or None."""
        if not self.allows_address(address):
            return "source not in --transfer-allow"
        if self.keys and not msg.had_tsig:
            return "not signed with the TSIG key"
        return None


def zone_rrsets(zone: dns.zone.Zone):
    """SOA, every other RRset, SOA: an AXFR's records (RFC 5936 2.2)."""
    soa = zone.find_rrset(zone.origin, dns.rdatatype.SOA)
    yield soa
    for name, node in zone.items():
        for rdataset in node.rdatasets:
            if not (name == zone.origin and rdataset.rdtype == dns.rdatatype.SOA):
                rrset = dns.rrset.RRset(name, rdataset.rdclass, rdataset.rdtype)
                rrset.update(rdataset)
                yield rrset
    yield soa


def transfer_messages(query: dns.message.Message, rrsets) -> list[bytes]:
    """The responses carrying rrsets, each within MESSAGE_BUDGET, TSIG-signed as a
    multi-message stream when the query was (RFC 8945 5.3.1: every one signed)."""
    messages, current, size = [], None, 0
    for rrset in rrsets:
        length = _wire_size(rrset)
        if current is None or (size + length > MESSAGE_BUDGET and current.answer):
            current, size = _response(query), 0
            messages.append(current)
        current.answer.append(rrset)
        size += length
    wires, ctx = [], None
    for m in messages:
        wires.append(m.to_wire(max_size=65535, multi=True, tsig_ctx=ctx))
        ctx = getattr(m, "tsig_ctx", None)
    return wires


def _wire_size(rrset) -> int:
    """An upper bound of rrset's size in a message (no compression counted)."""
    owner = len(rrset.name.to_wire())
    return sum(owner + 10 + len(rdata.to_wire()) for rdata in rrset)


def _response(query: dns.message.Message) -> dns.message.Message:
    r = dns.message.make_response(query)
    r.flags |= dns.flags.AA
    return r


def transfer_answer(query: dns.message.Message, served, refusal: str | None,
                    journal: Journal | None = None) -> tuple[list[bytes], str]:
    """The wire messages that answer an AXFR or IXFR query, and what to log. served:
    the zone asked for (a dns/zone.py Zone or a NativeZone), or None."""
    q = query.question[0]
    if refusal is not None or served is None:
        r = _response(query)
        r.set_rcode(dns.rcode.NOTAUTH)
        return [r.to_wire()], f"refused ({refusal or 'no such zone here'})"
    soa = soa_rrset(served)
    serial = soa[0].serial
    if q.rdtype == dns.rdatatype.IXFR:
        theirs = next((rr[0].serial for rr in query.authority
                       if rr.rdtype == dns.rdatatype.SOA and len(rr)), None)
        if theirs is not None and not newer(serial, theirs):
            return transfer_messages(query, [soa]), f"IXFR: serial {serial} is current"
        chain = journal.since(served.origin, theirs) if journal and theirs is not None else None
        if chain:
            rrsets = [soa]
            for c in chain:
                rrsets += [c.old_soa, *c.deleted, c.new_soa, *c.added]
            rrsets.append(soa)
            return transfer_messages(query, rrsets), f"IXFR {theirs} -> {serial}"
        # the difference is not kept: the whole zone (RFC 1995 section 4 allows it)
        return zone_messages(query, served), f"IXFR as full zone, serial {serial}"
    return zone_messages(query, served), f"AXFR, serial {serial}"


def zone_messages(query: dns.message.Message, served) -> list[bytes]:
    """The whole zone as an AXFR's messages: written in C from the store when the zone
    is held there (a million records with no copy of them in Python), else from
    dnspython's zone."""
    native = getattr(served, "native", None)
    if native is None:
        return transfer_messages(query, zone_rrsets(served.zone))
    section_at = 12 + len(query.question[0].name.to_wire()) + 4     # past the question
    with served.lock:           # no patch while the store is walked
        sections = list(native.transfer_sections(MESSAGE_BUDGET, MESSAGE_CAP, section_at))
    return wire_messages(query, sections)


def wire_messages(query: dns.message.Message, sections) -> list[bytes]:
    """Responses to query, one per section (answer records in wire form, owners
    compressed against the question's name at offset 12, and their count), signed as a
    TSIG stream as transfer_messages signs."""
    r = _response(query)
    q = r.question[0]
    question = q.name.to_wire() + struct.pack("!HH", q.rdtype, q.rdclass)
    opt = io.BytesIO()
    if r.opt is not None:
        r.opt.to_wire(opt)
    wires, ctx = [], None
    for records, count in sections:
        wire = struct.pack("!6H", r.id, r.flags, 1, count, 0, 1 if opt.tell() else 0) \
            + question + records + opt.getvalue()
        if r.tsig is not None:
            wire, ctx = _signed(wire, r, ctx)
        wires.append(wire)
    return wires


def _signed(wire: bytes, r: dns.message.Message, ctx):
    """wire with r's TSIG record added, the MAC chained from ctx (RFC 8945 5.3.1)."""
    tsig, ctx = dns.tsig.sign(wire, r.keyring, r.tsig[0], int(time.time()), r.request_mac,
                              ctx, True)
    rdata = tsig.to_wire()
    record = r.keyname.to_wire() + struct.pack("!HHIH", dns.rdatatype.TSIG, dns.rdataclass.ANY,
                                               0, len(rdata)) + rdata
    arcount = struct.unpack_from("!H", wire, 10)[0] + 1
    return wire[:10] + struct.pack("!H", arcount) + wire[12:] + record, ctx


def send_notify(origin: dns.name.Name, serial: int, target: tuple[str, int], keys: list) -> None:
    """NOTIFY (RFC 1996) for origin to a secondary, signed with the first key if any;
    up to three tries, one line logged (blocking: run in a thread)."""
    msg = dns.message.make_query(origin, dns.rdatatype.SOA)
    msg.flags = dns.flags.AA             # RD off; the opcode lives in the same field
    msg.set_opcode(dns.opcode.NOTIFY)
    if keys:
        msg.use_tsig(keyring_of(keys[:1]), keys[0].name, algorithm=keys[0].algorithm)
    where = f"{target[0]}:{target[1]}"
    for _ in range(3):
        try:
            r = dns.query.udp(msg, target[0], port=target[1], timeout=2.0)
        except dns.exception.Timeout:
            continue
        except (dns.exception.DNSException, OSError) as e:
            log.warning("NOTIFY for %s serial %d to %s failed: %s", origin, serial, where,
                        one_line(e))
            return
        log.info("NOTIFY for %s serial %d to %s: %s", origin, serial, where,
                 dns.rcode.to_text(r.rcode()))
        return
    log.warning("NOTIFY for %s serial %d to %s: no answer", origin, serial, where)


def transfer_replies(wire: bytes, peer: str, find_zone, policy: TransferPolicy,
                     journal: Journal | None = None) -> list[bytes]:
    """The messages that answer one AXFR or IXFR query from peer (a refusal included).
    find_zone(name) gives the served zone or None."""
    try:
        query = parse_message(wire, keyring_of(policy.keys))
        if not query.question or query.question[0].rdtype not in (dns.rdatatype.AXFR,
                                                                  dns.rdatatype.IXFR):
            raise dns.exception.FormError("not an AXFR or IXFR query")
    except dns.exception.DNSException as e:
        log.warning("transfer from %s refused: %s", peer, one_line(e))
        reply = error_reply(wire, dns.rcode.NOTAUTH if is_tsig_error(e) else dns.rcode.FORMERR)
        return [reply] if reply else []
    name = query.question[0].name
    wires, what = transfer_answer(query, find_zone(name), policy.refusal(peer, query), journal)
    level = logging.WARNING if what.startswith("refused") else logging.INFO
    log.log(level, "transfer of %s to %s: %s", name, peer, what)
    return wires


def serve_stream(sock: socket.socket, received: bytes, answer) -> None:
    """A TCP connection a worker handed up with the bytes it read: each message's
    answer(wire, peer) (a list of messages) sent, until the client closes, is silent
    for QUERY_WAIT_SECONDS or TRANSFER_SECONDS are over (blocking; run in a thread)."""
    deadline = time.monotonic() + TRANSFER_SECONDS
    peer = "?"
    buffer = bytearray(received)
    try:
        peer = sock.getpeername()[0]
        while True:
            wire = _next_message(sock, buffer, deadline)
            if wire is None:
                return
            replies = answer(wire, peer)
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            for w in replies:
                sock.sendall(struct.pack("!H", len(w)) + w)
    except (OSError, EOFError) as e:
        log.warning("TCP connection from %s handed up, cut: %s", peer, e)
    except Exception as e:          # a bug, not the peer: one line, the server goes on
        log.error("TCP connection from %s handed up failed (internal error %s)", peer, one_line(e))
    finally:
        sock.close()


def _next_message(sock: socket.socket, buffer: bytearray, deadline: float) -> bytes | None:
    """The next length-prefixed message, or None at the connection's end."""
    while True:
        if len(buffer) >= 2:
            size = buffer[0] << 8 | buffer[1]
            if len(buffer) >= 2 + size:
                wire = bytes(buffer[2:2 + size])
                del buffer[:2 + size]
                return wire
        wait = min(QUERY_WAIT_SECONDS, deadline - time.monotonic())
        if wait <= 0:
            return None
        sock.settimeout(wait)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return None
        if not chunk:
            return None
        buffer += chunk


def one_line(e: Exception) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
