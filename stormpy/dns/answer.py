"""A DNS answer as the compiler decides it, and its wire forms for the table.

A stored response is the 12-byte header followed by everything after the question;
dns.c splices the client's question in at offset 12 (dns.h).
"""
from __future__ import annotations

import io
import logging
import struct
from dataclasses import dataclass, field

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.renderer
import dns.rrset

log = logging.getLogger("stormpy")
CNAME = dns.rdatatype.CNAME
SHIFTS_MAX = 500        # pointers a variable answer moves (the table takes 512 patches)
IN = dns.rdataclass.IN
# An answer over 65535 bytes is served as Knot DNS serves it over TCP: additional
# RRsets that do not fit are left out, one at a time (in-domain glue: with TC), and
# when the answer and authority sections alone do not fit, SERVFAIL. Such a filled
# answer leaves room for the query's OPT record, so that no asker loses more of it.
MESSAGE_MAX = 65535
OPT_ROOM = 11
QUESTION_MAX = 255 + 4
FILL_ROOM = MESSAGE_MAX - QUESTION_MAX - OPT_ROOM     # a variable form's, filled


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


def _header_flags(answer: Answer, tc: bool = False) -> int:
    return (dns.flags.QR | (dns.flags.AA if answer.aa else 0) | (dns.flags.TC if tc else 0) |
            (answer.rcode & 0xF))


def _header(answer: Answer, counts: tuple[int, int, int], tc: bool = False) -> bytes:
    return struct.pack("!HHHHHH", 0, _header_flags(answer, tc), 1, *counts)


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
        wire = msg.to_wire(max_size=MESSAGE_MAX)
    except dns.exception.TooBig:
        return _filled_fixed(qname, qtype, rdclass, answer)
    qlen = len(qname.to_wire()) + 4
    droppable = 0
    if _optional_additional(answer):
        msg.additional = answer.additional[:answer.required_additional]
        droppable = len(msg.to_wire(max_size=MESSAGE_MAX)) - qlen
    return wire[:12] + wire[12 + qlen:], droppable, ()


def servfail() -> tuple:
    """The form of an answer too big for any message (as encode_* give forms)."""
    return _header(Answer(rcode=dns.rcode.SERVFAIL, aa=False), (0, 0, 0)), 0, ()


def oversized(form: tuple) -> bool:
    """Whether a form encode_* gave is servfail(): no zone answer is SERVFAIL else."""
    return form[0][3] & 0xF == dns.rcode.SERVFAIL


def warn_oversized(path: str, origin: dns.name.Name, count: int, first: tuple | None = None) -> None:
    """The one line a zone with answers too big for any message (SERVFAIL) is loaded
    with: how many, and the first as (name, type: 0 for any other, whether it answers
    the names below name)."""
    if not count:
        return
    name, rdtype, below = first
    owner = f"*.{name}" if below else name.to_text()
    what = dns.rdatatype.to_text(rdtype) if rdtype else "(other types)"
    more = f" (and {count - 1} other answer(s))" if count > 1 else ""
    log.warning("%s: zone %s: the answer to %s %s is over 65535 bytes: served SERVFAIL%s",
                path, origin, owner, what, more)


def _filled_fixed(qname, qtype: int, rdclass: int, answer: Answer) -> tuple:
    r = dns.renderer.Renderer(0, _header_flags(answer), MESSAGE_MAX - OPT_ROOM)
    r.add_question(qname, qtype, rdclass)
    qlen = r.output.tell() - 12
    try:
        for section, rrsets in ((dns.renderer.ANSWER, answer.answer),
                                (dns.renderer.AUTHORITY, answer.authority)):
            for rrset in rrsets:
                r.add_rrset(section, rrset)
    except dns.exception.TooBig:
        return servfail()
    droppable = 0
    for i, rrset in enumerate(answer.additional):
        if i == answer.required_additional:
            droppable = r.output.tell() - qlen
        try:
            r.add_rrset(dns.renderer.ADDITIONAL, rrset)
        except dns.exception.TooBig:
            if i < answer.required_additional:
                r.flags |= dns.flags.TC
    r.write_header()
    wire = r.get_wire()
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
                    compress_additional: bool = True, room: int | None = None) -> tuple[bytes, int, tuple]:
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
        return _uncompressed(qname, answer, room)
    ref = qname.to_wire() + b"\0\0\0\0"
    out = io.BytesIO()
    out.write(b"\0" * 12 + ref)
    pointers = _Pointers(out, qname, anchor or qname.parent(), 0x3FFF - max(0, 255 + 4 - len(ref)))
    limit = None if room is None else room + len(ref)      # as out's offsets count
    try:
        counts = [_write_section(out, answer.answer, pointers, limit)[0],
                  _write_section(out, answer.authority, pointers, limit)[0], 0]
    except dns.exception.TooBig:
        return servfail()
    required, tc = answer.required_additional, False
    for part, rrsets in enumerate((answer.additional[:required], answer.additional[required:])):
        optional_at = out.tell()
        if not compress_additional:
            count, left_out = _write_uncompressed(out, qname, rrsets, limit)
        else:
            count, left_out = _write_section(out, rrsets, pointers, limit, skip=True)
        counts[2] += count
        tc = tc or (part == 0 and left_out > 0)      # in-domain glue left out
    wire = _header(answer, tuple(counts), tc) + out.getvalue()[12 + len(ref):]
    if room is None and len(wire) + QUESTION_MAX > MESSAGE_MAX:
        return encode_variable(qname, answer, anchor, compress_additional, FILL_ROOM)
    droppable = optional_at - len(ref) if _optional_additional(answer) else 0
    shifts = (len(ref),) + tuple(at - len(ref) for at in pointers.shifted) if pointers.shifted else ()
    return wire, droppable, shifts


def _write_uncompressed(out: io.BytesIO, qname, rrsets: list, limit: int | None) -> tuple[int, int]:
    count = left_out = 0
    for rrset in rrsets:
        body, n = section_wire(qname, [rrset])
        if limit is not None and out.tell() + len(body) > limit:
            left_out += 1
            continue
        out.write(body)
        count += n
    return count, left_out


def _uncompressed(qname: dns.name.Name, answer: Answer, room: int | None = None) -> tuple[bytes, int, tuple]:
    required = answer.required_additional
    head = [section_wire(qname, rrsets, answer.splice) for rrsets in (answer.answer, answer.authority)]
    parts = [[section_wire(qname, [rrset]) for rrset in rrsets]
             for rrsets in (answer.additional[:required], answer.additional[required:])]
    used, tc = 12 + sum(len(body) for body, _ in head), False
    if room is not None:
        if used > room:
            return servfail()
        for k, part in enumerate(parts):
            kept = []
            for body, n in part:
                if used + len(body) <= room:
                    kept.append((body, n))
                    used += len(body)
                else:
                    tc = tc or k == 0
            parts[k] = kept
    sections = head + [(b"".join(b for b, _ in part), sum(n for _, n in part)) for part in parts]
    counts = (sections[0][1], sections[1][1], sections[2][1] + sections[3][1])
    wire = _header(answer, counts, tc) + b"".join(b for b, _ in sections)
    if room is None and len(wire) + QUESTION_MAX > MESSAGE_MAX:
        return _uncompressed(qname, answer, FILL_ROOM)
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

    def take_back(self, start: int) -> None:
        """out cut at start, and what was written from there on forgotten."""
        self.out.seek(start)
        self.out.truncate()
        for name in [n for n, at in self.items() if at >= start]:
            del self[name]
        while self.shifted and self.shifted[-1] >= start:
            self.shifted.pop()


def _write_section(out: io.BytesIO, rrsets: list, pointers: _Pointers, limit: int | None = None,
                   skip: bool = False) -> tuple[int, int]:
    """(records written, RRsets left out): past limit (an offset in out), an RRset is
    taken back and left out when skip, else TooBig is raised."""
    count = left_out = 0
    for rrset in rrsets:
        start, records = out.tell(), 0
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
            records += 1
        if limit is not None and out.tell() > limit:
            if not skip:
                raise dns.exception.TooBig
            pointers.take_back(start)
            left_out += 1
            continue
        count += records
    return count, left_out
