"""serve-dns on the wildcard addresses 0.0.0.0 and [::], with two addresses of each family
on the server's interface: every UDP answer must leave from the address the query was
sent to (the socket backend's IP_PKTINFO / IPV6_PKTINFO), which dnspython checks (it
refuses an answer from another source) and so does a plain socket's recvfrom."""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import EXAMPLE_ZONE
from support.backends import NO_NETNS
from support.netns import REPO, SERVER_V4, SERVER_V6, NsServer, VethPair
from support.responders import stop

pytestmark = pytest.mark.skipif(NO_NETNS is not None, reason=NO_NETNS or "")

SECOND_V4, SECOND_V6 = "198.18.0.3", "2001:2::3"   # added after the pair's first addresses
QUESTIONS = [["www.example.com", "A"], ["nothere.example.com", "A"], ["example.com", "MX"]]

# Run in a namespace: for each address, where a plain socket's reply to a query sent to
# PORT came from, and what it said.
RECVFROM = """
import json, socket, sys, dns.message
port, out = int(sys.argv[1]), {}
for addr in sys.argv[2:]:
    with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        s.sendto(dns.message.make_query("www.example.com", "A").to_wire(), (addr, port))
        try:
            data, peer = s.recvfrom(4096)
            out[addr] = [peer[0], data.hex()]
        except socket.timeout:
            out[addr] = None
print(json.dumps(out))
"""


def answered(results):
    """Every question answered (NXDOMAIN for the second), as the zone says."""
    return (None not in results and [r["rcode"] for r in results] == [0, 3, 0]
            and results[0]["answer"] == ["192.0.2.80"])


def replies(pair, ns, addresses, port=53):
    """{address: [the reply's source, its payload in hex] or None} from namespace ns."""
    r = pair.run(ns, sys.executable, "-c", RECVFROM, str(port), *addresses)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def sources(got):
    return {address: reply and reply[0] for address, reply in got.items()}


@pytest.fixture
def two_addresses():
    """A veth pair whose server side has a second address of each family."""
    with VethPair() as pair:
        for address in ([f"{SECOND_V4}/24"], [f"{SECOND_V6}/64", "nodad"]):
            r = pair.run(pair.server, "ip", "addr", "add", *address, "dev", "veth0")
            assert r.returncode == 0, r.stderr
        yield pair


@pytest.fixture
def wildcard_server(two_addresses):
    with NsServer(two_addresses, [EXAMPLE_ZONE, "--listen", "0.0.0.0:53", "--listen", "[::]:53",
                                  "--workers", "2"]) as srv:
        yield two_addresses, srv


def test_each_udp_answer_leaves_from_the_address_asked(wildcard_server):
    pair, _ = wildcard_server
    addresses = [SERVER_V4, SECOND_V4, SERVER_V6, SECOND_V6]
    for address in addresses:     # dnspython raises on an answer from another source
        assert answered(pair.query(QUESTIONS, server=address)), address
    assert sources(replies(pair, pair.client, addresses)) == {a: a for a in addresses}


def test_loopback_and_tcp_on_the_wildcard(wildcard_server):
    pair, _ = wildcard_server
    inside = sources(replies(pair, pair.server, ["127.0.0.1", "::1", SECOND_V4]))
    assert inside == {"127.0.0.1": "127.0.0.1", "::1": "::1", SECOND_V4: SECOND_V4}
    for address in (SECOND_V4, SECOND_V6):        # the kernel's TCP answers from the right one
        assert answered(pair.query(QUESTIONS, server=address, tcp=True)), address


def test_a_bound_address_still_answers_without_control_data():
    with VethPair() as pair, NsServer(pair, [EXAMPLE_ZONE, "--listen", f"{SERVER_V4}:53",
                                             "--listen", f"[{SERVER_V6}]:53"]):
        for address in (SERVER_V4, SERVER_V6):
            assert answered(pair.query(QUESTIONS, server=address)), address


# A responder whose Python handler answers each datagram with the address it was sent to.
WHERE = """
import stormpy
where = stormpy.Responder(5399, handler=lambda packets: [(p, p.dst.encode()) for p in packets])
raise SystemExit(stormpy.serve(where))
"""


def test_a_responder_on_the_wildcard_sees_and_answers_from_the_address_asked(two_addresses):
    pair = two_addresses
    env = dict(os.environ, PYTHONPATH=REPO, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(["ip", "netns", "exec", pair.server, sys.executable, "-c", WHERE,
                             "--listen", "0.0.0.0:5399", "--listen", "[::]:5399", "--control", ""],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            if replies(pair, pair.client, [SERVER_V4], 5399)[SERVER_V4] is not None:
                break
        addresses = [SECOND_V4, SECOND_V6, SERVER_V4]
        assert replies(pair, pair.client, addresses, 5399) == \
            {a: [a, a.encode().hex()] for a in addresses}
    finally:
        log = stop(proc)
    assert proc.returncode == 0 and "Traceback" not in log, log
