# The BPF programs on an interface (included by _core.pyx): XdpProgram and TcpGuard.
# See native/include/stormpy/io/xdp_program.h and tcp_guard.h.

cdef class XdpProgram:
    """The XDP program on one interface: steers the served UDP (or, tcp, TCP) port to the AF_XDP
    sockets and passes everything else to the kernel. Detached by detach(), by
    garbage collection, and by the kernel when the process dies."""
    cdef sp_xdp_prog *prog
    cdef readonly str ifname

    def __cinit__(self, str ifname, uint16_t port, str mode="auto", bint tcp=False):
        cdef char err[256]
        cdef sp_xdp_attach_mode m = {"auto": SP_XDP_ATTACH_AUTO, "native": SP_XDP_ATTACH_NATIVE,
                                     "generic": SP_XDP_ATTACH_GENERIC}[mode]
        self.ifname = ifname
        b = ifname.encode()
        err[0] = 0
        self.prog = sp_xdp_prog_attach(b, port, tcp, m, err, sizeof(err))
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


cdef class TcpGuard:
    """Keeps the kernel's TCP off the served port of ifname while AF_PACKET workers run
    stormpy's own TCP there (tcp_guard.h). Detached by detach(), by garbage collection,
    and (on a kernel with tcx links) by the kernel when the process dies."""
    cdef sp_tcp_guard *guard
    cdef readonly str ifname

    def __cinit__(self, str ifname, uint16_t port):
        cdef char err[256]
        self.ifname = ifname
        b = ifname.encode()
        err[0] = 0
        self.guard = sp_tcp_guard_attach(b, port, err, sizeof(err))
        if self.guard is NULL:
            raise BackendError(err.decode(errors="replace"))

    def __dealloc__(self):
        self.detach()

    def uses_link(self):
        return self.guard is not NULL and sp_tcp_guard_uses_link(self.guard) == 1

    def detach(self):
        if self.guard is not NULL:
            sp_tcp_guard_detach(self.guard)
            self.guard = NULL
