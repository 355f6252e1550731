"""A directory compiled into a table of complete HTTP/1.1 answers (the Sandstorm way).

Every file becomes its 200, 206 and 304 heads and its body; every directory its
index (or a 403) and a 301 to its slashed name; every error the server can give is
built here too. The C side (native/include/stormpy/app/http/site.h) only chooses
among them and splices in the Date, the Connection line, a Content-Range and a
redirect's query.

What cannot be served safely is refused with one line each and the rest still loads:
a symlink that leaves the site, a file that cannot be read, a name with control
characters, anything that is not a file or a directory.
"""
from __future__ import annotations

import logging
import os
import stat
import struct
import time
import urllib.parse
from dataclasses import dataclass, field
from email.utils import formatdate

from stormpy import _core
from stormpy.errors import StormpyError
from stormpy.http.content_types import ContentTypes

log = logging.getLogger("stormpy")

SERVER = b"stormpy"
ENTRY = struct.Struct("<9I6HqQ")
HEADER = struct.Struct(f"<{2 + _core.HTTP_ERRORS}I")
NONE = 0xFFFFFFFF
FILE, CLOSES, REDIRECT = 1, 2, 4
BLOB_MAX = 1 << 30
REASONS = {200: "OK", 206: "Partial Content", 301: "Moved Permanently", 304: "Not Modified",
           400: "Bad Request", 403: "Forbidden", 412: "Precondition Failed", 404: "Not Found", 405: "Not Allowed",
           408: "Request Time-out", 414: "Request-URI Too Large", 416: "Requested Range Not Satisfiable",
           431: "Request Header Fields Too Large", 501: "Not Implemented",
           505: "HTTP Version Not Supported"}
# in the order of enum sp_http_error; the ones after which the connection closes
ERRORS = (400, 403, 404, 405, 408, 414, 416, 431, 501, 505, 412)
CLOSING = {400, 408, 414, 431, 501, 505}
assert ENTRY.size == _core.HTTP_ENTRY_SIZE and HEADER.size <= _core.HTTP_SITE_SIZE


@dataclass
class SiteStats:
    files: int = 0
    directories: int = 0
    bytes: int = 0
    keys: int = 0
    refused: list[str] = field(default_factory=list)


def status_line(status: int) -> bytes:
    return f"HTTP/1.1 {status} {REASONS[status]}\r\n".encode()


def error_page(status: int) -> bytes:
    title = f"{status} {REASONS[status]}"
    return (f"<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n"
            f"<center><h1>{title}</h1></center>\r\n<hr><center>stormpy</center>\r\n"
            f"</body>\r\n</html>\r\n").encode()


class _Builder:
    """The table under construction: heads with their sums and Date offsets, and entries."""

    def __init__(self, now: float):
        self.table = _core.TableBuilder()
        self.entries: list[bytes] = []
        self.date = formatdate(now, usegmt=True).encode()

    def response(self, data: bytes, user: int = 0) -> int:
        return self.table.add_response(data, (), user)

    def head(self, status: int, lines: list[tuple[str, bytes]]) -> tuple[int, int, int]:
        """A head for the next entry: its response, its sums (those of the bytes before
        the Date, then of those after it: site.h) and the offset of its Date value."""
        out = status_line(status) + b"Server: " + SERVER + b"\r\nDate: "
        date_at = len(out)
        out += self.date + b"\r\n"
        for name, value in lines:
            out += name.encode() + b": " + value + b"\r\n"
        sums = (_core.csum_prefix(out[:date_at], _core.HTTP_SUM_STRIDE) +
                _core.csum_prefix(out[date_at + len(self.date):], _core.HTTP_SUM_STRIDE))
        return self.response(out, len(self.entries)), self.response(sums), date_at

    def body(self, data: bytes) -> tuple[int, int]:
        """A body and its prefix sums (site.h): (body, sums) responses."""
        return self.response(data), self.response(_core.csum_prefix(data, _core.HTTP_SUM_STRIDE))

    def entry(self, status: int, head: tuple[int, int, int], body=(NONE, NONE), size: int = 0,
              flags: int = 0, not_modified=(NONE, NONE, 0), partial=(NONE, NONE, 0),
              etag: int = NONE, mtime: int = 0) -> int:
        heads = (head, not_modified, partial)
        self.entries.append(ENTRY.pack(head[0], body[0], not_modified[0], partial[0], etag,
                                       body[1], *(h[1] for h in heads), status,
                                       *(h[2] for h in heads), flags, _core.HTTP_SUM_STRIDE,
                                       mtime, size))
        return len(self.entries) - 1

    def page(self, status: int, body: bytes, extra=(), flags: int = 0) -> int:
        head = self.head(status, [("Content-Type", b"text/html"),
                                  ("Content-Length", str(len(body)).encode()), *extra])
        return self.entry(status, head, self.body(body), len(body),
                          flags | (CLOSES if status in CLOSING else 0))

    def redirect(self, location: bytes) -> int:
        """A 301 to location. Its Location is the head's last line: the server
        appends the request's query to that line (site.h)."""
        return self.page(301, error_page(301), [("Location", location)], REDIRECT)

    def file(self, data: bytes, mtime: int, content_type: bytes) -> int:
        etag = b'"%x-%x"' % (mtime, len(data))
        modified = formatdate(mtime, usegmt=True).encode()
        common = [("Content-Type", content_type), ("Last-Modified", modified), ("ETag", etag)]
        head = self.head(200, [common[0], ("Content-Length", str(len(data)).encode()),
                               *common[1:], ("Accept-Ranges", b"bytes")])
        not_modified = self.head(304, common[1:])
        partial = self.head(206, common)
        return self.entry(200, head, self.body(data), len(data), FILE, not_modified,
                          partial, self.response(etag), mtime)

    def finish(self, errors: list[int]):
        header = HEADER.pack(_core.HTTP_SITE_MAGIC, len(self.entries), *errors)
        self.table.set_program(header.ljust(_core.HTTP_SITE_SIZE, b"\0") + b"".join(self.entries))
        return self.table.finish()


def _bad_name(rel: str) -> str | None:
    if any(ord(ch) < 0x20 or ord(ch) == 0x7f for ch in rel):
        return "its name has control characters"
    if len(os.fsencode(rel)) + 2 > 4000:
        return "its path is too long to request"
    return None


def compile_site(root: str, now: float | None = None):
    """The site under root as a table, and its statistics."""
    if not os.path.isdir(root):
        what = "no such directory" if not os.path.exists(root) else "not a directory"
        raise StormpyError(f"{root}: {what}")
    real_root = os.path.realpath(root)
    b = _Builder(time.time() if now is None else now)
    stats = SiteStats()
    content_type = ContentTypes()
    keys: dict[bytes, int] = {}
    errors = [b.page(status, error_page(status),
                     [("Allow", b"GET, HEAD")] if status == 405 else ()) for status in ERRORS]

    def refuse(rel: str, why: str):
        stats.refused.append(f"{root}/{rel}: refused, {why}")
        log.warning("%s/%s: refused, %s", root, rel, why)

    def walk(directory: str, rel: str, seen: frozenset):
        try:
            names = sorted(os.listdir(directory))
        except OSError as e:
            refuse(rel or ".", f"cannot list it ({e.strerror})")
            return
        index = None
        for name in names:
            path, sub = os.path.join(directory, name), f"{rel}{name}"
            why = _bad_name(sub)
            if why:
                refuse(sub, why)
                continue
            real = os.path.realpath(path)
            if real != real_root and not real.startswith(real_root + os.sep):
                refuse(sub, f"it leads outside the site (to {real})")
                continue
            try:
                st = os.stat(path)
            except OSError as e:
                refuse(sub, f"cannot stat it ({e.strerror})")
                continue
            if stat.S_ISDIR(st.st_mode):
                if real in seen:
                    refuse(sub, "a symlink loop")
                    continue
                walk(path, sub + "/", seen | {real})
                continue
            if not stat.S_ISREG(st.st_mode):
                refuse(sub, "not a regular file")
                continue
            if st.st_size > BLOB_MAX:
                refuse(sub, f"larger than {BLOB_MAX >> 20} MiB")
                continue
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                refuse(sub, f"cannot read it ({e.strerror})")
                continue
            entry = b.file(data, int(st.st_mtime), content_type(name))
            keys[b"/" + os.fsencode(sub)] = entry
            stats.files += 1
            stats.bytes += len(data)
            if name == "index.html":
                index = entry
        stats.directories += 1
        keys[b"/" + os.fsencode(rel)] = index if index is not None else errors[ERRORS.index(403)]
        if rel:
            # the name's own bytes, as the key has them: a name that is not UTF-8
            # (os.listdir's surrogates) is quoted byte for byte too
            location = b"/" + urllib.parse.quote(os.fsencode(rel)).encode()
            keys[b"/" + os.fsencode(rel[:-1])] = b.redirect(location)

    walk(root, "", frozenset({real_root}))
    head_of = {}
    for key, entry in keys.items():
        response = head_of.get(entry)
        if response is None:
            response = head_of[entry] = ENTRY.unpack_from(b.entries[entry])[0]
        b.table.add_key(0, key, response)
    stats.keys = len(keys)
    return b.finish(errors), stats
