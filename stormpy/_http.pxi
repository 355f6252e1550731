# HTTP from a compiled site (included by _core.pyx): the answer to request bytes,
# for tests and tools, and the counters of HTTP workers. See
# native/include/stormpy/app/http/.

HTTP_SITE_MAGIC = SP_HTTP_SITE_MAGIC
HTTP_ERRORS = SP_HTTP_ERRORS
HTTP_ENTRY_SIZE = sizeof(sp_http_entry)
HTTP_SITE_SIZE = sizeof(sp_http_site)      # the header, padded to where the entries start
HTTP_SUM_STRIDE = SP_HTTP_SUM_STRIDE
HTTP_QUERY_MAX = SP_HTTP_QUERY_MAX        # longer: a redirect answers 414


cdef dict _http_counters(const sp_http_counters *c):
    return dict(http_connections=c.connections, http_requests=c.requests,
                http_status=[c.status[i] for i in range(6)], http_bytes=c.bytes,
                http_timeouts=c.timeouts, http_evicted=c.evicted, http_refused=c.refused,
                http_open=c.open, http_retransmits=c.retransmits,
                http_cookies_sent=c.cookies_sent, http_cookies_accepted=c.cookies_accepted)


def http_date(int64_t t):
    """The IMF-fixdate of t (seconds since the epoch), as the server writes it."""
    cdef uint8_t out[SP_HTTP_DATE_LEN]
    sp_http_format_date(t, out)
    return PyBytes_FromStringAndSize(<char *>out, SP_HTTP_DATE_LEN)


def http_parse_date(const uint8_t[:] s):
    """An HTTP-date in seconds since the epoch, or None."""
    cdef int64_t t = sp_http_parse_date(&s[0] if len(s) else NULL, len(s))
    return None if t < 0 else t


def http_answer(Table table not None, const uint8_t[:] data, int64_t now=0, size_t segment=0):
    """Answer the first request in data from the table's site, as a server would:
    (bytes consumed, status, whether the connection closes, the answer's bytes), or
    None while the request is incomplete. With segment, the answer cut into payloads
    of that many bytes as the own TCP cuts them: [(payload, its partial checksum from
    the stored sums)]."""
    cdef sp_http_request *req
    cdef sp_http_reply reply
    cdef sp_http_date date
    cdef const sp_http_site *site
    cdef size_t used
    if table.t is NULL:
        raise ValueError("table already published")
    site = sp_http_site_of(table.t)
    if site is NULL:
        raise ValueError("the table holds no site")
    req = <sp_http_request *>PyMem_Malloc(sizeof(sp_http_request))
    if req is NULL:
        raise MemoryError()
    try:
        used = sp_http_parse_request(&data[0] if len(data) else NULL, len(data), req)
        if used == 0:
            return None
        sp_http_date_set(&date, now)
        sp_http_answer(table.t, site, req, &date, &reply)
        if segment:
            return [_segment(&reply, off, segment) for off in range(0, reply.len, segment)]
        out = b"".join(PyBytes_FromStringAndSize(<char *>reply.iov[i].iov_base,
                                                 reply.iov[i].iov_len)
                       for i in range(reply.niov))
        return used, reply.status, bool(reply.close), out
    finally:
        PyMem_Free(req)


cdef tuple _segment(const sp_http_reply *reply, uint64_t off, size_t segment):
    n = min(segment, reply.len - off)
    buf = bytearray(n)
    cdef uint8_t[:] view = buf
    cdef uint32_t s = sp_http_reply_copy(reply, off, n, &view[0] if n else NULL)
    return bytes(buf), s


cdef class HttpRing:
    """stormpy's own TCP (app/http/ring.h) stepped by hand, for tests: the site in
    `table` served on `port`; step(frames) runs one batch (the frames, then every
    connection with something to do) and returns the frames it sent. Time is the
    real clock, as in a worker. own (mac/ipv4/ipv6, packed): the interface is
    stormpy's (netmap), so ARP, ICMP echo and NDP for them are answered too."""
    cdef sp_http_ring *r
    cdef Table table
    cdef sp_frame_config cfg
    cdef sp_table_pins *pins
    cdef sp_http_counters k
    cdef sp_frame_counters fc
    cdef bytearray txmem

    def __cinit__(self, Table table not None, uint16_t port=80, uint32_t max_connections=64,
                  uint32_t request_timeout_ms=10000, uint32_t idle_timeout_ms=30000,
                  uint16_t mtu=1500, dict own=None):
        cdef sp_http_ring_config rc
        if table.t is NULL or sp_http_site_of(table.t) is NULL:
            raise ValueError("the table holds no site")
        memset(&rc, 0, sizeof(rc))
        rc.max_connections, rc.request_timeout_ms = max_connections, request_timeout_ms
        rc.idle_timeout_ms = idle_timeout_ms
        memset(&self.cfg, 0, sizeof(self.cfg))
        self.cfg.port, self.cfg.ttl, self.cfg.mtu = port, 64, mtu
        if own:
            _set_own_stack(&self.cfg, own)
        memset(&self.k, 0, sizeof(self.k))
        memset(&self.fc, 0, sizeof(self.fc))
        self.pins = <sp_table_pins *>PyMem_Malloc(sizeof(sp_table_pins))
        self.r = sp_http_ring_open(&rc)
        if self.r is NULL or self.pins is NULL:
            raise MemoryError()
        memset(self.pins, 0, sizeof(sp_table_pins))
        self.table = table
        self.txmem = bytearray(SP_IO_BATCH_MAX * 2048)

    def __dealloc__(self):
        sp_http_ring_close(self.r)
        PyMem_Free(self.pins)

    def step(self, frames=()):
        cdef sp_frame rx[SP_IO_BATCH_MAX]
        cdef sp_frame tx[SP_IO_BATCH_MAX]
        cdef sp_batch b
        cdef uint8_t[:] mem = self.txmem
        cdef unsigned i
        frames = [bytes(f) for f in frames]
        if len(frames) > SP_IO_BATCH_MAX:
            raise ValueError(f"at most {SP_IO_BATCH_MAX} frames a step")
        memset(&b, 0, sizeof(b))
        for i in range(len(frames)):
            rx[i].data = <uint8_t *><const uint8_t *>frames[i]
            rx[i].len = rx[i].cap = len(frames[i])
        for i in range(SP_IO_BATCH_MAX):
            tx[i].data = &mem[i * 2048]
            tx[i].cap = 2048
            tx[i].len = 0
        b.rx, b.n, b.tx, b.reserved = rx, len(frames), tx, SP_IO_BATCH_MAX
        b.cfg, b.counters, b.out = &self.cfg, &self.fc, tx
        sp_http_ring_batch(self.r, self.table.t, 1, self.pins, &b, &self.k)
        return [PyBytes_FromStringAndSize(<char *>tx[i].data, tx[i].len) for i in range(b.sent)]

    def counters(self):
        return _http_counters(&self.k)
