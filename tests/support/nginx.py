"""nginx as the reference HTTP server for tests: the deterministic site of
stormpy/bench/site.py served by nginx (Debian's defaults, stormpy/bench/nginx.py) on
127.0.0.1 and a free port.

    def test_x(nginx_site):
        nginx_site.port, nginx_site.root, nginx_site.files   # files: URL path -> size
        nginx_site.sha256["/f-1024.bin"]

The fixture is session-scoped: one site and one nginx for the whole run, stopped at the
end. It skips, with the reason printed, only when nginx is not installed; an nginx that
is installed but does not start is an error."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from stormpy.bench.nginx import NginxServer, nginx_path
from stormpy.bench.site import make_site, sha256_of
from support.process import HOST, free_port


@dataclass
class NginxSite:
    root: Path
    port: int
    files: dict  # URL path -> size in bytes
    sha256: dict = field(default_factory=dict)  # URL path -> hex digest
    host: str = HOST
    server: NginxServer = None


@pytest.fixture(scope="session")
def nginx_site(tmp_path_factory):
    """The test site served by nginx on HOST and a free port (see the module docstring)."""
    if nginx_path() is None:
        reason = "nginx is not installed (apt-get install nginx); nginx reference tests skipped"
        print(f"\nSKIP: {reason}")
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("nginx-site")
    root = base / "site"
    files = make_site(root)
    port = free_port()
    with NginxServer(root, port, host=HOST, workdir=base / "nginx") as server:
        yield NginxSite(root=root, port=port, files=files, sha256=sha256_of(root), server=server)
