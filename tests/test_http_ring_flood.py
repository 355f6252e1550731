"""serve-http's own TCP under a SYN flood: SYNs from spoofed sources (198.19.0.0/16,
whose SYN-ACKs die in the client namespace) fill half the connection table with
half-open connections that never complete, and from then on every SYN is answered
with a SYN cookie and no state. A real client keeps getting its pages byte-exact
throughout, each of its connections opened from a cookie's ACK, and the server's exit
summary counts the cookies."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from stormpy.bench.site import make_site, sha256_of
from support.backends import NO_NETNS, NO_XDP
from support.http import curl_digests, serve_on_rings, stop_server
from support.netns import SERVER_V4, VethPair

pytestmark = [pytest.mark.skipif(NO_NETNS is not None, reason=f"{NO_NETNS}"),
              pytest.mark.skipif(NO_XDP is not None, reason=f"{NO_XDP}")]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_CONNECTIONS = 64
FLOOD_SYNS, FLOOD_SECONDS = 20000, 6
FETCHES = 10


def summary_counter(log: str, name: str) -> int:
    found = re.findall(rf"stopped: .*\b{name}=(\d+)", log)
    assert found, log
    return int(found[-1])


def test_a_syn_flood_gets_cookies_and_real_clients_their_pages(tmp_path):
    root = tmp_path / "site"
    make_site(root, sizes=(1024, 65536, 1 << 20))
    digests = sha256_of(root)
    paths = ["/index.html", "/f-65536.bin", "/f-1048576.bin"]
    with VethPair() as p:
        server = serve_on_rings(p.server, root, "xdp", "--max-connections", str(MAX_CONNECTIONS))
        try:
            # before the flood, nothing needs a cookie
            assert curl_digests(p.run, p.client, SERVER_V4, paths, timeout=10, retries=0) == \
                [digests[x] for x in paths]
            flood = subprocess.Popen(
                ["ip", "netns", "exec", p.client, sys.executable,
                 os.path.join(REPO, "tests", "ns_client.py"), "synflood", SERVER_V4, "80",
                 str(FLOOD_SYNS), str(FLOOD_SECONDS)],
                cwd=os.path.join(REPO, "tests"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            try:
                time.sleep(1.0)              # the half-open half of the table is full by now
                fetched = []
                for _ in range(FETCHES):     # each run is one connection, its three answers
                    fetched.append(curl_digests(p.run, p.client, SERVER_V4, paths, timeout=5,
                                                retries=0))
                assert flood.poll() is None, "the flood ended before the client did"
            finally:
                out, err = flood.communicate(timeout=FLOOD_SECONDS + 30)
        finally:
            log = stop_server(server)
    assert fetched == [[digests[x] for x in paths]] * FETCHES
    assert int(out) > FLOOD_SYNS // 2, err
    sent, accepted = summary_counter(log, "cookies_sent"), summary_counter(log, "cookies_accepted")
    # every flood SYN after the first half-table got a cookie; every fetch came in on one
    assert sent > int(out) // 2, log
    assert accepted >= FETCHES, log
    assert accepted < FETCHES + 5, log   # spoofed sources never complete a handshake
