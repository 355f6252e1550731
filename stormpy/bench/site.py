"""A deterministic static web site for the HTTP benchmark and the HTTP differential tests:
the same seed gives the same bytes, on every machine.

    files = make_site(Path("/tmp/site"))     # {"/f-1024.bin": 1024, "/index.html": ..., ...}
    sha256_of(Path("/tmp/site"))             # {"/f-1024.bin": "ab12...", ...}

Paths in both dicts are URL paths relative to the site root ("/docs/a.txt"), not encoded:
a client percent-encodes "/with space.txt" and "/café.txt" (UTF-8) itself."""
from __future__ import annotations

import hashlib
import random
import struct
import zlib
from pathlib import Path

DEFAULT_SIZES = (0, 1, 1000, 1024, 16384, 65536, 1 << 20, 8 << 20)

INDEX_HTML = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>stormpy test site</title>
<link rel="stylesheet" href="/style.css"></head>
<body>
<h1>stormpy test site</h1>
<p>Files of known sizes for benchmarks: {links}</p>
<p><a href="/docs/">docs</a> <img src="/img.png" alt="a pixel"></p>
<script src="/app.js"></script>
</body>
</html>
"""

DOCS_INDEX_HTML = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>docs</title></head>
<body><h1>docs</h1><p><a href="a.txt">a.txt</a></p></body>
</html>
"""

STYLE_CSS = "body { font-family: sans-serif; margin: 2em; }\nh1 { color: #c0392b; }\n"
APP_JS = "document.addEventListener('DOMContentLoaded', () => { console.log('stormpy'); });\n"
A_TXT = "Plain text in a subdirectory.\n" * 4
SPACE_TXT = "A file whose name has a space in it.\n"
CAFE_TXT = "Un fichier au nom en UTF-8 : café.\n"


def bin_name(size: int) -> str:
    """The URL path of the pseudo-random file of `size` bytes."""
    return f"/f-{size}.bin"


def png_bytes(width: int = 2, height: int = 2, rgb=(192, 57, 43)) -> bytes:
    """A small valid PNG: 8-bit RGB, one colour."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    row = b"\x00" + bytes(rgb) * width  # filter type 0, then the pixels
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b""))


def make_site(root: Path, sizes=DEFAULT_SIZES, seed: int = 1) -> dict[str, int]:
    """Write the site under root (created if needed; files there are overwritten, others
    left alone). Returns URL path -> size in bytes for every file written."""
    root = Path(root)
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    for size in sorted(set(sizes)):
        files[bin_name(size)] = rng.randbytes(size)
    links = " ".join(f'<a href="{bin_name(s)}">{s}</a>' for s in sorted(set(sizes)))
    files["/index.html"] = INDEX_HTML.format(links=links).encode()
    files["/docs/index.html"] = DOCS_INDEX_HTML.encode()
    files["/docs/a.txt"] = A_TXT.encode()
    files["/style.css"] = STYLE_CSS.encode()
    files["/app.js"] = APP_JS.encode()
    files["/img.png"] = png_bytes()
    files["/with space.txt"] = SPACE_TXT.encode()
    files["/café.txt"] = CAFE_TXT.encode("utf-8")
    (root / "empty").mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return {path: len(data) for path, data in files.items()}


def sha256_of(root: Path) -> dict[str, str]:
    """URL path -> hex SHA-256 of every regular file under root."""
    root = Path(root)
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            out["/" + p.relative_to(root).as_posix()] = h.hexdigest()
    return out
