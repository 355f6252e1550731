"""The answers the XDP program gives by itself (serve-dns --xdp-answer; the program's side
is native/bpf/answer.h, the layouts stormpy/io/xdp_answer.h).

At each load every (name, type) the zones hold, and A and AAAA at every name (their
NODATA when absent), is asked of the table the workers will serve, with and without
EDNS, through the C fast path itself. An answer goes into the driver's map only when
both replies fit, neither is truncated, and the EDNS one is the plain one with the OPT
record after it: what the program sends is then, byte for byte, what a worker would.
Everything else (other names, NXDOMAIN, wildcards, ANY, larger answers) is left to the
workers, which answer it as before."""
from __future__ import annotations

import logging
import struct
from dataclasses import dataclass

import dns.rdatatype

from stormpy import _core

DEFAULT_ENTRIES = 100_000     # about 90 MB of kernel memory at most: see xdp_answer.h
PLAIN_LIMIT = 512             # no EDNS: the reply fits in 512 bytes whatever was asked

_QUESTION_TAIL = struct.Struct(">HH")
_HEADER = struct.Struct(">HHHHHH")
_OPT = b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0)
_KEY = struct.Struct(">H256s")
_COUNTS = struct.Struct(">4H")          # flags and counts: network order, as on the wire
_REST = struct.Struct(f"=2H2IBB8H{_core.XdpProgram.TAIL_MAX}sBx")   # host order
assert _COUNTS.size + _REST.size == _core.XdpProgram.VALUE_SIZE
assert _core.XdpProgram.ZONE_SLOTS == _core.DNS_ZONE_SLOTS
_STOP = bytes(_core.XdpProgram.VALUE_SIZE)   # no tail: the query goes to the workers
_ALWAYS = (dns.rdatatype.A, dns.rdatatype.AAAA)
OTHER_TYPES, BELOW = 0, 0xFFFF          # the keys of xdp_answer.h with no query's type
_PROBE_TYPES = (65534, 65533)           # private-use types no zone here holds
_PATCHES = 8
AA, TC, RD_CD = 0x0400, 0x0200, 0x0110


def answers_by_default(cfg) -> bool:
    """Whether the driver answers when --xdp-answer is not given: with AF_XDP workers,
    unless RRL is on (the driver cannot limit) or the link is a veth in native mode
    (its peer drops XDP_TX frames unless it has an XDP program too; said in one line)."""
    if cfg.backend != "xdp" or not cfg.iface or cfg.rrl_rate:
        return False
    from stormpy.interfaces import link_kind
    if cfg.xdp_mode != "generic" and link_kind(cfg.iface) == "veth":
        logging.getLogger("stormpy").info(
            "answers in the driver are off on a veth in native XDP mode: the peer drops "
            "XDP_TX frames unless it has an XDP program too (--xdp-answer turns them on; "
            "--xdp-mode generic needs none)")
        return False
    return True


@dataclass
class DriverAnswers:
    """A generation of the driver's answers: packed keys and values, and what was left out."""
    keys: bytes
    values: bytes
    count: int
    left: int          # entries that send their queries to the workers (stop entries)
    over: int          # names past the entry limit: none of theirs, nor any name's below

    def describe(self) -> str:
        text = f"{self.count - self.left} answers in the driver"
        if self.left:
            text += f", {self.left} questions left to the workers (large, truncated or not plain)"
        if self.over:
            text += f", {self.over} names past --xdp-answer-entries (and no NXDOMAIN there)"
        return text


def _sum(data: bytes) -> int:
    """The ones-complement sum of big-endian 16-bit words from an even offset, folded."""
    if len(data) & 1:
        data += b"\0"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def _questions(zone):
    """(owner wire, lower-cased; type) of each RRset of a served zone (Zone or NativeZone)."""
    native = getattr(zone, "native", None)
    if native is not None:
        for owner, rdtype, _ttl, _datas in native.rrsets():
            yield owner.lower(), rdtype
    else:
        for name, rdataset in zone.zone.iterate_rdatasets():
            yield name.canonicalize().to_wire(), rdataset.rdtype


def _suffixes(owner: bytes, origin: bytes):
    """owner's ancestors from its parent up to origin (wire, lower-cased)."""
    at = 0
    while owner[at:] != origin and at < len(owner) - 1:
        at += owner[at] + 1
        yield owner[at:]


def _names(zones) -> dict:
    """Every name the zones hold, empty non-terminals included: name -> its types."""
    names: dict[bytes, set] = {}
    for zone in zones:
        origin = zone.origin.canonicalize().to_wire()
        for owner, rdtype in _questions(zone):
            names.setdefault(owner, set()).add(rdtype)
            for up in _suffixes(owner, origin):
                names.setdefault(up, set())
    return names


def _pairs(zones):
    """(name, type) of every exact entry: for tests and tools."""
    for owner, types in _names(zones).items():
        for rdtype in sorted(types | set(_ALWAYS)):
            if rdtype != dns.rdatatype.ANY:
                yield owner, rdtype


@dataclass
class _Reply:
    flags: int
    counts: tuple
    tail: bytes
    e_tail: bytes
    zone: int          # the zone slot a worker counts it under


def _render(table, owner: bytes, rdtype: int, max_udp: int):
    """The worker's replies without and with EDNS, when the driver can send them."""
    question = owner + _QUESTION_TAIL.pack(rdtype, 1)
    plain, zone = table.dns_answer_zone(_HEADER.pack(0, 0, 1, 0, 0, 0) + question, max_udp)
    edns, e_zone = table.dns_answer_zone(_HEADER.pack(0, 0, 1, 0, 0, 1) + question + _OPT,
                                         max_udp)
    if plain is None or edns is None or len(plain) > PLAIN_LIMIT or zone != e_zone or zone < 0:
        return None
    at = 12 + len(question)
    flags, an, ns, ar = struct.unpack(">4H", plain[2:4] + plain[6:12])
    e_flags, e_an, e_ns, e_ar = struct.unpack(">4H", edns[2:4] + edns[6:12])
    tail, e_tail = plain[at:], edns[at:]
    if (flags & (TC | RD_CD) or (e_flags, e_an, e_ns, e_ar) != (flags, an, ns, ar + 1)
            or plain[12:at] != question or edns[12:at] != question
            or not e_tail.startswith(tail) or len(e_tail) != len(tail) + len(_OPT)
            or not tail or len(e_tail) > _core.XdpProgram.TAIL_MAX):
        return None
    return _Reply(flags, (an, ns, ar), tail, e_tail, zone)


def _pack(r: _Reply, probe_len: int = 0, patches=()) -> bytes:
    patch = list(patches) + [0] * (_PATCHES - len(patches))
    return (_COUNTS.pack(r.flags, *r.counts) +
            _REST.pack(len(r.tail), len(r.e_tail), _sum(r.tail), _sum(r.e_tail), probe_len,
                       len(patches), *patch, r.e_tail, r.zone))


def _other_types(table, owner: bytes, max_udp: int) -> bytes:
    """The answer to any type owner does not hold: its NODATA or the referral at a cut,
    never an answer (a CNAME's depends on the type asked at its target)."""
    first, second = (_render(table, owner, t, max_udp) for t in _PROBE_TYPES)
    if first is None or first != second or first.counts[0]:
        return _STOP
    return _pack(first)


def _moved_pointers(one: bytes, two: bytes):
    """Where `two` (its question a byte longer) holds one's compression pointers moved by
    one byte and differs in nothing else; None when it differs otherwise."""
    if len(one) != len(two):
        return None
    moved = [j for j in range(len(one) - 1)
             if one[j] >= 0xC0 and one[j:j + 2] != two[j:j + 2] and
             struct.unpack(">H", two[j:j + 2])[0] == struct.unpack(">H", one[j:j + 2])[0] + 1]
    covered = {j for m in moved for j in (m, m + 1)}
    differ = {j for j in range(len(one)) if one[j] != two[j]}
    return moved if differ <= covered and len(moved) <= _PATCHES else None


def _below(table, owner: bytes, names: dict, max_udp: int) -> bytes:
    """The answer to every name under owner that the zones do not hold: NXDOMAIN or a
    referral, the same for every type, its pointers into the asked name patched."""
    probes = (b"\x01\x00" + owner, b"\x02\x00\x00" + owner)
    if any(p in names or len(p) > 255 for p in probes):
        return _STOP
    one, two = (_render(table, p, dns.rdatatype.A, max_udp) for p in probes)
    other = _render(table, probes[0], dns.rdatatype.MX, max_udp)
    if one is None or two is None or one != other:
        return _STOP
    rcode, (an, ns, _ar) = one.flags & 0xF, one.counts
    if an or not (rcode == 3 or (rcode == 0 and not one.flags & AA and ns)):
        return _STOP        # a wildcard, a DNAME, or an answer that depends on the type
    if (one.flags, one.counts) != (two.flags, two.counts):
        return _STOP
    moved = _moved_pointers(one.e_tail, two.e_tail)
    if moved is None or _moved_pointers(one.tail, two.tail) != [m for m in moved if m < len(one.tail)]:
        return _STOP
    return _pack(one, len(probes[0]), moved)


def driver_answers(table, zones, max_udp: int, entries: int = DEFAULT_ENTRIES) -> DriverAnswers:
    """The answers for table (a Table not yet published) of the served zones. A name gets
    all its entries or none; when some do not fit, no name answers for those below it."""
    names = _names(zones)
    keys, values, over = [], [], 0
    room = entries
    for owner, types in names.items():
        exact = [t for t in sorted(types | set(_ALWAYS)) if t != dns.rdatatype.ANY]
        if len(exact) + 2 > room:
            over += 1
            continue
        room -= len(exact) + 2
        for rdtype in exact:
            reply = _render(table, owner, rdtype, max_udp)
            keys.append(_KEY.pack(rdtype, owner))
            values.append(_pack(reply) if reply is not None else _STOP)
        keys.append(_KEY.pack(OTHER_TYPES, owner))
        values.append(_other_types(table, owner, max_udp))
        keys.append(_KEY.pack(BELOW, owner))
        values.append(_below(table, owner, names, max_udp) if not over else _STOP)
    if over:        # a name left out must not get its ancestor's NXDOMAIN
        values = [_STOP if k[:2] == b"\xff\xff" else v for k, v in zip(keys, values)]
    left = sum(v == _STOP for v in values)
    return DriverAnswers(b"".join(keys), b"".join(values), len(keys), left, over)


def publish(program, answers: DriverAnswers, identity: dict, ttl: int = 64,
            paused: bool = False) -> None:
    """Swap answers into the program's map (a running XdpProgram with answer on)."""
    configure(program, identity, ttl, paused)
    program.answers_publish(answers.keys, answers.values, answers.count)


def configure(program, identity: dict, ttl: int = 64, paused: bool = False) -> None:
    """The interface's MAC and addresses, what the program answers for; paused: no
    address, so every query goes up to the workers (while `stormpy tap` is attached,
    which copies what the workers receive and send)."""
    program.answers_config(identity["mac"], [] if paused else identity["addresses"], ttl)
