"""A DNS answer as the compiler decides it, and its wire forms for the table.

A stored response is the 12-byte header followed by everything after the question;
dns.c splices the client's question in at offset 12 (dns.h).
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from stormpy.errors import ZoneError

CNAME = dns.rdatatype.CNAME
SHIFTS_MAX = 500        # pointers a variable answer moves (the table takes 512 patches)
IN = dns.rdataclass.IN


@dataclass
class Answer:
    rcode: int = dns.rcode.NOERROR
    aa: bool = True
    answer: list = field(default_factory=list)
    authority: list = field(default_factory=list)
    additional: list = field(default_factory=list)
    referral: bool = False
    # additional RRsets at the start that must come with the answer, or it is TC: a
    # referral's in-domain glue (RFC 9471); the rest (all, but for a referral: the
    # sibling glue) may be left out to fit
    required_additional: int = 0
    # for the DNSSEC form (dnssec.py): ("nxdomain", name, closest encloser) or
    # ("nodata", name, the owner answering: name or a wildcard); wildcard expansions
    # in the answer as (name asked, wildcard)
    denial: tuple | None = None
    expanded: list = field(default_factory=list)
    # a CNAME synthesized from a DNAME for the name asked: (that name, the DNAME's
    # target); a variable answer stores it as a template the C answer completes
    splice: tuple | None = None
    # a DNSSEC form without the NSEC3 covering the asked name's next closer name,
    # which dns.c hashes and splices in (dnssec.py)
    cover_next_closer: bool = False


def _header(answer: Answer, counts: tuple[int, int, int]) -> bytes:
    flags = dns.flags.QR | (dns.flags.AA if answer.aa else 0) | (answer.rcode & 0xF)
    return struct.pack("!HHHHHH", 0, flags, 1, *counts)


def encode_fixed(qname: dns.name.Name, qtype: int, rdclass: int,
                 answer: Answer) -> tuple[bytes, int, tuple]:
    """Wire format for a question of known length: full name compression, which may
    point into the question. Returns (header + sections after the question, length
    without the additional section or 0 when that is not droppable, no shifts)."""
    msg = dns.message.Message(id=0)
    msg.flags = dns.flags.QR | (dns.flags.AA if answer.aa else 0)
    msg.set_rcode(answer.rcode)
    msg.question = [dns.rrset.RRset(qname, rdclass, qtype)]
    msg.answer, msg.authority, msg.additional = answer.answer, answer.authority, answer.additional
    try:
        wire = msg.to_wire(max_size=65535)
    except dns.exception.TooBig:
        raise ZoneError(f"the response to {qname} {dns.rdatatype.to_text(qtype)} is larger "
                        f"than 65535 bytes") from None
    qlen = len(qname.to_wire()) + 4
    droppable = 0
    if _optional_additional(answer):
        msg.additional = answer.additional[:answer.required_additional]
        droppable = len(msg.to_wire(max_size=65535)) - qlen
    return wire[:12] + wire[12 + qlen:], droppable, ()


def _optional_additional(answer: Answer) -> bool:
    return len(answer.additional) > answer.required_additional


def section_wire(qname: dns.name.Name | None, rrsets: list, splice=None) -> tuple[bytes, int]:
    """Records without compression but for qname's owner, a pointer to the question;
    (bytes, record count). splice: Answer.splice, a synthesized CNAME to store as the
    template dns.c completes."""
    body, count = bytearray(), 0
    for rrset in rrsets:
        owner = b"\xc0\x0c" if rrset.name == qname else rrset.name.to_wire()
        for rdata in rrset:
            data = rdata.to_wire()
            if splice and splice[0] == qname and rrset.rdtype == CNAME and rrset.name == qname:
                data = splice[1].to_wire()   # dns.c puts the asked name's prefix in front
            body += owner + struct.pack("!HHIH", rrset.rdtype, rrset.rdclass, rrset.ttl, len(data))
            body += data
            count += 1
    return bytes(body), count


def encode_variable(qname: dns.name.Name, answer: Answer, anchor: dns.name.Name | None = None,
                    compress_additional: bool = True) -> tuple[bytes, int, tuple]:
    """Wire format for a question of unknown length below qname's parent (wildcards,
    NXDOMAIN, referrals below a cut), compressed as for the question qname (a sample
    of those names): the asked name is a pointer to the question's start, and every
    other pointer is moved per query as the asked name's length differs from qname's
    (SP_PATCH_SHIFT: all of them point past that name's first label). Of the asked
    name's ancestors, anchor (qname's parent unless given) and those above it are
    pointed at: every asker has them (an NXDOMAIN every name of a zone shares gives
    the origin). Returns (wire, droppable length as encode_fixed, shifts: the stored
    question's length then each pointer's stored offset, or () for none). A DNAME's
    answer (dns.c completes its CNAME) stays uncompressed, as does the additional
    section when not compress_additional (an NSEC3 proof is spliced in before it)."""
    if answer.splice or qname == dns.name.root:
        return _uncompressed(qname, answer)
    ref = qname.to_wire() + b"\0\0\0\0"
    out = io.BytesIO()
    out.write(b"\0" * 12 + ref)
    pointers = _Pointers(out, qname, anchor or qname.parent(), 0x3FFF - max(0, 255 + 4 - len(ref)))
    counts = [_write_section(out, answer.answer, pointers),
              _write_section(out, answer.authority, pointers), 0]
    required = answer.required_additional
    for rrsets in (answer.additional[:required], answer.additional[required:]):
        optional_at = out.tell()
        if not compress_additional:
            body, count = section_wire(qname, rrsets)
            out.write(body)
        else:
            count = _write_section(out, rrsets, pointers)
        counts[2] += count
    wire = _header(answer, tuple(counts)) + out.getvalue()[12 + len(ref):]
    if len(wire) + 255 + 4 > 65535:
        raise ZoneError(f"the response below {qname.parent()} is larger than 65535 bytes")
    droppable = optional_at - len(ref) if _optional_additional(answer) else 0
    shifts = (len(ref),) + tuple(at - len(ref) for at in pointers.shifted) if pointers.shifted else ()
    return wire, droppable, shifts


def _uncompressed(qname: dns.name.Name, answer: Answer) -> tuple[bytes, int, tuple]:
    required = answer.required_additional
    sections = [section_wire(qname, rrsets, answer.splice)
                for rrsets in (answer.answer, answer.authority, answer.additional[:required],
                               answer.additional[required:])]
    counts = (sections[0][1], sections[1][1], sections[2][1] + sections[3][1])
    wire = _header(answer, counts) + b"".join(b for b, _ in sections)
    if len(wire) + 255 + 4 > 65535:
        raise ZoneError(f"the response below {qname.parent()} is larger than 65535 bytes")
    droppable = len(wire) - len(sections[3][0]) if _optional_additional(answer) else 0
    return wire, droppable, ()


class _Pointers(dict):
    """dnspython's compression table for a variable answer: it notes where each
    pointer it gives is written, unless it points at the asked name itself (the
    question's start, which never moves), and takes no target so far in that a
    longer question would push it past 14 bits."""

    def __init__(self, out: io.BytesIO, asked: dns.name.Name, anchor, limit: int):
        super().__init__()
        self.out, self.asked, self.limit = out, asked, limit
        self.shifted: list[int] = []
        dict.__setitem__(self, asked, 12)
        at = 12             # the question: the asked name, then its ancestors
        for i, label in enumerate(asked.labels[:-1]):
            suffix = dns.name.Name(asked.labels[i:])
            if anchor.is_subdomain(suffix):
                dict.__setitem__(self, suffix, at)
            at += 1 + len(label)

    def get(self, name, default=None):
        at = dict.get(self, name)
        if at is None or (name != self.asked and len(self.shifted) >= SHIFTS_MAX):
            return default
        if name != self.asked:
            self.shifted.append(self.out.tell())
        return at

    def __setitem__(self, name, at) -> None:
        if at <= self.limit:
            dict.__setitem__(self, name, at)


def _write_section(out: io.BytesIO, rrsets: list, pointers: _Pointers) -> int:
    count = 0
    for rrset in rrsets:
        for rdata in rrset:
            rrset.name.to_wire(out, pointers)
            out.write(struct.pack("!HHI", rrset.rdtype, rrset.rdclass, rrset.ttl))
            at = out.tell()
            out.write(b"\0\0")
            rdata.to_wire(out, pointers)
            end = out.tell()
            out.seek(at)
            out.write(struct.pack("!H", end - at - 2))
            out.seek(end)
            count += 1
    return count
