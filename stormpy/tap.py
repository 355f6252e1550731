"""`stormpy tap`: the frames a running server's ring workers receive and send, as pcapng.

AF_XDP takes frames before the kernel's packet taps, so tcpdump sees none of them.
A server on rings maps a tap region (native/include/stormpy/engine/tap.h) before its
workers fork: a file under /dev/shm, 0600, named in its control socket's snapshot,
with one ring per worker. `stormpy tap` maps the same file and attaches; from the
next batch each worker copies what it receives (before answering) and what it sends
(as submitted) into its ring, until the tap detaches or stops writing its heartbeat
(SIGKILL included: the workers stop within two seconds). With no tap attached a
worker pays one load and one branch per batch.

The server side (create_region, region_status, remove_region) and the command."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import struct
import sys
import time

from stormpy import argtypes
from stormpy.errors import StormpyError

log = logging.getLogger("stormpy")

SNAPLEN = 65535
REGION_DIR = "/dev/shm"
REGION_PREFIX = "stormpy-tap."
IDLE_SLEEP = 0.01        # an empty drain waits this long; far below the heartbeat period


# -- the server's side -------------------------------------------------------------
def create_region(workers: int, mib: int):
    """The tap region for `workers` ring workers of `mib` MiB each, or None (no
    tap: --tap-buffer 0, or no room, said once in the log)."""
    if not mib:
        return None
    from stormpy import _core
    remove_dead_regions()
    path = os.path.join(REGION_DIR, f"{REGION_PREFIX}{os.getpid()}")
    try:
        return _core.TapRegion.create(path, workers, mib << 20, SNAPLEN)
    except OSError as e:
        log.warning("no tap region at %s (%s): `stormpy tap` will not see this server", path,
                    e.strerror or e)
        return None


def remove_dead_regions() -> None:
    """Regions of servers that were killed (SIGKILL leaves no chance to remove them):
    the pid in the name runs no more."""
    try:
        names = [n for n in os.listdir(REGION_DIR) if n.startswith(REGION_PREFIX)]
    except OSError:
        return
    for name in names:
        try:
            os.kill(int(name[len(REGION_PREFIX):]), 0)
        except ValueError:
            continue
        except ProcessLookupError:
            try:
                os.unlink(os.path.join(REGION_DIR, name))
            except OSError:
                pass
        except OSError:
            pass                    # alive, another user's


def give_region(region, user) -> None:
    """The region becomes `user`'s (a pwd entry), before the server drops root to it."""
    if region is not None:
        try:
            os.chown(region.path, user.pw_uid, user.pw_gid)
        except OSError:
            pass


def remove_region(region) -> None:
    if region is not None:
        try:
            os.unlink(region.path)
        except OSError:
            pass


def region_status(region, cfg) -> dict:
    """What the snapshot says of the tap: where its region is, or why there is none."""
    if region is None:
        why = ("it serves on the kernel's sockets, which tcpdump sees: tcpdump -i any port N"
               if not cfg.iface else "it was started with --tap-buffer 0" if not cfg.tap_buffer
               else "it could not create its tap region (see its log)")
        return {"available": False, "reason": why}
    return {"available": True, "path": region.path, "session": region.attached(),
            "rings": region.counters()}


# -- the command -------------------------------------------------------------------
def add_arguments(p) -> None:
    from stormpy.config import DEFAULT_CONTROL
    p.add_argument("--control", default=DEFAULT_CONTROL, metavar="PATH",
                   help=f"the server's --control socket (default {DEFAULT_CONTROL})")
    p.add_argument("-w", dest="write", required=True, metavar="FILE",
                   help="write pcapng here; - for standard output (| wireshark -k -i -)")
    p.add_argument("--filter", default="", metavar="EXPR",
                   help="keep only frames matching every word: rx, tx, port N, worker N "
                   "(e.g. 'rx port 53'); default everything")
    p.add_argument("-c", dest="count", type=argtypes.positive, default=0, metavar="COUNT",
                   help="stop after COUNT frames")
    p.add_argument("--duration", type=argtypes.seconds, default=0.0, metavar="S",
                   help="stop after S seconds (default: at SIGINT or SIGTERM)")


def parse_filter(text: str):
    """The --filter words as a predicate of (worker, direction, frame)."""
    from stormpy import _core
    words, tests = text.replace(" and ", " ").split(), []
    while words:
        word = words.pop(0)
        if word in ("rx", "tx"):
            d = _core.TAP_RX if word == "rx" else _core.TAP_TX
            tests.append(lambda w, dr, f, d=d: dr == d)
        elif word in ("port", "worker") and words:
            value = words.pop(0)
            try:
                n = argtypes.port(value) if word == "port" else argtypes.non_negative(value)
            except argparse.ArgumentTypeError as e:
                raise StormpyError(f"--filter {text!r}: {e}") from None
            tests.append((lambda w, dr, f, n=n: n in frame_ports(f)) if word == "port" else
                         (lambda w, dr, f, n=n: w == n))
        else:
            raise StormpyError(f"--filter {text!r}: expected rx, tx, port N or worker N, "
                               f"not {word!r}")
    return lambda w, d, f: all(t(w, d, f) for t in tests)


def frame_ports(frame: bytes) -> tuple:
    """The UDP or TCP ports of an Ethernet frame (one 802.1Q/802.1ad tag allowed), or ()."""
    off, etype = 14, frame[12:14]
    if etype in (b"\x81\x00", b"\x88\xa8"):
        off, etype = 18, frame[16:18]
    if etype == b"\x08\x00" and len(frame) >= off + 20:
        proto, off = frame[off + 9], off + (frame[off] & 15) * 4
    elif etype == b"\x86\xdd" and len(frame) >= off + 40:
        proto, off = frame[off + 6], off + 40
    else:
        return ()
    return struct.unpack_from("!HH", frame, off) if proto in (6, 17) and len(frame) >= off + 4 \
        else ()


class PcapngWriter:
    """pcapng (draft-ietf-opsawg-pcapng): one section, one Ethernet interface per
    worker with nanosecond timestamps, each frame an Enhanced Packet Block whose
    flags say inbound or outbound."""

    def __init__(self, out, interfaces: list[str], snaplen: int = SNAPLEN):
        self.out = out
        self._block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
        for name in interfaces:
            self._block(1, struct.pack("<HHI", 1, 0, snaplen) +
                        self._option(2, name.encode()) + self._option(9, b"\x09") +
                        self._option(0, b""))

    @staticmethod
    def _option(code: int, value: bytes) -> bytes:
        return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)

    def _block(self, kind: int, body: bytes) -> None:
        n = 12 + len(body)
        self.out.write(struct.pack("<II", kind, n) + body + struct.pack("<I", n))

    def frame(self, interface: int, ts_ns: int, length: int, data: bytes, inbound: bool):
        flags = self._option(2, struct.pack("<I", 1 if inbound else 2)) + self._option(0, b"")
        self._block(6, struct.pack("<IIIII", interface, ts_ns >> 32, ts_ns & 0xFFFFFFFF,
                                   len(data), length) +
                    data + b"\0" * (-len(data) % 4) + flags)


def _open_region(control: str):
    from stormpy import _core
    from stormpy.control import read_snapshot

    tap = read_snapshot(control).get("tap") or {
        "available": False, "reason": "this server is older than stormpy tap"}
    if not tap["available"]:
        raise StormpyError(f"the server on {control} has nothing to tap: {tap['reason']}")
    try:
        return _core.TapRegion.open(tap["path"])
    except PermissionError:
        raise StormpyError(f"{tap['path']}: permission denied (run as root or as the "
                           f"server's user)") from None
    except (OSError, ValueError) as e:
        raise StormpyError(f"{tap['path']}: {getattr(e, 'strerror', None) or e}") from None


def run(args) -> int:
    from stormpy import _core

    keep = parse_filter(args.filter)
    region = _open_region(args.control)
    session = os.getpid()
    held = region.attach(session)
    if held:
        raise StormpyError(f"another tap (pid {held}) is attached to this server")
    dropped = sum(r["drops"] for r in region.counters())
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(True))
    try:
        out = sys.stdout.buffer if args.write == "-" else open(args.write, "wb")
    except OSError as e:
        region.detach(session)
        raise StormpyError(f"{args.write}: {e.strerror or e}") from None
    wall = time.time_ns() - time.monotonic_ns()     # the workers stamp CLOCK_MONOTONIC
    deadline = time.monotonic() + args.duration if args.duration else None
    written = 0

    def write(frames) -> bool:
        """Writes what the filter keeps; False once COUNT frames are written."""
        nonlocal written
        for worker, direction, ts, length, data in frames:
            if keep(worker, direction, data):
                pcap.frame(worker, wall + ts, length, data, direction == _core.TAP_RX)
                written += 1
                if written == args.count:
                    return False
        return True

    try:
        pcap = PcapngWriter(out, [f"stormpy worker {i}" for i in range(region.rings)])
        out.flush()
        while not stop and (deadline is None or time.monotonic() < deadline):
            region.heartbeat()
            if region.attached() != session and region.attach(session):
                raise StormpyError("another tap took over this server (this one stalled "
                                   "for more than two seconds)")
            frames = region.drain(1024)
            if not write(frames):
                stop.append(True)
            if frames:
                out.flush()
            else:
                time.sleep(IDLE_SLEEP)
        region.detach(session)
        while not args.count or written < args.count:   # what was copied before the stop
            frames = region.drain(1024)
            if not frames or not write(frames):
                break
    except BrokenPipeError:
        pass                                        # the reader has what it wanted
    finally:
        region.detach(session)
        dropped = sum(r["drops"] for r in region.counters()) - dropped
        try:
            out.flush()
        except OSError:
            pass
        if out is not sys.stdout.buffer:
            out.close()
    print(f"stormpy tap: {written} frames written, {dropped} dropped in a full ring",
          file=sys.stderr)
    return 0
