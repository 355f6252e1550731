"""The four example responders end to end: one test body per example, run on the
socket backend (loopback) and on AF_XDP and AF_PACKET across a veth pair. The
ARP and ICMP example answers whole frames, which a UDP socket never carries, so
it runs on the ring backends (and, in test_responder_api.py, on the memory
backend)."""
import ipaddress
import json
import re
import shutil
import subprocess
import sys
import threading
import time

import dns.message
import dns.rdatatype
import pytest

from support.backends import EVERY_BACKEND, RINGS
from support.responders import CLIENT_V4, Site, example, stop



@pytest.mark.parametrize("script, counter", [("udp_echo.py", "rule_answers"),
                                             ("echo_in_python.py", "slow_replies")])
@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_udp_echo_returns_every_payload_unchanged(backend, script, counter):
    port = 4321
    with Site(backend) as site:
        site.start(example(script), port,
                   ready=lambda: site.udp(port, [b"ping"], 0.3) == [b"ping"])
        payloads = [b"\0" * 32, b"x", bytes(range(256)) * 5, b"odd length!", b"\xff" * 1400, b""]
        assert site.udp(port, payloads) == payloads
        log = stop(site.procs[0])
    # answered where the example says: by the rule in C, or by the handler
    answered = re.search(rf"stopped: .* {counter}=(\d+)", log)
    assert answered and int(answered.group(1)) >= len(payloads), log
    assert "Traceback" not in log


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_kv_store_answers_gets_in_c_and_changes_live_and_atomically(backend):
    port = 6391          # not the example's default: its TCP side follows --listen too
    with Site(backend) as site:
        site.start(example("kv_store.py"), port,
                   ready=lambda: site.udp(port, [b"GET hello"], 0.3) == [b"VALUE world\n"])
        assert site.udp(port, [b"GET hello\r\n", b"GET nothing", b"PUT hello"], 0.5) == \
            [b"VALUE world\n", b"NOT_FOUND\n", None]       # no rule for PUT, no handler
        assert site.tcp_control(port, ["SET colour blue", "SET hello there", "DEL nothing",
                                       "BOGUS"]) == ["OK", "OK", "OK",
                                                     "ERROR expected SET key value, or DEL key"]
        assert site.udp(port, [b"GET colour", b"GET hello"]) == [b"VALUE blue\n", b"VALUE there\n"]

        # While a client asks, the control plane rewrites the value 150 times: every
        # answer is one whole version, never a mix or a miss.
        versions = [f"v{i:03d}-" + "y" * 40 for i in range(150)]
        writer = threading.Thread(target=site.tcp_control, args=(
            port, ["SET hot " + versions[0]] + [f"SET hot {v}" for v in versions[1:]]))
        site.tcp_control(port, ["SET hot " + versions[0]])
        writer.start()
        answers, deadline = [], time.monotonic() + 60
        while True:                  # ask for as long as the writes go on (at least once)
            answers += site.udp(port, [b"GET hot"] * 100, 1.0)
            if not writer.is_alive() or time.monotonic() > deadline:
                break
        writer.join(timeout=60)
        allowed = {b"VALUE " + v.encode() + b"\n" for v in versions}
        assert all(a in allowed for a in answers), [a for a in answers if a not in allowed][:3]
        assert site.udp(port, [b"GET hot"]) == [b"VALUE " + versions[-1].encode() + b"\n"]
        assert site.tcp_control(port, ["DEL hot"]) == ["OK"]
        assert site.udp(port, [b"GET hot"]) == [b"NOT_FOUND\n"]
        log = stop(site.procs[0])
    assert "Traceback" not in log


def _dns(site, port, name, rdtype):
    q = dns.message.make_query(name, rdtype)
    [wire] = site.udp(port, [q.to_wire()])
    assert wire is not None, f"no answer for {name} {rdtype}"
    r = dns.message.from_wire(wire)
    assert r.id == q.id
    return r


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_dns_whoami_serves_the_zone_in_c_and_one_name_per_prefix_in_python(backend):
    port = 5399
    with Site(backend) as site:
        site.start(example("dns_whoami.py"), port,
                   ready=lambda: site.udp(port, [dns.message.make_query("www.example.com", "A")
                                                 .to_wire()], 0.3)[0] is not None)
        www = _dns(site, port, "www.example.com", "A")
        assert [rr.to_text() for rrset in www.answer for rr in rrset] == ["192.0.2.80"]
        assert _dns(site, port, "nothere.example.com", "A").rcode() == 3
        client = "127.0.0.1" if backend == "socket" else CLIENT_V4
        prefix = ipaddress.ip_network(f"{client}/24", strict=False)
        txt = _dns(site, port, "whoami.example.com", "TXT")
        assert [rr.to_text() for rrset in txt.answer for rr in rrset] == [f'"{prefix}"']
        a = _dns(site, port, "WHOAMI.example.com", "A")
        site_address = "192.0.2.127" if backend == "socket" else "192.0.2.18"
        assert [rr.to_text() for rrset in a.answer for rr in rrset] == [site_address]
        assert a.question[0].name.to_text() == "WHOAMI.example.com."
        # a type the handler has no answer for: an empty NOERROR, and the worker goes on
        mx = _dns(site, port, "whoami.example.com", "MX")
        assert mx.rcode() == 0 and not mx.answer
        assert site.udp(port, [b"\x12\x34\x01\x00\x00\x01"], 0.3) == [None]   # truncated
        assert _dns(site, port, "whoami.example.com", "TXT").answer
        log = stop(site.procs[0])
    assert "Traceback" not in log


@pytest.mark.parametrize("backend", RINGS)
def test_arp_and_ping_are_answered_in_python(backend):
    if shutil.which("ping") is None:
        pytest.skip("ping is not installed (iputils-ping)")
    address = "198.18.0.9"            # on the link, and not the server kernel's
    with Site(backend) as site:
        pair = site.pair
        cmd_ping = ["ping", "-c", "3", "-i", "0.2", "-W", "1", "-s", "100", address]
        site.start(example("arp_icmp.py"), 7, "--address", address, ready=lambda: pair.run(
            pair.client, "ping", "-c", "1", "-W", "1", address, timeout=10).returncode == 0)
        r = pair.run(pair.client, *cmd_ping, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "3 received" in r.stdout
        neigh = pair.run(pair.client, "ip", "neigh", "show", address).stdout
        assert pair.server_mac in neigh            # learnt from the Python ARP reply
        log = stop(site.procs[0])
    assert "Traceback" not in log


def test_stats_of_a_responder_count_rules_and_templates_not_zones(tmp_path):
    control, port = str(tmp_path / "control.sock"), 4321
    with Site("socket") as site:
        site.start(example("udp_echo.py"), port, "--control", control,
                   ready=lambda: site.udp(port, [b"ping"], 0.3) == [b"ping"])
        ask = [sys.executable, "-m", "stormpy", "stats", "--control", control]
        snap = json.loads(subprocess.run(ask + ["--json"], capture_output=True, text=True,
                                         timeout=30).stdout)
        text = subprocess.run(ask, capture_output=True, text=True, timeout=30).stdout
    assert (snap["rules"], snap["templates"]) == (1, 1) and "zones" not in snap, snap
    assert "serving udp echo: 1 rule(s), 1 template(s)" in text and "zone" not in text, text
