"""The control socket (`stormpy ctl`, `stormpy stats`): a Unix socket on which a server
takes one command per connection and answers it.

The protocol is one JSON line each way: the client sends {"cmd": NAME, "args": {...}},
the server answers {"ok": true, ...} or {"ok": false, "error": "one line"}. A client
that sends nothing and closes its side gets the stats (what the socket used to say).

Only root, the server's own user and, with --control-group, that group's members may
use it: the socket is created 0600 (0660 and the group's) whatever the umask, and each
connection's peer is checked (SO_PEERCRED, SO_PEERGROUPS), since a process holding
CAP_DAC_OVERRIDE passes the file's mode."""
from __future__ import annotations

import asyncio
import grp
import json
import logging
import os
import socket
import stat
import struct
import time
from typing import Awaitable, Callable

from stormpy.errors import StormpyError

log = logging.getLogger("stormpy")

Command = Callable[[dict], Awaitable[dict]]
MAX_REQUEST = 64 << 10
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)   # Linux 4.13


def lookup_group(name: str) -> int:
    """The gid --control-group names; a one-line error when there is none."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise StormpyError(f"--control-group {name}: no such group") from None


def _peer_allowed(sock: socket.socket, group: int | None) -> bool:
    """Root, this process's (effective, so after --user) user, or a member of group."""
    _, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                      struct.calcsize("3i")))
    if uid in (0, os.geteuid()):
        return True
    if group is None:
        return False
    if gid == group:
        return True
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, 1024)   # Python reads 1024 bytes at most: 256 groups
    except OSError:
        return False
    return group in struct.unpack(f"{len(raw) // 4}I", raw)


def _listening_socket(path: str, group: int | None) -> socket.socket:
    """Bound under a umask that leaves it 0600 from its first moment; a group's
    members get in (0660) only once the group is the socket's, still before listen()."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old)
        if group is not None:
            try:
                os.chown(path, -1, group)
                os.chmod(path, 0o660)
            except OSError:
                os.unlink(path)
                raise
        sock.listen(16)
    except OSError:
        sock.close()
        raise
    return sock


async def _claim(path: str, required: bool) -> bool:
    """Whether path may be taken: absent, or a socket left by a server that died
    (removed here). False (with a warning) when a live server holds it and not required."""
    if not os.path.exists(path):
        return True
    try:                                   # a live server keeps its socket
        _, w = await asyncio.wait_for(asyncio.open_unix_connection(path), 1)
        w.close()
    except PermissionError:                # another user's server: alive or not, not ours
        pass
    except (OSError, asyncio.TimeoutError):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise StormpyError(f"--control {path}: exists and is not a socket") from None
        os.unlink(path)                    # left by a server that died
        return True
    if not required:
        log.warning("%s belongs to another server: `stormpy ctl` will not see this one "
                    "(give it --control PATH)", path)
        return False
    raise StormpyError(f"--control {path}: another server is using it")


MAX_SOCKET_PATH = 107      # sockaddr_un's sun_path, less its terminating NUL


async def open_control(path: str | None, required: bool, commands: dict[str, Command],
                       group: int | None = None):
    """A Unix server at path running commands[cmd](args) for each connection's request;
    None without a path, or when the path is taken and not required (with a warning).
    A command raises StormpyError for a one-line refusal."""
    if path and len(os.fsencode(path)) > MAX_SOCKET_PATH:
        why = f"longer than the {MAX_SOCKET_PATH} bytes a Unix socket's path may have"
        if not required:
            log.warning("no control socket at %s (%s)", path, why)
            return None
        raise StormpyError(f"--control {path}: {why}; choose a shorter one")
    if not path or not await _claim(path, required):
        return None

    async def client(reader, writer):
        try:
            # read before refusing: a close with the request unread resets the
            # connection, and the client would not see why
            line = await asyncio.wait_for(reader.readline(), 5)
            if not _peer_allowed(writer.get_extra_info("socket"), group):
                answer = {"ok": False, "error": "permission denied"}
            else:
                answer = await _answer(line, commands)
            writer.write(json.dumps(answer).encode() + b"\n")
            await asyncio.wait_for(writer.drain(), 5)
        except (OSError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass                           # a client that went away or sent too much
        finally:
            writer.close()

    try:
        return await asyncio.start_unix_server(client, sock=_listening_socket(path, group),
                                               limit=MAX_REQUEST)
    except OSError as e:
        if not required:
            log.warning("no control socket at %s (%s): `stormpy ctl` will not see this server",
                        path, e.strerror)
            return None
        raise StormpyError(f"--control {path}: {e.strerror}") from None


def server_status(server) -> dict:
    """What `stormpy ctl status` shows: the process, its workers, what it serves."""
    from stormpy import privileges
    return {"pid": os.getpid(), "uptime": round(time.monotonic() - server.started_at, 1),
            "app": type(server).__name__.removesuffix("Server").lower() or "server",
            "serving": server.describe(), "backend": server.cfg.backend,
            "listening": server.listening(), "user": privileges.user_name(os.geteuid()),
            "workers": server.pool.count, "workers_alive": server.pool.alive(),
            "restarts": sum(server.pool.restarts), "reloads": server.reloads,
            "reload_failures": server.reload_failures, "reloading": server._reloads.running,
            "reload_queued": server._reloads.queued}


def server_commands(server) -> dict[str, Command]:
    """`stormpy ctl`'s commands on server (a stormpy.server.Server): each takes the
    request's args and answers a dict."""
    async def reload(args):
        zone = args.get("zone")
        result = await server.reload(frozenset([server.zone_name(zone)]) if zone else None)
        if "error" in result:
            raise StormpyError(result["error"])
        return result

    async def zone_status(args):
        return {"zones": server.zone_status(args.get("zone"))}

    async def stop(args):
        log.info("stopping: asked on the control socket")
        asyncio.get_running_loop().call_soon(server.request_stop)   # once the answer is out
        return {"pid": os.getpid()}

    async def status(args):
        return server_status(server)

    async def stats(args):
        return server.snapshot()

    return {"status": status, "reload": reload, "zone-status": zone_status, "stats": stats,
            "stop": stop}


async def _answer(line: bytes, commands: dict[str, Command]) -> dict:
    try:
        request = json.loads(line) if line.strip() else {"cmd": "stats"}
        if not isinstance(request, dict):
            raise ValueError
        name, args = request.get("cmd"), request.get("args") or {}
        if not isinstance(name, str) or not isinstance(args, dict):
            raise ValueError
    except ValueError:
        return {"ok": False, "error": 'bad request: expected {"cmd": NAME, "args": {...}}'}
    command = commands.get(name)
    if command is None:
        return {"ok": False, "error": f"unknown command {name!r} (known: {', '.join(commands)})"}
    try:
        return {"ok": True, **await command(args)}
    except StormpyError as e:
        return {"ok": False, "error": str(e)}
    except Exception as e:                 # a bug: the server goes on, the client hears one line
        log.exception("control command %s failed", name)
        return {"ok": False, "error": f"internal error ({type(e).__name__}: {e})"}


def request(path: str, cmd: str, args: dict | None = None, timeout: float | None = 30) -> dict:
    """Send one command to the server whose control socket is path; its answer without
    "ok". StormpyError, one line, when there is no server, access is refused or the
    command fails. timeout None: wait as long as the command runs (a reload)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(json.dumps({"cmd": cmd, "args": args or {}}).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except (FileNotFoundError, ConnectionRefusedError):
        raise StormpyError(f"no server is listening on {path} (see serve-dns --control)") from None
    except PermissionError:
        raise StormpyError(f"{path}: permission denied") from None
    except socket.timeout:
        raise StormpyError(f"{path}: no answer within {timeout:g} s") from None
    except OSError as e:
        raise StormpyError(f"{path}: {e.strerror or e}") from None
    try:
        answer = json.loads(data)
    except ValueError:
        raise StormpyError(f"{path}: the server closed the connection without an answer") from None
    if not answer.pop("ok", False):
        raise StormpyError(str(answer.get("error", "failed")))
    return answer


def read_snapshot(path: str) -> dict:
    """The stats of the server whose control socket is path; StormpyError, one line."""
    return request(path, "stats")
