"""What an answer's additional section holds, as Knot DNS 3.2 fills it: for each
in-zone name an NS, MX, SRV, SVCB or HTTPS record points at, the RRsets of that name
listed below (a name under a cut gives its glue). native/zone/resolve.c's addresses()
decides alike."""
from __future__ import annotations

import dns.name
import dns.rdatatype

A, AAAA = dns.rdatatype.A, dns.rdatatype.AAAA
SVCB, HTTPS = dns.rdatatype.SVCB, dns.rdatatype.HTTPS

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


def additional_rrsets(nodes: dict, origin: dns.name.Name, rrsets: list) -> list:
    """The RRsets the records in rrsets bring along, each target once (a name asked
    by several records, in any letter case, adds its RRsets at the first). nodes:
    name -> {type: RRset}, the zone's (a wildcard is not expanded here: a target only
    it matches adds nothing). "." (an SVCB target meaning the owner, or no service)
    lies outside every zone, so adds nothing, as in Knot."""
    out, seen = [], set()
    for rrset in rrsets:
        field, types = TARGETS.get(rrset.rdtype, (None, ()))
        for rdata in rrset if field else ():
            target = getattr(rdata, field)
            if target in seen or not target.is_subdomain(origin):
                continue
            seen.add(target)
            node = nodes.get(target, {})
            out.extend(node[rdtype] for rdtype in types if rdtype in node)
    return out
