"""serve-http: a directory compiled into the table, HTTP/1.1 answered by the workers in
C. On the kernel's TCP (the embedded default) each worker runs an epoll loop on its
own listening socket (native/include/stormpy/app/http/stream.h)."""
from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

from stormpy import _core
from stormpy.config import ServerConfig
from stormpy.errors import StormpyError
from stormpy.http.site import compile_site
from stormpy.server import Server


@dataclass
class HttpConfig(ServerConfig):
    site: str = "."
    max_connections: int = 1024      # per worker
    request_timeout: float = 10.0    # a request head must arrive within (408 after)
    idle_timeout: float = 30.0       # a kept-alive connection without a request
    send_timeout: float = 30.0       # a client that reads nothing
    gso: bool = True                 # on the rings: 64 KB frames cut by the kernel or NIC


class HttpServer(Server):
    """The site's table on the workers; each worker its own TCP listener."""
    stream = True
    ring_poll_ms = 5            # its own TCP's timers run when the worker wakes

    def __init__(self, cfg: HttpConfig):
        super().__init__(cfg)

    def configure_worker(self, w, local_address) -> None:
        """On the rings: stormpy's own TCP in the frame worker."""
        if self.cfg.iface:
            cfg = self.cfg
            w.set_http_ring(max_connections=cfg.max_connections,
                            request_timeout_ms=int(cfg.request_timeout * 1000),
                            idle_timeout_ms=int(cfg.idle_timeout * 1000), gather=cfg.gso)

    def load(self):
        return compile_site(self.cfg.site)

    def describe(self) -> str:
        s = self.stats
        refused = f", {len(s.refused)} refused" if s.refused else ""
        return f"{self.cfg.site}: {s.files} file(s), {s.bytes} bytes{refused}"

    def socket_worker(self, fd: int, index: int, sock: socket.socket):
        cfg = self.cfg
        return _core.FrameWorker.http_socket(
            fd, index, self.ref, max_connections=cfg.max_connections,
            request_timeout_ms=int(cfg.request_timeout * 1000),
            idle_timeout_ms=int(cfg.idle_timeout * 1000),
            send_timeout_ms=int(cfg.send_timeout * 1000))

    def summary(self, c: dict) -> str:
        classes = " ".join(f"{k}xx={n}" for k, n in enumerate(c["http_status"]) if n)
        return (f"http connections={c['http_connections']} open={c['http_open']} "
                f"requests={c['http_requests']} {classes} bytes={c['http_bytes']} "
                f"timeouts={c['http_timeouts']} evicted={c['http_evicted']} "
                f"refused={c['http_refused']} retransmits={c['http_retransmits']} "
                f"cookies_sent={c['http_cookies_sent']} "
                f"cookies_accepted={c['http_cookies_accepted']}{self._rings(c)}").replace("  ", " ")

    def _rings(self, c: dict) -> str:
        """What the own TCP's sends took: frames, 64 KB ones cut by the kernel (GSO),
        pool copies."""
        if not self.cfg.iface:
            return ""
        line = f" frames={c.get('tx', 0)} gso_frames={c.get('tx_gathered', 0)}"
        if self.cfg.mode != "precopy":
            return line
        return line + (f" precopy hits={c.get('precopy_hits', 0)} fills={c.get('precopy_fills', 0)} "
                f"fallbacks={c.get('precopy_fallbacks', 0)}")

    def snapshot(self) -> dict:
        snap = super().snapshot()
        snap.update(site=self.cfg.site, files=self.stats.files, bytes=self.stats.bytes)
        return snap


def serve_http(cfg: HttpConfig) -> None:
    asyncio.run(HttpServer(cfg).serve())


def format_http_worker(c: dict) -> str:
    """One worker's HTTP counters on one line, for `stormpy stats`."""
    classes = " ".join(f"{k}xx={n}" for k, n in enumerate(c.get("http_status", [])) if n)
    return (f"connections={c.get('http_connections', 0)} open={c.get('http_open', 0)} "
            f"requests={c.get('http_requests', 0)} {classes} bytes={c.get('http_bytes', 0)} "
            f"timeouts={c.get('http_timeouts', 0)} evicted={c.get('http_evicted', 0)} "
            f"refused={c.get('http_refused', 0)} cookies_sent={c.get('http_cookies_sent', 0)} "
            f"cookies_accepted={c.get('http_cookies_accepted', 0)} pid={c.get('pid')} "
            f"restarts={c.get('restarts', 0)}").replace("  ", " ")
