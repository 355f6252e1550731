"""serve-dns: zones compiled into the table, UDP answered by the workers in C, and DNS
over TCP (RFC 7766) answered from the same table in the server process."""
from __future__ import annotations

import asyncio
import struct
import time
from dataclasses import dataclass, field

import dns.exception
import dns.name
import dns.rdatatype

from stormpy.config import ServerConfig
from stormpy.dns.compiler import assign_zone_slots, compile_zones
from stormpy.dns.zone import Zone, import_rdata_classes, load_zone, with_origins
from stormpy.errors import StormpyError, ZoneError
from stormpy.server import Server

TCP_IDLE_SECONDS = 10.0
TCP_MAX_CONNECTIONS = 512


@dataclass
class DnsConfig(ServerConfig):
    zones: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    chaos_version: str | None = None
    chaos_identity: str | None = None


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
    """The zones' table on the workers; TCP in this process. A reload re-reads every
    zone file, or only the zones `stormpy ctl reload ZONE` names, and compiles them with
    the others as they were parsed."""
    serves_tcp = True

    def __init__(self, cfg: DnsConfig):
        self.connections = 0
        self.files = [ZoneFile(path, origin) for path, origin in with_origins(cfg.zones, cfg.origins)]
        self.zone_responses: dict[str, int] = {}
        # DNS over TCP, for --metrics: connections taken, refused (too many), timed out
        self.tcp_accepted = self.tcp_refused = self.tcp_timed_out = 0
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
                soa = z.zone.get_rdataset(z.origin, dns.rdatatype.SOA)
                f.zone, f.loaded_at, f.last_error = z, now, None
                f.serial, f.records = soa[0].serial, z.record_count

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

    async def tcp_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        if self.connections >= TCP_MAX_CONNECTIONS:
            self.tcp_refused += 1
            writer.close()
            return
        self.connections += 1
        self.tcp_accepted += 1
        fd = writer.get_extra_info("socket").fileno()
        self._client_fds.add(fd)
        try:
            while True:
                try:
                    head = await asyncio.wait_for(reader.readexactly(2), TCP_IDLE_SECONDS)
                    (length,) = struct.unpack("!H", head)
                    query = await asyncio.wait_for(reader.readexactly(length), TCP_IDLE_SECONDS)
                except asyncio.TimeoutError:
                    self.tcp_timed_out += 1
                    break
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                self.tcp_queries += 1
                answer = self.ref.dns_answer(query, tcp=True, max_udp=self.cfg.max_udp)
                if answer is None:
                    continue        # not a query: nothing to say
                writer.write(struct.pack("!H", len(answer)) + answer)
                # a client that stops reading loses its connection, not the server's
                await asyncio.wait_for(writer.drain(), TCP_IDLE_SECONDS)
        except asyncio.TimeoutError:
            self.tcp_timed_out += 1
        except OSError:
            pass
        finally:
            self.connections -= 1
            self._client_fds.discard(fd)
            writer.close()



def serve_dns(cfg: DnsConfig) -> None:
    asyncio.run(DnsServer(cfg).serve())
