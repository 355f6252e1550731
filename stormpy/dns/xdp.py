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
_LENGTHS = struct.Struct(f"=2H2I{_core.XdpProgram.TAIL_MAX}s")   # host order
_ALWAYS = (dns.rdatatype.A, dns.rdatatype.AAAA)


@dataclass
class DriverAnswers:
    """A generation of the driver's answers: packed keys and values, and what was left out."""
    keys: bytes
    values: bytes
    count: int
    left: int          # (name, type) pairs the workers answer instead
    over: int          # pairs past the entry limit

    def describe(self) -> str:
        text = f"{self.count} answers in the driver"
        if self.left:
            text += f", {self.left} left to the workers (large, truncated or not plain)"
        if self.over:
            text += f", {self.over} past --xdp-answer-entries"
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


def _pairs(zones):
    seen = set()
    for zone in zones:
        owners: dict[bytes, set] = {}
        for owner, rdtype in _questions(zone):
            owners.setdefault(owner, set()).add(rdtype)
        for owner, types in owners.items():
            for rdtype in sorted(types | set(_ALWAYS)):
                if (owner, rdtype) not in seen and rdtype not in (dns.rdatatype.ANY,):
                    seen.add((owner, rdtype))
                    yield owner, rdtype


def _entry(table, owner: bytes, rdtype: int, max_udp: int):
    """The packed value for one question, or None when a worker must answer it."""
    question = owner + _QUESTION_TAIL.pack(rdtype, 1)
    plain = table.dns_answer(_HEADER.pack(0, 0, 1, 0, 0, 0) + question, max_udp=max_udp)
    edns = table.dns_answer(_HEADER.pack(0, 0, 1, 0, 0, 1) + question + _OPT, max_udp=max_udp)
    if plain is None or edns is None or len(plain) > PLAIN_LIMIT:
        return None
    at = 12 + len(question)
    flags, an, ns, ar = struct.unpack(">4H", plain[2:4] + plain[6:12])
    e_flags, e_an, e_ns, e_ar = struct.unpack(">4H", edns[2:4] + edns[6:12])
    tail, e_tail = plain[at:], edns[at:]
    if (flags & 0x0200 or flags & 0x0110 or (e_flags, e_an, e_ns, e_ar) != (flags, an, ns, ar + 1)
            or plain[12:at] != question or edns[12:at] != question
            or not e_tail.startswith(tail) or len(e_tail) != len(tail) + len(_OPT)
            or not tail or len(e_tail) > _core.XdpProgram.TAIL_MAX):
        return None
    return (_COUNTS.pack(flags, an, ns, ar) +
            _LENGTHS.pack(len(tail), len(e_tail), _sum(tail), _sum(e_tail), e_tail))


def driver_answers(table, zones, max_udp: int, entries: int = DEFAULT_ENTRIES) -> DriverAnswers:
    """The answers for table (a Table not yet published) of the served zones."""
    keys, values, left, over = [], [], 0, 0
    for owner, rdtype in _pairs(zones):
        if len(keys) >= entries:
            over += 1
            continue
        value = _entry(table, owner, rdtype, max_udp)
        if value is None:
            left += 1
            continue
        keys.append(_KEY.pack(rdtype, owner))
        values.append(value)
    return DriverAnswers(b"".join(keys), b"".join(values), len(keys), left, over)


def publish(program, answers: DriverAnswers, identity: dict, ttl: int = 64) -> None:
    """Swap answers into the program's map (a running XdpProgram with answer on)."""
    program.answers_config(identity["mac"], identity["addresses"], ttl)
    program.answers_publish(answers.keys, answers.values, answers.count)
