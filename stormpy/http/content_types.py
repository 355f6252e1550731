"""Content-Types: stormpy's own table, the same on every host.

The mimetypes module's functions read the host's /etc/mime.types (and its likes), so
the same site would get other types on another machine (.ts is a Qt translation on
some). Here only Python's built-in table is used, corrected by the web types a
browser acts on. A compressed file is sent as the compressed container it is: a
static server adds no Content-Encoding (nginx sends such files as they are too).
"""
from __future__ import annotations

import mimetypes
import posixpath

DEFAULT = "application/octet-stream"

# Where the built-in table lacks a type a browser needs, or has an older one; the
# registered type where nginx's mime.types differs (RFC 9239 for JavaScript, RFC 7303
# for XML), nginx's for .ico (image/x-icon, which every browser takes).
WEB_TYPES = {
    ".html": "text/html", ".css": "text/css", ".js": "text/javascript",
    ".mjs": "text/javascript", ".json": "application/json", ".wasm": "application/wasm",
    ".xml": "application/xml", ".txt": "text/plain", ".md": "text/markdown",
    ".csv": "text/csv", ".svg": "image/svg+xml", ".webp": "image/webp",
    ".avif": "image/avif", ".ico": "image/x-icon", ".woff2": "font/woff2",
    ".woff": "font/woff", ".ttf": "font/ttf", ".otf": "font/otf",
    ".webmanifest": "application/manifest+json", ".ts": "video/mp2t",
    ".m3u8": "application/vnd.apple.mpegurl", ".mp4": "video/mp4", ".webm": "video/webm",
}

# The built-in table's encodings (by suffix: .gz, .tgz, .bz2, .Z, ...) as the
# containers' own types (application/gzip: RFC 6713).
CONTAINERS = {
    "gzip": "application/gzip", "bzip2": "application/x-bzip2", "xz": "application/x-xz",
    "zstd": "application/zstd", "compress": "application/x-compress",
    "br": "application/x-brotli",
}


class ContentTypes:
    """A file name's Content-Type from the built-in table, WEB_TYPES and CONTAINERS."""

    def __init__(self):
        # A MimeTypes instance is filled from the module's built-in defaults only: the
        # system files it may make the module read go into the module's own table,
        # which is never asked here.
        self._builtin = mimetypes.MimeTypes()
        self._builtin.encodings_map.setdefault(".zst", "zstd")   # not built in before 3.12

    def __call__(self, name: str) -> bytes:
        ext = posixpath.splitext(name)[1]
        # only the suffix is looked up: a whole name such as "data:x" would be taken
        # for a URL
        kind, encoding = self._builtin.guess_type("x" + ext, strict=False)
        if encoding is not None:
            kind = CONTAINERS.get(encoding, DEFAULT)
        else:
            kind = WEB_TYPES.get(ext.lower()) or kind or DEFAULT
        return kind.encode()
