"""Differential test: stormpy vs Knot DNS 3.2 (reference) on the same zones.

Every generated query (tests/support/dnsdiff/) is sent over UDP, and a subset over
TCP, to both servers; the responses must not differ (see dnsdiff.compare for
what is compared).  Failures show the query, the difference list and both
responses.

Environment:
  DNSDIFF_SEED=<int>        0x20-case seed (default fixed; printed in failures)
  DNSDIFF_CANDIDATE=knot    use a second knotd as the candidate instead of
                            stormpy (self-check of the harness: must pass)

Test groups (select with -k):
  test_knot_expectations*   Knot alone vs. the behaviour notes (no stormpy needed)
  test_compare_*            unit checks of the comparison function (no servers)
  test_zones_*              zone files load in Knot
  test_udp / test_tcp       the differential test proper
  test_udp_strict           also additional section, EDNS payload size, options
  test_chaos_disabled       no --chaos-* flags vs Knot with version/identity ""
"""

from __future__ import annotations

import os
import random
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dns.flags  # noqa: E402
import dns.message  # noqa: E402
import dns.name  # noqa: E402
import dns.rcode  # noqa: E402
import dns.rdatatype  # noqa: E402
import dns.rrset  # noqa: E402

from support import dnsdiff  # noqa: E402
from support.client import tcp_query, udp_query  # noqa: E402
from support.servers import (KnotServer, knot_check_zone, knot_server, knotd_path,  # noqa: E402,F401
                             stormpy_server)

SEED = int(os.environ.get("DNSDIFF_SEED", dnsdiff.DEFAULT_SEED))
CASES = dnsdiff.generate_queries(SEED)
UDP_CASES = dnsdiff.udp_cases(CASES)
TCP_CASES = dnsdiff.tcp_cases(CASES)
CANDIDATE = os.environ.get("DNSDIFF_CANDIDATE", "stormpy")

_qid_rng = random.Random(SEED ^ 0x5EED)


def _qid() -> int:
    return _qid_rng.randrange(1, 65536)


def _ask(addr, case: dnsdiff.QueryCase, tcp: bool, qid: int):
    wire = case.wire(qid)
    if tcp:
        return tcp_query(wire, addr, timeout=max(case.timeout, 1.0) + 1.0)
    return udp_query(wire, addr, timeout=case.timeout)


def _id_problems(name, wire, qid):
    if wire is not None and len(wire) >= 2 and int.from_bytes(wire[:2], "big") != qid:
        return [f"{name}: response ID {int.from_bytes(wire[:2], 'big')} != query ID {qid}"]
    return []


def _text(msg, err, wire):
    if err:
        return err
    if msg is None:
        return "(no response)"
    return f"({len(wire)} bytes)\n{msg.to_text()}"


# --------------------------------------------------------------------------
# servers
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def knot(knot_server):
    return knot_server(dnsdiff.knot_zones(), version=dnsdiff.CHAOS_VERSION,
                       identity=dnsdiff.CHAOS_IDENTITY, nsid=dnsdiff.NSID)


@pytest.fixture(scope="module")
def candidate(knot_server, stormpy_server):
    if CANDIDATE == "knot":
        # second, independent knotd
        return knot_server(dnsdiff.knot_zones(), version=dnsdiff.CHAOS_VERSION,
                           identity=dnsdiff.CHAOS_IDENTITY, nsid=dnsdiff.NSID, tag="candidate")
    return stormpy_server(dnsdiff.stormpy_zones(),
                          ["--chaos-version", dnsdiff.CHAOS_VERSION,
                           "--chaos-identity", dnsdiff.CHAOS_IDENTITY, "--nsid", dnsdiff.NSID])


def _differential(knot, candidate, case, tcp, **cmp):
    qid = _qid()
    rw = _ask(knot.addr, case, tcp, qid)
    cw = _ask(candidate.addr, case, tcp, qid)
    rm, rerr = dnsdiff.parse(rw)
    cm, cerr = dnsdiff.parse(cw)
    diffs = _id_problems("knot", rw, qid) + _id_problems(CANDIDATE, cw, qid)
    if rerr:
        pytest.fail(f"reference (Knot) response unparseable: {rerr}")
    if cerr:
        diffs.append(f"{CANDIDATE}: {cerr}")
    else:
        diffs += dnsdiff.compare(rm, cm, ref_wire=rw, cand_wire=cw, cand_name=CANDIDATE, **cmp)
    if diffs:
        pytest.fail(
            f"[{'TCP' if tcp else 'UDP'}] {case.describe()}  (DNSDIFF_SEED={SEED})\n"
            + "differences:\n  - " + "\n  - ".join(diffs)
            + f"\n--- knot {_text(rm, rerr, rw)}\n--- {CANDIDATE} {_text(cm, cerr, cw)}",
            pytrace=False)


# --------------------------------------------------------------------------
# the differential test
# --------------------------------------------------------------------------

@pytest.mark.parametrize("case", UDP_CASES, ids=[c.id for c in UDP_CASES])
def test_udp(knot, candidate, case):
    _differential(knot, candidate, case, tcp=False)


@pytest.mark.parametrize("case", TCP_CASES, ids=[c.id for c in TCP_CASES])
def test_tcp(knot, candidate, case):
    _differential(knot, candidate, case, tcp=True)


STRICT_CASES = [c for c in UDP_CASES if c.variant in ("edns", "raw", "edns512")]


@pytest.mark.parametrize("case", STRICT_CASES, ids=[c.id for c in STRICT_CASES])
def test_udp_strict(knot, candidate, case):
    """Beyond the brief: additional section (glue), EDNS payload/options (EDE, NSID)."""
    if case.behaviour in ADDITIONAL_LEFT_OUT_WHOLE and CANDIDATE != "knot":
        _differential(knot, candidate, case, tcp=False)
        answer, _ = dnsdiff.parse(_ask(candidate.addr, case, False, _qid()))
        assert not answer.additional and not answer.flags & dns.flags.TC, answer
        return
    _differential(knot, candidate, case, tcp=False, check_additional=True, strict_edns=True)


# A positive answer whose additional records do not all fit: Knot keeps as many as
# fit, stormpy leaves the optional section out whole (both allowed by RFC 1035 and
# RFC 9471, which only binds referral glue). Everything else still matches.
ADDITIONAL_LEFT_OUT_WHOLE = {"size_additional_overflow", "any_mx_node"}


CHAOS_CASES = [c for c in UDP_CASES if c.behaviour.startswith("chaos_")]


def test_chaos_disabled(knot_server, stormpy_server):
    """stormpy without --chaos-* vs Knot with version/identity disabled ("")."""
    k = knot_server(dnsdiff.knot_zones(), version="", identity="")
    if CANDIDATE == "knot":
        s = knot_server(dnsdiff.knot_zones(), version="", identity="", tag="candidate")
    else:
        s = stormpy_server(dnsdiff.stormpy_zones(), [])
    problems = []
    for case in CHAOS_CASES:
        qid = _qid()
        rw, cw = _ask(k.addr, case, False, qid), _ask(s.addr, case, False, qid)
        rm, _ = dnsdiff.parse(rw)
        cm, cerr = dnsdiff.parse(cw)
        d = [cerr] if cerr else dnsdiff.compare(rm, cm, ref_wire=rw, cand_wire=cw, cand_name=CANDIDATE)
        if d:
            problems.append(f"{case.describe()}:\n    " + "\n    ".join(d))
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------
# reference half: Knot alone against the recorded behaviour
# --------------------------------------------------------------------------

@pytest.mark.parametrize("case", UDP_CASES, ids=[c.id for c in UDP_CASES])
def test_knot_expectations_udp(knot, case):
    qid = _qid()
    w = _ask(knot.addr, case, False, qid)
    m, err = dnsdiff.parse(w)
    probs = dnsdiff.check_expect(m, case.expect, err) + _id_problems("knot", w, qid)
    if m is not None and case.raw is None:
        # generic invariants for well-formed queries
        if m.question and m.question[0].name.to_text() != dns.name.from_text(case.qname).to_text():
            probs.append("question not echoed verbatim")
        if bool(m.flags & dns.flags.RD) != case.rd:
            probs.append("RD not copied")
        if m.flags & dns.flags.CD:
            probs.append("CD set (Knot never sets CD)")
        if (m.edns >= 0) != (case.edns is not None):
            probs.append("OPT presence does not follow the query")
    assert not probs, f"{case.describe()}: {probs}\n{_text(m, err, w)}"


@pytest.mark.parametrize("case", TCP_CASES, ids=[c.id for c in TCP_CASES])
def test_knot_expectations_tcp(knot, case):
    qid = _qid()
    w = _ask(knot.addr, case, True, qid)
    m, err = dnsdiff.parse(w)
    probs = dnsdiff.check_expect(m, dnsdiff.tcp_expect(case), err)
    assert not probs, f"[TCP] {case.describe()}: {probs}\n{_text(m, err, w)}"


def test_knot_negative_ttl(knot):
    """Negative answers carry the SOA with TTL min(SOA TTL, MINIMUM)."""
    for qname, ttl in (("nx.example.com.", 300), ("nx.example.net.", 60), ("mx.example.net.", 60)):
        qtype = "A" if qname.startswith("nx") else "TXT"
        w = udp_query(dns.message.make_query(qname, qtype).to_wire(), knot.addr)
        m = dns.message.from_wire(w)
        assert [r.ttl for r in m.authority] == [ttl], (qname, m.to_text())


def test_knot_chaos_strings(knot):
    for qname, want in (("version.bind.", dnsdiff.CHAOS_VERSION), ("id.server.", dnsdiff.CHAOS_IDENTITY)):
        w = udp_query(dns.message.make_query(qname, "TXT", "CH").to_wire(), knot.addr)
        m = dns.message.from_wire(w)
        assert m.answer and m.answer[0][0].strings == (want.encode(),), m.to_text()


# --------------------------------------------------------------------------
# zones
# --------------------------------------------------------------------------

@pytest.mark.parametrize("origin,path", dnsdiff.knot_zones(), ids=[o for o, _ in dnsdiff.knot_zones()])
def test_zones_pass_knot_check(origin, path):
    if knotd_path() is None:
        pytest.skip("Knot not installed")
    ok, out = knot_check_zone(origin, path)
    assert ok, out


def test_zones_generate_expansion_in_sync():
    """gen.example.expanded.zone must hold exactly the records gen.example.zone's
    $GENERATE lines describe (checked with an independent tiny expander that
    supports only the forms used in that file)."""
    import re
    import dns.zone
    origin = "gen.example."
    src = open(os.path.join(dnsdiff.ZONES_DIR, "gen.example.zone")).read()
    out = []
    for line in src.splitlines():
        if not line.startswith("$GENERATE"):
            out.append(line)
            continue
        _, rng, rest = line.split(None, 2)
        lo, hi, step = re.fullmatch(r"(\d+)-(\d+)(?:/(\d+))?", rng).groups()
        for i in range(int(lo), int(hi) + 1, int(step or 1)):
            def sub(mo, i=i):
                off, width, base = (mo.group(1) or "0"), (mo.group(2) or "0"), (mo.group(3) or "d")
                v = i + int(off)
                return format(v, {"d": "d", "x": "x", "X": "X", "o": "o"}[base]).zfill(int(width))
            out.append(re.sub(r"\$(?:\{(-?\d+)(?:,(\d+)(?:,([dxXo]))?)?\})?", sub, rest))
    gen = dns.zone.from_text("\n".join(out) + "\n", origin, relativize=False)
    exp = dns.zone.from_file(os.path.join(dnsdiff.ZONES_DIR, "gen.example.expanded.zone"), origin,
                             relativize=False)

    def records(z):
        return sorted((n.to_text(), ttl, dns.rdatatype.to_text(rd.rdtype), rd.to_text())
                      for n, ttl, rd in z.iterate_rdatas())
    assert records(gen) == records(exp)


# --------------------------------------------------------------------------
# unit checks of the comparison function (no servers)
# --------------------------------------------------------------------------

def _resp(qname="www.example.com.", qtype="A", rcode=0, flags=("AA",), answer=(), authority=(),
          additional=(), edns=None, do=False, payload=1232, options=None, question=True):
    q = dns.message.make_query(qname, qtype, use_edns=edns if edns is not None else False,
                               payload=payload, want_dnssec=do, options=options)
    r = dns.message.make_response(q)
    if edns is not None:
        r.use_edns(edns, ednsflags=dns.flags.DO if do else 0, payload=payload, options=options)
    r.flags = dns.flags.QR
    for f in flags:
        r.flags |= dns.flags.Flag[f]
    r.set_rcode(rcode)
    for sec, rrs in ((r.answer, answer), (r.authority, authority), (r.additional, additional)):
        for t in rrs:
            sec.append(dns.rrset.from_text(*t))
    if not question:
        r.question = []
    return r


WWW = ("www.example.com.", 300, "IN", "A", "192.0.2.80", "192.0.2.81")
SOA = ("example.com.", 300, "IN", "SOA", "ns1.example.com. hostmaster.example.com. 1 2 3 4 300")


def test_compare_identical():
    assert dnsdiff.compare(_resp(answer=[WWW]), _resp(answer=[WWW])) == []


def test_compare_none_handling():
    assert dnsdiff.compare(None, None) == []
    d = dnsdiff.compare(_resp(), None)
    assert len(d) == 1 and "no response from stormpy" in d[0]
    d = dnsdiff.compare(None, _resp())
    assert "no response from knot" in d[0]


def test_compare_rcode_and_extended_rcode():
    d = dnsdiff.compare(_resp(rcode=3, authority=[SOA]), _resp(rcode=0, authority=[SOA]))
    assert d == ["rcode: knot=NXDOMAIN stormpy=NOERROR"]
    a = _resp(edns=0, rcode=dns.rcode.BADVERS, flags=())
    b = _resp(edns=0, rcode=dns.rcode.NOERROR, flags=())
    assert a.rcode() == dns.rcode.BADVERS
    assert dnsdiff.compare(a, b) == ["rcode: knot=BADVERS stormpy=NOERROR"]


def test_compare_flags_ra_and_cd_ignored():
    a, b = _resp(answer=[WWW]), _resp(answer=[WWW], flags=("AA", "RA"))
    assert dnsdiff.compare(a, b) == []
    b = _resp(answer=[WWW], flags=("RD", "CD"))
    d = dnsdiff.compare(a, b)
    assert d == ["flag AA: knot=1 stormpy=0", "flag RD: knot=0 stormpy=1"]


def test_compare_rrsets_case_insensitive_ttl_rdata():
    upper = ("WWW.Example.COM.", 300, "IN", "A", "192.0.2.81", "192.0.2.80")  # other order + case
    assert dnsdiff.compare(_resp(answer=[WWW]), _resp(answer=[upper])) == []
    ttl = ("www.example.com.", 301, "IN", "A", "192.0.2.80", "192.0.2.81")
    assert dnsdiff.compare(_resp(answer=[WWW]), _resp(answer=[ttl])) == [
        "answer: TTL of www.example.com. IN A: knot=300 stormpy=301"]
    one = ("www.example.com.", 300, "IN", "A", "192.0.2.80", "192.0.2.99")
    d = dnsdiff.compare(_resp(answer=[WWW]), _resp(answer=[one]))
    assert len(d) == 1 and "192.0.2.81" in d[0] and "192.0.2.99" in d[0]
    # names inside rdata compare case-insensitively too (0x20 + compression)
    c1 = ("alias.example.com.", 3600, "IN", "CNAME", "www.example.com.")
    c2 = ("ALIAS.example.com.", 3600, "IN", "CNAME", "www.EXAMPLE.com.")
    assert dnsdiff.compare(_resp(answer=[c1]), _resp(answer=[c2])) == []
    s1 = ("_sip._tcp.example.com.", 3600, "IN", "SRV", "10 60 5060 sip.example.com.")
    s2 = ("_sip._tcp.example.com.", 3600, "IN", "SRV", "10 60 5060 SIP.example.com.")
    assert dnsdiff.compare(_resp(answer=[s1]), _resp(answer=[s2])) == []
    # but TXT content is case-sensitive
    t1 = ("example.com.", 3600, "IN", "TXT", '"abc"')
    t2 = ("example.com.", 3600, "IN", "TXT", '"ABC"')
    assert len(dnsdiff.compare(_resp(answer=[t1]), _resp(answer=[t2]))) == 1


def test_compare_missing_extra_rrsets_and_sections():
    d = dnsdiff.compare(_resp(answer=[WWW]), _resp(answer=[]))
    assert d and d[0].startswith("answer: RRset missing from stormpy: www.example.com. IN A")
    d = dnsdiff.compare(_resp(authority=[SOA]), _resp(answer=[WWW]))
    assert any(x.startswith("answer: extra RRset") for x in d)
    assert any(x.startswith("authority: RRset missing") for x in d)
    # NS in authority of a positive answer is a difference
    ns = ("example.com.", 3600, "IN", "NS", "ns1.example.com.")
    d = dnsdiff.compare(_resp(answer=[WWW]), _resp(answer=[WWW], authority=[ns]))
    assert d == [d[0]] and "authority: extra RRset" in d[0]


def test_compare_additional_only_when_asked():
    glue = ("ns1.example.com.", 3600, "IN", "A", "192.0.2.53")
    a, b = _resp(answer=[WWW], additional=[glue]), _resp(answer=[WWW])
    assert dnsdiff.compare(a, b) == []
    assert len(dnsdiff.compare(a, b, check_additional=True)) == 1


def test_compare_question_echo():
    d = dnsdiff.compare(_resp(answer=[WWW]), _resp(answer=[WWW], question=False))
    assert any(x.startswith("question count: knot=1 stormpy=0") for x in d)
    d = dnsdiff.compare(_resp("wWw.example.com.", answer=[WWW]), _resp("www.example.com.", answer=[WWW]))
    assert d and "letter case" in d[0]


def test_compare_edns():
    assert dnsdiff.compare(_resp(edns=0), _resp(edns=0, payload=4096)) == []
    d = dnsdiff.compare(_resp(edns=0), _resp())
    assert d == ["EDNS OPT present: knot=True stormpy=False"]
    d = dnsdiff.compare(_resp(edns=0, do=True), _resp(edns=0))
    assert d == ["EDNS DO bit: knot=1 stormpy=0"]
    d = dnsdiff.compare(_resp(edns=0), _resp(edns=0, payload=4096), strict_edns=True)
    assert d == ["EDNS UDP payload size: knot=1232 stormpy=4096"]
    import dns.edns
    ede = dns.edns.EDEOption(dns.edns.EDECode.NOT_AUTHORITATIVE)
    d = dnsdiff.compare(_resp(edns=0, options=[ede]), _resp(edns=0), strict_edns=True)
    assert len(d) == 1 and d[0].startswith("EDNS options")
    assert dnsdiff.compare(_resp(edns=0, options=[ede]), _resp(edns=0)) == []


def test_compare_truncated_only_header_and_edns():
    big = ("big.example.com.", 3600, "IN", "TXT", '"a"', '"b"')
    part = ("big.example.com.", 3600, "IN", "TXT", '"a"')
    a = _resp("big.example.com.", "TXT", flags=("AA", "TC"))
    b = _resp("big.example.com.", "TXT", flags=("AA", "TC"), answer=[part])
    assert dnsdiff.compare(a, b) == []
    c = _resp("big.example.com.", "TXT", flags=("AA",), answer=[big])
    assert dnsdiff.compare(a, c) == ["flag TC: knot=1 stormpy=0"]


def test_compare_duplicate_rr_detected_by_counts():
    a = _resp(answer=[WWW])
    b = _resp(answer=[WWW])
    wa = a.to_wire()
    # duplicate the last RR of b's answer by hand
    wb = bytearray(b.to_wire())
    rr = wb[-16:]
    wb = bytes(wb[:6]) + (3).to_bytes(2, "big") + bytes(wb[8:]) + bytes(rr)
    mb = dns.message.from_wire(wb)
    d = dnsdiff.compare(a, mb, ref_wire=wa, cand_wire=wb)
    assert d == ["header ancount: knot=2 stormpy=3 (duplicate RRs?)"]


def test_compare_unparseable():
    m, err = dnsdiff.parse(b"\x00\x01\x80")
    assert m is None and err.startswith("unparseable")
    assert dnsdiff.parse(None) == (None, None)


def test_query_generator_properties():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert dnsdiff.generate_queries(SEED)[5].qname == CASES[5].qname  # deterministic
    behaviours = {c.behaviour for c in CASES}
    # every (non-raw) behaviour is present with and without EDNS unless restricted
    for b in behaviours:
        vs = {c.variant for c in CASES if c.behaviour == b}
        assert vs, b
    assert any(c.qname != c.qname.lower() for c in CASES)  # 0x20 applied
    for c in CASES:
        c.wire(1234)  # all build
