"""DNS over TCP in the TCP workers (native/app/dns/stream.c): RFC 7766 behaviour, and
the defences that keep one client from starving the others: the I/O timeout, the idle
timeout that shrinks as the pool fills, eviction, the per-source limit, a client that
does not read. Counters are read back from the server's control socket."""
import os
import socket
import struct
import time

import dns.flags
import dns.message
import dns.rcode
import pytest

from conftest import EXAMPLE_ZONE
from support.client import tcp_many, udp
from support.process import free_port
from support.servers import StormpyServer
from test_supervisor import snapshot

BIG_TXT = 60                  # strings of 250 bytes: an answer of about 15 KB


@pytest.fixture
def big_zone(tmp_path):
    path = tmp_path / "big.zone"
    strings = " ".join(f'"{i:03d}{"x" * 247}"' for i in range(BIG_TXT))
    path.write_text("$ORIGIN big.test.\n$TTL 300\n"
                    "@ IN SOA ns.big.test. h.big.test. 1 7200 3600 1209600 300\n"
                    "@ IN NS ns\nns IN A 192.0.2.53\n"
                    f"txt IN TXT {strings}\n")
    return str(path)


def serve(tmp_path, *args, zones=(("example.com.", EXAMPLE_ZONE),)):
    control = str(tmp_path / "ctl.sock")
    return StormpyServer(list(zones), ["--control", control, *args]), control


def tcp_worker(control) -> dict:
    (w,) = [w for w in snapshot(control)["workers"] if w["kind"] == "tcp"]
    return w


def tcp_worker_once(control, until, seconds=5.0) -> dict:
    """The TCP worker's counters once until(them) holds (or after `seconds`): a client's
    close reaches the worker a wake-up after the client has moved on."""
    deadline = time.monotonic() + seconds
    while not until(w := tcp_worker(control)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return w


def wire(name, qtype="A", qid=None):
    m = dns.message.make_query(name, qtype)
    if qid is not None:
        m.id = qid
    w = m.to_wire()
    return struct.pack("!H", len(w)) + w


def closed_within(sock, seconds) -> float | None:
    """Seconds until the server closes sock (EOF or reset), None if it did not."""
    start = time.monotonic()
    sock.settimeout(0.05)
    while time.monotonic() - start < seconds:
        try:
            if sock.recv(65536) == b"":
                return time.monotonic() - start
        except socket.timeout:
            continue
        except ConnectionResetError:
            return time.monotonic() - start
    return None


def answered_now(addr) -> bool:
    r = tcp_many([dns.message.make_query("www.example.com", "A")], addr, timeout=2.0)
    return r[0].answer[0][0].address == "192.0.2.80"


def test_pipelined_queries_are_answered_in_order_as_over_udp(tmp_path):
    srv, control = serve(tmp_path)
    names = [("www.example.com", "A"), ("example.com", "MX"), ("nothere.example.com", "A"),
             ("x.apps.example.com", "A"), ("ftp.example.com", "AAAA"), ("lab.example.com", "A"),
             ("example.org", "A")] * 8
    with srv:
        queries = [dns.message.make_query(n, t) for n, t in names]
        for i, q in enumerate(queries):
            q.id = i + 1
        answers = tcp_many(queries, srv.addr)
        assert [a.id for a in answers] == [q.id for q in queries]
        for q, a in zip(queries, answers):
            over_udp = udp(q, srv.addr)
            assert (a.rcode(), a.answer, a.authority, a.additional) == \
                (over_udp.rcode(), over_udp.answer, over_udp.authority, over_udp.additional)
        assert {a.rcode() for a in answers} == {dns.rcode.NOERROR, dns.rcode.NXDOMAIN,
                                                dns.rcode.REFUSED}
        assert tcp_worker(control)["queries"] == len(queries)


def test_a_client_that_half_closes_gets_its_answers_then_the_close(tmp_path):
    srv, _ = serve(tmp_path)
    with srv, socket.create_connection(srv.addr, timeout=3) as s:
        s.sendall(wire("www.example.com", qid=7) + wire("example.com", "MX", qid=8))
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        first = struct.unpack("!H", data[:2])[0]
        a, b = dns.message.from_wire(data[2:2 + first]), dns.message.from_wire(data[4 + first:])
        assert (a.id, b.id) == (7, 8) and a.answer and b.answer


def test_a_slow_loris_is_cut_after_the_io_timeout_and_others_are_served(tmp_path):
    srv, control = serve(tmp_path, "--tcp-io-timeout", "0.5", "--tcp-idle-timeout", "30")
    with srv, socket.create_connection(srv.addr, timeout=3) as loris:
        loris.sendall(wire("www.example.com")[:9])       # the length and a few bytes
        assert answered_now(srv.addr)
        took = closed_within(loris, 5)
        assert took is not None and took < 2.0, took
        w = tcp_worker_once(control, lambda w: w["tcp_open"] == 0)
        assert (w["tcp_io_timeouts"], w["tcp_open"]) == (1, 0)


def test_a_client_streaming_queries_in_pieces_is_not_cut(tmp_path):
    """Every read ends inside a query for longer than the I/O timeout, but each query
    arrives well within it: the timer runs per query, not per connection."""
    srv, control = serve(tmp_path, "--tcp-io-timeout", "0.3")
    stream = b"".join(wire("www.example.com", qid=i) for i in range(120))
    with srv:
        with socket.create_connection(srv.addr, timeout=3) as s:
            for off in range(0, len(stream), 23):        # a query is 35 bytes: always cut
                s.sendall(stream[off:off + 23])
                time.sleep(0.01)
            s.shutdown(socket.SHUT_WR)
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        ids, off = [], 0
        while off < len(data):
            n = struct.unpack_from("!H", data, off)[0]
            ids.append(dns.message.from_wire(data[off + 2:off + 2 + n]).id)
            off += 2 + n
        assert ids == list(range(120))
        assert tcp_worker(control)["tcp_io_timeouts"] == 0


def test_idle_connections_are_closed_sooner_as_the_pool_fills(tmp_path):
    # 19 of 20 open: the 30 s idle timeout becomes 30 * (20 - 19) / 10 = 3 s
    srv, control = serve(tmp_path, "--tcp-max-clients", "20", "--tcp-max-per-source", "0",
                         "--tcp-idle-timeout", "30", "--tcp-io-timeout", "0.5")
    with srv:
        idle = [socket.create_connection(srv.addr, timeout=3) for _ in range(19)]
        try:
            assert closed_within(idle[0], 1.0) is None        # not at once
            took = [closed_within(s, 8.0) for s in idle]
            # the oldest goes in seconds; those a moment younger may find the pool
            # emptied when they come due, and the whole 30 s back
            assert took[0] is not None, took
            # a connection seen open may close while later ones are watched: count the
            # closed ones again around the server's own figures until they agree
            for _ in range(20):
                before = sum(closed_within(s, 0.01) is not None for s in idle)
                w = tcp_worker(control)
                after = sum(closed_within(s, 0.01) is not None for s in idle)
                if before == after:
                    break
            assert before == after and after >= sum(t is not None for t in took)
            assert w["tcp_idle_timeouts"] == after and w["tcp_open"] == 19 - after
            assert answered_now(srv.addr)
        finally:
            for s in idle:
                s.close()


def test_a_full_pool_closes_its_oldest_idle_connection_for_a_new_client(tmp_path):
    srv, control = serve(tmp_path, "--tcp-max-clients", "10", "--tcp-max-per-source", "0",
                         "--tcp-idle-timeout", "60", "--tcp-io-timeout", "5")
    with srv:
        idle = []
        for _ in range(10):
            idle.append(socket.create_connection(srv.addr, timeout=3))
            time.sleep(0.01)
        try:
            assert answered_now(srv.addr)
            assert closed_within(idle[0], 2.0) is not None     # the oldest made room
            assert closed_within(idle[-1], 0.2) is None
            assert tcp_worker(control)["tcp_evicted"] == 1
        finally:
            for s in idle:
                s.close()


@pytest.mark.parametrize("other_listen", [False, True])
def test_one_address_holds_at_most_its_share(tmp_path, other_listen):
    """A second listen address has TCP workers of its own, which a client of the first
    never reaches: they took half of its share (2 of 4 here)."""
    port = free_port()
    control = str(tmp_path / "ctl.sock")
    srv = StormpyServer([("example.com.", EXAMPLE_ZONE)],
                        ["--control", control, "--tcp-max-per-source", "4", "--tcp-idle-timeout",
                         "30"] + (["--listen", f"127.0.0.3:{port}"] if other_listen else []),
                        port=port)
    with srv:
        held = [socket.create_connection(srv.addr, timeout=3) for _ in range(6)]
        try:
            assert [closed_within(s, 0.5) is not None for s in held] == [False] * 4 + [True] * 2
            for i, s in enumerate(held[:4]):
                s.sendall(wire("www.example.com", qid=i))
                assert struct.unpack("!H", s.recv(2))[0] > 12
            other = socket.socket()
            other.bind(("127.0.0.2", 0))                      # another address is served
            other.settimeout(3)
            other.connect(srv.addr)
            with other:
                other.sendall(wire("www.example.com"))
                assert len(other.recv(4096)) > 14
            limited = [w["tcp_source_limited"] for w in snapshot(control)["workers"]
                       if w["kind"] == "tcp"]
            assert sum(limited) == 2, limited
        finally:
            for s in held:
                s.close()


def test_malformed_lengths_close_the_connection_only(tmp_path):
    srv, control = serve(tmp_path)
    with srv:
        for head in (b"\x00\x00", struct.pack("!H", 1023) + b"\x00" * 1023):
            with socket.create_connection(srv.addr, timeout=3) as s:
                s.sendall(head)
                assert closed_within(s, 2.0) is not None
        assert tcp_worker(control)["tcp_malformed"] == 2
        assert answered_now(srv.addr)


def test_a_slow_reader_gets_every_long_answer_intact(tmp_path, big_zone):
    srv, control = serve(tmp_path, "--tcp-io-timeout", "2",
                         zones=(("example.com.", EXAMPLE_ZONE), ("big.test.", big_zone)))
    count = 40                                           # about 600 KB of answers
    with srv, socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(5)
        s.connect(srv.addr)
        s.sendall(b"".join(wire("txt.big.test", "TXT", qid=i) for i in range(count)))
        data = b""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            time.sleep(0.002)
            data += s.recv(8192)
            got, off = 0, 0
            while off + 2 <= len(data) and off + 2 + struct.unpack_from("!H", data, off)[0] <= len(data):
                off += 2 + struct.unpack_from("!H", data, off)[0]
                got += 1
            if got == count:
                break
        off, ids = 0, []
        while off < len(data):
            n = struct.unpack_from("!H", data, off)[0]
            m = dns.message.from_wire(data[off + 2:off + 2 + n])
            assert len(m.answer[0][0].strings) == BIG_TXT and not m.flags & dns.flags.TC
            ids.append(m.id)
            off += 2 + n
        assert ids == list(range(count))
        assert tcp_worker(control)["tcp_io_timeouts"] == 0


def test_a_client_that_never_reads_is_closed_without_growing_the_worker(tmp_path, big_zone):
    srv, control = serve(tmp_path, "--tcp-io-timeout", "0.5",
                         zones=(("example.com.", EXAMPLE_ZONE), ("big.test.", big_zone)))
    with srv:
        pid = tcp_worker(control)["pid"]
        rss_before = rss_kib(pid)
        query = wire("txt.big.test", "TXT") * 50
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(srv.addr)
            s.setblocking(False)
            sent, deadline = 0, time.monotonic() + 10
            while time.monotonic() < deadline:               # write until the server stops reading
                try:
                    sent += s.send(query)
                except BlockingIOError:
                    time.sleep(0.05)
                except (BrokenPipeError, ConnectionResetError):
                    break
                if tcp_worker(control)["tcp_io_timeouts"]:
                    break
            assert answered_now(srv.addr)                    # others are served meanwhile
            while time.monotonic() < deadline and not tcp_worker(control)["tcp_io_timeouts"]:
                time.sleep(0.1)
        w = tcp_worker_once(control, lambda w: w["tcp_open"] == 0)
        assert (w["tcp_io_timeouts"], w["tcp_open"]) == (1, 0), w
        assert w["queries"] > 10 and sent > 100_000
        assert rss_kib(pid) - rss_before < 1024


def rss_kib(pid) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_the_tcp_options_are_checked(tmp_path):
    import subprocess
    import sys
    for bad in (["--tcp-io-timeout", "0"], ["--tcp-max-clients", "0"], ["--tcp-workers", "x"]):
        r = subprocess.run([sys.executable, "-m", "stormpy", "serve-dns", EXAMPLE_ZONE, *bad],
                           capture_output=True, text=True, timeout=30,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert bad[0] in r.stderr.strip().splitlines()[-1]


def test_a_client_that_never_reads_pins_a_bounded_send_buffer(tmp_path, big_zone):
    """The kernel grew each connection's send buffer to megabytes (tcp_wmem's maximum)
    for a client that pipelines queries and never reads its answers."""
    import subprocess
    port = free_port()
    srv = StormpyServer([("big.test.", big_zone)], ["--tcp-io-timeout", "5"], port=port)
    with srv:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        try:
            query = wire("txt.big.test", "TXT")
            queries = memoryview(query * 20000)
            s.setblocking(False)
            sent, deadline = 0, time.monotonic() + 1.5
            while time.monotonic() < deadline and sent < len(queries):
                try:
                    sent += s.send(queries[sent:sent + 65536])
                except BlockingIOError:
                    time.sleep(0.01)
            out = subprocess.run(["ss", "-Htn", f"sport = :{port}"], capture_output=True,
                                 text=True, check=True).stdout.split()
            assert out, "the server closed the connection"
            queued = int(out[2])                 # Send-Q of the server's connection
            assert sent > 100 * len(query) and queued <= 4 * 65538, (sent, queued)
        finally:
            s.close()
        r = tcp_many([dns.message.make_query("txt.big.test", "TXT")], srv.addr, timeout=2.0)
        assert len(r[0].answer[0][0].strings) == BIG_TXT

