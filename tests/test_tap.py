"""`stormpy tap`: what a running server's ring workers receive and send, as pcapng, checked
against the frames the client's own interface carried (an AF_PACKET socket in the client
namespace) and read back with scapy; the refusals; a killed tap stops the copying."""
import json
import os
import signal
import subprocess
import sys
import time

import dns.message
import pytest

from conftest import EXAMPLE_ZONE
from support.backends import NO_NETNS, RINGS
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
                             "-w", out, *args], cwd=REPO, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while tap_status(control)["session"] != proc.pid:
        assert proc.poll() is None, proc.stderr.read()
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


def read_pcapng(path):
    """(frames, the interfaces' names) as scapy reads them."""
    from scapy.utils import PcapNgReader
    with PcapNgReader(path) as reader:
        frames = [bytes(p) for p in reader]
        names = list(getattr(reader, "interfaces", []))
    return frames, names


@pytest.mark.skipif(NO_NETNS is not None, reason=NO_NETNS or "")
@pytest.mark.parametrize("backend", RINGS)
def test_the_capture_holds_the_frames_the_client_saw(backend, tmp_path):
    control, out = str(tmp_path / "control.sock"), str(tmp_path / "tap.pcapng")
    queries = [dns.message.make_query(n, "A", id=100 + i).to_wire() for i, n in enumerate(NAMES)]
    with VethPair() as pair, NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend",
                                             backend, "--control", control]):
        tap = start_tap(control, out, "--filter", "port 53", "-c", str(2 * len(queries)),
                        "--duration", "30")
        seen = client_exchange(pair, queries)
        _, err = tap.communicate(timeout=40)
        assert tap.returncode == 0, err
        assert f"{2 * len(queries)} frames written, 0 dropped" in err
        assert tap_status(control)["session"] == 0        # detached at -c
    assert all(seen["replies"])
    sent = [bytes.fromhex(f) for outgoing, f in seen["frames"] if outgoing]
    received = [bytes.fromhex(f) for outgoing, f in seen["frames"] if not outgoing]
    assert len(sent) == len(received) == len(queries)
    assert [f[-len(q):] for f, q in zip(sent, queries)] == queries
    assert [f[42:].hex() for f in received] == seen["replies"]
    frames, _ = read_pcapng(out)
    # the server took in what the client sent, and sent what the client received: byte for
    # byte and in order, query before answer
    assert frames == [f for pair_ in zip(sent, received) for f in pair_]


def test_a_killed_tap_stops_the_copying(tmp_path):
    if NO_NETNS:
        pytest.skip(NO_NETNS)
    control, out = str(tmp_path / "control.sock"), str(tmp_path / "tap.pcapng")
    query = [dns.message.make_query("www.example.com", "A").to_wire()]
    with VethPair() as pair, NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", "--backend",
                                             "packet", "--control", control]):
        tap = start_tap(control, out)
        client_exchange(pair, query)
        copied = sum(r["records"] for r in tap_status(control)["rings"])
        assert copied >= 2                             # the query and its answer
        os.kill(tap.pid, signal.SIGKILL)
        tap.wait(timeout=10)
        tap.stderr.close()
        time.sleep(2.5)                                # its heartbeat is older than 2 s
        assert tap_status(control)["session"] == 0
        before = sum(r["records"] for r in tap_status(control)["rings"])
        assert all(client_exchange(pair, query * 3)["replies"])
        assert sum(r["records"] for r in tap_status(control)["rings"]) == before
        # a new tap may attach at once
        tap = start_tap(control, out, "-c", "2", "--filter", "port 53", "--duration", "20")
        client_exchange(pair, query)
        _, err = tap.communicate(timeout=30)
        assert tap.returncode == 0 and "2 frames written" in err, err


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
