"""A DNS answer as the compiler decides it, and its wire forms for the table.

A stored response is the 12-byte header followed by everything after the question;
dns.c splices the client's question in at offset 12 (dns.h).
"""
from __future__ import annotations

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
IN = dns.rdataclass.IN


@dataclass
class Answer:
    rcode: int = dns.rcode.NOERROR
    aa: bool = True
    answer: list = field(default_factory=list)
    authority: list = field(default_factory=list)
    additional: list = field(default_factory=list)
    referral: bool = False
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


def encode_fixed(qname: dns.name.Name, qtype: int, rdclass: int, answer: Answer) -> tuple[bytes, int]:
    """Wire format for a question of known length: full name compression, which may
    point into the question. Returns (header + sections after the question, length
    without the additional section or 0 when that is not droppable)."""
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
    if answer.additional and not answer.referral:
        msg.additional = []
        droppable = len(msg.to_wire(max_size=65535)) - qlen
    return wire[:12] + wire[12 + qlen:], droppable


def section_wire(qname: dns.name.Name | None, rrsets: list, splice=None) -> tuple[bytes, int]:
    """Records without compression but for qname's owner, a pointer to the question;
    (bytes, record count). splice: Answer.splice, a synthesized CNAME to store as the
    template dns.c completes."""
    body, count = bytearray(), 0
    for rrset in rrsets:
        owner = b"\xc0\x0c" if rrset.name == qname else rrset.name.to_wire()
        for rdata in rrset:
            data = rdata.to_wire()
            if splice and rrset.rdtype == CNAME and rrset.name == qname:
                data = splice[1].to_wire()   # dns.c puts the asked name's prefix in front
            body += owner + struct.pack("!HHIH", rrset.rdtype, rrset.rdclass, rrset.ttl, len(data))
            body += data
            count += 1
    return bytes(body), count


def encode_variable(qname: dns.name.Name, answer: Answer) -> tuple[bytes, int]:
    """Wire format for a question of unknown length (wildcards, NXDOMAIN, referrals
    below a cut): the asked name is a pointer to the question, nothing else is
    compressed, so no offset depends on the question's length."""
    sections = [section_wire(qname, rrsets, answer.splice)
                for rrsets in (answer.answer, answer.authority, answer.additional)]
    head = _header(answer, tuple(c for _, c in sections))
    wire = head + b"".join(b for b, _ in sections)
    if len(wire) + 255 + 4 > 65535:
        raise ZoneError(f"the response below {qname.parent()} is larger than 65535 bytes")
    droppable = 0
    if answer.additional and not answer.referral:
        droppable = len(wire) - len(sections[2][0])
    return wire, droppable
