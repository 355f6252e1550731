"""Precopy mode through the real worker loop on the memory backend: the same mixed
corpus answered in memcpy and precopy mode must give the same reply frames, byte for
byte, while precopy really sends from its pool (hits and fills). With a table larger
than the cache, both modes answer in groups with prefetch stages: the same bytes again."""
import random

import pytest
from scapy.layers.dns import DNS, DNSQR, DNSRROPT
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether

from conftest import EXAMPLE_ZONE
from stormpy import _core
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone

SERVER_MAC = "02:00:00:00:00:01"
NAMES = [("www.example.com", "A"), ("www.example.com", "AAAA"), ("example.com", "MX"),
         ("ftp.example.com", "A"), ("nothere.example.com", "A"), ("x.apps.example.com", "A"),
         ("example.org", "A"), ("example.com", "SOA")]


@pytest.fixture(scope="module")
def ref():
    table, _ = compile_zones([load_zone(EXAMPLE_ZONE)])
    return _core.TableRef(table, 1)


def mixed_corpus(n, seed):
    """Repeated names with random 0x20 case, IDs, flags, sources, v4/v6, VLAN, EDNS and
    DO; every 25th frame damaged."""
    rng = random.Random(seed)
    frames = []
    for i in range(n):
        name, qtype = rng.choice(NAMES)
        name = "".join(c.upper() if rng.random() < 0.5 else c for c in name)
        extra = {}
        if rng.random() < 0.5:
            extra["ar"] = DNSRROPT(rclass=rng.choice([512, 1232, 4096]),
                                   z=0x8000 if rng.random() < 0.5 else 0)
        dns = DNS(id=rng.randrange(65536), rd=rng.randrange(2), cd=rng.randrange(2),
                  qd=DNSQR(qname=name, qtype=qtype), **extra)
        mac = "02:00:00:%02x:%02x:%02x" % (rng.randrange(256), rng.randrange(256), rng.randrange(256))
        eth = Ether(src=mac, dst=SERVER_MAC)
        if rng.random() < 0.3:
            eth = eth / Dot1Q(vlan=rng.randrange(1, 4095))
        if rng.random() < 0.5:
            l3 = IP(src=f"198.18.{rng.randrange(256)}.{rng.randrange(1, 255)}", dst="198.18.0.1")
        else:
            l3 = IPv6(src=f"2001:2::{rng.randrange(1, 65536):x}", dst="2001:2::1")
        f = bytearray(bytes(eth / l3 / UDP(sport=rng.randrange(1024, 65536), dport=53) / dns))
        if i % 25 == 24:
            f[rng.randrange(14, len(f))] ^= 1 << rng.randrange(8)
        frames.append(bytes(f))
    return frames


@pytest.mark.parametrize("batch", [1, 8, 32])
def test_precopy_replies_equal_memcpy_replies(ref, batch):
    frames = mixed_corpus(3000, seed=batch)
    want, cm = _core.run_memory_worker(ref, frames, batch=batch)
    got, cp = _core.run_memory_worker(ref, frames, batch=batch, mode="precopy", precopy_min=0)
    assert len(got) == len(want) > 2500
    assert got == want
    assert cp["precopy_hits"] > 0 and cp["precopy_fills"] > 0
    assert cp["precopy_hits"] + cp["precopy_fills"] + cp["precopy_fallbacks"] < len(got)  # errors
    assert cm["precopy_hits"] == cm["precopy_fills"] == 0
    for key in ("rx", "tx", "queries", "dropped", "truncated", "rcode", "malformed"):
        assert cp[key] == cm[key], key


def test_a_table_of_short_answers_is_answered_as_in_memcpy_mode(ref):
    """No answer of the example zone can reach the default minimum, even for the longest
    name with an OPT record: the worker answers its batches as memcpy mode does, and the
    pool counts nothing. A table with one long answer is answered through the pool."""
    table, _ = compile_zones([load_zone(EXAMPLE_ZONE)])
    info = table.info()
    assert 0 < info["longest_response"] < _core.PRECOPY_MIN_BYTES - 255 - 4 - 11, info
    frames = mixed_corpus(1000, seed=3)
    for batch in (1, 32):
        want, cm = _core.run_memory_worker(ref, frames, batch=batch)
        got, cp = _core.run_memory_worker(ref, frames, batch=batch, mode="precopy")
        assert got == want and len(got) > 900
        assert cp["precopy_hits"] == cp["precopy_fills"] == cp["precopy_fallbacks"] == 0
        for key in ("rx", "tx", "queries", "dropped", "truncated", "rcode", "malformed"):
            assert cp[key] == cm[key], key


def test_a_table_larger_than_the_cache_answers_the_same_in_stages(tmp_path):
    """3,000 names: an index past sp_table_worth_prefetching()'s 256 KB, so both modes
    answer in groups of 16 (prefetch stages), precopy from its pool."""
    from stormpy.bench.workload import CompiledWorkload
    wl = CompiledWorkload(3000, 3000, 20261121, str(tmp_path))
    info = wl.table.info()
    assert info["slots"] * 8 + info["keys"] * 24 > 256 * 1024
    rng = random.Random(7)
    frames = [bytearray(f) for f in wl.frames]
    for f in frames[::20]:                    # damage: dropped, or an error answer
        f[rng.randrange(14, len(f))] ^= 1 << rng.randrange(8)
    frames = [bytes(f) for f in frames]
    for batch in (5, 32):                     # groups cut short, and two whole groups
        want, cp = _core.run_memory_worker(wl.ref, frames, batch=batch, mode="precopy",
                                           precopy_min=0)
        got, cm = _core.run_memory_worker(wl.ref, frames, batch=batch)
        assert len(got) == len(want) > 2800
        assert got == want
        assert cp["precopy_hits"] > 0 and cp["precopy_fills"] > 0
        for key in ("rx", "tx", "queries", "dropped", "rcode", "malformed"):
            assert cp[key] == cm[key], key


def test_a_small_pool_falls_back_and_stays_right(ref):
    """One set of eight ways for many different answers: evictions, and copies still
    in flight within a batch force fallbacks; the bytes stay the same."""
    frames = mixed_corpus(2000, seed=99)
    want, _ = _core.run_memory_worker(ref, frames, batch=64)
    got, c = _core.run_memory_worker(ref, frames, batch=64, mode="precopy", precopy_frames=8,
                                     precopy_min=0)
    assert got == want
    assert c["precopy_fallbacks"] > 0 and c["precopy_hits"] > 0


def test_only_answers_of_the_minimum_length_are_copied(tmp_path):
    """The default minimum (PRECOPY_MIN_BYTES): small answers are rendered as in memcpy
    mode and counted as none of hit, fill and fallback; answers at the minimum or above
    come from the pool. dnspython reads the lengths the server sent."""
    import dns.message
    zone = tmp_path / "big.example.zone"
    big = " ".join(f'"{i:03d}' + "x" * 96 + '"' for i in range(4))      # 4 strings, 400 bytes
    zone.write_text("$ORIGIN big.example.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n"
                    f"ns A 198.18.0.53\nbig TXT {big}\nsmall TXT \"a\"\n")
    table, _ = compile_zones([load_zone(str(zone))])
    ref = _core.TableRef(table, 1)
    rng = random.Random(5)
    frames, kinds = [], []
    for i in range(400):
        kind = rng.choice(["big", "small"])
        name = "".join(c.upper() if rng.random() < 0.5 else c for c in f"{kind}.big.example")
        q = DNS(id=i, rd=1, qd=DNSQR(qname=name, qtype="TXT"), ar=DNSRROPT(rclass=1232))
        frames.append(bytes(Ether(dst=SERVER_MAC) / IP(src="198.18.1.2", dst="198.18.0.1") /
                            UDP(sport=1024 + i, dport=53) / q))
        kinds.append(kind)
    want, _ = _core.run_memory_worker(ref, frames)
    # batches of 8: one answer's copies all in flight never fill its set of 8 ways
    got, c = _core.run_memory_worker(ref, frames, mode="precopy", batch=8)
    assert got == want and len(got) == len(frames)
    sizes = {k: {len(dns.message.from_wire(bytes(Ether(f)[UDP].payload)).to_wire())
                 for f, kk in zip(got, kinds) if kk == k} for k in ("big", "small")}
    assert min(sizes["big"]) >= _core.PRECOPY_MIN_BYTES > max(sizes["small"]), sizes
    assert c["precopy_hits"] + c["precopy_fills"] == kinds.count("big")
    assert c["precopy_hits"] > 0 and c["precopy_fallbacks"] == 0
    _, every = _core.run_memory_worker(ref, frames, mode="precopy", precopy_min=0, batch=8)
    assert every["precopy_hits"] + every["precopy_fills"] == len(frames)
    _, wide = _core.run_memory_worker(ref, frames, mode="precopy")   # batches of 32
    assert wide["precopy_hits"] + wide["precopy_fills"] + wide["precopy_fallbacks"] == kinds.count("big")


def test_mode_is_checked(ref):
    with pytest.raises(ValueError, match="mode"):
        _core.run_memory_worker(ref, [], mode="zerocopy")
    with pytest.raises(Exception, match="precopy"):
        _core.run_memory_worker(ref, [], mode="precopy", precopy_frames=4)


def test_precopy_needs_a_frame_backend():
    """With the socket backend (no --iface) --mode precopy is a one-line error."""
    import os
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "stormpy", "serve-dns", EXAMPLE_ZONE, "--mode", "precopy",
                        "--control", ""], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__file__))))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "--mode precopy" in r.stderr
