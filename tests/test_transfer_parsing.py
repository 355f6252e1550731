"""The transfer parsing under malformed input, without namespaces (loopback only):
mutated AXFR/IXFR streams into a secondary, mutated NOTIFY and transfer queries into
the answering side. Nothing may raise past the one-line errors, and a failed transfer
must leave the zone as it was. Seeded, bounded in count and time."""
import random
import socket
import struct
import threading

import dns.message
import dns.name
import dns.opcode
import dns.rdatatype
import dns.zone
import pytest

from stormpy.dns.handoff import answer_notify
from stormpy.dns.secondary import Secondary, TransferFailed, TransferZone
from stormpy.dns.transfer import TransferPolicy, parse_tsig, transfer_messages, transfer_replies, zone_rrsets
from stormpy.dns.zone import Zone

ORIGIN = dns.name.from_text("example.com.")
KEY = parse_tsig("k:hmac-sha256:c3Rvcm1weS10cmFuc2Zlci1rZXk=")
CASES = 120


def zone(serial: int) -> dns.zone.Zone:
    text = (f"$ORIGIN example.com.\n$TTL 60\n@ SOA ns hm {serial} 60 10 600 60\n@ NS ns\n"
            f"ns A 192.0.2.1\n" + "".join(f"n{i} TXT \"v{serial} {i}\"\n" for i in range(60)))
    return dns.zone.from_text(text, relativize=False, zone_factory=TransferZone)


def mutate(wire: bytes, rng: random.Random) -> bytes:
    b = bytearray(wire)
    how = rng.randrange(4)
    if how == 0 and len(b) > 12:
        return bytes(b[:rng.randrange(12, len(b))])             # cut short
    if how == 1:
        for _ in range(rng.randrange(1, 8)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)   # bit flips
        return bytes(b)
    if how == 2:
        i = rng.randrange(12, len(b)) if len(b) > 12 else 0
        return bytes(b[:i] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) + b[i:])
    return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))


class StreamServer:
    """Loopback TCP: every connection gets the next stream of messages."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(10)
        self.streams = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    size = struct.unpack("!H", conn.recv(2))[0]
                    conn.recv(size)
                    for wire in (self.streams.pop(0) if self.streams else []):
                        conn.sendall(struct.pack("!H", len(wire)) + wire)
                except (OSError, struct.error):
                    pass


@pytest.fixture(scope="module")
def server():
    s = StreamServer()
    yield s
    s.sock.close()


def test_mutated_transfers_fail_cleanly_and_change_nothing(server, tmp_path):
    rng = random.Random(1995)
    sec = Secondary(ORIGIN, ("127.0.0.1", server.sock.getsockname()[1]), None, str(tmp_path))
    sec.zone = zone(1)
    before = sec.zone.to_text()
    query = dns.message.make_query(ORIGIN, dns.rdatatype.AXFR)
    good = transfer_messages(query, zone_rrsets(zone(2)))
    assert len(good) >= 1
    outcomes = {"failed": 0, "applied": 0}
    for _ in range(CASES):
        stream = list(good)
        i = rng.randrange(len(stream))
        stream[i] = mutate(stream[i], rng)
        if rng.random() < 0.3:
            stream = stream[:rng.randrange(len(stream) + 1)]
        server.streams.append(stream)
        in_place = rng.random() < 0.5       # as an IXFR applies: a transaction on the zone
        try:
            if in_place:
                sec._inbound(sec.zone, 1)
            else:
                sec._transfer(None)
        except TransferFailed as e:
            assert "\n" not in str(e)
            assert sec.zone.to_text() == before          # the old data, untouched
            outcomes["failed"] += 1
            continue
        # a mutation dnspython still accepts (a TTL bit, say): a whole, consistent zone
        assert sec.zone.get_soa() is not None and sec.zone.get_rdataset(ORIGIN, "NS") is not None
        outcomes["applied"] += 1
        sec.zone = zone(1)
    assert outcomes["failed"] > CASES // 2, outcomes


def test_mutated_notify_and_transfer_queries_answered_or_dropped():
    rng = random.Random(1996)
    sec = Secondary(ORIGIN, ("192.0.2.53", 53), KEY, "/nonexistent")
    notify = dns.message.make_query(ORIGIN, "SOA")
    notify.set_opcode(dns.opcode.NOTIFY)
    notify.use_tsig({KEY.name: KEY}, KEY.name)
    signed = notify.to_wire()
    axfr = dns.message.make_query(ORIGIN, dns.rdatatype.AXFR)
    axfr.use_tsig({KEY.name: KEY}, KEY.name)
    policy = TransferPolicy.from_options(["127.0.0.0/8"], [KEY])
    z = Zone("", ORIGIN, zone(3))       # as DnsServer.served_zone gives it
    reply, target = answer_notify(signed, "192.0.2.53", {ORIGIN: sec}, [KEY])
    assert target is sec and dns.message.from_wire(reply, keyring={KEY.name: KEY},
                                                   request_mac=notify.mac).rcode() == 0
    good = transfer_replies(axfr.to_wire(), "127.0.0.1", lambda n: z if n == ORIGIN else None, policy)
    assert len(good) >= 1
    for _ in range(CASES):
        reply, target = answer_notify(mutate(signed, rng), "192.0.2.53", {ORIGIN: sec}, [KEY])
        assert reply is None or isinstance(reply, bytes)
        replies = transfer_replies(mutate(axfr.to_wire(), rng), "127.0.0.1",
                                   lambda n: z if n == ORIGIN else None, policy)
        assert all(isinstance(w, bytes) for w in replies)
