"""One zone answered three ways for comparison: by each compiler in process (Python and
C) and by a live knotd, plain and signed (NSEC, NSEC3) where ldns-signzone is here."""
import dns.message
import pytest

from stormpy import _core
from stormpy.dns import native
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone
from support import signing
from support.client import tcp_query, udp_query
from support.servers import knotd_path


def zone_variants(directory, text: str, origin: str) -> dict:
    """The zone as written ("plain"), and signed ("nsec", "nsec3") when ldns-signzone is
    here: kind -> path."""
    plain = directory / "ex.zone"
    plain.write_text(text)
    paths = {"plain": str(plain)}
    if signing.available():
        for kind in ("nsec", "nsec3"):
            paths[kind] = signing.sign_zone(str(plain), origin, str(directory), kind == "nsec3")
    return paths


def compile_with(path: str, python: bool):
    """The zone at path compiled by the Python compiler, or read and compiled in C."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORMPY_ZONE_LOADER", "python" if python else "c")
        zone = load_zone(path)
        if python:
            return compile_zones([zone])[0]
        assert isinstance(zone, native.NativeZone), "read by dnspython, not in C"
        compiled = native.compile_zones([zone], None, None, {})
        assert compiled is not None, "the C compiler declined"
        return compiled[0]


class Tables:
    """compile_with() once per zone and compiler."""

    def __init__(self):
        self._tables = {}

    def get(self, path: str, python: bool):
        if python is False and not _core.ZONE_READER:
            pytest.skip("built without ldns")
        if (path, python) not in self._tables:
            self._tables[(path, python)] = compile_with(path, python)
        return self._tables[(path, python)]

    def answer(self, path: str, python: bool, query, tcp=True, max_udp=4096):
        wire = self.get(path, python).dns_answer(query.to_wire(), tcp=tcp, max_udp=max_udp)
        return dns.message.from_wire(wire)


def knot_servers(knot_server, zone_paths: dict, origin: str) -> dict:
    """A knotd serving each variant: kind -> server (skips without knotd)."""
    if knotd_path() is None:
        pytest.skip("knotd not installed")
    return {kind: knot_server([(origin, path)]) for kind, path in zone_paths.items()}


def knot_answer(servers: dict, kind: str, query, tcp=True):
    wire = (tcp_query if tcp else udp_query)(query.to_wire(), servers[kind].addr, timeout=5.0)
    assert wire is not None, "knotd did not answer"
    return dns.message.from_wire(wire)
