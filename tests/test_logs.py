"""The log: a date and a level on every line, and --log stderr|syslog|FILE (a FILE reopened
when logrotate moves it; syslog through a datagram socket, here one the test binds)."""
import logging
import os
import re
import signal
import socket
import time

import pytest

from conftest import EXAMPLE_ZONE
from stormpy.errors import StormpyError
from stormpy.logs import setup_logging
from support.servers import StormpyServer
from test_cli import assert_one_line_error, stormpy

DATED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ stormpy\[(\d+)\]: (info|warning|error): ")


@pytest.fixture
def root_logger():
    """The root logger's handlers and level as they were, again after the test."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    yield root
    for h in root.handlers[:]:
        if h not in saved[0]:
            root.removeHandler(h)
            h.close()
    root.setLevel(saved[1])


def test_file_lines_carry_utc_date_pid_and_level(root_logger, tmp_path):
    path = tmp_path / "stormpy.log"
    path.write_text("kept\n")
    setup_logging(str(path))
    before = time.gmtime()
    logging.getLogger("stormpy").info("serving %d zone(s)", 2)
    logging.getLogger("stormpy").warning("a worker died")
    lines = path.read_text().splitlines()
    assert lines[0] == "kept"                       # appended, not truncated
    assert [DATED.match(l).groups() for l in lines[1:]] == [(str(os.getpid()), "info"),
                                                              (str(os.getpid()), "warning")]
    assert lines[1].endswith(": info: serving 2 zone(s)")
    assert lines[1][:10] == time.strftime("%Y-%m-%d", before)


def test_syslog_gets_pid_level_and_daemon_facility_without_a_date(root_logger, tmp_path):
    path = str(tmp_path / "log.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as daemon:
        daemon.bind(path)
        daemon.settimeout(2)
        setup_logging(f"syslog:{path}")
        logging.getLogger("stormpy").info("reloaded")
        got = daemon.recv(4096)
    # <30>: facility daemon (3) * 8 + severity info (6), as syslog(3) frames it
    assert got.rstrip(b"\0") == f"<30>stormpy[{os.getpid()}]: info: reloaded".encode()


def test_unusable_targets_are_one_line(tmp_path):
    with pytest.raises(StormpyError, match="does not exist"):
        setup_logging(f"syslog:{tmp_path / 'no.sock'}")
    with pytest.raises(StormpyError, match="cannot open it"):
        setup_logging(str(tmp_path / "no" / "dir" / "x.log"))
    r = stormpy("serve-dns", EXAMPLE_ZONE, "--log", str(tmp_path / "no" / "x.log"))
    assert_one_line_error(r, "--log", "x.log")


def test_a_server_logs_to_its_file_and_follows_logrotate(tmp_path):
    path = tmp_path / "serve.log"
    with StormpyServer([("example.com", EXAMPLE_ZONE)], ["--log", str(path), "--control", ""]) as srv:
        deadline = time.monotonic() + 10                   # it answers before it says so
        while ": info: serving " not in path.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.rename(path, tmp_path / "serve.log.1")          # as logrotate does, then a reload
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert path.exists(), srv.output()
    rotated = (tmp_path / "serve.log.1").read_text().splitlines()
    assert rotated and all(DATED.match(l) for l in rotated), rotated
    assert any(": info: serving " in l for l in rotated), rotated
    assert all(DATED.match(l) for l in path.read_text().splitlines())
    assert "reload" in path.read_text()
    assert srv.output().strip() == ""                       # nothing went to stderr
