"""Compile zones into the prepackaged DNS response table.

Every answer the server can give is decided here, once, by `ZoneIndex.resolve`,
and rendered to wire format with dnspython. The C fast path only looks up keys,
splices in the client's question and patches the ID and flags (see dns.h for the
key kinds and lookup order).
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

from stormpy import _core
from stormpy.errors import ZoneError
from stormpy.dns.zone import Zone

IN = dns.rdataclass.IN
CH = dns.rdataclass.CH
ANY = dns.rdatatype.ANY
CNAME = dns.rdatatype.CNAME
DS = dns.rdatatype.DS
NS = dns.rdatatype.NS
SOA = dns.rdatatype.SOA
OTHER_TYPE = 0          # stands for "any type not listed" while compiling
MAX_CHAIN = 5           # CNAMEs followed in one answer (Knot DNS: 5)
WILD = b"*"

# Every DNS response: splice the question at 12, copy the ID, RD and CD bits.
_FIELD_MESSAGE, _FIELD_QUESTION = 0, 1
DNS_PATCHES = (
    (_core.PATCH_INSERT, _FIELD_QUESTION, 12, 0, 0, 0),
    (_core.PATCH_COPY, _FIELD_MESSAGE, 0, 0, 2, 0),
    (_core.PATCH_COPY_BITS, _FIELD_MESSAGE, 2, 2, 0, 0x01),
    (_core.PATCH_COPY_BITS, _FIELD_MESSAGE, 3, 3, 0, 0x10),
)
_ADDITIONAL_TARGET = {NS: "target", dns.rdatatype.MX: "exchange", dns.rdatatype.SRV: "target"}


def tag(kind: int, rdclass: int, rdtype: int) -> int:
    return (kind << 32) | (rdclass << 16) | rdtype


@dataclass
class Answer:
    rcode: int = dns.rcode.NOERROR
    aa: bool = True
    answer: list = field(default_factory=list)
    authority: list = field(default_factory=list)
    additional: list = field(default_factory=list)
    referral: bool = False


def _renamed(rrset: dns.rrset.RRset, owner: dns.name.Name) -> dns.rrset.RRset:
    if rrset.name == owner:
        return rrset
    out = dns.rrset.RRset(owner, rrset.rdclass, rrset.rdtype)
    out.update(rrset)
    return out


class ZoneIndex:
    """One zone's names, zone cuts and wildcards, and the answer to any question."""

    def __init__(self, zone: Zone):
        self.zone = zone
        self.origin = zone.origin
        self.nodes: dict[dns.name.Name, dict[int, dns.rrset.RRset]] = {}
        self.types: set[int] = set()
        for name, rdataset in zone.zone.iterate_rdatasets():
            rrset = dns.rrset.RRset(name, rdataset.rdclass, rdataset.rdtype)
            rrset.update(rdataset)
            self.nodes.setdefault(name, {})[rdataset.rdtype] = rrset
            self.types.add(rdataset.rdtype)
        self.names: set[dns.name.Name] = set()
        for name in self.nodes:
            while name not in self.names:      # the name and its empty non-terminals
                self.names.add(name)
                if name == self.origin:
                    break
                name = name.parent()
        self.cuts = {n for n, node in self.nodes.items() if NS in node and n != self.origin}
        soa = self.nodes[self.origin][SOA]
        self.negative_soa = dns.rrset.RRset(self.origin, IN, SOA)
        self.negative_soa.update(soa)
        self.negative_soa.ttl = min(soa.ttl, soa[0].minimum)   # RFC 2308

    def cut_above(self, name: dns.name.Name):
        """The topmost zone cut at or above name, if any."""
        found = None
        while name != self.origin:
            if name in self.cuts:
                found = name
            name = name.parent()
        return found

    def closest_encloser(self, name: dns.name.Name) -> dns.name.Name:
        while name not in self.names:
            name = name.parent()
        return name

    def referral(self, cut: dns.name.Name, answer: list) -> Answer:
        ns = self.nodes[cut][NS]
        return Answer(aa=bool(answer), answer=answer, authority=[ns],
                      additional=self._addresses([ns]), referral=True)

    def resolve(self, qname: dns.name.Name, qtype: int) -> Answer:
        """The complete answer to (qname, qtype), as Knot DNS gives it."""
        answer: list = []
        seen: set = set()
        name = qname
        while True:
            cut = self.cut_above(name)
            if cut is not None and not (qtype == DS and name == cut):
                return self.referral(cut, answer)
            node = self.nodes.get(name)
            if node is None:
                if name in self.names:       # empty non-terminal
                    return Answer(answer=answer, authority=[self.negative_soa])
                wildcard = dns.name.Name((WILD,) + self.closest_encloser(name).labels)
                node = self.nodes.get(wildcard)
                if node is None:
                    return Answer(rcode=dns.rcode.NXDOMAIN, answer=answer,
                                  authority=[self.negative_soa])
            if qtype == ANY:                 # RFC 8482: one RRset, the lowest type
                answer.append(_renamed(node[min(node)], name))
                break
            if qtype in node:
                answer.append(_renamed(node[qtype], name))
                break
            if CNAME in node:
                if len(seen) == MAX_CHAIN:       # the chain stops here, as in Knot DNS
                    break
                answer.append(_renamed(node[CNAME], name))
                seen.add(name)
                target = node[CNAME][0].target
                if target in seen or not target.is_subdomain(self.origin):
                    break
                name = target
                continue
            return Answer(answer=answer, authority=[self.negative_soa])
        return Answer(answer=answer, additional=self._addresses(answer))

    def _addresses(self, rrsets: list) -> list:
        """A and AAAA of in-zone NS, MX and SRV targets, as Knot adds them."""
        out, seen = [], set()
        for rrset in rrsets:
            attr = _ADDITIONAL_TARGET.get(rrset.rdtype)
            if attr is None:
                continue
            for rdata in rrset:
                target = getattr(rdata, attr)
                if target in seen or not target.is_subdomain(self.origin):
                    continue
                seen.add(target)
                node = self.nodes.get(target, {})
                for rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
                    if rdtype in node:
                        out.append(node[rdtype])
        return out


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


def encode_variable(qname: dns.name.Name, answer: Answer) -> tuple[bytes, int]:
    """Wire format for a question of unknown length (wildcards, NXDOMAIN, referrals
    below a cut): the asked name is a pointer to the question, nothing else is
    compressed, so no offset depends on the question's length."""
    sections = []
    for rrsets in (answer.answer, answer.authority, answer.additional):
        body, count = bytearray(), 0
        for rrset in rrsets:
            owner = b"\xc0\x0c" if rrset.name == qname else rrset.name.to_wire()
            for rdata in rrset:
                data = rdata.to_wire()
                body += owner + struct.pack("!HHIH", rrset.rdtype, rrset.rdclass, rrset.ttl, len(data))
                body += data
                count += 1
        sections.append((bytes(body), count))
    head = _header(answer, tuple(c for _, c in sections))
    wire = head + b"".join(b for b, _ in sections)
    if len(wire) + 255 + 4 > 65535:
        raise ZoneError(f"the response below {qname.parent()} is larger than 65535 bytes")
    droppable = 0
    if answer.additional and not answer.referral:
        droppable = len(wire) - len(sections[2][0])
    return wire, droppable


@dataclass
class CompileStats:
    zones: int = 0
    records: int = 0
    names: int = 0
    keys: int = 0
    responses: int = 0
    memory_bytes: int = 0
    zone_responses: dict[str, int] = field(default_factory=dict)  # origin: its distinct answers
    serials: dict[str, int] = field(default_factory=dict)   # zone (text) -> SOA serial


class _Emitter:
    """Collects (tag, key) -> response bytes, storing identical responses once per zone
    counter slot (`zone`, set before each zone's responses are added). `wildcard` marks
    a BELOW_OTHER response whose name has BELOW keys (dns.h: SP_DNS_USER_WILDCARD)."""

    def __init__(self):
        self.keys: dict[tuple[int, bytes], int] = {}
        self.responses: dict[tuple[bytes, int, int], int] = {}
        self.used: set[int] = set()      # the responses the zone being emitted refers to
        self.zone = 0

    def add(self, kind: int, rdclass: int, rdtype: int, name: dns.name.Name, wire: tuple[bytes, int],
            wildcard: bool = False):
        index = self.responses.setdefault(wire + (self.zone, wildcard), len(self.responses))
        self.used.add(index)
        self.keys[(tag(kind, rdclass, rdtype), name.canonicalize().to_wire())] = index


def assign_zone_slots(slots: dict[dns.name.Name, int], zones: list[Zone]) -> None:
    """Give each zone not in slots the next of the per-zone answer counters (dns.h's
    SP_DNS_ZONE_SLOTS: 1 to 63; 0 counts the rest). A server keeps slots across
    reloads, so a zone's counter stays its own when others come and go."""
    for origin in sorted(z.origin for z in zones):
        if origin not in slots and len(slots) < _core.DNS_ZONE_SLOTS - 1:
            slots[origin] = len(slots) + 1


def _rcode_of(wire: bytes) -> int:
    return wire[3] & 0x0F


def _sample_below(name: dns.name.Name, ix: ZoneIndex):
    """A name below `name` that the zone does not hold; it stands for whatever is
    asked below it. None when no name fits below `name` (255-octet limit)."""
    for label in (b"\x00stormpy-asked\x00", b"\x00"):
        if len(name.to_wire()) + 1 + len(label) <= 255:
            sample = dns.name.Name((label,) + name.labels)
            if sample not in ix.names:
                return sample
    return None


def _emit_zone(ix: ZoneIndex, deeper: list, out: _Emitter) -> None:
    nxdomain_cache = None
    for name in sorted(ix.names):
        if any(name.is_subdomain(o) for o in deeper):
            continue                                 # served by its own zone
        sample = _sample_below(name, ix)
        cut = ix.cut_above(name)
        if cut is not None:
            referral = ix.referral(cut, [])
            out.add(_core.DNS_OTHER, IN, 0, name, encode_fixed(name, 0, IN, referral))
            if sample is not None:
                out.add(_core.DNS_BELOW_OTHER, IN, 0, name, encode_variable(sample, referral))
            if name == cut:
                out.add(_core.DNS_EXACT, IN, DS, name, encode_fixed(name, DS, IN, ix.resolve(name, DS)))
            continue
        node = ix.nodes.get(name, {})
        other = encode_fixed(name, OTHER_TYPE, IN, ix.resolve(name, OTHER_TYPE))
        out.add(_core.DNS_OTHER, IN, 0, name, other)
        types = set(node) | {ANY}
        if CNAME in node:
            types |= ix.types | {DS}      # DS never follows a chain into a referral
        for rdtype in sorted(types):
            wire = encode_fixed(name, rdtype, IN, ix.resolve(name, rdtype))
            if wire != other:
                out.add(_core.DNS_EXACT, IN, rdtype, name, wire)

        if sample is None:
            continue                                 # no name fits below this one
        wild = ix.nodes.get(dns.name.Name((WILD,) + name.labels))
        if wild is None:
            if nxdomain_cache is None:
                nxdomain_cache = encode_variable(sample, ix.resolve(sample, OTHER_TYPE))
            out.add(_core.DNS_BELOW_OTHER, IN, 0, name, nxdomain_cache)
            continue
        other = encode_variable(sample, ix.resolve(sample, OTHER_TYPE))
        out.add(_core.DNS_BELOW_OTHER, IN, 0, name, other, wildcard=True)
        types = set(wild) | {ANY}
        if CNAME in wild:
            types |= ix.types | {DS}
        for rdtype in sorted(types):
            wire = encode_variable(sample, ix.resolve(sample, rdtype))
            if wire != other:
                out.add(_core.DNS_BELOW, IN, rdtype, name, wire)


def _emit_chaos(out: _Emitter, version: str | None, identity: str | None) -> None:
    for names, text in ((("version.bind.", "version.server."), version),
                        (("id.server.", "hostname.bind."), identity)):
        if text is None:
            continue
        for name_text in names:
            name = dns.name.from_text(name_text)
            rrset = dns.rrset.from_text(name, 0, CH, dns.rdatatype.TXT,
                                        '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
            out.add(_core.DNS_EXACT, CH, dns.rdatatype.TXT, name,
                    encode_fixed(name, dns.rdatatype.TXT, CH, Answer(aa=False, answer=[rrset])))


def compile_zones(zones: list[Zone], chaos_version: str | None = None,
                  chaos_identity: str | None = None, extend=None, zone_slots=None):
    """Compile loaded zones into a response Table. Returns (table, CompileStats).
    extend(builder), if given, adds to the table before it is finished (a custom
    responder's names and rules, stormpy.responder). zone_slots (origin -> counter
    slot, assign_zone_slots) numbers each zone's answers for the per-zone counters."""
    zone_slots = zone_slots or {}
    if extend is None:
        from stormpy.dns import native     # the C path, when every zone was read in C
        compiled = native.compile_zones(zones, chaos_version, chaos_identity, zone_slots)
        if compiled is not None:
            return compiled
    origins = [z.origin for z in zones]
    if len(set(origins)) != len(origins):
        dup = next(o for o in origins if origins.count(o) > 1)
        raise ZoneError(f"zone {dup} is given more than once")
    indexes = sorted((ZoneIndex(z) for z in zones), key=lambda ix: len(ix.origin))
    out = _Emitter()
    zone_responses = {}
    for ix in indexes:
        deeper = [o.origin for o in indexes if o.origin != ix.origin and o.origin.is_subdomain(ix.origin)]
        out.used = set()
        out.zone = zone_slots.get(ix.origin, 0)
        try:
            _emit_zone(ix, deeper, out)
        except dns.exception.DNSException as e:
            raise ZoneError(f"{ix.zone.path}: cannot compile zone {ix.origin}: {e}") from None
        zone_responses[ix.origin.to_text()] = len(out.used)
    for child in indexes:                          # DS is answered at the parent
        parents = [p for p in indexes if p.origin != child.origin and child.origin.is_subdomain(p.origin)]
        if parents:
            parent = max(parents, key=lambda p: len(p.origin))
            out.zone = zone_slots.get(parent.origin, 0)
            out.add(_core.DNS_EXACT, IN, DS, child.origin,
                    encode_fixed(child.origin, DS, IN, parent.resolve(child.origin, DS)))
    out.zone = 0
    _emit_chaos(out, chaos_version, chaos_identity)

    builder = _core.TableBuilder()
    for (wire, droppable, zone, wildcard) in out.responses:
        builder.add_response(wire, DNS_PATCHES, _rcode_of(wire) | zone << 8 | droppable << 16 |
                             (_core.DNS_USER_WILDCARD if wildcard else 0))
    for (t, key), index in out.keys.items():
        builder.add_key(t, key, index)
    if extend is not None:
        extend(builder)
    table = builder.finish()
    info = table.info()
    stats = CompileStats(zones=len(zones), records=sum(z.record_count for z in zones),
                         names=sum(len(ix.names) for ix in indexes), keys=info["keys"],
                         responses=info["responses"], memory_bytes=info["memory_bytes"],
                         zone_responses=zone_responses,
                         serials={ix.origin.to_text(): ix.nodes[ix.origin][SOA][0].serial
                                  for ix in indexes})
    return table, stats
