# Response tables (included by _core.pyx): TableBuilder, Table, and DNS answers
# from a table. See native/include/stormpy/engine/table.h and app/dns/dns.h.

cdef TableBuilder _editing(const sp_table *t):
    """A builder holding a copy of t (sp_table_builder_edit)."""
    cdef TableBuilder builder = TableBuilder()
    cdef sp_table_builder *edit = sp_table_builder_edit(t)
    if edit is NULL:
        raise MemoryError()
    sp_table_builder_free(builder.b)
    builder.b = edit
    return builder


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
        cdef sp_patch p[512]
        cdef int64_t idx
        if self.b is NULL:
            raise ValueError("builder already finished")
        if len(patches) > 512:
            raise ValueError("at most 512 patches per response")
        memset(p, 0, sizeof(p))
        for i, (op, field, dst, src, length, mask) in enumerate(patches):
            p[i].op, p[i].field, p[i].dst, p[i].src, p[i].len, p[i].mask = op, field, dst, src, length, mask
        idx = sp_table_add_response(self.b, &data[0] if len(data) else NULL, <uint32_t>len(data),
                                    p, <uint16_t>len(patches), user)
        if idx < 0:
            raise ValueError("response rejected: too long or an invalid patch list")
        return idx

    def set_program(self, const uint8_t[:] program):
        """Attach bytes the table keeps for the protocol layer that reads it (a
        compiled HTTP site, app/http/site.h)."""
        if self.b is NULL:
            raise ValueError("builder already finished")
        if len(program) == 0 or sp_table_set_program(self.b, &program[0], len(program)) != 0:
            raise ValueError("program rejected: empty, a second one, or out of memory")

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

    def edit(self):
        """A TableBuilder holding a copy of this table, to change and finish anew."""
        if self.t is NULL:
            raise ValueError("table already published")
        return _editing(self.t)

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
                    arena_bytes=i.arena_bytes, slots=i.slots, memory_bytes=i.memory_bytes,
                    longest_response=i.longest_response)

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

    def dns_answer(self, const uint8_t[:] query, bint tcp=False, uint16_t max_udp=1232,
                   bytes nsid=b""):
        """Answer one DNS message from this table: the response bytes, or None (dropped).
        nsid: the server's NSID, for a query that asks for it."""
        if self.t is NULL:
            raise ValueError("table already published")
        return _answer(self.t, query, tcp, max_udp, NULL, nsid)

    def dns_answer_zone(self, const uint8_t[:] query, uint16_t max_udp=1232):
        """dns_answer over UDP, and the zone slot a worker counts the answer under (the
        per-zone counters; -1: none, a REFUSED or a dropped query)."""
        cdef sp_dns_counters c
        cdef size_t i
        if self.t is NULL:
            raise ValueError("table already published")
        memset(&c, 0, sizeof(c))
        reply = _answer(self.t, query, False, max_udp, &c)
        for i in range(SP_DNS_ZONE_SLOTS):
            if c.zone[i]:
                return reply, i
        return reply, -1

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
        memset(&cfg, 0, sizeof(cfg))
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


cdef object _answer(const sp_table *t, const uint8_t[:] query, bint tcp, uint16_t max_udp,
                    sp_dns_counters *counters=NULL, bytes nsid=b""):
    """The answer to query from t, counted in counters when given."""
    cdef sp_dns_config cfg
    cdef sp_dns_query q
    cdef sp_dns_counters c
    cdef uint8_t out[65535]
    cdef size_t n
    if len(query) == 0:
        return None
    memset(&cfg, 0, sizeof(cfg))
    cfg.max_udp = max_udp
    _set_nsid(&cfg, nsid)
    if counters is NULL:
        memset(&c, 0, sizeof(c))
        counters = &c
    n = sp_dns_answer(t, &cfg, &query[0], len(query), tcp, out, sizeof(out), &q, counters)
    if n == 0:
        return None
    return PyBytes_FromStringAndSize(<char *>out, n)
