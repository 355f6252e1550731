"""`stormpy bench`: every benchmark behind docs/PERFORMANCE.md, one command per table.

    stormpy bench fastpath   the fast path alone, on the memory backend (no root)
    stormpy bench sweep      batch size, zone size, pre-copy against memcpy (no root)
    stormpy bench responders custom responders: rules, Python slow path, scapy (no root)
    stormpy bench compile    zone compile time and peak memory, beside Knot DNS loading
    stormpy bench peers      kxdpgun load across a veth pair: Knot (XDP, sockets), NSD, stormpy
    stormpy bench sockets    the socket backend against NSD and Knot on loopback (dnsperf)
    stormpy bench http       static files over HTTP: stormpy serve-http beside nginx (wrk)

Each module is importable without root and without the peers installed; what a run
needs is checked first and reported in one line (`BenchError`).
"""
from stormpy.bench.errors import BenchError

__all__ = ["BenchError"]
