"""DNAME (RFC 6672) on the C path (native/zone/resolve.c synthesizes the CNAME, a
template dns.c completes for the names below the owner) against compiler.py, the
reference: random zones with DNAMEs answer alike, and a CNAME into a DNAME's subtree
keeps its own target."""
import random

import dns.message
import pytest

from stormpy import _core
from test_zone_native import _compile, _random_zone, assert_same_answers

pytestmark = pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns")


@pytest.mark.parametrize("seed", range(4))
def test_random_zones_with_dnames_answer_alike(seed, tmp_path, monkeypatch):
    path = tmp_path / f"dname{seed}.zone"
    _random_zone(random.Random(seed), path, dnames=True)
    assert " DNAME " in path.read_text()
    assert_same_answers([str(path)], monkeypatch)


def test_a_wildcard_cname_into_a_dname_keeps_its_own_target(tmp_path, monkeypatch):
    """A wildcard's CNAME leading below a DNAME: the DNAME's synthesized CNAME is the
    one completed from the name (RFC 6672), the wildcard's keeps its target. Both
    compilers (the Python one wrote the DNAME's target into the wildcard's CNAME)."""
    path = tmp_path / "w.zone"
    path.write_text("$ORIGIN w.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n"
                    "*.w CNAME x.d\nd DNAME target.example.\n")
    want = ["foo.w.w.test. 60 IN CNAME x.d.w.test.", "d.w.test. 60 IN DNAME target.example.",
            "x.d.w.test. 60 IN CNAME x.target.example."]
    for python in (True, False):
        table, _ = _compile([str(path)], python, monkeypatch)
        q = dns.message.make_query("foo.w.w.test.", "A").to_wire()
        answer = dns.message.from_wire(table.dns_answer(q, tcp=True)).answer
        assert [r.to_text() for r in answer] == want, python
        q = dns.message.make_query("a.b.d.w.test.", "A").to_wire()
        answer = dns.message.from_wire(table.dns_answer(q, tcp=True)).answer
        assert [r.to_text() for r in answer][1:] == ["a.b.d.w.test. 60 IN CNAME a.b.target.example."]
