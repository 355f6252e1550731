"""What an answer's additional section holds, as Knot DNS 3.2 fills it: for each
in-zone name an NS, MX, SRV, SVCB or HTTPS record points at, the RRsets of that name
listed below (a name under a cut gives its glue). native/zone/resolve.c's addresses()
decides alike."""
from __future__ import annotations

import dns.name
import dns.rdatatype
import dns.rrset

A, AAAA = dns.rdatatype.A, dns.rdatatype.AAAA
SVCB, HTTPS = dns.rdatatype.SVCB, dns.rdatatype.HTTPS
WILD = b"*"

# type pointing at a name -> (its rdata's name field, the types added from that name).
# An SVCB or HTTPS target's own RRset of the same type comes too (RFC 9460 4.1: an
# AliasMode target's ServiceMode records), one level only, as Knot adds it.
TARGETS = {
    dns.rdatatype.NS: ("target", (A, AAAA)),
    dns.rdatatype.MX: ("exchange", (A, AAAA)),
    dns.rdatatype.SRV: ("target", (A, AAAA)),
    SVCB: ("target", (A, AAAA, SVCB)),
    HTTPS: ("target", (A, AAAA, HTTPS)),
}


def renamed(rrset: dns.rrset.RRset, owner: dns.name.Name) -> dns.rrset.RRset:
    """rrset as served under owner (a wildcard's, under the name it matched)."""
    if rrset.name == owner:
        return rrset
    out = dns.rrset.RRset(owner, rrset.rdclass, rrset.rdtype)
    out.update(rrset)
    return out


def wildcard_matching(names: set, name: dns.name.Name) -> dns.name.Name:
    """The wildcard that would match name, a name below the origin the zone does not
    hold (RFC 4592): the closest encloser's `*` child. It may not exist."""
    while name not in names:
        name = name.parent()
    return dns.name.Name((WILD,) + name.labels)


def additional_rrsets(nodes: dict, names: set, origin: dns.name.Name, rrsets: list) -> list:
    """The RRsets the records in rrsets bring along, each target once (a name asked
    by several records, in any letter case, adds its RRsets at the first). nodes:
    name -> {type: RRset}, the zone's; names: every name it holds, empty non-terminals
    too. "." (an SVCB target meaning the owner, or no service) lies outside every zone,
    so adds nothing, as in Knot.

    A target the zone does not hold adds what a wildcard matching it holds, as Knot
    3.2.6 adds it (even below a zone cut, as glue): for NS, MX and SRV renamed to the
    target; for SVCB and HTTPS under the wildcard's own name (`*.…`), once."""
    out, seen = [], set()
    for rrset in rrsets:
        field, types = TARGETS.get(rrset.rdtype, (None, ()))
        for rdata in rrset if field else ():
            target = getattr(rdata, field)
            if target in seen or not target.is_subdomain(origin):
                continue
            seen.add(target)
            owner = source = target
            if target not in names:
                source = wildcard_matching(names, target)
                if rrset.rdtype in (SVCB, HTTPS):
                    if source in seen:
                        continue
                    seen.add(source)
                    owner = source
            node = nodes.get(source, {})
            out.extend(renamed(node[rdtype], owner) for rdtype in types if rdtype in node)
    return out
