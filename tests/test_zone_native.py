"""The C zone path (ldns + native/zone/) against the Python compiler, the reference:
the same zones compiled both ways answer every question the same, read by dnspython."""
import os
import random

import dns.message
import dns.name
import dns.rdatatype
import pytest

from stormpy import _core
from stormpy.dns import native
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone

pytestmark = pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns")

HERE = os.path.dirname(__file__)
ZONES = os.path.join(HERE, "zones")
ASKED_TYPES = ("A", "AAAA", "NS", "MX", "SOA", "CNAME", "DS", "ANY", "TXT", "SRV", "PTR",
               "TYPE65280", "TYPE64999")


def _compile(paths, python: bool, monkeypatch, **kw):
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "python" if python else "c")
    zones = [load_zone(p) for p in paths]
    assert all(isinstance(z, native.NativeZone) != python for z in zones)
    return compile_zones(zones, **kw)


def _section(rrsets):
    """A section as the sorted list of its records: owner, type, TTL, canonical rdata."""
    return sorted((r.name.canonicalize().to_text(), r.rdtype, r.ttl, rd.to_digestable())
                  for r in rrsets for rd in r)


def _meaning(wire):
    if wire is None:
        return None
    m = dns.message.from_wire(wire)
    return (m.rcode(), m.flags, _section(m.answer), _section(m.authority), _section(m.additional))


def _questions(zone, rng):
    """Every name of the zone and its empty non-terminals, names below each (wildcards,
    NXDOMAIN, referrals), a few with the letter case changed, each with many types."""
    names = set()
    for name, _ in zone.zone.iterate_rdatasets():
        while name.is_subdomain(zone.origin) and name not in names:
            names.add(name)
            name = name.parent()
    asked = set(names)
    for name in names:
        for label in (b"zz-nothing", b"a", b"deeper.still"):
            try:
                asked.add(dns.name.Name(tuple(label.split(b".")) + name.labels))
            except dns.name.NameTooLong:
                pass
    types = set(ASKED_TYPES) | {dns.rdatatype.to_text(rds.rdtype)
                                for _, rds in zone.zone.iterate_rdatasets()}
    for name in sorted(asked):
        text = name.to_text()
        if rng.random() < 0.2:
            text = "".join(c.upper() if rng.random() < 0.5 else c for c in text)
        for t in sorted(types):
            yield text, t


def assert_same_answers(paths, monkeypatch, **kw):
    py, py_stats = _compile(paths, True, monkeypatch, **kw)
    c, c_stats = _compile(paths, False, monkeypatch, **kw)
    assert (c_stats.records, c_stats.names, c_stats.serials) == \
        (py_stats.records, py_stats.names, py_stats.serials)
    asked = 0
    for path in paths:
        monkeypatch.setenv("STORMPY_ZONE_LOADER", "python")
        rng = random.Random(path)
        for qname, qtype in _questions(load_zone(path), rng):
            edns = rng.random() < 0.5
            q = dns.message.make_query(qname, qtype, use_edns=0 if edns else None, payload=1232)
            want = _meaning(py.dns_answer(q.to_wire(), tcp=True))
            got = _meaning(c.dns_answer(q.to_wire(), tcp=True))
            assert got == want, f"{qname} {qtype} edns={edns}"
            asked += 1
    return asked


def test_edge_cases_zone_answers_alike(monkeypatch):
    assert assert_same_answers([os.path.join(ZONES, "native", "edge.zone")], monkeypatch) > 500


def test_repo_zones_answer_alike(monkeypatch):
    paths = [os.path.join(ZONES, name) for name in
             ("example.com.zone", "example.net.zone", "gen.example.expanded.zone")]
    assert_same_answers(paths, monkeypatch, chaos_version="v1", chaos_identity="id")
