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

    def __cinit__(self, str kind, sockets, requests, uint64_t rate=0, uint32_t outstanding=0,
                  uint32_t pipeline=1, uint64_t count=0, double seconds=0, double timeout=1.0,
                  uint32_t batch=32):
        cdef sp_gen_config cfg
        if kind not in GEN_KINDS:
            raise ValueError(f"kind must be one of {', '.join(GEN_KINDS)}, not {kind!r}")
        if not sockets or len(sockets) > SP_GEN_MAX_SOCKETS:
            raise ValueError(f"from 1 to {SP_GEN_MAX_SOCKETS} sockets")
        if not requests or any(not 0 < len(r) <= SP_GEN_MAX_REQUEST for r in requests):
            raise ValueError(f"each request must have 1 to {SP_GEN_MAX_REQUEST} bytes")
        if not 1 <= batch <= SP_GEN_MAX_BATCH:
            raise ValueError(f"batch must be from 1 to {SP_GEN_MAX_BATCH}")
        if not rate and not outstanding:
            raise ValueError("give a rate (open loop) or requests outstanding (closed loop)")
        if timeout <= 0:
            raise ValueError("the timeout must be positive")
        self.sockets = list(sockets)
        self.blob = b"".join(requests)
        self.fds = <int *>PyMem_Malloc(len(self.sockets) * sizeof(int))
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
