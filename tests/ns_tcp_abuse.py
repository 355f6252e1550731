"""The two sides of `reliability.py tcp-abuse`, each run inside its own namespace by
tests/reliability_tcp.py; each prints its results as one JSON object:

    ns_tcp_abuse.py attack SERVER PORT SOURCES SECONDS IDLE,CHATTY,NONREAD,LORIS
    ns_tcp_abuse.py client SERVER PORT SECONDS INTERVAL

attack: one epoll loop holds every connection, each bound to one of SOURCES (comma
  separated) in turn, so that a per-source limit alone cannot turn the abuse away:
  idle ones send nothing; chatty ones ask one question every 1-5 s and read the answers;
  non-reading ones pipeline questions until the socket blocks, then wait, never reading;
  slow-loris ones send a 2-byte length, then one byte of the query a second. A connection
  the server cuts (or refuses) is opened again 0.5-1.5 s later, so the pressure persists.
  Reports, per kind, what was opened, cut (and after how long), refused, still open.
client: a real resolver's questions, one every INTERVAL seconds, UDP and TCP in turn, a
  new socket for each (as after a truncated answer), 2 s to answer; each answer is checked.

Both stop by themselves after SECONDS (the client waits up to 2 s more for its last
answers); every connection count and wait here is bounded.
"""
import errno
import heapq
import json
import random
import resource
import select
import socket
import statistics
import struct
import sys
import time

import dns.message
import dns.rcode

QUESTION = ("www.example.com", "A")
EXPECTED = "192.0.2.80"
ANSWER_TIMEOUT = 2.0
IP_BIND_ADDRESS_NO_PORT = 24        # linux/in.h: the port is chosen at connect, per 4-tuple
KINDS = ("idle", "chatty", "nonread", "loris")
WATCH = select.EPOLLIN | select.EPOLLRDHUP
CUT = select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR
RAMP_PER_TICK = 200                 # connections opened per loop turn at the start
MAX_OPENS_PER_SLOT = 400            # bound on reconnections of any one connection


def query_wire(qid=None):
    q = dns.message.make_query(*QUESTION)
    if qid is not None:
        q.id = qid
    return q.to_wire()


def framed(wire):
    return struct.pack("!H", len(wire)) + wire


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, max(hard, need)))


def percentiles(values):
    if not values:
        return None
    values = sorted(values)
    pick = lambda p: values[min(len(values) - 1, int(p * len(values)))]  # noqa: E731
    return {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "max": values[-1]}


class Slot:
    """One abusive connection and the ones that replace it when it is cut."""
    __slots__ = ("kind", "source", "sock", "open", "opened_at", "opens", "loris_left", "inbuf")

    def __init__(self, kind, source):
        self.kind, self.source = kind, source
        self.sock, self.open, self.opened_at, self.opens = None, False, 0.0, 0
        self.loris_left = self.inbuf = b""


class Attack:
    def __init__(self, server, port, sources, counts):
        self.addr = (server, int(port))
        self.slots = [Slot(kind, sources[i % len(sources)])
                      for i, kind in enumerate(k for k, n in zip(KINDS, counts) for _ in range(n))]
        self.epoll = select.epoll()
        self.by_fd = {}
        self.timers = []                # (when, serial, slot, sock): chatty questions, loris bytes
        self.serial = 0
        self.stats = {k: {"slots": n, "opened": 0, "established": 0, "refused": 0, "cut": 0,
                          "cut_after": [], "queries": 0, "answers": 0, "bytes_sent": 0}
                      for k, n in zip(KINDS, counts)}
        self.chatty_wire = framed(query_wire())
        self.pipeline = self.chatty_wire * 2000
        self.loris_wire = framed(query_wire())

    def later(self, delay, slot):
        self.serial += 1
        heapq.heappush(self.timers, (time.monotonic() + delay, self.serial, slot, slot.sock))

    def connect(self, slot):
        if slot.opens >= MAX_OPENS_PER_SLOT:
            return
        slot.opens += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        if slot.kind == "nonread":      # a small window fills after a few answers
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        s.bind((slot.source, 0))
        err = s.connect_ex(self.addr)
        if err not in (0, errno.EINPROGRESS):
            s.close()
            self.stats[slot.kind]["refused"] += 1
            self.later(random.uniform(0.5, 1.5), slot)
            return
        slot.sock, slot.open = s, False
        self.stats[slot.kind]["opened"] += 1
        self.by_fd[s.fileno()] = slot
        self.epoll.register(s.fileno(), select.EPOLLOUT | CUT)

    def drop(self, slot, now, cut):
        """The server closed (cut) or refused the connection: count it, open another soon."""
        st = self.stats[slot.kind]
        if slot.open and cut:
            st["cut"] += 1
            st["cut_after"].append(round(now - slot.opened_at, 3))
        else:
            st["refused"] += 1
        fd = slot.sock.fileno()
        self.epoll.unregister(fd)
        del self.by_fd[fd]
        slot.sock.close()
        slot.sock, slot.open = None, False
        self.later(random.uniform(0.5, 1.5), slot)

    def established(self, slot, now):
        slot.open, slot.opened_at, slot.inbuf = True, now, b""
        self.stats[slot.kind]["established"] += 1
        mask = (select.EPOLLOUT | CUT) if slot.kind == "nonread" else (WATCH | CUT)
        self.epoll.modify(slot.sock.fileno(), mask)
        if slot.kind == "chatty":
            self.later(random.uniform(1.0, 5.0), slot)
        elif slot.kind == "loris":
            slot.loris_left = self.loris_wire
            self.later(0.0, slot)

    def send(self, slot, data):
        try:
            n = slot.sock.send(data)
        except BlockingIOError:
            if slot.kind == "nonread":      # blocked: it stays so, only a cut is watched for
                self.epoll.modify(slot.sock.fileno(), CUT)
            return 0
        self.stats[slot.kind]["bytes_sent"] += n
        return n

    def count_answers(self, slot, data):
        buf = slot.inbuf + data
        while len(buf) >= 2 and len(buf) >= 2 + struct.unpack_from("!H", buf)[0]:
            self.stats[slot.kind]["answers"] += 1
            buf = buf[2 + struct.unpack_from("!H", buf)[0]:]
        slot.inbuf = buf

    def timer(self, slot, now):
        """A chatty connection's next question, or a slow-loris connection's next byte."""
        st = self.stats[slot.kind]
        try:
            if slot.kind == "chatty":
                st["queries"] += self.send(slot, self.chatty_wire) == len(self.chatty_wire)
                self.later(random.uniform(1.0, 5.0), slot)
            else:
                step = 2 if slot.loris_left is self.loris_wire else 1   # the length, then a byte
                slot.loris_left = slot.loris_left[self.send(slot, slot.loris_left[:step]):]
                if not slot.loris_left:
                    st["queries"] += 1
                    slot.loris_left = self.loris_wire
                self.later(1.0, slot)
        except OSError:
            self.drop(slot, now, cut=True)

    def event(self, slot, mask, now):
        s = slot.sock
        if not slot.open:
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0 and not mask & (select.EPOLLHUP | select.EPOLLERR):
                self.established(slot, now)
            else:
                self.drop(slot, now, cut=False)
            return
        try:
            if mask & select.EPOLLIN:
                data = s.recv(65536)
                if not data:
                    raise ConnectionResetError
                self.count_answers(slot, data)
            if mask & CUT:
                raise ConnectionResetError
            if mask & select.EPOLLOUT:
                self.send(slot, self.pipeline)
        except OSError:
            self.drop(slot, now, cut=True)

    def run(self, seconds):
        raise_fd_limit(len(self.slots) + 1024)
        start = time.monotonic()
        end = start + seconds
        pending = list(self.slots)
        while True:
            now = time.monotonic()
            if now >= end:
                break
            for slot in pending[:RAMP_PER_TICK]:
                self.connect(slot)
            del pending[:RAMP_PER_TICK]
            while self.timers and self.timers[0][0] <= now:
                _, _, slot, sock = heapq.heappop(self.timers)
                if sock is None:
                    self.connect(slot)
                elif slot.sock is sock:            # not a timer of a connection since cut
                    self.timer(slot, now)
            wait = min(0.05, max(0.0, (self.timers[0][0] - now) if self.timers else 0.05))
            for fd, mask in self.epoll.poll(wait, 1024):
                slot = self.by_fd.get(fd)
                if slot is not None:
                    self.event(slot, mask, time.monotonic())
        return self.report()

    def report(self):
        out = {}
        for kind, st in self.stats.items():
            slots = [s for s in self.slots if s.kind == kind]
            cut_after = st.pop("cut_after")
            st["open_at_end"] = sum(1 for s in slots if s.open)
            st["connecting_at_end"] = sum(1 for s in slots if s.sock is not None and not s.open)
            st["cut_after_median"] = statistics.median(cut_after) if cut_after else None
            st["cut_after"] = percentiles(cut_after)
            out[kind] = st
        return out


class Question:
    """One of the real client's questions in flight: its socket, what it sent, its clock."""
    __slots__ = ("proto", "sock", "qid", "asked_at", "inbuf")

    def __init__(self, proto, sock, qid, asked_at):
        self.proto, self.sock, self.qid, self.asked_at, self.inbuf = proto, sock, qid, asked_at, b""


class RealClient:
    def __init__(self, server, port):
        self.addr = (server, int(port))
        self.epoll = select.epoll()
        self.flying = {}
        self.stats = {p: {"asked": 0, "answered": 0, "wrong": 0, "refused": 0, "closed": 0,
                          "timed_out": 0, "latency_ms": []} for p in ("udp", "tcp")}

    def ask(self, proto, now):
        qid = random.getrandbits(16)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if proto == "udp" else socket.SOCK_STREAM)
        s.setblocking(False)
        q = Question(proto, s, qid, now)
        self.stats[proto]["asked"] += 1
        if proto == "udp":
            s.connect(self.addr)
            s.send(query_wire(qid))
            self.epoll.register(s.fileno(), select.EPOLLIN)
        else:
            s.connect_ex(self.addr)
            self.epoll.register(s.fileno(), select.EPOLLOUT)
        self.flying[s.fileno()] = q

    def finish(self, q, outcome, now):
        st = self.stats[q.proto]
        st[outcome] += 1
        if outcome == "answered":
            st["latency_ms"].append(round((now - q.asked_at) * 1000, 2))
        fd = q.sock.fileno()
        self.epoll.unregister(fd)
        del self.flying[fd]
        q.sock.close()

    def judge(self, q, wire, now):
        try:
            m = dns.message.from_wire(wire)
            right = (m.id == q.qid and m.rcode() == dns.rcode.NOERROR
                     and [rr.address for rrset in m.answer for rr in rrset] == [EXPECTED])
        except Exception:       # any unparsable answer is a wrong one
            right = False
        self.finish(q, "answered" if right else "wrong", now)

    def event(self, q, mask, now):
        try:
            if q.proto == "udp":
                self.judge(q, q.sock.recv(65535), now)
            elif mask & select.EPOLLOUT:
                if q.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    return self.finish(q, "refused", now)
                q.sock.send(framed(query_wire(q.qid)))
                self.epoll.modify(q.sock.fileno(), select.EPOLLIN)
            else:
                data = q.sock.recv(65535)
                if not data:
                    return self.finish(q, "closed", now)
                q.inbuf += data
                if len(q.inbuf) >= 2 and len(q.inbuf) >= 2 + struct.unpack_from("!H", q.inbuf)[0]:
                    self.judge(q, q.inbuf[2:], now)
        except OSError:
            self.finish(q, "refused" if q.proto == "udp" else "closed", now)

    def run(self, seconds, interval):
        start = time.monotonic()
        end, turn = start + seconds, 0
        while True:
            now = time.monotonic()
            if now < end and now >= start + turn * interval:
                self.ask("udp" if turn % 2 == 0 else "tcp", now)
                turn += 1
            for q in [q for q in self.flying.values() if now - q.asked_at > ANSWER_TIMEOUT]:
                self.finish(q, "timed_out", now)
            if now >= end and not self.flying:
                break
            wait = max(0.0, min(0.01, start + turn * interval - now))
            for fd, mask in self.epoll.poll(wait):
                if fd in self.flying:
                    self.event(self.flying[fd], mask, time.monotonic())
        for st in self.stats.values():
            st["latency_ms"] = percentiles(st["latency_ms"])
        return self.stats


def main(role, server, port, *args):
    if role == "attack":
        sources, seconds, counts = args
        return Attack(server, port, sources.split(","), [int(n) for n in counts.split(",")]).run(float(seconds))
    seconds, interval = args
    return RealClient(server, port).run(float(seconds), float(interval))


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
