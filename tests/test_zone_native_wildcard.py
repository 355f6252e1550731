"""A wildcard that is only an empty non-terminal (RFC 4592 section 2.2.1): it exists,
so it matches the names below its parent that the zone lacks, and having no RRsets it
answers them NODATA (Knot DNS too: tests/test_differential.py's wild_ent cases). Both
compilers, and an IXFR's patch that makes or unmakes such a wildcard."""
import dns.message
import dns.name
import dns.rdata
import dns.rdataset
import dns.rcode
import dns.rdatatype
import dns.zone
import pytest

from stormpy import _core
from stormpy.dns import native
from stormpy.dns.compiler import compile_zones
from test_zone_native import _compile

pytestmark = pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns")

ZONE = ("$ORIGIN w.test.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n"
        "alias CNAME x.srv\n")


def _ask(table, qname, qtype="A"):
    q = dns.message.make_query(qname, qtype).to_wire()
    m = dns.message.from_wire(table.dns_answer(q, tcp=True))
    return dns.rcode.to_text(m.rcode()), len(m.answer), [r.rdtype for r in m.authority]


@pytest.mark.parametrize("python", [True, False], ids=["python", "c"])
def test_names_below_an_empty_non_terminal_wildcard_are_nodata(python, tmp_path, monkeypatch):
    path = tmp_path / "w.zone"
    path.write_text(ZONE + "_tcp.*.srv SRV 0 0 1 ns\n")
    table, _ = _compile([str(path)], python, monkeypatch)
    nodata = ("NOERROR", 0, [dns.rdatatype.SOA])
    for qname in ("x.srv", "y.x.srv", "_tcp.x.srv", "*.srv"):
        for qtype in ("A", "SRV", "ANY", "RRSIG", "DS"):
            assert _ask(table, qname + ".w.test.", qtype) == nodata, (qname, qtype)
    assert _ask(table, "alias.w.test.") == ("NOERROR", 1, [dns.rdatatype.SOA])
    assert _ask(table, "y.*.srv.w.test.")[0] == "NXDOMAIN"     # *.*.srv: none
    assert _ask(table, "_tcp.*.srv.w.test.", "SRV") == ("NOERROR", 1, [])


def test_a_patch_that_makes_or_unmakes_the_wildcard_changes_what_leads_to_it(tmp_path,
                                                                              monkeypatch):
    """x.srv turns from NXDOMAIN to NODATA, and back, with no record of its own or of
    srv changing: a CNAME to it is compiled again too."""
    from stormpy.dns.secondary import TransferZone
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    path = tmp_path / "w.zone"
    # SRV already (the types stay), and names enough that the patch reaches few
    path.write_text(ZONE + "srv A 192.0.2.2\nsip SRV 0 0 1 ns\n" +
                    "".join(f"h{i} A 192.0.2.{i}\n" for i in range(20)))
    zone = dns.zone.from_file(str(path), relativize=False, zone_factory=TransferZone)
    prepared = native.from_records(str(path), zone)
    table, _ = compile_zones([prepared])
    below = dns.name.from_text("_tcp.*.srv", zone.origin)
    for serial, rcode in ((2, "NOERROR"), (3, "NXDOMAIN")):
        zone.changed_names = set()
        with zone.writer() as txn:
            soa = zone.get_rdataset(zone.origin, "SOA")
            txn.replace(zone.origin, dns.rdataset.from_rdata(60, soa[0].replace(serial=serial)))
            if serial == 2:
                txn.add(below, 60, dns.rdata.from_text("IN", "SRV", "0 0 1 ns.w.test."))
            else:
                txn.delete(below)
        assert native.patch(prepared, zone, zone.changed_names)
        edit = table.edit()
        prepared.native.recompile_into(edit)
        table = edit.finish()
        assert _ask(table, "x.srv.w.test.")[0] == rcode
        assert _ask(table, "alias.w.test.")[:2] == (rcode, 1), serial
