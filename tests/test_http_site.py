"""serve-http's answers as the C side chooses them from a compiled site (no sockets):
what a site holds, and every kind of answer to every kind of request (RFC 9110/9112)."""
import email.utils
import os
import socket

import pytest

from stormpy import _core
from stormpy.errors import StormpyError
from stormpy.http.site import compile_site
from support.http import parse_answers

MTIME = 1_700_000_000
NOW = 1_800_000_000
BIG = bytes(range(256)) * 40


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    files = {"index.html": b"<h1>home</h1>\n", "a.txt": b"0123456789", "empty.txt": b"",
             "big.bin": BIG, "docs/index.html": b"docs\n", "noindex/x.css": b"p{}",
             "with space.txt": b"space", "caf\u00e9.txt": b"cafe"}
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, (MTIME, MTIME))
    table, stats = compile_site(str(root))
    return table, stats, root


def ask(site, request: bytes):
    table = site[0]
    used, status, close, raw = _core.http_answer(table, request, NOW)
    head_only = request.split(b" ", 1)[0] == b"HEAD"
    answers, rest = parse_answers(raw, [head_only])
    assert len(answers) == 1 and rest == b"", raw
    return used, answers[0], close


def req(path="/", method="GET", version="HTTP/1.1", **headers):
    lines = [f"{method} {path} {version}"] + (["Host: t"] if version == "HTTP/1.1" else [])
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


ETAG_A = '"%x-%x"' % (MTIME, 10)
LAST_MODIFIED = email.utils.formatdate(MTIME, usegmt=True)


def test_a_file_answer_carries_every_header(site):
    used, a, close = ask(site, req("/a.txt"))
    assert used == len(req("/a.txt")) and not close
    assert (a.status, a.body) == (200, b"0123456789")
    h = a.headers
    assert h["content-type"] == "text/plain" and h["content-length"] == "10"
    assert h["etag"] == ETAG_A and h["last-modified"] == LAST_MODIFIED
    assert h["date"] == email.utils.formatdate(NOW, usegmt=True)
    assert h["server"] == "stormpy" and h["accept-ranges"] == "bytes"
    assert h["connection"] == "keep-alive"


def test_directories_index_redirect_and_forbidden(site):
    assert ask(site, req("/"))[1].body == b"<h1>home</h1>\n"
    assert ask(site, req("/docs/"))[1].body == b"docs\n"
    _, a, _ = ask(site, req("/docs"))
    assert a.status == 301 and a.headers["location"] == "/docs/"
    assert ask(site, req("/noindex/"))[1].status == 403
    assert ask(site, req("/noindex/x.css"))[1].headers["content-type"] == "text/css"


@pytest.mark.parametrize("target,location", [
    ("/docs?x=1", "/docs/?x=1"), ("/docs?a=%20b&c=%E2%82%AC", "/docs/?a=%20b&c=%E2%82%AC"),
    ("/docs?", "/docs/"), ("/docs?x#frag", "/docs/?x"), ("/docs#frag?x", "/docs/"),
    ("/noindex?y", "/noindex/?y"), ("http://h/docs?x=1", "/docs/?x=1")])
def test_a_redirect_keeps_the_query(site, target, location):
    """As nginx (ngx_http_static_module): the query, as sent, follows the slash; an empty
    one is no query. The rest of the answer is the one to the bare name, byte for byte."""
    bare = _core.http_answer(site[0], req("/" + location.split("/")[1]), NOW)[3]
    for method in ("GET", "HEAD"):
        used, a, close = ask(site, req(target, method=method))
        assert (a.status, a.headers["location"], close) == (301, location, False)
        head = a.raw_head.replace(location.encode(), location.split("?")[0].encode())
        assert head + b"\r\n\r\n" + a.body == (bare if method == "GET" else
                                                bare[:bare.index(b"\r\n\r\n") + 4])


def test_a_query_too_long_to_carry_on_is_refused(site):
    longest = "?" + "q" * (_core.HTTP_QUERY_MAX - 1)
    assert ask(site, req("/docs" + longest))[1].headers["location"] == "/docs/" + longest
    _, a, close = ask(site, req("/docs" + longest + "q"))
    assert a.status == 414 and close
    assert ask(site, req("/docs/index.html" + longest + "q"))[1].status == 200


def test_names_are_percent_decoded_and_dot_segments_never_escape(site):
    assert ask(site, req("/with%20space.txt"))[1].body == b"space"
    assert ask(site, req("/caf%C3%A9.txt"))[1].body == b"cafe"
    assert ask(site, req("/docs/../a.txt"))[1].body == b"0123456789"
    assert ask(site, req("//docs/./index.html"))[1].body == b"docs\n"
    for path in ("/../a.txt", "/docs/../../a.txt", "/%2e%2e/a.txt", "/docs/%2E%2E%2f..%2Fx",
                 "/a.txt%00", "/%zz"):
        _, a, close = ask(site, req(path))
        assert a.status == 400 and close, path
    assert ask(site, req("/a.txt/"))[1].status == 404
    assert ask(site, req("/nowhere"))[1].status == 404


def test_head_has_the_get_headers_and_no_body(site):
    _, get, _ = ask(site, req("/big.bin"))
    _, head, _ = ask(site, req("/big.bin", method="HEAD"))
    assert head.body == b"" and head.headers == get.headers and len(get.body) == len(BIG)


def test_conditional_requests(site):
    assert ask(site, req("/a.txt", if_none_match=ETAG_A))[1].status == 304
    assert ask(site, req("/a.txt", if_none_match=f'"x", W/{ETAG_A}'))[1].status == 304
    assert ask(site, req("/a.txt", if_none_match="*"))[1].status == 304
    assert ask(site, req("/a.txt", if_none_match='"other"'))[1].status == 200
    _, a, _ = ask(site, req("/a.txt", if_modified_since=LAST_MODIFIED))
    assert a.status == 304 and a.body == b"" and a.headers["etag"] == ETAG_A
    later = email.utils.formatdate(MTIME + 60, usegmt=True)
    earlier = email.utils.formatdate(MTIME - 60, usegmt=True)
    assert ask(site, req("/a.txt", if_modified_since=later))[1].status == 304
    assert ask(site, req("/a.txt", if_modified_since=earlier))[1].status == 200
    # If-None-Match wins over If-Modified-Since (RFC 9110 13.2.2)
    assert ask(site, req("/a.txt", if_none_match='"x"', if_modified_since=later))[1].status == 200
    assert ask(site, req("/a.txt", if_modified_since="not a date"))[1].status == 200


@pytest.mark.parametrize("spec,first,last", [("0-0", 0, 0), ("100-199", 100, 199),
                                             ("10000-", 10000, 10239), ("-5", 10235, 10239),
                                             ("10200-99999", 10200, 10239), ("-99999", 0, 10239)])
def test_single_ranges(site, spec, first, last):
    _, a, _ = ask(site, req("/big.bin", range=f"bytes={spec}"))
    assert a.status == 206 and a.body == BIG[first:last + 1]
    assert a.headers["content-range"] == f"bytes {first}-{last}/{len(BIG)}"
    assert a.headers["content-length"] == str(last - first + 1)


def test_unsatisfiable_and_ignored_ranges(site):
    for spec in ("bytes=10240-", "bytes=-0"):
        _, a, _ = ask(site, req("/big.bin", range=spec))
        assert a.status == 416 and a.headers["content-range"] == f"bytes */{len(BIG)}", spec
    assert ask(site, req("/empty.txt", range="bytes=0-"))[1].status == 416
    for spec in ("bytes=1-2,5-6", "lines=1-2", "bytes=x-y", "bytes=5-2"):
        _, a, _ = ask(site, req("/big.bin", range=spec))
        assert a.status == 200 and a.body == BIG, spec
    # If-Range: the range only for the representation the client holds
    etag = '"%x-%x"' % (MTIME, len(BIG))
    assert ask(site, req("/big.bin", range="bytes=0-9", if_range=etag))[1].status == 206
    assert ask(site, req("/big.bin", range="bytes=0-9", if_range='"old"'))[1].status == 200
    assert ask(site, req("/big.bin", range="bytes=0-9", if_range=LAST_MODIFIED))[1].status == 206
    assert ask(site, req("/big.bin", range="bytes=0-9", if_range=f"W/{etag}"))[1].status == 200


def test_ranges_are_for_get_only(site):
    _, a, _ = ask(site, req("/big.bin", method="HEAD", range="bytes=0-9"))
    assert a.status == 200 and a.headers["content-length"] == str(len(BIG))


def test_if_match_and_if_unmodified_since(site):
    assert ask(site, req("/a.txt", if_match=ETAG_A))[1].status == 200
    assert ask(site, req("/a.txt", if_match=f'"x", {ETAG_A}'))[1].status == 200
    assert ask(site, req("/a.txt", if_match="*"))[1].status == 200
    for tag in ('"nope"', f"W/{ETAG_A}"):            # strong comparison: weak never matches
        assert ask(site, req("/a.txt", if_match=tag))[1].status == 412
    earlier = email.utils.formatdate(MTIME - 60, usegmt=True)
    assert ask(site, req("/a.txt", if_unmodified_since=earlier))[1].status == 412
    assert ask(site, req("/a.txt", if_unmodified_since=LAST_MODIFIED))[1].status == 200
    # If-Match wins over If-Unmodified-Since, and a failed one wins over Range
    assert ask(site, req("/a.txt", if_match=ETAG_A, if_unmodified_since=earlier))[1].status == 200
    assert ask(site, req("/a.txt", if_match='"x"', range="bytes=0-1"))[1].status == 412


def test_405_says_what_is_allowed(site):
    _, a, _ = ask(site, req("/a.txt", method="PUT"))
    assert a.status == 405 and a.headers["allow"] == "GET, HEAD"


def test_connection_handling_by_version(site):
    assert ask(site, req("/a.txt", version="HTTP/1.0"))[2] is True
    _, a, close = ask(site, req("/a.txt", version="HTTP/1.0", connection="keep-alive"))
    assert not close and a.headers["connection"] == "keep-alive"
    _, a, close = ask(site, req("/a.txt", connection="close"))
    assert close and a.headers["connection"] == "close"


@pytest.mark.parametrize("request_bytes,status", [
    (b"POST /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", 405),
    (b"DELETE / HTTP/1.1\r\nHost: t\r\n\r\n", 405),
    (b"get / HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost : t\r\n\r\n", 400),
    (b"GET / HTTP/3.0\r\nHost: t\r\n\r\n", 505),
    (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),            # RFC 9112 3.2: invalid Host
    (b"GET / HTTP/1.1\r\nHost: ../../etc\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: t:80x\r\n\r\n", 400),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400),    # TLS: no wait for a line end
    (b"GET http://u:p@example.com/a.txt HTTP/1.1\r\nHost: example.com\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414),
    (b"GET /docs?a\rb HTTP/1.1\r\nHost: t\r\n\r\n", 400),   # it would reach a Location
    (b"GET /docs?a\x01b HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    (b"GET /a.txt?a\tb HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    (b"GET /a.txt?a#\x7f HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: t\r\n" + b"X-Big: " + b"b" * 17000 + b"\r\n\r\n", 431),
])
def test_errors(site, request_bytes, status):
    used, a, close = ask(site, request_bytes)
    assert a.status == status and a.headers["content-type"] == "text/html"
    assert int(a.headers["content-length"]) == len(a.body) > 0
    assert close == (status not in (405,))
    assert used <= len(request_bytes)


@pytest.mark.parametrize("host", [b"", b"example.com", b"example.com:8080", b"127.0.0.1:80",
                                  b"[2001:db8::1]:8080", b"[::1]", b"xn--bcher-kva.example",
                                  b"a_b.example:"])
def test_every_form_of_a_valid_host_is_served(site, host):
    used, a, _ = ask(site, b"GET /a.txt HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
    assert a.status == 200


def test_incomplete_requests_wait(site):
    table = site[0]
    full = req("/a.txt")
    for cut in range(len(full)):
        assert _core.http_answer(table, full[:cut], NOW) is None


def test_pipelined_requests_are_taken_one_at_a_time(site):
    table = site[0]
    data = req("/a.txt") + req("/docs/", method="HEAD") + req("/x")
    statuses = []
    while data:
        used, status, _, _ = _core.http_answer(table, data, NOW)
        statuses.append(status)
        data = data[used:]
    assert statuses == [200, 200, 404]


def test_dates_both_ways():
    for t in (0, 784111777, MTIME, 4_102_444_799):
        text = _core.http_date(t)
        assert text.decode() == email.utils.formatdate(t, usegmt=True)
        assert _core.http_parse_date(text) == t
    assert _core.http_parse_date(b"Sunday, 06-Nov-94 08:49:37 GMT") == 784111777
    assert _core.http_parse_date(b"Sun Nov  6 08:49:37 1994") == 784111777
    assert _core.http_parse_date(b"06 Nov 1994") is None


def test_what_cannot_be_served_is_refused_one_line_each(tmp_path, caplog):
    root = tmp_path / "site"
    root.mkdir()
    (root / "ok.txt").write_text("ok")
    (tmp_path / "secret").write_text("secret")
    os.symlink(tmp_path / "secret", root / "leak")
    os.symlink("/etc", root / "etc")
    os.symlink(root / "ok.txt", root / "alias.txt")       # inside: served
    os.symlink(root / "gone", root / "dangling")
    (root / "bad\x01name").write_text("x")
    os.mkfifo(root / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock"))
    try:
        table, stats = compile_site(str(root))
    finally:
        sock.close()
    assert stats.files == 2
    reasons = "\n".join(stats.refused)
    assert len(stats.refused) == 6, reasons
    for name, why in (("leak", "outside the site"), ("etc", "outside the site"),
                      ("dangling", "cannot stat"), ("bad\x01name", "control characters"),
                      ("fifo", "not a regular file"), ("sock", "not a regular file")):
        assert any(line.startswith(f"{root}/{name}: refused, ") and why in line
                   for line in stats.refused), (name, reasons)
    assert all("\n" not in line for line in stats.refused)
    assert _core.http_answer(table, req("/alias.txt"), NOW)[1] == 200
    assert _core.http_answer(table, req("/leak"), NOW)[1] == 404


def test_a_site_that_is_not_a_directory_is_one_error(tmp_path):
    with pytest.raises(StormpyError, match="no such directory"):
        compile_site(str(tmp_path / "missing"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(StormpyError, match="not a directory"):
        compile_site(str(tmp_path / "file"))


@pytest.fixture(scope="module")
def sizes_site(tmp_path_factory):
    root = tmp_path_factory.mktemp("sizes")
    for size in (1, 63, 64, 65, 10001):
        (root / f"f{size}.bin").write_bytes(bytes((i * 7 + 3) & 0xFF for i in range(size)))
    (root / "dir").mkdir()
    return compile_site(str(root))[0]


SEGMENTED = [req("/f10001.bin"), req("/f10001.bin", Range="bytes=1-"),
             req("/f10001.bin", Range="bytes=63-9000"), req("/f10001.bin", Range="bytes=128-129"),
             req("/f10001.bin", Range="bytes=-3"), req("/f10001.bin", version="HTTP/1.0"),
             req("/f65.bin"), req("/f64.bin"), req("/f63.bin"), req("/f1.bin"), req("/missing"),
             req("/f63.bin", If_None_Match="*"), req("/dir?x=1"), req("/dir?odd")]


@pytest.mark.parametrize("segment", [1, 7, 64, 536, 1000, 1387, 1448, 1460, 8960])
@pytest.mark.parametrize("request_", SEGMENTED)
def test_segment_sums_from_the_stored_sums_are_the_payloads_sums(sizes_site, segment, request_):
    """The own TCP cuts an answer into segments and takes each payload's checksum from
    the body's stored prefix sums: at every cut (odd offsets, ranges starting on odd
    bytes, heads of odd length, segments shorter than a stride, a body's last partial
    stride) the sum must be the one of the bytes the segment carries, and the bytes
    the whole answer's."""
    whole = _core.http_answer(sizes_site, request_, NOW)[3]
    segments = _core.http_answer(sizes_site, request_, NOW, segment=segment)
    assert b"".join(p for p, _ in segments) == whole
    for payload, stored in segments:
        assert _same_sum(stored, _core.csum_partial(payload)), (len(payload), stored)


@pytest.mark.parametrize("second", [0, NOW, NOW + 1, 951_782_400, 4_102_444_799])
def test_segment_sums_hold_on_every_second(sizes_site, second):
    """The heads' sums are stored around the Date and the Date's own sum is made once a
    second: whatever the second, every segment of a 200, 206 and 304 answer (heads cut
    at odd places too) has its bytes' sum, and the Date is the second's."""
    for request_ in (req("/f65.bin"), req("/f10001.bin", Range="bytes=3-70"),
                     req("/f63.bin", If_None_Match="*")):
        whole = _core.http_answer(sizes_site, request_, second)[3]
        date = email.utils.formatdate(second, usegmt=True).encode()
        assert b"\r\nDate: " + date + b"\r\n" in whole
        for segment in (1, 3, 31, 64, 97, 1448):
            segments = _core.http_answer(sizes_site, request_, second, segment=segment)
            assert b"".join(p for p, _ in segments) == whole
            for payload, stored in segments:
                assert _same_sum(stored, _core.csum_partial(payload)), (segment, len(payload))


def test_prefix_sums_cover_every_stride():
    data = bytes(range(256)) * 3 + b"\x01"
    sums = _core.csum_prefix(data, 64)
    assert len(sums) == 2 * (len(data) // 64 + 2)
    words = memoryview(sums).cast("H")
    for k in range(len(words)):
        assert _same_sum(words[k], _core.csum_partial(data[:64 * k]))


def _same_sum(a, b):
    """Equal as one's-complement values (0 and 0xFFFF are both zero)."""
    def reduced(s):
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        return 0 if s == 0xFFFF else s
    return reduced(a) == reduced(b)
