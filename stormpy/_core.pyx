# cython: language_level=3, boundscheck=False, wraparound=False
"""The native core seen from Python: response tables, DNS answering, socket workers.

Everything per packet happens in C with the GIL released; Python builds tables and
starts, stops and reloads workers.
"""
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int64_t, uintptr_t
from libc.string cimport memset
from libc.errno cimport errno
from posix.unistd cimport getpid
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Malloc, PyMem_Free

from stormpy.includes.core cimport *

import time

from stormpy.errors import BackendError

include "_slowpath.pxi"

PATCH_COPY = SP_PATCH_COPY
PATCH_COPY_BITS = SP_PATCH_COPY_BITS
PATCH_INSERT = SP_PATCH_INSERT
DNS_EXACT = SP_DNS_EXACT
DNS_OTHER = SP_DNS_OTHER
DNS_BELOW = SP_DNS_BELOW
DNS_BELOW_OTHER = SP_DNS_BELOW_OTHER
RESPONSE_SLOW_PATH = SP_RESPONSE_SLOW_PATH


def rule_tag(unsigned index):
    """The table tag namespace of rule `index`'s keys."""
    return sp_rule_tag(index)
MAX_WORKERS = SP_MAX_WORKERS - 1   # the last slot belongs to the control plane

# Backends built into this extension (AF_XDP and netmap only when their headers
# were found at build time).
COMPILED_BACKENDS = (("socket", "memory", "packet") + (("xdp",) if sp_have_xdp() else ()) +
                     (("netmap",) if sp_have_netmap() else ()))
XDP_COPY_MODES = {"auto": 0, "copy": 1, "zerocopy": 2}
MODES = ("memcpy", "precopy")   # how a frame worker sends replies (see precopy.h)
PRECOPY_FRAMES = SP_PRECOPY_DEFAULT_FRAMES


def _check_mode(mode):
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode == "precopy"


cdef _set_precopy(sp_frame_worker *w, unsigned frames):
    """Switch a new worker to precopy mode; the backend lends the pool its frames."""
    cdef char err[256]
    err[0] = 0
    if sp_frame_worker_precopy(w, frames, err, sizeof(err)) != 0:
        raise BackendError(err.decode(errors="replace"))


cdef class TableBuilder:
    """Collects prepackaged responses and their keys; finish() makes a Table."""
    cdef sp_table_builder *b

    def __cinit__(self):
        self.b = sp_table_builder_new()
        if self.b is NULL:
            raise MemoryError()

    def __dealloc__(self):
        sp_table_builder_free(self.b)

    def add_response(self, const uint8_t[:] data, patches=(), uint32_t user=0):
        """Add a response with patches [(op, field, dst, src, len, mask)]; returns its index."""
        cdef sp_patch p[64]
        cdef int64_t idx
        if self.b is NULL:
            raise ValueError("builder already finished")
        if len(patches) > 64:
            raise ValueError("at most 64 patches per response")
        memset(p, 0, sizeof(p))
        for i, (op, field, dst, src, length, mask) in enumerate(patches):
            p[i].op, p[i].field, p[i].dst, p[i].src, p[i].len, p[i].mask = op, field, dst, src, length, mask
        idx = sp_table_add_response(self.b, &data[0] if len(data) else NULL, <uint32_t>len(data),
                                    p, <uint16_t>len(patches), user)
        if idx < 0:
            raise ValueError("response rejected: too long or an invalid patch list")
        return idx

    def set_rules(self, rules, bint dns=False):
        """Attach a custom responder's rule list (rules.h) as the table's program.
        rules: dicts with match (bytes), match_off, min_len, keyed, key_off, key_end,
        stops (bytes), echo_off, echo_end, response (index or None: slow path)."""
        cdef size_t n = len(rules)
        cdef size_t size
        cdef sp_rules *prog
        cdef sp_rule *r
        if self.b is NULL:
            raise ValueError("builder already finished")
        if n > SP_RULES_MAX:
            raise ValueError(f"at most {SP_RULES_MAX} rules")
        size = sizeof(sp_rules) + n * sizeof(sp_rule)    # rule[] is a flexible array
        prog = <sp_rules *>PyMem_Malloc(size)
        if prog is NULL:
            raise MemoryError()
        try:
            memset(prog, 0, size)
            prog.magic, prog.nrules, prog.dns = SP_RULES_MAGIC, n, dns
            for i, spec in enumerate(rules):
                r = &prog.rule[i]
                match, stops = bytes(spec.get("match", b"")), bytes(spec.get("stops", b""))
                if len(match) > SP_RULE_MATCH_MAX or len(stops) > SP_RULE_STOPS:
                    raise ValueError(f"at most {SP_RULE_MATCH_MAX} match bytes and "
                                     f"{SP_RULE_STOPS} key stop bytes")
                r.match_len, r.nstops = len(match), len(stops)
                for k in range(len(match)):
                    r.match[k] = match[k]
                for k in range(len(stops)):
                    r.stops[k] = stops[k]
                r.match_off, r.min_len = spec.get("match_off", 0), spec.get("min_len", 0)
                r.keyed = spec.get("keyed", False)
                r.key_off, r.key_end = spec.get("key_off", 0), spec.get("key_end", SP_RULE_TO_END)
                r.echo_off, r.echo_end = spec.get("echo_off", 0), spec.get("echo_end", SP_RULE_TO_END)
                response = spec.get("response")
                r.response = SP_RULE_NO_RESPONSE if response is None else response
                r.tag = sp_rule_tag(i)
            if sp_table_set_program(self.b, prog, <uint32_t>size) != 0:
                raise ValueError("the table already has a rule list")
        finally:
            PyMem_Free(prog)

    def add_key(self, uint64_t tag, const uint8_t[:] key, uint32_t response):
        if self.b is NULL:
            raise ValueError("builder already finished")
        if sp_table_add_key(self.b, tag, &key[0] if len(key) else NULL,
                            <uint32_t>len(key), response) < 0:
            raise ValueError("key rejected: unknown response or key too long")

    def finish(self):
        cdef Table t = Table.__new__(Table)
        cdef sp_table_builder *b = self.b
        self.b = NULL
        t.t = sp_table_builder_finish(b)
        if t.t is NULL:
            raise MemoryError()
        return t


cdef class Table:
    """An immutable response table."""
    cdef sp_table *t

    def __dealloc__(self):
        sp_table_free(self.t)

    cdef sp_table *release(self) except NULL:
        if self.t is NULL:
            raise ValueError("table already published")
        cdef sp_table *t = self.t
        self.t = NULL
        return t

    def flat_bytes(self):
        """The table as one flat block (native/fuzz loads this with sp_table_flat_rebase)."""
        cdef size_t n = sp_table_flat_size(self.t)
        cdef void *mem = PyMem_Malloc(n + 64)
        cdef uintptr_t aligned
        if mem is NULL:
            raise MemoryError()
        try:
            aligned = (<uintptr_t>mem + 63) & ~(<uintptr_t>63)
            sp_table_flatten(self.t, <void *>aligned)
            return PyBytes_FromStringAndSize(<char *>aligned, n)
        finally:
            PyMem_Free(mem)

    def check_rules(self):
        """Raise ValueError with the reason if the rule list does not fit this table."""
        cdef char err[256]
        if sp_rules_check(self.t, err, sizeof(err)) != 0:
            raise ValueError(err.decode(errors="replace"))

    def flat_size(self):
        """Bytes this table takes as one block in memory shared with workers."""
        return sp_table_flat_size(self.t) if self.t is not NULL else 0

    def info(self):
        cdef sp_table_info i
        if self.t is NULL:
            raise ValueError("table already published")
        sp_table_get_info(self.t, &i)
        return dict(keys=i.keys, responses=i.responses, patches=i.patches,
                    arena_bytes=i.arena_bytes, slots=i.slots, memory_bytes=i.memory_bytes)

    def render(self, uint64_t tag, const uint8_t[:] key, fields):
        """Render the response for key against request fields; (bytes, partial sum) or None."""
        cdef const sp_response *r
        cdef sp_request req
        cdef uint8_t out[65535]
        cdef size_t n
        cdef const uint8_t[:] view
        if self.t is NULL:
            raise ValueError("table already published")
        r = sp_table_find(self.t, tag, &key[0] if len(key) else NULL, len(key))
        if r is NULL:
            return None
        memset(&req, 0, sizeof(req))
        keep = [bytes(f) for f in fields][:SP_FIELDS]
        for i, f in enumerate(keep):
            view = f
            req.field[i] = &view[0] if len(f) else NULL
            req.field_len[i] = <uint16_t>len(f)
        n = sp_response_render(self.t, r, &req, out, sizeof(out))
        if n == 0:
            return None
        return PyBytes_FromStringAndSize(<char *>out, n), sp_response_sum(self.t, r, &req)

    def dns_answer(self, const uint8_t[:] query, bint tcp=False, uint16_t max_udp=1232):
        """Answer one DNS message from this table: the response bytes, or None (dropped)."""
        if self.t is NULL:
            raise ValueError("table already published")
        return _answer(self.t, query, tcp, max_udp)

    def bench_dns(self, queries, long rounds=1, uint16_t max_udp=1232):
        """Answer every query `rounds` times in one C loop without the GIL (the fast
        path with no I/O). Returns (answers, response bytes, elapsed ns)."""
        cdef sp_dns_config cfg
        cdef sp_dns_query q
        cdef sp_dns_counters c
        cdef uint8_t out[65535]
        cdef size_t n, total = 0, answered = 0, count = len(queries)
        cdef long r
        cdef size_t i
        if self.t is NULL:
            raise ValueError("table already published")
        blob = b"".join(queries)
        cdef const uint8_t[:] data = blob
        cdef size_t *offsets = <size_t *>PyMem_Malloc((count + 1) * sizeof(size_t))
        if offsets is NULL:
            raise MemoryError()
        offsets[0] = 0
        for i in range(count):
            offsets[i + 1] = offsets[i] + len(queries[i])
        cfg.max_udp = max_udp
        memset(&c, 0, sizeof(c))
        start = time.perf_counter_ns()
        with nogil:
            for r in range(rounds):
                for i in range(count):
                    n = sp_dns_answer(self.t, &cfg, &data[offsets[i]], offsets[i + 1] - offsets[i],
                                      False, out, sizeof(out), &q, &c)
                    total += n
                    answered += n != 0
        elapsed = time.perf_counter_ns() - start
        PyMem_Free(offsets)
        return answered, total, elapsed


cdef object _answer(const sp_table *t, const uint8_t[:] query, bint tcp, uint16_t max_udp):
    cdef sp_dns_config cfg
    cdef sp_dns_query q
    cdef sp_dns_counters c
    cdef uint8_t out[65535]
    cdef size_t n
    if len(query) == 0:
        return None
    cfg.max_udp = max_udp
    memset(&c, 0, sizeof(c))
    n = sp_dns_answer(t, &cfg, &query[0], len(query), tcp, out, sizeof(out), &q, &c)
    if n == 0:
        return None
    return PyBytes_FromStringAndSize(<char *>out, n)


def udp_reply(const uint8_t[:] request_ip, const uint8_t[:] payload, uint32_t payload_sum,
              uint8_t ttl=64):
    """IP+UDP reply headers + payload for a received IP packet, the checksum taken
    from payload_sum (no pass over the payload). None if the request is not UDP."""
    cdef sp_udpip u
    cdef uint8_t hdr[48]
    cdef size_t n
    if not sp_udpip_parse(&request_ip[0], len(request_ip), &u):
        return None
    n = sp_udpip_write_reply(hdr, &u, len(payload), payload_sum, ttl)
    return PyBytes_FromStringAndSize(<char *>hdr, n) + bytes(payload)


def parse_udpip(const uint8_t[:] ip):
    """(family, sport, dport, payload offset, payload length) or None."""
    cdef sp_udpip u
    if len(ip) == 0 or not sp_udpip_parse(&ip[0], len(ip), &u):
        return None
    return u.family, u.sport, u.dport, u.payload_off, u.payload_len


def csum_partial(const uint8_t[:] data):
    return sp_csum_partial(&data[0] if len(data) else NULL, len(data), 0)


cdef class TableRef:
    """The table the workers serve from, and the workers' own state and counters;
    swap() publishes a new table atomically.

    With shared_bytes, all of it lives in a region shared with worker processes
    forked after it was made (see native/include/stormpy/shm.h): each table is
    copied in as one block, and the supervisor reads the workers' counters there."""
    cdef sp_table_ref *ref
    cdef sp_shm *shm
    cdef sp_frame_worker *workers
    cdef int control_slot
    cdef int owner_pid
    cdef sp_rrl *rrl
    cdef list retired     # tables swapped out, not yet freed (addresses)

    def __cinit__(self, Table table not None, int nworkers, size_t shared_bytes=0):
        import os
        if nworkers < 0 or nworkers > MAX_WORKERS:
            raise ValueError(f"workers must be between 1 and {MAX_WORKERS}")
        self.owner_pid = os.getpid()
        self.retired = []
        if shared_bytes:
            self.shm = sp_shm_create(shared_bytes)
            if self.shm is NULL:
                raise BackendError(f"cannot map {shared_bytes >> 20} MB of memory shared with "
                                   f"the workers: {os.strerror(errno)}")
            self.ref = <sp_table_ref *>sp_shm_alloc(self.shm, sizeof(sp_table_ref))
            self.workers = <sp_frame_worker *>sp_shm_alloc(self.shm, max(nworkers, 1) * sizeof(sp_frame_worker))
        else:
            self.ref = <sp_table_ref *>PyMem_Malloc(sizeof(sp_table_ref))
            self.workers = <sp_frame_worker *>PyMem_Malloc(max(nworkers, 1) * sizeof(sp_frame_worker))
            if self.workers is not NULL:
                memset(self.workers, 0, max(nworkers, 1) * sizeof(sp_frame_worker))
        if self.ref is NULL or self.workers is NULL:
            raise MemoryError()
        sp_table_ref_init(self.ref, NULL)
        sp_table_ref_swap(self.ref, self._place(table))
        self.control_slot = nworkers
        sp_table_ref_set_workers(self.ref, nworkers + 1)

    def set_rrl(self, uint32_t rate, uint32_t slip=2, uint8_t ipv4_prefix=24,
                uint8_t ipv6_prefix=56, allow=(), uint64_t buckets=1 << 16):
        """Response rate limiting for every worker (rrl.h): `rate` answers per second
        per source prefix and kind, every `slip`-th limited answer sent truncated,
        never limiting the (family, packed address, prefix length) in allow."""
        cdef sp_rrl_config cfg
        cdef void *mem
        cdef size_t n = sp_rrl_size(buckets)
        if len(allow) > SP_RRL_ALLOW_MAX:
            raise ValueError(f"at most {SP_RRL_ALLOW_MAX} allowed prefixes")
        if self.rrl is not NULL:
            raise ValueError("rate limiting is already set")
        memset(&cfg, 0, sizeof(cfg))
        cfg.rate, cfg.slip, cfg.v4_prefix, cfg.v6_prefix = rate, slip, ipv4_prefix, ipv6_prefix
        cfg.nallow = len(allow)
        for k, (family, packed, length) in enumerate(allow):
            cfg.allow[k].family, cfg.allow[k].len = family, length
            _copy_exact(cfg.allow[k].addr, packed, 4 if family == 4 else 16, "allowed address")
        mem = sp_shm_alloc(self.shm, n) if self.shm is not NULL else PyMem_Malloc(n)
        if mem is NULL:
            raise MemoryError()
        memset(mem, 0, n)
        self.rrl = sp_rrl_init(mem, buckets, &cfg)
        if self.rrl is NULL:
            if self.shm is NULL:
                PyMem_Free(mem)
            raise ValueError("bad rate-limiting settings (prefix lengths, or buckets not a power of two)")
        for i in range(self.control_slot):
            self.workers[i].scratch.rrl = self.rrl

    cdef sp_table *_place(self, Table table) except NULL:
        """The table to publish: in the shared region when there is one."""
        cdef size_t n
        cdef void *mem
        if table.t is NULL:
            raise ValueError("table already published")
        if self.shm is NULL:
            return table.release()
        n = sp_table_flat_size(table.t)
        mem = sp_shm_alloc(self.shm, n)
        if mem is NULL:
            raise MemoryError(f"the table needs {n >> 20} MB and the memory shared with the "
                              f"workers is full; restart the server to make it larger")
        placed = sp_table_flatten(table.t, mem)
        sp_table_free(table.release())
        return placed

    cdef void _drop(self, sp_table *t) noexcept:
        if t is NULL:
            return
        if self.shm is not NULL and sp_shm_contains(self.shm, t):
            sp_shm_free(self.shm, t)
        else:
            sp_table_free(t)

    def __dealloc__(self):
        if self.owner_pid != getpid():
            return          # a forked worker: the region is the supervisor's to free
        if self.shm is not NULL:
            sp_shm_destroy(self.shm)
            return
        if self.ref is not NULL:
            self._drop(sp_table_ref_swap(self.ref, NULL))
            for old in self.retired:
                self._drop(<sp_table *><uintptr_t>old)
            PyMem_Free(self.ref)
        PyMem_Free(self.workers)
        PyMem_Free(self.rrl)

    def publish(self, Table table not None):
        """Make table the one workers read from their next batch; the old one is
        retired until reclaim() finds no worker can still read it."""
        self.retired.append(<uintptr_t>sp_table_ref_swap(self.ref, self._place(table)))

    def reclaim(self, int timeout_ms=5000):
        """Free every retired table once no worker can still read one (waiting up to
        timeout_ms, without the GIL). False: still in use, kept for the next call."""
        cdef bint done
        # Only tables retired before the wait began are safe after it; another thread
        # may publish (and another reclaim may free) meanwhile.
        waited_for = list(self.retired)
        with nogil:
            done = sp_table_ref_wait(self.ref, timeout_ms)
        if done:
            for old in waited_for:
                if old in self.retired:
                    self.retired.remove(old)
                    self._drop(<sp_table *><uintptr_t>old)
        return done

    def swap(self, Table table not None, int timeout_ms=5000):
        """publish() then reclaim()."""
        self.publish(table)
        return self.reclaim(timeout_ms)

    def worker_gone(self, int index):
        """Worker index's process has died: it holds no table, whatever its slot says."""
        self._worker(index)
        sp_table_ref_leave(self.ref, index)

    def shared_info(self):
        """(bytes reserved, bytes in use) of the shared region, or None."""
        cdef sp_shm_info i
        if self.shm is NULL:
            return None
        sp_shm_get_info(self.shm, &i)
        return i.size, i.used

    cdef sp_frame_worker *_worker(self, int index) except NULL:
        if index < 0 or index >= self.control_slot:
            raise ValueError("worker index out of range")
        return &self.workers[index]

    def worker_counters(self, int index):
        """Worker index's counters, wherever it runs; they survive its restarts."""
        return _frame_counters(self._worker(index))

    def stop_worker(self, int index):
        """Ask worker index to return after its current batch."""
        sp_frame_worker_stop(self._worker(index))

    def rearm_worker(self, int index):
        """Before (re)starting worker index: clear its stop flag, and mark it outside
        any table, since a worker that died mid-batch never said it left."""
        cdef sp_frame_worker *w = self._worker(index)
        w.stop = 0
        w.io = NULL
        w.precopy = NULL
        w.slow_path = NULL          # a dead worker's handler was in its own process
        w.slow_ctx = NULL
        sp_table_ref_leave(self.ref, index)

    def dns_answer(self, const uint8_t[:] query, bint tcp=False, uint16_t max_udp=1232):
        cdef const sp_table *t = sp_table_ref_enter(self.ref, self.control_slot)
        try:
            return _answer(t, query, tcp, max_udp)
        finally:
            sp_table_ref_leave(self.ref, self.control_slot)

    def run_frames(self, frames, int worker=0, uint16_t port=53, unsigned batch=32,
                   uint64_t rounds=1, uint16_t max_udp=1232, uint8_t ttl=64,
                   size_t capture_max=1 << 24, own=None, uint64_t tx_flush_us=0,
                   identity=None, str mode="memcpy", unsigned precopy_frames=PRECOPY_FRAMES,
                   bint responder=False, handler=None, bint all_frames=False):
        """Run one frame worker over the memory backend: `frames` (Ethernet frames,
        bytes) replayed `rounds` times through the real worker loop. `own`, a dict of
        mac/ipv4/ipv6 (packed bytes), answers ARP, ICMP and NDP for them as on an
        interface stormpy owns. `mode` "precopy" sends from a pool of precopy_frames
        ready-made copies. `responder` answers from the table's rules, with `handler`
        for the rest (all_frames: also what is not UDP to port).
        Returns (reply frames captured, counters)."""
        cdef sp_frame_worker *w
        cdef sp_io *io
        cdef size_t n = 0, pos = 0, flen
        cdef const uint8_t *cap
        if worker < 0 or worker >= self.control_slot:
            raise ValueError("worker index out of range")
        precopy = _check_mode(mode)
        blob = b"".join(len(f).to_bytes(2, "big") + bytes(f) for f in frames)
        if any(len(f) > 65535 for f in frames):
            raise ValueError("a frame longer than 65535 bytes")
        cdef const uint8_t[:] view = blob if blob else b"\0"
        io = sp_mem_io_open(&view[0], len(blob), rounds, capture_max)
        w = <sp_frame_worker *>PyMem_Malloc(sizeof(sp_frame_worker))
        if io is NULL or w is NULL:
            if io is not NULL:
                io.ops.close(io)
            PyMem_Free(w)
            raise MemoryError()
        memset(w, 0, sizeof(sp_frame_worker))
        w.io, w.ref, w.index, w.batch = io, self.ref, worker, batch
        w.cfg.port, w.cfg.ttl, w.cfg.dns.max_udp = port, ttl, max_udp
        w.tx_flush_ns = tx_flush_us * 1000
        w.scratch.rrl = self.rrl
        if identity:
            _set_identity(&w.cfg, identity)
        if own:
            _set_own_stack(&w.cfg, own)
        slow = None
        try:
            if responder:
                if precopy:
                    raise ValueError("a responder runs in memcpy mode")
                w.responder, w.responder_all = 1, all_frames
                if handler is not None:
                    slow = SlowPath(handler)
                    (<SlowPath>slow).attach(w)
            if precopy:
                _set_precopy(w, precopy_frames)
            with nogil:
                sp_frame_worker_run(w)
            cap = sp_mem_io_captured(io, &n)
            replies = []
            while pos + 2 <= n:
                flen = cap[pos] << 8 | cap[pos + 1]
                replies.append(PyBytes_FromStringAndSize(<char *>cap + pos + 2, flen))
                pos += 2 + flen
            counters = _frame_counters(w)
            return replies, counters
        finally:
            sp_frame_worker_close(w)
            PyMem_Free(w)


cdef _copy_exact(uint8_t *dst, src, size_t n, str what):
    """Copy an n-byte value (a MAC or a packed address) into a C field."""
    if src is None or len(src) != n:
        raise ValueError(f"{what} must be {n} bytes")
    for i in range(n):
        dst[i] = src[i]


cdef _set_own_stack(sp_frame_config *cfg, dict own):
    _copy_exact(cfg.mac, own.get("mac"), 6, "mac")
    cfg.own_stack = 1
    if own.get("ipv4") is not None:
        _copy_exact(cfg.ipv4, own["ipv4"], 4, "ipv4")
        cfg.has_ipv4 = 1
    if own.get("ipv6") is not None:
        _copy_exact(cfg.ipv6, own["ipv6"], 16, "ipv6")
        cfg.has_ipv6 = 1


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
    return dict(rx=io.rx_frames, tx=io.tx_frames, tx_bytes=io.tx_bytes,
                tx_ring_full=io.tx_ring_full, kicks=io.kicks, rx_truncated=io.rx_truncated,
                tx_errors=io.tx_errors, batches=w.batches,
                batch_hist=[w.batch_hist[i] for i in range(SP_HIST_BUCKETS)],
                not_ours=c.not_ours, bad_source=c.bad_source, malformed=c.malformed,
                stack_replies=c.stack_replies, rrl_dropped=c.rrl_dropped,
                rrl_slipped=c.rrl_slipped, queries=c.dns.queries, dropped=c.dns.dropped,
                truncated=c.dns.truncated, rcode=[c.dns.rcode[i] for i in range(17)],
                precopy_hits=w.precopy_counters.hits, precopy_fills=w.precopy_counters.fills,
                precopy_fallbacks=w.precopy_counters.fallbacks,
                rule_answers=w.responder_counters.rule_answers,
                rule_unsent=w.responder_counters.rule_unsent,
                unanswered=w.responder_counters.unanswered,
                slow_path=w.responder_counters.slow_path,
                slow_replies=w.responder_counters.slow_replies,
                handler_errors=w.responder_counters.handler_errors,
                bad_replies=w.responder_counters.bad_replies)


cdef class XdpProgram:
    """The XDP program on one interface: steers the served UDP port to the AF_XDP
    sockets and passes everything else to the kernel. Detached by detach(), by
    garbage collection, and by the kernel when the process dies."""
    cdef sp_xdp_prog *prog
    cdef readonly str ifname

    def __cinit__(self, str ifname, uint16_t port, str mode="auto"):
        cdef char err[256]
        cdef sp_xdp_attach_mode m = {"auto": SP_XDP_ATTACH_AUTO, "native": SP_XDP_ATTACH_NATIVE,
                                     "generic": SP_XDP_ATTACH_GENERIC}[mode]
        self.ifname = ifname
        b = ifname.encode()
        err[0] = 0
        self.prog = sp_xdp_prog_attach(b, port, m, err, sizeof(err))
        if self.prog is NULL:
            raise BackendError(err.decode(errors="replace"))

    def __dealloc__(self):
        self.detach()

    def queues(self):
        return sp_xdp_prog_queues(self.prog) if self.prog is not NULL else 0

    def mode(self):
        if self.prog is NULL:
            return "detached"
        return "native" if sp_xdp_prog_mode(self.prog) == SP_XDP_ATTACH_NATIVE else "generic"

    def detach(self):
        """Only once every worker on it is closed."""
        if self.prog is not NULL:
            sp_xdp_prog_detach(self.prog)
            self.prog = NULL


cdef class FrameWorker:
    """A run-to-completion worker on one backend queue (a NIC queue or a socket).
    Its state and counters live in the TableRef (worker `index`), so a worker made
    again on the same index, in the same process or a new one, continues them."""
    cdef sp_frame_worker *w
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
        ref._worker(index)
        cdef sp_io *io = sp_sock_io_open(fd, batch, max_udp)
        if io is NULL:
            raise MemoryError()
        self._attach(io, index, ref, port, batch, max_udp, 64)
        return self

    @staticmethod
    def xdp(XdpProgram prog not None, int index, TableRef ref not None, uint16_t port,
            unsigned batch=32, bint busy_poll=False, str copy_mode="auto",
            uint16_t max_udp=1232, uint8_t ttl=64, str mode="memcpy",
            unsigned precopy_frames=PRECOPY_FRAMES):
        """A worker on an AF_XDP socket bound to queue `index` of prog's interface;
        mode "precopy" keeps precopy_frames reply copies in its UMEM."""
        cdef FrameWorker self = FrameWorker.__new__(FrameWorker)
        cdef sp_xdp_config cfg
        cdef char err[256]
        ref._worker(index)
        if prog.prog is NULL:
            raise ValueError("the XDP program is detached")
        precopy = _check_mode(mode)
        memset(&cfg, 0, sizeof(cfg))
        cfg.pool_frames = precopy_frames if precopy else 0
        cfg.copy_mode = XDP_COPY_MODES[copy_mode]
        cfg.poll_busy = busy_poll
        cfg.poll_timeout_ms = 100
        err[0] = 0
        cdef sp_io *io = sp_xdp_io_open(prog.prog, index, &cfg, err, sizeof(err))
        self.keep = prog
        self._open(io, err, index, ref, port, batch, max_udp, ttl,
                   precopy_frames if precopy else 0)
        return self

    def __dealloc__(self):
        self.close()

    @staticmethod
    def packet(str ifname, int index, TableRef ref not None, uint16_t port, unsigned batch=32,
               uint16_t fanout_group=1, bint busy_poll=False, uint16_t max_udp=1232,
               uint8_t ttl=64, str mode="memcpy", unsigned precopy_frames=PRECOPY_FRAMES):
        """A worker on an AF_PACKET socket that joins fanout_group on ifname; mode
        "precopy" opens it without a TX ring and sends with sendmmsg (packet_io.h)."""
        cdef FrameWorker self = FrameWorker.__new__(FrameWorker)
        cdef sp_packet_config cfg
        cdef char err[256]
        ref._worker(index)
        precopy = _check_mode(mode)
        self.ifname = ifname.encode()
        memset(&cfg, 0, sizeof(cfg))
        cfg.ifname = self.ifname
        cfg.precopy = precopy
        cfg.fanout_group = fanout_group
        cfg.busy_poll = busy_poll
        cfg.poll_ms = 100
        err[0] = 0
        cdef sp_io *io = sp_packet_io_open(&cfg, err, sizeof(err))
        self._open(io, err, index, ref, port, batch, max_udp, ttl,
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
        ref._worker(index)
        precopy = _check_mode(mode)
        self.ifname = ifname.encode()
        memset(&cfg, 0, sizeof(cfg))
        cfg.ifname, cfg.queue, cfg.busy_poll, cfg.poll_ms = self.ifname, index, busy_poll, 100
        cfg.pool_frames = precopy_frames if precopy else 0
        err[0] = 0
        cdef sp_io *io = sp_netmap_io_open(&cfg, err, sizeof(err))
        self._open(io, err, index, ref, port, batch, max_udp, ttl,
                   precopy_frames if precopy else 0)
        if own:
            _set_own_stack(&self.w.cfg, own)
        return self

    cdef _open(self, sp_io *io, const char *err, int index, TableRef ref, uint16_t port,
               unsigned batch, uint16_t max_udp, uint8_t ttl, unsigned precopy_frames):
        """A ring backend's open call just returned io (NULL: err says why); attach it
        to worker index, in precopy mode when precopy_frames is not 0."""
        if io is NULL:
            raise BackendError(err.decode(errors="replace"))
        self._attach(io, index, ref, port, batch, max_udp, ttl)
        if precopy_frames:
            self._precopy(precopy_frames)

    cdef _attach(self, sp_io *io, int index, TableRef ref, uint16_t port, unsigned batch,
                 uint16_t max_udp, uint8_t ttl):
        self.w = ref._worker(index)
        self.ref = ref
        self.w.io, self.w.ref, self.w.index, self.w.batch = io, ref.ref, index, batch
        self.w.precopy = NULL          # a dead worker's pool was in its own memory
        self.w.responder, self.w.responder_all = 0, 0
        self.w.slow_path, self.w.slow_ctx = NULL, NULL
        memset(&self.w.cfg, 0, sizeof(self.w.cfg))
        self.w.cfg.port, self.w.cfg.ttl, self.w.cfg.dns.max_udp = port, ttl, max_udp

    cdef _precopy(self, unsigned frames):
        try:
            _set_precopy(self.w, frames)
        except BaseException:
            self.close()
            raise

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
        if self.w.precopy is not NULL:
            raise ValueError("a responder runs in memcpy mode")
        self.w.responder, self.w.responder_all = 1, all_frames
        if handler is not None:
            self.slow = SlowPath(handler, local_address)
            self.slow.attach(self.w)

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
        err = self.w.io.error
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
        """Close the backend; only once run() has returned. The counters stay."""
        if self.w is not NULL:
            self.w.slow_path = NULL
            self.w.slow_ctx = NULL
            sp_frame_worker_close(self.w)
            self.w = NULL
