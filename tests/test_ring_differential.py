"""The Knot DNS differential test again, with stormpy answering on each ring backend
(AF_XDP, AF_PACKET) across a veth pair: every UDP case of tests/support/dnsdiff/,
compared with Knot on loopback."""
import json
import os
import subprocess
import sys

import pytest

from support import dnsdiff
from support.client import udp_query
from support.backends import RINGS_AND_DRIVER, ring_serving
from support.netns import REPO, SERVER_V4, NsServer, VethPair
from test_differential import SEED


@pytest.mark.parametrize("backend", RINGS_AND_DRIVER)
def test_differential_on_the_rings(knot_server, backend, tmp_path):
    knot = knot_server(dnsdiff.knot_zones(), version=dnsdiff.CHAOS_VERSION,
                       identity=dnsdiff.CHAOS_IDENTITY)
    cases = dnsdiff.udp_cases(dnsdiff.generate_queries(SEED))
    serving, pair_options = ring_serving(backend)
    args = [p for _, p in dnsdiff.stormpy_zones()] + [
        "--iface", "veth0", *serving, "--port", "53", "--control", str(tmp_path / "control"),
        "--chaos-version", dnsdiff.CHAOS_VERSION, "--chaos-identity", dnsdiff.CHAOS_IDENTITY]
    with VethPair(**pair_options) as pair, NsServer(pair, args):
        r = pair.run(pair.client, sys.executable, os.path.join(REPO, "tests", "ns_client.py"),
                     "diff", SERVER_V4, "53", str(SEED), timeout=300)
        assert r.returncode == 0, r.stderr
        answers = json.loads(r.stdout)
        if backend == "xdp-answer":         # the driver answered a share of them itself
            driver = json.loads(subprocess.run(
                [sys.executable, "-m", "stormpy", "stats", "--json", "--control",
                 str(tmp_path / "control")], capture_output=True, text=True, timeout=30).stdout)
            assert driver["xdp_answered"] > 50, driver
    assert len(answers) == len(cases)
    problems = []
    for i, (case, hexwire) in enumerate(zip(cases, answers)):
        cand = bytes.fromhex(hexwire) if hexwire else None
        ref = udp_query(case.wire(i + 1), knot.addr, timeout=case.timeout)
        rm, rerr = dnsdiff.parse(ref)
        cm, cerr = dnsdiff.parse(cand)
        assert not rerr, f"Knot's answer does not parse: {rerr}"
        diffs = [cerr] if cerr else dnsdiff.compare(rm, cm, ref_wire=ref, cand_wire=cand,
                                                     cand_name=f"stormpy-{backend}")
        if diffs:
            problems.append(f"{case.describe()}:\n    " + "\n    ".join(diffs))
    assert len(cases) > 250
    assert not problems, f"{len(problems)} of {len(cases)} differ:\n" + "\n".join(problems[:20])
