"""Which I/O backends this build has, and which of them can run on this machine."""
from __future__ import annotations

import errno
import logging
import os
import socket

from stormpy import _core
from stormpy.errors import BackendError

AF_XDP = getattr(socket, "AF_XDP", 44)
ORDER = ("socket", "memory", "packet", "xdp", "netmap")
BUILD_HINT = {
    "xdp": "not compiled in: build with libxdp-dev and libbpf-dev installed",
    "netmap": "not compiled in: build with NETMAP_INCLUDE=<dir holding net/netmap_user.h>",
}


def _probe_socket(family: int, kind: int, need: str) -> str | None:
    try:
        socket.socket(family, kind, 0).close()
        return None
    except PermissionError:
        return f"needs {need} (run as root)"
    except OSError as e:
        if e.errno in (errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT, errno.ESOCKTNOSUPPORT):
            return f"the kernel has no support: {e.strerror}"
        return f"cannot open a socket: {e.strerror}"


def why_unusable(name: str) -> str | None:
    """None when the backend can run here, else the reason, in a few words."""
    if name not in _core.COMPILED_BACKENDS:
        return BUILD_HINT.get(name, "not compiled in")
    if name == "packet":
        return _probe_socket(socket.AF_PACKET, socket.SOCK_RAW, "CAP_NET_RAW")
    if name == "xdp":
        return _probe_socket(AF_XDP, socket.SOCK_RAW, "CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF")
    if name == "netmap":
        return None if os.path.exists("/dev/netmap") else "/dev/netmap is missing: the netmap kernel module is not loaded"
    return None


def report() -> list[tuple[str, bool, bool, str]]:
    """(name, compiled in, usable here, why not) for every backend stormpy knows."""
    rows = []
    for name in ORDER:
        reason = why_unusable(name)
        rows.append((name, name in _core.COMPILED_BACKENDS, reason is None, reason or ""))
    return rows


def attach_xdp(iface: str, port: int, mode: str, tcp: bool = False, answer: bool = False):
    """The XDP program on iface; with answer, its answer stage (--xdp-answer) where the
    kernel takes it, else the steer program alone and one line saying so."""
    if answer:
        try:
            return _core.XdpProgram(iface, port, mode, tcp=tcp, answer=True)
        except BackendError as e:
            if "refused the XDP program" not in str(e):
                raise
            logging.getLogger("stormpy").warning(
                "--xdp-answer: %s; the workers answer every query", e)
    return _core.XdpProgram(iface, port, mode, tcp=tcp)


def warn_napi_deferral(iface: str) -> None:
    """--poll napi polls the queue from the worker only while the kernel holds its
    interrupts back; say so where the interface does not."""
    from stormpy.interfaces import napi_deferral
    knobs = napi_deferral(iface)
    if knobs is not None and 0 in knobs:
        logging.getLogger("stormpy").warning(
            "--poll napi: %s has napi_defer_hard_irqs %d and gro_flush_timeout %d, so its "
            "interrupts still run NAPI; set them (e.g. 2 and 20000) in "
            "/sys/class/net/%s/", iface, knobs[0], knobs[1], iface)
