"""The server every application runs in: worker processes in C, reloads and control in
Python.

One worker process per socket (the embedded default) or per NIC queue (--iface)
runs the C loop: RX batch -> answer from the published table -> TX batch. The
server process supervises them (stormpy.supervisor) and runs an asyncio loop for
the application's TCP, reloads (SIGHUP, `stormpy ctl reload`), SIGTERM/SIGINT, the
control socket (`stormpy ctl`) and periodic statistics. Tables and counters live in
memory shared with the workers, so a reload is one pointer swap that every worker
sees at its next batch.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
from abc import ABC, abstractmethod

from stormpy import _core, privileges
from stormpy.backends import attach_xdp, warn_napi_deferral, why_unusable
from stormpy.config import ServerConfig, parse_allow
from stormpy.control import lookup_group, open_control, server_commands
from stormpy.errors import StormpyError
from stormpy.interfaces import interface_identity, rx_queue_count
from stormpy.counters import format_counters, summed, with_driver
from stormpy.metrics import open_metrics
from stormpy.reloads import ReloadQueue, asked_while_starting, config_changed
from stormpy.sockets import TCP_SEND_BUFFER, open_sinks, open_tcp_listeners, open_udp_sockets
from stormpy.supervisor import WorkerPool
from stormpy.table_region import shared_table_ref
from stormpy.tap import create_region, give_region, region_status, remove_region

log = logging.getLogger("stormpy")


class Server(ABC):
    """The application-neutral server: worker processes on sockets or an interface's
    rings answering from one published table, reloads, signals, privileges, counters
    and the control socket. An application (stormpy.dns.server, stormpy.responder)
    fills in the hooks below: what the table is, how a worker is set up, TCP."""
    # TCP worker processes (tcp_worker()) answer on the served addresses too: after
    # the frame or socket workers, tcp_workers per listening socket
    serves_tcp = False
    # what a socket worker reads: its own UDP socket, or (stream) its own TCP listener
    stream = False
    ring_poll_ms = 100          # the longest a ring worker waits for frames
    steer_all = False           # ring workers take every frame, not just the port's
    answers_in_driver = False   # the XDP program answers too: the application fills its map

    def __init__(self, cfg: ServerConfig):
        self.cfg = cfg
        self.sinks: list[socket.socket] = []
        self.worker_sockets: list[socket.socket] = []
        self.tcp_sockets: list[socket.socket] = []    # one per TCP worker
        self.xdp = None
        self.guard = None           # AF_PACKET and a stream: the kernel's TCP kept off the port
        self.tap = None             # rings only: the region `stormpy tap` reads (stormpy.tap)
        self.reloads = self.reload_failures = 0
        self.reload_errors: list[str] = []     # zones a reload left at their previous version
        self.reload_seconds = 0.0       # the last successful reload's, for --metrics
        self._reloads = ReloadQueue(self._reload)
        self._prefaulted = None     # the future of ref.prefault(), run after each swap
        self._client_fds: set[int] = set()
        self._control_server = None
        self._metrics_server = None
        self._stop: asyncio.Event | None = None
        self.started_at = time.monotonic()
        self.user = privileges.lookup(cfg.user) if cfg.user else None
        self.control_group = lookup_group(cfg.control_group) if cfg.control_group else None
        if cfg.iface:
            self._init_frames(cfg)
        else:
            self._init_sockets(cfg)

    def _init_sockets(self, cfg: ServerConfig):
        self.workers_per_address = cfg.workers or os.cpu_count() or 1
        table, self.stats = self.load()
        total = self.workers_per_address * len(cfg.listen)
        if total > _core.MAX_WORKERS:
            raise StormpyError(f"at most {_core.MAX_WORKERS} workers in all")
        try:
            for host, port in cfg.listen:
                if self.stream:
                    self.worker_sockets += open_tcp_listeners(host, port,
                                                              self.workers_per_address)
                else:
                    self.worker_sockets += open_udp_sockets(host, port, self.workers_per_address,
                                                            cfg.poll == "busy")
                if self.serves_tcp:
                    self.tcp_sockets += open_tcp_listeners(host, port, cfg.tcp_workers,
                                                           TCP_SEND_BUFFER)
            self.frame_workers = total
            total += len(self.tcp_sockets)
            if total > _core.MAX_WORKERS:
                raise StormpyError(f"at most {_core.MAX_WORKERS} workers in all, TCP's included")
            self.ref = shared_table_ref(table, total, self.table_reserve, self.table_changes_often)
            self._set_rrl()
        except StormpyError:
            self._close_sockets()
            raise
        self.pool = WorkerPool(self.ref, total, self._socket_worker, cfg.cpus, self._worker_drop)

    def _set_rrl(self):
        cfg = self.cfg
        if cfg.rrl_rate:
            self.ref.set_rrl(cfg.rrl_rate, cfg.rrl_slip, cfg.rrl_ipv4_prefix, cfg.rrl_ipv6_prefix,
                             parse_allow(cfg.rrl_allow))

    def _socket_worker(self, index: int):
        """In worker process `index`: a worker on the socket the server keeps open,
        so a restarted worker finds the datagrams that arrived meanwhile."""
        if index >= self.frame_workers:
            return self._tcp_worker(index)
        self._close_inherited(keep=self.worker_sockets[index].fileno())
        sock = self.worker_sockets[index]
        w = self.socket_worker(os.dup(sock.fileno()), index, sock)
        self.configure_worker(w, sock.getsockname()[0])
        return w

    def socket_worker(self, fd: int, index: int, sock: socket.socket):
        """The worker on fd, a duplicate of sock that the worker closes."""
        return _core.FrameWorker.socket(fd, index, self.ref, batch=self.cfg.batch,
                                        max_udp=self.cfg.max_udp, port=sock.getsockname()[1])

    # -- what an application provides --------------------------------------------
    @abstractmethod
    def load(self):
        """The table to serve and its statistics (runs off the event loop on reload)."""

    @abstractmethod
    def describe(self) -> str:
        """What is served, for the log."""

    def configure_worker(self, w, local_address: str | None) -> None:
        """In a worker process, once its backend is open."""

    def import_for_reload(self) -> None:
        """Import what load() imports lazily, before the server gives up its user."""

    def reload_table(self, zones: frozenset[str] | None):
        """load() for a reload (off the event loop); zones: only these were asked for
        (names zone_name() gave), where the application can re-read just those."""
        return self.load()

    table_reserve = 0       # shared memory to reserve for data that come later (a secondary's)
    table_changes_often = False     # keep a second table's pages warm (a secondary's)

    def reload_published(self) -> None:
        """After a reload's table is published."""

    def zone_name(self, name: str) -> str:
        """The zone `stormpy ctl` names, as reload_table() and zone_status() know it."""
        raise StormpyError(f"this server has no zones (it serves {self.describe()})")

    def zone_status(self, name: str | None) -> list[dict]:
        """Each zone's (or the named one's) serial, file, load time, counts, last error."""
        self.zone_name(name or "")          # a server without zones says so
        return []

    def started(self) -> None:
        """On the event loop, once the workers run: the application's own tasks."""

    def summary(self, counters: dict) -> str:
        """The counters on one line, for the log."""
        return format_counters(counters)

    # with serves_tcp, an application also has
    #     def tcp_worker(self, fd, index): the worker on listening TCP socket fd
    def _tcp_worker(self, index: int):
        """In worker process `index`: a TCP worker on the listener the server keeps."""
        sock = self.tcp_sockets[index - self.frame_workers]
        self._close_inherited(keep=sock.fileno())
        return self.tcp_worker(os.dup(sock.fileno()), index)

    def _init_frames(self, cfg: ServerConfig):
        """One run-to-completion worker per RX queue on cfg.iface's rings; TCP and the
        sink sockets on the kernel's stack."""
        reason = why_unusable(cfg.backend)
        if reason:
            raise StormpyError(f"--backend {cfg.backend}: {reason}")
        if cfg.user and cfg.backend == "netmap":
            raise StormpyError("--user with --backend netmap: a restarted worker must open "
                               "/dev/netmap, which only root may; run netmap serving as root")
        queues = cfg.queues or rx_queue_count(cfg.iface)
        if queues > _core.MAX_WORKERS:
            raise StormpyError(f"at most {_core.MAX_WORKERS} queues")
        table, self.stats = self.load()
        self.workers_per_address = queues
        self.listen_text = f"{cfg.iface} port {cfg.port} ({cfg.backend}, {queues} queue(s))"
        self.identity = interface_identity(cfg.iface, need_address=not self.steer_all)
        if not self.stream:      # a ring answers UDP: the kernel must not (see open_sinks)
            self.sinks = open_sinks(cfg.port)
        self.frame_workers = queues
        try:
            if self.serves_tcp:     # on the kernel's TCP, which the rings pass it to
                self.tcp_sockets = [s for host in ("0.0.0.0", "::") for s in open_tcp_listeners(
                    host, cfg.port, cfg.tcp_workers, TCP_SEND_BUFFER)]
                self.listen_text += f", TCP {len(self.tcp_sockets)} worker(s)"
            self.ref = shared_table_ref(table, queues + len(self.tcp_sockets), self.table_reserve,
                                        self.table_changes_often)
            self._set_rrl()
            self.tap = create_region(queues, cfg.tap_buffer)
            if self.tap is not None:
                self.ref.set_tap(self.tap, queues)
            self.fanout_group = (os.getpid() & 0x7fff) + 1
            if cfg.backend == "xdp":
                # port 0: the program steers every frame to the workers
                self.xdp = attach_xdp(cfg.iface, 0 if self.steer_all else cfg.port,
                                      cfg.xdp_mode, tcp=self.stream, answer=self.answers_in_driver)
                if cfg.poll == "napi":
                    warn_napi_deferral(cfg.iface)
            elif cfg.backend == "packet" and self.stream:
                self.guard = _core.TcpGuard(cfg.iface, cfg.port, self.identity["addresses"])
        except Exception:
            self._close_sockets()
            raise
        self.pool = WorkerPool(self.ref, queues + len(self.tcp_sockets), self._frame_worker,
                               cfg.cpus, self._worker_drop,
                               privileges.raise_effective if self.user else None)

    def _frame_worker(self, index: int):
        """In worker process `index`: its queue's ring, opened here."""
        cfg = self.cfg
        if index >= self.frame_workers:
            return self._tcp_worker(index)
        self._close_inherited()
        if cfg.backend == "xdp":
            w = _core.FrameWorker.xdp(self.xdp, index, self.ref, cfg.port, cfg.batch,
                                      poll=cfg.poll, copy_mode=cfg.copy_mode,
                                      max_udp=cfg.max_udp, mode=cfg.mode,
                                      poll_ms=self.ring_poll_ms, tx_limit=cfg.tx_limit)
        elif cfg.backend == "netmap":
            w = _core.FrameWorker.netmap(cfg.iface, index, self.ref, cfg.port, cfg.batch,
                                         busy_poll=cfg.poll == "busy", max_udp=cfg.max_udp,
                                         own=None if self.steer_all else self.identity,
                                         mode=cfg.mode)
        else:
            w = _core.FrameWorker.packet(cfg.iface, index, self.ref, cfg.port, cfg.batch,
                                         fanout_group=self.fanout_group,
                                         busy_poll=cfg.poll == "busy",
                                         max_udp=cfg.max_udp, mode=cfg.mode,
                                         poll_ms=self.ring_poll_ms)
        w.set_identity(self.identity)
        w.set_tx_flush_us(cfg.tx_flush_us)
        self.configure_worker(w, None)
        return w

    def _worker_drop(self):
        """In a worker whose backend is open: running it needs no privilege at all."""
        if self.user is not None:
            privileges.drop_to(self.user)

    def _drop_privileges(self):
        """The server keeps what a replacement worker needs to open its queue again.
        What a reload imports lazily is imported first: the new user may not be able
        to read this Python's files. The control socket becomes the user's, so it can
        still remove it at exit."""
        import concurrent.futures.thread  # noqa: F401  (run_in_executor's)
        self.import_for_reload()
        give_region(self.tap, self.user)    # so it can still remove it at exit too
        if self._control_server is not None:
            try:
                os.chown(self.cfg.control, self.user.pw_uid,
                         self.user.pw_gid if self.control_group is None else -1)
            except OSError:
                pass
        keep = privileges.RING_CAPS if self.cfg.iface else ()
        privileges.drop_to(self.user, keep)
        log.info("running as user %s (uid %d)%s", self.user.pw_name, self.user.pw_uid,
                 f", holding {len(keep)} capabilities (not in effect) to reopen queues" if keep else
                 ", with no capabilities")

    def _close_inherited(self, keep: int = -1):
        """A worker process closes the server's TCP listeners and connections and the
        other workers' sockets: while it held them, a connection the server closed
        would stay open."""
        fds = {s.fileno() for s in self.tcp_sockets + self.worker_sockets + self.sinks}
        for listener in (self._control_server, self._metrics_server):
            if listener is not None:
                fds |= {s.fileno() for s in listener.sockets}
        for fd in (fds | self._client_fds) - {keep, -1}:
            try:
                os.close(fd)
            except OSError:
                pass

    def _close_sockets(self):
        """And the tap region, which only the workers on those rings write."""
        for s in self.sinks + self.tcp_sockets + self.worker_sockets:
            s.close()
        remove_region(self.tap)

    # -- workers ---------------------------------------------------------------
    def start_workers(self):
        self.pool.start()
        self.pool.watch(asyncio.get_running_loop())

    def stop_workers(self):
        self.pool.stop()

    def release(self):
        """Close the program and sockets once the workers are gone."""
        if self.pool.alive():
            log.warning("a worker is still running; its backend is left open")
            return
        if self.xdp is not None:
            self.xdp.detach()
        if self.guard is not None:
            self.guard.detach()
        self._close_sockets()

    def counters(self) -> dict:
        total = summed(self.ref.worker_counters(i) for i in range(self.pool.count))
        total["tcp_queries"] = self.tcp_queries()
        with_driver(total, self.xdp.counters() if self.xdp is not None else {})
        total["reloads"] = self.reloads
        total["reload_failures"] = self.reload_failures
        total["restarts"] = sum(self.pool.restarts)
        return total

    def tcp_queries(self) -> int:
        return sum(self.ref.worker_counters(i)["queries"]
                   for i in range(self.frame_workers, self.pool.count))

    # -- reload ----------------------------------------------------------------
    async def reload(self, zones: frozenset[str] | None = None) -> dict:
        """Reload (zones: only these), after the reload that runs if any; its result,
        {"error": one line} when it failed and the previous table still serves."""
        return await self._reloads.request(zones)

    async def _reload(self, zones: frozenset[str] | None) -> dict:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        try:
            table, stats = await loop.run_in_executor(None, self.reload_table, zones)
            built = time.monotonic()
            if self._prefaulted is not None:
                await self._prefaulted
            # tables an earlier reload had to keep (a slow download pinned one) go now
            # if nothing reads them any more: else a full region never empties again
            await loop.run_in_executor(None, self.ref.reclaim, 0)
            await loop.run_in_executor(None, self.ref.publish, table)   # a copy: off the loop
            published = time.monotonic()
        except Exception as e:      # past StormpyError and MemoryError, a bug: still serving
            self.reload_failures += 1
            why = str(e) if isinstance(e, (StormpyError, MemoryError)) else \
                f"internal error {type(e).__name__}: {e}"
            log.error("reload failed, still serving what was loaded before: %s", why)
            return {"error": f"reload failed, still serving what was loaded before: {why}"}
        self.stats = stats
        self.reload_published()
        self.reloads += 1
        errors, self.reload_errors = self.reload_errors, []
        self.reload_failures += bool(errors)
        for e in errors:
            log.error("reload: %s", e)
        notes = config_changed(self.cfg)
        self.reload_seconds = time.monotonic() - started
        what = f"zone(s) {', '.join(sorted(zones))} of " if zones else ""
        log.info("reloaded %s%s, %d keys in %.2f s (table %.2f s, placed for the workers "
                 "%.2f s)", what, self.describe(), stats.keys, self.reload_seconds,
                 built - started, published - built)
        # waiting for the workers to move on happens off the loop: TCP and respawns go on
        if not await loop.run_in_executor(None, self.ref.reclaim, 5000):
            log.warning("a worker did not leave the old table within 5 s; it is kept until a "
                        "later reload can free it")
        self._prefaulted = loop.run_in_executor(None, self.ref.prefault)
        return {"serving": self.describe(), "seconds": round(self.reload_seconds, 3),
                **({"errors": errors} if errors else {}), **({"notes": notes} if notes else {})}

    # -- control socket (stormpy ctl) -------------------------------------------
    def snapshot(self) -> dict:
        """What `stormpy stats` (`stormpy ctl stats`) shows of this server."""
        return {"pid": os.getpid(), "serving": self.describe(),
                "zones": getattr(self.stats, "zones", 0),
                "records": getattr(self.stats, "records", 0), "backend": self.cfg.backend,
                "tcp_queries": self.tcp_queries(),
                "reloads": self.reloads, "reload_failures": self.reload_failures,
                "workers": [dict(self.ref.worker_counters(i), pid=self.pool.pids[i],
                                 ready=self.pool.ready[i], restarts=self.pool.restarts[i],
                                 kind="tcp" if i >= self.frame_workers else "frames")
                            for i in range(self.pool.count)],
                "tap": region_status(self.tap, self.cfg),
                **(self.xdp.counters() if self.xdp is not None else {})}

    def listening(self) -> str:
        if getattr(self, "listen_text", None):
            return self.listen_text
        protocols = "tcp" if self.stream else "udp+tcp" if self.serves_tcp else "udp"
        tcp = f" and {self.cfg.tcp_workers} for TCP" if self.serves_tcp else ""
        return ", ".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.cfg.listen) + \
            f" ({protocols}), {self.workers_per_address} worker process(es){tcp} per address"

    # -- main loop -------------------------------------------------------------
    def request_stop(self):
        self._stop.set()

    async def serve(self):
        loop = asyncio.get_running_loop()
        stop = self._stop = asyncio.Event()
        servers, control, started = [], None, False
        try:
            control = self._control_server = await open_control(
                self.cfg.control, self.cfg.control_required, server_commands(self),
                self.control_group)
            if control:
                servers.append(control)
            self._metrics_server = await open_metrics(self.cfg.metrics, self)
            if self._metrics_server:
                servers.append(self._metrics_server)
            loop.add_signal_handler(signal.SIGTERM, stop.set)
            loop.add_signal_handler(signal.SIGINT, stop.set)
            loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(self.reload()))
            if asked_while_starting():
                log.info("a reload was asked for while starting: the files are read again")
                asyncio.ensure_future(self.reload())
            self.start_workers()
            started = True
            # pages for the next table, off the loop; a reload waits for them first
            self._prefaulted = loop.run_in_executor(None, self.ref.prefault)
            self.started()
            if self.user is not None:
                self._drop_privileges()
            log.info("serving %s on %s", self.describe(), self.listening())
            while not stop.is_set():
                timeout = self.cfg.stats_interval or None
                try:
                    await asyncio.wait_for(stop.wait(), timeout)
                except asyncio.TimeoutError:
                    log.info("%s", self.summary(self.counters()))
        finally:
            for s in servers:
                s.close()
            if control:
                try:
                    os.unlink(self.cfg.control)
                except OSError:
                    pass
            self.stop_workers()
            if started:
                key = "http_requests" if self.stream else "rx"
                log.info("stopped: %s; per worker %s=%s", self.summary(self.counters()), key,
                         ",".join(str(self.ref.worker_counters(i)[key])
                                  for i in range(self.frame_workers)))
            self.release()

