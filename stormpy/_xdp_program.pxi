# The BPF programs on an interface (included by _core.pyx): XdpProgram and TcpGuard.
# See native/include/stormpy/io/xdp_program.h and tcp_guard.h.

XDP_VERDICTS = {0: "aborted", 1: "drop", 2: "pass", 3: "tx", 4: "redirect"}


cdef class XdpProgram:
    """The XDP program on one interface: steers the served UDP (or, tcp, TCP) port to the AF_XDP
    sockets and passes everything else to the kernel; with answer, it answers the queries
    its answer map holds itself (xdp_answer.h); with reflect, it sends every query back
    as its own reply (`stormpy bench cpu`'s floor). Detached by detach(), by garbage
    collection, and by the kernel when the process dies."""
    cdef sp_xdp_prog *prog
    cdef readonly str ifname
    cdef readonly bint answer

    KEY_SIZE = sizeof(sp_xdp_answer_key)
    VALUE_SIZE = sizeof(sp_xdp_answer)
    TAIL_MAX = SP_XDP_TAIL_MAX
    ZONE_SLOTS = SP_XDP_ZONE_SLOTS

    def __cinit__(self, str ifname, uint16_t port, str mode="auto", bint tcp=False,
                  bint answer=False, bint reflect=False):
        cdef char err[256]
        cdef sp_xdp_attach_mode m = {"auto": SP_XDP_ATTACH_AUTO, "native": SP_XDP_ATTACH_NATIVE,
                                     "generic": SP_XDP_ATTACH_GENERIC}[mode]
        self.ifname = ifname
        self.answer = answer
        b = ifname.encode()
        err[0] = 0
        self.prog = sp_xdp_prog_attach(b, port, tcp, (SP_XDP_ANSWER if answer else 0) |
                                       (SP_XDP_REFLECT if reflect else 0), m, err, sizeof(err))
        if self.prog is NULL:
            raise BackendError(err.decode(errors="replace"))

    def __dealloc__(self):
        self.detach()

    cdef _check(self, int r, str what):
        if r < 0:
            raise BackendError(f"AF_XDP: {what}: {os.strerror(-r)}")

    def answers_config(self, bytes mac not None, addresses, uint8_t ttl=64):
        """The interface's MAC and IPv4 addresses (packed; at most 8): what the driver
        answers for. ttl: the replies' IPv4 TTL, as the workers'."""
        cdef sp_xdp_answer_config c
        memset(&c, 0, sizeof(c))
        v4 = [a for a in addresses if len(a) == 4][:SP_XDP_ADDRS]
        _copy_exact(c.mac, mac, 6, "mac")
        for k, a in enumerate(v4):
            _copy_exact(c.addrs[k], a, 4, "ipv4")
        c.naddrs, c.ttl = len(v4), ttl
        self._check(sp_xdp_answers_config(self._live(), &c), "answer config")

    def answers_publish(self, const uint8_t[:] keys, const uint8_t[:] values, uint32_t room=0):
        """A new generation of answers (keys and values packed as KEY_SIZE and VALUE_SIZE
        records: stormpy/dns/xdp.py builds them), swapped in whole."""
        cdef uint32_t n = len(keys) // self.KEY_SIZE
        cdef sp_xdp_prog *p = self._live()
        if len(keys) != n * self.KEY_SIZE or len(values) != n * self.VALUE_SIZE:
            raise ValueError("keys and values must be whole records, as many of each")
        self._check(sp_xdp_answers_begin(p, max(room, n, 1)), "answer map")
        if n:
            self._check(sp_xdp_answers_add(p, <const sp_xdp_answer_key *>&keys[0],
                                           <const sp_xdp_answer *>&values[0], n), "answer map")
        self._check(sp_xdp_answers_publish(p), "answer map")

    def counters(self):
        """With answer: {"xdp_answered", "xdp_passed"}, the queries answered in the driver
        and those left to the sockets, and the answered ones as a worker counts its own:
        "xdp_rcode" (16, by rcode) and "xdp_zone_answers" (by zone slot); else {}."""
        cdef uint64_t out[SP_XDP_STATS]
        if not self.answer or self.prog is NULL:
            return {}
        self._check(sp_xdp_answers_stats(self.prog, out), "answer counters")
        return {"xdp_answered": out[SP_XDP_ANSWERED], "xdp_passed": out[SP_XDP_PASSED],
                "xdp_rcode": [out[SP_XDP_RCODES + i] for i in range(16)],
                "xdp_zone_answers": [out[SP_XDP_ZONES + i] for i in range(SP_XDP_ZONE_SLOTS)]}

    def test_run(self, const uint8_t[:] frame):
        """One frame through the program (BPF_PROG_TEST_RUN): (verdict, frame after)."""
        cdef uint8_t out[4096]
        cdef uint32_t out_len = sizeof(out), verdict = 0
        if len(frame) == 0 or len(frame) > 2048:
            raise ValueError("a frame of 1 to 2048 bytes")
        self._check(sp_xdp_prog_test_run(self._live(), &frame[0], len(frame), out, &out_len,
                                         &verdict), "test run")
        return XDP_VERDICTS.get(verdict, str(verdict)), bytes(out[:out_len])

    def instructions(self):
        """(instructions after the verifier, instructions it checked)."""
        cdef uint32_t xlated = 0, verified = 0
        self._check(sp_xdp_prog_instructions(self._live(), &xlated, &verified), "program info")
        return xlated, verified

    cdef sp_xdp_prog *_live(self) except NULL:
        if self.prog is NULL:
            raise BackendError("AF_XDP: the program is detached")
        return self.prog

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
