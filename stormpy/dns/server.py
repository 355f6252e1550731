"""serve-dns: zones compiled into the table, UDP answered by the workers in C, and DNS
over TCP (RFC 7766) answered from the same table in the server process."""
from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field

from stormpy.config import ServerConfig
from stormpy.dns.compiler import compile_zones
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


def load_table(cfg: DnsConfig):
    zones = load_zones(cfg.zones, cfg.origins)
    return compile_zones(zones, cfg.chaos_version, cfg.chaos_identity)


class DnsServer(Server):
    """The zones' table on the workers; TCP in this process."""
    serves_tcp = True

    def __init__(self, cfg: DnsConfig):
        self.connections = 0
        super().__init__(cfg)

    def load(self):
        return load_table(self.cfg)

    def describe(self) -> str:
        return f"{self.stats.zones} zone(s), {self.stats.records} records"

    def import_for_reload(self) -> None:
        import_rdata_classes()

    async def tcp_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        if self.connections >= TCP_MAX_CONNECTIONS:
            writer.close()
            return
        self.connections += 1
        fd = writer.get_extra_info("socket").fileno()
        self._client_fds.add(fd)
        try:
            while True:
                try:
                    head = await asyncio.wait_for(reader.readexactly(2), TCP_IDLE_SECONDS)
                    (length,) = struct.unpack("!H", head)
                    query = await asyncio.wait_for(reader.readexactly(length), TCP_IDLE_SECONDS)
                except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
                    break
                self.tcp_queries += 1
                answer = self.ref.dns_answer(query, tcp=True, max_udp=self.cfg.max_udp)
                if answer is None:
                    continue        # not a query: nothing to say
                writer.write(struct.pack("!H", len(answer)) + answer)
                # a client that stops reading loses its connection, not the server's
                await asyncio.wait_for(writer.drain(), TCP_IDLE_SECONDS)
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            self.connections -= 1
            self._client_fds.discard(fd)
            writer.close()



def serve_dns(cfg: DnsConfig) -> None:
    asyncio.run(DnsServer(cfg).serve())
