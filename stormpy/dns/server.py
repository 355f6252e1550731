"""serve-dns: zones compiled into the table, answered by the workers in C: UDP by the
frame or socket workers, DNS over TCP (RFC 7766) by TCP workers of their own
(native/include/stormpy/app/dns/stream.h)."""
from __future__ import annotations

import asyncio
import resource
import time
from dataclasses import dataclass, field

import dns.exception
import dns.name

from stormpy import _core
from stormpy.config import ServerConfig
from stormpy.dns.compiler import assign_zone_slots, compile_zones
from stormpy.dns.zone import Zone, import_rdata_classes, load_zone, with_origins
from stormpy.errors import StormpyError, ZoneError
from stormpy.server import Server


@dataclass
class DnsConfig(ServerConfig):
    zones: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    chaos_version: str | None = None
    chaos_identity: str | None = None
    # DNS over TCP, after Knot's tcp-* settings
    tcp_workers: int = 1             # TCP worker processes per listening address
    tcp_max_clients: int = 8192      # connections open at once, over all TCP workers
    tcp_max_per_source: int = 100    # of them from one address (IPv6: one /64); 0: no limit
    tcp_io_timeout: float = 0.5      # a query must arrive, an answer leave, within this
    tcp_idle_timeout: float = 10.0   # between queries; shorter once half the clients are open


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

    @property
    def name(self) -> str:
        return self.zone.origin.to_text() if self.zone else self.path


class DnsServer(Server):
    """The zones' table on the workers, UDP's and TCP's. A reload re-reads every zone
    file, or only the zones `stormpy ctl reload ZONE` names, and compiles them with the
    others as they were parsed."""
    serves_tcp = True

    def __init__(self, cfg: DnsConfig):
        self.files = [ZoneFile(path, origin) for path, origin in with_origins(cfg.zones, cfg.origins)]
        self.zone_responses: dict[str, int] = {}
        self.zone_slots: dict = {}      # zone origin -> its answer counter's slot
        super().__init__(cfg)

    def load(self):
        table, stats = self.reload_table(None)
        self.stats = stats
        self.reload_published()
        return table, stats

    def reload_table(self, zones: frozenset[str] | None):
        """Off the event loop: the files asked for read again, the others' parsed zones
        kept; every zone compiled. A zone that fails keeps its error for zone-status."""
        fresh, errors = [], []
        for f in self.files:
            if zones is None or f.name in zones:
                try:
                    fresh.append(load_zone(f.path, f.origin))
                except ZoneError as e:
                    f.last_error = str(e)
                    errors.append(str(e))
            else:
                fresh.append(f.zone)
        if errors:
            more = f" (and {len(errors) - 1} more zone(s))" if len(errors) > 1 else ""
            raise ZoneError(errors[0] + more)
        try:
            assign_zone_slots(self.zone_slots, fresh)
            table, stats = compile_zones(fresh, self.cfg.chaos_version, self.cfg.chaos_identity,
                                         zone_slots=self.zone_slots)
        except ZoneError as e:
            for f, z in zip(self.files, fresh):
                if z is not f.zone:
                    f.last_error = str(e)
            raise
        self._candidate = (fresh, stats.zone_responses)
        return table, stats

    def reload_published(self) -> None:
        fresh, self.zone_responses = self._candidate
        now = time.time()
        for f, z in zip(self.files, fresh):
            if z is not f.zone:
                f.zone, f.loaded_at, f.last_error = z, now, None
                f.serial, f.records = z.serial, z.record_count

    def zone_name(self, name: str) -> str:
        try:
            wanted = dns.name.from_text(name)
        except dns.exception.DNSException:
            wanted = None
        for f in self.files:
            if f.zone is not None and f.zone.origin == wanted:
                return f.name
        raise StormpyError(f"no zone {name!r} here (zones: {', '.join(f.name for f in self.files)})")

    def zone_status(self, name: str | None) -> list[dict]:
        wanted = self.zone_name(name) if name else None
        return [{"zone": f.name, "file": f.path, "serial": f.serial, "loaded_at": f.loaded_at,
                 "records": f.records, "responses": self.zone_responses.get(f.name, 0),
                 "last_error": f.last_error}
                for f in self.files if wanted in (None, f.name)]

    def describe(self) -> str:
        return f"{self.stats.zones} zone(s), {self.stats.records} records"

    def import_for_reload(self) -> None:
        import_rdata_classes()

    def tcp_worker(self, fd: int, index: int):
        cfg = self.cfg
        workers = len(self.tcp_sockets)
        # each worker's share, the sources' limit rounded up so a client spread over
        # the workers by the kernel's hash still gets about its due
        per_worker = -(-cfg.tcp_max_clients // workers)
        per_source = -(-cfg.tcp_max_per_source // workers)
        _raise_file_limit(per_worker + 64)
        return _core.FrameWorker.dns_tcp(
            fd, index, self.ref, max_connections=per_worker, max_per_source=per_source,
            io_timeout_ms=max(1, int(cfg.tcp_io_timeout * 1000)),
            idle_timeout_ms=max(1, int(cfg.tcp_idle_timeout * 1000)), max_udp=cfg.max_udp)

    def summary(self, c: dict) -> str:
        return (super().summary(c) + f" tcp_connections={c['tcp_connections']} "
                f"open={c['tcp_open']} io_timeouts={c['tcp_io_timeouts']} "
                f"idle_timeouts={c['tcp_idle_timeouts']} evicted={c['tcp_evicted']} "
                f"refused={c['tcp_refused']} source_limited={c['tcp_source_limited']}")


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
