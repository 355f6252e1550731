# `stormpy gen`'s generator and its latency histogram (included by _core.pyx). The
# loop is C (native/include/stormpy/gen/gen.h); Python opens the sockets, builds the
# requests and reads the counters.

GEN_KINDS = {"dns": SP_GEN_DNS, "echo": SP_GEN_ECHO, "http": SP_GEN_HTTP}
GEN_MAX_SOCKETS = SP_GEN_MAX_SOCKETS
GEN_MAX_REQUEST = SP_GEN_MAX_REQUEST
GEN_MAX_BATCH = SP_GEN_MAX_BATCH
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99_9", 99.9))


cdef dict _latency(const sp_latency *h):
    """The histogram's summary, in nanoseconds."""
    out = dict(count=h.total, min=h.min if h.total else 0, max=h.max,
               mean=h.sum / h.total if h.total else 0.0)
    for name, pct in PERCENTILES:
        out[name] = sp_latency_percentile(h, pct)
    return out


cdef class Histogram:
    """The generator's latency histogram on its own, to test it against exact ranks."""
    cdef sp_latency *h

    def __cinit__(self):
        self.h = sp_latency_new()
        if self.h is NULL:
            raise MemoryError()

    def record(self, values):
        for v in values:
            sp_latency_record(self.h, v)

    def percentile(self, double pct):
        return sp_latency_percentile(self.h, pct)

    def summary(self):
        return _latency(self.h)

    def __dealloc__(self):
        sp_latency_free(self.h)


cdef class GenRing:
    """A frame backend for the generator (DNS and echo over AF_PACKET, AF_XDP, or the
    memory backend for tests), and the path its frames take: path() gives the
    addresses, MACs and ports the requests' headers carry."""
    cdef sp_gen_ring cfg
    cdef object keep      # the XdpProgram the AF_XDP socket needs

    @staticmethod
    def packet(str ifname):
        cdef GenRing self = GenRing.__new__(GenRing)
        cdef sp_packet_config cfg
        cdef char err[256]
        name = ifname.encode()
        memset(&cfg, 0, sizeof(cfg))
        cfg.ifname = name
        cfg.poll_ms = 1
        cfg.fanout_group = (getpid() & 0x7fff) | 0x8000   # no server's group
        err[0] = 0
        self.cfg.io = sp_packet_io_open(&cfg, err, sizeof(err))
        if self.cfg.io is NULL:
            raise BackendError(f"{ifname}: {err.decode(errors='replace')}")
        return self

    @staticmethod
    def xdp(XdpProgram prog not None, str copy_mode="auto"):
        """An AF_XDP socket on queue 0 of prog's interface (prog steers our port to it)."""
        cdef GenRing self = GenRing.__new__(GenRing)
        cdef sp_xdp_config cfg
        cdef char err[256]
        memset(&cfg, 0, sizeof(cfg))
        cfg.copy_mode = XDP_COPY_MODES[copy_mode]
        cfg.poll_timeout_ms = 1
        err[0] = 0
        self.cfg.io = sp_xdp_io_open(prog.prog, 0, &cfg, err, sizeof(err))
        if self.cfg.io is NULL:
            raise BackendError(f"{prog.ifname}: {err.decode(errors='replace')}")
        self.keep = prog
        return self

    @staticmethod
    def memory(frames, size_t capture_max=1 << 20):
        """Replays frames as what is received; captured() is what was sent."""
        cdef GenRing self = GenRing.__new__(GenRing)
        blob = b"".join(len(f).to_bytes(2, "big") + bytes(f) for f in frames) or b"\0"
        cdef const uint8_t[:] view = blob
        self.cfg.io = sp_mem_io_open(&view[0], len(blob) if frames else 0, 1, capture_max)
        if self.cfg.io is NULL:
            raise MemoryError()
        self.keep = blob          # the memory backend replays it in place
        return self

    def path(self, src, dst, bytes src_mac, bytes dst_mac, uint16_t sport, uint16_t dport,
             uint8_t ttl=64):
        """src, dst: packed IPv4 or IPv6 addresses, this host's and the server's."""
        if len(src) != len(dst) or len(src) not in (4, 16):
            raise ValueError("src and dst must both be 4 or 16 bytes")
        self.cfg.family = 4 if len(src) == 4 else 6
        _copy_exact(self.cfg.src, src, len(src), "src")
        _copy_exact(self.cfg.dst, dst, len(dst), "dst")
        _copy_exact(self.cfg.src_mac, src_mac, 6, "src_mac")
        _copy_exact(self.cfg.dst_mac, dst_mac, 6, "dst_mac")
        self.cfg.sport, self.cfg.dport, self.cfg.ttl = sport, dport, ttl

    def captured(self):
        """The memory backend's frames sent."""
        cdef size_t n = 0, pos = 0, flen
        cdef const uint8_t *cap = sp_mem_io_captured(self.cfg.io, &n)
        out = []
        while pos + 2 <= n:
            flen = cap[pos] << 8 | cap[pos + 1]
            out.append(PyBytes_FromStringAndSize(<char *>cap + pos + 2, flen))
            pos += 2 + flen
        return out

    def io_counters(self):
        c = self.cfg.io.counters
        return dict(tx_frames=c.tx_frames, tx_ring_full=c.tx_ring_full, tx_errors=c.tx_errors)

    def close(self):
        if self.cfg.io is not NULL:
            self.cfg.io.ops.close(self.cfg.io)
            self.cfg.io = NULL
        if isinstance(self.keep, XdpProgram):
            self.keep.detach()

    def __dealloc__(self):
        if self.cfg.io is not NULL:
            self.cfg.io.ops.close(self.cfg.io)


cdef class Generator:
    """Requests of one kind ("dns", "echo" or "http") sent in turn over the given
    connected sockets, at `rate` a second (open loop) or `outstanding` at a time
    (closed loop), for `count` requests and/or `seconds`. run() blocks until done,
    with the GIL released; counters() may be read meanwhile from another thread."""
    cdef sp_gen *g
    cdef sp_gen_counters c
    cdef int *fds
    cdef uint32_t *offsets
    cdef bytes blob
    cdef object sockets
    cdef GenRing ring

    def __cinit__(self, str kind, sockets, requests, uint64_t rate=0, uint32_t outstanding=0,
                  uint32_t pipeline=1, uint64_t count=0, double seconds=0, double timeout=1.0,
                  uint32_t batch=32, GenRing ring=None):
        cdef sp_gen_config cfg
        if kind not in GEN_KINDS:
            raise ValueError(f"kind must be one of {', '.join(GEN_KINDS)}, not {kind!r}")
        if ring is not None:
            if sockets or kind == "http" or ring.cfg.io is NULL or not ring.cfg.family:
                raise ValueError("a ring carries dns or echo, with its path() set, no sockets")
        elif not sockets or len(sockets) > SP_GEN_MAX_SOCKETS:
            raise ValueError(f"from 1 to {SP_GEN_MAX_SOCKETS} sockets")
        if not requests or any(not 0 < len(r) <= SP_GEN_MAX_REQUEST for r in requests):
            raise ValueError(f"each request must have 1 to {SP_GEN_MAX_REQUEST} bytes")
        if not 1 <= batch <= SP_GEN_MAX_BATCH:
            raise ValueError(f"batch must be from 1 to {SP_GEN_MAX_BATCH}")
        if not rate and not outstanding:
            raise ValueError("give a rate (open loop) or requests outstanding (closed loop)")
        if timeout <= 0:
            raise ValueError("the timeout must be positive")
        self.sockets = list(sockets or ())
        self.ring = ring
        self.blob = b"".join(requests)
        self.fds = <int *>PyMem_Malloc(max(1, len(self.sockets)) * sizeof(int))
        self.offsets = <uint32_t *>PyMem_Malloc((len(requests) + 1) * sizeof(uint32_t))
        if self.fds is NULL or self.offsets is NULL:
            raise MemoryError()
        for i, s in enumerate(self.sockets):
            self.fds[i] = s.fileno()
        self.offsets[0] = 0
        for i, r in enumerate(requests):
            self.offsets[i + 1] = self.offsets[i] + len(r)
        memset(&cfg, 0, sizeof(cfg))
        cfg.kind = GEN_KINDS[kind]
        cfg.fds, cfg.nfds = self.fds, len(self.sockets)
        if ring is not None:
            cfg.fds, cfg.nfds, cfg.ring = NULL, 1, &ring.cfg
        cfg.requests, cfg.offsets = <const uint8_t *>self.blob, self.offsets
        cfg.nrequests = len(requests)
        cfg.rate, cfg.outstanding, cfg.pipeline = rate, outstanding, pipeline
        cfg.count, cfg.duration_ns = count, <uint64_t>(seconds * 1e9)
        cfg.timeout_ns, cfg.batch = <uint64_t>(timeout * 1e9), batch
        memset(&self.c, 0, sizeof(self.c))
        self.g = sp_gen_new(&cfg)
        if self.g is NULL:
            raise MemoryError()

    def run(self):
        cdef int err
        with nogil:
            err = sp_gen_run(self.g, &self.c)
        if err:
            import os
            raise OSError(err, os.strerror(err))

    def stop(self):
        sp_gen_stop(self.g)

    def counters(self):
        """What run() has counted so far (times in CLOCK_MONOTONIC nanoseconds)."""
        cdef sp_gen_counters c
        sp_gen_snapshot(&self.c, &c)
        return dict(sent=c.sent, received=c.received, lost=c.lost, late=c.late,
                    unmatched=c.unmatched, would_block=c.would_block,
                    send_errors=c.send_errors, refused=c.refused, window_full=c.window_full,
                    closed=c.closed, bad_replies=c.bad_replies, codes=list(c.codes),
                    started_ns=c.started_ns, send_end_ns=c.send_end_ns, ended_ns=c.ended_ns,
                    max_lag_ns=c.max_lag_ns)

    def latency(self):
        """The latencies of the replies received, in ns: count, min, mean, max and the
        percentiles p50, p90, p99, p99_9. Complete once run() has returned."""
        return _latency(sp_gen_latency(self.g))

    def __dealloc__(self):
        sp_gen_free(self.g)
        PyMem_Free(self.fds)
        PyMem_Free(self.offsets)
