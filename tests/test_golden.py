"""Golden bytes: stormpy's exact responses for a few queries, from the compiled table
and from a running server. The recorded pairs were decoded with dnspython and checked
by hand when recorded (golden/responses.txt)."""
import os
import socket

import pytest

from conftest import EXAMPLE_ZONE
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone

HERE = os.path.dirname(os.path.abspath(__file__))


def golden_pairs():
    pairs, label = [], None
    with open(os.path.join(HERE, "golden", "responses.txt")) as f:
        for line in f:
            line = line.strip()
            if line.startswith("# ") and "|" not in line:
                label = line[2:]
            elif line and not line.startswith("#"):
                query, response = (bytes.fromhex(x.strip()) for x in line.split("|"))
                pairs.append(pytest.param(query, response, id=label))
    return pairs


PAIRS = golden_pairs()


@pytest.fixture(scope="module")
def table():
    t, _ = compile_zones([load_zone(EXAMPLE_ZONE)], chaos_version="golden")
    return t


@pytest.mark.parametrize("query,response", PAIRS)
def test_table_gives_golden_bytes(table, query, response):
    assert table.dns_answer(query).hex() == response.hex()


def test_server_gives_golden_bytes(stormpy_server):
    srv = stormpy_server([("example.com.", EXAMPLE_ZONE)], ["--chaos-version", "golden"])
    assert len(PAIRS) >= 9
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        for p in PAIRS:
            query, response = p.values
            s.sendto(query, srv.addr)
            assert s.recv(65535).hex() == response.hex(), p.id
