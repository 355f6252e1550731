"""SVCB and HTTPS answers carry their in-zone targets' addresses in the additional
section, as Knot DNS 3.2 adds them (RFC 9460 section 4.1 suggests it): the target's A
and AAAA and its own RRset of the answer's type (SVCB for SVCB, HTTPS for HTTPS), in
AliasMode and ServiceMode alike, one level only, glue below a delegation included;
nothing for a target out of the zone, ".", a CNAME, an empty non-terminal or a missing
name (a target only a wildcard matches: tests/test_wildcard_additional.py). The same
mechanism as MX, SRV and NS targets (A and AAAA only): with DO each added RRset comes
with its RRSIGs, and the additional section is optional data, left out when the answer
does not fit.

Both compilers are asked in process, and their answers compared section by section with
a live knotd's. Deliberate differences, checked below (README: differences from Knot):
- with DO, Knot also adds the target's NSEC (or the NSEC3 matching its hash) and its
  RRSIG; stormpy leaves that proof out;
- an additional section that does not fit is left out whole (Knot keeps what fits)."""
import os
import sys

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from stormpy import _core  # noqa: E402
from support.client import udp_query  # noqa: E402
from support.knot_compare import Tables, knot_servers, zone_variants  # noqa: E402
from support.knot_compare import knot_answer as _knot_answer  # noqa: E402
from support.servers import knot_server, stormpy_server  # noqa: E402,F401

ORIGIN = "ex.test."
MANY = 40            # AAAA records at one target: its addresses alone exceed 512 bytes
ZONE = """$ORIGIN ex.test.
$TTL 300
@ SOA ns1 host 1 3600 600 86400 300
@ NS ns1
ns1 A 198.18.0.1
svc HTTPS 1 web alpn=h2
web A 198.18.0.2
web AAAA 2001:2::2
@ HTTPS 1 . alpn=h3
@ A 198.18.0.3
s2 SVCB 0 web
out SVCB 1 other.example.
below SVCB 1 host.deleg
deleg NS ns.deleg
ns.deleg A 198.18.0.10
host.deleg A 198.18.0.11
host.deleg AAAA 2001:2::11
to-alias SVCB 1 alias
alias CNAME web
to-v4 SVCB 1 only4
only4 A 198.18.0.6
to-wild SVCB 1 x.wild
*.wild A 198.18.0.7
*.wild AAAA 2001:2::7
*.w2 HTTPS 1 web
multi SVCB 1 web
multi SVCB 2 only4
multi SVCB 3 WEB
multi SVCB 4 other.example.
multi SVCB 5 t1
to-none SVCB 1 nothing
to-ent SVCB 1 ent
x.ent A 198.18.0.9
alias-dot SVCB 0 .
chain CNAME svc
self SVCB 1 self
self A 198.18.0.13
a1 HTTPS 0 t1
t1 HTTPS 1 . alpn=h2
t1 SVCB 1 .
t1 A 198.18.0.21
a2 SVCB 0 t1
a3 HTTPS 0 svc
mail MX 10 t1
big HTTPS 1 many
many A 198.18.0.40
""" + "".join(f"many AAAA 2001:2::4:{i:x}\n" for i in range(MANY))

QUESTIONS = [("svc", "HTTPS"), ("s2", "SVCB"), ("@", "HTTPS"), ("out", "SVCB"),
             ("below", "SVCB"), ("to-alias", "SVCB"), ("to-v4", "SVCB"), ("to-wild", "SVCB"),
             ("a.w2", "HTTPS"), ("multi", "SVCB"), ("to-none", "SVCB"), ("to-ent", "SVCB"),
             ("alias-dot", "SVCB"), ("chain", "HTTPS"), ("svc", "ANY"), ("@", "ANY"),
             ("self", "SVCB"), ("a1", "HTTPS"), ("a2", "SVCB"), ("a3", "HTTPS"), ("mail", "MX"),
             ("big", "HTTPS"), ("svc", "A"), ("x.deleg", "A"), ("@", "NS")]
IDS = [f"{n}-{t}" for n, t in QUESTIONS]
# what knotd answers in the additional section (checked against knotd 3.2.6)
KNOT_ADDS = {
    ("svc", "HTTPS"): {"web A", "web AAAA"}, ("s2", "SVCB"): {"web A", "web AAAA"},
    ("below", "SVCB"): {"host.deleg A", "host.deleg AAAA"}, ("to-v4", "SVCB"): {"only4 A"},
    ("a.w2", "HTTPS"): {"web A", "web AAAA"}, ("chain", "HTTPS"): {"web A", "web AAAA"},
    ("svc", "ANY"): {"web A", "web AAAA"}, ("self", "SVCB"): {"self A", "self SVCB"},
    ("multi", "SVCB"): {"web A", "web AAAA", "only4 A", "t1 A", "t1 SVCB"},
    ("a1", "HTTPS"): {"t1 A", "t1 HTTPS"}, ("a2", "SVCB"): {"t1 A", "t1 SVCB"},
    ("a3", "HTTPS"): {"svc HTTPS"}, ("mail", "MX"): {"t1 A"}, ("@", "NS"): {"ns1 A"},
    ("to-wild", "SVCB"): {"*.wild A", "*.wild AAAA"},       # under the wildcard's name
    ("big", "HTTPS"): {"many A", "many AAAA"}, ("x.deleg", "A"): {"ns.deleg A"},
}


def _qname(name: str) -> str:
    return ORIGIN if name == "@" else f"{name}.{ORIGIN}"


def _is_proof(rrset) -> bool:
    return rrset.rdtype in (dns.rdatatype.NSEC, dns.rdatatype.NSEC3) or (
        rrset.rdtype == dns.rdatatype.RRSIG and rrset.covers in (dns.rdatatype.NSEC,
                                                                 dns.rdatatype.NSEC3))


def _section(rrsets, knot_only_left_out=False):
    """A section as the sorted list of its records; knot_only_left_out: without what
    Knot alone adds to the additional section (the module's docstring)."""
    if knot_only_left_out:
        rrsets = [r for r in rrsets if not _is_proof(r)]
    return sorted((r.name.canonicalize().to_text(), r.rdtype, r.covers, r.ttl, rd.to_digestable())
                  for r in rrsets for rd in r)


def _shape(m, knot=False):
    return (dns.rcode.to_text(m.rcode()), bool(m.flags & dns.flags.AA), bool(m.flags & dns.flags.TC),
            _section(m.answer), _section(m.authority), _section(m.additional, knot))


def _added(m):
    """The additional section's data RRsets as "name TYPE", relative to the origin."""
    origin = dns.name.from_text(ORIGIN)
    return {f"{r.name.relativize(origin).to_text().lower()} {dns.rdatatype.to_text(r.rdtype)}"
            for r in m.additional if r.rdtype != dns.rdatatype.RRSIG and not _is_proof(r)}


def _query(name, qtype, do=False, edns=True):
    return dns.message.make_query(_qname(name), qtype, use_edns=0 if edns or do else False,
                                  want_dnssec=do, payload=4096)


# --------------------------------------------------------------------------
# zones, tables and knotd (support/knot_compare.py)
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def zone_paths(tmp_path_factory):
    """The zone as written, and signed with NSEC and with NSEC3 when ldns-signzone is here."""
    return zone_variants(tmp_path_factory.mktemp("svcb"), ZONE, ORIGIN)


COMPILERS = [True, False]
COMPILER_IDS = ["python", "c"]
_tables = Tables()
_ours = _tables.answer


@pytest.fixture(scope="module")
def knot(zone_paths, knot_server):
    return knot_servers(knot_server, zone_paths, ORIGIN)


# --------------------------------------------------------------------------
# against Knot DNS
# --------------------------------------------------------------------------

@pytest.mark.parametrize("name, qtype", QUESTIONS, ids=IDS)
@pytest.mark.parametrize("python", COMPILERS, ids=COMPILER_IDS)
def test_as_knot(knot, zone_paths, python, name, qtype):
    query = _query(name, qtype)
    want = _knot_answer(knot, "plain", query)
    got = _ours(zone_paths["plain"], python, query)
    assert _added(want) == KNOT_ADDS.get((name, qtype), set()), f"knotd changed:\n{want}"
    assert _shape(got) == _shape(want, knot=True), f"\n--- knot\n{want}\n--- stormpy\n{got}"


# svc ANY: in a signed zone Knot answers ANY at a name whose types all lie above RRSIG
# with the RRSIGs, stormpy with the lowest other type: a difference of ANY, not of SVCB
SIGNED_QUESTIONS = [q for q in QUESTIONS if q != ("svc", "ANY")]


@pytest.mark.parametrize("kind", ["nsec", "nsec3"])
@pytest.mark.parametrize("name, qtype", SIGNED_QUESTIONS, ids=[f"{n}-{t}" for n, t in SIGNED_QUESTIONS])
@pytest.mark.parametrize("python", COMPILERS, ids=COMPILER_IDS)
def test_as_knot_signed_with_do(knot, zone_paths, kind, python, name, qtype):
    """The same RRsets, each with its RRSIGs (glue below a delegation: none)."""
    if kind not in zone_paths:
        pytest.skip("ldns-signzone not installed")
    query = _query(name, qtype, do=True)
    want = _knot_answer(knot, kind, query)
    got = _ours(zone_paths[kind], python, query)
    assert _shape(got) == _shape(want, knot=True), f"\n--- knot\n{want}\n--- stormpy\n{got}"
    signed = {(r.name, r.covers) for r in got.additional if r.rdtype == dns.rdatatype.RRSIG}
    for rrset in got.additional:
        if rrset.rdtype != dns.rdatatype.RRSIG:
            glue = rrset.name.is_subdomain(dns.name.from_text("deleg." + ORIGIN))
            assert ((rrset.name, rrset.rdtype) in signed) != glue, rrset


@pytest.mark.parametrize("python", COMPILERS, ids=COMPILER_IDS)
def test_the_additional_section_is_left_out_whole_when_it_does_not_fit(knot, zone_paths, python):
    """Without EDNS (512 bytes) big's HTTPS fits and its target's AAAA records do not:
    Knot keeps the A RRset that fits, stormpy leaves the optional section out whole,
    as for MX. Neither sets TC; with room for it all both send it all."""
    plain = _query("big", "HTTPS", edns=False)
    want = _knot_answer(knot, "plain", plain, tcp=False)
    got = _ours(zone_paths["plain"], python, plain, tcp=False)
    assert _added(want) == {"many A"} and _added(got) == set()
    assert _shape(got)[:5] == _shape(want)[:5] and not got.flags & dns.flags.TC
    roomy = _query("big", "HTTPS")
    want = _knot_answer(knot, "plain", roomy, tcp=False)
    got = _ours(zone_paths["plain"], python, roomy, tcp=False)
    assert _added(got) == _added(want) == {"many A", "many AAAA"}
    assert len(got.find_rrset(got.additional, dns.name.from_text("many." + ORIGIN), dns.rdataclass.IN,
                              dns.rdatatype.AAAA)) == MANY


# --------------------------------------------------------------------------
# the compilers alike, and the served path
# --------------------------------------------------------------------------

@pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns")
@pytest.mark.parametrize("kind", ["plain", "nsec", "nsec3"])
def test_both_compilers_answer_alike(zone_paths, kind):
    if kind not in zone_paths:
        pytest.skip("ldns-signzone not installed")
    for name, qtype in QUESTIONS:
        for do in (False, True):
            for tcp, size in ((True, 4096), (False, 512), (False, 700), (False, 1232)):
                query = _query(name, qtype, do=do)
                python = _ours(zone_paths[kind], True, query, tcp, size)
                c = _ours(zone_paths[kind], False, query, tcp, size)
                assert _shape(c) == _shape(python), f"{name} {qtype} DO={do} tcp={tcp} {size}"


@pytest.mark.parametrize("name, qtype", [("svc", "HTTPS"), ("a1", "HTTPS"), ("big", "HTTPS")])
def test_a_served_answer_over_udp_as_knot(knot, zone_paths, stormpy_server, name, qtype):
    server = stormpy_server([(ORIGIN, zone_paths["plain"])], [])
    query = _query(name, qtype)
    want = _knot_answer(knot, "plain", query, tcp=False)
    wire = udp_query(query.to_wire(), server.addr, timeout=5.0)
    got = dns.message.from_wire(wire)
    assert _added(got) and _shape(got) == _shape(want, knot=True)
