"""The reference HTTP harness: the deterministic test site (stormpy/bench/site.py) and nginx
serving it (stormpy/bench/nginx.py, the nginx_site fixture). What nginx answers here is the
reference behaviour stormpy's HTTP server is compared with."""
import hashlib
import http.client
from urllib.parse import quote

from stormpy.bench.nginx import write_nginx_config
from stormpy.bench.site import DEFAULT_SIZES, bin_name, make_site, sha256_of


def request(site, method, path, headers=None):
    """(status, headers dict with lower-case names, body) for one request on a new connection."""
    conn = http.client.HTTPConnection(site.host, site.port, timeout=10)
    try:
        conn.request(method, quote(path), headers=headers or {})
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
    finally:
        conn.close()


def test_make_site_is_deterministic_and_complete(tmp_path):
    a = make_site(tmp_path / "a")
    b = make_site(tmp_path / "b")
    assert a == b
    assert sha256_of(tmp_path / "a") == sha256_of(tmp_path / "b")
    for size in DEFAULT_SIZES:
        assert a[bin_name(size)] == size
    for path in ("/index.html", "/docs/index.html", "/docs/a.txt", "/style.css", "/app.js",
                 "/img.png", "/with space.txt", "/café.txt"):
        assert a[path] == (tmp_path / "a" / path.lstrip("/")).stat().st_size > 0
    assert (tmp_path / "a" / "img.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert (tmp_path / "a" / "empty").is_dir() and not any((tmp_path / "a" / "empty").iterdir())
    assert set(sha256_of(tmp_path / "a")) == set(a)
    other = make_site(tmp_path / "c", sizes=(1000,), seed=2)
    assert sha256_of(tmp_path / "c")["/f-1000.bin"] != sha256_of(tmp_path / "a")["/f-1000.bin"]
    assert set(other) == set(a) - {bin_name(s) for s in DEFAULT_SIZES if s != 1000}


def test_nginx_config_listens_where_asked(tmp_path):
    conf = write_nginx_config(tmp_path / "v6", tmp_path / "site", 8081, host="::1", cpu=2).read_text()
    assert "listen [::1]:8081;" in conf and "worker_cpu_affinity 100;" in conf
    conf = write_nginx_config(tmp_path / "v4", tmp_path / "site", 8082).read_text()
    assert "listen 127.0.0.1:8082;" in conf and "worker_cpu_affinity" not in conf
    for directive in ("sendfile on;", "tcp_nopush on;", "keepalive_timeout 65;", "access_log off;",
                      "worker_processes 1;", "index index.html;"):
        assert directive in conf
    for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        assert f'{name}_temp_path "{(tmp_path / "v4" / f"{name}_temp").resolve()}";' in conf


def test_get_serves_every_file_byte_for_byte(nginx_site):
    assert len(nginx_site.files) == 16
    for path, size in nginx_site.files.items():
        status, headers, body = request(nginx_site, "GET", path)
        assert status == 200, path
        assert len(body) == size == int(headers["content-length"]), path
        assert body == (nginx_site.root / path.lstrip("/")).read_bytes(), path
        assert hashlib.sha256(body).hexdigest() == nginx_site.sha256[path], path


def test_directories_serve_their_index(nginx_site):
    assert request(nginx_site, "GET", "/")[2] == (nginx_site.root / "index.html").read_bytes()
    assert request(nginx_site, "GET", "/docs/")[2] == (nginx_site.root / "docs/index.html").read_bytes()
    assert request(nginx_site, "GET", "/empty/")[0] == 403  # no index, no listing


def test_head_gives_the_length_and_no_body(nginx_site):
    for path in (bin_name(0), bin_name(1 << 20), "/index.html", "/café.txt"):
        status, headers, body = request(nginx_site, "HEAD", path)
        assert status == 200 and body == b"", path
        assert int(headers["content-length"]) == nginx_site.files[path], path


def test_content_types_are_debians(nginx_site):
    expected = {"/index.html": "text/html", "/style.css": "text/css", "/img.png": "image/png",
                "/docs/a.txt": "text/plain", bin_name(1024): "application/octet-stream"}
    for path, ctype in expected.items():
        assert request(nginx_site, "HEAD", path)[1]["content-type"] == ctype, path


def test_directory_without_slash_redirects(nginx_site):
    status, headers, _ = request(nginx_site, "GET", "/docs")
    assert status == 301
    assert headers["location"] == f"http://{nginx_site.host}:{nginx_site.port}/docs/"


def test_missing_file_is_404(nginx_site):
    assert request(nginx_site, "GET", "/missing")[0] == 404
    assert request(nginx_site, "GET", "/docs/missing.txt")[0] == 404


def test_server_processes_are_found_for_cpu_accounting(nginx_site):
    pids = nginx_site.server.pids()
    assert len(pids) == 2  # master and one worker
    assert pids[0] == nginx_site.server.proc.pid
