# The slow path of a custom responder (included by _core.pyx): frames no rule
# answered, handed to a Python callable once per batch, and its replies written
# into the batch's TX buffers. See native/include/stormpy/app/rules/rules.h.
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.buffer cimport PyBUF_READ

cdef extern from "arpa/inet.h" nogil:
    const char *inet_ntop(int af, const void *src, char *dst, unsigned size)

import logging

_log = logging.getLogger("stormpy")
ERROR_LOG_SECONDS = 10.0      # a handler failing on every batch logs once per this


cdef str _address(int family, const uint8_t *packed):
    cdef char text[48]
    if inet_ntop(2 if family == 4 else 10, packed, text, sizeof(text)) is NULL:
        return None
    return text.decode("ascii")


@cython.freelist(256)   # SP_IO_BATCH_MAX: a batch of packets never allocates
@cython.final
cdef class Packet:
    """A packet that no fast-path rule answered, as the worker received it: an
    Ethernet frame from a ring, or a UDP payload from a socket. Its buffers are the
    ring's own memory, so a packet is valid only during the handler call that got
    it (afterwards its attributes raise ValueError, and views taken from it may
    show other packets)."""
    cdef const sp_slow_packet *p
    cdef SlowPath owner
    cdef uint64_t batch

    cdef inline const sp_slow_packet *_live(self) except NULL:
        if self.owner is None or self.owner.batch != self.batch or not self.owner.calling:
            raise ValueError("a packet is only valid during the handler call that received it")
        return self.p

    @property
    def data(self):
        """The whole frame (a socket: the UDP payload), as a read-only memoryview."""
        cdef const sp_slow_packet *p = self._live()
        return PyMemoryView_FromMemory(<char *>p.frame.data, p.frame.len, PyBUF_READ)

    @property
    def payload(self):
        """The UDP payload as a read-only memoryview; None for frames that are not UDP
        to the served port (ARP, ICMP, ...)."""
        cdef const sp_slow_packet *p = self._live()
        if not p.udp:
            return None
        if self.owner.datagrams:
            return PyMemoryView_FromMemory(<char *>p.frame.data, p.frame.len, PyBUF_READ)
        return PyMemoryView_FromMemory(<char *>p.frame.data + p.fq.l2 + p.fq.u.payload_off,
                                       p.fq.u.payload_len, PyBUF_READ)

    @property
    def udp(self):
        """True for UDP to the served port: (packet, payload) replies work for it."""
        return bool(self._live().udp)

    @property
    def family(self):
        """4 or 6 for UDP, 0 otherwise."""
        cdef const sp_slow_packet *p = self._live()
        if not p.udp:
            return 0
        return p.frame.src_family if self.owner.datagrams else p.fq.u.family

    @property
    def src(self):
        """The sender's IP address as text (None when not UDP)."""
        cdef const sp_slow_packet *p = self._live()
        if not p.udp:
            return None
        if self.owner.datagrams:
            return _address(p.frame.src_family, p.frame.src)
        return _address(p.fq.u.family, p.fq.u.src)

    @property
    def dst(self):
        """The address the packet was sent to (a socket bound to one address: that one)."""
        cdef const sp_slow_packet *p = self._live()
        if not p.udp:
            return None
        if self.owner.datagrams:
            if p.frame.dst is not NULL:     # a wildcard socket: the query's own destination
                return _address(p.frame.src_family, p.frame.dst)
            return self.owner.local_address
        return _address(p.fq.u.family, p.fq.u.dst)

    @property
    def sport(self):
        cdef const sp_slow_packet *p = self._live()
        if not p.udp:
            return 0
        return p.frame.src_port if self.owner.datagrams else p.fq.u.sport

    @property
    def dport(self):
        cdef const sp_slow_packet *p = self._live()
        if not p.udp:
            return 0
        return p.dport if self.owner.datagrams else p.fq.u.dport

    def __repr__(self):
        try:
            p = self._live()
        except ValueError:
            return "<stormpy.Packet (expired)>"
        if not p.udp:
            return f"<stormpy.Packet frame of {p.frame.len} bytes>"
        return (f"<stormpy.Packet udp {self.src}:{self.sport} -> {self.dst}:{self.dport}, "
                f"{len(self.payload)} bytes>")


cdef class SlowPath:
    """Runs a responder's handler for one worker: called by the C loop, with the
    GIL, once per batch that has frames no rule answered."""
    cdef object handler
    cdef sp_frame_worker *w
    cdef bint datagrams
    cdef readonly bint calling
    cdef readonly uint64_t batch
    cdef str local_address
    cdef double last_logged, last_bad_logged
    cdef uint64_t unlogged

    def __cinit__(self, handler, str local_address=None):
        self.handler = handler
        self.local_address = local_address
        self.last_logged = self.last_bad_logged = -1e9

    cdef void attach(self, sp_frame_worker *w):
        self.w = w
        self.datagrams = w.io.datagrams != 0
        w.slow_path = _slow_path_call
        w.slow_ctx = <void *>self

    cdef unsigned run(self, const sp_slow_packet *pkts, unsigned n, sp_frame *tx, unsigned ntx):
        cdef Packet pkt
        cdef unsigned used = 0, read = 0, limit, i
        cdef list packets = PyList_New(n)
        self.batch += 1
        for i in range(n):
            pkt = Packet.__new__(Packet)
            pkt.p = &pkts[i]
            pkt.owner = self
            pkt.batch = self.batch
            Py_INCREF(pkt)
            PyList_SET_ITEM(packets, i, pkt)
        self.calling = True
        try:
            result = self.handler(packets)
            if result is not None:
                # A generator's code runs here, still in the call. Reading stops when
                # the TX ring is full, or after more items than any batch needs: an
                # endless one would hold the worker (and its C answers) for ever.
                limit = 4 * (ntx + n) + 64
                for item in result:
                    if used == ntx:          # each reply left is one the ring had no room for
                        left = len(result) - read if hasattr(result, "__len__") else 1
                        self.w.io.counters.tx_ring_full += left
                        break
                    if read == limit:
                        self.say(f"more than {limit} replies to {n} packets: the rest are "
                                 f"not read")
                        break
                    read += 1
                    used += self.write(item, &tx[used])
        except BaseException:            # sys.exit() too: the worker is not the handler's
            self.w.rules.counters.handler_errors += 1
            self.log_error()
        finally:
            self.calling = False
        self.w.rules.counters.slow_replies += used
        return used

    cdef unsigned write(self, item, sp_frame *tx):
        """One reply into tx: (packet, payload) over UDP, or a whole frame; 1 if sent."""
        cdef Py_buffer view
        cdef Py_ssize_t length
        cdef bint sent
        cdef Packet pkt
        reply = item
        if type(item) is tuple and len(<tuple>item) == 2:
            if not isinstance(item[0], Packet):
                return self.bad(f"a pair whose first item is a {type(item[0]).__name__}, "
                                f"not a Packet")
            pkt = item[0]
            if pkt.owner is not self or pkt.batch != self.batch:
                return self.bad("a reply to a packet of an earlier batch")
            reply = item[1]
        else:
            pkt = None
        try:
            PyObject_GetBuffer(reply, &view, PyBUF_SIMPLE)
        except TypeError:
            return self.bad(f"a {type(reply).__name__}; a reply is (packet, payload bytes), "
                            f"or a whole frame's bytes")
        length = view.len
        try:
            if pkt is not None:
                sent = sp_responder_reply(&self.w.cfg, self.datagrams, pkt.p,
                                          <const uint8_t *>view.buf, <size_t>view.len, tx)
            else:
                sent = sp_responder_raw(&self.w.cfg, self.datagrams, <const uint8_t *>view.buf,
                                        <size_t>view.len, tx) != 0
        finally:
            PyBuffer_Release(&view)
        if sent:
            return 1
        if pkt is not None and not pkt.p.udp:
            return self.bad("a payload for a frame that is not UDP (reply with a whole frame)")
        if pkt is not None:
            return self.bad(f"a payload of {length} bytes, more than one datagram here "
                            f"carries (the MTU, or a ring frame's room)")
        if self.datagrams:
            return self.bad("a whole frame on the socket backend, which sends payloads: "
                            "reply (packet, payload)")
        return self.bad(f"a frame of {length} bytes: shorter than an Ethernet header or "
                        f"longer than the MTU")

    cdef unsigned bad(self, str why):
        """A reply not sent: counted, and said."""
        self.w.rules.counters.bad_replies += 1
        self.say(f"a reply not sent: {why} (bad_replies counts them)")
        return 0

    cdef void say(self, str what):
        """What went wrong with a handler's replies, in one line at most every
        ERROR_LOG_SECONDS (a handler that errs once errs on every batch)."""
        now = time.monotonic()
        if now - self.last_bad_logged >= ERROR_LOG_SECONDS:
            self.last_bad_logged = now
            _log.warning("responder handler %s: %s",
                         getattr(self.handler, "__qualname__", self.handler), what)

    cdef void log_error(self):
        now = time.monotonic()
        if now - self.last_logged < ERROR_LOG_SECONDS:
            self.unlogged += 1
            return
        more = f" ({self.unlogged} more failed batches since the last report)" if self.unlogged else ""
        self.unlogged = 0
        self.last_logged = now
        _log.exception("responder handler %s raised; replies it had not returned yet are not "
                       "sent, and the worker goes on%s",
                       getattr(self.handler, "__qualname__", self.handler), more)


cdef unsigned _slow_path_call(void *ctx, const sp_slow_packet *p, unsigned n, sp_frame *tx,
                              unsigned ntx) noexcept with gil:
    try:
        return (<SlowPath>ctx).run(p, n, tx, ntx)
    except BaseException:         # run() catches the handler's errors; this is ours
        return 0
