"""Signed zones on the C path (native/zone/dnssec.c) against dnssec.py, the reference:
the same NSEC-signed zone compiled both ways gives every question the same answer, with
DO and without, over TCP and within UDP sizes that truncate. NSEC3-signed zones are read
in C and compiled in Python."""
import os
import random

import dns.message
import pytest

from stormpy import _core
from stormpy.dns import native
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone
from support import signing
from test_zone_native import ZONES, _meaning, _questions, _random_zone

pytestmark = [pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns"),
              pytest.mark.skipif(not signing.available(), reason="ldns-signzone not installed")]

DNSSEC_TYPES = ("RRSIG", "NSEC", "DNSKEY", "NSEC3PARAM", "NSEC3", "DS")


def _both(path, monkeypatch):
    """(Python's table, C's table) for the zone at path."""
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "python")
    python, _ = compile_zones([load_zone(path)])
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    zone = load_zone(path)
    assert isinstance(zone, native.NativeZone), "read by dnspython, not in C"
    compiled = native.compile_zones([zone], None, None, {})
    assert compiled is not None, "the C compiler declined"
    return python, compiled[0]


def _assert_same_answers(path, monkeypatch) -> int:
    python, c = _both(path, monkeypatch)
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "python")
    rng = random.Random(path)
    asked = 0
    for qname, qtype in _questions(load_zone(path), rng):
        for rdtype in {qtype, rng.choice(DNSSEC_TYPES)}:
            do = rng.random() < 0.7
            for tcp, payload in ((True, 1232), (False, rng.choice([512, 900, 1232]))):
                wire = dns.message.make_query(qname, rdtype, use_edns=0, payload=payload,
                                              want_dnssec=do).to_wire()
                want = _meaning(python.dns_answer(wire, tcp=tcp))
                assert _meaning(c.dns_answer(wire, tcp=tcp)) == want, \
                    f"{qname} {rdtype} DO={do} tcp={tcp} payload={payload}"
                asked += 1
    return asked


def _signed(tmp_path, source: str, origin: str, nsec3=False) -> str:
    return signing.sign_zone(source, origin, str(tmp_path), nsec3)


def test_the_signed_test_zone_answers_alike(tmp_path, monkeypatch):
    """Wildcards (and their NODATA), delegations with DS and without, empty non-terminals,
    CNAME chains in and out of the zone; its DNAMEs are left out (the Python path's)."""
    source = tmp_path / "source.zone"
    with open(os.path.join(ZONES, "signed.example.zone")) as f:
        source.write_text("".join(line for line in f if "DNAME" not in line))
    path = _signed(tmp_path, str(source), "signed.example.")
    assert _assert_same_answers(path, monkeypatch) > 5000


@pytest.mark.parametrize("seed", range(4))
def test_random_signed_zones_answer_alike(seed, tmp_path, monkeypatch):
    source = tmp_path / "source.zone"
    _random_zone(random.Random(seed), source)
    assert _assert_same_answers(_signed(tmp_path, str(source), "r.test."), monkeypatch) > 1000


def test_dnssec_records_without_a_dnskey_are_data(tmp_path, monkeypatch):
    """RRSIGs and NSECs in a zone without DNSKEY at its apex: no DNSSEC forms, but a
    query for RRSIG or NSEC is answered from them, in C as in Python."""
    source = tmp_path / "source.zone"
    _random_zone(random.Random(7), source)
    path = _signed(tmp_path, str(source), "r.test.")
    with open(path) as f:
        kept = [line for line in f if "\tDNSKEY\t" not in line and "RRSIG\tDNSKEY" not in line]
    stripped = tmp_path / "stripped.zone"
    stripped.write_text("".join(kept))
    assert _assert_same_answers(str(stripped), monkeypatch) > 1000


def test_an_nsec3_signed_zone_is_read_in_c_and_compiled_in_python(tmp_path, monkeypatch):
    source = tmp_path / "source.zone"
    _random_zone(random.Random(1), source)
    path = _signed(tmp_path, str(source), "r.test.", nsec3=True)
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    zone = load_zone(path)
    assert isinstance(zone, native.NativeZone)
    assert native.compile_zones([zone], None, None, {}) is None
    table, _ = compile_zones([zone])
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "python")
    reference, _ = compile_zones([load_zone(path)])
    rng = random.Random(3)
    for qname, qtype in _questions(load_zone(path), rng):
        wire = dns.message.make_query(qname, qtype, use_edns=0, want_dnssec=True).to_wire()
        assert _meaning(table.dns_answer(wire, tcp=True)) == \
            _meaning(reference.dns_answer(wire, tcp=True)), (qname, qtype)
