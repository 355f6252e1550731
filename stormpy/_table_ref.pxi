# The published table and the workers' state (included by _core.pyx): TableRef.
# See native/include/stormpy/engine/table_ref.h and shm.h.

cdef inline size_t _room(size_t n) noexcept nogil:
    """Room placed with a table, so that the next, a little larger after an IXFR, still
    fits where it is, in pages kept in memory (shm.h)."""
    return n // 32


cdef class TableRef:
    """The table the workers serve from, and the workers' own state and counters;
    swap() publishes a new table atomically.

    With shared_bytes, all of it lives in a region shared with worker processes
    forked after it was made (see native/include/stormpy/engine/shm.h): each table is
    copied in as one block, and the supervisor reads the workers' counters there;
    keep_freed_pages: a table's pages are kept for the next (prefault() readies them),
    for servers whose table changes often, at the cost of a second table's memory."""
    cdef sp_table_ref *ref
    cdef sp_shm *shm
    cdef sp_frame_worker *workers
    cdef int control_slot
    cdef int owner_pid
    cdef sp_rrl *rrl
    cdef list retired     # tables swapped out, not yet freed (addresses)
    cdef TapRegion tap

    def __cinit__(self, Table table not None, int nworkers, size_t shared_bytes=0,
                  bint keep_freed_pages=False):
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
            sp_shm_keep_freed_pages(self.shm, keep_freed_pages)
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
            self.workers[i].dns.rrl = self.rrl

    def set_tap(self, TapRegion region not None, int workers=-1):
        """Each of the first `workers` (default: all) copies its frames into its ring
        of region while a tap is attached (tap.h); before the workers fork, like the
        region itself. Workers after them have no frames (TCP workers)."""
        if workers < 0:
            workers = self.control_slot
        if region.rings < workers or workers > self.control_slot:
            raise ValueError(f"the tap region has {region.rings} rings for "
                             f"{workers} workers")
        self.tap = region
        for i in range(workers):
            self.workers[i].tap = region.r

    cdef sp_table *_place(self, Table table) except NULL:
        """The table to publish: in the shared region when there is one."""
        cdef size_t n
        cdef void *mem
        cdef sp_table *placed
        if table.t is NULL:
            raise ValueError("table already published")
        if self.shm is NULL:
            return table.release()
        n = sp_table_flat_size(table.t)
        mem = sp_shm_alloc_raw(self.shm, n, _room(n))
        if mem is NULL:
            raise MemoryError(f"the table needs {n >> 20} MB and the memory shared with the "
                              f"workers is full; restart the server to make it larger")
        with nogil:
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

    def edit(self):
        """A TableBuilder holding a copy of the published table (read, never changed:
        the workers may be reading it)."""
        return _editing(self.ref.current)

    def publish(self, Table table not None):
        """Make table the one workers read from their next batch; the old one is
        retired until reclaim() finds no worker can still read it."""
        self.retired.append(<uintptr_t>sp_table_ref_swap(self.ref, self._place(table)))

    def prefault(self):
        """Off the reload path (no GIL), with keep_freed_pages: pages in memory for the
        next table as large as the one published, so that placing it is a copy."""
        cdef size_t n
        if self.shm is NULL:
            return
        n = sp_table_flat_size(self.ref.current)
        with nogil:
            sp_shm_prefault(self.shm, n, _room(n))

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
        sp_frame_worker_rearm(self._worker(index))
        sp_table_ref_leave(self.ref, index)
