# Frame workers (included by _core.pyx): FrameWorker on a backend queue, and the
# memory backend's worker, run_memory_worker. See native/include/stormpy/engine/worker.h.

cdef _set_own_stack(sp_frame_config *cfg, dict own):
    _copy_exact(cfg.mac, own.get("mac"), 6, "mac")
    cfg.own_stack = 1
    if own.get("ipv4") is not None:
        _copy_exact(cfg.ipv4, own["ipv4"], 4, "ipv4")
        cfg.has_ipv4 = 1
    if own.get("ipv6") is not None:
        _copy_exact(cfg.ipv6, own["ipv6"], 16, "ipv6")
        cfg.has_ipv6 = 1


cdef _set_nsid(sp_dns_config *cfg, bytes nsid):
    """The NSID sent to queries asking for it (RFC 5001): nsid, at most 128 bytes;
    empty or None: none."""
    if nsid is None:
        nsid = b""
    if len(nsid) > sizeof(cfg.nsid):
        raise ValueError(f"an NSID is at most {sizeof(cfg.nsid)} bytes")
    if nsid:
        memcpy(cfg.nsid, <const char *>nsid, len(nsid))
    cfg.nsid_len = len(nsid)


cdef _set_identity(sp_frame_config *cfg, dict ident):
    """Answer only frames to this MAC and these addresses; cap replies at the MTU."""
    _copy_exact(cfg.mac, ident.get("mac"), 6, "mac")
    cfg.check_dst = 1
    v4 = [a for a in ident.get("addresses", ()) if len(a) == 4][:8]
    v6 = [a for a in ident.get("addresses", ()) if len(a) == 16][:8]
    cfg.nv4, cfg.nv6 = len(v4), len(v6)
    for k, a in enumerate(v4):
        _copy_exact(cfg.v4[k], a, 4, "ipv4")
    for k, a in enumerate(v6):
        _copy_exact(cfg.v6[k], a, 16, "ipv6")
    cfg.mtu = ident.get("mtu", 0)


cdef dict _frame_counters(const sp_frame_worker *w):
    c = w.counters
    io = w.io_counters
    dns = w.dns.counters
    pc = w.dns.precopy_counters
    rc = w.rules.counters
    return dict(rx=io.rx_frames, tx=io.tx_frames, tx_bytes=io.tx_bytes,
                tx_ring_full=io.tx_ring_full, kicks=io.kicks, rx_truncated=io.rx_truncated,
                tx_errors=io.tx_errors, tx_gathered=io.tx_gathered, tx_held=io.tx_held,
                tx_inflight_peak=io.tx_inflight_peak, batches=w.batches,
                batch_hist=[w.batch_hist[i] for i in range(SP_HIST_BUCKETS)],
                not_ours=c.not_ours, bad_source=c.bad_source, malformed=c.malformed,
                stack_replies=c.stack_replies, rrl_dropped=w.dns.rrl_dropped,
                rrl_slipped=w.dns.rrl_slipped, queries=sp_dns_queries(&dns), dropped=dns.dropped,
                truncated=dns.truncated, rcode=[dns.rcode[i] for i in range(17)],
                zone_answers=[dns.zone[i] for i in range(SP_DNS_ZONE_SLOTS)],
                precopy_hits=pc.hits, precopy_fills=pc.fills, precopy_fallbacks=pc.fallbacks,
                rule_answers=rc.rule_answers, rule_unsent=rc.rule_unsent,
                unanswered=rc.unanswered, slow_path=rc.slow_path,
                slow_replies=rc.slow_replies, handler_errors=rc.handler_errors,
                bad_replies=rc.bad_replies, **_http_counters(&w.http.counters),
                **_dns_tcp_counters(&w.dns.tcp))


cdef dict _dns_tcp_counters(const sp_dns_tcp_counters *c):
    return dict(tcp_connections=c.connections, tcp_open=c.open, tcp_refused=c.refused,
                tcp_source_limited=c.source_limited, tcp_evicted=c.evicted,
                tcp_io_timeouts=c.io_timeouts, tcp_idle_timeouts=c.idle_timeouts,
                tcp_malformed=c.malformed)


cdef class FrameWorker:
    """A run-to-completion worker on one backend queue (a NIC queue or a socket).
    Its state and counters live in the TableRef (worker `index`), so a worker made
    again on the same index, in the same process or a new one, continues them. The
    memory backend's worker (run_memory_worker) has state of its own instead."""
    cdef sp_frame_worker *w
    cdef sp_frame_worker *private   # the memory worker's own state, freed by close()
    cdef TableRef ref
    cdef bytes ifname
    cdef object keep      # what the backend needs alive (the XdpProgram)
    cdef SlowPath slow

    @staticmethod
    def socket(int fd, int index, TableRef ref not None, unsigned batch=32,
               uint16_t max_udp=1232, uint16_t port=0):
        """A worker reading UDP socket fd (bound to port, SO_RCVTIMEO set); it closes fd.
        max_udp is the largest reply."""
        cdef FrameWorker self = FrameWorker.__new__(FrameWorker)
        cdef sp_frame_worker *w = ref._worker(index)
        cdef sp_io *io = sp_sock_io_open(fd, batch, max_udp)
        if io is NULL:
            raise MemoryError()
        self._init(w, io, NULL, ref, index, port, batch, max_udp, 64, 0)
        return self

    @staticmethod
    def xdp(XdpProgram prog not None, int index, TableRef ref not None, uint16_t port,
            unsigned batch=32, str poll="block", str copy_mode="auto",
            uint16_t max_udp=1232, uint8_t ttl=64, str mode="memcpy",
            unsigned precopy_frames=PRECOPY_FRAMES, int poll_ms=100, uint32_t tx_limit=0):
        """A worker on an AF_XDP socket bound to queue `index` of prog's interface;
        mode "precopy" keeps precopy_frames reply copies in its UMEM. poll_ms: the
        longest it waits for frames (timers need it short). tx_limit: bytes in flight
        on the TX ring at most (0: no limit; native/io/tx_limit.h). poll: "block",
        "busy" or "napi" (enum sp_xdp_poll)."""
        cdef FrameWorker self = FrameWorker.__new__(FrameWorker)
        cdef sp_xdp_config cfg
        cdef char err[256]
        cdef sp_frame_worker *w = ref._worker(index)
        if prog.prog is NULL:
            raise ValueError("the XDP program is detached")
        precopy = _check_mode(mode)
        memset(&cfg, 0, sizeof(cfg))
        cfg.pool_frames = precopy_frames if precopy else 0
        cfg.copy_mode = XDP_COPY_MODES[copy_mode]
        cfg.poll = XDP_POLLS[poll]
        cfg.poll_timeout_ms = poll_ms
        cfg.tx_limit = tx_limit
        err[0] = 0
        cdef sp_io *io = sp_xdp_io_open(prog.prog, index, &cfg, err, sizeof(err))
        self.keep = prog
        self._init(w, io, err, ref, index, port, batch, max_udp, ttl,
                   precopy_frames if precopy else 0)
        return self

    def __dealloc__(self):
        self.close()

    @staticmethod
    def packet(str ifname, int index, TableRef ref not None, uint16_t port, unsigned batch=32,
               uint16_t fanout_group=1, bint busy_poll=False, uint16_t max_udp=1232,
               uint8_t ttl=64, str mode="memcpy", unsigned precopy_frames=PRECOPY_FRAMES,
               int poll_ms=100):
        """A worker on an AF_PACKET socket that joins fanout_group on ifname; mode
        "precopy" opens it without a TX ring and sends with sendmmsg (io/packet.h).
        poll_ms: the longest it waits for a frame."""
        cdef FrameWorker self = FrameWorker.__new__(FrameWorker)
        cdef sp_packet_config cfg
        cdef char err[256]
        cdef sp_frame_worker *w = ref._worker(index)
        precopy = _check_mode(mode)
        self.ifname = ifname.encode()
        memset(&cfg, 0, sizeof(cfg))
        cfg.ifname = self.ifname
        cfg.precopy = precopy
        cfg.fanout_group = fanout_group
        cfg.busy_poll = busy_poll
        cfg.poll_ms = poll_ms
        err[0] = 0
        cdef sp_io *io = sp_packet_io_open(&cfg, err, sizeof(err))
        self._init(w, io, err, ref, index, port, batch, max_udp, ttl,
                   precopy_frames if precopy else 0)
        return self

    @staticmethod
    def netmap(str ifname, int index, TableRef ref not None, uint16_t port, unsigned batch=32,
               bint busy_poll=False, uint16_t max_udp=1232, uint8_t ttl=64, own=None,
               str mode="memcpy", unsigned precopy_frames=PRECOPY_FRAMES):
        """A worker on NIC ring pair `index` of ifname, through netmap. netmap takes the
        interface from the kernel, so `own` (mac/ipv4/ipv6) is answered for here.
        mode "precopy" keeps precopy_frames copies in netmap extra buffers, swapped into TX slots."""
        cdef FrameWorker self = FrameWorker.__new__(FrameWorker)
        cdef sp_netmap_config cfg
        cdef char err[256]
        cdef sp_frame_worker *w = ref._worker(index)
        precopy = _check_mode(mode)
        self.ifname = ifname.encode()
        memset(&cfg, 0, sizeof(cfg))
        cfg.ifname, cfg.queue, cfg.busy_poll, cfg.poll_ms = self.ifname, index, busy_poll, 100
        cfg.pool_frames = precopy_frames if precopy else 0
        err[0] = 0
        cdef sp_io *io = sp_netmap_io_open(&cfg, err, sizeof(err))
        self._init(w, io, err, ref, index, port, batch, max_udp, ttl,
                   precopy_frames if precopy else 0)
        if own:
            _set_own_stack(&self.w.cfg, own)
        return self

    cdef _init(self, sp_frame_worker *w, sp_io *io, const char *err, TableRef ref, int index,
               uint16_t port, unsigned batch, uint16_t max_udp, uint8_t ttl,
               unsigned precopy_frames):
        """Set worker state w up on io, which a backend's open call just returned (NULL:
        err says why); in precopy mode when precopy_frames is not 0."""
        cdef sp_frame_worker_config cfg
        cdef char why[256]
        if io is NULL:
            raise BackendError(err.decode(errors="replace"))
        memset(&cfg, 0, sizeof(cfg))
        cfg.io, cfg.ref, cfg.index, cfg.batch = io, ref.ref, index, batch
        cfg.port, cfg.ttl, cfg.app = port, ttl, SP_APP_DNS
        cfg.dns.max_udp, cfg.dns.rrl, cfg.dns.precopy_frames = max_udp, ref.rrl, precopy_frames
        why[0] = 0
        if sp_frame_worker_init(w, &cfg, why, sizeof(why)) != 0:
            raise BackendError(why.decode(errors="replace"))
        self.w, self.ref = w, ref

    @staticmethod
    def http_socket(int fd, int index, TableRef ref not None, uint32_t max_connections=1024,
                    uint32_t request_timeout_ms=10000, uint32_t idle_timeout_ms=30000,
                    uint32_t send_timeout_ms=30000):
        """An HTTP worker on listening TCP socket fd (the kernel's TCP; it closes fd),
        answering from the site in ref's table (app/http/stream.h)."""
        cdef FrameWorker self = FrameWorker.__new__(FrameWorker)
        cdef sp_frame_worker *w = ref._worker(index)
        cdef sp_frame_worker_config cfg
        cdef char why[256]
        memset(&cfg, 0, sizeof(cfg))
        cfg.ref, cfg.index, cfg.app = ref.ref, index, SP_APP_HTTP
        cfg.http.listen_fd, cfg.http.max_connections = fd, max_connections
        cfg.http.request_timeout_ms = request_timeout_ms
        cfg.http.idle_timeout_ms = idle_timeout_ms
        cfg.http.send_timeout_ms = send_timeout_ms
        why[0] = 0
        if sp_frame_worker_init(w, &cfg, why, sizeof(why)) != 0:
            raise BackendError(why.decode(errors="replace"))
        self.w, self.ref = w, ref
        return self

    @staticmethod
    def dns_tcp(int fd, int index, TableRef ref not None, uint32_t max_connections=1024,
                uint32_t max_per_source=0, uint32_t io_timeout_ms=500,
                uint32_t idle_timeout_ms=10000, uint16_t max_udp=1232, int handoff_fd=0,
                bytes nsid=b""):
        """A DNS-over-TCP worker on listening socket fd (the kernel's TCP; it closes fd),
        answering from ref's table (app/dns/stream.h); AXFR and IXFR connections go up
        handoff_fd when it is not 0 (app/dns/handoff.h). nsid: as set_nsid()."""
        cdef FrameWorker self = FrameWorker.__new__(FrameWorker)
        cdef sp_frame_worker *w = ref._worker(index)
        cdef sp_frame_worker_config cfg
        cdef char why[256]
        memset(&cfg, 0, sizeof(cfg))
        cfg.ref, cfg.index, cfg.app = ref.ref, index, SP_APP_DNS_TCP
        cfg.dns_tcp.listen_fd, cfg.dns_tcp.max_connections = fd, max_connections
        cfg.dns_tcp.max_per_source, cfg.dns_tcp.io_timeout_ms = max_per_source, io_timeout_ms
        cfg.dns_tcp.idle_timeout_ms, cfg.dns_tcp.dns.max_udp = idle_timeout_ms, max_udp
        cfg.dns_tcp.dns.handoff_fd = handoff_fd
        _set_nsid(&cfg.dns_tcp.dns, nsid)
        why[0] = 0
        if sp_frame_worker_init(w, &cfg, why, sizeof(why)) != 0:
            raise BackendError(why.decode(errors="replace"))
        self.w, self.ref = w, ref
        return self

    def set_http_ring(self, uint32_t max_connections=1024, uint32_t request_timeout_ms=10000,
                      uint32_t idle_timeout_ms=30000, bint gather=True):
        """Serve HTTP from the table's site with stormpy's own TCP on this worker's
        rings (app/http/ring.h) instead of DNS. gather: send up to 64 KB at a time for
        the kernel or the NIC to cut into segments, where the backend can (io.h)."""
        cdef sp_http_ring_config cfg
        if self.w is NULL:
            raise ValueError("worker closed")
        memset(&cfg, 0, sizeof(cfg))
        cfg.max_connections = max_connections
        cfg.request_timeout_ms = request_timeout_ms
        cfg.idle_timeout_ms = idle_timeout_ms
        cfg.no_gather = not gather
        if sp_http_worker_init_ring(&self.w.http, &cfg) != 0:
            raise MemoryError()
        sp_http_ring_set_pool(self.w.http.ring, self.w.dns.precopy)
        self.w.app = SP_APP_HTTP

    def set_dns_handoff(self, int fd, str local_address=None):
        """Send NOTIFY (and UPDATE, IXFR over UDP) up Unix datagram socket fd to the
        server process instead of answering NOTAUTH (app/dns/handoff.h); local_address:
        the worker's socket's own, sent up with each, where it is not a wildcard."""
        import ipaddress
        if self.w is NULL:
            raise ValueError("worker closed")
        self.w.dns.cfg.handoff_fd = fd
        memset(self.w.dns.cfg.handoff_local, 0, 16)
        if local_address:
            packed = ipaddress.ip_address(local_address).packed
            _copy_exact(self.w.dns.cfg.handoff_local, packed, len(packed), "local address")

    def set_nsid(self, bytes nsid):
        """Send nsid (at most 128 bytes; empty: none) to queries asking for the server's
        NSID (RFC 5001)."""
        if self.w is NULL:
            raise ValueError("worker closed")
        _set_nsid(&self.w.dns.cfg, nsid)

    def set_identity(self, dict identity):
        """Answer only frames to identity's mac and addresses; cap replies at its mtu."""
        if self.w is not NULL:
            _set_identity(&self.w.cfg, identity)

    def set_responder(self, handler=None, bint all_frames=False, str local_address=None):
        """Answer from the table's rules (a custom responder) instead of serve-dns;
        handler(packets) gets, once per batch, what no rule answered (all_frames: also
        frames that are not UDP to the port). local_address: what Packet.dst says on
        a socket."""
        if self.w is NULL:
            raise ValueError("worker closed")
        if self.w.dns.precopy is not NULL:
            raise ValueError("a responder runs in memcpy mode")
        self.w.app = SP_APP_RULES
        sp_rules_worker_init(&self.w.rules, all_frames)
        if handler is not None:
            self.slow = SlowPath(handler, local_address)
            self.slow.attach(self.w)

    def set_precopy_min(self, size_t nbytes):
        """In precopy mode, render DNS answers shorter than nbytes as memcpy mode does
        (0: copy every answer that can be copied). A no-op in memcpy mode."""
        if self.w is not NULL and self.w.dns.precopy is not NULL:
            sp_precopy_set_min_len(self.w.dns.precopy, nbytes)

    def set_tx_flush_us(self, uint64_t us):
        """Kick TX at most every `us` microseconds under load (0: every batch)."""
        if self.w is not NULL:
            self.w.tx_flush_ns = us * 1000

    def run(self):
        """Serve until stopped; OSError when the backend fails."""
        cdef int err
        if self.w is NULL:
            raise ValueError("worker closed")
        with nogil:
            sp_frame_worker_run(self.w)
        err = self.w.io.error if self.w.io is not NULL else 0
        if err:
            import os
            raise OSError(err, os.strerror(err))

    def stop(self):
        if self.w is not NULL:
            sp_frame_worker_stop(self.w)

    def counters(self):
        if self.w is NULL:
            return {}
        return _frame_counters(self.w)

    def close(self):
        """Close the backend; only once run() has returned. The counters stay (but
        not the memory worker's, which go with it)."""
        if self.w is not NULL:
            self.w.slow_path = NULL
            self.w.slow_ctx = NULL
            sp_frame_worker_close(self.w)
            self.w = NULL
        PyMem_Free(self.private)
        self.private = NULL


def run_memory_worker(TableRef ref not None, frames, int worker=0, uint16_t port=53,
                      unsigned batch=32, uint64_t rounds=1, uint16_t max_udp=1232,
                      uint8_t ttl=64, size_t capture_max=1 << 24, own=None,
                      uint64_t tx_flush_us=0, identity=None, str mode="memcpy",
                      unsigned precopy_frames=PRECOPY_FRAMES, precopy_min=None,
                      bint responder=False, handler=None, bint all_frames=False,
                      TapRegion tap=None, bint l4_verified=False, bytes nsid=b""):
    """Run one frame worker over the memory backend: `frames` (Ethernet frames, bytes)
    replayed `rounds` times through the real worker loop, reading ref's table from
    slot `worker`. `own`, a dict of mac/ipv4/ipv6 (packed bytes), answers ARP, ICMP
    and NDP for them as on an interface stormpy owns. `mode` "precopy" sends from a
    pool of precopy_frames ready-made copies, for DNS answers of precopy_min bytes
    or more (default PRECOPY_MIN_BYTES; 0: every answer). `responder` answers from the table's
    rules, with `handler` for the rest (all_frames: also what is not UDP to port).
    `tap`: its ring `worker` gets the frames while a tap is attached (the benchmarks'
    cost of a tap). `l4_verified`: every frame marked as a NIC marks those whose UDP
    checksum it verified (the cost with checksum offload). `nsid`: as
    FrameWorker.set_nsid(). Returns (reply frames captured, counters)."""
    cdef FrameWorker fw = FrameWorker.__new__(FrameWorker)
    cdef sp_io *io
    cdef size_t n = 0, pos = 0, flen
    cdef const uint8_t *cap
    ref._worker(worker)
    precopy = _check_mode(mode)
    if responder and precopy:
        raise ValueError("a responder runs in memcpy mode")
    blob = b"".join(len(f).to_bytes(2, "big") + bytes(f) for f in frames)
    if any(len(f) > 65535 for f in frames):
        raise ValueError("a frame longer than 65535 bytes")
    cdef const uint8_t[:] view = blob if blob else b"\0"
    io = sp_mem_io_open(&view[0], len(blob), rounds, capture_max)
    if io is not NULL:
        sp_mem_io_set_l4_verified(io, l4_verified)
    fw.private = <sp_frame_worker *>PyMem_Malloc(sizeof(sp_frame_worker))
    if io is NULL or fw.private is NULL:
        if io is not NULL:
            io.ops.close(io)
        raise MemoryError()
    memset(fw.private, 0, sizeof(sp_frame_worker))
    try:
        fw._init(fw.private, io, NULL, ref, worker, port, batch, max_udp, ttl,
                   precopy_frames if precopy else 0)
        fw.set_tx_flush_us(tx_flush_us)
        fw.set_nsid(nsid)
        if precopy_min is not None:
            fw.set_precopy_min(precopy_min)
        if tap is not None:
            fw.w.tap = tap.r
        if identity:
            fw.set_identity(identity)
        if own:
            _set_own_stack(&fw.w.cfg, own)
        if responder:
            fw.set_responder(handler, all_frames)
        fw.run()
        cap = sp_mem_io_captured(fw.w.io, &n)
        replies = []
        while pos + 2 <= n:
            flen = cap[pos] << 8 | cap[pos + 1]
            replies.append(PyBytes_FromStringAndSize(<char *>cap + pos + 2, flen))
            pos += 2 + flen
        return replies, fw.counters()
    finally:
        fw.close()
