"""`stormpy gen --backend packet|xdp`: DNS and echo requests as whole frames on an
interface's rings, as stormpy's servers receive them. The kernel's route gives the
interface and the source address, its neighbour table the next hop's MAC; a UDP socket
on the source port, never read, keeps the kernel from answering the replies it also
sees (AF_PACKET) with ICMP port unreachable."""
from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import time

from stormpy.errors import BackendError, StormpyError
from stormpy.interfaces import interface_identity, rx_queue_count

NEIGHBOUR_WAIT_S = 3.0


def _ip_json(*args) -> list:
    try:
        out = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, timeout=10)
        return json.loads(out.stdout) if out.stdout.strip() else []
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        raise StormpyError(f"gen: cannot ask the kernel (ip {' '.join(args)}): {e}") from None


def _neighbour_mac(hop: str, dev: str, prod: socket.socket) -> bytes:
    """The next hop's MAC, from the neighbour table; a datagram to its discard port
    makes the kernel resolve it first."""
    deadline = time.monotonic() + NEIGHBOUR_WAIT_S
    for attempt in range(int(NEIGHBOUR_WAIT_S / 0.05) + 1):
        for n in _ip_json("neigh", "show", "to", hop, "dev", dev):
            if n.get("lladdr") and not {"FAILED", "INCOMPLETE"} & set(n.get("state", [])):
                return bytes.fromhex(n["lladdr"].replace(":", ""))
        if attempt == 0:
            try:
                prod.sendto(b"", (hop, 9))
            except OSError:
                pass
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    raise StormpyError(f"gen: no MAC address for {hop} on {dev}: the next hop does not "
                       f"answer ARP or neighbour discovery")


def open_ring(backend: str, iface: str | None, host: str, port: int):
    """(the GenRing, with its path set; the socket held on the source port)."""
    from stormpy import _core

    route = next(iter(_ip_json("route", "get", host)), None)
    if not route or "dev" not in route:
        raise StormpyError(f"gen: no route to {host}")
    dev = route["dev"]
    if iface and iface != dev:
        raise StormpyError(f"gen: the route to {host} goes through {dev}, not --iface {iface}")
    if dev == "lo":
        raise StormpyError(f"gen: {host} is this host's own address; --backend {backend} "
                           f"needs an Ethernet interface, use --backend socket")
    src = route.get("prefsrc")
    if not src:
        raise StormpyError(f"gen: {dev} has no source address for {host}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    held = socket.socket(family, socket.SOCK_DGRAM)
    try:
        held.bind((src, 0))
        sport = held.getsockname()[1]
        mac = _neighbour_mac(route.get("gateway", host), dev, held)
        ident = interface_identity(dev)
        if backend == "xdp":
            if rx_queue_count(dev) > 1:
                raise StormpyError(f"gen: {dev} has {rx_queue_count(dev)} RX queues and gen "
                                   f"reads queue 0 only; use --backend packet")
            ring = _core.GenRing.xdp(_core.XdpProgram(dev, sport))
        else:
            ring = _core.GenRing.packet(dev)
        ring.path(ipaddress.ip_address(src).packed, ipaddress.ip_address(host).packed,
                  ident["mac"], mac, sport, port)
    except BackendError as e:
        held.close()
        raise StormpyError(f"gen: --backend {backend}: {e}") from None
    except BaseException:
        held.close()
        raise
    return ring, held
