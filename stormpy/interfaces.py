"""What the kernel knows of a network interface: its RX queues (one worker each) and its
MAC, MTU and addresses (what ring workers answer for)."""
from __future__ import annotations

import ipaddress
import json
import os
import subprocess

from stormpy.errors import StormpyError


def rx_queue_count(iface: str) -> int:
    """The device's RX queues, from sysfs (veth reports what it was created with)."""
    try:
        return max(1, len([q for q in os.listdir(f"/sys/class/net/{iface}/queues")
                           if q.startswith("rx-")]))
    except OSError:
        raise StormpyError(f"--iface {iface}: no such network interface") from None


def interface_identity(iface: str, need_address: bool = True) -> dict:
    """What the kernel has for iface: its MAC, MTU and addresses. Ring workers answer
    only frames sent to them; netmap serving answers ARP, ping and NDP for the first
    IPv4 and global IPv6 address ("ipv4", "ipv6")."""
    try:
        with open(f"/sys/class/net/{iface}/address") as f:
            mac = bytes.fromhex(f.read().strip().replace(":", ""))
        with open(f"/sys/class/net/{iface}/mtu") as f:
            mtu = int(f.read())
        out = subprocess.run(["ip", "-j", "addr", "show", "dev", iface], capture_output=True,
                             text=True, timeout=10).stdout
        addrs = json.loads(out)[0]["addr_info"] if out.strip() else []
    except (OSError, ValueError, IndexError, KeyError, subprocess.SubprocessError) as e:
        raise StormpyError(f"--iface {iface}: cannot read its addresses: {e}") from None
    ident = {"mac": mac, "mtu": min(mtu, 65535), "addresses": []}
    for a in addrs:
        ip = ipaddress.ip_address(a["local"])
        ident["addresses"].append(ip.packed)
        key = "ipv4" if ip.version == 4 else "ipv6"
        if key not in ident and not ip.is_link_local:
            ident[key] = ip.packed
    if not ident["addresses"] and need_address:
        raise StormpyError(f"--iface {iface}: it has no IP address to serve on")
    return ident


def link_kind(iface: str) -> str | None:
    """What kind of virtual link iface is ("veth", "bridge", ...), None for hardware."""
    try:
        out = subprocess.run(["ip", "-j", "-d", "link", "show", "dev", iface], capture_output=True,
                             text=True, timeout=10).stdout
        return json.loads(out)[0].get("linkinfo", {}).get("info_kind") if out.strip() else None
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def napi_deferral(iface: str) -> tuple[int, int] | None:
    """iface's (napi_defer_hard_irqs, gro_flush_timeout ns), None where unreadable."""
    try:
        with open(f"/sys/class/net/{iface}/napi_defer_hard_irqs") as a, \
                open(f"/sys/class/net/{iface}/gro_flush_timeout") as b:
            return int(a.read()), int(b.read())
    except (OSError, ValueError):
        return None
