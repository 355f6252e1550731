"""The query cases: one per behaviour and EDNS variant, with 0x20 case from a seed, and
the wire mutations for malformed queries."""
from __future__ import annotations

import dataclasses
import os
import random
import struct
from typing import Dict, List, Optional, Sequence

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


from .expect import behaviours
from .zones import DEFAULT_SEED


# --------------------------------------------------------------------------
# query cases
# --------------------------------------------------------------------------


@dataclasses.dataclass
class QueryCase:
    id: str                      # stable, readable pytest id
    behaviour: str               # behaviour name (shared by its variants)
    variant: str                 # noedns / edns / edns512 / raw / ...
    qname: str                   # as sent (0x20 case applied)
    qtype: int
    qclass: int = dns.rdataclass.IN
    edns: Optional[int] = None   # EDNS UDP payload; None = no OPT
    edns_version: int = 0
    do: bool = False
    rd: bool = False
    cd: bool = False
    opcode: int = 0
    raw: Optional[str] = None    # name of a wire mutation (see MUTATIONS)
    tcp: bool = False            # member of the TCP subset
    tcp_only: bool = False       # only meaningful over TCP (e.g. AXFR)
    timeout: float = 2.0         # UDP/TCP wait; short when no answer is expected
    expect: Dict = dataclasses.field(default_factory=dict)  # Knot-observed result (UDP)
    expect_tcp: Optional[Dict] = None  # Knot-observed result over TCP, if different

    def message(self, qid: int = 0) -> dns.message.Message:
        m = dns.message.make_query(
            self.qname, self.qtype, self.qclass,
            use_edns=(self.edns_version if self.edns is not None else False),
            payload=self.edns or 1232, want_dnssec=self.do)
        m.id = qid
        m.flags = (dns.flags.RD if self.rd else 0) | (dns.flags.CD if self.cd else 0)
        m.set_opcode(self.opcode)
        return m

    def wire(self, qid: int = 0) -> bytes:
        w = self.message(qid).to_wire()
        if self.raw:
            w = MUTATIONS[self.raw](w)
        return w

    def describe(self) -> str:
        s = (f"{self.id}: {self.qname} {dns.rdataclass.to_text(self.qclass)} "
             f"{dns.rdatatype.to_text(self.qtype)} opcode={self.opcode}")
        s += f" edns={'none' if self.edns is None else f'v{self.edns_version}/{self.edns}'}"
        s += "".join(f" {f}" for f, on in (("RD", self.rd), ("CD", self.cd), ("DO", self.do)) if on)
        if self.raw:
            s += f" raw={self.raw}"
        return s


# ---- wire mutations for malformed / unusual queries ----------------------

def _hdr(w: bytes, **kw) -> bytes:
    fields = dict(zip(("id", "fl", "qd", "an", "ns", "ar"), struct.unpack("!6H", w[:12])))
    fields.update(kw)
    return struct.pack("!6H", *(fields[k] for k in ("id", "fl", "qd", "an", "ns", "ar"))) + w[12:]


def _fl(w: bytes) -> int:
    return struct.unpack("!H", w[2:4])[0]


def _opt(payload=1232, ttl=0, rdata=b"", owner=b"\x00") -> bytes:
    return owner + struct.pack("!HHIH", dns.rdatatype.OPT, payload, ttl, len(rdata)) + rdata


def _question_end(w: bytes) -> int:
    i = 12
    for _ in range(128):  # bounded label walk (no compression in our queries)
        n = w[i]
        i += 1
        if n == 0:
            break
        i += n
    return i + 4


_A_RR = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + bytes([192, 0, 2, 9])

MUTATIONS = {
    # question count 0: header only
    "qd0": lambda w: _hdr(w[:12], qd=0, an=0, ns=0, ar=0),
    # question count 0 but an OPT record
    "qd0_opt": lambda w: _hdr(w[:12], qd=0, an=0, ns=0, ar=1) + _opt(),
    # two identical questions
    "qd2": lambda w: _hdr(w[:_question_end(w)], qd=2, ar=0) + w[12:_question_end(w)],
    # well-formed RR in the answer section of the query
    "an1": lambda w: _hdr(w[:_question_end(w)], an=1, ar=0) + _A_RR,
    # QR already set in the query
    "qr": lambda w: _hdr(w, fl=_fl(w) | 0x8000),
    # flag bits a client should not set
    "qflag_aa": lambda w: _hdr(w, fl=_fl(w) | 0x0400),
    "qflag_tc": lambda w: _hdr(w, fl=_fl(w) | 0x0200),
    "qflag_ad": lambda w: _hdr(w, fl=_fl(w) | 0x0020),
    "qflag_z": lambda w: _hdr(w, fl=_fl(w) | 0x0040),
    # two OPT records
    "two_opt": lambda w: _hdr(w[:_question_end(w)], ar=2) + _opt() + _opt(),
    # OPT with a non-root owner name (pointer to qname)
    "opt_nonroot": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(owner=b"\xc0\x0c"),
    # OPT in the answer section
    "opt_in_answer": lambda w: _hdr(w[:_question_end(w)], an=1, ar=0) + _opt(),
    # garbage after the last section
    "trailing": lambda w: w + b"\x01\x02\x03",
    # EDNS options
    "opt_nsid": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(rdata=struct.pack("!HH", 3, 0)),
    "opt_nsid_cookie": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(
        rdata=struct.pack("!HH", 10, 8) + b"12345678" + struct.pack("!HH", 3, 0)),
    "opt_nsid_do": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(ttl=0x8000,
                                                                    rdata=struct.pack("!HH", 3, 0)),
    "opt_nsid_512": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(payload=512,
                                                                     rdata=struct.pack("!HH", 3, 0)),
    "opt_unknown": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(rdata=struct.pack("!HH", 65001, 2) + b"ab"),
    "opt_cookie": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(rdata=struct.pack("!HH", 10, 8) + b"12345678"),
    "opt_badlen": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(rdata=struct.pack("!HH", 8, 9)),
    "opt_zbit": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(ttl=0x4000),
}


def randcase(name: str, rng: random.Random) -> str:
    """0x20: flip the case of every ASCII letter at random."""
    return "".join(c.upper() if c.isalpha() and rng.random() < 0.5 else c.lower() for c in name)



VARIANT_PAYLOAD = {"noedns": None, "edns": 1232, "edns512": 512, "edns4096": 4096,
                   "edns65535": 65535, "edns100": 100, "edns0": 0, "edns511": 511}


def generate_queries(seed: Optional[int] = None) -> List[QueryCase]:
    """All query cases, deterministic for a given seed (0x20 case only)."""
    if seed is None:
        seed = int(os.environ.get("DNSDIFF_SEED", DEFAULT_SEED))
    rng = random.Random(seed)
    cases: List[QueryCase] = []
    for name, qname, qtype, qclass, opt in behaviours():
        variants = opt.get("variants", ("noedns", "edns"))
        for v in variants:
            raw = opt.get("raw")
            payload = VARIANT_PAYLOAD.get(v)
            if v == "raw":
                payload = None  # mutations that need an OPT add it themselves
            expect = dict(opt.get("expect", {}))
            expect.update(opt.get(f"expect_{v}", {}))
            c = QueryCase(
                id=f"{name}-{v}", behaviour=name, variant=v,
                qname=randcase(qname, rng),
                qtype=dns.rdatatype.RdataType.make(qtype) if not isinstance(qtype, int) else qtype,
                qclass=dns.rdataclass.RdataClass.make(qclass) if not isinstance(qclass, int) else qclass,
                edns=payload, edns_version=opt.get("edns_version", 0), do=opt.get("do", False),
                rd=opt.get("rd", False), cd=opt.get("cd", False), opcode=opt.get("opcode", 0),
                raw=raw, tcp=opt.get("tcp", False), tcp_only=opt.get("tcp_only", False),
                timeout=opt.get("timeout", 2.0), expect=expect,
                expect_tcp=dict(opt["expect_tcp"]) if "expect_tcp" in opt else None)
            cases.append(c)
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    return cases


def udp_cases(cases: Sequence[QueryCase]) -> List[QueryCase]:
    return [c for c in cases if not c.tcp_only]


def tcp_cases(cases: Sequence[QueryCase]) -> List[QueryCase]:
    return [c for c in cases if c.tcp or c.tcp_only]


def tcp_expect(c: QueryCase) -> Dict:
    """Expected Knot result over TCP: no truncation ever."""
    if c.expect_tcp is not None:
        return c.expect_tcp
    e = dict(c.expect)
    if e.get("tc"):
        e = {k: v for k, v in e.items() if k not in ("an", "ns", "ar")}
        e["tc"] = False
    return e


