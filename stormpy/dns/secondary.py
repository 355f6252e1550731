"""A zone this server follows from its primary (RFC 1034 4.3.5, RFC 1995, 1996, 5936).

The zone comes by AXFR at start, then the SOA's timers run: every refresh interval
the primary's SOA serial is asked, after a failure every retry interval, and once
expire has passed since the primary last answered, the zone stops being served
(SERVFAIL, as Knot and NSD) until it answers again. A NOTIFY from the primary starts a
check at once. A newer serial is fetched by IXFR, applied as a delta to the zone in
a transaction (dnspython's), or by AXFR where the primary cannot or the IXFR fails.
A zone the C path takes is held in C only (patchable.py): an AXFR read in C, the
IXFRs after it applied to that store; one it declines (DNSSEC, DNAME) is dnspython's.
A transfer that is cut, garbled or inconsistent changes nothing: the data before it
keeps serving.

Each transferred zone is written to ZONE_DIR/<origin>.zone, and the file's mtime is
the primary's last answer, so a restart serves at once (unless expired meanwhile)
and catches up by IXFR from the saved serial.

All of it is in the server process: dnspython's transfers in the default thread
pool, zone files in a thread of their own at a lower priority, one asyncio task per
zone for the timers."""
from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.xfr
import dns.zone

from stormpy import _core
from stormpy.dns.answer import IN, Answer, encode_variable
from stormpy.dns.compiler import DNS_PATCHES, tag
from stormpy.dns.inbound import axfr_in_c, inbound_xfr
from stormpy.dns.native import NativeZone
from stormpy.dns.patchable import PatchableZone
from stormpy.dns.transfer import keyring_of, newer
from stormpy.dns.zone import Zone
from stormpy.errors import ZoneError

log = logging.getLogger("stormpy")

QUERY_SECONDS = 3.0           # an SOA query's wait
TRANSFER_SECONDS = 600.0      # one transfer, parse included (a million records: about a minute)
MIN_WAIT = 1.0                # the shortest timer (a zone with refresh 0 does not spin)
_writer_pool: ThreadPoolExecutor | None = None


def _writer() -> ThreadPoolExecutor:
    """The thread that writes zone files, niced: on a busy machine the compile and
    the workers a NOTIFY waits for go first (a file is a restart's, not a query's)."""
    global _writer_pool
    if _writer_pool is None:
        _writer_pool = ThreadPoolExecutor(1, thread_name_prefix="stormpy-save",
                                          initializer=_lower_priority)
    return _writer_pool


def _lower_priority() -> None:
    me = threading.get_native_id()
    try:        # Linux: the calling thread's own nice value
        os.setpriority(os.PRIO_PROCESS, me, min(os.getpriority(os.PRIO_PROCESS, me) + 10, 19))
    except OSError:
        pass


class TransferFailed(Exception):
    """One line: why the primary did not give the zone."""


class TransferZone(dns.zone.Zone):
    """A zone that remembers whether its last transaction replaced it (AXFR, or an IXFR
    answered with the full zone) or changed it (an IXFR's delta), and which names its
    deltas changed since the C store last took them (None: unknown, take it all)."""
    replaced = False
    changed_names: set | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lock = threading.Lock()    # a commit and its changed names, seen together

    def writer(self, replacement: bool = False):
        self.replaced = replacement
        return super().writer(replacement)

    def _commit_version(self, txn, version, origin):
        with self.lock:
            super()._commit_version(txn, version, origin)
            if txn.replacement:
                self.changed_names = None
            elif self.changed_names is not None:
                self.changed_names |= version.changed


class Secondary:
    def __init__(self, origin: dns.name.Name, primary: tuple[str, int], key, zone_dir: str):
        self.origin, self.primary, self.key = origin, primary, key
        self.path = os.path.join(zone_dir, (origin.to_text(omit_final_dot=True) or "root") + ".zone")
        self.zone: TransferZone | None = None       # dnspython's, where C declines it
        self.store: PatchableZone | None = None     # or held in C
        self.answered_at = 0.0        # wall clock of the primary's last answer
        self.expired = False
        self.last_error: str | None = None
        self.transfers = {"axfr": 0, "ixfr": 0, "failed": 0}
        self._wake: asyncio.Event | None = None
        self._prepared = None         # (zone's id, serial, what serving() gives for them)
        self._saving, self._save_pending = None, False      # the zone file being written
        self.uncompiled: int | None = None    # a serial transferred that did not compile

    @property
    def name(self) -> str:
        return self.origin.to_text()

    def _held(self):
        """The zone's data: dnspython's or C's; None before any, or when C's is unusable."""
        if self.store is not None:
            return None if self.store.broken else self.store
        return self.zone

    @property
    def serial(self) -> int | None:
        soa = self._held().get_soa() if self._held() is not None else None
        return soa.serial if soa is not None else None

    def timers(self) -> tuple[float, float, float]:
        """refresh, retry, expire (seconds) from the SOA; before any data, retry soon."""
        soa = self._held().get_soa() if self._held() is not None else None
        if soa is None:
            return MIN_WAIT, 5.0, float("inf")
        return (max(MIN_WAIT, soa.refresh), max(MIN_WAIT, soa.retry), max(MIN_WAIT, soa.expire))

    def serving(self) -> Zone | None:
        """The zone to compile, or None (SERVFAIL): no data yet, or expired. Raises
        ZoneError when an IXFR does not apply to the store (the old table serves on)."""
        if self._held() is None or self.expired:
            if self.store is not None and self.store.broken and not self.expired:
                raise ZoneError(f"secondary {self.name}: {self.store.broken}")
            return None
        if self.store is not None:
            try:
                return self.store.applied()
            except _core.ZoneDeclined as e:
                raise ZoneError(f"secondary {self.name}: {e}") from None
        # an IXFR changes the zone in place, and always its serial
        zone = self.zone
        with zone.lock:     # (a `ctl reload` may come while an IXFR commits)
            serial = zone.get_soa().serial
            if self._prepared is None or self._prepared[:2] != (id(zone), serial):
                from stormpy.dns import native          # the C compiler, when it takes the zone
                prepared = self._patched(native, zone) or native.from_records(self.path, zone)
                if prepared is not None:
                    zone.changed_names = set()
                self._prepared = (id(zone), serial,
                                  prepared or Zone(path=self.path, origin=self.origin, zone=zone))
            return self._prepared[2]

    def _patched(self, native, zone):
        """The C store of the last serial with the IXFRs since applied to it, in time
        proportional to the zone's records, not to a pass over them in Python; or None."""
        if self._prepared is None or self._prepared[0] != id(zone):
            return None
        prepared, names = self._prepared[2], zone.changed_names
        if not isinstance(prepared, native.NativeZone) or names is None:
            return None
        self._prepared = None                   # patched in place: no longer the old serial
        return prepared if native.patch(prepared, zone, names) else None

    # -- the zone on disk --------------------------------------------------------
    def load_saved(self) -> None:
        """The copy a previous run wrote, if any; whether it has expired since. Read in
        C where it can be (a million records in about a second, where dnspython takes
        a minute), and the IXFRs after it are applied there."""
        if not os.path.exists(self.path):
            return
        from stormpy.dns import native
        restored = native.load(self.path, self.name)
        if restored is not None and restored.origin == self.origin:
            self.store = PatchableZone(restored)
            self.answered_at = os.stat(self.path).st_mtime
            self.check_expired()
            log.info("secondary %s: serial %s from %s (read in C)%s", self.name, self.serial,
                     self.path, " (expired)" if self.expired else "")
            return
        try:
            zone = dns.zone.from_file(self.path, origin=self.origin, relativize=False,
                                      zone_factory=TransferZone)
            answered_at = os.stat(self.path).st_mtime
        except (OSError, dns.exception.DNSException) as e:
            log.warning("secondary %s: saved copy %s unusable (%s); waiting for a transfer",
                        self.name, self.path, e)
            return
        self.zone, self.answered_at = zone, answered_at
        self.check_expired()
        log.info("secondary %s: serial %s from %s%s", self.name, self.serial, self.path,
                 " (expired)" if self.expired else "")

    def save(self, zone=None) -> None:
        """The zone to disk: zone (a snapshot of it, or the C store that serves it,
        copied and written by ldns without the GIL, 1.6 s a million records, where
        dnspython takes 10 s holding the GIL throughout) or the zone itself."""
        tmp = self.path + ".tmp"
        try:
            try:
                if isinstance(zone, NativeZone):
                    with zone.lock:         # a copy (tens of ms): a patch need not wait
                        copy = zone.native.copy()
                    copy.write(tmp)
                else:
                    (zone or self.zone).to_file(tmp, relativize=False, want_origin=True)
            except _core.ZoneDeclined:      # a record ldns cannot print: dnspython's view
                (self.zone or zone.zone).to_file(tmp, relativize=False, want_origin=True)
            os.replace(tmp, self.path)
            self._touch()
        except OSError as e:        # served all the same; a restart will transfer again
            log.error("secondary %s: cannot save %s: %s", self.name, self.path, e.strerror or e)

    def _snapshot(self) -> dns.zone.Zone:
        """The zone as it is now, unchanged by later IXFRs: a transaction commits a new
        dict of nodes, copying each node it changes."""
        snapshot = dns.zone.Zone(self.origin, relativize=False)
        snapshot.nodes = self.zone.nodes
        return snapshot

    def _save_soon(self, loop) -> None:
        """save() in a thread, off the timers: a big zone's file takes seconds, and a
        NOTIFY meanwhile is acted on at once. Saves never overlap; one asked for while
        another runs follows it, so the last written is the latest serial."""
        if self._saving is not None and not self._saving.done():
            self._save_pending = True
            return
        self._save_pending = False
        prepared = self._prepared[2] if self._prepared is not None else None
        if self.store is not None:
            prepared = self.store.held
        what = prepared if isinstance(prepared, NativeZone) else self._snapshot()
        try:
            self._saving = loop.run_in_executor(_writer(), self.save, what)
        except RuntimeError:        # the server is stopping: the latest serial, written now
            self.save(what)
            return
        self._saving.add_done_callback(lambda _: self._save_pending and self._save_soon(loop))

    def _touch(self) -> None:
        self.answered_at = time.time()
        try:
            os.utime(self.path, (self.answered_at, self.answered_at))
        except OSError:
            pass

    def check_expired(self) -> bool:
        """Whether the zone just expired (it stays so until the primary answers)."""
        if self._held() is None or self.expired:
            return False
        if time.time() - self.answered_at < self.timers()[2]:
            return False
        self.expired = True
        return True

    # -- talking to the primary (blocking: run in a thread) ----------------------
    def refresh(self) -> str | None:
        """Ask the primary's serial, fetch the zone if it is newer. What changed, for
        the log, or None when nothing did. Raises TransferFailed."""
        remote = self._primary_serial()
        current = self.serial if self._held() is not None else None
        if current is not None and current == self.uncompiled:
            current = None                      # AXFR: the zone held may be a bad delta's
        elif current is not None and not newer(remote, current):
            self._touch()
            return None
        how = self._transfer(current)
        self.answered_at = time.time()          # the file's mtime follows once it is saved
        return how

    def _tsig(self) -> dict:
        if self.key is None:
            return {}
        return {"keyring": keyring_of([self.key]), "keyname": self.key.name,
                "keyalgorithm": self.key.algorithm}

    def _primary_serial(self) -> int:
        host, port = self.primary
        q = dns.message.make_query(self.origin, dns.rdatatype.SOA)
        q.flags = 0
        if self.key is not None:
            q.use_tsig(keyring_of([self.key]), self.key.name, algorithm=self.key.algorithm)
        try:
            r = dns.query.udp(q, host, timeout=QUERY_SECONDS, port=port)
            if r.flags & dns.flags.TC:
                r = dns.query.tcp(q, host, timeout=QUERY_SECONDS, port=port)
        except (dns.exception.DNSException, OSError, EOFError) as e:
            raise TransferFailed(f"SOA query to {_where(self.primary)}: {_why(e)}") from None
        soa = r.get_rrset(r.answer, self.origin, dns.rdataclass.IN, dns.rdatatype.SOA)
        if r.rcode() != dns.rcode.NOERROR or not soa:
            raise TransferFailed(f"SOA query to {_where(self.primary)}: "
                                 f"{dns.rcode.to_text(r.rcode())}, no SOA")
        return soa[0].serial

    def _transfer(self, current: int | None) -> str:
        """IXFR from current (applied in place) or AXFR (into a new zone). Raises
        TransferFailed; the zone is untouched then."""
        if current is not None:
            try:
                self._inbound(self._held(), current)
                replaced = self.store is None and self.zone.replaced
                self.transfers["axfr" if replaced else "ixfr"] += 1
                return f"{'IXFR (full zone)' if replaced else 'IXFR'} {current} -> {self.serial}"
            except TransferFailed as e:
                log.info("secondary %s: IXFR failed (%s), trying AXFR", self.name, e)
        stored = self._axfr_in_c()
        if stored is not None:          # held in C from here on
            self.zone, self.store, self._prepared = None, PatchableZone(stored), None
            self.transfers["axfr"] += 1
            return f"AXFR serial {self.serial} (read in C)"
        zone = TransferZone(self.origin, relativize=False)
        self._inbound(zone, None)
        self.zone, self.store = zone, None
        self.transfers["axfr"] += 1
        return f"AXFR serial {self.serial}"

    def _axfr_in_c(self) -> NativeZone | None:
        """An AXFR read into a C store (seconds a million records, dnspython's 90), or
        None: the build or the transfer leaves it to dnspython's checks (zone/axfr.h)."""
        from stormpy.dns import native
        if not native.enabled():
            return None
        host, port = self.primary
        try:
            query, _ = dns.xfr.make_query(TransferZone(self.origin, relativize=False),
                                          serial=None, **self._tsig())
            store = axfr_in_c(host, port, query, self.key, timeout=QUERY_SECONDS * 3,
                              lifetime=TRANSFER_SECONDS)
        except _core.ZoneDeclined as e:
            log.info("secondary %s: AXFR not taken in C (%s); again with dnspython", self.name, e)
            return None
        except (dns.exception.DNSException, OSError, EOFError, ValueError) as e:
            raise TransferFailed(f"AXFR from {_where(self.primary)}: {_why(e)}") from None
        return NativeZone(self.path, self.name, store)

    def _inbound(self, zone: TransferZone | PatchableZone, serial: int | None) -> None:
        host, port = self.primary
        try:
            query, _ = dns.xfr.make_query(zone, serial=serial, **self._tsig())
            inbound_xfr(host, port, zone, query, timeout=QUERY_SECONDS * 3,
                        lifetime=TRANSFER_SECONDS)
        except (dns.exception.DNSException, OSError, EOFError, ValueError) as e:
            raise TransferFailed(f"{'IXFR' if serial is not None else 'AXFR'} from "
                                 f"{_where(self.primary)}: {_why(e)}") from None
        if zone.get_soa() is None or zone.get_rdataset(self.origin, dns.rdatatype.NS) is None:
            raise TransferFailed(f"transfer from {_where(self.primary)}: no SOA and NS at "
                                 f"the origin")

    # -- the timers (on the event loop) -----------------------------------------
    def notify(self) -> None:
        """The primary said the zone changed: check now."""
        if self._wake is not None:
            self._wake.set()

    async def follow(self, reload) -> None:
        """Forever: refresh on the SOA's timers or a NOTIFY; reload(name) publishes."""
        self._wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        wait = 0.0
        while True:
            if wait > 0:
                if self._held() is not None and not self.expired:
                    wait = min(wait, max(0.05, self.answered_at + self.timers()[2] - time.time()))
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except asyncio.TimeoutError:
                    pass
                self._wake.clear()
            if self.check_expired():
                log.error("secondary %s: expired (the primary %s has not answered for %d s); "
                          "answering SERVFAIL", self.name, _where(self.primary), self.timers()[2])
                await reload(self.name)
            was_expired = self.expired
            try:
                changed = await loop.run_in_executor(None, self.refresh)
            except TransferFailed as e:
                self.transfers["failed"] += 1
                self.last_error = str(e)
                log.warning("secondary %s: %s; %s", self.name, e,
                            f"keeping serial {self.serial}" if self._held() is not None
                            else "no data yet (SERVFAIL)")
                wait = self.timers()[1]
                continue
            self.last_error = None
            self.expired = False
            if changed or was_expired:
                log.info("secondary %s: %s", self.name, changed or f"serving serial {self.serial} again")
                result = await reload(self.name)
                if changed:
                    self._save_soon(loop)
                if result and result.get("error"):
                    # the old table serves on; fetch the whole zone again, even at this serial
                    self.uncompiled, self.last_error = self.serial, result["error"]
                    log.warning("secondary %s: serial %s not published (%s); the whole zone "
                                "is fetched again in %d s", self.name, self.serial,
                                result["error"], self.timers()[1])
                    wait = self.timers()[1]
                    continue
                self.uncompiled = None
            wait = self.timers()[0]


def servfail_for(origins: list[dns.name.Name], zone_slots: dict):
    """compile_zones()'s extend hook: every name in these zones (not yet transferred,
    or expired) answered SERVFAIL, counted as the zone's."""
    def extend(builder) -> None:
        wire = encode_variable(dns.name.root, Answer(rcode=dns.rcode.SERVFAIL, aa=False))[0]
        for origin in origins:
            index = builder.add_response(wire, DNS_PATCHES, dns.rcode.SERVFAIL |
                                         zone_slots.get(origin, 0) << 8)
            key = origin.canonicalize().to_wire()
            builder.add_key(tag(_core.DNS_OTHER, IN, 0), key, index)
            builder.add_key(tag(_core.DNS_BELOW_OTHER, IN, 0), key, index)
    return extend


def _where(address: tuple[str, int]) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _why(e: BaseException) -> str:
    if isinstance(e, dns.xfr.TransferError):
        return f"primary answered {dns.rcode.to_text(e.rcode)}"
    if isinstance(e, dns.exception.Timeout):
        return "timed out"
    if isinstance(e, EOFError):
        return "the connection closed before the transfer's end"
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
