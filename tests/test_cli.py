"""The command line: one clear line and a non-zero exit for every user error."""
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from conftest import EXAMPLE_ZONE, REPO
from stormpy import _core
from support.process import free_port


def stormpy(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "stormpy", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def assert_one_line_error(result, *fragments):
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("stormpy: error: "), lines[0]
    for f in fragments:
        assert f in lines[0], lines[0]


def test_version_and_help():
    r = stormpy("--version")
    assert r.returncode == 0 and r.stdout.startswith("stormpy 0.")
    for cmd in ([], ["serve-dns"], ["check-zone"], ["backends"]):
        r = stormpy(*cmd, "--help")
        assert r.returncode == 0 and "usage: stormpy" in r.stdout


def test_check_zone_reports_counts():
    r = stormpy("check-zone", EXAMPLE_ZONE)
    assert r.returncode == 0, r.stderr
    assert "zone example.com. loaded, 24 records" in r.stdout
    assert "prepackaged responses" in r.stdout


def test_missing_file(tmp_path):
    assert_one_line_error(stormpy("check-zone", str(tmp_path / "nope.zone")), "nope.zone: no such file")
    assert_one_line_error(stormpy("serve-dns", str(tmp_path / "nope.zone")), "no such file")


def test_syntax_error_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.zone"
    bad.write_text("$ORIGIN example.com.\n$TTL 60\n@ SOA ns host 1 2 3 4 5\n@ NS ns\n"
                   "ns A 192.0.2.1\nwww A 192.0.2.999\n")
    assert_one_line_error(stormpy("check-zone", str(bad)), f"{bad}:6:")
    assert_one_line_error(stormpy("serve-dns", str(bad)), f"{bad}:6:")


def test_cname_and_other_data_names_the_owner_and_line(tmp_path):
    head = "$ORIGIN example.com.\n$TTL 60\n@ SOA ns host 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n"
    cname_first = tmp_path / "cname_first.zone"
    cname_first.write_text(head + "www CNAME ns\n; a comment\nwww A 192.0.2.2\nx A 192.0.2.3\n")
    assert_one_line_error(stormpy("check-zone", str(cname_first)),
                          f"{cname_first}:8: www.example.com. has a CNAME and other records")
    (tmp_path / "more.inc").write_text("\n  AAAA 2001:db8::1\nmail CNAME ns\n")
    included = tmp_path / "included.zone"
    included.write_text(head + "mail MX 10 ns\n$INCLUDE more.inc\n")
    assert_one_line_error(stormpy("serve-dns", str(included)),
                          f"{tmp_path / 'more.inc'}:3: mail.example.com. has a CNAME",
                          f"(included from {included})")


def test_zone_without_soa(tmp_path):
    z = tmp_path / "nosoa.zone"
    z.write_text("$ORIGIN example.com.\n$TTL 60\nwww A 192.0.2.1\n")
    assert_one_line_error(stormpy("check-zone", str(z)), "no SOA")


def test_origin_from_the_soa_or_the_flag(tmp_path):
    z = tmp_path / "plain.zone"
    z.write_text("example.net. 60 IN SOA ns.example.net. h.example.net. 1 2 3 4 5\n"
                 "example.net. 60 IN NS ns.example.net.\nns.example.net. 60 IN A 192.0.2.7\n")
    r = stormpy("check-zone", str(z))
    assert r.returncode == 0 and "zone example.net. loaded" in r.stdout, r.stderr
    rel = tmp_path / "relative.zone"
    rel.write_text("@ 60 IN SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.7\n")
    assert_one_line_error(stormpy("check-zone", str(rel)), "--origin")
    r = stormpy("check-zone", str(rel), "--origin", "example.org")
    assert r.returncode == 0 and "zone example.org. loaded" in r.stdout, r.stderr
    # the root zone as IANA publishes it: no $ORIGIN, the SOA at "."
    root = tmp_path / "root.zone"
    root.write_text(".\t86400\tIN\tSOA\ta.root-servers.net. nstld.verisign-grs.com. 1 2 3 4 5\n"
                    ".\t518400\tIN\tNS\ta.root-servers.net.\n"
                    "a.root-servers.net.\t518400\tIN\tA\t198.41.0.4\n"
                    "com.\t172800\tIN\tNS\ta.gtld-servers.net.\n"
                    "a.gtld-servers.net.\t172800\tIN\tA\t192.5.6.30\n")
    r = stormpy("check-zone", str(root))
    assert r.returncode == 0 and "zone . loaded, 5 records" in r.stdout, r.stderr


def test_include_missing(tmp_path):
    z = tmp_path / "inc.zone"
    z.write_text("$ORIGIN example.com.\n@ 60 SOA ns h 1 2 3 4 5\n@ NS ns\n$INCLUDE gone.inc\n")
    assert_one_line_error(stormpy("check-zone", str(z)), "gone.inc")


ZONE_HEAD = "$ORIGIN e.test.\n$TTL 300\n@ SOA ns admin 1 3600 600 86400 120\n@ NS ns\n"


def test_a_nested_include_is_relative_to_the_file_it_is_in(tmp_path):
    """As in Knot DNS, sub/a.inc's "$INCLUDE deeper/b.inc" is sub/deeper/b.inc (it was
    looked for beside the top file): an error there is named with that path, and a file
    in sub/ including itself by its own name is a loop."""
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    z = tmp_path / "top.zone"
    z.write_text(ZONE_HEAD + "$INCLUDE sub/a.inc\n")
    a, b = tmp_path / "sub" / "a.inc", tmp_path / "sub" / "deeper" / "b.inc"
    a.write_text("a A 192.0.2.1\n$INCLUDE deeper/b.inc\n")
    b.write_text("b A 192.0.2.2\n")
    r = stormpy("check-zone", str(z))
    assert r.returncode == 0 and "loaded, 4 records" in r.stdout, r.stderr
    b.write_text("b A 192.0.2.999\n")
    for command in ("check-zone", "serve-dns"):
        assert_one_line_error(stormpy(command, str(z)), f"{b}:1:", f"(included from {z})")
    a.write_text("a A 192.0.2.1\n$INCLUDE a.inc\n")
    assert_one_line_error(stormpy("check-zone", str(z), timeout=30), "$INCLUDE a.inc",
                          "includes a file it is in")


@pytest.mark.parametrize("content, fragments", [
    (b"", ["no records"]),
    (b"; a truncated deploy\n", ["no records"]),
    (b"$ORIGIN e.test.\n$TTL 300\n", ["no records"]),
    (ZONE_HEAD.encode() + b"$GENERATE 1-2 h$ A 192.0.2.$\n"
     b"l LOC 52 22 23.000 N 4 53 32.000 E 99999999m\n", ["bad.zone:6:", "out of range"]),
    (ZONE_HEAD.encode() + b'ns A 192.0.2.1\nt TXT "caf\xe9"\n', ["bad.zone:6:", "not UTF-8"]),
    (ZONE_HEAD.encode() + b"$INCLUDE bad.zone\n", ["$INCLUDE bad.zone", "includes a file it is in"]),
])
def test_zone_files_that_used_to_end_in_a_traceback(content, fragments, tmp_path):
    """Empty files (a truncated deploy), values dnspython parses but cannot store, a
    byte that is not UTF-8, a file that includes itself: one line each, no traceback,
    no wait until the descriptors run out."""
    z = tmp_path / "bad.zone"
    z.write_bytes(content)
    assert_one_line_error(stormpy("check-zone", str(z), timeout=30), *fragments)


@pytest.mark.parametrize("records, fragments", [
    ("x CNAME ns\nx CNAME www\n", ["two.zone:7: x.e.test. has two CNAME records"]),
    ("d DNAME ns.e.test.\nd DNAME e.test.\n", ["two.zone:7: d.e.test. has two DNAME records"]),
    ("@ SOA ns admin 2 3600 600 86400 120\n", ["two.zone:6: a second SOA record at e.test.",
                                               "serial 2", "serial 1"]),
])
def test_a_second_cname_dname_or_soa_at_a_name_is_refused(records, fragments, tmp_path):
    """dnspython kept the last of two silently (a second SOA's serial was served to
    secondaries). Knot DNS refuses a zone with two CNAMEs or two DNAMEs at a name
    ("multiple CNAME records") and keeps the first of two SOAs: either way the file
    is not what its author meant."""
    z = tmp_path / "two.zone"
    z.write_text(ZONE_HEAD + "ns A 192.0.2.1\n" + records)
    for command in ("check-zone", "serve-dns"):
        assert_one_line_error(stormpy(command, str(z)), *fragments)


def test_the_same_cname_or_soa_twice_is_one_record(tmp_path):
    z = tmp_path / "same.zone"
    z.write_text(ZONE_HEAD + "ns A 192.0.2.1\nx CNAME ns\nx CNAME NS.e.test.\n"
                 "@ SOA ns admin 1 3600 600 86400 120\n")
    r = stormpy("check-zone", str(z))
    assert r.returncode == 0 and "loaded, 4 records" in r.stdout, r.stderr


@pytest.mark.parametrize("record, fragments", [
    ("bücher A 192.0.2.2\n", ["utf8.zone:6: bücher", "xn--bcher-kva"]),
    ("y CNAME straße\n", ["utf8.zone:6: straße", "xn--strae-oqa"]),
    ("m MX 10 mail.straße.example.\n", ["utf8.zone:6:", "mail.xn--strae-oqa.example."]),
    ("$ORIGIN bücher.e.test.\nwww A 192.0.2.2\n", ["utf8.zone:6:", "xn--bcher-kva.e.test."]),
    ("Bücher A 192.0.2.2\n", ["utf8.zone:6: Bücher", "A-label (xn--"]),
])
def test_a_name_in_utf8_is_refused_with_its_line_and_a_labels(record, fragments, tmp_path):
    """dnspython turned UTF-8 names into IDNA 2003 A-labels: "straße" was served as
    strasse, while clients ask for the IDNA 2008 form, xn--strae-oqa. Knot DNS refuses
    such a name ("invalid domain name character"); the error says what to write where
    IDNA 2008 surely agrees (a lowercase label of letters), else how."""
    z = tmp_path / "utf8.zone"
    z.write_text(ZONE_HEAD + "ns A 192.0.2.1\n" + record)
    for command in ("check-zone", "serve-dns"):
        assert_one_line_error(stormpy(command, str(z)), *fragments)
    z.write_text("@ 60 SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.7\n")
    assert_one_line_error(stormpy("check-zone", str(z), "--origin", "straße.test"),
                          "--origin straße.test", "xn--strae-oqa.test")


def test_utf8_inside_a_txt_string_is_still_served_as_its_bytes(tmp_path):
    z = tmp_path / "txt.zone"
    z.write_text(ZONE_HEAD + 'ns A 192.0.2.1\nt TXT "grüße" straße\n')
    r = stormpy("check-zone", str(z))
    assert r.returncode == 0 and "loaded, 4 records" in r.stdout, r.stderr


LABEL62 = "b" * 62
LONG_RELATIVE = ".".join([LABEL62] * 4)     # 252 octets: past 255 once e.test. is added


@pytest.mark.parametrize("content, line", [
    (ZONE_HEAD + "ns A 192.0.2.1\n" + LONG_RELATIVE + " A 192.0.2.5\n", 6),
    (ZONE_HEAD + "ns A 192.0.2.1\n" + LONG_RELATIVE + " A 192.0.2.5", 6),       # no newline
    (ZONE_HEAD + "ns A 192.0.2.1\nx CNAME " + LONG_RELATIVE + "\n", 6),
    (f"$ORIGIN {LONG_RELATIVE}.test.\n$TTL 300\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n", 1),
])
def test_a_name_past_255_octets_once_the_origin_is_added_is_named_with_its_line(
        content, line, tmp_path):
    """ldns joins a relative name to the origin past 255 octets: the C reader ended in a
    MemoryError traceback for an owner and served a record with such a name in rdata.
    Knot DNS refuses the zone ("maximal domain name length has exceeded")."""
    z = tmp_path / "long.zone"
    z.write_text(content)
    assert_one_line_error(stormpy("check-zone", str(z), timeout=30), f"long.zone:{line}:",
                          "255 octets")


@pytest.mark.parametrize("ttl", ["4294967296", "99999999999999999999", "1x", "1h30"])
def test_a_ttl_out_of_range_or_mistyped_is_called_a_ttl(ttl, tmp_path):
    """dnspython reads a field that is no TTL as the type: 'unknown rdatatype
    '4294967296'' said nothing of the TTL (Knot: 'number is bigger than 32 bits')."""
    z = tmp_path / "ttl.zone"
    z.write_text(ZONE_HEAD + f"ns {ttl} A 192.0.2.1\n")
    assert_one_line_error(stormpy("check-zone", str(z)), "ttl.zone:5:", f"{ttl} is not a TTL")


def test_a_value_that_does_not_parse_is_shown_with_its_line(tmp_path):
    z = tmp_path / "ip.zone"
    z.write_text(ZONE_HEAD + "ns1 IN A 300.1.1.1 ; a typo\n")
    assert_one_line_error(stormpy("check-zone", str(z)), "ip.zone:5:", "ns1 IN A 300.1.1.1")


def test_a_cpu_this_machine_does_not_have_is_refused_before_the_workers_start():
    absent = max(os.sched_getaffinity(0)) + 1
    result = stormpy("serve-dns", EXAMPLE_ZONE, "--cpus", f"0-{absent}")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"CPU {absent} is not one this server may run on here" in result.stderr


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: no narrower mask")
def test_a_server_started_under_a_narrower_mask_may_still_pin_its_workers_wider():
    """A lab starts serve-dns from a process pinned to CPU 0; its workers pin themselves
    to CPU 1 all the same, so --cpus 0,1 is no mistake there."""
    cpus = sorted(os.sched_getaffinity(0))[:2]
    r = subprocess.run([sys.executable, "-c", "from stormpy import argtypes; "
                        f"print(argtypes.cpu_list('{cpus[0]},{cpus[1]}'))"], cwd=REPO,
                       capture_output=True, text=True, timeout=30,
                       preexec_fn=lambda: os.sched_setaffinity(0, {cpus[0]}))
    assert r.returncode == 0 and r.stdout.strip() == str(cpus), r.stderr


def test_a_fifo_is_not_read_as_a_zone(tmp_path):
    fifo = tmp_path / "zone.fifo"
    os.mkfifo(fifo)
    assert_one_line_error(stormpy("check-zone", str(fifo), timeout=30), "not a regular file")


@pytest.mark.skipif(not _core.ZONE_READER,
                    reason="built without ldns: dnspython leaves them out silently")
def test_records_outside_the_zone_are_left_out_with_a_warning(tmp_path):
    z = tmp_path / "out.zone"
    z.write_text(ZONE_HEAD + "ns A 192.0.2.1\nwww.elsewhere.test. A 192.0.2.9\n")
    result = stormpy("check-zone", str(z))
    assert result.returncode == 0, result.stderr
    assert "1 record(s) outside the zone e.test. left out" in result.stderr
    assert "www.elsewhere.test." in result.stderr and "3 records" in result.stdout


@pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns: dnspython is silent")
def test_an_rrset_whose_ttls_differ_is_served_with_the_lowest_and_a_warning(tmp_path):
    z = tmp_path / "ttl.zone"
    z.write_text(ZONE_HEAD + "m 100 A 192.0.2.2\nm 200 A 192.0.2.3\nn 60 A 192.0.2.4\n")
    result = stormpy("check-zone", str(z))
    assert result.returncode == 0, result.stderr
    assert "1 record(s) with a TTL other than their RRset's, the first at m.e.test." \
        in result.stderr


def test_a_control_path_too_long_for_a_unix_socket_is_one_line(tmp_path):
    path = str(tmp_path / ("c" * 120)) + ".sock"
    result = stormpy("serve-dns", EXAMPLE_ZONE, "--listen", f"127.0.0.1:{free_port()}",
                     "--control", path)
    assert_one_line_error(result, "--control", "longer than the 107 bytes")


def test_bad_arguments():
    assert_one_line_error(stormpy("serve-dns", EXAMPLE_ZONE, "--listen", "localhost:x"), "--listen")
    r = stormpy("serve-dns", EXAMPLE_ZONE, "--workers", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "at least 1" in r.stderr


def test_long_chaos_text_is_refused():
    r = stormpy("serve-dns", EXAMPLE_ZONE, "--chaos-version", "v" * 300)
    assert r.returncode == 2 and "255 bytes" in r.stderr and "Traceback" not in r.stderr


def test_port_in_use():
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", port))
        r = stormpy("serve-dns", EXAMPLE_ZONE, "--listen", f"127.0.0.1:{port}", timeout=30)
    assert_one_line_error(r, f"127.0.0.1:{port}", "in use")


def test_port_held_by_a_reuseport_socket_is_still_busy():
    """SO_REUSEPORT must not let a second server share a port silently."""
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("127.0.0.1", port))
        r = stormpy("serve-dns", EXAMPLE_ZONE, "--listen", f"127.0.0.1:{port}", timeout=30)
    assert_one_line_error(r, "in use")


def test_permission_denied_on_a_privileged_port():
    if os.geteuid() == 0:
        # root: take CAP_NET_BIND_SERVICE away for this one command
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is missing: cannot run without CAP_NET_BIND_SERVICE")
        with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
            if int(f.read()) <= 53:
                pytest.skip("this kernel lets every user bind port 53")
        r = subprocess.run(["setpriv", "--bounding-set=-net_bind_service", sys.executable, "-m",
                            "stormpy", "serve-dns", EXAMPLE_ZONE, "--listen", "127.0.0.1:53"],
                           cwd=REPO, capture_output=True, text=True, timeout=60)
    else:
        r = stormpy("serve-dns", EXAMPLE_ZONE, "--listen", "127.0.0.1:53")
    assert_one_line_error(r, "Permission denied")


def test_sigterm_stops_cleanly(stormpy_server):
    srv = stormpy_server([("example.com.", EXAMPLE_ZONE)], ["--chaos-identity", "sigterm-test"])
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.proc.wait(timeout=10) == 0
    assert "Traceback" not in srv.output()


def test_backends_tell_the_truth_about_this_machine():
    import socket
    r = stormpy("backends")
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
    assert set(rows) == {"socket", "memory", "packet", "xdp", "netmap"}
    assert rows["socket"].split()[1:3] == ["yes", "yes"]
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close()
        packet_ok = True
    except OSError:
        packet_ok = False
    assert rows["packet"].split()[2] == ("yes" if packet_ok else "no"), rows["packet"]
    netmap = rows["netmap"]
    if not os.path.exists("/dev/netmap"):
        assert netmap.split()[2] == "no" and ("/dev/netmap" in netmap or "not compiled" in netmap)


def test_netmap_backend_unavailable_is_one_line():
    r = stormpy("serve-dns", EXAMPLE_ZONE, "--iface", "lo", "--backend", "netmap")
    assert_one_line_error(r, "--backend netmap:")


@pytest.mark.parametrize("name, rest", [("check-zone", ["Z"]), ("serve-dns", ["Z"]),
                                        ("serve-http", ["D"]), ("replay", ["Z", "--pcap", "P"]),
                                        ("impair", ["a", "b"]), ("stats", []), ("backends", []),
                                        ("bench fastpath", [])])
def test_an_unknown_option_is_the_subcommands_error_with_its_usage(name, rest, capsys):
    from stormpy.cli import build_parser
    with pytest.raises(SystemExit) as exit:
        build_parser().parse_args([*name.split(), *rest, "--bogus"])
    err = capsys.readouterr().err.splitlines()
    assert exit.value.code == 2
    assert err[0].startswith(f"usage: stormpy {name} "), err
    assert err[-1] == f"stormpy {name}: error: unrecognized arguments: --bogus", err


def test_transfer_options_refused_in_one_line(tmp_path):
    cases = [
        (["--secondary", "example.com", "--primary", "1.2.3"], "--primary '1.2.3'"),
        (["--secondary", "example.com", "--primary", "192.0.2.1:0"], "port must be 1-65535"),
        (["--secondary", "example.com", "--primary", "192.0.2.1", "--tsig", "k:hmac-sha256"],
         "NAME:ALGORITHM:SECRET"),
        (["--secondary", "example.com", "--primary", "192.0.2.1", "--tsig", "k:hmac-foo:YQ=="],
         "unknown algorithm"),
        (["--secondary", "example.com", "--primary", "192.0.2.1", "--tsig", "k:hmac-sha256:!!"],
         "not base64"),
        (["--secondary", "a.", "--secondary", "b.", "--primary", "192.0.2.1", "--primary",
          "192.0.2.2", "--primary", "192.0.2.3"], "3 --primary for 2 --secondary"),
        (["--primary", "192.0.2.1", EXAMPLE_ZONE], "--primary without --secondary"),
        (["--secondary", "example.com", "--primary", "192.0.2.1", "--zone-dir",
          str(tmp_path / "missing")], "no such directory"),
        ([EXAMPLE_ZONE, "--transfer-allow", "not-a-prefix"], "--transfer-allow 'not-a-prefix'"),
        ([EXAMPLE_ZONE, "--notify", "ns2.example.com"], "--notify 'ns2.example.com'"),
        ([], "nothing to serve"),
    ]
    for args, fragment in cases:
        assert_one_line_error(stormpy("serve-dns", "--listen", "127.0.0.1:1", *args), fragment)


def test_poll_napi_is_for_af_xdp_only():
    for backend in ([], ["--iface", "lo", "--backend", "packet"]):
        assert_one_line_error(stormpy("serve-dns", "nope.zone", "--poll", "napi", *backend),
                              "--poll napi is for --backend xdp")


def test_precopy_min_bytes_is_for_precopy_mode_only():
    for mode in ([], ["--iface", "lo", "--backend", "packet", "--mode", "memcpy"]):
        assert_one_line_error(stormpy("serve-dns", EXAMPLE_ZONE, "--precopy-min-bytes", "0", *mode),
                              "--precopy-min-bytes is for --mode precopy")


def test_tx_limit_is_for_af_xdp_only():
    """--tx-limit counts on AF_XDP's completion ring: elsewhere it is refused in one line,
    and a limit below one small frame by argparse."""
    for backend in ([], ["--iface", "lo", "--backend", "packet"]):
        assert_one_line_error(stormpy("serve-dns", "nope.zone", "--tx-limit", "4096", *backend),
                              "--tx-limit is for --backend xdp")
    r = stormpy("serve-dns", "nope.zone", "--tx-limit", "10")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--tx-limit: '10': 0, or from 64 bytes" in r.stderr.splitlines()[-1]


def test_a_build_without_af_xdp_says_it_serves_on_af_packet(monkeypatch, caplog):
    """--iface with no --backend: AF_XDP where it can run; where it cannot (not compiled
    in, no capability), one line says so and how to get it, and AF_PACKET serves."""
    from stormpy import backends
    from stormpy.cli import build_parser, dns_config
    args = build_parser().parse_args(["serve-dns", EXAMPLE_ZONE, "--iface", "veth-none"])
    monkeypatch.setattr(backends, "why_unusable",
                        lambda name: backends.BUILD_HINT["xdp"] if name == "xdp" else None)
    with caplog.at_level("WARNING", logger="stormpy"):
        cfg = dns_config(args)
    assert cfg.backend == "packet"
    lines = [r.getMessage() for r in caplog.records if "AF_XDP" in r.getMessage()]
    assert lines == ["--iface veth-none: AF_XDP not compiled in: build with libxdp-dev and "
                     "libbpf-dev installed; serving on AF_PACKET"]
    monkeypatch.setattr(backends, "why_unusable", lambda name: None)
    caplog.clear()
    assert dns_config(build_parser().parse_args(["serve-dns", EXAMPLE_ZONE, "--iface", "x"])).backend == "xdp"
    assert not [r for r in caplog.records if "AF_XDP" in r.getMessage()]


def test_a_kernel_that_refuses_the_answer_stage_leaves_the_workers_answering(monkeypatch, caplog):
    from stormpy import _core, backends
    from stormpy.errors import BackendError
    made = []

    def program(iface, port, mode, tcp=False, answer=False):
        if answer:
            raise BackendError("AF_XDP: kernel refused the XDP program: Invalid argument (verifier)")
        made.append((iface, port, mode, tcp))
        return "steer only"
    monkeypatch.setattr(_core, "XdpProgram", program)
    with caplog.at_level("WARNING", logger="stormpy"):
        assert backends.attach_xdp("veth0", 53, "auto", answer=True) == "steer only"
    assert made == [("veth0", 53, "auto", False)]
    assert [r.getMessage() for r in caplog.records] == [
        "--xdp-answer: AF_XDP: kernel refused the XDP program: Invalid argument (verifier); "
        "the workers answer every query"]


def test_a_driver_map_that_cannot_be_filled_empties_it_and_says_so(caplog):
    """A reload whose answers the kernel refuses (out of memory) must not leave the old
    zone's answers in the XDP program while the workers serve the new table."""
    import types
    from stormpy.dns.server import DnsServer
    from stormpy.dns.xdp import DriverAnswers
    from stormpy.errors import BackendError
    published = []

    class Program:
        ifname = "eth0"

        def answers_config(self, mac, addresses, ttl):
            pass

        def answers_publish(self, keys, values, room=0):
            if keys:
                raise BackendError("AF_XDP: answer map: Cannot allocate memory")
            published.append((keys, values))
    server = types.SimpleNamespace(xdp=Program(), identity={"mac": b"\0" * 6, "addresses": []},
                                   _tapped=False,
                                   _driver_answers=DriverAnswers(b"k" * 258, b"v" * 552, 1, 0, 0))
    with caplog.at_level("ERROR", logger="stormpy"):
        DnsServer._publish_driver(server)
    assert published == [(b"", b"")] and server._driver_answers is None
    assert [r.getMessage() for r in caplog.records] == [
        "XDP program on eth0: AF_XDP: answer map: Cannot allocate memory; the workers answer "
        "every query"]


@pytest.mark.parametrize("argv, link, on", [
    (["--iface", "eth9", "--backend", "xdp"], None, True),
    (["--iface", "eth9"], None, True),                          # AF_XDP chosen by itself
    (["--iface", "eth9", "--backend", "xdp", "--no-xdp-answer"], None, False),
    (["--iface", "eth9", "--backend", "xdp", "--rrl-rate", "5"], None, False),
    (["--iface", "eth9", "--backend", "packet"], None, False),
    ([], None, False),
    (["--iface", "veth9", "--backend", "xdp"], "veth", False),  # the peer would drop them
    (["--iface", "veth9", "--backend", "xdp", "--xdp-mode", "generic"], "veth", True),
    (["--iface", "veth9", "--backend", "xdp", "--xdp-answer"], "veth", True),
])
def test_the_driver_answers_by_default_where_its_replies_reach_the_client(
        argv, link, on, monkeypatch, caplog):
    from stormpy import backends, interfaces
    from stormpy.cli import build_parser, dns_config
    monkeypatch.setattr(backends, "why_unusable", lambda name: None)
    monkeypatch.setattr(interfaces, "link_kind", lambda iface: link)
    with caplog.at_level("INFO", logger="stormpy"):
        cfg = dns_config(build_parser().parse_args(["serve-dns", EXAMPLE_ZONE, *argv]))
    assert cfg.xdp_answer is on
    said = [r.getMessage() for r in caplog.records if "answers in the driver" in r.getMessage()]
    assert said == (["answers in the driver are off on a veth in native XDP mode: the peer "
                     "drops XDP_TX frames unless it has an XDP program too (--xdp-answer turns "
                     "them on; --xdp-mode generic needs none)"]
                    if link == "veth" and not on else [])
