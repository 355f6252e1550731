"""The signed-zone differential of test_dnssec.py with stormpy on each ring backend
(AF_XDP, AF_PACKET) across a veth pair: the same questions, with and without DO, over
UDP and TCP, asked from the client namespace, each answer compared with Knot's on
loopback for the same signed file."""
from __future__ import annotations

import itertools
import json
import os
import sys

import dns.message
import pytest

from support import dnsdiff
from support.backends import RINGS
from support.client import tcp_query, udp_query
from support.netns import REPO, SERVER_V4, NsServer, VethPair
from support.servers import knot_server  # noqa: F401
from test_dnssec import NAMES, ORIGIN, TCP_TYPES, TYPES, _qname, signed_zones  # noqa: F401

KINDS = ["nsec", "nsec3"]


def _queries(cases) -> list[bytes]:
    out = []
    for i, (name, rdtype, do) in enumerate(cases):
        q = dns.message.make_query(_qname(name), rdtype, use_edns=0, payload=1232, want_dnssec=do)
        q.id = i + 1
        out.append(q.to_wire())
    return out


def _from_client(pair, wires: list[bytes], proto: str, tmp_path) -> list:
    path = tmp_path / f"queries-{proto}.json"
    path.write_text(json.dumps([w.hex() for w in wires]))
    r = pair.run(pair.client, sys.executable, os.path.join(REPO, "tests", "ns_client.py"),
                 "wire", SERVER_V4, "53", proto, "3", str(path), timeout=600)
    assert r.returncode == 0, r.stderr
    return [bytes.fromhex(h) if h else None for h in json.loads(r.stdout)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("backend", RINGS)
def test_signed_differential_on_the_rings(signed_zones, knot_server, backend, kind, tmp_path):
    path = signed_zones[kind]
    knot = knot_server([(ORIGIN, path)])
    asked = {"udp": list(itertools.product(NAMES, TYPES, (False, True))),
             "tcp": list(itertools.product(NAMES, TCP_TYPES, (False, True)))}
    args = [path, "--iface", "veth0", "--backend", backend, "--port", "53"]
    problems, compared = [], 0
    with VethPair() as pair, NsServer(pair, args):
        for proto, cases in asked.items():
            wires = _queries(cases)
            got = _from_client(pair, wires, proto, tmp_path)
            ask = tcp_query if proto == "tcp" else udp_query
            for (name, rdtype, do), wire, sw in zip(cases, wires, got):
                kw = ask(wire, knot.addr, timeout=3.0)
                km, kerr = dnsdiff.parse(kw)
                sm, serr = dnsdiff.parse(sw)
                assert kerr is None and km is not None, f"Knot: {kerr or 'no answer'}"
                diffs = [serr] if serr else dnsdiff.compare(km, sm, ref_wire=kw, cand_wire=sw,
                                                             check_additional=True)
                compared += 1
                if diffs:
                    problems.append(f"{proto} {_qname(name)} {rdtype} DO={int(do)}: " + "; ".join(diffs))
    assert compared == sum(len(c) for c in asked.values()) > 1000
    assert not problems, (f"{kind} on {backend}: {len(problems)} answers differ from Knot's:\n"
                          + "\n".join(problems[:30]))
