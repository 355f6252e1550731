"""serve-http against nginx (Debian's defaults) on the same directory: for a corpus of
good, conditional, ranged, malformed, pipelined and HTTP/1.0 requests, the statuses,
the headers that matter and the bodies agree. Where stormpy answers differently on
purpose, the corpus says so next to the request, with the reason."""
import email.utils
import os
import urllib.parse

import pytest

from support.http import HttpServerProcess, exchange

# stormpy's own table (stormpy/http/content_types.py) against nginx's mime.types, where
# they part: RFC 9239 made text/javascript the type of JavaScript; nginx 1.22 still says
# otherwise.
CONTENT_TYPES = {("text/javascript", "application/javascript")}
HEADERS = ("content-length", "etag", "last-modified", "content-range",
           "accept-ranges")


def corpus(root, files):
    """(name, request bytes, heads_only, statuses stormpy may give instead, why)."""
    mtime = int(os.stat(os.path.join(root, "f-1024.bin")).st_mtime)
    etag = '"%x-%x"' % (mtime, 1024)
    modified = email.utils.formatdate(mtime, usegmt=True)
    earlier = email.utils.formatdate(mtime - 3600, usegmt=True)

    def r(path, method="GET", version="HTTP/1.1", extra=""):
        host = "Host: t\r\n" if version == "HTTP/1.1" else ""
        return f"{method} {path} {version}\r\n{host}{extra}\r\n".encode()

    cases = [(f"get {p}", r(urllib.parse.quote(p)), False, (), "") for p in sorted(files)]
    cases += [(f"head {p}", r(urllib.parse.quote(p), "HEAD"), True, (), "")
              for p in ("/f-0.bin", "/f-65536.bin", "/index.html", "/docs/", "/nope")]
    cases += [
        ("root", r("/"), False, (), ""),
        ("dir redirect", r("/docs"), False, (), ""),
        ("dir redirect, query", r("/docs?a=b"), False, (), ""),
        ("dir redirect, encoded query", r("/docs?a=%20b&c=%E2%82%AC"), False, (), ""),
        ("dir redirect, empty query", r("/docs?"), False, (), ""),
        ("dir redirect, query and fragment", r("/docs?x#frag"), False, (), ""),
        ("dir redirect, query of ?", r("/docs??x"), False, (), ""),
        ("dir redirect, head with query", r("/docs?a=b", "HEAD"), True, (), ""),
        ("dir redirect, http/1.0 with query", r("/docs?a=b", version="HTTP/1.0"), False, (), ""),
        ("query with a control character", r("/docs?a\x01b"), False, (), ""),
        ("query with a bare cr", r("/docs?a\rb"), False, (), ""),
        ("query with a tab", r("/docs/a.txt?a\tb"), False, (), ""),
        ("query with del", r("/docs/a.txt?a\x7fb"), False, (), ""),
        ("dir without index", r("/empty/"), False, (), ""),
        ("missing", r("/missing.txt"), False, (), ""),
        ("file with slash", r("/f-1.bin/"), False, (), ""),
        ("query ignored", r("/docs/a.txt?x=1&y=2"), False, (), ""),
        ("dot segments", r("/docs/./../docs/a.txt"), False, (), ""),
        ("double slashes", r("//docs//a.txt"), False, (), ""),
        ("encoded dots", r("/docs/%2e%2e/f-1.bin"), False, (), ""),
        ("above root", r("/../f-1.bin"), False, (), ""),
        ("encoded above root", r("/%2e%2e/f-1.bin"), False, (), ""),
        ("encoded slash", r("/docs%2Fa.txt"), False, (), ""),
        ("nul", r("/f-1.bin%00"), False, (), ""),
        ("absolute form", r("http://example.org/docs/a.txt"), False, (), ""),
        ("http/1.0", r("/docs/a.txt", version="HTTP/1.0"), False, (), ""),
        ("http/1.0 keep-alive", r("/docs/a.txt", version="HTTP/1.0",
                                  extra="Connection: keep-alive\r\n"), False, (), ""),
        ("connection close", r("/docs/a.txt", extra="Connection: close\r\n"), False, (), ""),
        ("inm match", r("/f-1024.bin", extra=f"If-None-Match: {etag}\r\n"), False, (), ""),
        ("inm weak", r("/f-1024.bin", extra=f"If-None-Match: W/{etag}\r\n"), False, (), ""),
        ("inm list", r("/f-1024.bin", extra=f'If-None-Match: "a", {etag}\r\n'), False, (), ""),
        ("inm star", r("/f-1024.bin", extra="If-None-Match: *\r\n"), False, (), ""),
        ("inm other", r("/f-1024.bin", extra='If-None-Match: "other"\r\n'), False, (), ""),
        ("ims exact", r("/f-1024.bin", extra=f"If-Modified-Since: {modified}\r\n"), False, (), ""),
        ("ims earlier", r("/f-1024.bin", extra=f"If-Modified-Since: {earlier}\r\n"), False, (), ""),
        ("ims garbage", r("/f-1024.bin", extra="If-Modified-Since: soon\r\n"), False, (), ""),
        ("head 304", r("/f-1024.bin", "HEAD", extra=f"If-None-Match: {etag}\r\n"), True, (), ""),
        ("range", r("/f-65536.bin", extra="Range: bytes=100-299\r\n"), False, (), ""),
        ("range open", r("/f-65536.bin", extra="Range: bytes=65000-\r\n"), False, (), ""),
        ("range suffix", r("/f-65536.bin", extra="Range: bytes=-77\r\n"), False, (), ""),
        ("range past end", r("/f-1024.bin", extra="Range: bytes=1000-5000\r\n"), False, (), ""),
        ("range unsatisfiable", r("/f-1024.bin", extra="Range: bytes=1024-\r\n"), False, (), ""),
        ("range backwards", r("/f-1024.bin", extra="Range: bytes=9-2\r\n"), False, (200,),
         "RFC 9110 14.1.1: last-pos before first-pos makes the range invalid, so it is "
         "ignored; nginx answers 416"),
        ("range on empty", r("/f-0.bin", extra="Range: bytes=0-\r\n"), False, (416,),
         "RFC 9110 14.1.1: no first-pos range of an empty representation is satisfiable; "
         "nginx ignores the Range and sends 200"),
        ("range bad unit", r("/f-1024.bin", extra="Range: pages=1-2\r\n"), False, (), ""),
        ("range if-range etag", r("/f-1024.bin", extra=f"Range: bytes=0-9\r\nIf-Range: {etag}\r\n"),
         False, (), ""),
        ("range if-range stale", r("/f-1024.bin", extra='Range: bytes=0-9\r\nIf-Range: "x"\r\n'),
         False, (), ""),
        ("range head", r("/f-65536.bin", "HEAD", extra="Range: bytes=0-9\r\n"), True, (200,),
         "RFC 9110 14.2: range handling is defined for GET only; nginx answers HEAD with 206"),
        ("range on 404", r("/nope", extra="Range: bytes=0-9\r\n"), False, (), ""),
        ("multi range", r("/f-1024.bin", extra="Range: bytes=0-1,5-6\r\n"), False, (200,),
         "several ranges are answered with the whole file (RFC 9110 14.2 allows it); "
         "nginx sends multipart/byteranges"),
        ("post", r("/f-1.bin", "POST", extra="Content-Length: 0\r\n"), False, (), ""),
        ("delete", r("/f-1.bin", "DELETE"), False, (), ""),
        ("lower-case method", r("/f-1.bin", "get"), False, (), ""),
        ("no host", b"GET /f-1.bin HTTP/1.1\r\n\r\n", False, (), ""),
        ("two hosts", b"GET /f-1.bin HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", False, (), ""),
        ("space before colon", b"GET /f-1.bin HTTP/1.1\r\nHost : a\r\n\r\n", False, (), ""),
        ("http/2.0", b"GET /f-1.bin HTTP/2.0\r\n\r\n", False, (), ""),
        ("garbage version", b"GET /f-1.bin HTTX/1.1\r\n\r\n", False, (), ""),
        ("bare lf", b"GET /docs/a.txt HTTP/1.1\nHost: t\n\n", False, (), ""),
        ("leading blank line", b"\r\nGET /docs/a.txt HTTP/1.1\r\nHost: t\r\n\r\n", False, (), ""),
        ("long uri", r("/" + "a" * 9000), False, (), ""),
        ("huge header", r("/f-1.bin", extra="X-Big: " + "b" * 20000 + "\r\n"), False, (431,),
         "a header section past 16 KB is 431 (RFC 6585); nginx says 400"),
        ("body skipped", b"POST /f-1.bin HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nabcd",
         False, (), ""),
    ]
    return cases


def compare(name, ours, theirs, allowed, why):
    if ours.status != theirs.status:
        assert ours.status in allowed, (f"{name}: stormpy {ours.status}, nginx {theirs.status}\n"
                                        f"{ours.raw_head!r}\n{theirs.raw_head!r}")
        return
    if "location" in theirs.headers:         # nginx's is absolute: its path and query agree
        where = urllib.parse.urlsplit(theirs.headers["location"])._replace(scheme="", netloc="")
        assert ours.headers["location"] == where.geturl(), name
    if ours.status >= 300 and ours.status != 304:     # their pages differ in wording only
        assert ours.headers.get("content-type") == "text/html", name
        return
    types = (ours.headers.get("content-type"), theirs.headers.get("content-type"))
    assert types[0] == types[1] or types in CONTENT_TYPES, (name, types)
    for h in HEADERS:
        assert ours.headers.get(h) == theirs.headers.get(h), (name, h, ours.headers, theirs.headers)
    assert ours.body == theirs.body, name


def test_answers_agree_with_nginx(nginx_site):
    root, files = nginx_site.root, nginx_site.files
    cases = corpus(root, files)
    with HttpServerProcess(root) as ours:
        theirs_addr = (nginx_site.host, nginx_site.port)
        seen = 0
        for name, request, head, allowed, why in cases:
            a, a_closed = exchange(ours.addr, request, heads_only=[head])
            b, b_closed = exchange(theirs_addr, request, heads_only=[head])
            assert a and b, (name, a, b)
            compare(name, a[0], b[0], allowed, why)
            if a[0].status < 400:
                assert a_closed == b_closed, (name, a_closed, b_closed)
            seen += 1
        assert seen == len(cases) > 60


def test_pipelined_sequences_agree_with_nginx(nginx_site):
    root = nginx_site.root
    batch = [b"GET /f-1000.bin HTTP/1.1\r\nHost: t\r\n\r\n",
             b"HEAD /docs/ HTTP/1.1\r\nHost: t\r\n\r\n",
             b"GET /docs?x=1 HTTP/1.1\r\nHost: t\r\n\r\n",
             b"GET /f-16384.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=10-19\r\n\r\n",
             b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\n",
             b"GET /style.css HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
             b"GET /never-answered HTTP/1.1\r\nHost: t\r\n\r\n"]
    heads = [False, True, False, False, False, False, False]
    with HttpServerProcess(root) as ours:
        a, a_closed = exchange(ours.addr, b"".join(batch), count=7, heads_only=heads)
        b, b_closed = exchange((nginx_site.host, nginx_site.port), b"".join(batch), count=7,
                               heads_only=heads)
    assert [x.status for x in a] == [x.status for x in b] == [200, 200, 301, 206, 404, 200]
    assert a_closed and b_closed
    for x, y in zip(a, b):
        compare("pipelined", x, y, (), "")


@pytest.mark.parametrize("path", ["/docs/a.txt", "/f-1.bin"])
def test_content_types_agree_with_nginx(nginx_site, path):
    with HttpServerProcess(nginx_site.root) as ours:
        a, _ = exchange(ours.addr, f"HEAD {path} HTTP/1.0\r\n\r\n".encode(), heads_only=[True])
    b, _ = exchange((nginx_site.host, nginx_site.port), f"HEAD {path} HTTP/1.0\r\n\r\n".encode(),
                    heads_only=[True])
    assert a[0].headers["content-type"] == b[0].headers["content-type"]
