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
PR_SET_PDEATHSIG = 1
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


def _capset(caps: tuple[int, ...]) -> None:
    data = (_Data * 2)()
    for cap in caps:
        word, bit = divmod(cap, 32)
        data[word].effective |= 1 << bit
        data[word].permitted |= 1 << bit
    if _libc.capset(ctypes.byref(_Header(CAPABILITY_VERSION_3, 0)), data) != 0:
        err = ctypes.get_errno()
        raise StormpyError(f"cannot keep capabilities {caps}: {os.strerror(err)}")


def drop_to(user: pwd.struct_passwd, keep: tuple[int, ...] = ()) -> None:
    """Become `user` with only the capabilities in keep (effective and permitted)."""
    if os.getuid() == user.pw_uid and not keep:
        _capset(())
        return
    try:
        _libc.prctl(PR_SET_KEEPCAPS, 1 if keep else 0, 0, 0, 0)
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    except PermissionError:
        raise StormpyError(f"--user {user.pw_name}: switching users needs root "
                           f"(or CAP_SETUID and CAP_SETGID)") from None
    _capset(keep)


def restore_parent_death_signal(signal_number: int) -> None:
    """A change of user clears PR_SET_PDEATHSIG; a worker sets it again."""
    _libc.prctl(PR_SET_PDEATHSIG, signal_number, 0, 0, 0)


def effective_capabilities(pid: int = 0) -> int:
    """CapEff of a process, from /proc (for tests and `stormpy stats`)."""
    with open(f"/proc/{pid or os.getpid()}/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0
