"""The control socket: a Unix socket on which a server hands a JSON snapshot of itself
to `stormpy stats`, and the client side that reads it."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import stat
from typing import Callable

from stormpy.errors import StormpyError

log = logging.getLogger("stormpy")


async def open_control(path: str | None, required: bool, snapshot: Callable[[], dict]):
    """A Unix server at path answering each connection with snapshot() as one JSON line;
    None without a path, or when the path is taken and not required (with a warning).
    A socket left by a server that died is replaced."""
    if not path:
        return None
    if os.path.exists(path):
        try:                                   # a live server keeps its socket
            _, w = await asyncio.wait_for(asyncio.open_unix_connection(path), 1)
            w.close()
            if not required:
                log.warning("%s belongs to another server: `stormpy stats` will not see "
                            "this one (give it --control PATH)", path)
                return None
            raise StormpyError(f"--control {path}: another server is using it")
        except (OSError, asyncio.TimeoutError):
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                raise StormpyError(f"--control {path}: exists and is not a socket") from None
            os.unlink(path)                    # left by a server that died

    async def client(reader, writer):
        try:
            writer.write(json.dumps(snapshot()).encode() + b"\n")
            await asyncio.wait_for(writer.drain(), 5)
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()

    try:
        return await asyncio.start_unix_server(client, path=path)
    except OSError as e:
        if not required:
            log.warning("no control socket at %s (%s): `stormpy stats` will not see this server",
                        path, e.strerror)
            return None
        raise StormpyError(f"--control {path}: {e.strerror}") from None


def read_snapshot(path: str) -> dict:
    """The snapshot of the server whose control socket is path; StormpyError, one line."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(path)
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except (FileNotFoundError, ConnectionRefusedError):
        raise StormpyError(f"no server is listening on {path} (see serve-dns --control)") from None
    except OSError as e:
        raise StormpyError(f"{path}: {e.strerror or e}") from None
    return json.loads(data)
