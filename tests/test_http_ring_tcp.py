"""serve-http's own TCP (app/http/ring.c) stepped frame by frame, no interface and no
root: scapy builds the client's segments and parses every segment the server sends
(checksums included). The connection's life: handshake options, the answer's bytes,
who closes first and TIME_WAIT, a table full of TIME_WAIT connections, and the timers
on the wheel (retransmission, idle close)."""
import socket
import time

import pytest
from scapy.layers.inet import ICMP, IP, TCP
from scapy.layers.l2 import ARP, Ether

from stormpy import _core
from stormpy.http.site import compile_site

CLIENT, SERVER = "198.18.0.2", "198.18.0.1"
ISN = 1000
BIG = bytes((i * 31 + 7) & 0xFF for i in range(20000))


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("ring-site")
    (root / "a.txt").write_bytes(b"0123456789")
    (root / "big.bin").write_bytes(BIG)
    return compile_site(str(root))[0]


def frame(flags, seq, ack=0, payload=b"", sport=40000, options=()):
    return bytes(Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01") /
                 IP(src=CLIENT, dst=SERVER) /
                 TCP(sport=sport, dport=80, flags=flags, seq=seq, ack=ack, window=65535,
                     options=list(options)) / payload)


def parse(raw):
    """The segment, after checking both checksums against scapy's."""
    pkt = Ether(raw)
    ip, tcp = pkt[IP], pkt[TCP]
    assert (ip.src, ip.dst, tcp.sport) == (SERVER, CLIENT, 80)
    sent = (ip.chksum, tcp.chksum)
    del ip.chksum, tcp.chksum
    again = Ether(bytes(pkt))
    assert sent == (again[IP].chksum, again[TCP].chksum)
    return again[TCP]


class Client:
    """One client connection, with the server's sequence numbers kept."""

    def __init__(self, ring, sport=40000, options=(("MSS", 1460),)):
        self.ring, self.sport = ring, sport
        [synack] = [parse(f) for f in ring.step([frame("S", ISN, sport=sport, options=options)])]
        assert synack.flags == "SA" and synack.ack == ISN + 1
        self.synack = synack
        self.seq, self.rcv = ISN + 1, synack.seq + 1
        assert ring.step([self.segment("A")]) == []

    def segment(self, flags, payload=b""):
        return frame(flags, self.seq, self.rcv, payload, self.sport)

    def send(self, flags, payload=b""):
        out = [parse(f) for f in self.ring.step([self.segment(flags, payload)])]
        self.seq += len(payload) + ("F" in flags)
        return out

    def receive(self, segments):
        """The answer's bytes in order, acknowledged as they come; the segments."""
        data = b""
        for s in segments:
            if s.seq == self.rcv:
                data += bytes(s.payload)
                self.rcv += len(s.payload) + ("F" in s.flags)
        return data


def test_the_handshake_offers_what_the_client_offered(table):
    ring = _core.HttpRing(table)
    c = Client(ring, options=(("MSS", 1400), ("SAckOK", b""), ("WScale", 7)))
    opts = dict((k, v) for k, v in c.synack.options)
    assert opts["MSS"] == 1400 and opts["WScale"] == 0 and "SAckOK" in opts
    plain = Client(ring, sport=40001, options=(("MSS", 9000),))
    opts = dict((k, v) for k, v in plain.synack.options)
    assert opts["MSS"] == 1460 and "WScale" not in opts and "SAckOK" not in opts


def test_an_answer_is_the_site_answer_cut_at_the_mss(table):
    ring = _core.HttpRing(table)
    c = Client(ring)
    request = b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n"
    whole = _core.http_answer(table, request, int(time.time()))[3]
    got = b""
    segments = c.send("PA", request)
    for _ in range(50):
        got += c.receive(segments)
        assert all(len(s.payload) <= 1460 for s in segments)
        if len(got) >= len(whole):
            break
        segments = [parse(f) for f in ring.step([c.segment("A")])]
    # the Date line may have turned over a second between the two answers
    assert len(got) == len(whole) and got.endswith(BIG)


def close_from_server(ring, sport=40000):
    """HTTP/1.0: the server answers and closes first; the client's FIN follows.
    The server then holds the connection in TIME_WAIT."""
    c = Client(ring, sport=sport)
    out = c.send("PA", b"GET /a.txt HTTP/1.0\r\n\r\n")
    data = c.receive(out)
    assert data.endswith(b"0123456789") and "F" in out[-1].flags
    assert ring.step([c.segment("A")]) == []
    last = c.send("FA")
    assert [s.flags for s in last] == ["A"] and last[0].ack == c.seq
    return c


def test_the_side_that_closes_first_keeps_time_wait(table):
    ring = _core.HttpRing(table)
    c = close_from_server(ring)
    # the client's last FIN again (our ACK was lost): acknowledged, not reset
    again = [parse(f) for f in ring.step([frame("FA", c.seq - 1, c.rcv, sport=c.sport)])]
    assert [s.flags for s in again] == ["A"] and again[0].ack == c.seq
    # a new SYN above the old sequence numbers takes the flow over at once
    fresh = [parse(f) for f in ring.step([frame("S", c.seq + 100000, sport=c.sport,
                                                 options=(("MSS", 1460),))])]
    assert [s.flags for s in fresh] == ["SA"] and fresh[0].ack == c.seq + 100001


def test_the_side_that_closes_second_keeps_nothing(table):
    ring = _core.HttpRing(table)
    c = Client(ring)
    c.receive(c.send("PA", b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"))
    fin = c.send("FA")                       # the client closes first
    assert [s.flags for s in fin] in (["FA"], ["A", "FA"]) or "F" in fin[-1].flags
    c.receive(fin)
    assert ring.step([c.segment("A")]) == []
    gone = [parse(f) for f in ring.step([frame("FA", c.seq - 1, c.rcv, sport=c.sport)])]
    assert [s.flags for s in gone] == ["R"]
    assert ring.counters()["http_open"] == 0


def test_time_wait_makes_room_when_the_table_is_full(table):
    ring = _core.HttpRing(table, max_connections=2)
    close_from_server(ring, 40000)
    close_from_server(ring, 40001)
    assert ring.counters()["http_open"] == 2          # both in TIME_WAIT
    third = Client(ring, sport=40002)                  # a real SYN-ACK, no cookie
    assert ring.counters()["http_cookies_sent"] == 0
    assert third.receive(third.send("PA", b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"))
    # the oldest went: its repeated FIN is now a stranger's
    gone = [parse(f) for f in ring.step([frame("FA", 5, 5, sport=40000)])]
    assert [s.flags for s in gone] == ["R"]


def step_until(ring, seconds, want):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        out = [parse(f) for f in ring.step()]
        if any(want(s) for s in out):
            return out
        time.sleep(0.002)
    return []


def test_the_wheel_fires_the_retransmission_timer(table):
    """Nothing is acknowledged: a tail loss probe soon, then the first segment again
    when the retransmission timer (1 s before any RTT sample) goes off."""
    ring = _core.HttpRing(table)
    c = Client(ring)
    first = c.send("PA", b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")[0]
    began = time.monotonic()
    out = step_until(ring, 3.0, lambda s: s.seq == first.seq)
    assert out and 0.9 < time.monotonic() - began < 2.5
    assert ring.counters()["http_retransmits"] >= 2


def test_the_wheel_closes_an_idle_connection(table):
    ring = _core.HttpRing(table, idle_timeout_ms=300)
    c = Client(ring)
    c.receive(c.send("PA", b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert ring.step([c.segment("A")]) == []
    began = time.monotonic()
    out = step_until(ring, 2.0, lambda s: "F" in s.flags)
    assert out and 0.25 < time.monotonic() - began < 1.0


def test_a_reset_and_a_new_syn_in_one_batch(table):
    """The reset connection is gone before the next frame of the batch: the SYN after
    it gets the freed connection, whole, and the round ends."""
    ring = _core.HttpRing(table, max_connections=1)
    c = Client(ring)
    out = [parse(f) for f in ring.step([frame("R", c.seq, sport=c.sport),
                                        frame("S", ISN, sport=40001, options=(("MSS", 1460),))])]
    assert [s.flags for s in out] == ["SA"] and out[0].dport == 40001
    assert ring.counters()["http_open"] == 1 and ring.counters()["http_cookies_sent"] == 0


def test_a_reset_off_the_exact_sequence_gets_a_challenge_ack(table):
    """RFC 5961 3.2: a blind reset inside the window does not end the connection."""
    ring = _core.HttpRing(table)
    c = Client(ring)
    out = [parse(f) for f in ring.step([frame("R", c.seq + 100, sport=c.sport)])]
    assert [s.flags for s in out] == ["A"] and out[0].ack == c.seq
    answer = c.receive(c.send("PA", b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert answer.endswith(b"0123456789")


def test_a_reused_connection_starts_with_nothing_of_the_last_client(table):
    """A client leaves half a request behind and closes; the next client that gets
    its connection sees its own request answered, not the stranger's bytes."""
    ring = _core.HttpRing(table, max_connections=1)
    a = Client(ring)
    a.receive(a.send("PA", b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /secret HTTP/1.1\r\nX-Token: t"))
    out = a.send("FA")                       # the client closes first: no TIME_WAIT
    a.receive(out)
    ring.step([a.segment("A")])
    assert ring.counters()["http_open"] == 0
    b = Client(ring, sport=40001)
    answer = b.receive(b.send("PA", b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"0123456789")


def test_on_an_owned_interface_arp_and_ping_are_answered_too(table):
    """netmap takes the interface from the kernel: the TCP's worker answers ARP and
    ICMP echo for its own address, and only for it."""
    own = {"mac": bytes.fromhex("020000000001"), "ipv4": socket.inet_aton(SERVER)}
    ring = _core.HttpRing(table, own=own)
    arp = bytes(Ether(src="02:00:00:00:00:02", dst="ff:ff:ff:ff:ff:ff") /
                ARP(op=1, hwsrc="02:00:00:00:00:02", psrc=CLIENT, pdst=SERVER))
    other = bytes(Ether(src="02:00:00:00:00:02", dst="ff:ff:ff:ff:ff:ff") /
                  ARP(op=1, hwsrc="02:00:00:00:00:02", psrc=CLIENT, pdst="198.18.0.9"))
    ping = bytes(Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01") /
                 IP(src=CLIENT, dst=SERVER) / ICMP(id=7, seq=1) / b"hello")
    out = [Ether(f) for f in ring.step([arp, other, ping])]
    assert len(out) == 2
    assert out[0][ARP].op == 2 and out[0][ARP].psrc == SERVER and out[0][ARP].hwsrc == "02:00:00:00:00:01"
    assert out[1][ICMP].type == 0 and out[1][ICMP].load == b"hello"
    c = Client(ring)                                   # and the TCP beside them
    assert c.receive(c.send("PA", b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")).endswith(b"0123456789")
