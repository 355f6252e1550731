# Zones loaded and compiled in C (included by _core.pyx): NativeZone. See
# native/include/stormpy/zone/zone.h; stormpy/dns/native.py decides when it is used.

ZONE_READER = sp_zone_reader_available()   # False: built without ldns


def zone_type_patchable(uint16_t rdtype):
    """Whether a secondary's IXFR may patch records of this type into the C store
    (DNSSEC's and DNAME may not: the zone is transferred whole)."""
    return sp_zone_type_patchable(rdtype)


class ZoneDeclined(Exception):
    """The C path leaves this zone to the Python loader and compiler (the reason)."""


cdef class NativeZone:
    """A master file read by ldns into C; compile_into() adds its keys to a builder.
    Raises ZoneDeclined for what the C path does not handle."""
    cdef sp_zone *z
    # the last compile's answers over 65535 bytes, served SERVFAIL: (count, the first's
    # name as wire, its type, whether it answers the names below that one)
    cdef readonly tuple oversized

    def __cinit__(self):
        self.z = sp_zone_new()
        if self.z is NULL:
            raise MemoryError()
        self.oversized = (0, None, 0, False)

    def read(self, str path, str origin=None):
        """Read the master file (without the GIL: records_read shows the progress)."""
        cdef bytes bpath = path.encode()
        cdef bytes borigin = origin.encode() if origin is not None else None
        cdef const char *cpath = bpath
        cdef const char *corigin = NULL
        cdef int rc
        if borigin is not None:
            corigin = borigin
        with nogil:
            rc = sp_zone_read(self.z, cpath, corigin)
        if rc == SP_ZONE_NOMEM:
            raise MemoryError()
        if rc != SP_ZONE_OK:
            raise ZoneDeclined(self.z.why.decode(errors="replace"))

    @property
    def outside(self):
        """(records outside the origin left out, the first one's owner as a wire name)."""
        return self._counted(self.z.outside, self.z.first_outside)

    @property
    def ttl_mismatch(self):
        """(records whose TTL differs from their RRset's, the first one's owner)."""
        return self._counted(self.z.ttl_mismatch, self.z.first_ttl_mismatch)

    cdef _note_oversized(self, sp_zone_compile_stats *stats):
        cdef const sp_zone_name *n
        if not stats.oversized:
            self.oversized = (0, None, 0, False)
            return
        n = &self.z.names[stats.oversized_name]
        self.oversized = (stats.oversized, self.z.arena[n.off:n.off + n.len],
                          stats.oversized_type, stats.oversized_below)

    def _counted(self, uint32_t count, uint32_t name):
        if not count:
            return 0, None
        cdef const sp_zone_name *n = &self.z.names[name]
        return count, self.z.arena[n.off:n.off + n.len]

    def add_records(self, records, bytes origin not None):
        """The zone from records already parsed (a transfer's): (owner wire, type, TTL,
        rdata wire) each, then grouped under origin (a name wire) as read() does."""
        if self.z.nrdatas:
            raise ValueError("this zone has records already")
        self._add_and_finish(records, origin)

    def patch(self, names, records):
        """Every record at these names (wire) replaced by records, given as for
        add_records (an IXFR's delta, the changed names' records after it), the zone
        grouped again in C. Raises ZoneDeclined; after any error, this zone is unusable."""
        cdef list keep = [bytes(n) for n in names]
        cdef size_t count = len(keep), i
        cdef const uint8_t **wires = <const uint8_t **>PyMem_Malloc((count + 1) * sizeof(uint8_t *))
        cdef size_t *lens = <size_t *>PyMem_Malloc((count + 1) * sizeof(size_t))
        cdef int rc
        if wires is NULL or lens is NULL:
            PyMem_Free(wires)
            PyMem_Free(lens)
            raise MemoryError()
        for i in range(count):
            wires[i] = <const uint8_t *><bytes>keep[i]
            lens[i] = len(<bytes>keep[i])
        origin = self.origin_wire
        rc = sp_zone_reopen(self.z, wires, lens, count)
        PyMem_Free(wires)
        PyMem_Free(lens)
        if rc == SP_ZONE_NOMEM:
            raise MemoryError()
        self._add_and_finish(records, origin)

    def _add_and_finish(self, records, bytes origin):
        cdef const uint8_t[:] owner, rdata
        cdef int rc = SP_ZONE_OK
        for o, rdtype, ttl, d in records:
            owner, rdata = o, d if d else b"\0"
            rc = sp_zone_add_record(self.z, &owner[0], len(o), rdtype, ttl, &rdata[0], len(d))
            if rc != SP_ZONE_OK:
                break
        if rc == SP_ZONE_OK:
            rc = sp_zone_finish(self.z, origin, len(origin))
        if rc == SP_ZONE_NOMEM:
            raise MemoryError()
        if rc != SP_ZONE_OK:
            raise ZoneDeclined(self.z.why.decode(errors="replace"))

    def copy(self):
        """A deep copy of this zone, to write from while this one is patched."""
        cdef NativeZone c = NativeZone()
        cdef sp_zone *z = sp_zone_copy(self.z)
        if z is NULL:
            raise MemoryError()
        sp_zone_free(c.z)
        c.z = z
        return c

    def write(self, str path):
        """The zone as a master file (without the GIL). Raises OSError or ZoneDeclined."""
        cdef bytes bpath = path.encode()
        cdef const char *cpath = bpath
        cdef int rc
        with nogil:
            rc = sp_zone_write(self.z, cpath)
        if rc < 0:
            raise OSError(-rc, os.strerror(-rc), path)
        if rc != SP_ZONE_OK:
            raise ZoneDeclined(self.z.why.decode(errors="replace"))

    @property
    def records_read(self):
        """Records read so far (a progress line reads it while read() runs)."""
        return self.z.nrecords if self.z.nrecords else self.z.nrdatas

    def __dealloc__(self):
        sp_zone_free(self.z)

    @property
    def origin_wire(self):
        cdef const uint8_t *w = sp_zone_name_wire(self.z, self.z.origin)
        cdef size_t n = 0
        while w[n]:
            n += 1 + w[n]
        return bytes(w[:n + 1])

    @property
    def serial(self):
        return self.z.serial

    @property
    def soa_rdata(self):
        """The SOA record's data (wire), for its timers."""
        cdef const sp_zone_rdata *d = &self.z.rdatas[self.z.rrsets[self.z.soa].first]
        return self.z.rdata_arena[d.off:d.off + d.len]

    @property
    def records(self):
        return self.z.nrdatas

    @property
    def names(self):
        return self.z.nnames - self.z.ndead

    def rrsets(self):
        """Every RRset as (owner wire, type, TTL, [rdata wire]): for the Python compiler
        when it compiles this zone (the file is not read twice)."""
        cdef const sp_zone_rrset *s
        cdef const sp_zone_rdata *d
        cdef uint32_t i, k
        for i in range(self.z.nrrsets):
            s = &self.z.rrsets[i]
            owner = sp_zone_name_wire(self.z, s.name)[:self.z.names[s.name].len]
            datas = []
            for k in range(s.count):
                d = &self.z.rdatas[s.first + k]
                datas.append(self.z.rdata_arena[d.off:d.off + d.len])
            yield owner, s.type, s.ttl, datas

    def node(self, bytes owner not None):
        """The RRsets at a name (lower-cased wire) as rrsets() gives them, [] when the
        zone does not hold it: what an IXFR's delta changes is read from here."""
        return self._records_at(sp_zone_lookup(self.z, owner, len(owner)))

    def held(self, bytes owner not None):
        """node(), hashed NSEC3 owners included: every record the zone transfers."""
        return self._records_at(sp_zone_find(self.z, owner, len(owner)))

    cdef list _records_at(self, uint32_t id):
        cdef const sp_zone_rrset *s
        cdef const sp_zone_rdata *d
        cdef uint32_t i, k
        out = []
        if id == 0xFFFFFFFF:
            return out
        for i in range(self.z.names[id].first_rrset,
                       self.z.names[id].first_rrset + self.z.names[id].nrrsets):
            s = &self.z.rrsets[i]
            datas = []
            for k in range(s.count):
                d = &self.z.rdatas[s.first + k]
                datas.append(self.z.rdata_arena[d.off:d.off + d.len])
            out.append((s.type, s.ttl, datas))
        return out

    def transfer_sections(self, size_t budget, size_t cap, uint16_t section_at,
                          uint16_t origin_at=12):
        """An AXFR's answer sections (RFC 5936: SOA, every other record, SOA) as
        (wire, records), each up to budget bytes (one record may take it to cap), for
        messages where the section starts at section_at and the zone's name is spelled
        at origin_at. The caller holds the zone still while it iterates."""
        cdef sp_zone_walk walk
        cdef uint16_t count
        cdef size_t used
        cdef bytearray out = bytearray(cap)
        cdef uint8_t *p = out
        sp_zone_walk_init(&walk)
        while walk.phase != SP_ZONE_WALK_DONE:
            used = sp_zone_walk_write(self.z, &walk, p, cap, budget, origin_at, section_at,
                                      &count)
            if count == 0:
                raise ValueError("a record too large for a transfer message")
            yield bytes(out[:used]), count

    def difference(self, NativeZone old not None, size_t limit):
        """The owners (wire) whose records differ between old and this zone, or None
        past limit of them."""
        cdef uint32_t *ids = NULL
        cdef size_t count = 0, i
        cdef int rc
        cdef sp_zone *z
        cdef uint32_t id
        with nogil:
            rc = sp_zone_difference(old.z, self.z, limit, &ids, &count)
        try:
            if rc == SP_ZONE_NOMEM:
                raise MemoryError()
            if rc != SP_ZONE_OK:
                return None
            owners = []
            for i in range(count):
                id = ids[i] & ~SP_ZONE_FROM_OLD
                z = old.z if ids[i] & SP_ZONE_FROM_OLD else self.z
                owners.append(sp_zone_name_wire(z, id)[:z.names[id].len])
            return owners
        finally:
            free(ids)

    @property
    def pending(self):
        """Patched since its last compile: recompile_into() can bring that table up to date."""
        return self.z.pending

    def recompile_into(self, TableBuilder builder, uint32_t slot=0):
        """builder, an edit of the table this zone was last compiled into, brought up
        to the patches since: only the keys they can change compiled again. Returns
        (keys, responses) added; raises ZoneDeclined when a whole compile is due."""
        cdef sp_zone_compile_stats stats
        cdef int rc
        if builder.b is NULL:
            raise ValueError("builder already finished")
        with nogil:
            rc = sp_zone_recompile(self.z, builder.b, slot, &stats)
        if rc == SP_ZONE_NOMEM:
            raise MemoryError()
        if rc != SP_ZONE_OK:
            raise ZoneDeclined(self.z.why.decode(errors="replace"))
        self._note_oversized(&stats)
        return stats.keys, stats.responses

    def compile_into(self, TableBuilder builder, uint32_t slot=0):
        """Add every key of the zone to builder, its answers counted in slot.
        Returns (keys, distinct responses); raises ZoneDeclined."""
        cdef sp_zone_compile_stats stats
        cdef int rc
        if builder.b is NULL:
            raise ValueError("builder already finished")
        with nogil:
            rc = sp_zone_compile(self.z, builder.b, slot, &stats)
        if rc == SP_ZONE_NOMEM:
            raise MemoryError()
        if rc != SP_ZONE_OK:
            raise ZoneDeclined(self.z.why.decode(errors="replace"))
        self._note_oversized(&stats)
        return stats.keys, stats.responses


cdef class AxfrInto:
    """An AXFR's messages, as the primary sends them, into an empty NativeZone, parsed
    and checked in C (zone/axfr.h). Raises ZoneDeclined for anything the C side does
    not check as dnspython does: the transfer is then made again by dnspython."""
    cdef sp_zone_axfr *a
    cdef NativeZone zone
    cdef bytes origin

    def __cinit__(self, NativeZone zone not None, bytes origin not None, int qid,
                  str key_name=None, str key_secret=None, str algorithm=None,
                  bytes request_mac=b""):
        cdef sp_zone_axfr_config cfg
        cdef bytes name = key_name.encode() if key_name else None
        cdef bytes secret = key_secret.encode() if key_name else None
        cdef bytes alg = algorithm.encode() if key_name else None
        if zone.z.nrdatas:
            raise ValueError("this zone has records already")
        memset(&cfg, 0, sizeof(cfg))
        cfg.origin, cfg.origin_len, cfg.id = origin, len(origin), qid
        if key_name:
            cfg.key_name, cfg.key_secret, cfg.algorithm = name, secret, alg
            cfg.request_mac, cfg.request_mac_len = request_mac, len(request_mac)
        self.zone, self.origin = zone, origin
        self.a = sp_zone_axfr_new(zone.z, &cfg)
        if self.a is NULL:
            if zone.z.why[0]:
                raise ZoneDeclined(zone.z.why.decode(errors="replace"))
            raise MemoryError()

    def message(self, bytes wire not None):
        """One message: True once the transfer is complete (the zone then grouped and
        ready to compile), False when more are to come."""
        cdef const uint8_t *p = wire
        cdef size_t n = len(wire)
        cdef uint64_t now = <uint64_t>time.time()
        cdef int rc
        if self.a is NULL:
            raise ValueError("transfer over")
        with nogil:
            rc = sp_zone_axfr_message(self.a, p, n, now)
        if rc == SP_ZONE_OK:
            return False
        sp_zone_axfr_free(self.a)
        self.a = NULL
        if rc == SP_ZONE_NOMEM:
            raise MemoryError()
        if rc != SP_ZONE_AXFR_DONE:
            raise ZoneDeclined(self.zone.z.why.decode(errors="replace"))
        self.zone._add_and_finish((), self.origin)
        return True

    def __dealloc__(self):
        sp_zone_axfr_free(self.a)
