"""Differential DNS testing: a query-set generator and a response comparator.

(a) generate_queries(seed) -> [QueryCase]: every behaviour recorded for Knot 3.2
    (see tests/zones/ and the findings notes), each with and without EDNS
    (payload 1232) and, for size-sensitive behaviours, EDNS payload 512; the
    query name gets random 0x20 case (seeded, reproducible).
    QueryCase.expect holds what Knot 3.2.6 was observed to answer, so the
    reference half can be sanity-checked alone (test_knot_expectations).

(b) compare(ref, cand) -> [str]: readable list of differences between two
    dns.message.Message responses (or None = no response):
      - opcode, rcode (incl. extended rcode from OPT)
      - flags QR, AA, TC, RD, CD (RA ignored)
      - question echoed (count and exact bytes incl. 0x20 case)
      - EDNS presence, version, DO bit (strict_edns: also payload size and options)
      - unless TC is set in either: answer and authority as sets of RRsets
        (owner names case-insensitive, TTLs compared, rdata compared with
        embedded domain names case-insensitive); optional additional section.
"""

from __future__ import annotations

import dataclasses
import os
import random
import struct
from typing import Dict, List, Optional, Sequence, Tuple

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

ZONES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zones")

# Zones for the differential test: (origin, file for Knot, file for stormpy).
# gen.example.zone uses $GENERATE, which Knot's parser lacks; Knot gets a
# hand-expanded copy with identical data.
ZONES = [
    ("example.com.", "example.com.zone", "example.com.zone"),
    ("example.net.", "example.net.zone", "example.net.zone"),
    ("gen.example.", "gen.example.expanded.zone", "gen.example.zone"),
]


def knot_zones() -> List[Tuple[str, str]]:
    return [(o, os.path.join(ZONES_DIR, k)) for o, k, _ in ZONES]


def stormpy_zones() -> List[Tuple[str, str]]:
    return [(o, os.path.join(ZONES_DIR, s)) for o, _, s in ZONES]


DEFAULT_SEED = 20240101
CHAOS_VERSION = "stormpy-difftest-version 1.0"
CHAOS_IDENTITY = "stormpy-difftest-identity"

Z = "example.com."
N = "example.net."
G = "gen.example."

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
    "opt_unknown": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(rdata=struct.pack("!HH", 65001, 2) + b"ab"),
    "opt_cookie": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(rdata=struct.pack("!HH", 10, 8) + b"12345678"),
    "opt_badlen": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(rdata=struct.pack("!HH", 8, 9)),
    "opt_zbit": lambda w: _hdr(w[:_question_end(w)], ar=1) + _opt(ttl=0x4000),
}


def randcase(name: str, rng: random.Random) -> str:
    """0x20: flip the case of every ASCII letter at random."""
    return "".join(c.upper() if c.isalpha() and rng.random() < 0.5 else c.lower() for c in name)


# ---- expectations (as observed from Knot 3.2.6) ---------------------------

def E(rcode="NOERROR", aa=True, an=None, ns=None, ar=None, tc=False, **kw) -> Dict:
    d = dict(rcode=rcode, aa=aa, tc=tc)
    if an is not None:
        d["an"] = an
    if ns is not None:
        d["ns"] = ns
    if ar is not None:
        d["ar"] = ar
    d.update(kw)
    return d


def POS(an, ar=0):
    return E(an=an, ns=0, ar=ar)


NODATA = E(an=0, ns=1, ar=0)
NXD = E("NXDOMAIN", an=0, ns=1, ar=0)
REFUSED = E("REFUSED", aa=False, an=0, ns=0, ar=0)
NOTIMP = E("NOTIMP", aa=False, an=0, ns=0, ar=0)
NOTAUTH = E("NOTAUTH", aa=False, an=0, ns=0, ar=0)
FORMERR = E("FORMERR", aa=False, an=0, ns=0, ar=0)
BADVERS = E("BADVERS", aa=False, an=0, ns=0, ar=0)
CHAOS_OK = E(aa=False, an=1, ns=0, ar=0)
TRUNC = E(tc=True, an=0, ns=0, ar=0)          # TC with empty sections
NORESP = {"noresp": True}


def REFERRAL(ns, ar):
    return E(aa=False, an=0, ns=ns, ar=ar)


# Behaviour table.  Each entry: (behaviour, qname, qtype, qclass, options)
# options: variants (default noedns+edns), expect, per-variant expect overrides
# (expect_<variant>), rd/cd/do/opcode/edns_version/raw, tcp (in TCP subset),
# tcp_only, timeout.
def behaviours() -> List[Tuple[str, str, object, object, Dict]]:
    B = []

    def b(name, qname, qtype="A", qclass="IN", **opt):
        B.append((name, qname, qtype, qclass, opt))

    size = ("noedns", "edns", "edns512")
    # --- positive answers, additional-section processing ---
    b("pos_a", "www." + Z, expect=POS(2), tcp=True)
    b("pos_aaaa", "www." + Z, "AAAA", expect=POS(1))
    b("pos_mx_apex_glue", Z, "MX", expect=POS(2, ar=2), tcp=True)
    b("pos_ns_apex_glue", Z, "NS", expect=POS(2, ar=3))
    b("pos_soa_apex", Z, "SOA", expect=POS(1))
    b("pos_txt_apex", Z, "TXT", expect=POS(1))
    b("pos_caa_apex", Z, "CAA", expect=POS(2))
    b("pos_srv_glue", "_sip._tcp." + Z, "SRV", expect=POS(2, ar=1))
    b("pos_naptr", "naptr." + Z, "NAPTR", expect=POS(1))
    b("pos_ptr", "ptr." + Z, "PTR", expect=POS(1))
    b("pos_hinfo", "www." + Z, "HINFO", expect=POS(1))
    b("pos_sshfp", "www." + Z, "SSHFP", expect=POS(1))
    b("pos_tlsa", "_443._tcp.www." + Z, "TLSA", expect=POS(1))
    b("pos_unknown_type", "opaque." + Z, 65280, expect=POS(1))
    b("pos_mixedcase_owner", "mixedcase." + Z, expect=POS(1))
    b("pos_include_origin", "inc." + Z, expect=POS(1))
    b("pos_include_child", "one.inc." + Z, expect=POS(1))
    b("pos_include_ttl", "two.inc." + Z, "TXT", expect=POS(1))
    b("pos_ttl_after_include", "late." + Z, expect=POS(1))
    b("pos_second_zone", "www." + N, expect=POS(1))
    b("pos_glue_ns_target_in_other_zone", "mx." + N, expect=POS(1))
    # --- $GENERATE zone ---
    b("gen_plain_first", "host1." + G, expect=POS(1))
    b("gen_plain_last", "host5." + G, expect=POS(1))
    b("gen_plain_past_range", "host6." + G, expect=NXD)
    b("gen_step_hit", "odd5." + G, "TXT", expect=POS(1))
    b("gen_step_miss", "odd3." + G, "TXT", expect=NXD)
    b("gen_width_cname", "pad011." + G, expect=POS(2))
    b("gen_hex", "hex000a." + G, "AAAA", expect=POS(1))
    b("gen_ttl_class", "ttl2." + G, expect=POS(1))
    # --- ANY (RFC 8482: Knot returns the node's lowest-type RRset) ---
    b("any_apex", Z, "ANY", expect=POS(1), tcp=True)
    b("any_www", "www." + Z, "ANY", expect=POS(2), tcp=True)
    b("any_mx_node", "manymx." + Z, "ANY", variants=("edns",), expect=E(an=20, ns=0))
    b("any_cname", "alias." + Z, "ANY", expect=POS(1))
    b("any_delegation", "sub." + Z, "ANY", expect=REFERRAL(2, 2))
    b("any_wildcard", "x.wild." + Z, "ANY", expect=POS(1))
    b("any_nxdomain", "nx." + Z, "ANY", expect=NXD)
    b("any_ent", "ent." + Z, "ANY", expect=NODATA)
    b("any_second_zone_apex", N, "ANY", expect=E(an=2, ns=0))
    # --- sizes / truncation ---
    b("size_big_txt", "big." + Z, "TXT", variants=size, tcp=True,
      expect=POS(6), expect_noedns=TRUNC, expect_edns512=TRUNC)
    b("size_huge_txt", "huge." + Z, "TXT", variants=size + ("edns4096",), tcp=True,
      expect=TRUNC, expect_tcp=POS(14))
    b("size_mid_txt_small_payload", "mid." + Z, "TXT", variants=("edns100", "edns0", "edns511", "noedns"),
      expect=POS(1))
    b("size_additional_overflow", "manymx." + Z, "MX", variants=size, tcp=True,
      expect=E(an=20, ns=0), expect_noedns=E(an=20, ns=0, ar=2), expect_edns=E(an=20, ns=0, ar=33),
      expect_edns512=E(an=20, ns=0, ar=2), expect_tcp=POS(20, ar=40))
    b("size_referral_glue_overflow", "x.bigdeleg." + Z, variants=size, tcp=True,
      expect=E(aa=False, tc=True, an=0, ns=20, ar=4), expect_edns=E(aa=False, tc=True, an=0, ns=20, ar=36),
      expect_tcp=REFERRAL(20, 40))
    # --- opcodes ---
    for op in (1, 2, 3, 6, 15):
        b(f"opcode_{op}", Z, "SOA", opcode=op, expect=NOTIMP, tcp=(op == 2))
    b("opcode_4_notify", Z, "SOA", opcode=4, expect=NOTAUTH)
    b("opcode_5_update", Z, "SOA", opcode=5, expect=NOTAUTH)
    # --- EDNS ---
    b("edns_badvers", "www." + Z, variants=("edns",), edns_version=1, expect=BADVERS, tcp=True)
    b("edns_badvers_nx", "nx." + Z, variants=("edns",), edns_version=1, expect=BADVERS)
    b("edns_badvers_out_of_zone", "www.example.org.", variants=("edns",), edns_version=1, expect=BADVERS)
    b("edns_badvers_chaos", "version.bind.", "TXT", "CH", variants=("edns",), edns_version=1, expect=BADVERS)
    b("edns_do_positive", "www." + Z, variants=("edns",), do=True, expect=POS(2))
    b("edns_do_nx", "nx." + Z, variants=("edns",), do=True, expect=NXD)
    b("edns_do_refused", "www.example.org.", variants=("edns",), do=True, expect=REFUSED)
    b("edns_do_tc", "huge." + Z, "TXT", variants=("edns",), do=True, expect=TRUNC)
    b("edns_payload_4096_small_answer", "www." + Z, variants=("edns4096", "edns65535"), expect=POS(2))
    # --- malformed / unusual query packets (one variant each) ---
    b("raw_qdcount0", "www." + Z, variants=("raw",), raw="qd0", expect=dict(FORMERR, qd=0), tcp=True)
    b("raw_qdcount0_edns", "www." + Z, variants=("raw",), raw="qd0_opt", expect=dict(FORMERR, qd=0))
    b("raw_qdcount2", "www." + Z, variants=("raw",), raw="qd2", expect=NORESP, timeout=0.6)
    b("raw_ancount1", "www." + Z, variants=("raw",), raw="an1", expect=POS(2))
    b("raw_qr_set", "www." + Z, variants=("raw",), raw="qr", expect=NORESP, timeout=0.6)
    b("raw_query_aa", "www." + Z, variants=("raw",), raw="qflag_aa", expect=POS(2))
    b("raw_query_tc", "www." + Z, variants=("raw",), raw="qflag_tc", expect=POS(2))
    b("raw_query_ad", "www." + Z, variants=("raw",), raw="qflag_ad", expect=POS(2))
    b("raw_query_z", "www." + Z, variants=("raw",), raw="qflag_z", expect=POS(2))
    b("raw_two_opt", "www." + Z, variants=("raw",), raw="two_opt", expect=FORMERR, tcp=True)
    b("raw_opt_nonroot_owner", "www." + Z, variants=("raw",), raw="opt_nonroot", expect=POS(2))
    b("raw_opt_in_answer", "www." + Z, variants=("raw",), raw="opt_in_answer", expect=FORMERR)
    b("raw_trailing_garbage", "www." + Z, variants=("raw",), raw="trailing", expect=FORMERR)
    b("raw_opt_nsid", "www." + Z, variants=("raw",), raw="opt_nsid", expect=POS(2))
    b("raw_opt_unknown_option", "www." + Z, variants=("raw",), raw="opt_unknown", expect=POS(2))
    b("raw_opt_cookie", "www." + Z, variants=("raw",), raw="opt_cookie", expect=POS(2))
    b("raw_opt_bad_option_len", "www." + Z, variants=("raw",), raw="opt_badlen", expect=FORMERR)
    b("raw_opt_z_bit", "www." + Z, variants=("raw",), raw="opt_zbit", expect=POS(2))
    # --- CHAOS ---
    b("chaos_version_bind", "version.bind.", "TXT", "CH", expect=CHAOS_OK, tcp=True)
    b("chaos_version_server", "version.server.", "TXT", "CH", expect=CHAOS_OK)
    b("chaos_id_server", "id.server.", "TXT", "CH", expect=CHAOS_OK)
    b("chaos_hostname_bind", "hostname.bind.", "TXT", "CH", expect=CHAOS_OK)
    b("chaos_authors_bind", "authors.bind.", "TXT", "CH", expect=REFUSED)
    b("chaos_other_name", "foo.bind.", "TXT", "CH", expect=REFUSED)
    b("chaos_zone_name", Z, "TXT", "CH", expect=REFUSED)
    b("chaos_a_version_bind", "version.bind.", "A", "CH", expect=REFUSED)
    b("chaos_any_version_bind", "version.bind.", "ANY", "CH", expect=REFUSED)
    b("chaos_name_in_class_in", "version.bind.", "TXT", "IN", expect=REFUSED)
    # --- other classes ---
    b("class_any", "www." + Z, "A", "ANY", expect=POS(2))
    b("class_any_nx", "nx." + Z, "A", "ANY", expect=NXD)
    b("class_none", "www." + Z, "A", "NONE", expect=REFUSED)
    b("class_hs", "www." + Z, "A", "HS", expect=REFUSED)
    b("class_ch_in_zone_name", "www." + Z, "A", "CH", expect=REFUSED)
    b("class_42", "www." + Z, "A", 42, expect=REFUSED)
    # --- zone transfers and meta types ---
    b("axfr_udp", Z, "AXFR", expect=NOTIMP)
    b("ixfr_udp", Z, "IXFR", expect=NOTAUTH)
    b("axfr_tcp", Z, "AXFR", tcp=True, tcp_only=True, expect=NOTAUTH)
    b("qtype_maila", "www." + Z, "MAILA", expect=NODATA)
    b("qtype_mailb", "www." + Z, "MAILB", expect=NODATA)
    b("qtype_0", "www." + Z, 0, expect=NOTIMP)
    b("qtype_65535_absent", "www." + Z, 65535, expect=NODATA)
    b("qtype_rrsig_absent", "www." + Z, "RRSIG", expect=NODATA)
    b("qtype_nsec_absent", "www." + Z, "NSEC", expect=NODATA)
    b("qtype_dnskey_absent", Z, "DNSKEY", expect=NODATA)
    b("qtype_opt", "www." + Z, "OPT", expect=NODATA)
    # --- names outside every served zone ---
    b("oz_name", "www.example.org.", expect=REFUSED, tcp=True)
    b("oz_root", ".", "NS", expect=REFUSED)
    b("oz_tld", "com.", "SOA", expect=REFUSED)
    b("oz_parent_of_zone", "example.", "SOA", expect=REFUSED)
    # --- delegations ---
    b("deleg_ns_at_cut", "sub." + Z, "NS", expect=REFERRAL(2, 2), tcp=True)
    b("deleg_a_at_cut", "sub." + Z, "A", expect=REFERRAL(2, 2))
    b("deleg_soa_at_cut", "sub." + Z, "SOA", expect=REFERRAL(2, 2))
    b("deleg_below_cut", "x.sub." + Z, expect=REFERRAL(2, 2))
    b("deleg_deep_below_cut", "a.b.sub." + Z, "TXT", expect=REFERRAL(2, 2))
    b("deleg_glue_name_a", "ns1.sub." + Z, "A", expect=REFERRAL(2, 2))
    b("deleg_glue_name_aaaa", "ns2.sub." + Z, "AAAA", expect=REFERRAL(2, 2))
    b("deleg_ds_present", "sub." + Z, "DS", expect=POS(1))
    b("deleg_nods_ns", "nods." + Z, "NS", expect=REFERRAL(1, 1))
    b("deleg_nods_ds", "nods." + Z, "DS", expect=NODATA)
    b("deleg_nods_below", "x.nods." + Z, expect=REFERRAL(1, 1))
    b("deleg_oob_ns", "extdel." + Z, "NS", expect=REFERRAL(1, 0))
    b("deleg_oob_ds", "extdel." + Z, "DS", expect=NODATA)
    b("deleg_oob_below", "x.extdel." + Z, expect=REFERRAL(1, 0))
    b("ds_at_apex", Z, "DS", expect=NODATA)
    b("ds_not_a_cut", "www." + Z, "DS", expect=NODATA)
    b("ds_nxdomain", "nx." + Z, "DS", expect=NXD)
    # --- CNAME ---
    b("cname_a", "alias." + Z, expect=POS(3), tcp=True)
    b("cname_aaaa", "alias." + Z, "AAAA", expect=POS(2))
    b("cname_qtype_cname", "alias." + Z, "CNAME", expect=POS(1))
    b("cname_target_nodata", "alias." + Z, "TXT", expect=E(an=1, ns=1))
    b("cname_chain_3", "chain1." + Z, expect=POS(5))
    b("cname_out_of_zone", "ext." + Z, expect=POS(1))
    b("cname_dangling", "dangling." + Z, expect=E("NXDOMAIN", an=1, ns=1))
    b("cname_to_nodata_name", "cname-nodata." + Z, "TXT", expect=E(an=1, ns=1))
    b("cname_to_nodata_name_pos", "cname-nodata." + Z, expect=POS(2))
    b("cname_loop", "loop1." + Z, expect=POS(2))
    b("cname_loop_qtype_cname", "loop1." + Z, "CNAME", expect=POS(1))
    b("cname_into_other_zone", "other." + Z, expect=POS(1))
    b("cname_into_other_zone_back", "back." + N, expect=POS(1))
    b("cname_to_ent", "to-ent." + Z, expect=E(an=1, ns=1))
    b("cname_to_wildcard", "to-wild." + Z, expect=POS(2))
    b("cname_to_wildcard_nodata", "to-wild." + Z, "MX", expect=E(an=1, ns=1))
    b("cname_wildcard", "x.wcname." + Z, expect=POS(3))
    b("cname_wildcard_qtype_cname", "x.wcname." + Z, "CNAME", expect=POS(1))
    b("cname_chain_7_limit", "longchain0." + Z, expect=POS(5), tcp=True)
    b("cname_chain_6_limit", "longchain1." + Z, expect=POS(5))
    b("cname_chain_5_full", "longchain2." + Z, expect=POS(6))
    b("cname_qtype_ds", "alias." + Z, "DS", expect=E(an=1, ns=1))
    b("cname_generated", "pad012." + G, "TXT", expect=E(an=1, ns=1))
    # --- wildcards ---
    b("wild_a", "foo.wild." + Z, expect=POS(1), tcp=True)
    b("wild_txt", "foo.wild." + Z, "TXT", expect=POS(1))
    b("wild_nodata", "foo.wild." + Z, "MX", expect=NODATA)
    b("wild_deep", "a.b.wild." + Z, expect=POS(1))
    b("wild_explicit", "explicit.wild." + Z, expect=POS(1))
    b("wild_explicit_nodata", "explicit.wild." + Z, "TXT", expect=NODATA)
    b("wild_below_explicit_nx", "x.explicit.wild." + Z, expect=NXD)
    b("wild_parent_ent", "wild." + Z, expect=NODATA)
    b("wild_literal_star", "*.wild." + Z, expect=POS(1))
    # --- empty non-terminals / negative answers ---
    b("ent_top", "ent." + Z, expect=NODATA)
    b("ent_mid", "b.ent." + Z, expect=NODATA)
    b("ent_leaf", "a.b.ent." + Z, expect=POS(1))
    b("ent_below_nx", "c.b.ent." + Z, expect=NXD)
    b("ent_srv_parent", "_tcp." + Z, "SRV", expect=NODATA)
    b("neg_nxdomain", "nx." + Z, expect=NXD, tcp=True)
    b("neg_nodata", "www." + Z, "MX", expect=NODATA)
    b("neg_nxdomain_soa_ttl_lt_min", "nx." + N, expect=NXD)
    b("neg_nodata_soa_ttl_lt_min", "www." + N, "MX", expect=NODATA)
    b("neg_nodata_apex", N, "MX", expect=NODATA)
    # --- header flag copying ---
    b("flags_rd", "www." + Z, rd=True, expect=POS(2))
    b("flags_cd", "www." + Z, cd=True, expect=POS(2))
    b("flags_rd_cd", "www." + Z, rd=True, cd=True, expect=POS(2), tcp=True)
    b("flags_rd_cd_nx", "nx." + Z, rd=True, cd=True, expect=NXD)
    b("flags_rd_cd_referral", "x.sub." + Z, rd=True, cd=True, expect=REFERRAL(2, 2))
    b("flags_rd_cd_refused", "www.example.org.", rd=True, cd=True, expect=REFUSED)
    b("flags_rd_cd_notimp", Z, "SOA", opcode=2, rd=True, cd=True, expect=NOTIMP)
    b("flags_rd_cd_tc", "big." + Z, "TXT", variants=("noedns",), rd=True, cd=True, expect=TRUNC)
    b("flags_rd_cd_chaos", "version.bind.", "TXT", "CH", rd=True, cd=True, expect=CHAOS_OK)
    b("flags_rd_cd_badvers", "www." + Z, variants=("edns",), edns_version=1, rd=True, cd=True, expect=BADVERS)
    return B


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
