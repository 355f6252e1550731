"""--user: after set-up the server and its workers run as an unprivileged user with
only the capabilities they still need, and keep serving, reloading and replacing
workers. The ring backends are checked in test_rings.py."""
import os
import pwd
import signal
import time

import dns.message
import pytest

from conftest import EXAMPLE_ZONE
from support.client import udp
from test_cli import assert_one_line_error, stormpy
from test_supervisor import snapshot, wait_for_replacement

ZONES = [("example.com.", EXAMPLE_ZONE)]
REASON = ("--user needs root to switch users" if os.geteuid() != 0 else
          "no user 'nobody' here" if "nobody" not in {p.pw_name for p in pwd.getpwall()} else None)
if REASON:
    print(f"\nSKIP test_privileges: {REASON}")


def status(pid):
    """uid, CapEff and CapPrm of a process."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    return int(fields["Uid"][1]), int(fields["CapEff"][0], 16), int(fields["CapPrm"][0], 16)


def test_unknown_user_is_one_line():
    assert_one_line_error(stormpy("serve-dns", EXAMPLE_ZONE, "--listen", "127.0.0.1:1",
                                  "--user", "no-such-user-here"), "--user no-such-user-here: no such user")


@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_socket_server_runs_as_nobody_with_no_capabilities(stormpy_server, tmp_path):
    nobody = pwd.getpwnam("nobody").pw_uid
    control = str(tmp_path / "ctl.sock")
    srv = stormpy_server(ZONES, ["--control", control, "--user", "nobody"], workers=2)
    snap = snapshot(control)
    for pid in [srv.proc.pid] + [w["pid"] for w in snap["workers"]]:
        assert status(pid) == (nobody, 0, 0), pid
    assert udp(dns.message.make_query("www.example.com", "A"), srv.addr).answer
    old = snap["workers"][1]["pid"]
    os.kill(old, signal.SIGKILL)                     # reopening needs nothing: the socket stays
    _, w = wait_for_replacement(control, 1, old)
    assert status(w["pid"]) == (nobody, 0, 0)
    os.kill(srv.proc.pid, signal.SIGHUP)             # a reload as nobody
    deadline = time.monotonic() + 10
    while snapshot(control)["reloads"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert snapshot(control)["reloads"] == 1 and snapshot(control)["reload_failures"] == 0
    assert sum(udp(dns.message.make_query("www.example.com", "A"), srv.addr) is not None
               for _ in range(20)) == 20
