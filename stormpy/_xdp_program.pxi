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
    """Keeps the kernel's TCP off the served port of ifname, for the served addresses
    (packed IPv4 and IPv6, at most 8 of each), while AF_PACKET workers run stormpy's own
    TCP there (tcp_guard.h). Detached by detach(), by garbage collection, and (on a
    kernel with tcx links) by the kernel when the process dies."""
    cdef sp_tcp_guard *guard
    cdef readonly str ifname

    def __cinit__(self, str ifname, uint16_t port, addresses=()):
        cdef char err[256]
        cdef sp_tcp_guard_addrs addrs
        memset(&addrs, 0, sizeof(addrs))
        v4 = [a for a in addresses if len(a) == 4][:8]
        v6 = [a for a in addresses if len(a) == 16][:8]
        addrs.nv4, addrs.nv6 = len(v4), len(v6)
        for k, a in enumerate(v4):
            _copy_exact(addrs.v4[k], a, 4, "ipv4")
        for k, a in enumerate(v6):
            _copy_exact(addrs.v6[k], a, 16, "ipv6")
        self.ifname = ifname
        b = ifname.encode()
        err[0] = 0
        self.guard = sp_tcp_guard_attach(b, port, &addrs, err, sizeof(err))
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
