"""Servers other than serve-dns for the labs (serve-http, a responder program), started
like common.Server's serve-dns: in the server namespace, pinned to SERVER_CPU, waited
for until their own check finds nothing wrong, stopped on the way out; and what the
client's veth received, the wire's own count of the replies' bytes."""
from __future__ import annotations

import sys

from stormpy.bench.netns import IFACE, VethPair
from stormpy.lab.common import SERVER_CPU, LabError, Server


class CommandServer(Server):
    """`python ARGS...` in the server namespace on SERVER_CPU; ready when check() returns
    no problems (a list of one-line texts); check(wait) may wait up to `wait` seconds for
    a first answer."""

    def __init__(self, pair: VethPair, name: str, args: list, check, log_path: str):
        self.pair, self.wl, self.log_path, self.proc = pair, None, log_path, None
        self.NAME, self.check = name, check
        self.argv = pair.argv(pair.server, "taskset", "-c", str(SERVER_CPU), sys.executable,
                              *args)

    def problems(self, wait: float) -> list:
        return self.check(wait)


def client_received(pair: VethPair) -> tuple[int, int]:
    """(bytes, frames) the client's veth has received so far: the server's replies and
    whatever else it sent (TCP's ACKs), counted by the kernel, not by the generator."""
    counts = []
    for name in ("rx_bytes", "rx_packets"):
        r = pair.run(pair.client, "cat", f"/sys/class/net/{IFACE}/statistics/{name}")
        if r.returncode != 0:
            raise LabError(f"cannot read {IFACE}'s {name}: {r.stderr.strip() or 'failed'}")
        counts.append(int(r.stdout))
    return counts[0], counts[1]
