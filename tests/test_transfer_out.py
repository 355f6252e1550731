"""Transfers out of zones held in C: the AXFR written from the store, and the journal's
changes found by comparing two stores or from a patch, each read back by dnspython's
inbound transfer (TSIG checked) and held against dnspython reading the same files."""
import base64
import random
import re
import shutil
import subprocess

import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.tsig
import dns.xfr
import dns.zone
import pytest

from stormpy import _core
from stormpy.bench.workload import write_compile_zone
from stormpy.dns import journal, native
from stormpy.dns.transfer import MESSAGE_BUDGET, transfer_answer
from stormpy.dns.zone import Zone, load_zone
from support import signing
from support.servers import StormpyServer
from test_zone_native import _random_zone

pytestmark = pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns")

KEY = dns.tsig.Key("xfrkey.", base64.b64encode(bytes(range(32))).decode(), "hmac-sha256")


def _in_c(path, monkeypatch):
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    zone = load_zone(str(path))
    assert isinstance(zone, native.NativeZone)
    return zone


def _read(path, origin="r.test.") -> dns.zone.Zone:
    return dns.zone.from_file(str(path), origin=origin, relativize=False)


def _records(zone: dns.zone.Zone) -> set:
    return {(name, rds.rdtype, rds.covers, rds.ttl, rd)
            for name, rds in zone.iterate_rdatasets() for rd in rds}


def _transfer(served, origin, into=None, serial=None):
    """served's answer to a TSIG-signed AXFR (or IXFR from serial, applied to into),
    read by dnspython as dns.query.inbound_xfr reads it: (zone, messages, log line)."""
    zone = into if into is not None else dns.zone.Zone(origin, relativize=False)
    query, _ = dns.xfr.make_query(zone, serial=serial, keyring={KEY.name: KEY}, keyname=KEY.name)
    asked = dns.message.from_wire(query.to_wire(), keyring={KEY.name: KEY})
    messages, what = transfer_answer(asked, served, None, getattr(served, "journal", None))
    with dns.xfr.Inbound(zone, query.question[0].rdtype, serial) as inbound:
        tsig_ctx, done = None, False
        for wire in messages:
            assert not done and len(wire) <= 65535
            r = dns.message.from_wire(wire, keyring=query.keyring, request_mac=query.mac,
                                      xfr=True, origin=None, tsig_ctx=tsig_ctx, multi=True)
            tsig_ctx = r.tsig_ctx
            done = inbound.process_message(r)
        assert done
    return zone, messages, what


@pytest.mark.parametrize("seed", range(4))
def test_an_axfr_from_the_c_store_holds_what_dnspython_reads(seed, tmp_path, monkeypatch):
    path = tmp_path / "r.zone"
    _random_zone(random.Random(seed), path, dnames=seed % 2 == 1)
    served = _in_c(path, monkeypatch)
    got, messages, what = _transfer(served, served.origin)
    assert _records(got) == _records(_read(path))
    assert what == "AXFR, serial 1"
    assert served._zone is None         # no dnspython copy of the zone was made


def test_a_large_axfr_comes_in_messages_within_the_budget(tmp_path, monkeypatch):
    path = tmp_path / "big.zone"
    write_compile_zone(str(path), 5000)
    with open(path, "a") as f:      # one record larger than a message's budget
        f.write("huge.bench.example. 300 IN TXT " + " ".join(['"' + "x" * 250 + '"'] * 200) + "\n")
    served = _in_c(path, monkeypatch)
    got, messages, _ = _transfer(served, served.origin)
    assert _records(got) == _records(_read(path, None))
    assert len(messages) > 5
    assert any(len(m) > MESSAGE_BUDGET + 20_000 for m in messages)    # the huge TXT, alone
    assert all(len(m) < MESSAGE_BUDGET + 1000 for m in messages if b"x" * 250 not in m)


def test_a_signed_zones_axfr_holds_its_nsec3_records(tmp_path, monkeypatch):
    if not signing.available():
        pytest.skip("ldns-signzone is not installed")
    source = tmp_path / "r.source"
    _random_zone(random.Random(7), source)
    path = signing.sign_zone(str(source), "r.test.", str(tmp_path), nsec3=True)
    served = _in_c(path, monkeypatch)
    got, _, _ = _transfer(served, served.origin)
    held = _records(_read(path))
    assert _records(got) == held
    assert any(rdtype == dns.rdatatype.NSEC3 for _, rdtype, *_ in held)


def _changed(rng, path, serial) -> None:
    """path's zone at a new serial: some records gone, some added, a TTL changed, a
    name gone, a name come."""
    lines = path.read_text().splitlines()
    head, body = lines[:5], lines[5:]
    head[2] = re.sub(r" host \d+ ", f" host {serial} ", head[2])
    rng.shuffle(body)
    body = body[len(body) // 5:]
    body += [f"new{serial}.a TXT \"come in {serial}\"", f"ns1 {serial + 100} A 192.0.2.1",
             f"new{serial}.b MX 5 new{serial}.a"]
    path.write_text("\n".join(head + body) + "\n")


def _served(zone, log: journal.Journal):
    zone.journal = log
    return zone


@pytest.mark.parametrize("seed", range(3))
def test_ixfr_from_a_reloaded_c_zone_brings_a_copy_to_the_new_serial(seed, tmp_path, monkeypatch):
    rng, path = random.Random(seed), tmp_path / "r.zone"
    _random_zone(rng, path)
    old_text = path.read_text()
    old = _in_c(path, monkeypatch)
    log, was = journal.Journal(), journal.published(old)
    for serial in (2, 3):
        _changed(rng, path, serial)
        new = _in_c(path, monkeypatch)
        change = log.difference(old.origin, was, journal.published(new))
        reference = log.difference(old.origin,
                                   journal.published(Zone("", old.origin, old.zone)),
                                   journal.published(Zone("", new.origin, _read(path))))
        assert _change_set(change) == _change_set(reference)
        log.add(old.origin, change)
        old, was = new, journal.published(new)
    (tmp_path / "first.zone").write_text(old_text)
    copy = _read(tmp_path / "first.zone")
    got, _, what = _transfer(_served(new, log), new.origin, into=copy, serial=1)
    assert what == "IXFR 1 -> 3"
    assert _records(got) == _records(_read(path))


def _change_set(change: journal.Change):
    def flat(rrsets):
        return {(r.name, r.rdtype, r.covers, r.ttl, rd) for r in rrsets for rd in r}
    return change.old_soa, change.new_soa, flat(change.deleted), flat(change.added)


def test_ixfr_from_a_patched_c_zone_brings_a_copy_to_the_new_serial(tmp_path, monkeypatch):
    path = tmp_path / "r.zone"
    _random_zone(random.Random(11), path)
    served, reference = _in_c(path, monkeypatch), _read(path)
    log, was = journal.Journal(), journal.published(served)
    with reference.writer() as txn:     # the delta an IXFR would bring, on dnspython's copy
        soa = txn.get(served.origin, "SOA")[0]
        txn.replace(served.origin, 300, soa.replace(serial=2))
        txn.delete(dns.name.from_text("ns1.r.test."), "A")
        txn.add(dns.name.from_text("ns1.r.test."), 60, dns.rdata.from_text("IN", "A", "192.0.2.9"))
        txn.add(dns.name.from_text("fresh.r.test."), 60, dns.rdata.from_text("IN", "TXT", "new"))
    names = [served.origin, dns.name.from_text("ns1.r.test."), dns.name.from_text("fresh.r.test.")]
    native.patch_names(served, {n: list(reference.get_node(n) or ()) for n in names})
    log.add(served.origin, log.difference(served.origin, was, journal.published(served)))
    got, _, what = _transfer(_served(served, log), served.origin, into=_read(path), serial=1)
    assert what == "IXFR 1 -> 2"
    assert _records(got) == _records(reference)


def test_a_change_too_large_to_keep_is_sent_as_the_whole_zone(tmp_path, monkeypatch):
    rng, path = random.Random(5), tmp_path / "r.zone"
    _random_zone(rng, path)
    old = _in_c(path, monkeypatch)
    _changed(rng, path, 2)
    new = _in_c(path, monkeypatch)
    monkeypatch.setattr(journal, "CHANGED_NAMES_KEPT", 2)
    log = journal.Journal()
    assert log.difference(old.origin, journal.published(old), journal.published(new)) is None
    got, _, what = _transfer(_served(new, log), new.origin, into=_read(tmp_path / "r.zone"),
                             serial=1)
    assert what == "IXFR as full zone, serial 2"
    assert _records(got) == _records(_read(path))


@pytest.mark.skipif(shutil.which("kdig") is None, reason="kdig (knot-dnsutils) is not installed")
def test_kdig_takes_a_signed_axfr_of_a_zone_held_in_c(tmp_path):
    """A real client: kdig asks a running server for the zone over TCP with TSIG, checks
    every message's TSIG and holds the records dnspython reads from the file."""
    path = tmp_path / "r.zone"
    _random_zone(random.Random(21), path, dnames=True)
    secret = base64.b64encode(KEY.secret).decode()
    tsig = f"xfrkey:hmac-sha256:{secret}"
    with StormpyServer([("r.test.", str(path))],
                       ["--transfer-allow", "127.0.0.0/8", "--tsig", tsig]) as server:
        out = subprocess.run(["kdig", "-y", f"hmac-sha256:xfrkey:{secret}", "@127.0.0.1", "-p", str(server.port),
                              "AXFR", "r.test."], capture_output=True, text=True, timeout=30)
        wrong = base64.b64encode(bytes(32)).decode()
        bad = subprocess.run(["kdig", "-y", f"hmac-sha256:xfrkey:{wrong}",
                              "@127.0.0.1", "-p", str(server.port), "AXFR", "r.test."],
                             capture_output=True, text=True, timeout=30)
        log = server.output()
    assert out.returncode == 0 and "WARNING" not in out.stdout + out.stderr, out.stdout + out.stderr
    lines = [line for line in out.stdout.splitlines()
             if line and not line.startswith(";") and "\tTSIG\t" not in line]
    got = dns.zone.from_text("\n".join(lines), origin="r.test.", relativize=False,
                             check_origin=False)
    assert _records(got) == _records(_read(path))
    assert "AXFR, serial 1" in log, log
    assert bad.returncode != 0 and "NOTAUTH" in bad.stderr, bad.stdout + bad.stderr
    assert "refused: BadSignature" in log, log


def test_connections_nobody_may_transfer_on_are_refused_at_once_and_hold_nothing(tmp_path):
    """A client outside --transfer-allow held a thread of the default executor per
    connection (reloads waited behind them, and the allowed secondary's AXFR took 10 s),
    and each connection logged a line."""
    import socket
    import struct
    import time

    import dns.query
    from conftest import EXAMPLE_ZONE
    from support.process import free_port

    port = free_port()
    srv = StormpyServer([("example.com.", EXAMPLE_ZONE)], ["--transfer-allow", "127.0.9.9/32"],
                        port=port)
    with srv:
        axfr = dns.message.make_query("example.com.", "AXFR").to_wire()
        strangers = []
        for _ in range(30):
            s = socket.socket()
            s.bind(("127.0.0.7", 0))
            s.settimeout(5)
            s.connect(("127.0.0.1", port))
            s.sendall(struct.pack("!H", len(axfr)) + axfr)
            strangers.append(s)
        start = time.monotonic()
        zone = dns.zone.Zone("example.com.", relativize=False)
        query, _ = dns.xfr.make_query(zone)
        dns.query.inbound_xfr("127.0.0.1", zone, query, port=port, source="127.0.9.9",
                              lifetime=5)
        took = time.monotonic() - start
        assert zone.get_rdataset("www.example.com.", "A") is not None and took < 3, took
        for s in strangers:                      # each answered NOTAUTH, then closed
            size = struct.unpack("!H", s.recv(2))[0]
            reply = dns.message.from_wire(s.recv(size))
            assert reply.rcode() == dns.rcode.NOTAUTH and s.recv(1) == b""
            s.close()
        srv.stop()
        # summed up, not one line a connection: the first at once, the rest by the stop
        refusals = [x for x in srv.output().splitlines() if "refused:" in x]
    counts = [int(re.search(r"refused: (\d+) source not in --transfer-allow, nor a primary",
                            x).group(1)) for x in refusals]
    assert len(refusals) == 2 and sum(counts) == 30, refusals
