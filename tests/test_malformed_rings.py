"""The malformed corpus end to end on the ring backends: test_malformed's DNS-level
corpus plus L2-L4 damage (bad lengths and checksums, IP options, fragments,
truncated frames, forbidden sources), sent as raw frames from the client namespace
across a veth pair. The judge is test_malformed's."""
import json
import os
import sys

import pytest

from conftest import EXAMPLE_ZONE
from support.backends import NO_NETNS, RINGS_AND_DRIVER, ring_serving
from support.netns import CLIENT_V4, CLIENT_V6, SERVER_V4, SERVER_V6, NsServer, VethPair
from test_malformed import corpus, judge

REASON = NO_NETNS
if REASON:
    print(f"\nSKIP test_malformed_rings: {REASON}")
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ns_malformed.py")


@pytest.mark.parametrize("backend", RINGS_AND_DRIVER)
def test_malformed_frames_over_the_rings(backend):
    serving, pair_options = ring_serving(backend)
    with VethPair(**pair_options) as pair, NsServer(pair, [EXAMPLE_ZONE, "--iface", "veth0", *serving]) as srv:
        mac = pair.run(pair.server, "cat", "/sys/class/net/veth0/address").stdout.strip()
        r = pair.run(pair.client, sys.executable, SCRIPT, "veth0", mac, SERVER_V4, SERVER_V6,
                     CLIENT_V4, CLIENT_V6, timeout=180)
        assert r.returncode == 0, r.stderr[-2000:]
        got = json.loads(r.stdout)
        after = pair.query([["www.example.com", "A"]])          # it survived all of it
        assert after[0] and after[0]["answer"] == ["192.0.2.80"]
        assert srv.stop() == 0
    assert "Traceback" not in srv.log
    first = 20000
    packets = corpus()
    by_port = {}
    for rep in got["replies"]:
        assert rep["dport"] != 0
        assert not int(rep["dst_mac"][:2], 16) & 1, rep
        assert not rep["dst_ip"].startswith(("255.", "224.", "ff", "0.")), rep
        by_port.setdefault(rep["dport"], []).append(bytes.fromhex(rep["payload"]))
    answers = {i: by_port[first + i] for i in range(len(packets)) if first + i in by_port}
    problems = judge(packets, answers)
    assert not problems, "\n".join(problems[:40])
    assert len(answers) > 100              # errors and mutated-but-valid queries do get answers
    for kind, j, name, expect, port in (m for m in got["meta"] if m[0] == "l2"):
        replies = by_port.get(port, [])
        if expect == "answer":
            assert len(replies) == 1, f"{name}: {len(replies)} replies"
        else:
            assert replies == [], f"{name}: answered"
