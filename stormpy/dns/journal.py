"""The journal: each served zone's last changes, kept in memory for IXFR out (RFC 1995).

A change is the difference between the zone as published and as published next. What
finds it depends on where the zone lives:
- a zone in dnspython: a node a transaction did not touch is the same object before
  and after (dnspython copies on write), so the nodes that differ are the changed ones;
- a zone in C (native.NativeZone) read again from its file: the two stores compared
  name by name in C (NativeZone.difference), no copy of either in Python;
- a zone in C patched in place by a secondary's IXFR: the records its patches replaced,
  which the zone keeps until it is published (NativeZone.replaced).
Only the changed records become dnspython's, so a change costs what changed.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset

log = logging.getLogger("stormpy")

IN = dns.rdataclass.IN
CHANGED_NAMES_KEPT = 100_000     # a larger change is not kept: IXFR sends the whole zone


@dataclass
class Change:
    """One new serial of a served zone: its SOA before and after, the records gone
    and the records come (RFC 1995 section 4's difference sequence)."""
    old_soa: dns.rrset.RRset
    new_soa: dns.rrset.RRset
    deleted: list
    added: list


@dataclass
class Published:
    """A zone as the journal saw it published: its SOA, and its nodes (a dnspython
    zone's) or its store (a NativeZone)."""
    soa: dns.rrset.RRset
    nodes: dict | None = None
    native: object = None


def published(zone) -> Published:
    """What the journal keeps of a served zone (a dns/zone.py Zone or a NativeZone)."""
    if getattr(zone, "native", None) is not None:
        return Published(soa_rrset(zone), native=zone)
    z = zone.zone
    return Published(z.find_rrset(z.origin, dns.rdatatype.SOA), nodes=z.nodes)


def soa_rrset(zone) -> dns.rrset.RRset:
    """The SOA RRset of a served zone, from its store when it is held in C."""
    if getattr(zone, "native", None) is None:
        return zone.zone.find_rrset(zone.origin, dns.rdatatype.SOA)
    ttl = next(t for rdtype, t, _ in zone.native.held(zone.origin.canonicalize().to_wire())
               if rdtype == dns.rdatatype.SOA)
    return dns.rrset.from_rdata(zone.origin, ttl, zone.get_soa())


class Journal:
    """The last KEEP changes of each served zone."""
    KEEP = 20

    def __init__(self):
        self.changes: dict[dns.name.Name, list[Change]] = {}

    @staticmethod
    def difference(origin, old: Published, new: Published) -> Change | None:
        """None for the same serial, and for a change too large to keep."""
        if old.soa[0].serial == new.soa[0].serial:
            return None
        if new.native is not None and old.native is new.native:
            deleted, added = _patched(new.native, origin)
        elif new.native is not None and old.native is not None:
            owners = new.native.native.difference(old.native.native, CHANGED_NAMES_KEPT)
            if owners is None:
                log.info("%s: over %d names changed, not kept for IXFR", origin, CHANGED_NAMES_KEPT)
                return None
            deleted, added = _stores_differ(old.native.native, new.native.native, owners, origin)
        else:
            old_nodes = old.nodes if old.nodes is not None else old.native.zone.nodes
            new_nodes = new.nodes if new.nodes is not None else new.native.zone.nodes
            deleted, added = _nodes_differ(old_nodes, new_nodes, origin)
        return Change(old.soa, new.soa, deleted, added)

    def add(self, origin, change: Change) -> None:
        kept = self.changes.setdefault(origin, [])
        kept.append(change)
        del kept[:-self.KEEP]

    def since(self, origin, serial: int) -> list[Change] | None:
        """The changes from serial to now, or None when they are not all here."""
        kept = self.changes.get(origin, [])
        for i, c in enumerate(kept):
            if c.old_soa[0].serial == serial:
                chain = kept[i:]
                if all(x.new_soa[0].serial == y.old_soa[0].serial for x, y in zip(chain, chain[1:])):
                    return chain
        return None


def records_differ(old, new) -> bool:
    """Whether two versions of a loaded zone (dns/zone.py's or dns/native.py's) hold
    different records, TTLs included: the stores' own difference where C holds both,
    else the nodes compared as for IXFR (the origin's SOA aside)."""
    if getattr(old, "native", None) is not None and getattr(new, "native", None) is not None:
        return new.native.difference(old.native, 1) != []     # None: past the limit
    deleted, added = _nodes_differ(old.zone.nodes, new.zone.nodes, new.origin)
    return bool(deleted or added)


def _nodes_differ(old_nodes: dict, new_nodes: dict, origin) -> tuple[list, list]:
    deleted, added = [], []
    for name in old_nodes.keys() | new_nodes.keys():
        a, b = old_nodes.get(name), new_nodes.get(name)
        if a is not b:
            _compare(name, _node_sets(a), _node_sets(b), origin, deleted, added)
    return deleted, added


def _stores_differ(old, new, owners: list[bytes], origin) -> tuple[list, list]:
    deleted, added = [], []
    for owner in owners:
        name = dns.name.from_wire(owner, 0)[0]
        _compare(name, _held_sets(old.held(owner)), _held_sets(new.held(owner)), origin,
                 deleted, added)
    return deleted, added


def _patched(zone, origin) -> tuple[list, list]:
    """What the patches since the zone was published changed: each patched name's
    records then (kept by the patch) against its records now."""
    deleted, added = [], []
    for owner, before in zone.replaced.items():
        name = dns.name.from_wire(owner, 0)[0]
        _compare(name, _held_sets(before), _held_sets(zone.native.held(owner)), origin,
                 deleted, added)
    return deleted, added


def _node_sets(node) -> dict:
    """A dnspython node's RRsets as {(type, covers): (ttl, [rdata])}."""
    return {(r.rdtype, r.covers): (r.ttl, list(r)) for r in (node.rdatasets if node else ())}


def _held_sets(held: list) -> dict:
    """A C store's RRsets at a name (NativeZone.held) as _node_sets gives them."""
    out = {}
    for rdtype, ttl, datas in held:
        covers = int.from_bytes(datas[0][:2], "big") if rdtype == dns.rdatatype.RRSIG else 0
        out[(rdtype, covers)] = (ttl, [dns.rdata.from_wire(IN, rdtype, d, 0, len(d))
                                       for d in datas])
    return out


def _compare(name, before: dict, after: dict, origin, deleted: list, added: list) -> None:
    deleted += _missing(name, before, after, origin)
    added += _missing(name, after, before, origin)


def _missing(name, sets: dict, others: dict, origin) -> list:
    """sets' records (but the origin's SOA) that others lack, as RRsets; a TTL changed
    takes the whole RRset out and in again."""
    out = []
    for (rdtype, covers), (ttl, rdatas) in sets.items():
        if name == origin and rdtype == dns.rdatatype.SOA:
            continue
        theirs = others.get((rdtype, covers))
        kept = set(theirs[1]) if theirs is not None and theirs[0] == ttl else ()
        rrset = dns.rrset.RRset(name, IN, rdtype, covers)
        rrset.update_ttl(ttl)
        for rdata in rdatas:
            if rdata not in kept:
                rrset.add(rdata)
        if len(rrset):
            out.append(rrset)
    return out
