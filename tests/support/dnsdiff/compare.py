"""Responses parsed and compared: the readable list of differences between a reference
and a candidate, and a response checked against an expectation."""
from __future__ import annotations

import struct
from typing import Dict, List, Optional, Tuple

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset


# --------------------------------------------------------------------------
# response parsing and comparison
# --------------------------------------------------------------------------

def parse(wire: Optional[bytes]) -> Tuple[Optional[dns.message.Message], Optional[str]]:
    """(message, None) | (None, None) for no response | (None, error text)."""
    if wire is None:
        return None, None
    try:
        return dns.message.from_wire(wire, ignore_trailing=False), None
    except Exception as e:  # any parse failure is a reportable difference
        return None, f"unparseable response ({type(e).__name__}: {e}); {len(wire)} bytes: {wire[:64].hex()}"


def header_counts(wire: bytes) -> Tuple[int, int, int, int]:
    return struct.unpack("!4H", wire[4:12])


def _slots(cls) -> List[str]:
    out = []
    for k in cls.__mro__:
        s = k.__dict__.get("__slots__", ())
        if isinstance(s, str):
            s = (s,)
        out.extend(x for x in s if x not in ("rdclass", "rdtype", "rdcomment"))
    return out


def rdata_key(rd: dns.rdata.Rdata) -> bytes:
    """Uncompressed wire form of rdata with every embedded domain name lowercased
    (DNS names compare case-insensitively, wherever they appear)."""
    changes = {}
    for slot in _slots(type(rd)):
        v = getattr(rd, slot, None)
        if isinstance(v, dns.name.Name):
            changes[slot] = v.canonicalize()
    if changes:
        try:
            rd = rd.replace(**changes)
        except Exception:
            pass
    return rd.to_wire()


RRKey = Tuple[dns.name.Name, int, int, int]


def rrset_map(section) -> Dict[RRKey, Tuple[int, Dict[bytes, str]]]:
    """{(owner lowercased, class, type, covers): (ttl, {rdata_key: text})}.
    RRs of one RRset split across several entries (e.g. not adjacent) are merged."""
    out: Dict[RRKey, Tuple[int, Dict[bytes, str]]] = {}
    for rrset in section:
        key = (rrset.name.canonicalize(), rrset.rdclass, rrset.rdtype, rrset.covers)
        ttl, rds = out.get(key, (rrset.ttl, {}))
        ttl = min(ttl, rrset.ttl)
        for rd in rrset:
            rds[rdata_key(rd)] = rd.to_text()
        out[key] = (ttl, rds)
    return out


def _keytext(k: RRKey) -> str:
    name, rdclass, rdtype, covers = k
    t = dns.rdatatype.to_text(rdtype)
    if covers:
        t += f"({dns.rdatatype.to_text(covers)})"
    return f"{name} {dns.rdataclass.to_text(rdclass)} {t}"


def _fmt_rrset(k: RRKey, ttl: int, rds: Dict[bytes, str], limit=4) -> str:
    txt = sorted(rds.values())
    more = f" ... (+{len(txt) - limit})" if len(txt) > limit else ""
    return f"{_keytext(k)} ttl={ttl} [{'; '.join(t[:80] for t in txt[:limit])}{more}]"


def compare_section(sec: str, ref, cand, ref_name="knot", cand_name="stormpy") -> List[str]:
    diffs = []
    a, b = rrset_map(ref), rrset_map(cand)
    for k in sorted(set(a) - set(b), key=str):
        diffs.append(f"{sec}: RRset missing from {cand_name}: {_fmt_rrset(k, *a[k])}")
    for k in sorted(set(b) - set(a), key=str):
        diffs.append(f"{sec}: extra RRset in {cand_name}: {_fmt_rrset(k, *b[k])}")
    for k in sorted(set(a) & set(b), key=str):
        (ta, ra), (tb, rb) = a[k], b[k]
        if ta != tb:
            diffs.append(f"{sec}: TTL of {_keytext(k)}: {ref_name}={ta} {cand_name}={tb}")
        if set(ra) != set(rb):
            miss = sorted(ra[x] for x in set(ra) - set(rb))
            extra = sorted(rb[x] for x in set(rb) - set(ra))
            diffs.append(f"{sec}: rdata of {_keytext(k)} differ: missing in {cand_name}={miss} "
                         f"extra in {cand_name}={extra}")
    return diffs


# CD is not compared: Knot DNS clears it, stormpy copies it as RFC 4035 section 3.1.6
# requires (test_serve.py::test_cd_bit_is_copied checks that).
FLAGS_COMPARED = (("QR", dns.flags.QR), ("AA", dns.flags.AA), ("TC", dns.flags.TC),
                  ("RD", dns.flags.RD))


def _q_text(q) -> str:
    return f"{q.name} {dns.rdataclass.to_text(q.rdclass)} {dns.rdatatype.to_text(q.rdtype)}"


def _opts(m: dns.message.Message) -> List[Tuple[int, bytes]]:
    return sorted((int(o.otype), o.to_wire()) for o in (m.options or []))


def compare(ref: Optional[dns.message.Message], cand: Optional[dns.message.Message], *,
            ref_wire: Optional[bytes] = None, cand_wire: Optional[bytes] = None,
            check_additional: bool = False, strict_edns: bool = False,
            ref_name: str = "knot", cand_name: str = "stormpy") -> List[str]:
    """Differences between a reference response and a candidate response.
    None means "no response".  An empty list means equivalent."""
    if ref is None and cand is None:
        return []
    if ref is None or cand is None:
        who, other, om = (ref_name, cand_name, cand) if ref is None else (cand_name, ref_name, ref)
        return [f"no response from {who}; {other} answered rcode={dns.rcode.to_text(om.rcode())} "
                f"flags={dns.flags.to_text(om.flags)}"]
    d: List[str] = []
    if ref.opcode() != cand.opcode():
        d.append(f"opcode: {ref_name}={dns.opcode.to_text(ref.opcode())} "
                 f"{cand_name}={dns.opcode.to_text(cand.opcode())}")
    if ref.rcode() != cand.rcode():
        d.append(f"rcode: {ref_name}={dns.rcode.to_text(ref.rcode())} "
                 f"{cand_name}={dns.rcode.to_text(cand.rcode())}")
    for fname, bit in FLAGS_COMPARED:
        fa, fb = bool(ref.flags & bit), bool(cand.flags & bit)
        if fa != fb:
            d.append(f"flag {fname}: {ref_name}={int(fa)} {cand_name}={int(fb)}")
    # question echo: count, then exact (case-sensitive) content
    qa, qb = [_q_text(q) for q in ref.question], [_q_text(q) for q in cand.question]
    if len(qa) != len(qb):
        d.append(f"question count: {ref_name}={len(qa)} {cand_name}={len(qb)} "
                 f"({ref_name}={qa} {cand_name}={qb})")
    elif qa != qb:
        if [x.lower() for x in qa] == [x.lower() for x in qb]:
            d.append(f"question not echoed with the same letter case: {ref_name}={qa} {cand_name}={qb}")
        else:
            d.append(f"question differs: {ref_name}={qa} {cand_name}={qb}")
    # EDNS
    ea, eb = ref.edns >= 0, cand.edns >= 0
    if ea != eb:
        d.append(f"EDNS OPT present: {ref_name}={ea} {cand_name}={eb}")
    elif ea:
        if ref.edns != cand.edns:
            d.append(f"EDNS version: {ref_name}={ref.edns} {cand_name}={cand.edns}")
        da, db = bool(ref.ednsflags & dns.flags.DO), bool(cand.ednsflags & dns.flags.DO)
        if da != db:
            d.append(f"EDNS DO bit: {ref_name}={int(da)} {cand_name}={int(db)}")
        if strict_edns:
            if ref.payload != cand.payload:
                d.append(f"EDNS UDP payload size: {ref_name}={ref.payload} {cand_name}={cand.payload}")
            za, zb = ref.ednsflags & ~dns.flags.DO & 0xFFFF, cand.ednsflags & ~dns.flags.DO & 0xFFFF
            if za != zb:
                d.append(f"EDNS Z flags: {ref_name}={za:#x} {cand_name}={zb:#x}")
            oa, ob = _opts(ref), _opts(cand)
            if oa != ob:
                d.append(f"EDNS options: {ref_name}={oa} {cand_name}={ob}")
    # sections: skipped when either is truncated (partial/empty sections allowed)
    if (ref.flags | cand.flags) & dns.flags.TC:
        return d
    d += compare_section("answer", ref.answer, cand.answer, ref_name, cand_name)
    d += compare_section("authority", ref.authority, cand.authority, ref_name, cand_name)
    if check_additional:
        d += compare_section("additional", ref.additional, cand.additional, ref_name, cand_name)
    # duplicate RRs are merged by the parser: catch them via header counts
    if ref_wire is not None and cand_wire is not None and len(ref_wire) >= 12 and len(cand_wire) >= 12:
        ca, cb = header_counts(ref_wire), header_counts(cand_wire)
        names = ("qdcount", "ancount", "nscount", "arcount") if check_additional else ("qdcount", "ancount", "nscount")
        for i, nm in enumerate(names):
            if ca[i] != cb[i] and not any(x.startswith(("answer", "authority", "additional", "question")) for x in d):
                d.append(f"header {nm}: {ref_name}={ca[i]} {cand_name}={cb[i]} (duplicate RRs?)")
    return d


# --------------------------------------------------------------------------
# expectations check (for the reference server alone)
# --------------------------------------------------------------------------

def rr_count(section) -> int:
    return sum(len(r) for r in section)


def check_expect(msg: Optional[dns.message.Message], expect: Dict, err: Optional[str] = None) -> List[str]:
    """Compare one response with an expectation dict from the behaviour table."""
    if err:
        return [err]
    if expect.get("noresp"):
        return [] if msg is None else [f"expected no response, got rcode={dns.rcode.to_text(msg.rcode())}"]
    if msg is None:
        return ["no response"]
    out = []
    if "rcode" in expect and dns.rcode.to_text(msg.rcode()) != expect["rcode"]:
        out.append(f"rcode {dns.rcode.to_text(msg.rcode())} != expected {expect['rcode']}")
    for key, bit in (("aa", dns.flags.AA), ("tc", dns.flags.TC)):
        if key in expect and bool(msg.flags & bit) != expect[key]:
            out.append(f"{key.upper()}={int(bool(msg.flags & bit))} expected {int(expect[key])}")
    for key, sec in (("an", msg.answer), ("ns", msg.authority), ("ar", msg.additional)):
        if key in expect and rr_count(sec) != expect[key]:
            out.append(f"{key}count={rr_count(sec)} expected {expect[key]}")
    if "qd" in expect and len(msg.question) != expect["qd"]:
        out.append(f"qdcount={len(msg.question)} expected {expect['qd']}")
    return out

