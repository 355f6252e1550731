"""serve-dns: worker processes in C, TCP and reloads in Python.

One worker process per socket (the embedded default) or per NIC queue (--iface)
runs the C loop: RX batch -> answer from the published table -> TX batch. The
server process supervises them (stormpy.supervisor) and runs an asyncio loop for
TCP (RFC 7766), SIGHUP reloads, SIGTERM/SIGINT, `stormpy stats` and periodic
statistics. Tables and counters live in memory shared with the workers, so a
reload is one pointer swap that every worker sees at its next batch.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import struct
import time
from dataclasses import dataclass, field

from stormpy import _core, privileges
from stormpy.dnscompile import compile_zones
from stormpy.errors import StormpyError
from stormpy.supervisor import WorkerPool
from stormpy.zone import load_zone

log = logging.getLogger("stormpy")

TCP_IDLE_SECONDS = 10.0
TCP_MAX_CONNECTIONS = 512
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED",
          9: "NOTAUTH", 16: "BADVERS"}


@dataclass
class DnsConfig:
    zones: list[str]
    origins: list[str] = field(default_factory=list)
    listen: list[tuple[str, int]] = field(default_factory=lambda: [("127.0.0.1", 5353)])
    workers: int = 0
    batch: int = 32
    max_udp: int = 1232
    chaos_version: str | None = None
    chaos_identity: str | None = None
    stats_interval: float = 0.0
    control: str | None = None       # Unix socket answering `stormpy stats`
    control_required: bool = False   # False: the default path, given up with a warning if taken
    iface: str | None = None         # serve on this interface's rings instead of sockets
    backend: str = "socket"          # socket | packet
    queues: int = 0                  # frame workers (default: the device's RX queues)
    port: int = 53                   # the UDP/TCP port served with --iface
    cpus: list[int] = field(default_factory=list)
    busy_poll: bool = False
    xdp_mode: str = "auto"           # auto | native | generic
    tx_flush_us: int = 0             # 0: kick TX every batch
    copy_mode: str = "auto"          # auto | copy | zerocopy
    user: str | None = None          # run as this user once rings and sockets are set up
    mode: str = "memcpy"             # memcpy | precopy (frame backends only)
    rrl_rate: int = 0                # response rate limiting: answers/s per prefix (0: off)
    rrl_slip: int = 2                # every Nth limited answer goes out truncated (0: none)
    rrl_ipv4_prefix: int = 24
    rrl_ipv6_prefix: int = 56
    rrl_allow: list[str] = field(default_factory=list)   # prefixes never limited


def parse_listen(text: str, default_port: int = 53) -> tuple[str, int]:
    """ADDR:PORT, [V6ADDR]:PORT, or a bare ADDR (default_port)."""
    host, port = text, str(default_port)
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise StormpyError(f"--listen {text}: expected [ADDRESS]:PORT")
        port = rest[1:] or str(default_port)
    elif text.count(":") == 1:
        host, port = text.split(":")
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        socket.inet_pton(family, host)
        number = int(port)
        if not 0 < number < 65536:
            raise ValueError
    except (OSError, ValueError):
        raise StormpyError(f"--listen {text}: expected ADDRESS:PORT with a numeric address "
                           f"and a port from 1 to 65535") from None
    if host in ("0.0.0.0", "::"):
        raise StormpyError(f"--listen {text}: give each address to serve on; a wildcard socket "
                           f"may answer from another address than the one asked")
    return host, number


def shared_table_ref(table, workers: int):
    """The published table and the workers' state, in memory shared with worker
    processes. The region reserves address space for several reloads of a zone
    that grows (pages are only taken when written); a smaller one is tried where
    the kernel refuses to overcommit."""
    size = max(256 << 20, 8 * table.flat_size() + (64 << 20))
    while True:
        try:
            return _core.TableRef(table, workers, shared_bytes=size)
        except StormpyError:
            if size <= 3 * table.flat_size() + (16 << 20):
                raise
            size //= 2


def parse_allow(texts: list[str]) -> list[tuple[int, bytes, int]]:
    """--rrl-allow prefixes as (family, packed network, length)."""
    import ipaddress
    if len(texts) > 16:
        raise StormpyError(f"{len(texts)} --rrl-allow prefixes: at most 16")
    out = []
    for text in texts:
        try:
            net = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise StormpyError(f"--rrl-allow {text}: expected a prefix like 192.0.2.0/24 "
                               f"or 2001:db8::/48") from None
        out.append((net.version, net.network_address.packed, net.prefixlen))
    return out


def load_table(cfg: DnsConfig):
    if cfg.origins and len(cfg.origins) != len(cfg.zones):
        raise StormpyError(f"{len(cfg.origins)} --origin for {len(cfg.zones)} zone files: give "
                           f"one --origin per zone file, in the same order, or none")
    origins = cfg.origins or [None] * len(cfg.zones)
    zones = [load_zone(path, origin) for path, origin in zip(cfg.zones, origins)]
    return compile_zones(zones, cfg.chaos_version, cfg.chaos_identity)


def _bind_error(proto: str, host: str, port: int, err: OSError) -> StormpyError:
    reason = err.strerror or str(err)
    hint = ""
    if err.errno == 13:
        hint = " (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
    elif err.errno == 98:
        hint = " (another server is using it)"
    elif err.errno == 99:
        hint = " (no interface has this address)"
    return StormpyError(f"cannot listen on {proto} {host}:{port}: {reason}{hint}")


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


SO_BUSY_POLL = 46
BUSY_POLL_US = 50        # the kernel spins this long for a datagram before sleeping


def open_udp_sockets(host: str, port: int, count: int,
                     busy_poll: bool = False) -> list[socket.socket]:
    """count sockets sharing host:port through SO_REUSEPORT. A plain bind first
    makes sure no other process holds the port, reuseport or not. busy_poll asks
    the kernel to spin for datagrams (SO_BUSY_POLL), where it lets us."""
    family = _family(host)
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            probe.bind((host, port))
    except OSError as e:
        raise _bind_error("udp", host, port, e) from None
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(family, socket.SOCK_DGRAM)
            socks.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 100_000))
            if busy_poll:
                try:
                    s.setsockopt(socket.SOL_SOCKET, SO_BUSY_POLL, BUSY_POLL_US)
                except OSError as e:
                    if not socks[:-1]:
                        log.warning("no busy polling on sockets (SO_BUSY_POLL: %s)", e.strerror)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind((host, port))
    except OSError as e:
        for s in socks:
            s.close()
        raise _bind_error("udp", host, port, e) from None
    return socks


def open_tcp_socket(host: str, port: int) -> socket.socket:
    family = _family(host)
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((host, port))
        s.listen(128)
    except OSError as e:
        s.close()
        raise _bind_error("tcp", host, port, e) from None
    s.setblocking(False)
    return s


def rx_queue_count(iface: str) -> int:
    """The device's RX queues, from sysfs (veth reports what it was created with)."""
    try:
        return max(1, len([q for q in os.listdir(f"/sys/class/net/{iface}/queues")
                           if q.startswith("rx-")]))
    except OSError:
        raise StormpyError(f"--iface {iface}: no such network interface") from None


def interface_identity(iface: str, need_address: bool = True) -> dict:
    """What the kernel has for iface: its MAC, MTU and addresses. Ring workers answer
    only frames sent to them; netmap serving answers ARP, ping and NDP for the first
    IPv4 and global IPv6 address ("ipv4", "ipv6")."""
    import ipaddress
    import subprocess
    try:
        with open(f"/sys/class/net/{iface}/address") as f:
            mac = bytes.fromhex(f.read().strip().replace(":", ""))
        with open(f"/sys/class/net/{iface}/mtu") as f:
            mtu = int(f.read())
        out = subprocess.run(["ip", "-j", "addr", "show", "dev", iface], capture_output=True,
                             text=True, timeout=10).stdout
        addrs = json.loads(out)[0]["addr_info"] if out.strip() else []
    except (OSError, ValueError, IndexError, KeyError, subprocess.SubprocessError) as e:
        raise StormpyError(f"--iface {iface}: cannot read its addresses: {e}") from None
    ident = {"mac": mac, "mtu": min(mtu, 65535), "addresses": []}
    for a in addrs:
        ip = ipaddress.ip_address(a["local"])
        ident["addresses"].append(ip.packed)
        key = "ipv4" if ip.version == 4 else "ipv6"
        if key not in ident and not ip.is_link_local:
            ident[key] = ip.packed
    if not ident["addresses"] and need_address:
        raise StormpyError(f"--iface {iface}: it has no IP address to serve on")
    return ident


def open_sinks(port: int) -> list[socket.socket]:
    """UDP sockets on the served port that are never read: the kernel still sees every
    frame a ring backend answers, and without a socket it would send ICMP port
    unreachable for each query."""
    sinks = []
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        s = socket.socket(family, socket.SOCK_DGRAM)
        try:
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
            s.bind((host, port))
        except OSError as e:
            s.close()
            for x in sinks:
                x.close()
            if e.errno == 98:
                raise StormpyError(f"UDP port {port} is in use on this host: that server would "
                                   f"answer the same queries; stop it or choose --port") from None
            raise _bind_error("udp", host, port, e) from None
        sinks.append(s)
    return sinks


class DnsServer:
    """serve-dns; also the base of a custom responder's server (stormpy.app), which
    replaces the hooks below: what the table is, how a worker is set up, TCP."""
    serves_tcp = True           # DNS over TCP from the same table, in this process
    steer_all = False           # ring workers take every frame, not just the port's

    def __init__(self, cfg: DnsConfig):
        self.cfg = cfg
        self.sinks: list[socket.socket] = []
        self.udp_sockets: list[socket.socket] = []
        self.tcp_sockets: list[socket.socket] = []
        self.xdp = None
        self.connections = self.tcp_queries = self.reloads = self.reload_failures = 0
        self._reloading = False
        self._client_fds: set[int] = set()
        self._control_server = None
        self.user = privileges.lookup(cfg.user) if cfg.user else None
        if cfg.iface:
            self._init_frames(cfg)
        else:
            self._init_sockets(cfg)

    def _init_sockets(self, cfg: DnsConfig):
        self.workers_per_address = cfg.workers or os.cpu_count() or 1
        table, self.stats = self.load()
        total = self.workers_per_address * len(cfg.listen)
        if total > _core.MAX_WORKERS:
            raise StormpyError(f"at most {_core.MAX_WORKERS} workers in all")
        try:
            for host, port in cfg.listen:
                self.udp_sockets += open_udp_sockets(host, port, self.workers_per_address,
                                                     cfg.busy_poll)
                if self.serves_tcp:
                    self.tcp_sockets.append(open_tcp_socket(host, port))
            self.ref = shared_table_ref(table, total)
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
        self._close_inherited(keep=self.udp_sockets[index].fileno())
        sock = self.udp_sockets[index]
        fd = os.dup(sock.fileno())
        w = _core.FrameWorker.socket(fd, index, self.ref, batch=self.cfg.batch,
                                     max_udp=self.cfg.max_udp, port=sock.getsockname()[1])
        self.configure_worker(w, sock.getsockname()[0])
        return w

    # -- hooks for custom responders (stormpy.app) -------------------------------
    def load(self):
        """The table to serve and its statistics (runs off the event loop on reload)."""
        return load_table(self.cfg)

    def configure_worker(self, w, local_address: str | None) -> None:
        """In a worker process, once its backend is open."""

    def describe(self) -> str:
        return f"{self.stats.zones} zone(s), {self.stats.records} records"

    def _init_frames(self, cfg: DnsConfig):
        """One run-to-completion worker per RX queue on cfg.iface's rings; TCP and the
        sink sockets on the kernel's stack."""
        from stormpy.backends import why_unusable
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
        self.sinks = open_sinks(cfg.port)
        try:
            if self.serves_tcp:
                self.tcp_sockets = [open_tcp_socket("0.0.0.0", cfg.port),
                                    open_tcp_socket("::", cfg.port)]
            self.ref = shared_table_ref(table, queues)
            self._set_rrl()
            self.fanout_group = (os.getpid() & 0x7fff) + 1
            if cfg.backend == "xdp":
                # port 0: the program steers every frame to the workers
                self.xdp = _core.XdpProgram(cfg.iface, 0 if self.steer_all else cfg.port,
                                            cfg.xdp_mode)
        except Exception:
            self._close_sockets()
            raise
        self.pool = WorkerPool(self.ref, queues, self._frame_worker, cfg.cpus, self._worker_drop,
                               privileges.raise_effective if self.user else None)

    def _frame_worker(self, index: int):
        """In worker process `index`: its queue's ring, opened here."""
        cfg = self.cfg
        self._close_inherited()
        if cfg.backend == "xdp":
            w = _core.FrameWorker.xdp(self.xdp, index, self.ref, cfg.port, cfg.batch,
                                      busy_poll=cfg.busy_poll, copy_mode=cfg.copy_mode,
                                      max_udp=cfg.max_udp, mode=cfg.mode)
        elif cfg.backend == "netmap":
            w = _core.FrameWorker.netmap(cfg.iface, index, self.ref, cfg.port, cfg.batch,
                                         busy_poll=cfg.busy_poll, max_udp=cfg.max_udp,
                                         own=None if self.steer_all else self.identity,
                                         mode=cfg.mode)
        else:
            w = _core.FrameWorker.packet(cfg.iface, index, self.ref, cfg.port, cfg.batch,
                                         fanout_group=self.fanout_group, busy_poll=cfg.busy_poll,
                                         max_udp=cfg.max_udp, mode=cfg.mode)
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
        import dns.rdata
        import dns.rdataclass
        import dns.rdatatype
        for rdtype in dns.rdatatype.RdataType:
            try:
                dns.rdata.get_rdata_class(dns.rdataclass.IN, rdtype)
            except Exception:
                pass
        if self._control_server is not None:
            try:
                os.chown(self.cfg.control, self.user.pw_uid, self.user.pw_gid)
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
        fds = {s.fileno() for s in self.tcp_sockets + self.udp_sockets + self.sinks}
        if self._control_server is not None:
            fds |= {s.fileno() for s in self._control_server.sockets}
        for fd in (fds | self._client_fds) - {keep, -1}:
            try:
                os.close(fd)
            except OSError:
                pass

    def _close_sockets(self):
        for s in self.sinks + self.tcp_sockets + self.udp_sockets:
            s.close()

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
        self._close_sockets()

    def counters(self) -> dict:
        total: dict = {}
        for i in range(self.pool.count):
            for k, v in self.ref.worker_counters(i).items():
                if isinstance(v, list):
                    total[k] = [a + b for a, b in zip(total.get(k, [0] * len(v)), v)]
                else:
                    total[k] = total.get(k, 0) + v
        total["tcp_queries"] = self.tcp_queries
        total["reloads"] = self.reloads
        total["reload_failures"] = self.reload_failures
        total["restarts"] = sum(self.pool.restarts)
        return total

    # -- reload ----------------------------------------------------------------
    async def reload(self):
        if self._reloading:
            log.warning("reload already in progress; SIGHUP ignored")
            return
        self._reloading = True
        try:
            await self._reload()
        finally:
            self._reloading = False

    async def _reload(self):
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        try:
            table, stats = await loop.run_in_executor(None, self.load)
            self.ref.publish(table)
        except (StormpyError, MemoryError) as e:
            self.reload_failures += 1
            log.error("reload failed, still serving the previous zones: %s", e)
            return
        except Exception as e:      # a bug, not bad input: still keep serving
            self.reload_failures += 1
            log.error("reload failed (internal error %s: %s), still serving the previous zones",
                      type(e).__name__, e)
            return
        self.stats = stats
        self.reloads += 1
        log.info("reloaded %s, %d keys in %.2f s", self.describe(), stats.keys,
                 time.monotonic() - started)
        # waiting for the workers to move on happens off the loop: TCP and respawns go on
        if not await loop.run_in_executor(None, self.ref.reclaim, 5000):
            log.warning("a worker did not leave the old table within 5 s; it is kept until a "
                        "later reload can free it")

    # -- TCP -------------------------------------------------------------------
    async def _tcp_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
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

    # -- control socket (stormpy stats) ----------------------------------------
    def snapshot(self) -> dict:
        return {"pid": os.getpid(), "zones": self.stats.zones, "records": self.stats.records,
                "backend": self.cfg.backend, "tcp_queries": self.tcp_queries,
                "reloads": self.reloads, "reload_failures": self.reload_failures,
                "workers": [dict(self.ref.worker_counters(i), pid=self.pool.pids[i],
                                 ready=self.pool.ready[i], restarts=self.pool.restarts[i])
                            for i in range(self.pool.count)]}

    async def _control_client(self, reader, writer):
        try:
            writer.write(json.dumps(self.snapshot()).encode() + b"\n")
            await asyncio.wait_for(writer.drain(), 5)
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()

    async def _open_control(self):
        path = self.cfg.control
        if not path:
            return None
        if os.path.exists(path):
            try:                                   # a live server keeps its socket
                _, w = await asyncio.wait_for(asyncio.open_unix_connection(path), 1)
                w.close()
                if not self.cfg.control_required:
                    log.warning("%s belongs to another server: `stormpy stats` will not see "
                                "this one (give it --control PATH)", path)
                    return None
                raise StormpyError(f"--control {path}: another server is using it")
            except (OSError, asyncio.TimeoutError):
                import stat
                if not stat.S_ISSOCK(os.lstat(path).st_mode):
                    raise StormpyError(f"--control {path}: exists and is not a socket") from None
                os.unlink(path)                    # left by a server that died
        try:
            return await asyncio.start_unix_server(self._control_client, path=path)
        except OSError as e:
            if not self.cfg.control_required:
                log.warning("no control socket at %s (%s): `stormpy stats` will not see this server",
                            path, e.strerror)
                return None
            raise StormpyError(f"--control {path}: {e.strerror}") from None

    # -- main loop -------------------------------------------------------------
    async def serve(self):
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        servers, control, started = [], None, False
        try:
            servers = [await asyncio.start_server(self._tcp_client, sock=s) for s in self.tcp_sockets]
            control = self._control_server = await self._open_control()
            if control:
                servers.append(control)
            loop.add_signal_handler(signal.SIGTERM, stop.set)
            loop.add_signal_handler(signal.SIGINT, stop.set)
            loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(self.reload()))
            self.start_workers()
            started = True
            if self.user is not None:
                self._drop_privileges()
            protocols = "udp+tcp" if self.serves_tcp else "udp"
            where = getattr(self, "listen_text", None) or ", ".join(
                f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.cfg.listen) + \
                f" ({protocols}), {self.workers_per_address} worker process(es) per address"
            log.info("serving %s on %s", self.describe(), where)
            while not stop.is_set():
                timeout = self.cfg.stats_interval or None
                try:
                    await asyncio.wait_for(stop.wait(), timeout)
                except asyncio.TimeoutError:
                    log.info("%s", format_counters(self.counters()))
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
                log.info("stopped: %s; per worker rx=%s", format_counters(self.counters()),
                         ",".join(str(self.ref.worker_counters(i)["rx"])
                                  for i in range(self.pool.count)))
            self.release()


def format_counters(c: dict) -> str:
    rcodes = " ".join(f"{RCODES.get(i, i)}={n}" for i, n in enumerate(c["rcode"]) if n)
    rules = "".join(f" {k}={c[k]}" for k in ("rule_answers", "slow_path", "slow_replies",
                                              "handler_errors", "bad_replies") if c.get(k))
    return (f"udp rx={c['rx']} tx={c['tx']} dropped={c['dropped']} truncated={c['truncated']} "
            f"tcp={c['tcp_queries']}{rules} {rcodes}".rstrip())


def format_worker(c: dict) -> str:
    """One worker's counters on one line, for `stormpy stats`."""
    rcodes = " ".join(f"{RCODES.get(i, i)}={n}" for i, n in enumerate(c.get("rcode", [])) if n)
    hist = c.get("batch_hist", [])
    sizes = " ".join(f"{1 << i}+:{n}" for i, n in enumerate(hist) if n)
    extra = "".join(f" {k}={c[k]}" for k in ("tx_ring_full", "not_ours", "bad_source", "tx_errors",
                                             "rrl_dropped", "rrl_slipped", "rule_answers",
                                             "rule_unsent", "unanswered", "slow_path",
                                             "slow_replies", "handler_errors", "bad_replies")
                    if c.get(k))
    if c.get("precopy_hits") or c.get("precopy_fills"):
        extra += (f" precopy[hits={c['precopy_hits']} fills={c['precopy_fills']} "
                  f"fallbacks={c['precopy_fallbacks']}]")
    return (f"rx={c.get('rx', 0)} tx={c.get('tx', 0)} dropped={c.get('dropped', 0)} "
            f"truncated={c.get('truncated', 0)}{extra} {rcodes} batches[{sizes}]").replace("  ", " ")


def serve_dns(cfg: DnsConfig) -> None:
    server = DnsServer(cfg)
    asyncio.run(server.serve())
