"""The C zone path (ldns + native/zone/) against the Python compiler, the reference:
the same zones compiled both ways answer every question the same, read by dnspython."""
import os
import random

import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataset
import dns.rdatatype
import dns.rrset
import dns.zone
import pytest

from stormpy import _core
from stormpy.dns import native
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone

pytestmark = pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns")

HERE = os.path.dirname(__file__)
ZONES = os.path.join(HERE, "zones")
ASKED_TYPES = ("A", "AAAA", "NS", "MX", "SOA", "CNAME", "DS", "ANY", "TXT", "SRV", "PTR",
               "RRSIG", "NSEC", "TYPE65280", "TYPE64999")


def _compile(paths, python: bool, monkeypatch, **kw):
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "python" if python else "c")
    zones = [load_zone(p) for p in paths]
    assert all(isinstance(z, native.NativeZone) != python for z in zones)
    if python:
        return compile_zones(zones, **kw)
    compiled = native.compile_zones(zones, kw.get("chaos_version"), kw.get("chaos_identity"), {})
    assert compiled is not None, "the C compiler declined"
    return compiled


def _section(rrsets):
    """A section as the sorted list of its records: owner, type, TTL, canonical rdata."""
    return sorted((r.name.canonicalize().to_text(), r.rdtype, r.ttl, rd.to_digestable())
                  for r in rrsets for rd in r)


def _meaning(wire):
    if wire is None:
        return None
    m = dns.message.from_wire(wire)
    return (m.rcode(), m.flags, _section(m.answer), _section(m.authority), _section(m.additional))


def _same_answer(got, want) -> bool:
    """Whether two answers mean the same: the same bytes do, and others are compared
    record by record (the order in an RRset may differ). dnspython's parse is most of
    these tests' time, so it is only made where the bytes differ."""
    return got == want or _meaning(got) == _meaning(want)


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
    # the Python compiler may add a key whose answer equals OTHER's in meaning (dnspython
    # orders an RRset's records differently from one rendering to the next), never fewer
    assert c_stats.keys <= py_stats.keys
    asked = 0
    for path in paths:
        monkeypatch.setenv("STORMPY_ZONE_LOADER", "python")
        rng = random.Random(path)
        for qname, qtype in _questions(load_zone(path), rng):
            edns = rng.random() < 0.5
            q = dns.message.make_query(qname, qtype, use_edns=0 if edns else None, payload=1232)
            wire = q.to_wire()
            assert _same_answer(c.dns_answer(wire, tcp=True), py.dns_answer(wire, tcp=True)), \
                f"{qname} {qtype} edns={edns}"
            asked += 1
    return asked


def test_edge_cases_zone_answers_alike(monkeypatch):
    assert assert_same_answers([os.path.join(ZONES, "native", "edge.zone")], monkeypatch) > 500


def test_repo_zones_answer_alike(monkeypatch):
    paths = [os.path.join(ZONES, name) for name in
             ("example.com.zone", "example.net.zone", "gen.example.expanded.zone")]
    assert_same_answers(paths, monkeypatch, chaos_version="v1", chaos_identity="id")


def _random_zone(rng, path, dnames=False):
    """A zone of random shape: names 1 to 4 labels deep (so empty non-terminals), cuts
    with glue under them, wildcards, CNAMEs to anything (held, missing, out of zone,
    wildcard-matched, under a cut), NS/MX/SRV/SVCB/HTTPS targets in and out of the
    zone. dnames: DNAMEs too, over names with data of their own (occluded), to targets
    in and out of the zone, one so long the names below it are YXDOMAIN."""
    labels = ["a", "b", "c", "*", "www", "Mx", "deep"]
    names = {".".join(rng.choice(labels[:3] if d < 2 else labels) for d in range(rng.randint(1, 4)))
             for _ in range(40)}
    names = sorted(n for n in names if not n.startswith("*.*"))
    targets = names + ["nothing.here", "out.example.", "x.a", "q.deep.b"]
    held = []                  # the names with data of their own, no CNAME or DNAME
    lines = ["$ORIGIN r.test.", f"$TTL {rng.choice([60, 300])}",
             "@ SOA ns1 host 1 2 3 4 " + str(rng.choice([30, 900])), "@ NS ns1", "ns1 A 192.0.2.1"]
    for name in names:
        kind = rng.random()
        if kind < 0.15 and "*" not in name:
            lines += [f"{name} NS ns.{name}", f"ns.{name} A 192.0.2.{rng.randint(2, 250)}",
                      f"{name} NS ns.out.example."]
            if rng.random() < 0.5:
                lines.append(f"{name} DS 1 8 2 " + "ab" * 32)
        elif kind < 0.35:
            lines.append(f"{name} CNAME {rng.choice(targets)}")
        elif dnames and kind < 0.45 and "*" not in name:
            target = rng.choice(targets[:-4] + ["out.example.", "d.x." + "l" * 60 + ".example.",
                                                ("m" * 63 + ".") * 3 + "example."])
            lines += [f"{name} DNAME {target}", f"{name} TXT \"beside the DNAME\""]
        else:
            held.append(name)
            for _ in range(rng.randint(1, 3)):
                lines.append(rng.choice([
                    f"{name} {rng.randint(30, 900)} A 192.0.2.{rng.randint(1, 250)}",
                    f"{name} AAAA 2001:db8::{rng.randint(1, 999)}",
                    f"{name} MX {rng.randint(1, 20)} {rng.choice(targets)}",
                    f"{name} SRV 0 1 53 {rng.choice(targets)}",
                    f"{name} TXT \"t{rng.randint(1, 9)}\"",
                    f"{name} NS {rng.choice(targets)}" if rng.random() < 0.1 else f"{name} PTR x.",
                ]))
    # SVCB and HTTPS from a generator of their own: the zones above stay as they were
    more = random.Random("\n".join(lines))
    for name in more.sample(held, min(len(held), 8)):
        for _ in range(more.randint(1, 2)):
            lines.append(f"{name} {more.choice(['SVCB', 'HTTPS'])} {more.randint(0, 2)} "
                         f"{more.choice(targets + ['.'])}")
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("seed", range(6))
def test_random_zones_answer_alike(seed, tmp_path, monkeypatch):
    path = tmp_path / f"random{seed}.zone"
    _random_zone(random.Random(seed), path)
    assert_same_answers([str(path)], monkeypatch)


def test_declined_zones_fall_back_to_python(tmp_path, monkeypatch):
    """What the C reader leaves to dnspython ($GENERATE) is read there and compiled in
    C all the same, answering as the Python compiler does; nested zones compile in
    Python. A file without $ORIGIN is read in C once its SOA owner says the origin."""
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    gen_path = os.path.join(ZONES, "gen.example.zone")
    gen = load_zone(gen_path)
    assert isinstance(gen, native.NativeZone) and gen.zone is not None
    assert native.load(gen_path, None) is None                # not by the C reader
    assert_same_answers([gen_path], monkeypatch)
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    z = tmp_path / "plain.zone"
    z.write_text("example.org. 60 IN SOA ns h 1 2 3 4 5\nexample.org. 60 NS ns.example.org.\n")
    plain = load_zone(str(z))
    assert isinstance(plain, native.NativeZone) and plain.origin.to_text() == "example.org."
    assert plain.get_soa().mname.to_text() == "ns.example.org."
    parent, child = tmp_path / "p.zone", tmp_path / "c.zone"
    parent.write_text("$ORIGIN p.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nkid NS ns.kid\n")
    child.write_text("$ORIGIN kid.p.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nwww A 192.0.2.1\n")
    zones = [load_zone(str(parent)), load_zone(str(child))]
    assert all(isinstance(x, native.NativeZone) for x in zones)
    table, _ = compile_zones(zones)       # nested: the Python compiler, DS at the parent
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "python")
    reference, _ = compile_zones([load_zone(str(parent)), load_zone(str(child))])
    for name in ("www.kid.p.test", "kid.p.test", "p.test", "nx.kid.p.test", "ns.kid.p.test"):
        for qtype in ("A", "DS", "NS", "SOA", "TXT"):
            q = dns.message.make_query(name, qtype).to_wire()
            assert _same_answer(table.dns_answer(q), reference.dns_answer(q)), (name, qtype)


def test_serve_dns_compiles_in_c_beside_a_secondary_with_no_data(tmp_path):
    """serve-dns takes the C path (a 1M-record zone: seconds, not minutes) even with a
    secondary whose zone is not there yet, whose names the table answers SERVFAIL."""
    from support.client import udp
    from support.process import free_port
    from support.servers import StormpyServer
    from test_ctl import ctl_json
    control, net = str(tmp_path / "ctl.sock"), os.path.join(ZONES, "example.net.zone")
    unreachable = f"127.0.0.1:{free_port()}"        # nothing listens: no transfer comes
    args = ["--control", control, "--secondary", "sec.test.", "--primary", unreachable,
            "--zone-dir", str(tmp_path)]
    with StormpyServer([("example.net.", net)], args) as srv:
        serving = ctl_json(control, "status")["serving"]
        assert serving.endswith("compiled in C"), serving
        www = udp(dns.message.make_query("www.example.net", "A"), srv.addr)
        assert [r.to_text() for r in www.answer[0]] == ["198.51.100.80"]
        for name in ("sec.test", "www.sec.test"):
            r = udp(dns.message.make_query(name, "A"), srv.addr)
            assert r.rcode() == dns.rcode.SERVFAIL, name


def test_transferred_zones_compile_in_c_alike(monkeypatch):
    """A zone that came parsed (a secondary's transfer, dnspython's) goes into the C
    store record by record and compiles in C, answering as the Python compiler does,
    DNAMEs included; a record type the C path leaves to dnspython (SIG) declines it."""
    asked = 0
    for name in ("native/edge.zone", "example.com.zone", "example.net.zone", "signed.example.zone"):
        path = os.path.join(ZONES, name)
        monkeypatch.setenv("STORMPY_ZONE_LOADER", "python")
        parsed = load_zone(path)
        py, _ = compile_zones([parsed])
        monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
        prepared = native.from_records(path, parsed.zone)
        assert isinstance(prepared, native.NativeZone) and prepared.zone is parsed.zone
        assert (prepared.serial, prepared.record_count) == (parsed.serial, parsed.record_count)
        c, stats = compile_zones([prepared])
        assert stats.compiled_in == "C"
        rng = random.Random(name)
        for qname, qtype in _questions(parsed, rng):
            q = dns.message.make_query(qname, qtype, use_edns=0).to_wire()
            assert _same_answer(c.dns_answer(q, tcp=True), py.dns_answer(q, tcp=True)), \
                f"{name}: {qname} {qtype}"
            asked += 1
    assert asked > 1000
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "python")
    odd = load_zone(os.path.join(ZONES, "example.com.zone")).zone
    with odd.writer() as txn:
        txn.add(dns.name.from_text("old", odd.origin), 300,
                dns.rdata.from_text("IN", "SIG", "A 13 2 300 20300101000000 20200101000000 "
                                    "1 example.com. AAAA"))
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    assert native.from_records("odd", odd) is None


def test_a_secondary_serves_each_serial_from_the_c_store(tmp_path, monkeypatch):
    """serving() prepares the C store once per serial: an IXFR changes the zone in
    place, and the next compile must see it."""
    import dns.rdataset
    from stormpy.dns.secondary import Secondary, TransferZone
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    origin = dns.name.from_text("example.net.")
    sec = Secondary(origin, ("127.0.0.1", 53), None, str(tmp_path))
    sec.zone = dns.zone.from_file(os.path.join(ZONES, "example.net.zone"), origin=origin,
                                  relativize=False, zone_factory=TransferZone)
    first = sec.serving()
    assert isinstance(first, native.NativeZone) and first.serial == 7
    assert sec.serving() is first
    with sec.zone.writer() as txn:
        soa = sec.zone.get_rdataset(origin, "SOA")
        txn.replace(origin, dns.rdataset.from_rdata(soa.ttl, soa[0].replace(serial=8)))
        txn.add(dns.name.from_text("new.example.net."), 60,
                dns.rdata.from_text("IN", "A", "198.51.100.7"))
    second = sec.serving()
    assert second is first and second.serial == 8      # the C store patched, not rebuilt
    table, _ = compile_zones([second])
    r = dns.message.from_wire(table.dns_answer(dns.message.make_query("new.example.net", "A").to_wire()))
    assert r.answer and r.answer[0][0].address == "198.51.100.7"


def _random_delta(rng, zone, txn, serial):
    """An IXFR-like delta: a new serial, and one to three names replaced (records,
    CNAME, a cut with glue, a wildcard) or deleted, making and unmaking empty
    non-terminals, wildcards and cuts."""
    origin = zone.origin
    soa = zone.get_rdataset(origin, "SOA")
    txn.replace(origin, dns.rdataset.from_rdata(soa.ttl, soa[0].replace(serial=serial)))
    held = sorted(n for n in zone.nodes if n != origin)
    fresh = [dns.name.from_text(t, origin) for t in ("new", "x.new", "a.b.new", "*.new", "*.a")]
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(held + fresh)
        kind = rng.choice(["delete", "a", "cname", "cut", "mx"])
        if txn.name_exists(name):
            txn.delete(name)
        def add(owner, rdtype, text):
            txn.add(owner, 300, dns.rdata.from_text("IN", rdtype, text, origin=origin,
                                                   relativize=False))
        if kind == "a":
            add(name, "A", f"192.0.2.{rng.randint(1, 250)}")
        elif kind == "cname":
            add(name, "CNAME", rng.choice(held + fresh).to_text())
        elif kind == "cut" and "*" not in name.to_text():
            glue = dns.name.from_text("ns", name)
            if txn.name_exists(glue):
                txn.delete(glue)
            add(name, "NS", glue.to_text())
            add(glue, "A", "192.0.2.53")
        elif kind == "mx":
            add(name, "MX", f"10 {rng.choice(held + fresh).to_text()}")


@pytest.mark.parametrize("seed", range(6))
def test_a_patched_c_store_answers_as_one_built_afresh(seed, tmp_path, monkeypatch):
    """An IXFR's delta patched into the C store (only the changed names' records
    replaced), then compiled into an edit of the previous table (only the keys the
    delta can change taken out and compiled again, the SOA rewritten where it is
    stored), answers as a store and table built afresh from the same zone, delta after
    delta: names born and dead, empty non-terminals made and unmade, wildcards, CNAME
    chains and cuts added and taken away."""
    from stormpy.dns.secondary import TransferZone
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    rng = random.Random(seed)
    path = tmp_path / "r.zone"
    _random_zone(rng, path)
    zone = dns.zone.from_file(str(path), relativize=False, zone_factory=TransferZone)
    prepared = native.from_records(str(path), zone)
    assert prepared is not None
    table, _ = compile_zones([prepared])
    asked = incremental = 0
    for serial in range(2, 10):
        before = native.NativeZone.__new__(native.NativeZone)
        before._zone, before.origin = dns.zone.Zone(zone.origin), zone.origin
        before._zone.nodes = dict(zone.nodes)
        zone.changed_names = set()
        with zone.writer() as txn:
            _random_delta(rng, zone, txn, serial)
        afresh = native.from_records(str(path), zone)
        patched = native.patch(prepared, zone, zone.changed_names)
        assert patched == (afresh is not None)
        if afresh is None:          # both declined (a CNAME beside other records): start over
            prepared = native.from_records(str(path), zone)
            table, _ = compile_zones([prepared])
            continue
        assert prepared.native.pending
        assert (prepared.serial, prepared.record_count, prepared.native.names) == \
            (afresh.serial, afresh.record_count, afresh.native.names)
        want, _ = compile_zones([afresh])
        try:
            edit = table.edit()
            prepared.native.recompile_into(edit)
            table = edit.finish()
            incremental += 1
        except _core.ZoneDeclined:   # the set of types changed: a whole compile is due
            table, _ = compile_zones([prepared])
        assert not prepared.native.pending
        questions = set(_questions(before, rng)) | set(_questions(afresh, rng))
        for qname, qtype in sorted(questions):
            q = dns.message.make_query(qname, qtype, use_edns=0).to_wire()
            assert _same_answer(table.dns_answer(q, tcp=True), want.dns_answer(q, tcp=True)), \
                f"serial {serial}: {qname} {qtype}"
            asked += 1
    assert asked > 2000 and incremental >= 3


def test_a_copy_writes_the_zone_as_it_was_while_the_zone_is_patched(tmp_path):
    """A secondary's file is written from a copy of the C store while the store itself
    takes the next IXFR: the file has every record of the copied serial, read back by
    dnspython and by ldns alike, and nothing of the patch after it."""
    path = os.path.join(ZONES, "example.com.zone")
    before = load_zone(path)
    copy = before.native.copy()
    origin = before.origin
    want = sorted(f"{n} {t} {rd}" for n, t, rd in before.zone.iterate_rdatas())
    soa = before.get_soa().replace(serial=before.serial + 1)
    before.native.patch([origin.to_wire(), dns.name.from_text("later", origin).to_wire()],
                        [(origin.to_wire(), dns.rdatatype.SOA, 60, soa.to_wire())] +
                        [(origin.to_wire(), rds.rdtype, rds.ttl, rd.to_wire())
                         for rds in before.zone.get_node(origin) if rds.rdtype != dns.rdatatype.SOA
                         for rd in rds] +
                        [(dns.name.from_text("later", origin).to_wire(), 1, 60, b"\xc0\x00\x02\x01")])
    assert before.serial == soa.serial
    out = str(tmp_path / "saved.zone")
    copy.write(out)
    written = dns.zone.from_file(out, relativize=False)
    assert sorted(f"{n} {t} {rd}" for n, t, rd in written.iterate_rdatas()) == want
    again = native.load(out, origin.to_text())
    assert (again.serial, again.record_count) == (soa.serial - 1, copy.records)


def test_edits_leave_replaced_responses_until_a_whole_compile_sheds_them(tmp_path):
    """Each IXFR's edit leaves the responses it replaced in the table; past a quarter
    of the whole-compiled size native.recompile declines (the server then compiles
    whole), and a whole compile is back to the size it started from."""
    from stormpy.dns.secondary import TransferZone
    path = tmp_path / "z.zone"
    path.write_text("$ORIGIN e.test.\n$TTL 300\n@ SOA ns hostmaster 1 2 3 4 5\n@ NS ns\n"
                    "ns A 192.0.2.53\n" + "".join(f"h{i} A 192.0.2.{i % 250}\n"
                                                  for i in range(200)))
    zone = dns.zone.from_file(str(path), relativize=False, zone_factory=TransferZone)
    prepared = native.from_records(str(path), zone)
    table, stats = native.compile_zones([prepared], None, None, {})
    whole = stats.memory_bytes
    for serial in range(2, 400):
        zone.changed_names = set()
        with zone.writer() as txn:
            soa = zone.get_rdataset(zone.origin, "SOA")
            txn.replace(zone.origin, dns.rdataset.from_rdata(300, soa[0].replace(serial=serial)))
            txn.replace(dns.name.from_text(f"h{serial % 200}", zone.origin), dns.rdataset.from_text(
                "IN", "A", 300, f"198.51.100.{serial % 250}"))
        assert native.patch(prepared, zone, zone.changed_names)
        edited = native.recompile(table.edit(), [prepared], {}, stats, whole, floor=0)
        if edited is None:
            break
        table, stats = edited
        q = dns.message.make_query(f"h{serial % 200}.e.test.", "A").to_wire()
        assert dns.message.from_wire(table.dns_answer(q)).answer[0][0].address == \
            f"198.51.100.{serial % 250}"
    assert edited is None and serial > 3 and stats.memory_bytes > whole * 1.2, (serial, stats)
    _, again = native.compile_zones([prepared], None, None, {})
    assert abs(again.memory_bytes - whole) < whole * 0.05


def _axfr_stream(tmp_path, records=3000):
    """A zone, a TSIG-signed AXFR query for it and the messages stormpy's own primary
    side signs in answer (a multi-message stream, RFC 8945 5.3.1)."""
    import base64
    import dns.tsig
    import dns.xfr
    from stormpy.bench.workload import write_compile_zone
    from stormpy.dns.transfer import transfer_answer
    from stormpy.dns.zone import Zone
    path = tmp_path / "z.zone"
    write_compile_zone(str(path), records)
    zone = dns.zone.from_file(str(path), relativize=False)
    key = dns.tsig.Key("xfrkey.", base64.b64encode(bytes(range(32))).decode(), "hmac-sha256")
    query, _ = dns.xfr.make_query(zone, serial=None, keyring={key.name: key}, keyname=key.name)
    served = dns.message.from_wire(query.to_wire(), keyring={key.name: key})
    messages, _ = transfer_answer(served, Zone(str(path), zone.origin, zone), None)
    return zone, key, query, messages


def _axfr_in_c(zone, query, messages, key=None, secret=None, qid=None):
    import base64
    store = _core.NativeZone()
    signed = {} if key is None else {
        "key_name": key.name.to_text(), "algorithm": key.algorithm.to_text(),
        "key_secret": secret or base64.b64encode(key.secret).decode(), "request_mac": query.mac}
    into = _core.AxfrInto(store, zone.origin.to_wire(), query.id if qid is None else qid, **signed)
    done = [into.message(m) for m in messages]
    return store, done


def test_an_axfr_read_in_c_holds_every_record_dnspython_reads(tmp_path):
    zone, key, query, messages = _axfr_stream(tmp_path)
    assert len(messages) > 3
    store, done = _axfr_in_c(zone, query, messages, key)
    assert done == [False] * (len(messages) - 1) + [True]
    held = native.NativeZone("-", None, store).into(dns.zone.Zone(zone.origin, relativize=False))
    assert held == zone and store.serial == zone.get_soa().serial


@pytest.mark.parametrize("how", ["tampered", "reordered", "wrong key", "other id", "unsigned",
                                 "outside", "serials differ", "unsigned in between", "stale"])
def test_an_axfr_in_c_declines_what_dnspython_would_refuse(how, tmp_path, monkeypatch):
    """Each of these is declined (ZoneDeclined: the transfer is then dnspython's, which
    refuses it in its own words): nothing is half-taken."""
    import base64
    import time
    if how == "stale":               # signed 20 minutes ago: past the 300 s fudge
        now = time.time()
        monkeypatch.setattr(time, "time", lambda: now - 1200)
    zone, key, query, messages = _axfr_stream(tmp_path)
    monkeypatch.undo()
    kw = {"key": key}
    if how == "tampered":           # one byte of a record's data in the second message
        m = bytearray(messages[1])
        m[-120] ^= 1
        messages[1] = bytes(m)
    elif how == "reordered":
        messages[1], messages[2] = messages[2], messages[1]
    elif how == "wrong key":
        kw["secret"] = base64.b64encode(b"another key of thirty-two bytes!").decode()
    elif how == "other id":
        kw["qid"] = (query.id + 1) & 0xffff
    elif how == "unsigned":          # a signed stream, the query said to be unsigned
        kw = {}
    elif how != "stale":                            # messages made by hand, unsigned
        plain = dns.message.make_query(zone.origin, "AXFR")
        plain.id = query.id
        r = dns.message.make_response(plain)
        soa = zone.get_soa()
        r.answer.append(dns.rrset.from_text(zone.origin, 60, "IN", "SOA", soa.to_text()))
        if how == "unsigned in between":
            messages.insert(1, r.to_wire())
        else:
            kw = {}
            owner = "x.example.net." if how == "outside" else f"x.{zone.origin}"
            r.answer.append(dns.rrset.from_text(owner, 60, "IN", "A", "192.0.2.1"))
            closing = soa.replace(serial=soa.serial + (how == "serials differ"))
            r.answer.append(dns.rrset.from_text(zone.origin, 60, "IN", "SOA", closing.to_text()))
            messages = [r.to_wire()]
    with pytest.raises(_core.ZoneDeclined) as declined:
        _axfr_in_c(zone, query, messages, **kw)
    assert WHY_DECLINED[how] in str(declined.value), declined.value


WHY_DECLINED = {"tampered": "TSIG does not verify", "reordered": "TSIG does not verify",
                "wrong key": "TSIG does not verify", "other id": "not an answer to the query",
                "unsigned": "a signed message answering an unsigned query",
                "outside": "a record outside the zone",
                "serials differ": "the closing SOA's serial is not the opening one's",
                "unsigned in between": "message 2 has no TSIG",
                "stale": "message 1: TSIG error or time out of its fudge"}


HEAD = "$ORIGIN e.test.\n$TTL 300\n@ SOA ns admin 1 3600 600 86400 120\n@ NS ns\nns A 192.0.2.1\n"
SHA256 = "0c72ac70b745ac19998811b131d662c9ac69dbdbe7cb23e5b514b56664c5d3d6"


@pytest.mark.parametrize("record", [
    "m MX 65536 ns", "m MX -10 ns", "_s._tcp SRV 0 65536 80 ns", "_s._tcp SRV 0 0 70000 ns",
    'c CAA 256 issue "x"', "w 1x A 192.0.2.1", "w 4294967296 A 192.0.2.1",
    f"t TLSA 256 1 1 {SHA256}", "t TLSA 3 1 1 abc", f"t TLSA 3 1 2 {SHA256}",
    f"d DS 65536 13 2 {SHA256}", f"d DS 1 13 1 {SHA256}", f"s SSHFP 256 2 {SHA256}",
    f"s SSHFP 1 1 {SHA256}", 'n NAPTR 65536 10 "S" "SIP" "" .',
    "s SVCB 1 t port=1 port=2", "s SVCB 0 t alpn=h2", "s SVCB 1 t mandatory=port alpn=h2",
    "s SVCB 1 t mandatory=alpn,alpn alpn=h2", "s SVCB 1 t no-default-alpn",
    "l LOC 91 0 0 N 0 0 0 E 0m",
    "s SVCB 1 t port=65536", "s SVCB 1 t port=99999", "s SVCB 1 t port=-1",
    's SVCB 1 t ech="AAAA"', 'u URI 1 1 ""', "z ZONEMD 1 1 1 00",
])
def test_the_c_reader_refuses_what_dnspython_refuses(record, tmp_path, monkeypatch):
    """ldns keeps the low bits of a number too wide for its field, reads '1x' as a TTL
    and pads odd hex: the C reader hands such a file to dnspython, which names the
    line, instead of serving the value wrapped."""
    from stormpy.errors import ZoneError
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    z = tmp_path / "bad.zone"
    z.write_text(HEAD + record + "\n")
    with pytest.raises(ZoneError, match=r"bad\.zone:6"):
        load_zone(str(z))


@pytest.mark.parametrize("record", [
    "m MX 65535 ns", "_s._tcp SRV 0 0 65535 ns", 'c CAA 128 issue "x"', "w 1h30m A 192.0.2.1",
    "w 4294967295 A 192.0.2.1", f"t TLSA 3 1 1 {SHA256[:32]} {SHA256[32:]}",
    f"d DS 65535 13 2 {SHA256}", f"s SSHFP 4 2 {SHA256}", "s SVCB 0 t",
    "s SVCB 1 t mandatory=alpn,port alpn=h2,h3 port=8443 ipv4hint=192.0.2.1",
])
def test_the_c_reader_keeps_the_edge_values_dnspython_reads(record, tmp_path, monkeypatch):
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    z = tmp_path / "edge.zone"
    z.write_text(HEAD + record + "\n")
    read = load_zone(str(z))
    assert isinstance(read, native.NativeZone)
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "python")
    reference = load_zone(str(z))
    owner = dns.name.from_text(record.split()[0], dns.name.from_text("e.test."))
    rdtype = dns.rdatatype.from_text(record.split()[2] if record.split()[1][0].isdigit()
                                     else record.split()[1])
    assert read.zone.get_rdataset(owner, rdtype) == reference.zone.get_rdataset(owner, rdtype)


@pytest.mark.parametrize("record", [
    "s SVCB 1 t key3=53", 's SVCB 1 t key3="\\000\\053"', "s SVCB 1 t key1=\\002h2",
    's HTTPS 1 t alpn="h\\,2"', "c CNAME \\@", "c CNAME \\@.example.", "c CNAME @.",
    "m MX 1 \\@.x", 'n NAPTR 1 1 "" "" "" \\@', 't TXT "x"x"y"',
])
def test_the_c_reader_leaves_to_dnspython_what_ldns_reads_otherwise(record, tmp_path,
                                                                     monkeypatch):
    """ldns reads a name starting with an escaped @ as the origin, a quote inside a word
    as text, keyNNNNN of a known SVCB key in that key's presentation form and keeps an
    alpn's \\, as text: records dnspython (and Knot DNS) read otherwise. The C reader
    declines the file, and dnspython's reading is served."""
    z = tmp_path / "odd.zone"
    z.write_text(HEAD + record + "\n")
    assert native.load(str(z), None) is None
    owner = dns.name.from_text(record.split()[0], dns.name.from_text("e.test."))
    rdtype = dns.rdatatype.from_text(record.split()[1])
    read = []
    for loader in ("c", "python"):
        monkeypatch.setenv("STORMPY_ZONE_LOADER", loader)
        read.append(load_zone(str(z)).zone.get_rdataset(owner, rdtype))
    assert read[0] == read[1] and read[0] is not None


def test_a_record_without_ttl_takes_the_same_ttl_from_either_reader(tmp_path, monkeypatch):
    """No $TTL: '192.0.2.1' is rdata, not a TTL. The C reader used to read the record
    with ldns's default TTL (3600) where dnspython takes the last one stated."""
    z = tmp_path / "nottl.zone"
    z.write_text("$ORIGIN n.test.\n@ 7200 IN SOA ns admin 1 3600 600 86400 120\n"
                 "@ 7200 NS ns\nns A 192.0.2.1\nmx MX 10 ns\n")
    ttls = []
    for loader in ("c", "python"):
        monkeypatch.setenv("STORMPY_ZONE_LOADER", loader)
        read = load_zone(str(z))
        ttls.append([read.zone.get_rdataset(n, t).ttl
                     for n, t in (("ns", "A"), ("mx", "MX"))])
    assert ttls[0] == ttls[1]


def test_a_big_file_left_to_dnspython_says_why_at_info(tmp_path, monkeypatch, caplog):
    """A million-name zone with one $GENERATE loads many times slower: at that size the
    operator is told why; a small file's reason stays at debug level."""
    import logging
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    z = tmp_path / "gen.zone"
    z.write_text(HEAD + "$GENERATE 1-3 h$ A 192.0.2.$\n")
    with caplog.at_level(logging.INFO, logger="stormpy"):
        assert native.load(str(z), None) is None
        assert not caplog.records
        monkeypatch.setattr(native, "SLOW_BYTES", 1)
        assert native.load(str(z), None) is None
    assert "read by dnspython, not ldns" in caplog.text and "$GENERATE" in caplog.text
    assert "slower" in caplog.text


def test_a_nested_include_is_read_from_the_including_files_directory(tmp_path, monkeypatch):
    """$INCLUDE names a file relative to the file it is in, as Knot DNS reads it: both
    readers looked for sub/inc1.inc's deeper/inc2.inc beside the top file, and served
    the decoy there. The C reader and dnspython serve the same records."""
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "deeper").mkdir()
    top = tmp_path / "top.zone"
    top.write_text(HEAD + "$INCLUDE sub/inc1.inc\n")
    (tmp_path / "sub" / "inc1.inc").write_text("inc1 A 192.0.2.90\n$INCLUDE deeper/inc2.inc\n")
    (tmp_path / "sub" / "deeper" / "inc2.inc").write_text("inc2 A 192.0.2.91\n")
    (tmp_path / "deeper" / "inc2.inc").write_text("decoy A 192.0.2.92\n")
    assert native.load(str(top), None) is not None              # read by the C reader
    names = {}
    for loader in ("c", "python"):
        monkeypatch.setenv("STORMPY_ZONE_LOADER", loader)
        zone = load_zone(str(top), native=loader == "c")
        names[loader] = sorted(n.to_text() for n, _ in zone.zone.iterate_rdatasets())
        table, _ = compile_zones([zone])
        answer = dns.message.from_wire(table.dns_answer(
            dns.message.make_query("inc2.e.test", "A").to_wire()))
        assert [rd.to_text() for rr in answer.answer for rd in rr] == ["192.0.2.91"], loader
    assert names["c"] == names["python"]
    assert "decoy.e.test." not in names["c"] and "inc2.e.test." in names["c"]
    assert_same_answers([str(top)], monkeypatch)
