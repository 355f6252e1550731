"""stormpy following a primary, and a primary for others (RFC 1995, 1996, 5936, 8945),
in network namespaces: Knot as the primary (client namespace, 198.18.0.2) and stormpy
as its secondary (server namespace, 198.18.0.1); then Knot as stormpy's secondary."""
import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import dns.zone
import pytest

from stormpy import _core

from support.backends import EVERY_BACKEND
from support.netns import (CLIENT_V4, REPO, SERVER_V4, NsServer, VethPair, stop_process,
                           why_no_netns)
from support.servers import knotc_path, knotd_path

pytestmark = [pytest.mark.skipif(why_no_netns() is not None, reason=str(why_no_netns())),
              pytest.mark.skipif(knotd_path() is None, reason="knotd not installed")]

ORIGIN = "example.com."
SECRET = base64.b64encode(b"stormpy-secondary-test-key-0001").decode()
TSIG = f"xfrkey:hmac-sha256:{SECRET}"
NOTIFY_BOUND = 3.0      # seconds from knotc zone-reload to the new serial (CI is slow)


def zone_text(serial: int, extra: str = "", expire: int = 600, refresh: int = 300) -> str:
    return (f"$ORIGIN {ORIGIN}\n$TTL 300\n"
            f"@ SOA ns hostmaster {serial} {refresh} 2 {expire} 60\n@ NS ns\n"
            f"ns A 198.18.0.2\nwww A 192.0.2.{serial % 250 + 1}\n"
            + "".join(f"h{i} TXT \"record {i}\"\n" for i in range(200)) + extra)


class KnotPrimary:
    """knotd in the client namespace serving ORIGIN from a file it reloads as a
    difference (so its journal has IXFRs), notifying stormpy, transfers with TSIG."""

    def __init__(self, pair, workdir, serial=1, key=True, notify=True, expire=600, refresh=300):
        self.pair, self.dir = pair, workdir
        self.zonefile = os.path.join(workdir, "example.com.zone")
        self.expire, self.refresh = expire, refresh
        self.write(serial)
        keyline = "    key: xfrkey\n" if key else ""
        conf = (f"server:\n    rundir: {workdir}\n    listen: {CLIENT_V4}@53\n"
                f"    udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\n"
                f"key:\n  - id: xfrkey\n    algorithm: hmac-sha256\n    secret: {SECRET}\n"
                f"remote:\n  - id: stormpy\n    address: {SERVER_V4}@53\n{keyline}"
                f"acl:\n  - id: xfr\n    address: {SERVER_V4}\n{keyline}    action: transfer\n"
                f"database:\n    storage: {workdir}\n"
                f"template:\n  - id: default\n    storage: {workdir}\n    zonefile-sync: -1\n"
                f"    zonefile-load: difference\n    journal-content: changes\n"
                f"    semantic-checks: off\n"
                f"zone:\n  - domain: {ORIGIN}\n    file: {self.zonefile}\n    acl: xfr\n"
                + ("    notify: stormpy\n" if notify else "") +
                "log:\n  - target: stdout\n    any: info\n")
        self.conf = os.path.join(workdir, "knot.conf")
        with open(self.conf, "w") as f:
            f.write(conf)

    def write(self, serial, extra=""):
        with open(self.zonefile, "w") as f:
            f.write(zone_text(serial, extra, self.expire, self.refresh))

    def __enter__(self):
        self.log = open(os.path.join(self.dir, "knotd.log"), "w+")
        self.proc = subprocess.Popen(self.pair.argv(self.pair.client, knotd_path(), "-c", self.conf),
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            r = self.pair.query([[ORIGIN, "SOA"]], server=CLIENT_V4, timeout=0.5)[0]
            if r is not None and r["rcode"] == 0:
                return self
            time.sleep(0.2)
        self.__exit__()
        raise RuntimeError(f"knotd did not start: {self.output()}")

    def reload(self):
        r = self.pair.run(self.pair.client, knotc_path(), "-c", self.conf, "zone-reload", ORIGIN)
        assert r.returncode == 0, r.stdout + r.stderr

    def output(self):
        if self.log.closed:
            return self.text
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        stop_process(self.proc)

    def __exit__(self, *exc):
        self.stop()
        self.text = self.output()
        self.log.close()


class Secondary(NsServer):
    """stormpy serve-dns --secondary in the server namespace, ready once it serves
    the zone (or, wait=False, at once)."""

    def __init__(self, pair, args, wait=True):
        super().__init__(pair, args)
        self.wait = wait

    def __enter__(self):
        cmd = ["ip", "netns", "exec", self.pair.server, sys.executable, "-m", "stormpy",
               "serve-dns", *self.args]
        env = dict(os.environ, PYTHONPATH=REPO, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        if self.wait and wait_for(self.pair, lambda r: r and r["rcode"] == 0, 20) is None:
            self.stop()
            raise RuntimeError(f"secondary did not serve the zone: {self.log}")
        return self


def soa(pair, server=SERVER_V4, tcp=False):
    r = pair.query([[ORIGIN, "SOA"]], server=server, tcp=tcp, timeout=0.5)[0]
    return r


def serial_of(r):
    return int(r["answer"][0].split()[2]) if r and r["rcode"] == 0 and r["answer"] else None


def wait_for(pair, ok, seconds, server=SERVER_V4):
    """The first SOA answer that ok() accepts within seconds, else None."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r = soa(pair, server)
        if ok(r):
            return r
        time.sleep(0.05)
    return None


@pytest.fixture
def pair():
    with VethPair() as p:
        yield p


@pytest.fixture
def workdir():
    with tempfile.TemporaryDirectory(prefix="sp-secondary-") as d:
        os.chmod(d, 0o755)
        yield d


@pytest.fixture
def dirs(workdir):
    """Knot's directory and the secondary's --zone-dir."""
    knot_dir, zone_dir = os.path.join(workdir, "knot"), os.path.join(workdir, "zones")
    os.mkdir(knot_dir)
    os.mkdir(zone_dir)
    return knot_dir, zone_dir


def serving_on(backend: str) -> list:
    """serve-dns's arguments to answer at SERVER_V4:53 on this backend."""
    return (["--listen", f"{SERVER_V4}:53", "--workers", "1"] if backend == "socket" else
            ["--iface", "veth0", "--backend", backend])


def secondary_args(zone_dir, backend="socket"):
    return ["--secondary", ORIGIN, "--primary", CLIENT_V4, "--tsig", TSIG, "--zone-dir", zone_dir,
            *serving_on(backend)]


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_axfr_at_start_then_notify_and_ixfr(pair, dirs, backend):
    knot_dir, zone_dir = dirs
    with KnotPrimary(pair, knot_dir, serial=1) as knot, \
            Secondary(pair, secondary_args(zone_dir, backend)) as sec:
        assert serial_of(soa(pair)) == 1
        www = pair.query([["www.example.com", "A"]], timeout=1)[0]
        assert www["rcode"] == 0 and www["answer"][0].endswith("192.0.2.2")
        # a change of a few records on the primary: NOTIFY, then IXFR
        knot.write(2, "new A 192.0.2.99\n")
        started = time.monotonic()
        knot.reload()
        r = wait_for(pair, lambda r: serial_of(r) == 2, NOTIFY_BOUND + 10)
        took = time.monotonic() - started
        assert r is not None, sec.stop() or sec.log
        new = pair.query([["new.example.com", "A"]], timeout=1)[0]
        assert new["rcode"] == 0 and new["answer"][0].endswith("192.0.2.99")
        assert serial_of(soa(pair, tcp=True)) == 2
        assert took < NOTIFY_BOUND, f"new serial after {took:.2f} s"
        # and a record taken away: the name is gone, the changed one changed
        knot.write(3, "")
        knot.reload()
        assert wait_for(pair, lambda r: serial_of(r) == 3, NOTIFY_BOUND + 10), sec.stop() or sec.log
        gone, www = pair.query([["new.example.com", "A"], ["www.example.com", "A"]], timeout=1)
        assert gone["rcode"] == 3 and www["answer"] and www["answer"][0].endswith("192.0.2.4")
        sec.stop()
    print(f"serial 2 served {took:.3f} s after knotc zone-reload")
    # the AXFR read in C (TSIG-signed), then IXFRs applied to that C store
    assert ("AXFR serial 1 (read in C)" if _core.ZONE_READER else "AXFR serial 1") in sec.log, \
        sec.log
    assert "not taken in C" not in sec.log, sec.log
    assert "NOTIFY for example.com. from 198.18.0.2" in sec.log, sec.log
    assert "IXFR 1 -> 2" in sec.log, sec.log          # a delta, not the whole zone
    # and the table edited for it, not compiled whole
    assert sec.log.count("compiled in C, edited") == 2, sec.log
    assert "Traceback" not in sec.log
    # Knot saw a signed NOTIFY answered (no retries, no errors)
    out = knot.output()
    assert "notify, outgoing, remote 198.18.0.1@53, serial 2" in out, out
    assert "server responded with error" not in out, out
    # the transferred zone is on disk, and a restart serves it before the primary answers
    saved = os.path.join(zone_dir, "example.com.zone")
    kept = dns.zone.from_file(saved, relativize=False)
    assert kept.get_soa().serial == 3 and kept.get_node("new.example.com.") is None
    assert kept.get_rdataset("www.example.com.", "A")[0].address == "192.0.2.4"
    with Secondary(pair, secondary_args(zone_dir, backend), wait=False) as again:
        r = wait_for(pair, lambda r: serial_of(r) == 3, 10)
        again.stop()
    assert r is not None, again.log
    assert "serial 3 from" in again.log, again.log


def test_a_secondary_passes_its_primarys_ixfr_on(pair, dirs, workdir):
    """A chain: Knot, then stormpy following it, then a secondary of stormpy asking IXFR
    from serial 1. stormpy's journal takes the change from its patched C store (no copy
    of the zone in Python) and the downstream copy comes out as Knot's serial 2."""
    knot_dir, zone_dir = dirs
    first, second = os.path.join(workdir, "first.zone"), os.path.join(workdir, "second.zone")
    with open(first, "w") as f:
        f.write(zone_text(1))
    with open(second, "w") as f:
        f.write(zone_text(2, "new A 192.0.2.99\n"))       # www changed, new added
    script = ("import base64,dns.query,dns.tsig,dns.xfr,dns.zone,sys\n"
              f"key=dns.tsig.Key('xfrkey.',{SECRET!r},'hmac-sha256')\n"
              f"z=dns.zone.from_file({first!r},relativize=False)\n"
              "q,_=dns.xfr.make_query(z,serial=1,keyring={key.name:key},keyname=key.name)\n"
              f"dns.query.inbound_xfr({SERVER_V4!r},z,q,lifetime=10)\n"
              f"w=dns.zone.from_file({second!r},relativize=False)\n"
              "rec=lambda z:{(n,r.rdtype,r.ttl,d) for n,r in z.iterate_rdatasets() for d in r}\n"
              "print('same' if rec(z)==rec(w) else 'differ', z.get_soa().serial)\n")
    with KnotPrimary(pair, knot_dir, serial=1) as knot, \
            Secondary(pair, [*secondary_args(zone_dir), "--transfer-allow", "198.18.0.0/24"]) as sec:
        assert serial_of(soa(pair)) == 1
        knot.write(2, "new A 192.0.2.99\n")
        knot.reload()
        assert wait_for(pair, lambda r: serial_of(r) == 2, NOTIFY_BOUND + 10), sec.stop() or sec.log
        out = pair.run(pair.client, sys.executable, "-c", script)
        sec.stop()
    assert out.stdout.split() == ["same", "2"], out.stdout + out.stderr + sec.log
    assert "IXFR 1 -> 2" in sec.log and "transfer of example.com. to 198.18.0.2: IXFR 1 -> 2" \
        in sec.log, sec.log
    assert "Traceback" not in sec.log


def test_restart_catches_up_by_ixfr(pair, dirs):
    knot_dir, zone_dir = dirs
    with KnotPrimary(pair, knot_dir, serial=1, notify=False) as knot:
        with Secondary(pair, secondary_args(zone_dir)) as sec:
            sec.stop()
        knot.write(2, "later A 192.0.2.77\n")
        knot.reload()
        time.sleep(0.5)
        with Secondary(pair, secondary_args(zone_dir)) as sec:
            r = wait_for(pair, lambda r: serial_of(r) == 2, 10)
            later = pair.query([["later.example.com", "A"]], timeout=1)[0]
            sec.stop()
    assert r is not None, sec.log
    assert later["rcode"] == 0 and later["answer"][0].endswith("192.0.2.77"), later
    assert "IXFR 1 -> 2" in sec.log, sec.log
    if _core.ZONE_READER:   # the saved copy read in C, then patched and the table edited
        assert "serial 1 from" in sec.log and "(read in C)" in sec.log, sec.log
        assert "compiled in C, edited" in sec.log, sec.log


def test_primary_gone_expires_to_servfail(pair, dirs):
    knot_dir, zone_dir = dirs
    control = os.path.join(zone_dir, "ctl.sock")
    with KnotPrimary(pair, knot_dir, serial=1, expire=4, refresh=1) as knot, \
            Secondary(pair, secondary_args(zone_dir) + ["--control", control]) as sec:
        knot.stop()
        r = wait_for(pair, lambda r: r is not None and r["rcode"] == 2, 15)
        assert r is not None, sec.stop() or sec.log
        other = pair.query([["www.example.com", "A"]], timeout=1)[0]
        assert other["rcode"] == 2
        status = subprocess.run([sys.executable, "-m", "stormpy", "ctl", "--control", control,
                                 "--json", "zone-status"], cwd=REPO, capture_output=True,
                                text=True, timeout=30)
        sec.stop()
    assert "expired" in sec.log and "SERVFAIL" in sec.log, sec.log
    zone = json.loads(status.stdout)["zones"][0]
    assert zone["expired"] and zone["primary"] == CLIENT_V4 and zone["transfers"]["axfr"] == 1


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_bad_tsig_and_stranger_notify_refused(pair, dirs, backend):
    import dns.message
    import dns.opcode
    import dns.tsigkeyring
    knot_dir, zone_dir = dirs
    with KnotPrimary(pair, knot_dir, serial=1), \
            Secondary(pair, secondary_args(zone_dir, backend)) as sec:
        # the primary's address, a wrong key: NOTAUTH; then an unsigned NOTIFY from another
        # address in the client namespace: refused
        pair.run(pair.client, "ip", "addr", "add", "198.18.0.3/24", "dev", "veth0")
        bad = dns.tsigkeyring.from_text({"xfrkey": base64.b64encode(b"wrong").decode()})
        results = []
        for source, keyring in ((CLIENT_V4, bad), ("198.18.0.3", None)):
            m = dns.message.make_query(ORIGIN, "SOA")
            m.set_opcode(dns.opcode.NOTIFY)
            if keyring:
                m.use_tsig(keyring, "xfrkey")
            results.append(notify_from(pair, source, m.to_wire()))
        time.sleep(0.3)
        sec.stop()
    assert results[0] is not None and results[0][3] & 0xF == 9, results    # NOTAUTH
    assert results[1] is not None and results[1][3] & 0xF in (5, 9), results
    assert "NOTIFY from 198.18.0.2 refused: bad TSIG" in sec.log, sec.log
    assert "NOTIFY for example.com. from 198.18.0.3 refused: not from the primary" in sec.log
    assert "Traceback" not in sec.log


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_a_notify_is_answered_from_the_address_it_was_sent_to(pair, dirs, backend):
    """Two addresses served: the answer to a NOTIFY sent to the second leaves from the
    second (Knot and BIND drop an answer from another address, and retry the NOTIFY)."""
    knot_dir, zone_dir = dirs
    pair.run(pair.server, "ip", "addr", "add", f"{SECOND_V4}/24", "dev", "veth0")
    args = secondary_args(zone_dir, backend)
    if backend == "socket":
        args += ["--listen", f"{SECOND_V4}:53"]
    with KnotPrimary(pair, knot_dir, serial=1), Secondary(pair, args) as sec:
        answers = [notify_from(pair, CLIENT_V4, notify_message().to_wire(), to)
                   for to in (SECOND_V4, SERVER_V4)]
        sec.stop()
    assert all(a is not None and a[2] & 0xF8 == 0xA0 for a in answers), (answers, sec.log)
    assert "Traceback" not in sec.log


SECOND_V4 = "198.18.0.4"


def notify_from(pair, source, wire, to=SERVER_V4):
    """The answer to wire sent from source to to:53; a connected socket, so an answer
    from another address (which a primary drops) counts as none."""
    script = ("import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
              f"s.bind(({source!r},0));s.settimeout(2);s.connect(({to!r},53))\n"
              f"s.send(bytes.fromhex({wire.hex()!r}))\n"
              "try:\n print(s.recv(65535).hex())\nexcept socket.timeout:\n print('')\n")
    r = pair.run(pair.client, sys.executable, "-c", script)
    return bytes.fromhex(r.stdout.strip()) if r.stdout.strip() else None


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_knot_as_secondary_of_stormpy(pair, workdir, backend):
    """Outbound AXFR with TSIG: knotd (client namespace) follows stormpy's zone."""
    zone = os.path.join(workdir, "example.com.zone")
    with open(zone, "w") as f:
        f.write(zone_text(7))
    storage = os.path.join(workdir, "knot")
    os.mkdir(storage)
    conf = os.path.join(storage, "knot.conf")
    with open(conf, "w") as f:
        f.write(f"server:\n    rundir: {storage}\n    listen: {CLIENT_V4}@53\n"
                f"    udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\n"
                f"key:\n  - id: xfrkey\n    algorithm: hmac-sha256\n    secret: {SECRET}\n"
                f"remote:\n  - id: stormpy\n    address: {SERVER_V4}@53\n    key: xfrkey\n"
                f"acl:\n  - id: notify\n    address: {SERVER_V4}\n    key: xfrkey\n"
                f"    action: notify\n"
                f"database:\n    storage: {storage}\n"
                f"template:\n  - id: default\n    storage: {storage}\n"
                f"zone:\n  - domain: {ORIGIN}\n    master: stormpy\n    acl: notify\n"
                "log:\n  - target: stdout\n    any: info\n")
    args = [zone, "--tsig", TSIG, "--transfer-allow", "198.18.0.0/24", "--notify", CLIENT_V4,
            *serving_on(backend)]
    with NsServer(pair, args) as server, open(os.path.join(storage, "log"), "w+") as log:
        knot = subprocess.Popen(pair.argv(pair.client, knotd_path(), "-c", conf), stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            r = wait_for(pair, lambda r: serial_of(r) == 7, 15, server=CLIENT_V4)
            txt = pair.query([["h150.example.com", "TXT"]], server=CLIENT_V4, timeout=1)[0]
            # a new serial on stormpy (SIGHUP): NOTIFY to Knot, which fetches the difference
            with open(zone, "w") as f:
                f.write(zone_text(8, "added TXT \"in serial 8\"\n").replace('h3 TXT "record 3"\n', ""))
            server.proc.send_signal(signal.SIGHUP)
            r8 = wait_for(pair, lambda r: serial_of(r) == 8, 15, server=CLIENT_V4)
            added = pair.query([["added.example.com", "TXT"], ["h3.example.com", "TXT"]],
                               server=CLIENT_V4, timeout=1)
        finally:
            stop_process(knot)
        server.stop()
        log.seek(0)
        out = log.read()
    assert r is not None, out + server.log
    assert txt["rcode"] == 0 and "record 150" in txt["answer"][0]
    assert "transfer of example.com. to 198.18.0.2: AXFR, serial 7" in server.log, server.log
    assert r8 is not None, out + server.log
    assert added[0]["answer"] == ['"in serial 8"'] and added[1]["rcode"] == 3, added
    assert "transfer of example.com. to 198.18.0.2: IXFR 7 -> 8" in server.log, server.log
    assert "IXFR, incoming" in out and "finished" in out, out
    assert "NOTIFY for example.com. serial 8 to 198.18.0.2:53: NOERROR" in server.log, server.log


def test_transfer_refused_by_default_and_unsigned(pair, workdir):
    zone = os.path.join(workdir, "example.com.zone")
    with open(zone, "w") as f:
        f.write(zone_text(3))
    script = ("import dns.query,dns.zone,dns.xfr,sys\n"
              f"z=dns.zone.Zone({ORIGIN!r})\nq,_=dns.xfr.make_query(z,serial=None)\n"
              f"try:\n dns.query.inbound_xfr({SERVER_V4!r},z,q,lifetime=5); print('ok')\n"
              "except Exception as e:\n print(type(e).__name__, e)\n")
    outputs = []
    for extra in ([], ["--transfer-allow", "198.18.0.0/24", "--tsig", TSIG]):
        with NsServer(pair, [zone, "--listen", f"{SERVER_V4}:53", "--workers", "1", *extra]) as s:
            r = pair.run(pair.client, sys.executable, "-c", script)
            s.stop()
        outputs.append((r.stdout, s.log))
    assert "NOTAUTH" in outputs[0][0], outputs[0]        # no --transfer-allow: as before
    assert "NOTAUTH" in outputs[1][0], outputs[1]        # allowed address, but unsigned
    assert "not signed with the TSIG key" in outputs[1][1]


@contextlib.contextmanager
def fake_primary(pair, modefile):
    """tests/ns_fake_primary.py in the client namespace, starting in mode "good 1"."""
    with open(modefile, "w") as f:
        f.write("good 1")
    fake = subprocess.Popen(pair.argv(pair.client, sys.executable,
                                      os.path.join(REPO, "tests", "ns_fake_primary.py"),
                                      CLIENT_V4, "53", modefile),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert fake.stdout.readline().strip() == "ready"
        yield fake
    finally:
        fake.terminate()
        fake.wait(timeout=10)


def unsigned_secondary(zone_dir) -> list:
    return ["--secondary", ORIGIN, "--primary", CLIENT_V4, "--zone-dir", zone_dir,
            *serving_on("socket")]


def notify_message():
    import dns.message
    import dns.opcode
    notify = dns.message.make_query(ORIGIN, "SOA")
    notify.set_opcode(dns.opcode.NOTIFY)
    return notify


def test_corrupt_transfers_keep_the_old_data(pair, workdir):
    """A fake primary cuts, garbles, ends early or sends another zone: each time the
    secondary logs the failure and keeps serving serial 1; a good transfer then works."""
    modefile, notify = os.path.join(workdir, "mode"), notify_message()
    with fake_primary(pair, modefile), Secondary(pair, unsigned_secondary(workdir)) as sec:
        assert serial_of(soa(pair)) == 1
        for serial, how in enumerate(("truncated", "garbled", "noend", "wrongzone"), 2):
            with open(modefile, "w") as f:
                f.write(f"{how} {serial}")
            assert notify_from(pair, CLIENT_V4, notify.to_wire()) is not None
            time.sleep(1.0)
            assert serial_of(soa(pair)) == 1, how
            www = pair.query([["www.example.com", "A"]], timeout=1)[0]
            assert www["answer"] == ["192.0.2.2"], how
        with open(modefile, "w") as f:
            f.write("good 9")
        notify_from(pair, CLIENT_V4, notify.to_wire())
        r = wait_for(pair, lambda r: serial_of(r) == 9, 10)
        sec.stop()
    assert r is not None, sec.log
    assert sec.log.count("keeping serial 1") >= 4, sec.log
    assert "Traceback" not in sec.log, sec.log


def test_a_transfer_with_an_answer_over_65535_bytes_is_served(pair, workdir):
    """A good transfer with an answer over 65535 bytes (it once could not be compiled,
    and the old table served on): published, as Knot DNS loads it, that one question
    answered SERVFAIL and the rest of the zone at the new serial, with a warning."""
    modefile, notify = os.path.join(workdir, "mode"), notify_message()
    with fake_primary(pair, modefile), Secondary(pair, unsigned_secondary(workdir)) as sec:
        assert serial_of(soa(pair)) == 1
        with open(modefile, "w") as f:
            f.write("huge 2")
        assert notify_from(pair, CLIENT_V4, notify.to_wire()) is not None
        r = wait_for(pair, lambda r: serial_of(r) == 2, 10)
        big = pair.query([[f"big.{ORIGIN}", "TXT"]], tcp=True, timeout=2)[0]
        www = pair.query([[f"www.{ORIGIN}", "A"]], tcp=True, timeout=2)[0]
        sec.stop()
    assert r is not None, sec.log
    assert big["rcode"] == 2 and not big["answer"], big
    assert www["rcode"] == 0 and www["answer"], www
    assert f"the answer to big.{ORIGIN} TXT is over 65535 bytes: served SERVFAIL" in sec.log
    assert "not published" not in sec.log and "Traceback" not in sec.log, sec.log


def test_zone_files_are_written_by_a_thread_of_lower_priority():
    """A 1M-record zone file takes seconds to write: niced, it yields the CPU to the
    compile a NOTIFY waits for, and leaves the rest of the process at its own value."""
    from stormpy.dns.secondary import _writer

    def nice():
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    ours = nice()
    assert _writer().submit(nice).result(timeout=5) == min(ours + 10, 19)
    assert nice() == ours
