"""Zones loaded and compiled in C: master files read by ldns, every answer decided and
encoded in native/zone/ straight into the table builder, with no Python per record.

compiler.py stays the reference and the path for everything the C side declines
($GENERATE, an NSEC3 chain without SHA-1 hashes, nested zones, a build without ldns):
each load and each compile says at debug level which path it took and why. STORMPY_ZONE_LOADER=python forces the Python path (tests compare both).
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.zone

from stormpy import _core

log = logging.getLogger("stormpy")


def enabled() -> bool:
    return _core.ZONE_READER and os.environ.get("STORMPY_ZONE_LOADER", "c") != "python"


class NativeZone:
    """A zone read by ldns, kept in C for compiling; it stands where dns/zone.py's
    Zone does. `zone` (dnspython's) is read only if asked for (tools, extend())."""

    def __init__(self, path: str, origin: str | None, native):
        self.path, self.native, self._origin_arg, self._zone = path, native, origin, None
        self.lock = threading.Lock()    # a patch never overlaps a write or a transfer out
        self.replaced: dict[bytes, list] = {}   # owner -> its records before the patches
                                                # since it was published (journal.py)
        self.origin = dns.name.from_wire(native.origin_wire, 0)[0]

    @property
    def zone(self):
        """dnspython's zone from the records C holds (the file is not read again: it may
        have changed, or be a pipe), for the Python compiler and tools."""
        if self._zone is None:
            self._zone = self.into(dns.zone.Zone(self.origin, relativize=False))
        return self._zone

    @property
    def record_count(self) -> int:
        return self.native.records

    @property
    def serial(self) -> int:
        return self.native.serial

    def get_soa(self):
        """The SOA record (dnspython's), as dns.zone.Zone.get_soa() gives it."""
        data = self.native.soa_rdata
        return dns.rdata.from_wire(dns.rdataclass.IN, dns.rdatatype.SOA, data, 0, len(data))

    def into(self, zone: dns.zone.Zone) -> dns.zone.Zone:
        """zone (empty, dnspython's) filled with the records C holds."""
        for owner, rdtype, ttl, datas in self.native.rrsets():
            name = dns.name.from_wire(owner, 0)[0]
            covers = int.from_bytes(datas[0][:2], "big") if rdtype == dns.rdatatype.RRSIG else 0
            rdataset = zone.find_rdataset(name, rdtype, covers, create=True)
            for data in datas:
                rdataset.add(dns.rdata.from_wire(dns.rdataclass.IN, rdtype, data, 0, len(data)),
                             ttl)
        return zone


@contextlib.contextmanager
def progress(what: str, count=None, stream=None):
    """A line on the terminal, rewritten each second, while a load lasts over a second:
    what it is doing, the records read so far (count()) and the time taken."""
    stream = stream or sys.stderr
    if not stream.isatty():
        yield
        return
    done, start, shown = threading.Event(), time.monotonic(), []

    def report():
        while not done.wait(1.0):
            counted = f", {count():,} records" if count else ""
            stream.write(f"\rstormpy: {what}{counted}, {time.monotonic() - start:.0f} s ")
            stream.flush()
            shown.append(True)
    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    try:
        yield
    finally:
        done.set()
        reporter.join()
        if shown:
            stream.write(f"\rstormpy: {what}: done in {time.monotonic() - start:.1f} s\n")
            stream.flush()


def load(path: str, origin: str | None) -> NativeZone | None:
    """The zone read in C, or None (the reason logged) when the Python loader must read it."""
    if not enabled():
        return None
    if origin is not None and not origin.endswith("."):
        origin += "."
    reader = _core.NativeZone()
    try:
        with progress(f"reading {path}", lambda: reader.records_read):
            reader.read(path, origin)
        zone = NativeZone(path, origin, reader)
    except _core.ZoneDeclined as e:
        _python_path(os.path.getsize(path) >= SLOW_BYTES, "%s: read by dnspython, not ldns: %s",
                     path, e)
        return None
    log.debug("%s: read by ldns (%d records)", path, zone.record_count)
    outside, first = reader.outside
    if outside:
        log.warning("%s: %d record(s) outside the zone %s left out, the first owned by %s",
                    path, outside, zone.origin, dns.name.from_wire(first, 0)[0])
    mismatch, first = reader.ttl_mismatch
    if mismatch:
        log.warning("%s: %d record(s) with a TTL other than their RRset's, the first at %s: "
                    "the lowest is served (RFC 2181 5.2)", path, mismatch,
                    dns.name.from_wire(first, 0)[0])
    return zone


def from_records(path: str, zone: dns.zone.Zone) -> NativeZone | None:
    """A zone parsed already (dnspython's: a secondary's transfer) as the C path keeps
    it, so that it compiles in C; None (the reason logged) when the Python compiler must."""
    if not enabled():
        return None
    reader = _core.NativeZone()
    records = ((name.to_wire(), rds.rdtype, rds.ttl, rd.to_wire())
               for name, rds in zone.iterate_rdatasets() for rd in rds)
    try:
        with progress(f"preparing {zone.origin.to_text()}", lambda: reader.records_read):
            reader.add_records(records, zone.origin.to_wire())
    except _core.ZoneDeclined as e:
        log.debug("%s: compiled in Python: %s", zone.origin, e)
        return None
    native = NativeZone(path, None, reader)
    native._zone = zone
    return native


def patch(prepared: NativeZone, zone: dns.zone.Zone, names) -> bool:
    """prepared (from_records' zone, an IXFR ago) brought to zone's state in place: the
    records at names (the IXFR's changed names) replaced by zone's, the rest untouched.
    False, the reason logged, when the C path declines it; prepared is unusable then."""
    try:
        patch_names(prepared, {name: list(zone.get_node(name) or ()) for name in names})
    except _core.ZoneDeclined as e:
        log.debug("%s: compiled in Python: %s", zone.origin, e)
        return False
    prepared._zone = zone
    return True


def patch_names(prepared: NativeZone, nodes: dict) -> None:
    """prepared's records at each name of nodes replaced in place by its rdatasets
    (dnspython's; none: the name leaves the zone). Raises ZoneDeclined; prepared is
    unusable then."""
    def records():
        for name, rdatasets in nodes.items():
            wire = name.to_wire()
            for rds in rdatasets:
                for rd in rds:
                    yield wire, rds.rdtype, rds.ttl, rd.to_wire()
    owners = [name.canonicalize().to_wire() for name in nodes]
    with progress(f"patching {prepared.origin.to_text()}"), prepared.lock:
        for owner in owners:
            if owner not in prepared.replaced:
                prepared.replaced[owner] = prepared.native.held(owner)
        prepared.native.patch(owners, records())


LEFTOVERS_FLOOR = 1 << 20


def recompile(builder, served, zone_slots, stats, whole_bytes, floor=LEFTOVERS_FLOOR):
    """builder, an edit of the published table, brought up to the patches made since to
    the served zones (a secondary's IXFRs), only the keys they can change compiled
    again: (table, CompileStats), or None (the reason logged) when a whole compile is
    due. Every served zone is a NativeZone, compiled into the published table (stats),
    whose last whole compile was whole_bytes large: an edit leaves the responses it
    replaces in the table, and once they outgrow a quarter of it (and floor), a whole
    compile sheds them."""
    import dataclasses
    if stats.memory_bytes - whole_bytes > max(whole_bytes // 4, floor):
        log.info("compiling whole: the responses that IXFRs replaced take %.1f MB",
                 (stats.memory_bytes - whole_bytes) / 1e6)
        return None
    responses = dict(stats.zone_responses)
    for z in (z for z in served if z.native.pending):
        try:
            _keys, added = z.native.recompile_into(builder, zone_slots.get(z.origin, 0))
        except _core.ZoneDeclined as e:
            log.debug("%s: %s", z.origin, e)
            return None
        _warn_oversized(z)
        responses[z.origin.to_text()] = responses.get(z.origin.to_text(), 0) + added
    table = builder.finish()
    info = table.info()
    return table, dataclasses.replace(
        stats, keys=info["keys"], responses=info["responses"], memory_bytes=info["memory_bytes"],
        records=sum(z.record_count for z in served), names=sum(z.native.names for z in served),
        zone_responses=responses, serials={**stats.serials, **{z.origin.to_text(): z.serial
                                                               for z in served}},
        compiled_in="C, edited")


# Past these the Python path takes tens of seconds where C takes one or two, and an
# operator wants to know why (below them the reason stays at debug level).
SLOW_BYTES, SLOW_RECORDS = 4 << 20, 100_000


def _python_path(slow: bool, message: str, *args) -> None:
    if slow:
        log.info(message + " (slower: at this size the C path takes a small part of the time)",
                 *args)
    else:
        log.debug(message, *args)


def _warn_oversized(z: NativeZone) -> None:
    from stormpy.dns.answer import warn_oversized
    count, name, rdtype, below = z.native.oversized
    if count:
        warn_oversized(z.path, z.origin, count, (dns.name.from_wire(name, 0)[0], rdtype, below))


def _nested(zones) -> bool:
    origins = [z.origin for z in zones]
    return any(a != b and a.is_subdomain(b) for a in origins for b in origins) \
        or len(set(origins)) != len(origins)


def compile_zones(zones, chaos_version, chaos_identity, zone_slots, extend=None):
    """compiler.compile_zones on the C path: (table, CompileStats), or None when a zone
    needs the Python compiler. extend(builder) adds its keys after the zones' and the
    chaos names', as on the Python path."""
    from stormpy.dns.compiler import (DNS_PATCHES, CompileStats, _emit_chaos, _Emitter,
                                      _user_word)
    if not all(isinstance(z, NativeZone) for z in zones) or _nested(zones):
        why = "nested or repeated zones" if _nested(zones) else "a zone read by dnspython"
        _python_path(sum(z.record_count for z in zones) >= SLOW_RECORDS,
                     "compiling in Python: %s", why)
        return None
    builder = _core.TableBuilder()
    zone_responses, keys = {}, 0
    for z in zones:
        try:
            with progress(f"compiling {z.origin.to_text()}"):
                added, responses = z.native.compile_into(builder, zone_slots.get(z.origin, 0))
        except _core.ZoneDeclined as e:
            log.debug("%s: compiling in Python: %s", z.path, e)
            return None
        _warn_oversized(z)
        zone_responses[z.origin.to_text()] = responses
        keys += added
    chaos = _Emitter()
    _emit_chaos(chaos, chaos_version, chaos_identity)
    stored = {}
    for (plain, _signed, zone, _wildcard, _spliced), index in chaos.responses.items():
        stored[index] = builder.add_response(plain[0], DNS_PATCHES, _user_word(plain, zone, 0))
    for (t, key), index in chaos.keys.items():
        builder.add_key(t, key, stored[index])
    if extend is not None:
        extend(builder)
    table = builder.finish()
    info = table.info()
    log.debug("compiled in C: %d zone(s), %d keys", len(zones), keys)
    stats = CompileStats(zones=len(zones), records=sum(z.record_count for z in zones),
                         names=sum(z.native.names for z in zones), keys=info["keys"],
                         responses=info["responses"], memory_bytes=info["memory_bytes"],
                         zone_responses=zone_responses,
                         serials={z.origin.to_text(): z.serial for z in zones}, compiled_in="C")
    return table, stats
