"""serve-dns on an interface's rings, across a veth pair between two network
namespaces. One test body for every ring backend."""
import json
import os
import subprocess
import sys

import pytest

from conftest import EXAMPLE_ZONE
from support.backends import NO_NETNS, NO_XDP, RINGS
from support.netns import CLIENT_V4, SERVER_V4, SERVER_V6, NsServer, VethPair

REASON = NO_NETNS
if REASON:
    print(f"\nSKIP test_rings: {REASON}")
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

BACKENDS = RINGS
MODES = ["memcpy", "precopy"]
QUESTIONS = [["www.example.com", "A"], ["WwW.eXample.com", "AAAA"], ["ftp.example.com", "A"],
             ["nothere.example.com", "A"], ["x.apps.example.com", "A"], ["example.org", "A"]]


def check_answers(got):
    www_a, www_aaaa, ftp, nx, wild, refused = got
    assert www_a["answer"] == ["192.0.2.80"] and www_a["aa"]
    assert www_aaaa["answer"] == ["2001:db8::80"] and www_aaaa["question"] == "WwW.eXample.com."
    assert ftp["answer"] == ["192.0.2.80", "www.example.com."]
    assert nx["rcode"] == 3 and wild["answer"] == ["192.0.2.100"] and refused["rcode"] == 5


def precopy_counters(control):
    r = subprocess.run([sys.executable, "-m", "stormpy", "stats", "--json", "--control", control],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    found = []

    def walk(o):
        if isinstance(o, dict):
            if "precopy_hits" in o:
                found.append(o)
            else:
                for v in o.values():
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(json.loads(r.stdout))
    return {k: sum(c[k] for c in found) for k in ("precopy_hits", "precopy_fills")}


@pytest.mark.parametrize("backend", BACKENDS)
def test_precopy_by_default_copies_only_the_large_answers(backend, tmp_path):
    """serve-dns --mode precopy as shipped (--precopy-min-bytes 384): a 500-byte TXT
    answer comes from the pool (a fill, then hits, in the client's letter case), a
    short A answer is rendered every time."""
    strings = [f'"{i}' + "x" * 110 + '"' for i in range(4)]
    zone = tmp_path / "big.example.zone"
    zone.write_text("$ORIGIN big.example.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n"
                    f"ns A 198.18.0.53\nbig TXT {' '.join(strings)}\n")
    control = str(tmp_path / "control.sock")
    with VethPair() as pair, NsServer(pair, [str(zone), "--iface", "veth0", "--backend", backend,
                                             "--mode", "precopy", "--control", control]):
        asked = [["bIg.big.example", "TXT", 1232], ["big.BIG.example", "TXT", 1232],
                 ["BIG.big.example", "TXT", 1232], ["ns.big.example", "A", 1232]] * 2
        got = pair.query(asked, server=SERVER_V4)
        for (name, _, _), g in zip(asked, got):
            assert g["question"] == name + "."          # the client's letter case
        want_txt = [" ".join(strings)]
        assert [g["answer"] for g in got if g["question"].lower().startswith("big")] == [want_txt] * 6
        assert [g["answer"] for g in got if g["question"].lower().startswith("ns")] == [["198.18.0.53"]] * 2
        c = precopy_counters(control)
        assert c["precopy_fills"] >= 1 and c["precopy_hits"] >= 1
        assert c["precopy_fills"] + c["precopy_hits"] <= 6, c     # never the A answers


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_answers_over_ipv4_ipv6_and_tcp(backend, mode, tmp_path):
    control = str(tmp_path / "control.sock")
    with VethPair() as pair, NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend", backend,
                                             "--mode", mode, "--control", control]
                                      + (["--precopy-min-bytes", "0"] if mode == "precopy" else [])) as srv:
        for _ in range(2):                   # in precopy mode the second round hits copies
            check_answers(pair.query(QUESTIONS, server=SERVER_V4))
            check_answers(pair.query(QUESTIONS, server=SERVER_V6))
        c = precopy_counters(control)
        if mode == "precopy":                # sent from the pool, not only rendered
            assert c["precopy_hits"] > 0 and c["precopy_fills"] > 0, c
        else:
            assert c == {"precopy_hits": 0, "precopy_fills": 0}, c
        check_answers(pair.query(QUESTIONS, server=SERVER_V4, tcp=True))   # the kernel's TCP
        # the kernel still owns everything else on the interface
        assert pair.run(pair.client, "ping", "-c", "1", "-W", "2", SERVER_V4).returncode == 0
        listener = subprocess.Popen(["ip", "netns", "exec", pair.server, sys.executable, "-c",
                                     "import socket; s=socket.socket(); s.bind(('0.0.0.0', 8080)); "
                                     "s.listen(); c,_=s.accept(); c.sendall(b'kernel'); c.close()"])
        try:
            got = ""
            for _ in range(50):
                r = pair.run(pair.client, sys.executable, "-c",
                             f"import socket; print(socket.create_connection(('{SERVER_V4}', 8080), "
                             f"timeout=2).recv(16).decode())")
                if r.returncode == 0:
                    got = r.stdout.strip()
                    break
            assert got == "kernel"
        finally:
            listener.kill()
            listener.wait(timeout=5)
        assert srv.stop() == 0
    assert "Traceback" not in srv.log


XDP_ONLY = pytest.mark.skipif(NO_XDP is not None, reason=NO_XDP or "")   # netns: the module's


@pytest.mark.parametrize("backend, poll, deferral", [
    ("packet", "busy", None),
    pytest.param("xdp", "busy", None, marks=XDP_ONLY),
    pytest.param("xdp", "napi", None, marks=XDP_ONLY),
    pytest.param("xdp", "napi", ("2", "200000"), marks=XDP_ONLY),
])
def test_every_way_of_waiting_for_frames_answers(backend, poll, deferral):
    """--poll busy spins on the ring; --poll napi has the kernel poll the queue's NAPI
    in the worker (preferred busy polling), and says so where the interface's interrupt
    deferral is off, which it needs to pay."""
    with VethPair() as pair:
        if deferral:
            pair.run(pair.server, "sh", "-c", f"echo {deferral[0]} > /sys/class/net/veth0/"
                     f"napi_defer_hard_irqs && echo {deferral[1]} > /sys/class/net/veth0/"
                     f"gro_flush_timeout")
        # a veth in native mode: the workers answer everything (no driver answers by default)
        with NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend", backend,
                             "--poll", poll]) as srv:
            for _ in range(3):
                check_answers(pair.query(QUESTIONS, server=SERVER_V4))
            assert srv.stop() == 0
    assert "Traceback" not in srv.log
    warned = "--poll napi: veth0 has napi_defer_hard_irqs 0 and gro_flush_timeout 0" in srv.log
    assert warned == (poll == "napi" and deferral is None), srv.log[-800:]


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_worker_per_queue_and_both_carry_traffic(backend):
    with VethPair(queues=2) as pair, \
            NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend", backend]) as srv:
        names = [[f"h{i % 5 + 1}.example.com", "A"] for i in range(60)]   # a new source port each
        got = pair.query(names)
        assert all(g and g["answer"] for g in got)
        srv.stop()
    assert "2 queue(s)" in srv.log
    per_worker = [int(x) for x in srv.log.split("per worker rx=")[1].split()[0].split(",")]
    assert len(per_worker) == 2 and min(per_worker) > 0, srv.log


def test_backend_errors_are_one_line(tmp_path):
    with VethPair() as pair:
        r = pair.run(pair.server, sys.executable, "-m", "stormpy", "serve-dns", EXAMPLE_ZONE,
                     "--iface", "nosuch0", "--backend", "packet")
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert r.stderr.strip().startswith("stormpy: error: --iface nosuch0: no such network interface")


def xdp_attached(pair):
    return "xdp" in pair.run(pair.server, "ip", "link", "show", "dev", "veth0").stdout


@pytest.mark.skipif(NO_XDP is not None, reason=NO_XDP or "")
def test_no_xdp_program_outlives_the_server():
    import signal
    with VethPair() as pair:
        srv = NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend", "xdp"]).__enter__()
        assert xdp_attached(pair)
        assert srv.stop() == 0 and not xdp_attached(pair), srv.log      # SIGTERM
        assert "Traceback" not in srv.log
        srv = NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend", "xdp"]).__enter__()
        srv.proc.send_signal(signal.SIGKILL)                              # a crash
        srv.proc.wait(timeout=10)
        for _ in range(50):                                               # the kernel drops the link
            if not xdp_attached(pair):
                break
            import time
            time.sleep(0.1)
        assert not xdp_attached(pair)
        with NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend", "xdp"]) as again:
            assert pair.query([["www.example.com", "A"]])[0]["answer"] == ["192.0.2.80"]
        assert not xdp_attached(pair)


def test_interface_identity_reads_mac_and_addresses():
    """What netmap serving answers ARP/ping/NDP for: the kernel's own view of the port."""
    import ipaddress
    with VethPair() as pair:
        script = ("import json; from stormpy.interfaces import interface_identity as f; "
                  "o = f('veth0'); print(json.dumps({k: o[k].hex() for k in ('mac', 'ipv4', 'ipv6')}))")
        r = pair.run(pair.server, sys.executable, "-c", script)
        assert r.returncode == 0, r.stderr
        own = json.loads(r.stdout)
        mac = pair.run(pair.server, "cat", "/sys/class/net/veth0/address").stdout.strip()
    assert own["mac"] == mac.replace(":", "")
    assert bytes.fromhex(own["ipv4"]) == ipaddress.ip_address(SERVER_V4).packed
    assert bytes.fromhex(own["ipv6"]) == ipaddress.ip_address(SERVER_V6).packed


DIFF_ZONE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zones", "example.com.zone")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_more_replies_than_the_tx_ring_holds(backend, mode):
    """The TX ring wraps: 1,200 queries one after another all get answers (in precopy
    mode the same few copies go out again and again, each only once it is back)."""
    with VethPair() as pair, NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend", backend,
                                             "--mode", mode]):
        got = pair.query([[f"h{i % 5 + 1}.example.com", "A"] for i in range(1200)], timeout=1.0)
    assert sum(g is not None for g in got) == 1200


@pytest.mark.parametrize("backend", BACKENDS)
def test_replies_never_exceed_the_mtu(backend):
    """A reply longer than the interface MTU goes out truncated (TC), and serving goes on."""
    with VethPair() as pair:
        for ns in (pair.server, pair.client):
            assert pair.run(ns, "ip", "link", "set", "veth0", "mtu", "600").returncode == 0
        with NsServer(pair, [DIFF_ZONE, "--iface", "veth0", "--backend", backend, "--max-udp", "4096"]):
            big, small = pair.query([["big.example.com", "TXT", 4096], ["www.example.com", "A"]])
    assert big is not None and big["tc"] and not big["answer"]
    assert small is not None and "192.0.2.80" in small["answer"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_frames_for_other_hosts_are_not_answered(backend):
    """Traffic routed through the server to another address is not ours to answer."""
    with VethPair() as pair, NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend", backend]):
        assert pair.run(pair.client, "ip", "route", "add", "198.19.0.0/16", "via", SERVER_V4).returncode == 0
        routed = pair.query([["www.example.com", "A"]], server="198.19.0.5", timeout=1.0)
        direct = pair.query([["www.example.com", "A"]])
    assert routed == [None] and direct[0]["answer"] == ["192.0.2.80"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_killed_worker_reopens_its_queue(backend, tmp_path):
    """SIGKILL one queue's worker: a new process opens that queue's socket again and
    both queues answer; the XDP program stays attached throughout."""
    import signal
    from test_supervisor import snapshot, wait_for_replacement
    control = str(tmp_path / "ctl.sock")
    with VethPair(queues=2) as pair, NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend",
                                                     backend, "--control", control]) as srv:
        workers = snapshot(control)["workers"]
        # a TCP worker each for 0.0.0.0 and [::], on the kernel's TCP
        assert [w["kind"] for w in workers] == ["frames", "frames", "tcp", "tcp"]
        pids = [w["pid"] for w in workers[:2]]
        assert all(pids)
        os.kill(pids[0], signal.SIGKILL)
        took, w = wait_for_replacement(control, 0, pids[0])
        assert took < 1.0 and w["restarts"] == 1, took
        if backend == "xdp":
            assert xdp_attached(pair)
        got = pair.query([[f"h{i % 5 + 1}.example.com", "A"] for i in range(60)])
        assert all(g and g["answer"] for g in got)
        after = snapshot(control)["workers"]
        assert after[0]["rx"] > w["rx"] and after[1]["rx"] > 0, after
        assert srv.stop() == 0
    assert "worker 0 (pid %d) was killed by SIGKILL" % pids[0] in srv.log


@pytest.mark.parametrize("backend", BACKENDS)
def test_runs_as_nobody_keeping_only_what_reopening_a_queue_needs(backend, tmp_path):
    """--user nobody: workers hold no capability; the server holds the four a new
    worker needs to open its queue again, and a killed worker does reopen it."""
    import pwd
    import signal
    from stormpy.privileges import RING_CAPS
    from test_privileges import status
    from test_supervisor import snapshot, wait_for_replacement
    nobody = pwd.getpwnam("nobody").pw_uid
    ring_caps = sum(1 << c for c in RING_CAPS)
    control = str(tmp_path / "ctl.sock")
    os.chmod(tmp_path, 0o755)                 # the socket's directory: nobody removes it at exit
    with VethPair() as pair, NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend", backend,
                                             "--control", control, "--user", "nobody"]) as srv:
        snap = snapshot(control)
        server_pid = snap["pid"]
        assert status(server_pid) == (nobody, 0, ring_caps)      # held, not in effect
        old = snap["workers"][0]["pid"]
        assert status(old) == (nobody, 0, 0)
        os.kill(old, signal.SIGKILL)
        _, w = wait_for_replacement(control, 0, old)
        assert status(w["pid"]) == (nobody, 0, 0)
        got = pair.query([["www.example.com", "A"]] * 20)
        assert all(g and g["answer"] == ["192.0.2.80"] for g in got)
        assert srv.stop() == 0
    assert "running as user nobody" in srv.log and "Traceback" not in srv.log


FLOOD = """
import sys, time
from scapy.all import Ether, IP, UDP, DNS, DNSQR, sendp, conf
conf.verb = 0
mac, dst, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
frames = [Ether(dst=mac) / IP(src=f"198.19.5.{i % 250 + 1}", dst=dst) /
          UDP(sport=1024 + i % 60000, dport=53) / DNS(id=i % 65536, rd=1, qd=DNSQR(qname="www.example.com"))
          for i in range(count)]
start = time.monotonic()
sendp(frames, iface="veth0")
print(time.monotonic() - start)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_spoofed_flood_is_rate_limited_while_a_client_is_answered(backend, tmp_path):
    """Rate limiting on the rings: 3,000 queries "from" one spoofed /24 are held to
    the rate (every second limited one slips out truncated), while a normal client
    in another prefix gets every answer."""
    from test_supervisor import snapshot
    control = str(tmp_path / "ctl.sock")
    rate = 50
    with VethPair() as pair, NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend", backend,
                                             "--control", control, "--rrl-rate", str(rate),
                                             "--rrl-slip", "2"]) as srv:
        mac = pair.run(pair.server, "cat", "/sys/class/net/veth0/address").stdout.strip()
        before = snapshot(control)["workers"][0]
        flood = subprocess.Popen(["ip", "netns", "exec", pair.client, sys.executable, "-c", FLOOD,
                                  mac, SERVER_V4, "3000"], stdout=subprocess.PIPE, text=True)
        got = pair.query([[f"h{i % 5 + 1}.example.com", "A"] for i in range(20)])
        took = float(flood.communicate(timeout=120)[0])
        after = snapshot(control)["workers"][0]
        assert srv.stop() == 0
    assert all(g and g["answer"] for g in got), got
    limited = (after["rrl_dropped"] - before["rrl_dropped"]) + (after["rrl_slipped"] - before["rrl_slipped"])
    sent_full = 3000 - limited
    assert sent_full <= rate * (int(took) + 2), (sent_full, took)
    assert abs((after["rrl_slipped"] - before["rrl_slipped"]) - limited / 2) <= 2
