"""Signed zones on the C path (native/zone/dnssec.c, nsec3.c) against dnssec.py, the
reference: the same zone (DNAMEs too), signed with NSEC or with NSEC3 (opt-out),
compiled both ways gives every question the same answer, with DO and without, over TCP
and within UDP sizes that truncate."""
import os
import random
import re

import dns.message
import pytest

from stormpy import _core
from stormpy.dns import native
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone
from stormpy.errors import ZoneError
from support import signing
from test_zone_native import ZONES, _questions, _random_zone, _same_answer

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
                assert _same_answer(c.dns_answer(wire, tcp=tcp), python.dns_answer(wire, tcp=tcp)), \
                    f"{qname} {rdtype} DO={do} tcp={tcp} payload={payload}"
                asked += 1
    return asked


def _signed(tmp_path, source: str, origin: str, nsec3=False) -> str:
    return signing.sign_zone(source, origin, str(tmp_path), nsec3)


@pytest.mark.parametrize("nsec3", [False, True], ids=["nsec", "nsec3"])
def test_the_signed_test_zone_answers_alike(nsec3, tmp_path, monkeypatch):
    """Wildcards (and their NODATA), delegations with DS and without (opt-out with
    NSEC3), empty non-terminals, CNAME chains in and out of the zone, DNAMEs (one too
    long for the names below it, one a CNAME leads into)."""
    path = _signed(tmp_path, os.path.join(ZONES, "signed.example.zone"), "signed.example.", nsec3)
    assert _assert_same_answers(path, monkeypatch) > 5000


@pytest.mark.parametrize("seed,nsec3,dnames", [
    (0, False, False), (1, False, True), (2, False, False), (3, False, True),
    (0, True, False), (1, True, True), (2, True, True)])
def test_random_signed_zones_answer_alike(seed, nsec3, dnames, tmp_path, monkeypatch):
    source = tmp_path / "source.zone"
    _random_zone(random.Random(seed), source, dnames)
    path = _signed(tmp_path, str(source), "r.test.", nsec3)
    assert _assert_same_answers(path, monkeypatch) > 1000


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


@pytest.mark.parametrize("change,error", [
    (lambda text: text.replace("\tNSEC3PARAM\t1 ", "\tNSEC3PARAM\t7 "),
     "NSEC3PARAM hash algorithm 7 is not SHA-1"),
    (lambda text: re.sub(r"^([0-9a-v]{31})[0-9a-v](\.r\.test\.\t\d+\tIN\tNSEC3\t)", r"\1z\2", text,
                         count=1, flags=re.M),
     "is no SHA-1 hash (base32hex) right below the origin"),
    (lambda text: re.sub(r"^([0-9a-v]{32})(\.r\.test\.\t\d+\tIN\tNSEC3\t)", r"\1.x\2", text,
                         count=1, flags=re.M),
     "is no SHA-1 hash (base32hex) right below the origin"),
], ids=["algorithm", "owner-not-base32hex", "owner-not-below-origin"])
def test_an_nsec3_chain_without_sha1_hashes_is_refused_in_one_line(change, error, tmp_path,
                                                                    monkeypatch):
    """The C compiler declines such a chain (dnspython judges it) and the zone is
    refused with one line, not a traceback, on either path. The first case at least
    is read in C."""
    source = tmp_path / "source.zone"
    _random_zone(random.Random(1), source)
    with open(_signed(tmp_path, str(source), "r.test.", nsec3=True)) as f:
        text = f.read()
    odd = tmp_path / "odd.zone"
    odd.write_text(change(text))
    assert odd.read_text() != text
    read_in_c = "algorithm" in error
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    zone = load_zone(str(odd))
    assert isinstance(zone, native.NativeZone) or not read_in_c
    if isinstance(zone, native.NativeZone):     # a stray RRSIG sends the zone to dnspython
        assert native.compile_zones([zone], None, None, {}) is None
    for loader in ("c", "python"):
        monkeypatch.setenv("STORMPY_ZONE_LOADER", loader)
        with pytest.raises(ZoneError, match=re.escape(error)):
            compile_zones([load_zone(str(odd))])
