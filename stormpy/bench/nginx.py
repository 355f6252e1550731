"""nginx as the reference HTTP server: configured as Debian ships it (one worker here,
sendfile and tcp_nopush on, Debian's MIME types), serving a directory on loopback.

    with NginxServer(root, port, cpu=0) as ng:     # blocks until the port accepts
        ng.pids()                                  # master and worker, for CPU accounting

Everything nginx writes (pid file, error log, temporary directories, the config itself)
goes into a private directory, so it runs as root and as any other user. As root the
workers run as root too: a pytest tmp directory (mode 0700) is not readable by nobody or
www-data, and which user reads the files makes no difference to what is measured."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

from stormpy.bench.errors import ServerFailure
from stormpy.bench.processes import find_tool, log_tail, process_tree, track, untrack

MIME_TYPES = "/etc/nginx/mime.types"
# What a missing /etc/nginx/mime.types is replaced by (nginx from source keeps it elsewhere).
FALLBACK_TYPES = """types {
        text/html html htm; text/css css; text/plain txt; application/javascript js;
        image/png png; application/octet-stream bin;
    }"""
TEMP_DIRS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def nginx_path() -> Optional[str]:
    """nginx's binary (Debian: /usr/sbin/nginx, outside a normal user's PATH), or None."""
    return find_tool("nginx")


def quoted(path) -> str:
    """A path as an nginx config string: double quotes, with \\ and \" escaped."""
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def listen_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def write_nginx_config(dir, root, port: int, host: str = "127.0.0.1", cpu: Optional[int] = None,
                       worker_connections: int = 768) -> Path:
    """Write DIR/nginx.conf serving ROOT on HOST:PORT (IPv6 when HOST has a colon) and
    create the temporary directories it names; returns the config's path."""
    dir = Path(dir).resolve()
    for name in TEMP_DIRS:
        (dir / f"{name}_temp").mkdir(parents=True, exist_ok=True)
    user = "user root root;\n" if os.geteuid() == 0 else ""
    affinity = f"worker_cpu_affinity {'1' + '0' * cpu};\n" if cpu is not None else ""
    types = f"include {quoted(MIME_TYPES)};" if os.path.exists(MIME_TYPES) else FALLBACK_TYPES
    temps = "".join(f"    {name}_temp_path {quoted(dir / (name + '_temp'))};\n" for name in TEMP_DIRS)
    conf = f"""# Written by stormpy bench: Debian's nginx defaults, one worker, loopback only.
{user}worker_processes 1;
{affinity}pid {quoted(dir / 'nginx.pid')};
error_log {quoted(dir / 'error.log')} warn;

events {{
    worker_connections {worker_connections};
}}

http {{
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
    types_hash_max_size 2048;
    {types}
    default_type application/octet-stream;
    access_log off;
{temps}
    server {{
        listen {listen_address(host, port)};
        server_name _;
        root {quoted(Path(root).resolve())};
        index index.html;
        location / {{
        }}
    }}
}}
"""
    path = dir / "nginx.conf"
    path.write_text(conf)
    return path


def port_accepts(host: str, port: int, timeout: float = 0.2) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect((host, port))
            return True
        except OSError:
            return False


class NginxServer:
    """nginx in the foreground (`daemon off`) as a child of this process, in its own
    process group; started on enter (or start()), stopped on exit (or stop()).
    workdir: the private directory for config, logs and temp files (default: a new
    temporary directory, removed on stop)."""

    name = "nginx"

    def __init__(self, root, port: int, host: str = "127.0.0.1", cpu: Optional[int] = None,
                 workdir=None, ready_timeout: float = 10.0, worker_connections: int = 768):
        self.root, self.port, self.host, self.cpu = Path(root), port, host, cpu
        self.ready_timeout = ready_timeout
        self.worker_connections = worker_connections
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="stormpy-nginx-"))
        self.proc: Optional[subprocess.Popen] = None

    @property
    def error_log(self) -> Path:
        return self.workdir / "error.log"

    def command(self, conf: Path) -> list:
        binary = nginx_path()
        if binary is None:
            raise ServerFailure("nginx is not installed (apt-get install nginx)")
        return [binary, "-p", str(self.workdir), "-e", str(self.error_log), "-c", str(conf),
                "-g", "daemon off;"]

    def start(self) -> "NginxServer":
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = write_nginx_config(self.workdir, self.root, self.port, self.host, self.cpu,
                                  self.worker_connections)
        argv = self.command(conf)
        with open(self.workdir / "output.log", "wb") as out:
            self.proc = track(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                               stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + self.ready_timeout
        for _ in range(int(self.ready_timeout / 0.02) + 10):  # bounded
            if self.proc.poll() is not None:
                why = self.log_tail() or f"status {self.proc.returncode}"
                self.stop()
                raise ServerFailure(f"nginx exited at start: {why}")
            if port_accepts(self.host, self.port):
                return self
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        why = self.log_tail()
        self.stop()
        raise ServerFailure(f"nginx did not accept on {listen_address(self.host, self.port)} "
                            f"within {self.ready_timeout:g} s" + (f": {why}" if why else ""))

    def log_tail(self, lines: int = 2) -> str:
        return log_tail(str(self.error_log), lines) or log_tail(str(self.workdir / "output.log"), lines)

    def pids(self) -> list:
        """The master's pid and its children's (the worker), from /proc."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        return process_tree(self.proc.pid)

    def stop(self, grace: float = 5.0) -> None:
        """SIGQUIT (graceful: finish requests), then SIGTERM, then SIGKILL to the group."""
        p = self.proc
        if p is not None:
            for sig in (signal.SIGQUIT, signal.SIGTERM):
                if p.poll() is not None:
                    break
                p.send_signal(sig)
                try:
                    p.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    continue
            try:
                os.killpg(p.pid, signal.SIGKILL)  # whatever is left of the group
            except (ProcessLookupError, PermissionError):
                pass
            if p.poll() is None:
                p.wait(timeout=5)
            untrack(p)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "NginxServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
