"""serve-dns: zones compiled into the table, answered by the workers in C: UDP by the
frame or socket workers, DNS over TCP (RFC 7766) by TCP workers of their own
(native/include/stormpy/app/dns/stream.h). Zones come from files, or from a primary
(--secondary: stormpy.dns.secondary); NOTIFY and transfers reach this process from the
workers (stormpy.dns.handoff)."""
from __future__ import annotations

import asyncio
import logging
import os
import resource
import time
from dataclasses import dataclass, field

import dns.exception
import dns.name

from stormpy import _core
from stormpy.config import ServerConfig
from stormpy.dns.compiler import assign_zone_slots, compile_zones
from stormpy.dns.handoff import Handoff, TransferService
from stormpy.dns.secondary import Secondary, servfail_for
from stormpy.dns.journal import Journal, published, records_differ
from stormpy.dns.transfer import TransferPolicy, newer, parse_address, parse_tsig, send_notify
from stormpy.dns.zone import Zone, import_rdata_classes, load_zone, with_origins
from stormpy.errors import BackendError, StormpyError, ZoneError
from stormpy.server import Server

log = logging.getLogger("stormpy")
TAP_CHECK_SECONDS = 0.25


def _say_serial(zone: Zone, old: Zone) -> None:
    """A reloaded file's serial, and the two mistakes secondaries never see past: a
    serial gone backwards (RFC 1982), a change without a new serial."""
    origin = zone.origin.to_text()
    if zone.serial != old.serial and not newer(zone.serial, old.serial):
        log.warning("zone %s: serial %d -> %d goes backwards (RFC 1982): secondaries keep "
                    "their copy", origin, old.serial, zone.serial)
    elif zone.serial != old.serial:
        log.info("zone %s: serial %d -> %d", origin, old.serial, zone.serial)
    elif zone.record_count != old.record_count:
        log.warning("zone %s: %d records where there were %d, with the same serial %d: "
                    "secondaries will not transfer the change", origin, zone.record_count,
                    old.record_count, zone.serial)
    elif records_differ(old, zone):
        log.warning("zone %s: records changed, with the same serial %d: secondaries will "
                    "not transfer the change", origin, zone.serial)


@dataclass
class DnsConfig(ServerConfig):
    zones: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    chaos_version: str | None = None
    chaos_identity: str | None = None
    nsid: bytes = b""                # sent to queries with the NSID option (RFC 5001)
    # DNS over TCP, after Knot's tcp-* settings
    tcp_workers: int = 1             # TCP worker processes per listening address
    tcp_max_clients: int = 8192      # connections open at once, over all TCP workers
    tcp_max_per_source: int = 100    # of them from one address (IPv6: one /64); 0: no limit
    tcp_io_timeout: float = 0.5      # a query must arrive, an answer leave, within this
    tcp_idle_timeout: float = 10.0   # between queries; shorter once half the clients are open
    # zones followed from a primary, and transfers out
    secondaries: list[str] = field(default_factory=list)
    primaries: list[str] = field(default_factory=list)   # one, or one per secondary
    tsig: str | None = None          # NAME:ALG:SECRET, for transfers and NOTIFY
    zone_dir: str = "."              # where transferred zones are kept
    transfer_allow: list[str] = field(default_factory=list)
    notify: list[str] = field(default_factory=list)      # secondaries told of new serials
    xdp_answer: bool | None = False  # answer in the XDP program what fits (stormpy.dns.xdp);
                                     # None: answers_by_default decides
    xdp_answer_entries: int = 100_000
    precopy_min: int | None = None   # --mode precopy: shorter answers rendered (None: 384)


@dataclass
class ZoneFile:
    """One zone file as served, for `stormpy ctl zone-status`."""
    path: str
    origin: str | None                # --origin (None: from the file)
    zone: Zone | None = None          # parsed, as the published table serves it
    loaded_at: float = 0.0
    serial: int = 0
    records: int = 0
    last_error: str | None = None     # of the last reload that re-read it, if it failed
    secondary: Secondary | None = None    # its data come from a primary

    @property
    def name(self) -> str:
        if self.secondary is not None:
            return self.secondary.name
        return self.zone.origin.to_text() if self.zone else self.path


class DnsServer(Server):
    """The zones' table on the workers, UDP's and TCP's. A reload re-reads every zone
    file, or only the zones `stormpy ctl reload ZONE` names, and compiles them with the
    others as they were parsed."""
    serves_tcp = True
    # a secondary starts with no data: room for a zone of millions of records, twice
    # (the table serving and the next one), in address space; pages come when written
    SECONDARY_RESERVE = 4 << 30

    def __init__(self, cfg: DnsConfig):
        self.files = [ZoneFile(path, origin) for path, origin in with_origins(cfg.zones, cfg.origins)]
        self.keys, self.secondaries, self.policy = transfer_settings(cfg)
        self.notify_targets = [parse_address(a, "--notify") for a in cfg.notify]
        self.files += [ZoneFile(s.path, s.name, secondary=s) for s in self.secondaries]
        self.zone_responses: dict[str, int] = {}
        self.zone_slots: dict = {}      # zone origin -> its answer counter's slot
        for s in self.secondaries:
            s.load_saved()
        self.table_reserve = self.SECONDARY_RESERVE if self.secondaries else 0
        self.table_changes_often = bool(self.secondaries)      # an IXFR's swap: a copy
        self.handoff = Handoff() if self.secondaries or self.policy.enabled else None
        # for IXFR out: each zone as published (its SOA and nodes), and the differences
        self.journal = Journal() if self.policy.enabled else None
        self.published: dict = {}
        self.answers_in_driver = cfg.xdp_answer
        self._driver_answers = None     # the next generation for the XDP program (dns/xdp.py)
        self._tapped = False            # `stormpy tap` attached: the driver passes all up
        self._lineage = None    # (zones, failing) compiled into the published table
        self._whole_bytes = 0     # the published table's size at its last whole compile
        try:
            super().__init__(cfg)
        except BaseException:
            if self.handoff is not None:
                self.handoff.close()
            raise

    def load(self):
        table, stats = self.reload_table(None)
        self.stats = stats
        self.reload_published()
        for e in self.reload_errors:     # as Knot DNS and NSD: the other zones are served
            log.error("%s", e)
        self.reload_errors = []
        return table, stats

    def reload_table(self, zones: frozenset[str] | None):
        """Off the event loop: the files asked for read again, the others' parsed zones
        kept; every zone compiled. A zone that fails keeps its error for zone-status and
        its previous version serves on (none at start: it is not served), as the other
        zones' new ones go out (as Knot DNS and NSD load zone by zone); the reload, or
        the start, fails when every zone asked fails."""
        fresh, errors, notes, asked, failed = [], [], [], 0, 0
        for f in self.files:
            try:
                if f.secondary is not None:
                    fresh.append(f.secondary.serving())     # None: SERVFAIL
                elif zones is None or f.name in zones:
                    asked += 1
                    fresh.append(load_zone(f.path, f.origin))
                else:
                    fresh.append(f.zone)
            except ZoneError as e:
                f.last_error = str(e)
                failed += f.secondary is None
                errors.append(str(e))
                notes.append(f"{e}: " + ("its previous version still serves" if f.zone is not None
                                         else "not served until a reload reads it"))
                fresh.append(f.zone)
        if failed and failed == asked:      # a secondary's error is not a file's
            more = f" (and {len(errors) - 1} more zone(s))" if len(errors) > 1 else ""
            raise ZoneError(errors[0] + more)
        self.reload_errors = notes
        served = [z for z in fresh if z is not None]
        failing = [f.secondary.origin for f, z in zip(self.files, fresh)
                   if z is None and f.secondary is not None]
        lineage, self._lineage = self._lineage, None      # set again once published
        edited = self._edited(fresh, failing, lineage)
        if edited is not None:
            self._candidate = (fresh, edited[1].zone_responses, self._changes(served), failing)
            self._render_driver(edited[0], served)
            return edited
        try:
            assign_zone_slots(self.zone_slots, served)
            table, stats = compile_zones(served, self.cfg.chaos_version, self.cfg.chaos_identity,
                                         zone_slots=self.zone_slots,
                                         extend=servfail_for(failing, self.zone_slots))
        except ZoneError as e:
            for f, z in zip(self.files, fresh):
                if z is not f.zone:
                    f.last_error = str(e)
            raise
        self._candidate = (fresh, stats.zone_responses, self._changes(served), failing)
        self._render_driver(table, served)
        return table, stats

    def _render_driver(self, table, served) -> None:
        """Off the loop: the XDP program's answers from the table about to be published."""
        if self.answers_in_driver:
            from stormpy.dns.xdp import driver_answers
            self._driver_answers = driver_answers(table, served, self.cfg.max_udp,
                                                  self.cfg.xdp_answer_entries)

    def _init_frames(self, cfg) -> None:
        super()._init_frames(cfg)
        if self.xdp is None or not self.xdp.answer:     # refused by the kernel: said at attach
            return
        from stormpy.interfaces import link_kind
        if self.xdp.mode() == "native" and link_kind(self.cfg.iface) == "veth":
            log.warning("--xdp-answer on a veth in native mode: its replies reach the peer only "
                        "while the peer has an XDP program too (or use --xdp-mode generic)")
        self._publish_driver()

    def _publish_driver(self) -> None:
        """The answers rendered with the table just published go to the XDP program."""
        answers, program = self._driver_answers, self.xdp
        if answers is None or program is None:
            return
        from stormpy.dns.xdp import publish
        self._driver_answers = None
        try:
            publish(program, answers, self.identity, paused=self._tapped)
        except BackendError as e:
            # the table is published already: the driver must not keep the old zone's answers
            log.error("XDP program on %s: %s; the workers answer every query", program.ifname, e)
            program.answers_publish(b"", b"")
            return
        log.info("XDP program on %s: %s", program.ifname, answers.describe())

    def _edited(self, fresh, failing, lineage):
        """The published table edited for the secondaries' IXFRs (their C stores patched in
        place), when nothing else changed since it was compiled: the swap costs the
        change, not the zone. None: compile whole."""
        from stormpy.dns import native
        if lineage is None or lineage[1] != failing or len(lineage[0]) != len(fresh) or \
                not all(z is was for z, was in zip(fresh, lineage[0])) or \
                not all(isinstance(z, native.NativeZone) for z in fresh if z is not None):
            return None
        served = [z for z in fresh if z is not None]
        if not any(z.native.pending for z in served):
            return None
        return native.recompile(self.ref.edit(), served, self.zone_slots, self.stats,
                                self._whole_bytes)

    def _changes(self, served: list[Zone]) -> list:
        """Each zone's difference from what is published, for the journal (off the loop)."""
        if self.journal is None:
            return []
        return [(z.origin, self.journal.difference(z.origin, self.published[z.origin],
                                                   published(z)))
                for z in served if z.origin in self.published]

    def reload_published(self) -> None:
        fresh, self.zone_responses, changes, failing = self._candidate
        self._lineage = (fresh, failing)
        if "edited" not in self.stats.compiled_in:
            self._whole_bytes = self.stats.memory_bytes
        now = time.time()
        if self.journal is not None:
            self.published = {z.origin: published(z) for z in fresh if z is not None}
            for origin, change in changes:
                if change is not None:
                    self.journal.add(origin, change)
        self._publish_driver()
        for z in fresh:         # the journal has taken the patches' changes
            getattr(z, "replaced", {}).clear()
        for f, z in zip(self.files, fresh):
            if z is None:
                f.zone, f.serial, f.records = None, 0, 0
            elif z is not f.zone:
                if (f.serial and z.serial != f.serial) or \
                        (f.zone is None and f.last_error is not None):   # loaded at last
                    self._notify(z.origin, z.serial)
                if f.zone is not None and f.secondary is None:
                    _say_serial(z, f.zone)
                f.zone, f.loaded_at, f.last_error = z, now, None
                f.serial, f.records = z.serial, z.record_count

    def _notify(self, origin, serial: int) -> None:
        """Tell --notify's secondaries of origin's new serial (off the loop)."""
        loop = asyncio.get_running_loop()
        for target in self.notify_targets:
            loop.run_in_executor(None, send_notify, origin, serial, target, self.keys)

    def zone_name(self, name: str) -> str:
        try:
            wanted = dns.name.from_text(name)
        except dns.exception.DNSException:
            wanted = None
        for f in self.files:
            if f.zone is not None:
                origin = f.zone.origin
            elif f.secondary is not None:
                origin = f.secondary.origin
            else:                       # it has not loaded yet: its --origin, or its path
                if name == f.path:
                    return f.name
                try:
                    origin = dns.name.from_text(f.origin) if f.origin else None
                except dns.exception.DNSException:
                    origin = None
            if wanted is not None and origin == wanted:
                return f.name
        raise StormpyError(f"no zone {name!r} here (zones: {', '.join(f.name for f in self.files)})")

    def zone_status(self, name: str | None) -> list[dict]:
        wanted = self.zone_name(name) if name else None
        return [{"zone": f.name, "file": f.path, "serial": f.serial, "loaded_at": f.loaded_at,
                 "records": f.records, "responses": self.zone_responses.get(f.name, 0),
                 "last_error": f.secondary.last_error if f.secondary else f.last_error,
                 **(_secondary_status(f.secondary) if f.secondary else {})}
                for f in self.files if wanted in (None, f.name)]

    def describe(self) -> str:
        return (f"{self.stats.zones} zone(s), {self.stats.records} records, "
                f"compiled in {self.stats.compiled_in}")

    def import_for_reload(self) -> None:
        import_rdata_classes()

    def configure_worker(self, w, local_address: str | None) -> None:
        w.set_nsid(self.cfg.nsid)
        if self.cfg.precopy_min is not None:
            w.set_precopy_min(self.cfg.precopy_min)
        if self.secondaries:            # NOTIFY comes up to this process
            w.set_dns_handoff(self.handoff.worker_fd, local_address)

    def started(self) -> None:
        self.tasks = []
        if self.xdp is not None and self.xdp.answer and self.tap is not None:
            self.tasks.append(asyncio.ensure_future(self._driver_follows_tap()))
        if self.handoff is None:
            return
        self.transfers = TransferService(self.handoff, self.secondaries, self.policy, self.keys,
                                         self.served_zone,
                                         lambda: self.worker_sockets or self.sinks, self.journal)
        self.transfers.start()
        self.tasks += [asyncio.ensure_future(s.follow(lambda name: self.reload(frozenset({name}))))
                       for s in self.secondaries]

    async def _driver_follows_tap(self) -> None:
        """A tap copies what the workers see: while one is attached, the driver passes
        every query up to them (within TAP_CHECK_SECONDS of its attaching)."""
        from stormpy.dns.xdp import configure
        while True:
            await asyncio.sleep(TAP_CHECK_SECONDS)
            tapped = bool(self.tap.attached())
            try:
                if tapped or tapped != self._tapped:   # again each time: a reload may race it
                    configure(self.xdp, self.identity, paused=tapped)
            except BackendError as e:      # the program is gone (shutting down)
                log.warning("XDP program on %s: %s; taps no longer pause it",
                            self.xdp.ifname, e)
                return
            if tapped != self._tapped:
                self._tapped = tapped
                log.info("stormpy tap %s: %s", "attached" if tapped else "detached",
                         "the workers answer every query while it runs" if tapped
                         else "the XDP program answers again")

    def served_zone(self, name):
        """The published zone called name (a Zone or NativeZone), for transfers out."""
        return next((f.zone for f in self.files if f.zone is not None and f.zone.origin == name),
                    None)

    def release(self):
        for task in getattr(self, "tasks", ()):
            task.cancel()
        super().release()
        if self.handoff is not None:
            self.handoff.close()
        if getattr(self, "transfers", None) is not None:
            self.transfers.close()

    def tcp_worker(self, fd: int, index: int):
        cfg = self.cfg
        # each worker's share of the connections (over every listen address), and of a
        # source's among the workers of one address, which are all a client reaches:
        # rounded up, so a client spread over them by the kernel's hash gets its due
        per_worker = -(-cfg.tcp_max_clients // len(self.tcp_sockets))
        per_source = -(-cfg.tcp_max_per_source // cfg.tcp_workers)
        _raise_file_limit(per_worker + 64)
        return _core.FrameWorker.dns_tcp(
            fd, index, self.ref, max_connections=per_worker, max_per_source=per_source,
            io_timeout_ms=max(1, int(cfg.tcp_io_timeout * 1000)),
            idle_timeout_ms=max(1, int(cfg.tcp_idle_timeout * 1000)), max_udp=cfg.max_udp,
            handoff_fd=self.handoff.worker_fd if self.handoff is not None else 0,
            nsid=self.cfg.nsid)

    def summary(self, c: dict) -> str:
        return (super().summary(c) + f" tcp_connections={c['tcp_connections']} "
                f"open={c['tcp_open']} io_timeouts={c['tcp_io_timeouts']} "
                f"idle_timeouts={c['tcp_idle_timeouts']} evicted={c['tcp_evicted']} "
                f"refused={c['tcp_refused']} source_limited={c['tcp_source_limited']}")


def transfer_settings(cfg: DnsConfig):
    """The TSIG keys, the secondary zones and the policy for transfers out, checked:
    StormpyError, one line, on the first bad option."""
    keys = [parse_tsig(cfg.tsig)] if cfg.tsig else []
    for target in cfg.notify:
        parse_address(target, "--notify")
    return (keys, _secondaries(cfg, keys[0] if keys else None),
            TransferPolicy.from_options(cfg.transfer_allow, keys))


def _secondaries(cfg: DnsConfig, key) -> list[Secondary]:
    """--secondary ZONE with --primary ADDR[:PORT] (one for all, or one per zone)."""
    if cfg.primaries and not cfg.secondaries:
        raise StormpyError("--primary without --secondary: name the zone to follow")
    if cfg.secondaries and len(cfg.primaries) not in (1, len(cfg.secondaries)):
        raise StormpyError(f"{len(cfg.primaries)} --primary for {len(cfg.secondaries)} "
                           f"--secondary: give one --primary, or one per --secondary in order")
    if cfg.secondaries and not os.path.isdir(cfg.zone_dir):
        raise StormpyError(f"--zone-dir {cfg.zone_dir}: no such directory")
    primaries = cfg.primaries * len(cfg.secondaries) if len(cfg.primaries) == 1 else cfg.primaries
    out = []
    for zone, primary in zip(cfg.secondaries, primaries):
        try:
            origin = dns.name.from_text(zone)
        except dns.exception.DNSException as e:
            raise StormpyError(f"--secondary {zone!r}: {e}") from None
        out.append(Secondary(origin, parse_address(primary), key, cfg.zone_dir))
    return out


def _secondary_status(s: Secondary) -> dict:
    return {"primary": s.primary[0], "expired": s.expired, "transfers": dict(s.transfers)}


def _raise_file_limit(need: int) -> None:
    """A TCP worker holds a descriptor per connection: its soft limit goes up to what
    that needs, as far as the hard limit allows (the pool is sized to fit what it got)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        want = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):
            pass


def serve_dns(cfg: DnsConfig) -> None:
    asyncio.run(DnsServer(cfg).serve())
