"""`stormpy bench ixfr`: what a secondary's swap costs after a small IXFR.

For each zone size (the `stormpy bench compile` zones): dnspython reads the zone, as a
transfer's parse would; it goes into the C store and compiles, as the first transfer's
does; an IXFR-like delta (a new serial, one record added, one deleted) is applied in
place, as dns/secondary.py does; then the C store is patched at the names the delta
changed and the table edited (only the keys the delta can change compiled again): the
time from the IXFR landing to a new table, placed in the memory shared with the
workers as the server does: in pages already in memory, faulted in after the swap
before (engine/shm.h). Two IXFRs in a row are timed, the second's figures kept. A whole compile of the patched store is
timed too, for comparison.

As a primary of other servers: the journal's change after the patch (from the records
it replaced), the change between the zone and its file read again (two C stores
compared), and an AXFR out written from the C store, TSIG-signed.
"""
from __future__ import annotations

import json
import os
import tempfile
import time

import dns.name
import dns.rdata
import dns.rdataset
import dns.zone

from stormpy.bench.errors import BenchError
from stormpy.bench.report import markdown_table, say, write_csv
from stormpy.bench.workload import write_compile_zone
from stormpy.dns import journal
from stormpy.table_region import shared_table_ref

STEPS = ["read (dnspython)", "into the C store", "compile", "apply the delta",
         "patch the C store", "edit the table", "place for the workers",
         "compile whole (not in the swap)", "journal: the patch's change",
         "journal: store against store", "AXFR out (C store, TSIG)"]


def _timed(step: str, times: dict, fn):
    start = time.perf_counter()
    out = fn()
    times[step] = time.perf_counter() - start
    return out


def _delta(zone: dns.zone.Zone, n: int) -> None:
    with zone.writer() as txn:
        soa = zone.get_rdataset(zone.origin, "SOA")
        txn.replace(zone.origin, dns.rdataset.from_rdata(soa.ttl, soa[0].replace(serial=soa[0].serial + 1)))
        txn.add(dns.name.from_text(f"added{n}", zone.origin), 60, dns.rdata.from_text("IN", "A", "192.0.2.99"))
        txn.delete(dns.name.from_text(f"host{n}", zone.origin), "A")


def _check_delta_served(table, origin, n: int) -> None:
    """The table compiled last answers the delta's record: the swap measured is real."""
    import dns.message
    q = dns.message.make_query(dns.name.from_text(f"added{n}", origin), "A")
    r = dns.message.from_wire(table.dns_answer(q.to_wire()))
    if not r.answer or r.answer[0][0].to_text() != "192.0.2.99":
        raise BenchError(f"the table compiled after the delta does not answer it: {r}")


def _edit(ref, prepared):
    builder = ref.edit()
    prepared.native.recompile_into(builder)
    return builder.finish()


def _as_a_primary(path: str, prepared, times: dict) -> None:
    import base64
    import dns.message
    import dns.tsig
    import dns.xfr
    from stormpy.dns import native
    from stormpy.dns.transfer import transfer_answer
    again = native.load(path, prepared.origin.to_text())       # the file, two deltas behind
    change = _timed(STEPS[9], times, lambda: journal.Journal.difference(
        prepared.origin, journal.published(again), journal.published(prepared)))
    if change is None or len(change.added) != 2 or len(change.deleted) != 2:
        raise BenchError(f"the stores' difference is not the two deltas': {change}")
    key = dns.tsig.Key("bench.", base64.b64encode(bytes(32)).decode(), "hmac-sha256")
    query, _ = dns.xfr.make_query(dns.zone.Zone(prepared.origin), serial=None,
                                  keyring={key.name: key}, keyname=key.name)
    asked = dns.message.from_wire(query.to_wire(), keyring={key.name: key})
    messages, _ = _timed(STEPS[10], times, lambda: transfer_answer(asked, prepared, None))
    sent = sum(int.from_bytes(m[6:8], "big") for m in messages)
    if sent != prepared.record_count + 1:           # the SOA opens and closes it
        raise BenchError(f"the AXFR carries {sent} records, not {prepared.record_count + 1}")


def measure(path: str) -> dict:
    from stormpy.dns import native
    from stormpy.dns.compiler import compile_zones
    from stormpy.dns.secondary import TransferZone
    times: dict = {}
    zone = _timed(STEPS[0], times, lambda: dns.zone.from_file(path, relativize=False,
                                                               zone_factory=TransferZone))
    prepared = _timed(STEPS[1], times, lambda: native.from_records(path, zone))
    if prepared is None:
        raise BenchError("the C path declined the zone (a build without ldns?)")
    table, _ = _timed(STEPS[2], times, lambda: compile_zones([prepared]))
    ref = shared_table_ref(table, 1, 4 << 30, keep_freed_pages=True)     # as a secondary's
    ref.prefault()              # as the server does after each swap, off its path
    for n in (1, 2):            # the second IXFR's figures are the ones kept
        zone.changed_names = set()
        _timed(STEPS[3], times, lambda: _delta(zone, n))
        was = journal.published(prepared)
        if not _timed(STEPS[4], times, lambda: native.patch(prepared, zone, zone.changed_names)):
            raise BenchError("the C path declined the patched zone")
        change = _timed(STEPS[8], times, lambda: journal.Journal.difference(
            zone.origin, was, journal.published(prepared)))
        if change is None or len(change.added) != 1 or len(change.deleted) != 1:
            raise BenchError(f"the journal's change is not the delta's: {change}")
        prepared.replaced.clear()
        edited = _timed(STEPS[5], times, lambda: _edit(ref, prepared))
        _check_delta_served(edited, zone.origin, n)
        _timed(STEPS[6], times, lambda: ref.publish(edited))
        ref.reclaim(1000)
        ref.prefault()
    whole, _ = _timed(STEPS[7], times, lambda: compile_zones([prepared]))
    _check_delta_served(whole, zone.origin, 2)
    _as_a_primary(path, prepared, times)
    times["swap after the IXFR"] = times[STEPS[4]] + times[STEPS[5]] + times[STEPS[6]]
    return {k: round(v, 4) for k, v in times.items()}


def run_ixfr(args) -> int:
    columns = {}
    with tempfile.TemporaryDirectory(prefix="stormpy-ixfr-") as tmp:
        for records in args.records:
            path = os.path.join(tmp, f"bench-{records}.zone")
            say(f"ixfr: a zone of {records:,} records")
            write_compile_zone(path, records)
            columns[records] = measure(path)
    if args.json:
        print(json.dumps({str(k): v for k, v in columns.items()}))
        return 0
    header = ["step (seconds)"] + [f"{r:,} records" for r in columns]
    steps = STEPS + ["swap after the IXFR"]
    table = [[step] + [f"{columns[r][step]:.3f}" for r in columns] for step in steps]
    print(markdown_table(header, table))
    if args.csv:
        write_csv(args.csv, header, table)
    return 0
