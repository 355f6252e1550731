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

from .cases import QueryCase, generate_queries, tcp_cases, tcp_expect, udp_cases  # noqa: F401
from .compare import check_expect, compare, header_counts, parse  # noqa: F401
from .zones import (CHAOS_IDENTITY, CHAOS_VERSION, DEFAULT_SEED, NSID, ZONES,  # noqa: F401
                    ZONES_DIR, knot_zones, stormpy_zones)
