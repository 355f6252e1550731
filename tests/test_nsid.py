"""NSID (RFC 5001): `serve-dns --nsid ID` sends ID to the queries that ask for it, on
every answering path. The differential suite holds the answers to Knot's (configured
with the same NSID); here the frame paths' replies go through scapy (their UDP checksum,
which the fast path composes and an NSID makes it sum instead) and dnspython, the size
an NSID takes is accounted for before an answer is cut, and the option reaches the
command line, the configuration file and a real client (kdig) over UDP and TCP."""
import struct
import subprocess
import sys

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from conftest import EXAMPLE_ZONE, REPO
from stormpy import _core, cli, configfile
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone
from support.servers import StormpyServer
from test_query_checksums import PATHS, frame, kernel_accepts, large, small  # noqa: F401

NSID = b"ns1.fra.example"
LONGEST = bytes(range(128))


def query(name, rdtype="A", nsid=True, cookie=False, payload=1232, want_dnssec=False):
    options = [dns.edns.GenericOption(dns.edns.NSID, b"")] if nsid else []
    if cookie:
        options.insert(0, dns.edns.GenericOption(dns.edns.COOKIE, bytes(range(8))))
    q = dns.message.make_query(name, rdtype, use_edns=0, payload=payload, options=options,
                               want_dnssec=want_dnssec)
    return q.to_wire()


def nsid_of(msg):
    sent = [o for o in msg.options if o.otype == dns.edns.NSID]
    assert len(sent) <= 1, msg
    return sent[0].to_wire() if sent else None


# For each table (test_query_checksums's): answers, NXDOMAIN, NODATA, a referral or an
# answer with additional records, REFUSED (with EDE 20), and two options (the long parse).
QUESTIONS = {
    "small": [("www.example.com", "A", {}), ("www.example.com", "AAAA", {}),
              ("nothere.example.com", "A", {}), ("www.example.com", "MX", {}),
              ("x.lab.example.com", "A", {}), ("example.com", "MX", {"want_dnssec": True}),
              ("www.example.org", "A", {}), ("www.example.com", "A", {"cookie": True}),
              ("x.apps.example.com", "A", {})],
    "large": [("host1.bench.example", "A", {}), ("host1.bench.example", "AAAA", {}),
              ("nothere.bench.example", "A", {}), ("host2.bench.example", "MX", {}),
              ("host10.bench.example", "TXT", {}), ("www.example.org", "A", {}),
              ("host3.bench.example", "A", {"cookie": True})],
}


@pytest.mark.parametrize("table,mode,batch", PATHS)
def test_every_frame_path_sends_the_nsid_with_a_right_checksum(request, table, mode, batch):
    ref = request.getfixturevalue(table)
    asked = [frame(query(n, t, **kw), fam) for n, t, kw in QUESTIONS[table] for fam in (4, 6)]
    plain = [frame(query(n, t, nsid=False, **kw), fam) for n, t, kw in QUESTIONS[table]
             for fam in (4, 6)]
    replies, c = _core.run_memory_worker(ref, asked, batch=batch, mode=mode, precopy_min=0,
                                         nsid=NSID)
    without, _ = _core.run_memory_worker(ref, plain, batch=batch, mode=mode, precopy_min=0,
                                         nsid=NSID)
    unasked, _ = _core.run_memory_worker(ref, asked, batch=batch, mode=mode, precopy_min=0)
    assert len(replies) == len(without) == len(unasked) == len(asked), c
    rcodes = set()
    for got, other, none in zip(replies, without, unasked):
        assert kernel_accepts(got), Ether(got).show(dump=True)
        msg = dns.message.from_wire(bytes(Ether(got)[UDP].payload))
        assert nsid_of(msg) == NSID, msg
        rcodes.add(msg.rcode())
        # the rest of the answer is the one the query gets without asking
        same = dns.message.from_wire(bytes(Ether(other)[UDP].payload))
        assert nsid_of(same) is None
        assert (msg.rcode(), msg.answer, msg.authority, msg.additional) == \
            (same.rcode(), same.answer, same.authority, same.additional)
        assert [o.otype for o in msg.options if o.otype != dns.edns.NSID] == \
            [o.otype for o in same.options]
        # and a server with no NSID sends none
        assert nsid_of(dns.message.from_wire(bytes(Ether(none)[UDP].payload))) is None
    assert rcodes == {dns.rcode.NOERROR, dns.rcode.NXDOMAIN, dns.rcode.REFUSED}


def example_table():
    table, _ = compile_zones([load_zone(EXAMPLE_ZONE)])
    return table


def test_the_nsid_is_counted_before_an_answer_is_cut(tmp_path):
    """An answer that just fits the client's payload size without the NSID option is
    sent with TC set once the option would take it past; 4 bytes and the NSID more fit."""
    zone = tmp_path / "t.zone"
    zone.write_text("$ORIGIN t.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n"
                    f'big TXT "{"a" * 250}" "{"b" * 250}" "{"c" * 250}"\n')
    table, _ = compile_zones([load_zone(str(zone))])
    size = len(table.dns_answer(query("big.t", "TXT", nsid=False, payload=4096)))
    assert size > 700
    fits = dns.message.from_wire(table.dns_answer(query("big.t", "TXT", payload=size)))
    assert not fits.flags & dns.flags.TC and fits.answer and nsid_of(fits) is None
    cut = dns.message.from_wire(table.dns_answer(query("big.t", "TXT", payload=size), nsid=NSID))
    assert cut.flags & dns.flags.TC and not cut.answer and nsid_of(cut) == NSID, cut
    room = size + 4 + len(NSID)
    whole = table.dns_answer(query("big.t", "TXT", payload=room), nsid=NSID)
    msg = dns.message.from_wire(whole)
    assert not msg.flags & dns.flags.TC and msg.answer and nsid_of(msg) == NSID
    assert len(whole) == room
    cut = dns.message.from_wire(table.dns_answer(query("big.t", "TXT", payload=room - 1),
                                                 nsid=NSID))
    assert cut.flags & dns.flags.TC and nsid_of(cut) == NSID


def test_the_longest_nsid_and_one_byte_more():
    table = example_table()
    msg = dns.message.from_wire(table.dns_answer(query("www.example.com"), nsid=LONGEST))
    assert nsid_of(msg) == LONGEST and msg.answer
    with pytest.raises(ValueError, match="at most 128 bytes"):
        table.dns_answer(query("www.example.com"), nsid=LONGEST + b"x")


def test_an_option_list_that_runs_past_its_opt_is_formerr_without_an_nsid():
    wire = bytearray(dns.message.make_query("www.example.com", "A").to_wire())
    wire[10:12] = b"\x00\x01"                       # ARCOUNT 1: the OPT below
    options = struct.pack("!HH", dns.edns.NSID, 0) + struct.pack("!HH", 65001, 9) + b"abcd"
    wire += b"\x00" + struct.pack("!HHIH", 41, 1232, 0, len(options)) + options
    msg = dns.message.from_wire(example_table().dns_answer(bytes(wire), nsid=NSID))
    assert msg.rcode() == dns.rcode.FORMERR and msg.edns < 0, msg


def commands():
    import argparse
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


@pytest.mark.parametrize("given, sent", [("ns1", b"ns1"), ("0x6e7331", b"ns1"),
                                         ("0X00ff", b"\x00\xff"), ("", b"")])
def test_the_command_line_and_the_file_read_an_nsid_alike(tmp_path, given, sent):
    args = cli.build_parser().parse_args(["serve-dns", EXAMPLE_ZONE, "--nsid", given])
    assert args.nsid == sent
    path = tmp_path / "stormpy.yaml"                # unquoted: YAML would read 0x.. as a number
    path.write_text(f"server:\n  nsid: {given}\nzone:\n  - domain: example.com.\n"
                    f"    file: {EXAMPLE_ZONE}\n")
    assert configfile.load(str(path), commands()).args.nsid == sent


@pytest.mark.parametrize("given, words", [("0xzz", "after 0x, pairs of hex digits"),
                                          ("0x123", "after 0x, pairs of hex digits"),
                                          ("n" * 129, "at most 128 bytes, not 129")])
def test_a_bad_nsid_is_refused_in_one_line(given, words):
    r = subprocess.run([sys.executable, "-m", "stormpy", "serve-dns", EXAMPLE_ZONE, "--nsid",
                        given], cwd=REPO, capture_output=True, text=True, timeout=60)
    last = r.stderr.strip().splitlines()[-1]       # after argparse's usage, as any bad flag
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert last == f"stormpy serve-dns: error: argument --nsid: {words}", r.stderr


def kdig(port, *options):
    return subprocess.run(["kdig", "@127.0.0.1", "-p", str(port), "+norec", "+timeout=2",
                           "+retry=1", *options], capture_output=True, text=True, timeout=30).stdout


def test_kdig_gets_the_nsid_over_udp_and_tcp():
    if subprocess.run(["which", "kdig"], capture_output=True).returncode != 0:
        pytest.skip("kdig (knot-dnsutils) is not installed")
    srv = StormpyServer([EXAMPLE_ZONE], extra_args=["--nsid", "0x6e73312d74657374"]).start()
    try:
        for transport in ("+notcp", "+tcp"):
            out = kdig(srv.port, transport, "+nsid", "www.example.com", "A")
            assert 'NSID: 6E73312D74657374 "ns1-test"' in out and "192.0.2.80" in out, out
            assert "NSID" not in kdig(srv.port, transport, "www.example.com", "A")
    finally:
        srv.cleanup()
