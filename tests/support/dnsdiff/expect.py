"""What Knot 3.2.6 was observed to answer for each behaviour: the behaviour table."""
from __future__ import annotations

from typing import Dict, List, Tuple

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.opcode


from .zones import G, N, Z


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
    b("raw_opt_nsid", "www." + Z, variants=("raw",), raw="opt_nsid", expect=POS(2), tcp=True)
    b("raw_opt_nsid_nx", "nx." + Z, variants=("raw",), raw="opt_nsid", expect=NXD)
    b("raw_opt_nsid_nodata", "foo.wild." + Z, "MX", variants=("raw",), raw="opt_nsid",
      expect=NODATA)
    b("raw_opt_nsid_refused", "www.example.org.", variants=("raw",), raw="opt_nsid",
      expect=REFUSED)
    b("raw_opt_nsid_chaos", "id.server.", "TXT", "CH", variants=("raw",), raw="opt_nsid",
      expect=CHAOS_OK)
    b("raw_opt_nsid_cookie", "www." + Z, variants=("raw",), raw="opt_nsid_cookie", expect=POS(2))
    b("raw_opt_nsid_do", "www." + Z, variants=("raw",), raw="opt_nsid_do", expect=POS(2))
    b("raw_opt_nsid_big_txt", "big." + Z, "TXT", variants=("raw",), raw="opt_nsid",
      expect=POS(6))
    b("raw_opt_nsid_tc", "big." + Z, "TXT", variants=("raw",), raw="opt_nsid_512", expect=TRUNC)
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
    b("cname_qtype_rrsig", "alias." + Z, "RRSIG", expect=NODATA)     # no chain followed
    b("cname_dangling_rrsig", "dangling." + Z, "RRSIG", expect=NODATA)
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
    b("wild_ent", "x.srv." + Z, expect=NODATA, tcp=True)
    b("wild_ent_srv", "x.srv." + Z, "SRV", expect=NODATA)
    b("wild_ent_deep", "y.x.srv." + Z, expect=NODATA)
    b("wild_ent_child_not_synthesised", "_tcp.x.srv." + Z, "SRV", expect=NODATA)
    b("wild_ent_literal_star", "*.srv." + Z, expect=NODATA)
    b("wild_ent_below_star_nx", "y.*.srv." + Z, expect=NXD)
    b("wild_ent_child", "_tcp.*.srv." + Z, "SRV", expect=POS(1, ar=1))
    b("wild_ent_any", "x.srv." + Z, "ANY", expect=NODATA)
    b("wild_ent_ds", "x.srv." + Z, "DS", expect=NODATA)
    b("wild_ent_do", "x.srv." + Z, variants=("edns",), do=True, expect=NODATA)
    b("cname_to_wildcard_ent", "to-wild-ent." + Z, expect=E(an=1, ns=1))
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


