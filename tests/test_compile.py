"""The zone compiler on cases the Knot differential zones do not reach."""
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from stormpy.dns.compiler import compile_zones
from stormpy.errors import ZoneError
from stormpy.dns.zone import load_zone

HEAD = "$ORIGIN p.test.\n$TTL 300\n@ SOA ns h 1 2 3 4 60\n@ NS ns\nns A 192.0.2.1\n"


def table_for(tmp_path, body, **kw):
    path = tmp_path / "p.zone"
    path.write_text(HEAD + body)
    return compile_zones([load_zone(str(path))], **kw)[0]


def ask(table, name, qtype):
    return dns.message.from_wire(table.dns_answer(dns.message.make_query(name, qtype).to_wire()))


def test_ds_through_a_cname_to_a_cut_is_nodata(tmp_path):
    """No DS anywhere in the zone: a DS query that follows a CNAME to a zone cut is
    answered by this zone (CNAME + SOA), not referred (as Knot DNS answers)."""
    t = table_for(tmp_path, "sub NS ns.sub\nns.sub A 192.0.2.9\nalias CNAME sub\n*.wc CNAME sub\n")
    for name in ("alias.p.test", "x.wc.p.test"):
        r = ask(t, name, "DS")
        assert r.flags & dns.flags.AA, name
        assert [rr.rdtype for rr in r.answer] == [dns.rdatatype.CNAME], name
        assert [rr.rdtype for rr in r.authority] == [dns.rdatatype.SOA], name
    r = ask(t, "alias.p.test", "A")     # other types: the CNAME, then the referral
    assert [rr.rdtype for rr in r.answer] == [dns.rdatatype.CNAME]
    assert [rr.rdtype for rr in r.authority] == [dns.rdatatype.NS]


def test_names_near_the_length_limit(tmp_path):
    long_owner = ".".join(["a" * 60] * 4)            # 4*61 + len("p.test.") = 252 octets
    t = table_for(tmp_path, f"{long_owner} A 192.0.2.7\n")
    r = ask(t, f"{long_owner}.p.test", "A")
    assert r.answer[0][0].address == "192.0.2.7"
    assert ask(t, f"{long_owner}.p.test", "MX").rcode() == dns.rcode.NOERROR


def test_soa_below_the_origin_is_one_line_with_its_line(tmp_path):
    path = tmp_path / "soa.zone"
    path.write_text("$ORIGIN x.example.\n$TTL 300\n@ NS ns\nsub SOA ns hm 1 2 3 4 5\n")
    with pytest.raises(ZoneError, match=r"soa.zone:4: an SOA record at sub.x.example. other "
                                         r"than the zone origin"):
        load_zone(str(path))


def test_chaos_text_is_answered_exactly(tmp_path):
    t = table_for(tmp_path, "", chaos_version='say "hi" \\ there', chaos_identity="node-1")
    q = dns.message.make_query("version.bind", "TXT", rdclass="CH")
    r = dns.message.from_wire(t.dns_answer(q.to_wire()))
    assert r.answer[0][0].strings == (b'say "hi" \\ there',)
    q = dns.message.make_query("hostname.bind", "TXT", rdclass="CH")
    assert dns.message.from_wire(t.dns_answer(q.to_wire())).answer[0][0].strings == (b"node-1",)


def test_a_child_zone_served_beside_its_parent(tmp_path):
    parent = tmp_path / "parent.zone"
    parent.write_text(HEAD + "sub NS ns.sub\nns.sub A 192.0.2.9\nsub DS 1 8 2 " + "ab" * 32 + "\n")
    child = tmp_path / "child.zone"
    child.write_text("$ORIGIN sub.p.test.\n$TTL 300\n@ SOA ns h 1 2 3 4 60\n@ NS ns\n"
                     "ns A 192.0.2.9\nwww A 192.0.2.10\n")
    t, _ = compile_zones([load_zone(str(child)), load_zone(str(parent))])
    r = ask(t, "www.sub.p.test", "A")              # the child answers, with AA
    assert r.flags & dns.flags.AA and r.answer[0][0].address == "192.0.2.10"
    r = ask(t, "sub.p.test", "DS")                 # DS comes from the parent
    assert r.flags & dns.flags.AA and r.answer[0].rdtype == dns.rdatatype.DS
    r = ask(t, "gone.sub.p.test", "A")             # NXDOMAIN with the child's SOA
    assert r.rcode() == dns.rcode.NXDOMAIN and r.authority[0].name.to_text() == "sub.p.test."
