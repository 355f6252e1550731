"""`stormpy ctl` against a running serve-dns (and serve-http): every command, who may use
the control socket and with which mode it is created, and reloads that are queued
rather than dropped."""
import contextlib
import grp
import json
import os
import pwd
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time

import dns.message
import dns.rcode
import pytest

from conftest import REPO
from stormpy import cli
from stormpy.control import request
from stormpy.errors import StormpyError
from support.client import udp
from support.http import HttpServerProcess
from support.servers import StormpyServer
from support.users import run_as, why_not_root
from test_cli import assert_one_line_error, stormpy
from test_reload import rewrite, wait_for, www_address

NET_ZONE = os.path.join(REPO, "tests", "zones", "example.net.zone")
NOT_ROOT = why_not_root()
if NOT_ROOT:
    print(f"\nSKIP test_ctl (the tests as another user): {NOT_ROOT}")
as_root = pytest.mark.skipif(NOT_ROOT is not None, reason=NOT_ROOT or "")


def ctl(control, *args, timeout=60):
    return stormpy("ctl", "--control", control, *args, timeout=timeout)


def ctl_json(control, *args):
    r = ctl(control, "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def ctl_as(control, *args, **kw):
    """`stormpy ctl` run as another user (support.users.run_as)."""
    cli.build_parser()                       # imports what the child will need
    import stormpy.ctl                       # noqa: F401
    return run_as(lambda: cli.main(["ctl", "--control", control, *args]), **kw)


@pytest.fixture
def open_dir():
    """A directory every user may reach (pytest's tmp_path is root's alone), holding a
    zone file: what another user's refusal is about is the socket, not the way to it."""
    path = tempfile.mkdtemp(prefix="stormpy-ctl-")
    os.chmod(path, 0o755)
    shutil.copy(NET_ZONE, path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class UmaskServer(StormpyServer):
    """serve-dns started under umask 000."""

    def command(self):
        return ["sh", "-c", 'umask 000 && exec "$@"', "sh", *super().command()]


def test_every_command(example_zone_copy, tmp_path):
    control = str(tmp_path / "ctl.sock")
    zones = [("example.com.", str(example_zone_copy)), ("example.net.", NET_ZONE)]
    with StormpyServer(zones, ["--control", control], workers=2) as srv:
        s = ctl_json(control, "status")
        # two UDP workers and a TCP worker
        assert (s["pid"], s["app"], s["backend"], s["workers"], s["workers_alive"]) == \
            (srv.proc.pid, "dns", "socket", 3, 3)
        assert f"127.0.0.1:{srv.port}" in s["listening"] and not s["reloading"]
        text = ctl(control, "status").stdout
        assert f"pid {srv.proc.pid} (dns)" in text and "workers 3 of 3 alive" in text

        zs = {z["zone"]: z for z in ctl_json(control, "zone-status")["zones"]}
        assert set(zs) == {"example.com.", "example.net."}
        assert zs["example.com."]["serial"] == 2026112101 and zs["example.net."]["serial"] == 7
        assert zs["example.com."]["file"] == str(example_zone_copy)
        assert zs["example.com."]["records"] > 0 and zs["example.com."]["responses"] > 0
        assert zs["example.com."]["last_error"] is None
        one = ctl_json(control, "zone-status", "EXAMPLE.net")["zones"]
        assert [z["zone"] for z in one] == ["example.net."]
        assert "example.net. serial 7," in ctl(control, "zone-status", "example.net.").stdout

        for _ in range(5):
            assert www_address(srv.addr) == "192.0.2.80"
        snap = ctl_json(control, "stats")
        assert sum(w["rx"] for w in snap["workers"]) >= 5 and len(snap["workers"]) == 3
        assert "worker 1: rx=" in ctl(control, "stats").stdout
        assert json.loads(stormpy("stats", "--control", control, "--json").stdout)["workers"]

        rewrite(example_zone_copy, "www     IN A    192.0.2.80", "www     IN A    192.0.2.81")
        r = ctl(control, "reload")
        assert r.returncode == 0 and r.stdout.startswith("reloaded 2 zone(s)"), r.stderr
        assert www_address(srv.addr) == "192.0.2.81"             # answered once the reload is done
        assert ctl_json(control, "status")["reloads"] == 1

        assert_one_line_error(ctl(control, "reload", "example.org"), "no zone 'example.org' here")
        assert_one_line_error(ctl(control, "zone-status", "no..name"), "no zone")
        with pytest.raises(StormpyError, match="unknown command 'bogus'"):
            request(control, "bogus")

        r = ctl(control, "stop")
        assert r.returncode == 0 and r.stdout.strip() == f"stopping pid {srv.proc.pid}"
        assert srv.proc.wait(timeout=15) == 0
        assert "Traceback" not in srv.output() and not os.path.exists(control)
    assert_one_line_error(ctl(control, "status"), "no server is listening on")


def test_a_zone_reload_reads_only_that_zone_and_a_bad_one_keeps_serving(example_zone_copy,
                                                                          tmp_path):
    control = str(tmp_path / "ctl.sock")
    zones = [("example.com.", str(example_zone_copy)), ("example.net.", NET_ZONE)]
    with StormpyServer(zones, ["--control", control]) as srv:
        before = {z["zone"]: z["loaded_at"] for z in ctl_json(control, "zone-status")["zones"]}
        rewrite(example_zone_copy, "2026112101", "2026112102")
        rewrite(example_zone_copy, "www     IN A    192.0.2.80", "www     IN A    192.0.2.82")
        assert ctl(control, "reload", "example.com").returncode == 0
        assert www_address(srv.addr) == "192.0.2.82"
        after = {z["zone"]: z for z in ctl_json(control, "zone-status")["zones"]}
        assert after["example.com."]["serial"] == 2026112102
        assert after["example.com."]["loaded_at"] > before["example.com."]
        assert after["example.net."]["loaded_at"] == before["example.net."]   # not read again

        rewrite(example_zone_copy, "192.0.2.82", "192.0.2.800")
        assert_one_line_error(ctl(control, "reload", "example.com."), "reload failed",
                              f"{example_zone_copy}:21:")
        assert www_address(srv.addr) == "192.0.2.82"
        z = ctl_json(control, "zone-status", "example.com")["zones"][0]
        assert z["serial"] == 2026112102 and f"{example_zone_copy}:21:" in z["last_error"]
        assert "last reload failed:" in ctl(control, "zone-status").stdout
        s = ctl_json(control, "status")
        assert (s["reloads"], s["reload_failures"]) == (1, 1)


def test_a_reload_of_every_zone_serves_the_good_ones_and_keeps_a_bad_ones_old_version(
        example_zone_copy, tmp_path):
    """As Knot DNS and NSD reload zone by zone: one broken file does not hold back the
    others' changes, and ctl says which zone stayed as it was (exit 1, for scripts)."""
    control = str(tmp_path / "ctl.sock")
    net = tmp_path / "net.zone"
    shutil.copy(NET_ZONE, net)
    zones = [("example.com.", str(example_zone_copy)), ("example.net.", str(net))]
    with StormpyServer(zones, ["--control", control]) as srv:
        rewrite(example_zone_copy, "www     IN A    192.0.2.80", "www     IN A    192.0.2.83")
        with open(net, "a") as f:
            f.write("broken IN A 999.1.1.1\n")
        r = ctl(control, "reload")
        assert r.returncode == 1 and r.stdout.startswith("reloaded 2 zone(s)"), r.stdout
        assert "not reloaded:" in r.stdout and f"{net}:" in r.stdout
        assert "previous version still serves" in r.stdout
        assert www_address(srv.addr) == "192.0.2.83"
        status = {z["zone"]: z for z in ctl_json(control, "zone-status")["zones"]}
        assert status["example.net."]["last_error"] and not status["example.com."]["last_error"]
        s = ctl_json(control, "status")
        assert (s["reloads"], s["reload_failures"]) == (1, 1)
        assert "Traceback" not in srv.output()


def test_a_reload_logs_each_serial_and_the_mistakes_secondaries_never_see_past(
        example_zone_copy, tmp_path):
    control = str(tmp_path / "ctl.sock")
    with StormpyServer([("example.com.", str(example_zone_copy))], ["--control", control]) as srv:
        rewrite(example_zone_copy, "2026112101", "2026112105")
        assert ctl(control, "reload").returncode == 0
        assert "zone example.com.: serial 2026112101 -> 2026112105" in srv.output()
        rewrite(example_zone_copy, "2026112105", "2026112102")
        assert ctl(control, "reload").returncode == 0
        assert "serial 2026112105 -> 2026112102 goes backwards (RFC 1982)" in srv.output()
        with open(example_zone_copy, "a") as f:
            f.write("added IN A 192.0.2.77\n")
        assert ctl(control, "reload").returncode == 0
        assert "with the same serial 2026112102: secondaries will not transfer" in srv.output()
        # as many records as before, one address changed: the records differ all the same
        rewrite(example_zone_copy, "added IN A 192.0.2.77", "added IN A 192.0.2.78")
        assert ctl(control, "reload").returncode == 0
        assert "records changed, with the same serial 2026112102" in srv.output()
        # the same records, written differently: nothing to say
        rewrite(example_zone_copy, "added IN A 192.0.2.78", "added  3600 IN A 192.0.2.78 ; a comment")
        before = srv.output().count("with the same serial")
        assert ctl(control, "reload").returncode == 0
        assert srv.output().count("with the same serial") == before


class Fifo:
    """A named pipe a zone $INCLUDEs: whoever reads the zone waits until the test
    writes it, so the test knows a reload is under way and holds it there."""

    def __init__(self, path):
        self.path = str(path)
        os.mkfifo(self.path)

    def reader_waiting(self, seconds=15.0) -> int:
        """The write end, once a reader has the pipe open."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                return os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:                                   # ENXIO: no reader yet
                time.sleep(0.02)
        raise AssertionError("nobody read the zone's $INCLUDE")

    @staticmethod
    def release(fd):
        os.write(fd, b"late IN A 192.0.2.99\n")
        os.close(fd)


@contextlib.contextmanager
def held_zone_server(example_zone_copy, tmp_path):
    """serve-dns with example.com and a zone whose $INCLUDE is a Fifo, fed at start."""
    fifo = Fifo(tmp_path / "slow.fifo")
    slow = tmp_path / "slow.zone"
    slow.write_text("$ORIGIN slow.test.\n$TTL 300\n@ IN SOA ns hostmaster 1 3600 600 86400 300\n"
                    "@ IN NS ns\nns IN A 192.0.2.53\n$INCLUDE slow.fifo\n")
    control = str(tmp_path / "ctl.sock")
    srv = StormpyServer([("example.com.", str(example_zone_copy)), ("slow.test.", str(slow))],
                        ["--control", control])
    starting = threading.Thread(target=lambda: Fifo.release(fifo.reader_waiting()))
    starting.start()
    with srv:
        starting.join(timeout=5)
        yield srv, fifo, control


def test_a_reload_asked_for_during_a_reload_runs_after_it(example_zone_copy, tmp_path):
    """The zone is edited while a reload is held inside another zone's $INCLUDE: a
    reload asked for then (ctl, and a SIGHUP, which share one run) loads the edit."""
    with held_zone_server(example_zone_copy, tmp_path) as (srv, fifo, control):
        srv.proc.send_signal(signal.SIGHUP)
        held = fifo.reader_waiting()                 # reload 1 read example.com, waits here
        rewrite(example_zone_copy, "www     IN A    192.0.2.80", "www     IN A    192.0.2.81")
        answer = {}
        asker = threading.Thread(target=lambda: answer.update(r=ctl(control, "reload")))
        asker.start()
        assert wait_for(lambda: ctl_json(control, "status")["reload_queued"])
        srv.proc.send_signal(signal.SIGHUP)          # joins the queued reload
        time.sleep(0.3)
        assert www_address(srv.addr) == "192.0.2.80"   # meanwhile the old table serves
        Fifo.release(held)
        assert wait_for(lambda: ctl_json(control, "status")["reloads"] == 1)
        Fifo.release(fifo.reader_waiting())          # reload 2, the queued one
        asker.join(timeout=30)
        assert answer["r"].returncode == 0, answer["r"].stderr
        assert www_address(srv.addr) == "192.0.2.81"
        s = ctl_json(control, "status")
        assert (s["reloads"], s["reload_failures"], s["reloading"]) == (2, 0, False)
        assert "ignored" not in srv.output()


def test_a_sighup_while_the_zones_load_at_start_reloads_once_serving(example_zone_copy,
                                                                       tmp_path):
    """SIGHUP's default action ends a process: a `systemctl reload` just after a start
    took the server down while it read its zones. It is remembered instead."""
    fifo = Fifo(tmp_path / "slow.fifo")
    slow = tmp_path / "slow.zone"
    slow.write_text("$ORIGIN slow.test.\n$TTL 300\n@ IN SOA ns hostmaster 1 3600 600 86400 300\n"
                    "@ IN NS ns\nns IN A 192.0.2.53\n$INCLUDE slow.fifo\n")
    srv = StormpyServer([("example.com.", str(example_zone_copy)), ("slow.test.", str(slow))],
                        ["--control", str(tmp_path / "ctl.sock")])
    def start():
        held = fifo.reader_waiting()                 # the start is reading the zones
        rewrite(example_zone_copy, "www     IN A    192.0.2.80", "www     IN A    192.0.2.84")
        srv.proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        Fifo.release(held)
    starting = threading.Thread(target=start)
    starting.start()
    with srv:
        starting.join(timeout=20)
        Fifo.release(fifo.reader_waiting())          # the reload asked for while starting
        assert wait_for(lambda: www_address(srv.addr) == "192.0.2.84"), srv.output()
        assert srv.proc.poll() is None
        assert "a reload was asked for while starting" in srv.output()


def test_a_zone_reload_does_not_wait_for_another_zone(example_zone_copy, tmp_path):
    """Only the named zone is read: the other's $INCLUDE, a pipe nobody writes, is not."""
    with held_zone_server(example_zone_copy, tmp_path) as (srv, fifo, control):
        rewrite(example_zone_copy, "www     IN A    192.0.2.80", "www     IN A    192.0.2.83")
        assert ctl(control, "reload", "example.com", timeout=20).returncode == 0
        assert www_address(srv.addr) == "192.0.2.83"
        r = udp(dns.message.make_query("late.slow.test", "A"), srv.addr)
        assert r.answer[0][0].address == "192.0.2.99"      # kept as parsed at start


def test_serve_http_reloads_and_has_no_zones(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("hello\n")
    control = str(tmp_path / "ctl.sock")
    with HttpServerProcess(str(site), ["--control", control]):
        assert ctl_json(control, "status")["app"] == "http"
        (site / "b.txt").write_text("b\n")
        r = ctl(control, "reload")
        assert r.returncode == 0 and "2 file(s)" in r.stdout, r.stderr
        assert_one_line_error(ctl(control, "zone-status"), "this server has no zones")
        assert_one_line_error(ctl(control, "reload", "example.com"), "this server has no zones")


def test_the_socket_is_0600_under_umask_000(open_dir):
    control = os.path.join(open_dir, "ctl.sock")
    zone = os.path.join(open_dir, "example.net.zone")
    with UmaskServer([("example.net.", zone)], ["--control", control]):
        st = os.stat(control)
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
        if NOT_ROOT:
            return
        rc, out, err = ctl_as(control, "stats")
        assert rc == 1 and err.strip() == f"stormpy: error: {control}: permission denied", err
        assert out == ""


@as_root
def test_another_user_is_refused_even_past_the_file_mode(open_dir):
    """CAP_DAC_OVERRIDE passes the socket's mode; the server's peer check still refuses."""
    control = os.path.join(open_dir, "ctl.sock")
    zone = os.path.join(open_dir, "example.net.zone")
    with StormpyServer([("example.net.", zone)], ["--control", control]) as srv:
        for command in ("stats", "reload", "stop"):
            rc, out, err = ctl_as(control, command, dac_override=True)
            assert rc == 1 and err.strip() == "stormpy: error: permission denied", err
            assert out == ""
        assert srv.proc.poll() is None and ctl_json(control, "status")["reloads"] == 0


@as_root
def test_the_servers_own_user_may_use_it(open_dir):
    control = os.path.join(open_dir, "ctl.sock")
    zone = os.path.join(open_dir, "example.net.zone")
    with StormpyServer([("example.net.", zone)], ["--control", control, "--user", "nobody"]):
        nobody = pwd.getpwnam("nobody").pw_uid        # the socket is handed over at the drop
        assert wait_for(lambda: os.stat(control).st_uid == nobody)
        assert stat.S_IMODE(os.stat(control).st_mode) == 0o600
        rc, out, err = ctl_as(control, "reload")
        assert rc == 0 and out.startswith("reloaded 1 zone(s)"), err
        rc, out, err = ctl_as(control, "status")
        assert rc == 0 and "user nobody" in out, err
        assert ctl_json(control, "status")["reloads"] == 1      # and root


def _a_group():
    """A group other than root's and nobody's."""
    nobody = pwd.getpwnam("nobody").pw_gid
    return next(g for g in grp.getgrall() if g.gr_gid not in (0, nobody))


@as_root
def test_control_group_members_may_use_it(open_dir):
    group = _a_group()
    control = os.path.join(open_dir, "ctl.sock")
    zone = os.path.join(open_dir, "example.net.zone")
    with UmaskServer([("example.net.", zone)],
                     ["--control", control, "--control-group", group.gr_name]):
        st = os.stat(control)
        assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o660, group.gr_gid)
        rc, out, err = ctl_as(control, "status", groups=[group.gr_gid])   # a supplementary group
        assert rc == 0 and out.startswith("pid "), err
        rc, out, err = ctl_as(control, "status")
        assert rc == 1 and "permission denied" in err


def test_an_unknown_control_group_is_one_line(tmp_path):
    assert_one_line_error(stormpy("serve-dns", NET_ZONE, "--listen", "127.0.0.1:1",
                                  "--control", str(tmp_path / "c.sock"),
                                  "--control-group", "no-such-group-here"),
                          "--control-group no-such-group-here: no such group")


def test_a_stray_client_does_not_hold_the_server(tmp_path):
    """A client that sends nothing, or garbage, gets one line and the server goes on."""
    import socket
    control = str(tmp_path / "ctl.sock")
    with StormpyServer([("example.net.", NET_ZONE)], ["--control", control]):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(10)
            s.connect(control)
            s.sendall(b"not json\n")
            assert json.loads(s.makefile().readline())["ok"] is False
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(10)
            s.connect(control)
            s.shutdown(socket.SHUT_WR)                     # an old client: the stats
            assert "workers" in json.loads(s.makefile().readline())
        assert ctl_json(control, "status")["workers_alive"] == 2   # UDP's and TCP's


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_a_zone_that_does_not_load_at_start_leaves_the_others_served(example_zone_copy,
                                                                     tmp_path):
    """As Knot DNS and NSD start: one broken file among the zones kept the whole server
    from starting. It is said, not served, and a reload that reads it fixed serves it."""
    broken = tmp_path / "other.zone"
    broken.write_text("$ORIGIN other.test.\n$TTL 300\n@ IN SOA ns h 1 3600 600 86400 300\n"
                      "@ IN NS ns\nns IN A 192.0.2.300\n")
    control = str(tmp_path / "ctl.sock")
    srv = StormpyServer([("example.com.", str(example_zone_copy)), ("other.test.", str(broken))],
                        ["--control", control])
    with srv:
        assert www_address(srv.addr) == "192.0.2.80"
        r = udp(dns.message.make_query("ns.other.test", "A"), srv.addr)
        assert r.rcode() == dns.rcode.REFUSED                      # not served
        said = [x for x in srv.output().splitlines() if "other.zone" in x]
        assert len(said) == 1 and "not served until a reload reads it" in said[0], said
        status = {z["file"]: z for z in ctl_json(control, "zone-status")["zones"]}
        assert "192.0.2.300" in status[str(broken)]["last_error"]
        said = ctl(control, "zone-status").stdout
        assert f"{broken} not loaded (from {broken})" in said and "failed to load: " in said
        assert ctl(control, "reload", str(broken)).returncode == 1      # named by its file
        broken.write_text(broken.read_text().replace("192.0.2.300", "192.0.2.30"))
        assert ctl(control, "reload", str(broken)).returncode == 0
        r = udp(dns.message.make_query("ns.other.test", "A"), srv.addr)
        assert r.answer[0][0].address == "192.0.2.30"
        assert www_address(srv.addr) == "192.0.2.80"
