"""The I/O backends a test body runs against, as pytest parameters: each one skipped,
with its reason printed, only where this machine or build really lacks it."""
import pytest

from stormpy import _core
from support.netns import why_no_netns

NO_NETNS = why_no_netns()
NO_XDP = (None if "xdp" in _core.COMPILED_BACKENDS else
          "AF_XDP is not compiled in (libxdp-dev, libbpf-dev or clang missing at build time)")
for _reason in {NO_NETNS, NO_XDP} - {None}:
    print(f"\nSKIP ring backend cases: {_reason}")

# AF_PACKET and AF_XDP across a veth pair between two namespaces
RINGS = [pytest.param("packet", marks=pytest.mark.skipif(NO_NETNS is not None, reason=NO_NETNS or "")),
         pytest.param("xdp", marks=pytest.mark.skipif(NO_NETNS is not None or NO_XDP is not None,
                                                      reason=NO_NETNS or NO_XDP or ""))]
# the kernel's sockets on loopback, then the rings
EVERY_BACKEND = ["socket"] + RINGS
# the rings again, with the XDP program answering what it holds (serve-dns --xdp-answer)
DRIVER = pytest.param("xdp-answer", marks=pytest.mark.skipif(
    NO_NETNS is not None or NO_XDP is not None, reason=NO_NETNS or NO_XDP or ""))
RINGS_AND_DRIVER = RINGS + [DRIVER]


def ring_serving(backend: str) -> tuple[list, dict]:
    """serve-dns's arguments for one of RINGS_AND_DRIVER, and the VethPair options it needs
    (the client side's XDP program, which takes what the server's sends in native mode)."""
    if backend == "xdp-answer":
        return ["--backend", "xdp", "--xdp-answer"], {"client_xdp": True}
    return ["--backend", backend], {}
