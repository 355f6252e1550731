"""NS, MX, SRV, SVCB and HTTPS targets that only a wildcard matches (RFC 4592: the
closest encloser's `*` child; a name that exists, an empty non-terminal included,
blocks it) add to the additional section what Knot DNS 3.2.6 adds:
- NS, MX and SRV: the wildcard's A and AAAA, renamed to the target;
- SVCB and HTTPS: the wildcard's A, AAAA and SVCB or HTTPS under the wildcard's own
  name (`*.wild`), as Knot adds them; several targets under one wildcard add them once
  (Knot repeats them: dnspython reads the two alike);
- below a zone cut too, as glue (unsigned), in a referral as in an MX answer;
- with DO, each with the wildcard's RRSIG (its labels field the wildcard's), renamed as
  its RRset, and no proof that no closer name exists. For an SVCB or HTTPS target whose
  wildcard lacks that type Knot also adds the wildcard's NSEC (or NSEC3) and its RRSIG,
  which stormpy leaves out, as for a target that exists (README: differences).
Both compilers are asked in process and compared with a live knotd, section by section;
an IXFR patch making or unmaking a wildcard recompiles the answers whose targets it matches."""
import os
import sys

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataset
import dns.rdatatype
import dns.zone
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from stormpy import _core  # noqa: E402
from stormpy.dns import native  # noqa: E402
from stormpy.dns.compiler import compile_zones  # noqa: E402
from stormpy.dns.secondary import TransferZone  # noqa: E402
from support.knot_compare import Tables, knot_servers, zone_variants  # noqa: E402
from support.knot_compare import knot_answer as _knot_answer  # noqa: E402
from support.servers import knot_server  # noqa: E402,F401
from test_svcb_additional import _is_proof, _section  # noqa: E402

ORIGIN = "ex.test."
ZONE = """$ORIGIN ex.test.
$TTL 300
@ SOA ns1 host 1 3600 600 86400 300
@ NS ns1
@ NS x.nsw
ns1 A 198.18.0.1
*.nsw A 198.18.0.50
*.nsw AAAA 2001:2::50
mail MX 10 m.wild
srv SRV 0 0 25 s.wild
svc SVCB 1 v.wild
https HTTPS 1 h.wild
*.wild A 198.18.0.7
*.wild AAAA 2001:2::7
*.wild SVCB 1 web
*.wild HTTPS 1 web
*.wild MX 5 web
web A 198.18.0.2
blocked MX 10 sib.wild
sib.wild TXT "exists"
ent MX 10 e.wild
x.e.wild A 198.18.0.8
deep MX 10 a.b.wild
txtonly MX 10 t.wtxt
svctxt SVCB 1 t.wtxt
*.wtxt TXT "only txt"
del MX 10 a.deleg
deleg NS ns.deleg
ns.deleg A 198.18.0.10
*.deleg A 198.18.0.11
d2 NS ns.d2
*.d2 A 198.18.0.12
two MX 10 p.wild
two MX 20 q.wild
pair SVCB 1 p.wild
pair SVCB 2 q.wild
mixed SVCB 1 web
mixed SVCB 2 p.wild
*.wc CNAME web
cn MX 1 a.wc
went MX 1 a.went
x.*.went A 198.18.0.13
"""

# (name, type) -> what knotd 3.2.6 adds, "owner TYPE" relative to the origin
KNOT_ADDS = {
    ("mail", "MX"): {"m.wild A", "m.wild AAAA"},
    ("srv", "SRV"): {"s.wild A", "s.wild AAAA"},
    ("@", "NS"): {"ns1 A", "x.nsw A", "x.nsw AAAA"},
    ("svc", "SVCB"): {"*.wild A", "*.wild AAAA", "*.wild SVCB"},
    ("https", "HTTPS"): {"*.wild A", "*.wild AAAA", "*.wild HTTPS"},
    ("blocked", "MX"): set(),                   # sib.wild exists (TXT only)
    ("ent", "MX"): set(),                       # e.wild is an empty non-terminal
    ("deep", "MX"): {"a.b.wild A", "a.b.wild AAAA"},
    ("txtonly", "MX"): set(),                   # the wildcard has no address
    ("svctxt", "SVCB"): set(),
    ("del", "MX"): {"a.deleg A"},               # below a cut: glue, never signed
    ("x.d2", "A"): {"ns.d2 A"},                 # a referral's in-domain glue
    ("two", "MX"): {"p.wild A", "p.wild AAAA", "q.wild A", "q.wild AAAA"},
    ("pair", "SVCB"): {"*.wild A", "*.wild AAAA", "*.wild SVCB"},
    ("mixed", "SVCB"): {"web A", "*.wild A", "*.wild AAAA", "*.wild SVCB"},
    ("cn", "MX"): set(),                        # the wildcard is a CNAME
    ("went", "MX"): set(),                      # the wildcard is an empty non-terminal
}
QUESTIONS = list(KNOT_ADDS)
IDS = [f"{n}-{t}" for n, t in QUESTIONS]


def _qname(name: str) -> str:
    return ORIGIN if name == "@" else f"{name}.{ORIGIN}"


def _query(name, qtype, do=False):
    return dns.message.make_query(_qname(name), qtype, use_edns=0, want_dnssec=do, payload=4096)


def _shape(m, proofs_left_out=False):
    """proofs_left_out: without the NSEC or NSEC3 (and its RRSIG) Knot adds for an SVCB
    or HTTPS target lacking that type, a proof stormpy leaves out (as for a target that
    exists: test_svcb_additional.py)."""
    additional = [r for r in m.additional if not (proofs_left_out and _is_proof(r))]
    return (dns.rcode.to_text(m.rcode()), bool(m.flags & dns.flags.AA),
            bool(m.flags & dns.flags.TC), _section(m.answer), _section(m.authority),
            _section(additional))


def _added(m):
    origin = dns.name.from_text(ORIGIN)
    return {f"{r.name.relativize(origin).to_text().lower()} {dns.rdatatype.to_text(r.rdtype)}"
            for r in m.additional if r.rdtype not in (dns.rdatatype.RRSIG, dns.rdatatype.OPT)}


@pytest.fixture(scope="module")
def zone_paths(tmp_path_factory):
    return zone_variants(tmp_path_factory.mktemp("wildadd"), ZONE, ORIGIN)


_tables = Tables()


def _ours(path, python, query):
    return _tables.answer(path, python, query)


@pytest.fixture(scope="module")
def knot(zone_paths, knot_server):
    return knot_servers(knot_server, zone_paths, ORIGIN)


@pytest.mark.parametrize("name, qtype", QUESTIONS, ids=IDS)
@pytest.mark.parametrize("python", [True, False], ids=["python", "c"])
def test_as_knot(knot, zone_paths, python, name, qtype):
    query = _query(name, qtype)
    want = _knot_answer(knot, "plain", query)
    assert _added(want) == KNOT_ADDS[(name, qtype)], f"knotd changed:\n{want}"
    got = _ours(zone_paths["plain"], python, query)
    assert _shape(got) == _shape(want), f"\n--- knot\n{want}\n--- stormpy\n{got}"


@pytest.mark.parametrize("kind", ["nsec", "nsec3"])
@pytest.mark.parametrize("name, qtype", QUESTIONS, ids=IDS)
@pytest.mark.parametrize("python", [True, False], ids=["python", "c"])
def test_as_knot_signed_with_do(knot, zone_paths, kind, python, name, qtype):
    """The wildcard's RRSIGs come along, renamed with the RRset; glue unsigned."""
    if kind not in zone_paths:
        pytest.skip("ldns-signzone not installed")
    query = _query(name, qtype, do=True)
    want = _knot_answer(knot, kind, query)
    got = _ours(zone_paths[kind], python, query)
    svcb = qtype in ("SVCB", "HTTPS")
    assert svcb or not any(_is_proof(r) for r in want.additional)
    assert _shape(got) == _shape(want, svcb), f"\n--- knot\n{want}\n--- stormpy\n{got}"
    signed = {r.name for r in got.additional if r.rdtype == dns.rdatatype.RRSIG}
    cuts = [dns.name.from_text(cut + ORIGIN) for cut in ("deleg.", "d2.")]
    glue = {r.name for r in got.additional if any(r.name.is_subdomain(cut) for cut in cuts)}
    assert signed == {r.name for r in got.additional if r.rdtype != dns.rdatatype.OPT} - glue


@pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns")
@pytest.mark.parametrize("kind", ["plain", "nsec", "nsec3"])
def test_both_compilers_answer_alike(zone_paths, kind):
    """With and without DO, over TCP and UDP at sizes where the additional section fits
    and where it is left out."""
    if kind not in zone_paths:
        pytest.skip("ldns-signzone not installed")
    for name, qtype in QUESTIONS:
        for do in (False, True):
            query = _query(name, qtype, do=do)
            for tcp, size in ((True, 4096), (False, 512), (False, 1232)):
                python, c = (_tables.answer(zone_paths[kind], python, query, tcp, size)
                             for python in (True, False))
                assert _shape(c) == _shape(python), f"{name} {qtype} DO={do} tcp={tcp} {size}"
                if tcp:
                    assert _added(c) == KNOT_ADDS[(name, qtype)], f"{name} {qtype} DO={do}"


@pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns")
@pytest.mark.parametrize("parent", ["wild A 198.18.0.3\n", ""], ids=["parent-held", "parent-new"])
def test_a_patch_that_makes_or_unmakes_the_wildcard_recompiles_the_mx(tmp_path, monkeypatch,
                                                                      parent):
    """An IXFR's patch adding *.wild gives mail's MX answer the wildcard's A, renamed to
    m.wild, and deleting it takes the A away: mail's own records do not change."""
    monkeypatch.setenv("STORMPY_ZONE_LOADER", "c")
    path = tmp_path / "p.zone"
    path.write_text("$ORIGIN ex.test.\n$TTL 300\n@ SOA ns1 host 1 3600 600 86400 300\n"
                    "@ NS ns1\nns1 A 198.18.0.1\nmail MX 10 m.wild\n" + parent +
                    "".join(f"h{i} A 198.18.1.{i}\n" for i in range(20)))
    zone = dns.zone.from_file(str(path), relativize=False, zone_factory=TransferZone)
    prepared = native.from_records(str(path), zone)
    table, _ = compile_zones([prepared])
    wild = dns.name.from_text("*.wild", zone.origin)
    for serial, added in ((2, {"m.wild A"}), (3, set())):
        zone.changed_names = set()
        with zone.writer() as txn:
            soa = zone.get_rdataset(zone.origin, "SOA")
            txn.replace(zone.origin, dns.rdataset.from_rdata(300, soa[0].replace(serial=serial)))
            if serial == 2:
                txn.add(wild, 300, dns.rdata.from_text("IN", "A", "198.18.0.7"))
            else:
                txn.delete(wild)
        assert native.patch(prepared, zone, zone.changed_names)
        edit = table.edit()
        prepared.native.recompile_into(edit)
        table = edit.finish()
        answer = dns.message.from_wire(table.dns_answer(_query("mail", "MX").to_wire(), tcp=True))
        assert _added(answer) == added, serial
