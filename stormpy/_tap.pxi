# The tap region (included by _core.pyx): TapRegion, the rings ring workers copy their
# frames into while `stormpy tap` is attached. See native/include/stormpy/engine/tap.h.
from posix.mman cimport mmap, munmap, PROT_READ, PROT_WRITE, MAP_SHARED, MAP_FAILED

import os

TAP_RX = SP_TAP_RX
TAP_TX = SP_TAP_TX
TAP_STALE_NS = SP_TAP_STALE_NS
TAP_HEARTBEAT_NS = SP_TAP_HEARTBEAT_NS


cdef class TapRegion:
    """A file mapped shared: the server creates it before its workers fork (create),
    a tap maps it again by its path (open). Pages are taken only where written, so
    rings nobody taps cost nothing."""
    cdef sp_tap_region *r
    cdef size_t size
    cdef int owner_pid
    cdef readonly str path

    @staticmethod
    def create(str path, uint32_t rings, uint64_t ring_bytes=4 << 20, uint32_t snaplen=65535):
        """A region of `rings` rings at path (0600; a file left there is replaced)."""
        cdef TapRegion self = TapRegion.__new__(TapRegion)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, sp_tap_region_size(rings, ring_bytes))
            self._map(fd, path)
        except BaseException:
            os.unlink(path)
            raise
        finally:
            os.close(fd)
        if sp_tap_region_init(self.r, rings, ring_bytes, snaplen) != 0:
            os.unlink(path)
            raise ValueError("a tap ring is a power of two of at least 64 KiB, and holds "
                             "four frames of the snap length")
        return self

    @staticmethod
    def open(str path):
        """The region a server made at path (for `stormpy tap`)."""
        cdef TapRegion self = TapRegion.__new__(TapRegion)
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            self._map(fd, path)
        finally:
            os.close(fd)
        if (self.size < sizeof(sp_tap_region) or self.r.magic != SP_TAP_MAGIC or
                sp_tap_region_size(self.r.rings, self.r.ring_bytes) != self.size):
            raise ValueError(f"{path} is not a stormpy tap region")
        return self

    cdef _map(self, int fd, str path):
        self.size = os.fstat(fd).st_size
        cdef void *p = mmap(NULL, self.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        if p == MAP_FAILED:
            raise OSError(errno, f"{path}: {os.strerror(errno)}")
        self.r = <sp_tap_region *>p
        self.owner_pid = getpid()
        self.path = path

    def __dealloc__(self):
        # a forked worker keeps the mapping its ring worker copies into
        if self.r is not NULL and self.owner_pid == getpid():
            munmap(self.r, self.size)

    @property
    def rings(self):
        return self.r.rings

    def attach(self, uint32_t session):
        """Starts the copying for session (nonzero): 0, or the session of the live
        tap already attached. What the rings held before is dropped."""
        return sp_tap_attach(self.r, session, sp_now_ns())

    def heartbeat(self):
        """At least every TAP_HEARTBEAT_NS, or the workers take the tap for dead."""
        sp_tap_heartbeat(self.r, sp_now_ns())

    def detach(self, uint32_t session):
        sp_tap_detach(self.r, session)

    def attached(self):
        """The live tap's session, or 0 (none, or one silent for TAP_STALE_NS)."""
        return sp_tap_session(self.r, sp_now_ns())

    def counters(self):
        """Per ring: frames copied, and frames dropped with the ring full."""
        cdef sp_tap_ring *ring
        out = []
        for i in range(self.r.rings):
            ring = sp_tap_ring_at(self.r, i)
            out.append({"records": ring.records, "drops": ring.drops})   # 8-byte loads: whole
        return out

    def drain(self, unsigned limit=4096):
        """Up to `limit` frames from the rings, ring by ring: a list of (ring, dir
        TAP_RX or TAP_TX, CLOCK_MONOTONIC ns, length on the wire, the bytes kept)."""
        cdef sp_tap_ring *ring
        cdef const sp_tap_record *rec
        out = []
        for i in range(self.r.rings):
            ring = sp_tap_ring_at(self.r, i)
            while <unsigned>len(out) < limit:
                rec = sp_tap_peek(self.r, ring)
                if rec is NULL:
                    break
                out.append((i, rec.dir, rec.ts_ns, rec.len,
                            PyBytes_FromStringAndSize(<const char *>(rec + 1), rec.caplen)))
                sp_tap_consume(ring, rec)
        return out
