"""Pre-signed zones: the DNSSEC variant of each prepackaged answer.

stormpy does not sign. A zone signed elsewhere (dnssec-signzone, ldns-signzone, a
primary) carries its RRSIGs, NSEC or NSEC3 chain, DNSKEY and NSEC3PARAM; here every
answer `ZoneIndex.resolve` decides gets a second form for queries with the DO bit
(RFC 3225): each RRset with its RRSIGs, and a denial (NXDOMAIN, NODATA, a wildcard
answer, a delegation without DS) with the NSEC or NSEC3 records that prove it
(RFC 4035 section 3.1.3, RFC 5155 section 7.2), chosen as Knot DNS chooses them. The
C lookup takes that form when the query has DO (dns.h: SP_DNS_USER_SIGNED).

A proof that depends on the name asked (the NSEC or NSEC3 covering a name that does
not exist) cannot be stored once for every name below an ancestor. With NSEC it
depends only on where the asked name's label falls among the ancestor's children,
so such an answer gets one DNSSEC form per gap between them (`Gaps`), which dns.c
picks by that label. With NSEC3 it is the NSEC3 covering the name's next closer
name, found by its hash: the form leaves it out, and dns.c hashes the name and splices
it in from the zone's chain (`Nsec3Splice`, `chain`).
"""
from __future__ import annotations

import base64
import bisect
import struct

import dns.dnssec
import dns.exception
import dns.name
from dns.rdatatype import DNSKEY, DS, NSEC, NSEC3, NSEC3PARAM, RRSIG
import dns.rrset

from stormpy.dns.additional import wildcard_matching
from stormpy.dns.answer import (IN, Answer, encode_fixed, encode_variable, oversized,
                                section_wire)

WILD = b"*"


class Gaps(tuple):
    """The DNSSEC forms of one answer below an ancestor: (bound, form) pairs sorted by
    bound, the lower-case label from which on a name's label gets that form."""


class Nsec3Splice(tuple):
    """The DNSSEC form below an ancestor in an NSEC3 zone, completed per name by dns.c:
    (form wire, stored offset where its authority section ends, the ancestor's wire
    length, the chain indices of the NSEC3 records the form holds, the chain)."""


class Unprovable(Exception):
    """The proof would depend on the name asked (see the module's docstring)."""


def _digest(label: bytes) -> bytes:
    """An NSEC3 owner's hash (its base32hex label); b"" when it is none."""
    try:
        return base64.b32hexdecode(label.upper())
    except ValueError:
        return b""


def _with_owner(rrset: dns.rrset.RRset, owner: dns.name.Name, ttl: int) -> dns.rrset.RRset:
    out = dns.rrset.RRset(owner, rrset.rdclass, rrset.rdtype, rrset.covers)
    out.update(rrset)
    out.ttl = ttl
    return out


class Signed:
    """A signed zone's RRSIGs and denial chain, and the DNSSEC form of its answers.
    `ix` is the zone's ZoneIndex (sigs, nsec3, nodes, names, cuts)."""

    def __init__(self, ix):
        self.ix = ix
        self.origin = ix.origin
        apex = ix.nodes[ix.origin]
        param = apex.get(NSEC3PARAM)
        self.nsec3 = None
        if param is not None and ix.nsec3:
            p = param[0]
            if p.algorithm != dns.dnssec.NSEC3Hash.SHA1:
                raise dns.exception.DNSException(
                    f"NSEC3PARAM hash algorithm {p.algorithm} is not SHA-1, the one NSEC3 has")
            self.nsec3 = (p.salt, p.iterations, p.algorithm)
            for owner in ix.nsec3:
                if owner.parent() != self.origin or len(_digest(owner.labels[0])) != 20:
                    raise dns.exception.DNSException(
                        f"NSEC3 owner {owner} is no SHA-1 hash (base32hex) right below the origin")
            self.hashes = sorted(owner.labels[0].lower() for owner in ix.nsec3)
            self.chain_index = {label: i for i, label in enumerate(self.hashes)}
            self.chain = self._chain()
        self.nsec_owners = sorted(n for n, node in ix.nodes.items() if NSEC in node)
        self.children: dict[dns.name.Name, list] = {}
        for name in ix.names:
            if name != ix.origin:
                self.children.setdefault(name.parent(), []).append(name.labels[0].lower())
        for labels in self.children.values():
            labels.sort()

    def gap_samples(self, ancestor: dns.name.Name):
        """(bound, a name in that gap) for each gap between ancestor's children, None
        where the proofs depend on more than the gap (NSEC3)."""
        if self.nsec3 is not None:
            return None
        children = self.children.get(ancestor, [])
        taken, room = set(children), 255 - len(ancestor.to_wire()) - 1
        out = []
        for bound, label in [(b"", b"\x00")] + [(c, c + b"\x00") for c in children]:
            if label not in taken and len(label) <= min(63, room):
                out.append((bound, dns.name.Name((label,) + ancestor.labels)))
        return out

    def _chain(self) -> bytes:
        """The NSEC3 chain as nsec3.c searches it: salt and iterations, then per record
        in hash order its hash and where its NSEC3 and RRSIG records lie."""
        salt, iterations, _ = self.nsec3
        salt = salt or b""
        entries, records = [], []
        for label in self.hashes:
            nsec3 = self.ix.nsec3[self._nsec3_owner(label)]
            sig = self.rrsig(nsec3)
            wire, count = section_wire(None, [nsec3] + ([sig] if sig is not None else []))
            entries.append((_digest(label), wire, count))
        head = struct.pack("!HB", iterations, len(salt)) + salt + struct.pack("!I", len(entries))
        offset = len(head) + len(entries) * 28
        index = bytearray()
        for digest, wire, count in entries:
            index += digest + struct.pack("!IHH", offset, len(wire), count)
            offset += len(wire)
        return head + bytes(index) + b"".join(wire for _, wire, _ in entries)

    def splice(self, sample: dns.name.Name, form) -> Nsec3Splice:
        """form (an Answer from sign, cover_next_closer set) as Nsec3Splice."""
        wire = encode_variable(sample, form, compress_additional=False)
        additional = section_wire(sample, form.additional)[0]
        present = tuple(self.chain_index[r.name.labels[0].lower()] for r in form.authority
                        if r.rdtype == NSEC3)
        return Nsec3Splice((wire, len(wire[0]) - len(additional), len(sample.parent().to_wire()),
                            present, self.chain))

    @staticmethod
    def applies(ix) -> bool:
        """A zone is served signed when its apex has a DNSKEY and RRSIGs."""
        return DNSKEY in ix.nodes[ix.origin] and bool(ix.sigs.get(ix.origin))

    # -- RRSIGs ---------------------------------------------------------------

    def rrsig(self, rrset: dns.rrset.RRset, source: dns.name.Name | None = None):
        """The RRSIG covering rrset at its owner (or at source, the wildcard it was
        expanded from), owned and timed as rrset is served; None for unsigned data
        (glue, NS at a delegation)."""
        sig = self.ix.sigs.get(source or rrset.name, {}).get(rrset.rdtype)
        return None if sig is None else _with_owner(sig, rrset.name, rrset.ttl)

    def _signed_section(self, rrsets, sources, out: list, seen: set) -> None:
        for rrset in rrsets:
            _add(out, seen, rrset)
            source = sources.get(rrset.name)
            if source is not None:     # an expanded wildcard's RRset counts as its own
                seen.add((source, rrset.rdtype, rrset.covers))
            if rrset.rdtype != RRSIG:
                sig = self.rrsig(rrset, source)
                if sig is not None:
                    _add(out, seen, sig)
                    if source is not None:
                        seen.add((source, RRSIG, rrset.rdtype))

    # -- the DNSSEC form of an answer -----------------------------------------

    def sign(self, answer, variable: dns.name.Name | None = None):
        """answer (compiler.Answer) with RRSIGs and proofs, or None when a proof would
        depend on the name asked: `variable` is the sample standing for every name
        below an ancestor (a BELOW key's answer)."""
        sources = {qname: wild for qname, wild in answer.expanded}
        out = Answer(rcode=answer.rcode, aa=answer.aa, referral=answer.referral,
                     splice=answer.splice)
        self._left_out = False
        seen: set = set()
        try:
            self._signed_section(answer.answer, sources, out.answer, seen)
            if answer.referral:
                self._referral(answer, out, seen)
            else:
                self._signed_section(answer.authority, {}, out.authority, seen)
                for qname, wild in answer.expanded:
                    self._proof(self._wildcard_proof(qname, wild, variable), out, seen)
                if answer.denial is not None:
                    self._proof(self._denial(answer.denial, variable), out, seen)
                # apart: a target may hold the answer's own RRset (an SVCB naming its
                # owner), which Knot adds again. A target only a wildcard matches comes
                # with the wildcard's RRSIGs, renamed, and no proof, as in Knot
                renamed = {r.name: wildcard_matching(self.ix.names, r.name)
                           for r in answer.additional if r.name not in self.ix.names}
                self._signed_section(answer.additional, renamed, out.additional, set())
        except Unprovable:
            return None
        out.cover_next_closer = self._left_out
        return out

    def _referral(self, answer, out, seen) -> None:
        ns = answer.authority[0]
        _add(out.authority, seen, ns)
        ds = self.ix.nodes[ns.name].get(DS)
        if ds is not None:
            self._signed_section([ds], {}, out.authority, seen)
        else:
            self._proof(self._nodata(ns.name, ns.name, None), out, seen)
        out.additional = list(answer.additional)      # glue: never signed
        out.required_additional = answer.required_additional

    def _proof(self, rrsets, out, seen) -> None:
        """A denial's records; one the zone lacks (a broken chain: Knot serves such a
        zone too) is left out, and the answer goes without that part of its proof."""
        self._signed_section([r for r in rrsets if r is not None], {}, out.authority, seen)

    def _denial(self, denial, variable):
        kind, name, owner = denial
        if name == variable and self.nsec3 is None and (kind == "nxdomain" or owner != name):
            raise Unprovable                 # NXDOMAIN or wildcard NODATA: Gaps
        if kind == "nxdomain":
            return self._nxdomain(name, owner, variable)
        return self._nodata(name, owner, variable)

    # -- NSEC (RFC 4035 section 3.1.3) and NSEC3 (RFC 5155 section 7.2) ---------

    def _nsec_covering(self, name: dns.name.Name):
        """The NSEC at name, or at the last owner before it in canonical order."""
        if not self.nsec_owners:
            return None
        i = bisect.bisect_right(self.nsec_owners, name) - 1
        return self.ix.nodes[self.nsec_owners[i]][NSEC]

    def _hashed(self, name: dns.name.Name) -> bytes:
        salt, iterations, algorithm = self.nsec3
        return dns.dnssec.nsec3_hash(name, salt, iterations, algorithm).lower().encode()

    def _nsec3_owner(self, label: bytes) -> dns.name.Name:
        return dns.name.Name((label,) + self.origin.labels)

    def _nsec3_matching(self, name: dns.name.Name):
        return self.ix.nsec3.get(self._nsec3_owner(self._hashed(name)))

    def _nsec3_covering(self, name: dns.name.Name):
        i = bisect.bisect_left(self.hashes, self._hashed(name)) - 1     # -1 wraps around
        return self.ix.nsec3[self._nsec3_owner(self.hashes[i])]

    def _provable_encloser(self, name: dns.name.Name) -> dns.name.Name:
        """The closest ancestor-or-self with an NSEC3 (opt-out leaves some without)."""
        while name != self.origin and self._nsec3_matching(name) is None:
            name = name.parent()
        return name

    @staticmethod
    def _next_closer(encloser: dns.name.Name, name: dns.name.Name) -> dns.name.Name:
        return dns.name.Name(name.labels[-(len(encloser.labels) + 1):])

    def _next_closer_cover(self, encloser, name, variable) -> list:
        """The NSEC3 covering name's next closer name; left out for dns.c to add when
        that is the asked name's label below the ancestor (cover_next_closer)."""
        if name == variable and encloser == variable.parent():
            self._left_out = True
            return []
        return [self._nsec3_covering(self._next_closer(encloser, name))]

    def _closest_encloser_proof(self, encloser, name, variable) -> list:
        return [self._nsec3_matching(encloser)] + self._next_closer_cover(encloser, name, variable)

    def _nxdomain(self, name, closest, variable=None) -> list:
        if self.nsec3 is None:
            return [self._nsec_covering(name),
                    self._nsec_covering(dns.name.Name((WILD,) + closest.labels))]
        encloser = self._provable_encloser(closest)
        return self._closest_encloser_proof(encloser, name, variable) + [
            self._nsec3_covering(dns.name.Name((WILD,) + encloser.labels))]

    def _nodata(self, name, owner, variable) -> list:
        """NODATA at name, answered from owner (a wildcard, or name itself)."""
        if self.nsec3 is None:
            if owner not in self.ix.nodes:   # an empty non-terminal: the NSEC covering it
                return [self._nsec_covering(name)]
            return [self.ix.nodes[owner].get(NSEC)]
        proof = [self._nsec3_matching(owner)]
        if owner != name:                                  # a wildcard's NODATA
            encloser = self._provable_encloser(owner.parent())
            proof += self._closest_encloser_proof(encloser, name, variable)
        elif proof[0] is None and owner in self.ix.cuts:   # opt-out: no NSEC3 here
            encloser = self._provable_encloser(owner)
            proof += self._closest_encloser_proof(encloser, name, variable)
        return [p for p in proof if p is not None]

    def _wildcard_proof(self, qname, wild, variable) -> list:
        """No closer name than the wildcard matched qname."""
        if self.nsec3 is None:
            if qname == variable:
                raise Unprovable
            return [self._nsec_covering(qname)]
        encloser = self._provable_encloser(wild.parent())
        return self._next_closer_cover(encloser, qname, variable)


def _add(out: list, seen: set, rrset) -> None:
    key = (rrset.name, rrset.rdtype, rrset.covers)
    if key not in seen:
        seen.add(key)
        out.append(rrset)


class Encoder:
    """A zone's answers (`ix`, the compiler's ZoneIndex, decides them) in wire form:
    (plain, DNSSEC form or None: signed zones only) for the compiler's emitter.
    oversized lists the (name, type, below) whose answer was too big: SERVFAIL."""

    def __init__(self, ix):
        self.ix = ix
        self.signed = Signed(ix) if Signed.applies(ix) else None
        self.oversized: list[tuple] = []

    def fixed(self, name: dns.name.Name, rdtype: int) -> tuple:
        answer = self.ix.resolve(name, rdtype)
        signed = self.signed.sign(answer) if self.signed else None
        return self._noted((encode_fixed(name, rdtype, IN, answer),
                            None if signed is None else encode_fixed(name, rdtype, IN, signed)),
                           name, rdtype, False)

    def variable(self, sample: dns.name.Name, rdtype: int, shared: bool = False) -> tuple:
        """shared: the answer serves every name of the zone (an unsigned NXDOMAIN)."""
        return self._noted(self._variable(sample, rdtype, shared), sample.parent(), rdtype, True)

    def _noted(self, forms: tuple, name: dns.name.Name, rdtype: int, below: bool) -> tuple:
        plain, signed = forms
        every = (plain,) + ((signed,) if isinstance(signed, tuple) and isinstance(signed[0], bytes)
                            else tuple(form for _, form in signed) if isinstance(signed, Gaps)
                            else ())
        if any(oversized(form) for form in every):
            self.oversized.append((name, rdtype, below))
        return forms

    def _variable(self, sample: dns.name.Name, rdtype: int, shared: bool) -> tuple:
        answer = self.ix.resolve(sample, rdtype)
        plain = encode_variable(sample, answer, self.ix.origin if shared else None)
        if self.signed is None:
            return plain, None
        signed = self.signed.sign(answer, variable=sample)
        if signed is not None and signed.cover_next_closer:
            spliced = self.signed.splice(sample, signed)
            return plain, spliced[0] if oversized(spliced[0]) else spliced   # no proof to splice
        if signed is not None:
            return plain, encode_variable(sample, signed)
        gaps = self.signed.gap_samples(sample.parent())
        if not gaps:
            return plain, None
        return plain, Gaps((bound, encode_variable(name, self.signed.sign(
            self.ix.resolve(name, rdtype)))) for bound, name in gaps)
