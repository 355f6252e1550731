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
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.CNAME
import dns.rrset

from stormpy import _core
from stormpy.errors import ZoneError
from stormpy.dns.additional import additional_rrsets, renamed as _renamed
from stormpy.dns.answer import IN, Answer, encode_fixed, warn_oversized
from stormpy.dns.dnssec import Encoder, Gaps, Nsec3Splice
from stormpy.dns.zone import Zone

CH = dns.rdataclass.CH
ANY = dns.rdatatype.ANY
CNAME = dns.rdatatype.CNAME
DS = dns.rdatatype.DS
NS = dns.rdatatype.NS
NSEC = dns.rdatatype.NSEC
NSEC3 = dns.rdatatype.NSEC3
RRSIG = dns.rdatatype.RRSIG
SOA = dns.rdatatype.SOA
DNAME = dns.rdatatype.DNAME
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
# A response dns.c completes per name (DNAME, NSEC3 descriptor): no INSERT, so the
# common renderer declines it (dns.h: SP_DNS_USER_DNAME)
SPLICED_PATCHES = DNS_PATCHES[1:]


def tag(kind: int, rdclass: int, rdtype: int) -> int:
    return (kind << 32) | (rdclass << 16) | rdtype


class ZoneIndex:
    """One zone's names, zone cuts and wildcards, and the answer to any question."""

    def __init__(self, zone: Zone):
        self.zone = zone
        self.origin = zone.origin
        self.nodes: dict[dns.name.Name, dict[int, dns.rrset.RRset]] = {}
        self.types: set[int] = set()
        # DNSSEC data apart: RRSIGs by owner and covered type; NSEC3 records, whose
        # hashed owners are no names of the zone (a query for one is NXDOMAIN)
        self.sigs: dict[dns.name.Name, dict[int, dns.rrset.RRset]] = {}
        self.nsec3: dict[dns.name.Name, dns.rrset.RRset] = {}
        for name, rdataset in zone.zone.iterate_rdatasets():
            rrset = dns.rrset.RRset(name, rdataset.rdclass, rdataset.rdtype, rdataset.covers)
            rrset.update(rdataset)
            if rdataset.rdtype == RRSIG:
                self.sigs.setdefault(name, {})[rdataset.covers] = rrset
            elif rdataset.rdtype == NSEC3:
                self.nsec3[name] = rrset
            else:
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
        self.dnames = {n for n, node in self.nodes.items() if DNAME in node}
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
        """The delegation at cut: in-domain glue first, which must fit (or TC), then
        sibling glue, which may be left out (RFC 9471)."""
        ns = self.nodes[cut][NS]
        glue = self._addresses([ns])
        in_domain = [r for r in glue if r.name.is_subdomain(cut)]
        return Answer(aa=bool(answer), answer=answer, authority=[ns],
                      additional=in_domain + [r for r in glue if not r.name.is_subdomain(cut)],
                      referral=True, required_additional=len(in_domain))

    def dname_above(self, name: dns.name.Name):
        """The topmost DNAME owner strictly above name, if any: it rewrites name."""
        found = None
        while name != self.origin:
            name = name.parent()
            if name in self.dnames:
                found = name
        return found

    def resolve(self, qname: dns.name.Name, qtype: int) -> Answer:
        """The complete answer to (qname, qtype), as Knot DNS gives it."""
        answer: list = []
        expanded: list = []
        seen: set = set()
        name = qname
        while True:
            cut = self.cut_above(name)
            if cut is not None and not (qtype == DS and name == cut):
                return self.referral(cut, answer)
            dname = self.dname_above(name)
            if dname is not None:
                return self._synthesized(name, dname, answer)
            node, owner = self.nodes.get(name), name
            if node is None and name not in self.names:
                closest = self.closest_encloser(name)
                owner = dns.name.Name((WILD,) + closest.labels)
                if owner not in self.names:
                    return Answer(rcode=dns.rcode.NXDOMAIN, answer=answer,
                                  authority=[self.negative_soa],
                                  denial=("nxdomain", name, closest), expanded=expanded)
                node = self.nodes.get(owner)
                if node is not None:
                    expanded.append((name, owner))
            if node is None:     # an empty non-terminal, or a wildcard that is one: it
                # exists, so it matches and has no RRset of any type (RFC 4592 2.2.1)
                return Answer(answer=answer, authority=[self.negative_soa],
                              denial=("nodata", name, owner), expanded=expanded)
            if qtype in (ANY, RRSIG):        # RFC 8482: one RRset, the lowest type
                rrsets = node if qtype == ANY else self.sigs.get(owner, {})
                if rrsets:
                    answer.append(_renamed(rrsets[min(rrsets)], name))
                    break
            elif qtype in node:
                answer.append(_renamed(node[qtype], name))
                break
            # Knot DNS and BIND answer NSEC and RRSIG at the alias itself, no chain followed
            if CNAME in node and qtype not in (NSEC, RRSIG):
                if len(seen) == MAX_CHAIN:       # the chain stops here, as in Knot DNS
                    break
                answer.append(_renamed(node[CNAME], name))
                seen.add(name)
                target = node[CNAME][0].target
                if target in seen or not target.is_subdomain(self.origin):
                    break
                name = target
                continue
            return Answer(answer=answer, authority=[self.negative_soa],
                          denial=("nodata", name, owner), expanded=expanded)
        return Answer(answer=answer, additional=self._addresses(answer), expanded=expanded)

    def _synthesized(self, name: dns.name.Name, dname: dns.name.Name, answer: list) -> Answer:
        """RFC 6672: the DNAME, and a CNAME from name to name with the DNAME's owner
        replaced by its target (not followed further); YXDOMAIN when that is too long."""
        rrset = self.nodes[dname][DNAME]
        answer.append(rrset)
        try:
            target = name.relativize(dname).concatenate(rrset[0].target)
        except dns.name.NameTooLong:
            return Answer(rcode=dns.rcode.YXDOMAIN, answer=answer)
        cname = dns.rrset.from_rdata(name, rrset.ttl, dns.rdtypes.ANY.CNAME.CNAME(
            IN, CNAME, target))
        answer.append(cname)
        return Answer(answer=answer, splice=(name, rrset[0].target))

    def _addresses(self, rrsets: list) -> list:
        """What in-zone NS, MX, SRV, SVCB and HTTPS targets add (additional.py)."""
        return additional_rrsets(self.nodes, self.names, self.origin, rrsets)


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
    compiled_in: str = "Python"     # or "C" (dns/native.py): what a slow load looks at first


class _Emitter:
    """Collects (tag, key) -> response, storing identical responses once per zone
    counter slot (`zone`, set before each zone's responses are added). A response is
    its wire form (encode_*), its DNSSEC form or None, and its flags: `wildcard` marks
    a BELOW_OTHER response whose name has BELOW keys, `spliced` one that dns.c
    completes with the asked name (dns.h: SP_DNS_USER_WILDCARD, SP_DNS_USER_DNAME)."""

    def __init__(self):
        self.keys: dict[tuple[int, bytes], int] = {}
        self.responses: dict[tuple, int] = {}
        self.used: set[int] = set()      # the responses the zone being emitted refers to
        self.zone = 0

    def add(self, kind: int, rdclass: int, rdtype: int, name: dns.name.Name, wires: tuple,
            wildcard: bool = False, spliced: bool = False):
        index = self.responses.setdefault(wires + (self.zone, wildcard, spliced),
                                          len(self.responses))
        self.used.add(index)
        self.keys[(tag(kind, rdclass, rdtype), name.canonicalize().to_wire())] = index


def _user_word(form: tuple, zone: int, flags: int) -> int:
    """form: (wire, droppable, shifts) as answer.py's encoders give it."""
    return _rcode_of(form[0]) | flags | zone << 8 | form[1] << 16


def _patches(form: tuple, base: tuple = DNS_PATCHES) -> tuple:
    """base, and a SHIFT for each pointer a variable answer moves with the question."""
    if not form[2]:
        return base
    stored_question, *pointers = form[2]
    return base + tuple((_core.PATCH_SHIFT, _FIELD_QUESTION, at, 0, stored_question, 0)
                        for at in pointers)


def _build(out: _Emitter, extend):
    """The table: each response, and right after it its DNSSEC form when it has one
    (dns.c takes the next response for a DO query when SP_DNS_USER_SIGNED is set), or
    the list of the forms for each gap (`Gaps`, SP_DNS_USER_GAPS), stored first."""
    builder = _core.TableBuilder()
    forms: dict[tuple, int] = {}

    def stored(form, zone, data=None):
        if (form, zone) not in forms:
            forms[(form, zone)] = (builder.add_response(form[0], _patches(form), _user_word(form, zone, 0))
                                   if data is None else builder.add_response(data, (), zone << 8))
        return forms[(form, zone)]

    for (_, signed, zone, _, _) in out.responses:
        for _, form in signed if isinstance(signed, Gaps) else ():
            stored(form, zone)
        if isinstance(signed, Nsec3Splice):
            stored(signed[0], zone)
            stored((signed[4], 0), zone, signed[4])
    first = {}
    for (plain, signed, zone, wildcard, spliced), index in out.responses.items():
        flags = ((_core.DNS_USER_WILDCARD if wildcard else 0) |
                 (_core.DNS_USER_DNAME if spliced else 0))
        signed_flag = _core.DNS_USER_SIGNED if signed is not None else 0
        base = SPLICED_PATCHES if spliced else DNS_PATCHES
        first[index] = builder.add_response(plain[0], _patches(plain, base),
                                            _user_word(plain, zone, flags | signed_flag))
        if isinstance(signed, Gaps):
            entries = b"".join(struct.pack("!IB", forms[(form, zone)], len(bound)) + bound.ljust(63, b"\0")
                               for bound, form in signed)
            builder.add_response(entries, (), _core.DNS_USER_GAPS | zone << 8)
        elif isinstance(signed, Nsec3Splice):
            form, insert, ancestor, present, chain = signed
            descriptor = form[0][:12] + struct.pack("!IIIBB", forms[(form, zone)],
                                                    forms[((chain, 0), zone)], insert, ancestor,
                                                    len(present))
            builder.add_response(descriptor + b"".join(struct.pack("!I", i) for i in present),
                                 SPLICED_PATCHES, _core.DNS_USER_NSEC3 | zone << 8)
        elif signed is not None:
            builder.add_response(signed[0], _patches(signed, base), _user_word(signed, zone, flags))
    for (t, key), index in out.keys.items():
        builder.add_key(t, key, first[index])
    if extend is not None:
        extend(builder)
    return builder.finish()


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


def _emit_zone(ix: ZoneIndex, deeper: list, out: _Emitter) -> list:
    enc = Encoder(ix)
    nxdomain_cache = None
    for name in sorted(ix.names):
        if any(name.is_subdomain(o) for o in deeper):
            continue                                 # served by its own zone
        if ix.dname_above(name) is not None:
            continue                                 # occluded: the DNAME rewrites it
        sample = _sample_below(name, ix)
        cut = ix.cut_above(name)
        if cut is not None:
            out.add(_core.DNS_OTHER, IN, 0, name, enc.fixed(name, 0))
            if sample is not None:
                out.add(_core.DNS_BELOW_OTHER, IN, 0, name, enc.variable(sample, 0))
            if name == cut:
                out.add(_core.DNS_EXACT, IN, DS, name, enc.fixed(name, DS))
            continue
        node = ix.nodes.get(name, {})
        other = enc.fixed(name, OTHER_TYPE)
        out.add(_core.DNS_OTHER, IN, 0, name, other)
        types = set(node) | {ANY, RRSIG}
        if CNAME in node:
            types |= ix.types | {DS, NSEC}    # neither follows a chain (DS: into a referral)
        for rdtype in sorted(types):
            wire = enc.fixed(name, rdtype)
            if wire != other:
                out.add(_core.DNS_EXACT, IN, rdtype, name, wire)

        if sample is None:
            continue                                 # no name fits below this one
        if name in ix.dnames:
            out.add(_core.DNS_BELOW_OTHER, IN, 0, name, enc.variable(sample, 0), spliced=True)
            continue
        wild_name = dns.name.Name((WILD,) + name.labels)
        if wild_name not in ix.names:
            if nxdomain_cache is None or enc.signed:   # signed: each name's own proofs
                nxdomain_cache = enc.variable(sample, OTHER_TYPE, shared=not enc.signed)
            out.add(_core.DNS_BELOW_OTHER, IN, 0, name, nxdomain_cache)
            continue
        wild = ix.nodes.get(wild_name, {})    # none: NODATA to every type, no BELOW keys
        other = enc.variable(sample, OTHER_TYPE)
        out.add(_core.DNS_BELOW_OTHER, IN, 0, name, other, wildcard=bool(wild))
        types = set(wild) | {ANY, RRSIG}
        if CNAME in wild:
            types |= ix.types | {DS, NSEC}
        for rdtype in sorted(types):
            wire = enc.variable(sample, rdtype)
            if wire != other:
                out.add(_core.DNS_BELOW, IN, rdtype, name, wire)
    return enc.oversized      # the answers served SERVFAIL


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
                    (encode_fixed(name, dns.rdatatype.TXT, CH, Answer(aa=False, answer=[rrset])),
                     None))


def compile_zones(zones: list[Zone], chaos_version: str | None = None,
                  chaos_identity: str | None = None, extend=None, zone_slots=None):
    """Compile loaded zones into a response Table. Returns (table, CompileStats).
    extend(builder), if given, adds to the table before it is finished (a custom
    responder's names and rules, stormpy.responder). zone_slots (origin -> counter
    slot, assign_zone_slots) numbers each zone's answers for the per-zone counters."""
    zone_slots = zone_slots or {}
    from stormpy.dns import native         # the C path, when every zone was read in C
    compiled = native.compile_zones(zones, chaos_version, chaos_identity, zone_slots, extend)
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
            oversized = _emit_zone(ix, deeper, out)
        except dns.exception.DNSException as e:
            raise ZoneError(f"{ix.zone.path}: cannot compile zone {ix.origin}: {e}") from None
        warn_oversized(ix.zone.path, ix.origin, len(oversized), *oversized[:1])
        zone_responses[ix.origin.to_text()] = len(out.used)
    for child in indexes:                          # DS is answered at the parent
        parents = [p for p in indexes if p.origin != child.origin and child.origin.is_subdomain(p.origin)]
        if parents:
            parent = max(parents, key=lambda p: len(p.origin))
            out.zone = zone_slots.get(parent.origin, 0)
            out.add(_core.DNS_EXACT, IN, DS, child.origin, Encoder(parent).fixed(child.origin, DS))
    out.zone = 0
    _emit_chaos(out, chaos_version, chaos_identity)

    table = _build(out, extend)
    info = table.info()
    stats = CompileStats(zones=len(zones), records=sum(z.record_count for z in zones),
                         names=sum(len(ix.names) for ix in indexes), keys=info["keys"],
                         responses=info["responses"], memory_bytes=info["memory_bytes"],
                         zone_responses=zone_responses,
                         serials={ix.origin.to_text(): ix.nodes[ix.origin][SOA][0].serial
                                  for ix in indexes})
    return table, stats
