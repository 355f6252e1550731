"""A compiled site's names that are not UTF-8, its Content-Types (stormpy's own table,
compressed files as their containers) and ranges on an empty file, answered as the C
side chooses them (no sockets)."""
import mimetypes
import os

import pytest

from stormpy import _core
from stormpy.http.site import compile_site
from support.http import parse_answers

NOW = 1_800_000_000


def ask(table, path: str, **headers):
    lines = [f"GET {path} HTTP/1.1", "Host: t"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    _, _, _, raw = _core.http_answer(table, ("\r\n".join(lines) + "\r\n\r\n").encode(), NOW)
    answers, rest = parse_answers(raw)
    assert len(answers) == 1 and rest == b"", raw
    return answers[0]


def site_of(root, names) -> object:
    """The table of a site holding each name (bytes: written as those bytes)."""
    for name in names:
        path = os.path.join(os.fsencode(root), os.fsencode(name))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"x")
    table, stats = compile_site(str(root))
    assert stats.refused == [] and stats.files == len(names)
    return table


def test_a_directory_whose_name_is_not_utf8_is_served_like_such_a_file(tmp_path):
    # Latin-1 names, as unzipped Windows archives leave them
    table = site_of(tmp_path, [b"caf\xe9dir/index.html", b"caf\xe9dir/sub/index.html",
                               b"caf\xe9.txt"])
    moved = ask(table, "/caf%E9dir")
    assert moved.status == 301 and moved.headers["location"] == "/caf%E9dir/"
    assert ask(table, "/caf%E9dir/").status == 200
    moved = ask(table, "/caf%E9dir/sub")
    assert moved.status == 301 and moved.headers["location"] == "/caf%E9dir/sub/"
    assert ask(table, "/caf%E9dir/sub/").status == 200
    assert ask(table, "/caf%E9.txt").status == 200


COMPRESSED = {"pic.svg.gz": "application/gzip", "data.json.gz": "application/gzip",
              "arch.tar.gz": "application/gzip", "arch.tgz": "application/gzip",
              "log.bz2": "application/x-bzip2", "log.xz": "application/x-xz",
              "log.zst": "application/zstd", "log.Z": "application/x-compress",
              "app.js.br": "application/x-brotli"}

WEB = {"app.mjs": "text/javascript", "app.js": "text/javascript", "d.json": "application/json",
       "m.wasm": "application/wasm", "f.woff2": "font/woff2", "f.woff": "font/woff",
       "f.ttf": "font/ttf", "f.otf": "font/otf", "i.svg": "image/svg+xml",
       "i.webp": "image/webp", "i.avif": "image/avif", "favicon.ico": "image/x-icon",
       "site.webmanifest": "application/manifest+json", "seg.ts": "video/mp2t",
       "list.m3u8": "application/vnd.apple.mpegurl", "v.mp4": "video/mp4",
       "v.webm": "video/webm", "README.md": "text/markdown", "t.csv": "text/csv",
       "t.txt": "text/plain", "p.html": "text/html", "PAGE.HTML": "text/html",
       "s.css": "text/css", "feed.xml": "application/xml", "doc.pdf": "application/pdf",
       "Makefile": "application/octet-stream", "data:x.txt": "text/plain"}


@pytest.fixture(scope="module")
def typed_site(tmp_path_factory):
    return site_of(tmp_path_factory.mktemp("typed"), [*COMPRESSED, *WEB])


@pytest.mark.parametrize("name,kind", [*COMPRESSED.items(), *WEB.items()])
def test_content_types(typed_site, name, kind):
    answer = ask(typed_site, "/" + name)
    assert answer.headers["content-type"] == kind
    # a static server sends a compressed file as it is, never as an encoded other type
    assert "content-encoding" not in answer.headers


def test_the_hosts_mime_types_file_changes_no_type(tmp_path, monkeypatch):
    fake = tmp_path / "mime.types"
    fake.write_text("text/x-host ts pdf stormpyonly\n")
    # the mimetypes module as on a host whose /etc/mime.types is the fake, not read yet
    monkeypatch.setattr(mimetypes, "knownfiles", [str(fake)])
    for name in ("inited", "_db", "types_map", "common_types", "encodings_map", "suffix_map"):
        monkeypatch.setattr(mimetypes, name, getattr(mimetypes, name))
    monkeypatch.setattr(mimetypes, "inited", False)
    monkeypatch.setattr(mimetypes, "_db", None)
    table = site_of(tmp_path / "site", ["a.ts", "b.pdf", "c.stormpyonly"])
    assert mimetypes.guess_type("b.pdf")[0] == "text/x-host"     # the fake was in effect
    assert ask(table, "/a.ts").headers["content-type"] == "video/mp2t"
    assert ask(table, "/b.pdf").headers["content-type"] == "application/pdf"
    assert ask(table, "/c.stormpyonly").headers["content-type"] == "application/octet-stream"


def test_a_suffix_range_on_an_empty_file_is_the_whole_empty_file(tmp_path):
    # RFC 9110 14.1.1: on a zero-length representation a suffix-range with a non-zero
    # length is satisfiable, and no 206 can say so (no byte to name): the 200
    (tmp_path / "empty.txt").write_bytes(b"")
    table, _ = compile_site(str(tmp_path))
    answer = ask(table, "/empty.txt", range="bytes=-500")
    assert (answer.status, answer.body, answer.headers["content-length"]) == (200, b"", "0")
    assert ask(table, "/empty.txt", range="bytes=-0").status == 416
