"""serve-dns: zones compiled into the table, UDP answered by the workers in C, and DNS
over TCP (RFC 7766) answered from the same table in the server process."""
from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field

from stormpy.config import ServerConfig
from stormpy.dns.compiler import assign_zone_slots, compile_zones
from stormpy.dns.zone import import_rdata_classes, load_zones
from stormpy.server import Server

TCP_IDLE_SECONDS = 10.0
TCP_MAX_CONNECTIONS = 512


@dataclass
class DnsConfig(ServerConfig):
    zones: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    chaos_version: str | None = None
    chaos_identity: str | None = None


def load_table(cfg: DnsConfig, zone_slots: dict | None = None):
    """The zones' table and its statistics; zone_slots, kept by a server across
    reloads, numbers each zone's answer counters (assign_zone_slots)."""
    zones = load_zones(cfg.zones, cfg.origins)
    if zone_slots is not None:
        assign_zone_slots(zone_slots, zones)
    return compile_zones(zones, cfg.chaos_version, cfg.chaos_identity, zone_slots=zone_slots)


class DnsServer(Server):
    """The zones' table on the workers; TCP in this process."""
    serves_tcp = True

    def __init__(self, cfg: DnsConfig):
        self.connections = 0
        # DNS over TCP, for --metrics: connections taken, refused (too many), timed out
        self.tcp_accepted = self.tcp_refused = self.tcp_timed_out = 0
        self.zone_slots: dict = {}      # zone origin -> its answer counter's slot
        super().__init__(cfg)

    def load(self):
        return load_table(self.cfg, self.zone_slots)

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
