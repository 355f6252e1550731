# One direction of `stormpy impair` (included by _core.pyx): frames from one
# interface to another through AF_PACKET, with loss, duplication, delay and
# reordering. See native/include/stormpy/app/impair/impair.h.

cdef sp_io *_open_promiscuous(bytes ifname) except NULL:
    cdef sp_packet_config cfg
    cdef char err[256]
    memset(&cfg, 0, sizeof(cfg))
    cfg.ifname = ifname
    cfg.poll_ms = 1            # held frames are released within a millisecond
    cfg.promiscuous = 1
    err[0] = 0
    cdef sp_io *io = sp_packet_io_open(&cfg, err, sizeof(err))
    if io is NULL:
        raise BackendError(f"{ifname.decode()}: {err.decode(errors='replace')}")
    return io


cdef class Impairer:
    """Frames from interface src to interface dst, impaired as asked (percentages of
    frames, delays in microseconds). run() forwards until stop() is called."""
    cdef sp_impair *im
    cdef sp_io *src
    cdef sp_io *dst
    cdef sp_impair_counters c

    def __cinit__(self, str src, str dst, double loss=0, double duplicate=0, double reorder=0,
                  uint64_t delay_us=0, uint64_t reorder_us=0, uint64_t seed=1,
                  uint32_t queue_frames=0):
        cdef sp_impair_config cfg
        for name, pct in (("loss", loss), ("duplicate", duplicate), ("reorder", reorder)):
            if not 0 <= pct <= 100:
                raise ValueError(f"{name} must be a percentage from 0 to 100")
        memset(&cfg, 0, sizeof(cfg))
        cfg.loss_ppm = <uint32_t>(loss * 10000 + 0.5)
        cfg.duplicate_ppm = <uint32_t>(duplicate * 10000 + 0.5)
        cfg.reorder_ppm = <uint32_t>(reorder * 10000 + 0.5)
        cfg.delay_us, cfg.reorder_us, cfg.seed = delay_us, reorder_us, seed
        cfg.queue_frames = queue_frames
        memset(&self.c, 0, sizeof(self.c))
        self.im = sp_impair_new(&cfg)
        if self.im is NULL:
            raise MemoryError()
        self.src = _open_promiscuous(src.encode())
        try:
            self.dst = _open_promiscuous(dst.encode())
        except BaseException:
            self.src.ops.close(self.src)
            self.src = NULL
            raise

    def run(self):
        cdef int err
        with nogil:
            err = sp_impair_run(self.im, self.src, self.dst, &self.c)
        if err:
            import os
            raise OSError(err, os.strerror(err))

    def stop(self):
        sp_impair_stop(self.im)

    def counters(self):
        return dict(received=self.c.received, sent=self.c.sent, lost=self.c.lost,
                    duplicated=self.c.duplicated, reordered=self.c.reordered,
                    overflow=self.c.overflow, oversized=self.c.oversized)

    def __dealloc__(self):
        if self.src is not NULL:
            self.src.ops.close(self.src)
        if self.dst is not NULL:
            self.dst.ops.close(self.dst)
        sp_impair_free(self.im)
