"""The custom-responder API on the memory backend: rules and templates rendered in
C and checked by scapy, the slow path's packets and replies, its failures, live
updates, and one-line errors. No kernel, no root."""
import itertools
import logging
import os
import socket
import subprocess
import sys
import time

import pytest
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

import stormpy
from stormpy.errors import StormpyError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER_MAC, CLIENT_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
PORT = 7777


def udp_frame(payload, v6=False, vlan=False, sport=40000, dport=PORT):
    ip = IPv6(src="2001:2::2", dst="2001:2::1") if v6 else IP(src="198.18.0.2", dst="198.18.0.1")
    l2 = Ether(dst=SERVER_MAC, src=CLIENT_MAC) / (Dot1Q(vlan=7) if vlan else Raw(b""))
    if not vlan:
        l2 = Ether(dst=SERVER_MAC, src=CLIENT_MAC)
    return bytes(l2 / ip / UDP(sport=sport, dport=dport) / Raw(payload))


def checked_reply(frame, v6=False, client_port=40000):
    """The UDP payload of a reply frame that scapy finds correct in every header."""
    e = Ether(frame)
    assert e.dst == CLIENT_MAC and e.src == SERVER_MAC
    udp = e[UDP]
    assert (udp.sport, udp.dport) == (PORT, client_port)
    ip = e[IPv6] if v6 else e[IP]
    assert (ip.src, ip.dst) == (("2001:2::1", "2001:2::2") if v6 else ("198.18.0.1", "198.18.0.2"))
    again = Ether(bytes(e))
    del again[UDP].chksum
    if not v6:
        del again[IP].chksum
    again = Ether(bytes(again))
    assert again[UDP].chksum == udp.chksum, "UDP checksum"
    if not v6:
        assert again[IP].chksum == ip.chksum, "IPv4 header checksum"
    return bytes(udp.payload)


def kv_responder(handler=None):
    app = stormpy.Responder(PORT, handler=handler)
    app.rule("echo", prefix=b"ECHO ", template=stormpy.Template(b"> ", echo=slice(5, None)))
    app.rule("get", prefix=b"GET ", key=slice(4, None), key_stop=b"\r\n ",
             values={"a": b"VALUE 1\n", b"bb": stormpy.Template(b"ID..:bb\n", copy=[(2, 4, 2)])},
             default=b"NOT_FOUND\n")
    app.rule("id", prefix=b"Q", at=2, template=stormpy.Template(b"..R", copy=[(0, 0, 2)]))
    return app


@pytest.mark.parametrize("v6", [False, True])
def test_rules_answer_in_c_with_correct_headers_and_checksums(v6):
    app = kv_responder()
    cases = {b"ECHO hello": b"> hello", b"ECHO ": b"> ", b"GET a\r\n": b"VALUE 1\n",
             b"GET bb": b"IDbb:bb\n", b"GET zz tail": b"NOT_FOUND\n", b"\x12\x34Q?": b"\x12\x34R",
             b"ECHO " + bytes(range(256)) * 4 + b"odd": b"> " + bytes(range(256)) * 4 + b"odd"}
    frames = [udp_frame(q, v6=v6) for q in cases]
    replies, c = app.run_frames(frames)
    assert [checked_reply(r, v6) for r in replies] == list(cases.values())
    assert c["rule_answers"] == len(cases) and c["slow_path"] == 0


def test_a_template_may_be_a_scapy_packet_whose_headers_come_from_the_request():
    app = stormpy.Responder(PORT)
    app.rule(template=IP(dst="192.0.2.99") / UDP(sport=1, dport=2) / Raw(b"pong"))
    [reply], _ = app.run_frames([udp_frame(b"ping")])
    assert checked_reply(reply) == b"pong"


def test_vlan_tag_is_kept_on_rule_and_handler_replies():
    frame = bytes(Ether(dst=SERVER_MAC, src=CLIENT_MAC) / Dot1Q(vlan=7) /
                  IP(src="198.18.0.2", dst="198.18.0.1") / UDP(sport=40000, dport=PORT) / b"ECHO v")
    slow = bytes(Ether(dst=SERVER_MAC, src=CLIENT_MAC) / Dot1Q(vlan=7) /
                 IP(src="198.18.0.2", dst="198.18.0.1") / UDP(sport=40000, dport=PORT) / b"other")
    app = kv_responder(lambda pkts: [(p, b"slow") for p in pkts])
    replies, _ = app.run_frames([frame, slow])
    assert [Ether(r)[Dot1Q].vlan for r in replies] == [7, 7]
    assert [checked_reply(r) for r in replies] == [b"> v", b"slow"]


def test_handler_sees_batches_of_unmatched_packets_with_parsed_addresses():
    seen = []

    def handler(packets):
        for p in packets:
            seen.append((p.udp, p.family, p.src, p.dst, p.sport, p.dport, bytes(p.payload),
                         len(p.data)))
        return [(p, b"handled:" + bytes(p.payload)) for p in packets]

    app = kv_responder(handler)
    frames = [udp_frame(b"GET a"), udp_frame(b"hello", sport=1234), udp_frame(b"bye", v6=True),
              udp_frame(b"x", dport=9999)]
    replies, c = app.run_frames(frames, batch=8)
    assert seen == [(True, 4, "198.18.0.2", "198.18.0.1", 1234, PORT, b"hello", len(frames[1])),
                    (True, 6, "2001:2::2", "2001:2::1", 40000, PORT, b"bye", len(frames[2]))]
    assert [checked_reply(r, v6=i == 2, client_port=1234 if i == 1 else 40000)
            for i, r in enumerate(replies)] == \
        [b"VALUE 1\n", b"handled:hello", b"handled:bye"]
    assert (c["rule_answers"], c["slow_path"], c["slow_replies"], c["not_ours"]) == (1, 2, 2, 1)


def test_packets_expire_when_the_handler_returns():
    kept = []
    app = stormpy.Responder(PORT, handler=lambda pkts: kept.extend(pkts))
    app.run_frames([udp_frame(b"one")])
    with pytest.raises(ValueError, match="only valid during the handler call"):
        kept[0].payload
    assert "expired" in repr(kept[0])


def test_a_failing_handler_is_counted_and_logged_and_the_worker_goes_on(caplog):
    calls = []

    def handler(packets):
        calls.append(len(packets))
        if len(calls) == 1:
            raise RuntimeError("boom")
        return [(p, b"ok") for p in packets]

    app = stormpy.Responder(PORT, handler=handler)
    with caplog.at_level(logging.ERROR, logger="stormpy"):
        replies, c = app.run_frames([udp_frame(b"%d" % i) for i in range(6)], batch=3)
    assert calls == [3, 3]
    assert [checked_reply(r) for r in replies] == [b"ok"] * 3
    assert c["handler_errors"] == 1 and c["slow_path"] == 6 and c["slow_replies"] == 3
    assert "RuntimeError: boom" in caplog.text and "the worker goes on" in caplog.text


def test_a_generator_handler_that_fails_midway_keeps_what_it_yielded():
    def handler(packets):
        for i, p in enumerate(packets):
            if i == 3:
                raise ValueError("midway")
            yield p, b"ok"

    app = stormpy.Responder(PORT, handler=handler)
    replies, c = app.run_frames([udp_frame(b"%d" % i) for i in range(8)], batch=8)
    assert len(replies) == 3 and c["slow_replies"] == 3 and c["handler_errors"] == 1


def test_replies_that_cannot_be_sent_are_counted_not_fatal():
    earlier = []

    def handler(packets):
        out = [(p, b"x" * 3000) for p in packets]          # larger than a frame
        out += [(p, 42) for p in packets]                  # not bytes
        out += [("not a packet", b"x"), b"short"]          # no packet; a runt frame
        out += [(p, b"fine") for p in earlier]             # packets of an earlier batch
        earlier[:] = packets
        return out + [(packets[0], b"fine")]

    app = stormpy.Responder(PORT, handler=handler)
    replies, c = app.run_frames([udp_frame(b"a"), udp_frame(b"b")], batch=1)
    assert [checked_reply(r) for r in replies] == [b"fine", b"fine"]
    assert c["bad_replies"] == 4 + 4 + 1 and c["handler_errors"] == 0


def test_damaged_frames_never_reach_the_handler_or_get_an_answer():
    got = []
    app = kv_responder(lambda pkts: got.extend(p.udp for p in pkts))
    good = udp_frame(b"GET a")
    bad_sum = bytearray(good)
    bad_sum[-1] ^= 0xFF                                 # payload no longer matches the sum
    broadcast = bytes(Ether(dst=SERVER_MAC, src="ff:ff:ff:ff:ff:ff") / IP(src="198.18.0.2",
                      dst="198.18.0.1") / UDP(sport=1, dport=PORT) / b"GET a")
    replies, c = app.run_frames([bytes(bad_sum), good[:30], broadcast, good[:-1]])
    assert replies == [] and got == []
    assert c["malformed"] + c["bad_source"] + c["not_ours"] == 4


def test_all_frames_hands_arp_and_icmp_to_the_arp_icmp_example():
    sys.path.insert(0, os.path.join(REPO, "examples"))
    try:
        import arp_icmp
    finally:
        sys.path.pop(0)
    host = arp_icmp.Host(bytes.fromhex("020000000001"), bytes([198, 18, 0, 9]))
    app = stormpy.Responder(7, handler=host.answer, all_frames=True)
    who_has = Ether(dst="ff:ff:ff:ff:ff:ff", src=CLIENT_MAC) / ARP(
        op=1, hwsrc=CLIENT_MAC, psrc="198.18.0.2", pdst="198.18.0.9")
    other = Ether(dst="ff:ff:ff:ff:ff:ff", src=CLIENT_MAC) / ARP(op=1, psrc="198.18.0.2",
                                                                 pdst="198.18.0.8")
    ping = Ether(dst=SERVER_MAC, src=CLIENT_MAC) / IP(src="198.18.0.2", dst="198.18.0.9") / \
        ICMP(type=8, id=77, seq=3) / Raw(b"abcdefghij" * 5 + b"x")
    replies, c = app.run_frames([bytes(who_has), bytes(other), bytes(ping)])
    assert len(replies) == 2 and c["slow_path"] == 3
    arp = Ether(replies[0])[ARP]
    assert (arp.op, arp.hwsrc, arp.psrc, arp.hwdst, arp.pdst) == \
        (2, SERVER_MAC, "198.18.0.9", CLIENT_MAC, "198.18.0.2")
    echo = Ether(replies[1])
    assert echo[ICMP].type == 0 and (echo[ICMP].id, echo[ICMP].seq) == (77, 3)
    assert bytes(echo[ICMP].payload) == bytes(ping[ICMP].payload)
    again = Ether(bytes(echo))
    del again[IP].chksum, again[ICMP].chksum
    again = Ether(bytes(again))
    assert (again[IP].chksum, again[ICMP].chksum) == (echo[IP].chksum, echo[ICMP].chksum)
    # without all_frames they stay the kernel's
    app.all_frames = False
    replies, c = app.run_frames([bytes(who_has), bytes(ping)])
    assert replies == [] and c["slow_path"] == 0 and c["not_ours"] == 2


def test_update_changes_values_and_a_failed_update_changes_nothing():
    app = kv_responder()
    app.update("get", set_values={"c": b"VALUE 3\n"}, delete=["a"])
    app.update("echo", template=stormpy.Template(b">> ", echo=slice(5, None)))
    replies, _ = app.run_frames([udp_frame(b"GET c"), udp_frame(b"GET a"), udp_frame(b"ECHO e")])
    assert [checked_reply(r) for r in replies] == [b"VALUE 3\n", b"NOT_FOUND\n", b">> e"]
    with pytest.raises(StormpyError, match="at most 1024"):
        app.update("get", set_values={"k" * 2000: b"big"})
    with pytest.raises(StormpyError, match="no rule named"):
        app.update("nothing", values={})
    with pytest.raises(StormpyError, match="has no key"):
        app.update("echo", values={"a": b"b"})
    replies, _ = app.run_frames([udp_frame(b"GET c"), udp_frame(b"ECHO e")])
    assert [checked_reply(r) for r in replies] == [b"VALUE 3\n", b">> e"]


@pytest.mark.parametrize("build, message", [
    (lambda a: a.rule(prefix=b"x" * 33, template=b""), "at most 32"),
    (lambda a: a.rule(template=stormpy.Template(b"ab", copy=[(1, 0, 2)])), "not all in"),
    (lambda a: a.rule(key=slice(0, None), template=b"x"), "default="),
    (lambda a: a.rule(), "give a template"),
    (lambda a: a.rule(template=stormpy.Template(b"", echo=slice(3, 1))), "start before stop"),
    (lambda a: a.rule(template=object()), "bytes or a scapy packet"),
    (lambda a: [a.rule("x", template=b""), a.rule("x", template=b"")], "defined twice"),
    # arguments of the wrong kind, which were taken in some other meaning or failed
    # later with a traceback
    (lambda a: a.rule(prefix=b"x", at=-1, template=b""), "at=-1: an offset"),
    (lambda a: a.rule(prefix=b"x", at="2", template=b""), "at='2': an offset"),
    (lambda a: a.rule(prefix=5, template=b""), "prefix: bytes or text, not int"),
    (lambda a: a.rule(key=slice(0, None), values={1: b"x"}), "a key in values: bytes or text"),
    (lambda a: a.rule(key=slice(0, None), values=[b"x"]), "values: a mapping"),
    (lambda a: a.rule(template=stormpy.Template(b"ab", echo_at=1)), "echo_at= without echo="),
    (lambda a: a.zones("x.zone", dynamic="now.test."), "dynamic: a list, not one string"),
    (lambda a: a.zones(["x.zone"]), "a zone file's path, not list"),
    (lambda a: [a.rule("r", key=slice(0, None), values={}), a.update("r", delete="abc")],
     "delete: a list, not one string"),
])
def test_bad_rules_are_one_line_errors(build, message):
    with pytest.raises(StormpyError, match=message) as e:
        build(stormpy.Responder(PORT))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("args, message", [
    (["--mode", "precopy", "--iface", "lo"], "precopy is for serve-dns"),
    (["--listen", "127.0.0.1:{busy}"], "another server is using it"),
    (["--iface", "nosuchif0", "--backend", "packet"], "no such network interface"),
    (["--max-reply", "70000"], "--max-reply"),
])
def test_serve_errors_are_one_line(args, message):
    busy = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    busy.bind(("127.0.0.1", 0))
    args = [a.format(busy=busy.getsockname()[1]) for a in args]
    code = ("import stormpy; app = stormpy.Responder(7777); app.rule(template=b'x'); "
            f"raise SystemExit(stormpy.serve(app, {args!r}, prog='t'))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
    assert r.returncode == 1
    busy.close()
    lines = [x for x in r.stderr.splitlines() if "error" in x]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr, r.stderr


def arp_icmp(*args):
    return subprocess.run([sys.executable, os.path.join(REPO, "examples", "arp_icmp.py"), *args],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=REPO))


def test_whole_frame_responders_need_a_ring_backend():
    r = arp_icmp("--address", "198.18.0.9", "--iface", "lo", "--backend", "socket")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1
    r = arp_icmp("--address", "198.18.0.9")                 # no --iface: a usage error
    assert r.returncode == 2 and "None" not in r.stderr, r.stderr
    assert r.stderr.startswith("usage: arp_icmp.py "), r.stderr
    assert r.stderr.splitlines()[-1].startswith("arp_icmp.py: error: --iface IFACE is required")


def test_public_api_is_five_names_with_type_stubs():
    assert sorted(stormpy.__all__) == ["Packet", "Responder", "Template", "__version__", "serve"]
    stubs = os.path.join(REPO, "stormpy", "__init__.pyi")
    assert os.path.exists(os.path.join(REPO, "stormpy", "py.typed"))
    text = open(stubs).read()
    for name in ("class Packet", "class Responder", "class Template", "def serve"):
        assert name in text


def test_the_tutorial_code_is_the_examples_code():
    import re
    doc = open(os.path.join(REPO, "docs", "RESPONDERS.md")).read()
    blocks = re.findall(r"`(examples/[\w.]+)`:\n\n```python\n(.*?)```", doc, re.S)
    shown = {path for path, _ in blocks}
    examples = {f"examples/{f}" for f in os.listdir(os.path.join(REPO, "examples"))
                if f.endswith(".py")}
    assert shown == examples
    for path, code in blocks:
        assert code == open(os.path.join(REPO, path)).read(), f"{path} differs from the tutorial"


def test_an_empty_payload_is_echoed_as_an_empty_datagram():
    app = stormpy.Responder(PORT)
    app.rule(template=stormpy.Template(b"", echo=slice(0, None)))
    replies, c = app.run_frames([udp_frame(b""), udp_frame(b"z")])
    assert [checked_reply(r) for r in replies] == [b"", b"z"]
    assert c["rule_answers"] == 2 and c["rule_unsent"] == 0


def test_a_text_prefix_is_its_utf8_bytes():
    app = stormpy.Responder(PORT)
    app.rule(prefix="PING", template=b"PONG")
    replies, _ = app.run_frames([udp_frame(b"PING")])
    assert [checked_reply(r) for r in replies] == [b"PONG"]


@pytest.mark.parametrize("kwargs, words", [({"handler": 42}, "handler=42"),
                                           ({"name": 5}, "name=5")])
def test_a_responder_of_wrong_arguments_is_refused_when_made(kwargs, words):
    with pytest.raises(StormpyError, match=words):
        stormpy.Responder(PORT, **kwargs)


@pytest.mark.parametrize("endless", [lambda packets: itertools.repeat((packets[0], b"x")),
                                     lambda packets: itertools.repeat(42)])
def test_a_handler_whose_replies_never_end_is_cut_off(endless):
    """An endless iterable held the worker, and its C answers, for ever."""
    app = stormpy.Responder(PORT, handler=endless)
    app.rule(prefix=b"C", template=b"from C")
    replies, c = app.run_frames([udp_frame(b"a"), udp_frame(b"C")], batch=2)
    assert b"from C" in [checked_reply(r) for r in replies]
    assert c["slow_replies"] >= 1 or c["bad_replies"] > 1


def test_sys_exit_in_a_handler_is_a_handler_error_not_silence(caplog):
    calls = []

    def handler(packets):
        calls.append(1)
        if len(calls) == 1:
            raise SystemExit(3)
        return [(p, b"ok") for p in packets]

    app = stormpy.Responder(PORT, handler=handler)
    with caplog.at_level(logging.ERROR, logger="stormpy"):
        replies, c = app.run_frames([udp_frame(b"1"), udp_frame(b"2")], batch=1)
    assert [checked_reply(r) for r in replies] == [b"ok"]
    assert c["handler_errors"] == 1 and "SystemExit: 3" in caplog.text


def test_a_reply_not_sent_is_said_in_one_line(caplog):
    app = stormpy.Responder(PORT, handler=lambda packets: [(p, 42) for p in packets])
    with caplog.at_level(logging.WARNING, logger="stormpy"):
        _, c = app.run_frames([udp_frame(b"%d" % i) for i in range(6)], batch=2)
    notes = [r.getMessage() for r in caplog.records if "a reply not sent" in r.getMessage()]
    assert c["bad_replies"] == 6 and len(notes) == 1, notes     # not one a batch
    assert "a int; a reply is (packet, payload bytes)" in notes[0] and "\n" not in notes[0]


UPDATING_HANDLER = """
import stormpy
app = stormpy.Responder({port})
app.rule("r", prefix=b"GET ", key=slice(4, None), values={{b"a": b"A"}}, default=b"none")
def handler(packets):
    try:
        app.update("r", set_values={{b"b": b"B"}})
        said = b"updated"
    except stormpy.errors.StormpyError as e:
        said = str(e).encode()
    return [(p, said) for p in packets]
app.handler = handler
raise SystemExit(stormpy.serve(app, ["--listen", "127.0.0.1:{port}", "--workers", "1"]))
"""


def test_update_from_a_handler_is_refused_in_words():
    """In a worker, update() changed that worker's copy only, or, in a restarted worker,
    published a table the server never saw."""
    port = 7790
    proc = subprocess.Popen([sys.executable, "-c", UPDATING_HANDLER.format(port=port)],
                            cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.3)
    try:
        said = None
        for _ in range(60):                  # until it serves, at most 18 s
            s.sendto(b"PUT x", ("127.0.0.1", port))
            try:
                said = s.recv(512)
                break
            except socket.timeout:
                continue
        assert said is not None and b"from a @responder.control task" in said, said
        s.sendto(b"GET b", ("127.0.0.1", port))
        assert s.recv(512) == b"none"            # the table is as it was
    finally:
        s.close()
        proc.terminate()
        proc.communicate(timeout=20)
