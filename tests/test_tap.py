"""`stormpy tap`: what a running server's ring workers receive and send, as pcapng, checked
against the frames the client's own interface carried (an AF_PACKET socket in the client
namespace) and read back with scapy; the refusals; a killed tap stops the copying."""
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import dns.message
import pytest

from conftest import EXAMPLE_ZONE
from stormpy.bench.processes import wait_for_output
from stormpy.dns.server import TAP_CHECK_SECONDS
from support.backends import NO_NETNS, RINGS, RINGS_AND_DRIVER, ring_serving
from support.netns import SERVER_V4, NsServer, VethPair
from support.servers import StormpyServer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ["www.example.com", "ftp.example.com", "nothere.example.com", "x.apps.example.com"]


def stormpy(*args, timeout=30):
    return subprocess.run([sys.executable, "-m", "stormpy", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def tap_status(control):
    r = stormpy("stats", "--json", "--control", control)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["tap"]


def start_tap(control, out, *args):
    """`stormpy tap`, returned once the workers copy for it."""
    proc = subprocess.Popen([sys.executable, "-m", "stormpy", "tap", "--control", control,
                             "-w", out, *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while tap_status(control)["session"] != proc.pid:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the tap did not attach within 20 s"
        time.sleep(0.1)
    return proc


def client_exchange(pair, payloads):
    """The client sends payloads to port 53; its replies, and the frames its veth carried."""
    script = os.path.join(REPO, "tests", "ns_client.py")
    r = pair.run(pair.client, sys.executable, script, "seen", "veth0", SERVER_V4, "53", "2",
                 json.dumps([p.hex() for p in payloads]))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def read_pcapng(source):
    """[(frame, direction: 1 in, 2 out, interface name, wall time)] as scapy reads them."""
    from scapy.utils import PcapNgReader
    with PcapNgReader(source) as reader:
        return [(bytes(p), p.direction, p.sniffed_on, float(p.time)) for p in reader]


@pytest.mark.skipif(NO_NETNS is not None, reason=NO_NETNS or "")
@pytest.mark.parametrize("backend", RINGS_AND_DRIVER)
def test_the_capture_holds_the_frames_the_client_saw(backend, tmp_path):
    """With the XDP program answering (xdp-answer), the tap still sees every query: while
    it is attached the driver passes them all to the workers."""
    control, out = str(tmp_path / "control.sock"), str(tmp_path / "tap.pcapng")
    queries = [dns.message.make_query(n, "A", id=100 + i).to_wire() for i, n in enumerate(NAMES)]
    serving, pair_options = ring_serving(backend)
    with VethPair(**pair_options) as pair, \
            NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", *serving, "--control", control]) as srv:
        tap = start_tap(control, out, "--filter", "port 53", "-c", str(2 * len(queries)),
                        "--duration", "30")
        if backend == "xdp-answer":
            time.sleep(4 * TAP_CHECK_SECONDS)         # the server has seen the tap attach
        seen = client_exchange(pair, queries)
        _, err = tap.communicate(timeout=40)
        assert tap.returncode == 0, err
        assert f"{2 * len(queries)} frames written, 0 dropped" in err.decode()
        assert tap_status(control)["session"] == 0        # detached at -c
        if backend == "xdp-answer":
            time.sleep(4 * TAP_CHECK_SECONDS)
            client_exchange(pair, queries)                # the driver's again
            assert srv.stop() == 0
            assert "stormpy tap attached: the workers answer every query" in srv.log
            assert "stormpy tap detached: the XDP program answers again" in srv.log
            assert "xdp_answered=4 " in srv.log, srv.log[-600:]
    assert all(seen["replies"])
    sent = [bytes.fromhex(f) for outgoing, f in seen["frames"] if outgoing]
    received = [bytes.fromhex(f) for outgoing, f in seen["frames"] if not outgoing]
    assert len(sent) == len(received) == len(queries)
    assert [f[-len(q):] for f, q in zip(sent, queries)] == queries
    assert [f[42:].hex() for f in received] == seen["replies"]
    captured = read_pcapng(out)
    # the server took in what the client sent, and sent what the client received: byte for
    # byte and in order, query before answer
    assert [c[0] for c in captured] == [f for pair_ in zip(sent, received) for f in pair_]
    assert [c[1] for c in captured] == [1, 2] * len(queries)
    assert {c[2] for c in captured} == {"stormpy worker 0"}
    assert all(abs(c[3] - time.time()) < 120 for c in captured)


def test_a_killed_tap_stops_the_copying(tmp_path):
    if NO_NETNS:
        pytest.skip(NO_NETNS)
    control, out = str(tmp_path / "control.sock"), str(tmp_path / "tap.pcapng")
    query = [dns.message.make_query("www.example.com", "A").to_wire()]
    with VethPair() as pair, NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend",
                                             "packet", "--control", control]):
        tap = start_tap(control, out)
        region = tap_status(control)["path"]
        second = stormpy("tap", "--control", control, "-w", str(tmp_path / "second.pcapng"))
        assert second.returncode == 1 and second.stderr.count("\n") == 1
        assert f"another tap (pid {tap.pid}) is attached" in second.stderr
        client_exchange(pair, query)
        copied = sum(r["records"] for r in tap_status(control)["rings"])
        assert copied >= 2                             # the query and its answer
        os.kill(tap.pid, signal.SIGKILL)
        tap.communicate(timeout=10)
        time.sleep(2.5)                                # its heartbeat is older than 2 s
        assert tap_status(control)["session"] == 0
        before = sum(r["records"] for r in tap_status(control)["rings"])
        assert all(client_exchange(pair, query * 3)["replies"])
        assert sum(r["records"] for r in tap_status(control)["rings"]) == before
        # a new tap may attach at once; this one writes to a pipe
        tap = start_tap(control, "-", "-c", "1", "--filter", "tx port 53", "--duration", "20")
        client_exchange(pair, query)
        capture, err = tap.communicate(timeout=30)
        assert tap.returncode == 0 and "1 frames written" in err.decode(), err
    assert not os.path.exists(region)                 # the server removed it at exit
    (answer,) = read_pcapng(io.BytesIO(capture))
    assert answer[1] == 2 and dns.message.from_wire(answer[0][42:]).id == \
        dns.message.from_wire(query[0]).id


def test_a_server_that_drops_root_hands_its_region_to_its_user(tmp_path):
    """--user: the region becomes the user's (0600), who removes it at exit. A region
    whose server was killed is removed when the next one starts."""
    if NO_NETNS:
        pytest.skip(NO_NETNS)
    import pwd
    nobody = pwd.getpwnam("nobody").pw_uid
    control, out = str(tmp_path / "control.sock"), str(tmp_path / "tap.pcapng")
    os.chmod(tmp_path, 0o755)                 # the socket's directory: nobody removes it at exit
    query = [dns.message.make_query("www.example.com", "A").to_wire()]
    gone = subprocess.Popen(["true"])
    gone.wait()
    killed = f"/dev/shm/stormpy-tap.{gone.pid}"       # a server killed by SIGKILL left it
    with open(killed, "wb"):
        pass
    with VethPair() as pair, NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend",
                                             "packet", "--control", control, "--user",
                                             "nobody"]) as srv:
        assert not os.path.exists(killed)              # removed when the next server starts
        region = tap_status(control)["path"]
        st = os.stat(region)
        assert (st.st_uid, st.st_mode & 0o777) == (nobody, 0o600)
        tap = start_tap(control, out, "-c", "2", "--filter", "port 53", "--duration", "20")
        client_exchange(pair, query)
        _, err = tap.communicate(timeout=30)
        assert tap.returncode == 0 and "2 frames written" in err.decode(), err
        assert srv.stop() == 0
    assert not os.path.exists(region)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_no_tap_attached_costs_no_instructions_per_frame():
    """callgrind inside sp_frame_worker_run on the memory backend, 1,000 frames in batches
    of 32. A worker given a tap region nobody attached runs the loop's own instructions
    (the tap's inline check included) within a fraction of an instruction per frame of one
    without a region: per batch, never per frame. The whole count stays within 0.5%
    (glibc's memcmp and memcpy count differently as the heap's layout shifts); an
    attached tap's copies do show."""
    from stormpy.bench.callgrind import TOGGLE, count_instructions
    from stormpy.bench.fastpath import callgrind_args
    queries = 1000
    jobs = {tap: callgrind_args("frame", 100, queries, 1, tap=tap)
            for tap in ("none", "detached", "attached")}
    counts = count_instructions(jobs, TOGGLE["frame"], queries, 900, "", annotate=tuple(jobs),
                                top=200)

    def loop(tap):      # the worker loop's own instructions, and the tap's functions
        return sum(per for fn, _, per in counts[tap][1]
                   if fn == "sp_frame_worker_run" or fn.startswith("sp_tap_"))
    assert abs(counts["detached"][0] - counts["none"][0]) < 0.005 * counts["none"][0], counts
    # rows come rounded to 0.1 per frame; a check per frame would add at least 1
    assert abs(loop("detached") - loop("none")) < 0.3, (loop("none"), loop("detached"))
    assert loop("attached") > loop("none") + 20, (loop("none"), loop("attached"))


def test_a_server_on_sockets_has_nothing_to_tap(tmp_path):
    control = str(tmp_path / "control.sock")
    with StormpyServer([("example.com.", EXAMPLE_ZONE)], ["--control", control]):
        r = stormpy("tap", "--control", control, "-w", str(tmp_path / "x.pcapng"))
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "kernel's sockets" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "x.pcapng")


def test_no_server_one_line(tmp_path):
    r = stormpy("tap", "--control", str(tmp_path / "none.sock"), "-w", str(tmp_path / "x"))
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "no server is listening" in r.stderr


def test_a_bad_filter_one_line(tmp_path):
    r = stormpy("tap", "--control", str(tmp_path / "none.sock"), "-w", "-", "--filter", "port x")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--filter" in r.stderr


@pytest.mark.skipif(NO_NETNS is not None, reason=NO_NETNS or "")
@pytest.mark.parametrize("backend", RINGS)
def test_gathered_http_frames_are_captured_whole(backend, tmp_path):
    """serve-http's own TCP hands the kernel up to 64 KB at a time (--gso): the tap
    holds each such frame as sent, longer than the link's MTU as tcpdump shows a
    kernel TCP's TSO sends, and the TCP payloads it saw are the file, byte for byte."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    site = tmp_path / "site"
    site.mkdir()
    body = os.urandom(1 << 20)
    (site / "f.bin").write_bytes(body)
    control, out = str(tmp_path / "control.sock"), str(tmp_path / "tap.pcapng")
    with VethPair() as pair:
        env = dict(os.environ, PYTHONPATH=REPO, PYTHONUNBUFFERED="1")
        server = subprocess.Popen(["ip", "netns", "exec", pair.server, sys.executable, "-m",
                                   "stormpy", "serve-http", str(site), "--iface", "veth0",
                                   "--backend", backend, "--control", control], cwd=REPO,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        try:
            wait_for_output(server, "info: serving")
            tap = start_tap(control, out, "--filter", "tx port 80", "--duration", "30")
            r = pair.run(pair.client, "curl", "-sS", "--max-time", "20", "-o",
                         str(tmp_path / "got"), f"http://{SERVER_V4}/f.bin")
            assert r.returncode == 0, r.stderr
            tap.send_signal(signal.SIGINT)
            _, err = tap.communicate(timeout=20)
            assert tap.returncode == 0, err
        finally:
            server.terminate()
            server.communicate(timeout=15)
    assert (tmp_path / "got").read_bytes() == body
    frames = [Ether(c[0]) for c in read_pcapng(out)]
    assert max(len(f) for f in frames) > 1514 * 4
    stream = {}
    for f in frames:
        if TCP in f and bytes(f[TCP].payload):
            assert f[IP].len == len(f) - 14      # the IP header says the frame's whole length
            stream[f[TCP].seq] = bytes(f[TCP].payload)
    data, seq = b"", min(stream)
    while seq in stream:
        data += stream[seq]
        seq += len(stream[seq])
    assert data.endswith(body) and data.startswith(b"HTTP/1.1 200 OK\r\n")
