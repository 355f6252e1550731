"""serve-dns --xdp-answer: the XDP program answers what it holds (XDP_TX) and leaves the
rest to the workers. Its replies are the workers' own, byte for byte, frame by frame
(ns_xdp_answer.py, through BPF_PROG_TEST_RUN), and a real server answers through it
across a veth pair, reloads included. The Knot differential and the malformed corpus
run with it on in test_ring_differential and test_malformed_rings."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO
from support.backends import NO_NETNS, NO_XDP
from support.netns import SERVER_V4, NsServer, VethPair
from test_rings import QUESTIONS, check_answers

REASON = NO_NETNS or NO_XDP
if REASON:
    print(f"\nSKIP test_xdp_answer: {REASON}")
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")
ZONES = [os.path.join(REPO, "tests", "zones", z)
         for z in ("example.com.zone", "example.net.zone", "gen.example.zone")]
EXAMPLE = os.path.join(REPO, "zones", "example.zone")
# tests/instructions.json: the program's size may grow 10%; the instructions the verifier
# checks may double, far below its 1,000,000, where a loop whose states multiply shows first
RECORDED = json.load(open(os.path.join(REPO, "tests", "instructions.json")))["xdp_answer_program"]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_driver_answers_exactly_as_the_workers(seed):
    with VethPair() as pair:
        r = pair.run(pair.server, sys.executable, os.path.join(REPO, "tests", "ns_xdp_answer.py"),
                     "veth0", str(seed), *ZONES, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    print("driver program:", report["instructions"], "instructions (after the verifier, checked)")
    assert not report["problems"], "\n".join(report["problems"][:10])
    assert report["before"] == {"tx": 0, "up": 1}          # nothing published, nothing answered
    held = report["held"]
    assert held["tx"] + held["up"] == report["pairs"] and held["tx"] > 200
    assert held["up"] <= report["left_out"]                # too large, or not plain
    # NODATA of other types, NXDOMAIN and referrals below held names: most from the driver
    assert report["not_held"]["tx"] > 800 and report["not_held"]["up"] > 0
    assert report["left"]["tx"] == 0, report["left_names"]
    assert report["mutated"]["tx"] > 100 and report["mutated"]["up"] > 1000
    # EDNS options the workers skip (cookies, padding): answered as without them, where held
    assert report["options"]["tx"] > 100 and report["options"]["up"] <= report["left_out"]
    answered = held["tx"] + report["not_held"]["tx"] + report["options"]["tx"] + \
        report["mutated"]["tx"]
    assert report["stats"]["xdp_answered"] == answered
    # the driver counts its answers by rcode and zone as the workers count the same replies
    counted = report["worker_counts_then"]
    assert report["stats"]["xdp_rcode"] == counted["rcode"]
    assert report["stats"]["xdp_zone_answers"] == counted["zone_answers"]
    assert counted["rcode"][3] > 0 and sum(n > 0 for n in counted["zone_answers"]) == 3
    # 60 entries: most names left out, and no NXDOMAIN from the driver for any name
    assert report["limited_over"] > 50 and 0 < report["limited"]["tx"] < held["tx"]
    xlated, verified = report["instructions"]
    assert 0 < xlated <= 1.1 * RECORDED["xlated"], f"recorded {RECORDED['xlated']}"
    assert 0 < verified <= 2 * RECORDED["verified"], f"recorded {RECORDED['verified']}"


def stats(control):
    r = subprocess.run([sys.executable, "-m", "stormpy", "stats", "--json", "--control", control],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def kdig(pair, name, rdtype="A", *options):
    r = pair.run(pair.client, "kdig", "@" + SERVER_V4, name, rdtype, "+norec", "+short",
                 "+timeout=2", "+retry=1", *options)
    return r.stdout.split()


@pytest.mark.parametrize("mode", ["native", "generic"])
def test_a_server_answers_in_the_driver_and_reloads(mode, tmp_path):
    zone = tmp_path / "example.zone"
    zone.write_text(open(EXAMPLE).read())
    control = str(tmp_path / "control.sock")
    # a veth takes what its peer's native program sends only with a program of its own,
    # so there it is asked for; in generic mode the driver answers by default
    asked = ["--xdp-answer"] if mode == "native" else []
    with VethPair(client_xdp=mode == "native") as pair, \
            NsServer(pair, [str(zone), "--iface", "veth0", "--backend", "xdp", *asked,
                            "--xdp-mode", mode, "--control", control,
                            "--nsid", "ns-xdp-test"]) as srv:
        for _ in range(2):
            check_answers(pair.query(QUESTIONS, server=SERVER_V4))
        assert kdig(pair, "WwW.ExAmple.com") == ["192.0.2.80"]
        before = stats(control)
        assert before["xdp_answered"] >= 3, before
        worker_rx = sum(w.get("rx", 0) for w in before["workers"])
        assert kdig(pair, "www.example.com") == ["192.0.2.80"]
        after = stats(control)
        assert after["xdp_answered"] == before["xdp_answered"] + 1
        assert sum(w.get("rx", 0) for w in after["workers"]) == worker_rx   # not the workers'
        # counted by rcode and zone as a worker counts its answers
        assert sum(after["xdp_rcode"]) == after["xdp_answered"]
        assert sum(after["xdp_zone_answers"]) == after["xdp_answered"]
        assert after["xdp_rcode"][0] == before["xdp_rcode"][0] + 1
        # a resolver's client COOKIE (BIND sends one): answered in the driver all the same
        assert kdig(pair, "www.example.com", "A", "+cookie") == ["192.0.2.80"]
        assert stats(control)["xdp_answered"] == after["xdp_answered"] + 1
        after = stats(control)
        # one asking for the server's NSID goes up: the workers send it
        asked_nsid = pair.run(pair.client, "kdig", "@" + SERVER_V4, "www.example.com", "+norec",
                              "+nsid", "+timeout=2", "+retry=1").stdout
        assert '"ns-xdp-test"' in asked_nsid and "192.0.2.80" in asked_nsid, asked_nsid
        assert stats(control)["xdp_answered"] == after["xdp_answered"]
        # a reload publishes a new generation; the old answer is gone at once
        zone.write_text(open(EXAMPLE).read().replace("192.0.2.80", "192.0.2.180")
                        .replace("2024010101", "2024010102"))
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while kdig(pair, "www.example.com") != ["192.0.2.180"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert kdig(pair, "www.example.com") == ["192.0.2.180"]
        assert stats(control)["xdp_answered"] > after["xdp_answered"]
        assert srv.stop() == 0
    assert "Traceback" not in srv.log
    assert "answers in the driver" in srv.log
    # the summary's rcodes hold the driver's answers too (the workers saw few of them)
    stopped = re.search(r"stopped: .* xdp_answered=(\d+) .*NOERROR=(\d+)", srv.log)
    assert stopped and int(stopped[2]) >= int(stopped[1]) > 0, srv.log[-500:]
    assert ("peer has an XDP program" in srv.log) == (mode == "native")


@pytest.mark.parametrize("extra, message", [
    ([], "--xdp-answer answers in the AF_XDP program: it needs --iface and --backend xdp"),
    (["--iface", "lo", "--backend", "xdp", "--rrl-rate", "5"],
     "--xdp-answer with --rrl-rate: answers in the driver are not rate-limited"),
])
def test_what_the_driver_cannot_do_is_refused_in_one_line(extra, message):
    r = subprocess.run([sys.executable, "-m", "stormpy", "serve-dns", EXAMPLE, "--xdp-answer", *extra],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr

