"""A malformed-packet corpus built with scapy, sent to a running server over UDP.

The server must survive every packet, never answer a packet whose QR bit is set,
and answer malformed input only with an error that carries no data."""
import os
import random
import selectors
import socket
import struct
import time

import dns.message
import dns.rcode
import pytest
from scapy.layers.dns import DNS, DNSQR, DNSRROPT, DNSRR

from conftest import EXAMPLE_ZONE
from support.client import tcp_many, udp

ZONES = [("example.com.", EXAMPLE_ZONE)]
GOOD = bytes(DNS(id=0x4242, rd=1, qd=DNSQR(qname="www.example.com", qtype="A")))


def opt(**kw):
    return DNSRROPT(rclass=kw.pop("size", 1232), **kw)


def corpus():
    """(name, bytes) pairs. Every load here is finite and seeded."""
    rng = random.Random(20261121)
    out = []
    q = DNSQR(qname="www.example.com", qtype="A")
    out += [(f"truncated-{n}", GOOD[:n]) for n in range(len(GOOD))]
    out += [("qr-set", bytes(DNS(id=1, qr=1, qd=q))),
            ("qr-set-with-answer", bytes(DNS(id=2, qr=1, qd=q, an=DNSRR(rrname="www.example.com", rdata="192.0.2.1")))),
            ("qr-set-aa", bytes(DNS(id=3, qr=1, aa=1, qd=q))),
            ("qdcount-0", bytes(DNS(id=4, qdcount=0))),
            ("qdcount-2-one-present", bytes(DNS(id=5, qd=q, qdcount=2))),
            ("qdcount-2", bytes(DNS(id=6, qd=[q, q]))),
            ("ancount-claimed", bytes(DNS(id=7, qd=q, ancount=3))),
            ("arcount-claimed", bytes(DNS(id=8, qd=q, arcount=1))),
            ("two-opt", bytes(DNS(id=9, qd=q, ar=[opt(), opt()]))),
            ("opt-version-1", bytes(DNS(id=10, qd=q, ar=opt(version=1)))),
            ("opt-bad-rdlen", bytes(DNS(id=11, qd=q, ar=opt(rdlen=40)))),
            ("opt-size-0", bytes(DNS(id=12, qd=q, ar=opt(size=0)))),
            ("trailing-bytes", GOOD + b"\x00" * 7)]
    out += [(f"opcode-{op}", bytes(DNS(id=20 + op, opcode=op, qd=q))) for op in range(16)]
    head = struct.pack("!HHHHHH", 0x99, 0x0100, 1, 0, 0, 0)
    names = {
        "pointer-to-itself": b"\xc0\x0c",
        "pointer-loop": b"\x01a\xc0\x0c",
        "pointer-forward": b"\xc0\x30" + b"\x00" * 40,
        "pointer-past-end": b"\xc0\xff",
        "pointer-truncated": b"\xc0",
        "label-overrun": b"\x3fabc",
        "label-type-0x40": b"\x41a\x00",
        "label-type-0x80": b"\x81a\x00",
        "name-256-bytes": (b"\x3f" + b"a" * 63) * 4 + b"\x00",
        "200-labels": b"\x01a" * 200 + b"\x00",
        "no-root-label": b"\x03www\x07example\x03com",
    }
    for label, name in names.items():
        out.append((label, head + name + b"\x00\x01\x00\x01"))
        out.append((label + "-no-type", head + name))
    out += [(f"random-{i}", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600))))
            for i in range(400)]
    for i in range(1200):                      # bit flips and byte swaps of valid queries
        base = bytearray(bytes(DNS(id=i, rd=1, qd=DNSQR(qname=rng.choice(
            ["www.example.com", "x.apps.example.com", "example.com", "lab.example.com"]),
            qtype=rng.choice([1, 2, 15, 28, 255])), ar=opt() if i % 2 else [])))
        for _ in range(rng.randrange(1, 4)):
            pos = rng.randrange(len(base))
            base[pos] = rng.randrange(256) if rng.random() < 0.5 else base[pos] ^ (1 << rng.randrange(8))
        out.append((f"mutated-{i}", bytes(base)))
    out.append(("oversized-datagram", GOOD + b"\x00" * 5000))
    return out


def exchange(addr, packets, batch=100, quiet=0.3):
    """Send each packet from its own socket; {index: [responses]}."""
    answers = {}
    for start in range(0, len(packets), batch):
        sel = selectors.DefaultSelector()
        socks = []
        for i, (_, data) in enumerate(packets[start:start + batch], start):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setblocking(False)
            s.sendto(data, addr)
            sel.register(s, selectors.EVENT_READ, i)
            socks.append(s)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            events = sel.select(timeout=quiet)
            if not events:
                break
            for key, _ in events:
                try:
                    answers.setdefault(key.data, []).append(key.fileobj.recv(65535))
                except BlockingIOError:
                    pass
        for s in socks:
            s.close()
        sel.close()
    return answers


def question_of(data):
    """The question of a standard query whose header and question are well formed,
    judged by dnspython on those parts alone (records after the question that are
    well formed on the wire but odd, like an unknown class, are ignored by servers)."""
    if len(data) < 12 or data[2] & 0xF8 or data[4:6] != b"\x00\x01":
        return None
    try:
        m = dns.message.from_wire(data[:6] + bytes(6) + data[12:], ignore_trailing=True)
    except Exception:
        return None
    return m.question[0]


def check_error_answer(name, data, wire, problems):
    """An answer to a non-standard opcode: header checks only (dnspython cannot read
    an UPDATE message with a non-SOA zone section)."""
    an, ns = struct.unpack("!HH", wire[6:10])
    if an or ns:
        problems.append(f"{name}: opcode {data[2] >> 3 & 15} answered with records")
    if wire[3] & 0x0F not in (dns.rcode.NOTIMP, dns.rcode.NOTAUTH, dns.rcode.FORMERR):
        problems.append(f"{name}: opcode {data[2] >> 3 & 15} answered with rcode {wire[3] & 15}")


@pytest.fixture(scope="module")
def server(stormpy_server):
    return stormpy_server(ZONES, workers=2)


def judge(packets, answers):
    """Every way the answers to the corpus may be wrong, as lines of text."""
    problems = []
    for i, (name, data) in enumerate(packets):
        for wire in answers.get(i, []):
            if len(data) >= 3 and data[2] & 0x80:
                problems.append(f"{name}: a packet with QR set was answered")
                continue
            if wire[:2] != data[:2]:
                problems.append(f"{name}: answer ID {wire[:2].hex()} != query ID {data[:2].hex()}")
            if len(wire) >= 12 and wire[2] & 0x78:
                check_error_answer(name, data, wire, problems)
                continue
            try:
                resp = dns.message.from_wire(wire)
            except Exception as e:
                problems.append(f"{name}: the answer does not parse: {e}")
                continue
            question = question_of(data)
            if resp.answer or resp.authority:
                if question is None:
                    problems.append(f"{name}: malformed query answered with data ({resp.rcode()})")
                elif resp.question[0].name.to_wire() != question.name.to_wire():
                    problems.append(f"{name}: answered a different question {resp.question[0]}")
            elif question is None and resp.rcode() == dns.rcode.NOERROR and not resp.flags & 0x0200:
                problems.append(f"{name}: malformed query answered NOERROR")
            if resp.edns < 0 and len(wire) > 512:
                problems.append(f"{name}: {len(wire)} bytes without EDNS")
        if len(answers.get(i, [])) > 1:
            problems.append(f"{name}: answered {len(answers[i])} times")
    return problems


def test_malformed_corpus(server):
    packets = corpus()
    answers = exchange(server.addr, packets)
    problems = judge(packets, answers)
    assert not problems, "\n".join(problems[:40])
    # the malformed packets really were rejected, and the server still works
    assert sum(1 for i, (n, _) in enumerate(packets) if n.startswith("qr-set") and i in answers) == 0
    good = udp(dns.message.make_query("www.example.com", "A"), server.addr)
    assert good is not None and good.answer
    assert server.proc.poll() is None


def test_malformed_tcp_streams(server):
    cases = [b"\x00\x00",                                   # empty message
             struct.pack("!H", 5) + b"\x01\x02\x03",          # shorter than announced, then EOF
             struct.pack("!H", len(GOOD)) + GOOD[:2] + b"\x80" + GOOD[3:],   # QR set
             b"\xff\xff" + b"\x00" * 100]                     # announces 64 KiB, sends 100 bytes
    for data in cases:
        with socket.create_connection(server.addr, timeout=3) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(3)
            try:
                got = s.recv(65535)
            except socket.timeout:
                got = b""
            assert got == b"", f"{data[:8].hex()}: answered {got[:16].hex()}"
    # a pipelined good query after garbage on another connection still works
    (r,) = tcp_many([dns.message.make_query("www.example.com", "A")], server.addr)
    assert r.answer and server.proc.poll() is None


@pytest.mark.skipif(os.geteuid() != 0, reason="sending from port 0 needs a raw socket (root)")
def test_a_datagram_from_a_source_no_reply_can_reach_is_not_answered(tmp_path):
    """On the socket backend such a query was answered, and the reply counted as a send
    error; it is dropped as the frame path drops it, under bad_source."""
    from test_dns_tcp import answered_now, serve
    from test_supervisor import snapshot
    srv, control = serve(tmp_path)
    query = dns.message.make_query("www.example.com", "A").to_wire()
    with srv:
        port = srv.addr[1]
        raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
        with raw:
            for sport in (0, 0, 0):           # UDP header with no checksum: the kernel takes it
                raw.sendto(struct.pack("!HHHH", sport, port, 8 + len(query), 0) + query,
                           ("127.0.0.1", 0))
        assert answered_now(srv.addr)
        deadline = time.monotonic() + 5
        while True:
            workers = [w for w in snapshot(control)["workers"] if w["kind"] != "tcp"]
            refused = sum(w.get("bad_source", 0) for w in workers)
            if refused >= 3 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert refused == 3 and sum(w.get("tx_errors", 0) for w in workers) == 0, workers
