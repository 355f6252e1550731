"""Referral glue and the 512-byte limit (RFC 9471): the glue of name servers below the
cut must come with the referral, or it is truncated (TC); sibling glue (name servers in
another delegation of the zone) may be left out, and is, without TC, when the whole
does not fit. Both compilers, and Knot DNS answering the same questions."""
import dns.flags
import dns.message
import dns.rdatatype
import pytest

from stormpy.dns import native
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone
from support.client import udp_query
from support.servers import knot_server  # noqa: F401  (fixture)

ORIGIN = "glue.test."
SIBLINGS = 5


def _zone_text() -> str:
    lines = [f"$ORIGIN {ORIGIN}", "$TTL 300", "@ SOA ns hostmaster 1 7200 3600 1209600 300",
             "@ NS ns", "ns A 192.0.2.1",
             # sibling delegation holding the name servers' addresses
             "other NS ns1.other", "ns1.other A 198.51.100.1"]
    for i in range(SIBLINGS):      # the NS RRset fits 512 bytes; with its glue it does not
        lines.append(f"sub NS ns{i}.other")
        lines += [f"ns{i}.other A 198.51.100.{10 * i + k}" for k in range(2)]
        lines += [f"ns{i}.other AAAA 2001:db8::{i}:{k}" for k in range(4)]
    lines += ["sub NS ns.sub", "ns.sub A 192.0.2.53", "ns.sub AAAA 2001:db8::53",
              # in-domain glue alone too large for 512 bytes: TC
              *[f"big NS ns{i}.big\nns{i}.big AAAA 2001:db8::{i}\nns{i}.big A 192.0.2.{i}"
                for i in range(1, 13)]]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def zone_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("glue") / "glue.zone"
    path.write_text(_zone_text())
    return str(path)


def _tables(path, monkeypatch):
    tables = {}
    for loader in ("python", "c"):
        monkeypatch.setenv("STORMPY_ZONE_LOADER", loader)
        zone = load_zone(path)
        if loader == "c":
            assert isinstance(zone, native.NativeZone)
            tables[loader] = native.compile_zones([zone], None, None, {})[0]
        else:
            tables[loader] = compile_zones([zone])[0]
    return tables


def _sections(r: dns.message.Message) -> dict:
    return {"tc": bool(r.flags & dns.flags.TC), "rcode": r.rcode(),
            "authority": sorted(line for rr in r.authority for line in rr.to_text().splitlines()),
            "glue": sorted((rr.name.to_text(), rr.rdtype) for rr in r.additional
                           if rr.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA))}


@pytest.mark.parametrize("qname", ["www.sub.glue.test.", "sub.glue.test."])
def test_sibling_glue_is_left_out_without_tc(qname, zone_path, monkeypatch, knot_server):
    query = dns.message.make_query(qname, "A", use_edns=False)
    knot = knot_server([(ORIGIN, zone_path)])
    theirs = dns.message.from_wire(udp_query(query.to_wire(), knot.addr, timeout=2))
    wanted = {("ns.sub.glue.test.", dns.rdatatype.A), ("ns.sub.glue.test.", dns.rdatatype.AAAA)}
    assert not theirs.flags & dns.flags.TC and wanted <= set(_sections(theirs)["glue"])
    for loader, table in _tables(zone_path, monkeypatch).items():
        ours = _sections(dns.message.from_wire(table.dns_answer(query.to_wire())))
        assert not ours["tc"], (loader, ours)
        assert set(ours["glue"]) == wanted, (loader, ours)        # in-domain glue kept
        assert ours["authority"] == _sections(theirs)["authority"]
        # with room (EDNS 4096) every glue record comes
        roomy = dns.message.make_query(qname, "A", use_edns=0, payload=4096)
        full = _sections(dns.message.from_wire(table.dns_answer(roomy.to_wire())))
        assert len(full["glue"]) == 2 + 2 * SIBLINGS and not full["tc"], (loader, full)


def test_in_domain_glue_that_does_not_fit_truncates(zone_path, monkeypatch, knot_server):
    query = dns.message.make_query("www.big.glue.test.", "A", use_edns=False)
    knot = knot_server([(ORIGIN, zone_path)])
    theirs = dns.message.from_wire(udp_query(query.to_wire(), knot.addr, timeout=2))
    assert theirs.flags & dns.flags.TC
    for loader, table in _tables(zone_path, monkeypatch).items():
        ours = dns.message.from_wire(table.dns_answer(query.to_wire()))
        assert ours.flags & dns.flags.TC and not ours.answer and not ours.authority, loader
