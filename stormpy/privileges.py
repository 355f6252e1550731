"""--user: run as an unprivileged user once the rings and sockets are set up.

The server process keeps only the capabilities a replacement worker needs to open
its queue again (AF_XDP and AF_PACKET sockets, pinned UMEM, the XSK map, busy
polling), and none at all on the socket backend, whose sockets it keeps open.
A worker drops every capability once its backend is open: running the rings
needs none.
"""
from __future__ import annotations

import ctypes
import os
import pwd

from stormpy.errors import StormpyError

PR_SET_KEEPCAPS = 8
CAPABILITY_VERSION_3 = 0x20080522
CAP_NET_ADMIN, CAP_NET_RAW, CAP_IPC_LOCK, CAP_BPF = 12, 13, 14, 39

# What reopening a queue takes: AF_XDP/AF_PACKET sockets (NET_RAW), the UMEM's
# pinned pages (IPC_LOCK), the XSK map update (BPF, where unprivileged bpf() is
# off), SO_BUSY_POLL and SO_PREFER_BUSY_POLL (NET_ADMIN).
RING_CAPS = (CAP_NET_RAW, CAP_NET_ADMIN, CAP_IPC_LOCK, CAP_BPF)


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


_libc = ctypes.CDLL(None, use_errno=True)


def lookup(name: str) -> pwd.struct_passwd:
    """The user --user names; a one-line error when there is none."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise StormpyError(f"--user {name}: no such user") from None


def _capset(permitted: tuple[int, ...], effective: tuple[int, ...]) -> None:
    data = (_Data * 2)()
    for caps, field in ((permitted, "permitted"), (effective, "effective")):
        for cap in caps:
            word, bit = divmod(cap, 32)
            setattr(data[word], field, getattr(data[word], field) | 1 << bit)
    if _libc.capset(ctypes.byref(_Header(CAPABILITY_VERSION_3, 0)), data) != 0:
        err = ctypes.get_errno()
        raise StormpyError(f"cannot keep capabilities {permitted}: {os.strerror(err)}")


def _known(caps: tuple[int, ...]) -> tuple[int, ...]:
    """The capabilities this kernel has (CAP_BPF is 5.8+) and this process holds."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 40
    with open("/proc/self/status") as f:
        held = next(int(l.split()[1], 16) for l in f if l.startswith("CapPrm:"))
    return tuple(c for c in caps if c <= last and held >> c & 1)


def raise_effective() -> None:
    """In a worker about to open its queue: make the kept capabilities effective.
    A process may always do this with what it holds as permitted."""
    data = (_Data * 2)()
    if _libc.capget(ctypes.byref(_Header(CAPABILITY_VERSION_3, 0)), data) != 0:
        return
    for word in data:
        word.effective = word.permitted
    _libc.capset(ctypes.byref(_Header(CAPABILITY_VERSION_3, 0)), data)


def drop_to(user: pwd.struct_passwd, keep: tuple[int, ...] = ()) -> None:
    """Become `user` holding only the capabilities in keep, and only as permitted: the
    process that parses TCP queries and zone files never has them in effect; a worker
    raises them (raise_effective) just to open its queue."""
    keep = _known(keep)
    if os.getuid() == user.pw_uid and not keep:
        _capset((), ())
        return
    try:
        _libc.prctl(PR_SET_KEEPCAPS, 1 if keep else 0, 0, 0, 0)
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    except PermissionError:
        raise StormpyError(f"--user {user.pw_name}: switching users needs root "
                           f"(or CAP_SETUID and CAP_SETGID)") from None
    _capset(keep, ())


def effective_capabilities(pid: int = 0) -> int:
    """CapEff of a process, from /proc (for tests and `stormpy stats`)."""
    with open(f"/proc/{pid or os.getpid()}/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def user_name(uid: int) -> str:
    """A uid's name, or the number when the user database has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
