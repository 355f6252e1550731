"""A secondary's zone held in C (a NativeZone) that dnspython's IXFR applies to.

dnspython's dns.xfr.Inbound reads an IXFR: its checks, TSIG and the RFC 1995 state
machine stay dnspython's. It writes through a transaction; here the transaction reads
only the names the delta touches, out of the C store, and the commit keeps their new
contents aside (pending). The server's next compile applies them to the store
(NativeZone.patch) and edits the table for just those names. So a zone of a million
records needs no second copy in Python to follow its primary, and an IXFR costs the
names it changes.

An IXFR answered with the whole zone raises FullZone: the secondary asks again by AXFR,
which it reads in C. A delta bringing records the C path does not compile (DNSSEC's,
DNAME) fails the IXFR the same way, and the zone is read again by dnspython's AXFR.
"""
from __future__ import annotations

import threading

import dns.exception
import dns.name
import dns.node
import dns.rdata
import dns.rdataclass
import dns.rdataset
import dns.rdatatype
import dns.transaction

from stormpy import _core

IN = dns.rdataclass.IN
RRSET_MAX = 65534           # records an RRset may hold in C


class FullZone(dns.exception.DNSException):
    """The primary answered the IXFR with the whole zone (AXFR-style)."""


class PatchableZone(dns.transaction.TransactionManager):
    """held (a NativeZone) and the IXFR deltas committed since the store took them."""

    def __init__(self, held):
        self.held, self.origin = held, held.origin
        self.lock = threading.Lock()     # the store read by a transfer, patched by a compile
        self.pending: dict[dns.name.Name, dict] = {}   # name -> its RRsets after the deltas
        self.broken: str | None = None   # a patch failed: the store is unusable
        self._soa = held.get_soa()       # the store's, read once it is patched

    # -- what the secondary reads -------------------------------------------------
    def node(self, name: dns.name.Name) -> dict:
        """The RRsets at name now, {(rdtype, covers): Rdataset}, deltas included."""
        with self.lock:
            if name in self.pending:
                return dict(self.pending[name])
            stored = self.held.native.node(name.canonicalize().to_wire())
        node = {}
        for rdtype, ttl, datas in stored:
            rdataset = dns.rdataset.Rdataset(IN, rdtype)
            for data in datas:
                rdataset.add(dns.rdata.from_wire(IN, rdtype, data, 0, len(data)), ttl)
            node[(rdataset.rdtype, rdataset.covers)] = rdataset
        return node

    def get_rdataset(self, name: dns.name.Name, rdtype, covers=dns.rdatatype.NONE):
        return self.node(name).get((rdtype, covers))

    def get_soa(self):
        with self.lock:
            soa = self.pending.get(self.origin, {}).get((dns.rdatatype.SOA, dns.rdatatype.NONE))
            return soa[0] if soa else self._soa

    @property
    def serial(self) -> int:
        return self.get_soa().serial

    def applied(self):
        """The NativeZone with every pending delta patched in: for the compile, which
        then edits the table for those names only (NativeZone.pending). Raises
        ZoneDeclined when the patch fails; the store stays unusable then."""
        with self.lock:
            if self.broken:
                raise _core.ZoneDeclined(self.broken)
            if not self.pending:
                return self.held
            pending, self.pending = self.pending, {}
            from stormpy.dns import native
            try:
                native.patch_names(self.held, {name: list(rdatasets.values())
                                               for name, rdatasets in pending.items()})
            except (_core.ZoneDeclined, MemoryError) as e:
                self.broken = f"an IXFR did not apply in C: {e}"
                raise _core.ZoneDeclined(self.broken) from None
            self._soa = self.held.get_soa()
            _follow(self.held._zone, pending)
            return self.held

    # -- dnspython's transaction manager --------------------------------------------
    def reader(self):
        raise NotImplementedError("a PatchableZone is only written by transfers")

    def writer(self, replacement: bool = False):
        if replacement:
            raise FullZone()
        return _Delta(self)

    def origin_information(self):
        return (self.origin, False, self.origin)

    def get_class(self):
        return IN

    def from_wire_origin(self):
        return None                 # names stay absolute

    def commit(self, changes: dict) -> None:
        """A delta's names, their RRsets after it: pending until the next compile."""
        apex = changes.get(self.origin)
        if apex is not None and not ((dns.rdatatype.SOA, 0) in apex and (dns.rdatatype.NS, 0) in apex):
            raise dns.exception.FormError("the delta leaves no SOA and NS at the origin")
        for name, rdatasets in changes.items():
            if (dns.rdatatype.CNAME, 0) in rdatasets and len(rdatasets) > 1:
                raise dns.exception.FormError(f"a CNAME and other records at {name}")
            for rdataset in rdatasets.values():
                if not _core.zone_type_patchable(rdataset.rdtype):
                    raise dns.exception.FormError(
                        f"{dns.rdatatype.to_text(rdataset.rdtype)} records at {name}: "
                        f"DNSSEC and DNAME changes are taken by a whole transfer")
                if len(rdataset) > RRSET_MAX:
                    raise dns.exception.FormError(f"an RRset of {len(rdataset)} records at {name}")
        with self.lock:
            self.pending.update(changes)


def _follow(view, pending: dict) -> None:
    """The store's dnspython view, when something built it (transfers out, the journal),
    given the same delta. A transaction commits a new dict of nodes: what was published
    from the view before stays as it was."""
    if view is None:
        return
    with view.writer() as txn:
        for name, rdatasets in pending.items():
            txn.delete(name)
            for rdataset in rdatasets.values():
                txn.replace(name, rdataset)


class _Delta(dns.transaction.Transaction):
    """One IXFR's changes: each name it touches copied on first touch from the zone."""

    def __init__(self, manager: PatchableZone):
        super().__init__(manager, replacement=False, read_only=False)
        self.changes: dict[dns.name.Name, dict] = {}

    def _touched(self, name):
        if name not in self.changes:
            self.changes[name] = self.manager.node(name)
        return self.changes[name]

    def _get_rdataset(self, name, rdtype, covers):
        node = self.changes[name] if name in self.changes else self.manager.node(name)
        return node.get((rdtype, covers))

    def _put_rdataset(self, name, rdataset):
        self._touched(name)[(rdataset.rdtype, rdataset.covers)] = rdataset

    def _delete_name(self, name):
        self.changes[name] = {}

    def _delete_rdataset(self, name, rdtype, covers):
        self._touched(name).pop((rdtype, covers), None)

    def _name_exists(self, name):
        return bool(self.changes[name] if name in self.changes else self.manager.node(name))

    def _changed(self):
        return bool(self.changes)

    def rollback(self) -> None:
        if not self._ended:     # a commit that failed its checks has ended already: the
            super().rollback()  # error it raised is the one to see, not AlreadyEnded

    def _end_transaction(self, commit):
        if commit and self.changes:
            self.manager.commit(self.changes)

    def _set_origin(self, origin):
        pass

    def _iterate_rdatasets(self):
        raise NotImplementedError("an IXFR's transaction does not list the zone")

    def _iterate_names(self):
        raise NotImplementedError("an IXFR's transaction does not list the zone")

    def _get_node(self, name):
        rdatasets = self.changes[name] if name in self.changes else self.manager.node(name)
        if not rdatasets:
            return None
        node = dns.node.Node()
        node.rdatasets.extend(rdatasets.values())
        return node
