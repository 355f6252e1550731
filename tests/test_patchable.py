"""IXFRs applied to a secondary's zone held in C (stormpy/dns/patchable.py): the same
messages processed by dnspython's Inbound into a dnspython zone are the reference."""
import random

import dns.exception
import dns.message
import dns.name
import dns.node
import dns.rdata
import dns.rdataset
import dns.rdatatype
import dns.rrset
import dns.transaction
import dns.xfr
import dns.zone
import pytest

from stormpy import _core
from stormpy.dns import native
from stormpy.dns.compiler import compile_zones
from stormpy.dns.patchable import FullZone, PatchableZone
from stormpy.dns.secondary import TransferZone
from test_zone_native import _questions, _random_delta, _random_zone, _same_answer

pytestmark = pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns")


def _records(nodes):
    return {(name, rds.rdtype, rds.ttl, rd) for name, node in nodes.items() for rds in node
            for rd in rds}


def _held_records(store):
    out = set()
    for owner, rdtype, ttl, datas in store.native.rrsets():
        name = dns.name.from_wire(owner, 0)[0]
        out |= {(name, rdtype, ttl, dns.rdata.from_wire("IN", rdtype, d, 0, len(d))) for d in datas}
    return out


def _ixfr(query, versions, per_message=7):
    """The IXFR answer taking versions[0] to versions[-1] (dicts of nodes), one delta a
    step, as RFC 1995 lays it out, spread over messages of per_message records."""
    def soa(nodes):
        return next(rds for rds in nodes[origin] if rds.rdtype == dns.rdatatype.SOA)

    def rr(name, rds, rd):
        return dns.rrset.from_rdata_list(name, rds.ttl, [rd])
    origin = query.question[0].name
    last = rr(origin, soa(versions[-1]), soa(versions[-1])[0])
    records = [last]
    for old, new in zip(versions, versions[1:]):
        gone, came = _records(old) - _records(new), _records(new) - _records(old)
        records.append(rr(origin, soa(old), soa(old)[0]))
        records += [dns.rrset.from_rdata(n, ttl, rd) for n, t, ttl, rd in sorted(gone, key=str)
                    if t != dns.rdatatype.SOA]
        records.append(rr(origin, soa(new), soa(new)[0]))
        records += [dns.rrset.from_rdata(n, ttl, rd) for n, t, ttl, rd in sorted(came, key=str)
                    if t != dns.rdatatype.SOA]
    records.append(last)
    messages = []
    for i in range(0, len(records), per_message):
        r = dns.message.make_response(query)
        r.answer = records[i:i + per_message]
        messages.append(r.to_wire())
    return messages


def _apply(manager, serial, query, messages):
    with dns.xfr.Inbound(manager, dns.rdatatype.IXFR, serial) as inbound:
        for wire in messages:
            r = dns.message.from_wire(wire, xfr=True, origin=None, one_rr_per_rrset=True)
            done = inbound.process_message(r)
        assert done


def _versions(rng, path, count):
    """count successive versions of the zone at path, each a random delta on the last."""
    zone = dns.zone.from_file(str(path), relativize=False, zone_factory=TransferZone)
    versions = [dict(zone.nodes)]
    for serial in range(2, 2 + count):
        with zone.writer() as txn:
            _random_delta(rng, zone, txn, serial)
        versions.append(dict(zone.nodes))
    return zone.origin, versions


def _start(path):
    held = native.load(str(path), None)
    assert held is not None
    return held, PatchableZone(held)


@pytest.mark.parametrize("seed", range(8))
def test_an_ixfr_applied_in_c_holds_what_dnspython_holds(seed, tmp_path):
    """Two IXFRs (one of two deltas, one of one) applied to the store, the second read
    while the first is still pending, hold what dnspython's zone holds after the same
    messages; and the store compiles to the answers of one built afresh from it."""
    rng = random.Random(seed)
    path = tmp_path / "r.zone"
    _random_zone(rng, path)
    origin, versions = _versions(rng, path, 3)
    reference = dns.zone.from_file(str(path), relativize=False)
    held, store = _start(path)
    view = held.zone                    # built before: it must follow the deltas
    published = view.nodes
    query = dns.message.make_query(origin, "IXFR")
    refused = None
    for serial, chain in ((1, versions[:3]), (3, versions[2:])):
        messages = _ixfr(query, chain)
        _apply(reference, serial, query, messages)
        try:
            _apply(store, serial, query, messages)
        except dns.exception.FormError as e:   # a CNAME beside other data: C declines it
            refused = str(e)
            break
        assert store.serial == reference.get_soa().serial
    if refused is not None:
        assert "CNAME" in refused
        return
    assert held.serial == 1 and store.pending       # nothing patched before the compile
    assert store.applied() is held and not store.pending
    assert held.serial == 4 == store.serial and held.native.pending
    assert _held_records(held) == _records(reference.nodes)
    assert _records(held.zone.nodes) == _records(reference.nodes) and held.zone is view
    assert _records(published) == _records(versions[0])     # what was published stays
    afresh = native.from_records(str(path), reference)
    got, _ = compile_zones([held])
    want, _ = compile_zones([afresh])
    for qname, qtype in sorted(set(_questions(afresh, rng))):
        q = dns.message.make_query(qname, qtype, use_edns=0).to_wire()
        assert _same_answer(got.dns_answer(q, tcp=True), want.dns_answer(q, tcp=True)), \
            f"{qname} {qtype}"


def _zone_text(tmp_path):
    path = tmp_path / "p.zone"
    path.write_text("$ORIGIN p.test.\n$TTL 300\n@ SOA ns host 1 2 3 4 5\n@ NS ns\n"
                    "ns A 192.0.2.1\nwww A 192.0.2.2\nwww A 192.0.2.3\n")
    return path


def _delta(path, change):
    """The IXFR taking the zone at path to serial 2 by change(txn)."""
    zone = dns.zone.from_file(str(path), relativize=False)
    old = dict(zone.nodes)
    with zone.writer() as txn:
        soa = zone.get_rdataset(zone.origin, "SOA")
        txn.replace(zone.origin, dns.rdataset.from_rdata(soa.ttl, soa[0].replace(serial=2)))
        change(txn, zone.origin)
    return zone.origin, [old, dict(zone.nodes)]


def _rd(text, rdtype="A"):
    return dns.rdata.from_text("IN", rdtype, text)


@pytest.mark.parametrize("how", ["delete-missing", "dnssec", "apex-ns", "cname-beside"])
def test_a_delta_c_cannot_take_changes_nothing(how, tmp_path):
    """A delta that does not apply (a record deleted that the zone lacks), or that the
    C path cannot compile, fails the IXFR with nothing pending: the secondary fetches
    the zone again by AXFR, and the store keeps serving the old serial."""
    path = _zone_text(tmp_path)
    changes = {
        "delete-missing": lambda txn, o: txn.add(dns.name.from_text("x", o), 60, _rd("192.0.2.9")),
        "dnssec": lambda txn, o: txn.add(o, 60, _rd("257 3 13 " + "A" * 88, "DNSKEY")),
        "apex-ns": lambda txn, o: txn.delete(o, "NS"),
        "cname-beside": lambda txn, o: None,
    }
    origin, versions = _delta(path, changes[how])
    if how == "delete-missing":     # the primary believes the zone held a record it lacks
        versions[0] = dict(versions[0])
        versions[0][dns.name.from_text("ghost", origin)] = versions[1][dns.name.from_text("ns", origin)]
    if how == "cname-beside":       # a CNAME added where A records stay (dnspython drops them)
        www = dns.name.from_text("www", origin)
        node = dns.node.Node()
        node.rdatasets = list(versions[1][www]) + [
            dns.rdataset.from_rdata(60, _rd("ns.p.test.", "CNAME"))]
        versions[1] = {**versions[1], www: node}
    query = dns.message.make_query(origin, "IXFR")
    held, store = _start(path)
    before = _held_records(held)
    with pytest.raises((dns.exception.FormError, dns.transaction.DeleteNotExact)):
        _apply(store, 1, query, _ixfr(query, versions))
    assert not store.pending and store.serial == 1 and store.applied() is held
    assert _held_records(held) == before and not held.native.pending


def test_an_ixfr_answered_with_the_whole_zone_asks_for_an_axfr(tmp_path):
    path = _zone_text(tmp_path)
    zone = dns.zone.from_file(str(path), relativize=False)
    query = dns.message.make_query(zone.origin, "IXFR")
    soa = zone.find_rrset(zone.origin, "SOA")
    r = dns.message.make_response(query)
    r.answer = [soa] + [dns.rrset.from_rdata(n, rds.ttl, rd) for n, rds in zone.iterate_rdatasets()
                        if rds.rdtype != dns.rdatatype.SOA for rd in rds] + [soa]
    held, store = _start(path)
    with pytest.raises(FullZone):
        _apply(store, 0, query, [r.to_wire()])
    assert not store.pending
