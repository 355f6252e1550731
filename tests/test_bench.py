"""`stormpy bench`: the commands run and print what they promise, with tiny round counts.
No timing is asserted: this machine is too noisy for that, and the figures belong in
docs/PERFORMANCE.md, measured properly."""
import csv
import json
import os
import shutil
import subprocess
import sys
import types

import pytest

from stormpy import _core
from stormpy.bench.processes import find_tool
from stormpy.bench import BenchError, cli, peers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "stormpy.bench", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def test_fastpath_json_without_root_or_callgrind():
    r = bench("fastpath", "--json", "--names", "20", "--queries", "300", "--rounds", "2",
              "--repeat", "1", "--no-callgrind")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)  # exactly one JSON object on stdout
    assert out["qps"] > 0 and out["ns_per_query"] > 0
    assert out["dns_qps"] > 0 and out["precopy_qps"] > 0
    assert out["answered_share"] == 1.0
    assert out["instructions_per_query"] is None and out["instructions_reason"]


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_fastpath_counts_instructions_with_callgrind():
    r = bench("fastpath", "--json", "--names", "10", "--queries", "200", "--rounds", "1",
              "--repeat", "1", "--cg-queries", "200", timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["instructions_per_query"] > 0
    assert out["dns_instructions_per_query"] > 0
    assert "instructions_reason" not in out


def test_fastpath_without_valgrind_gives_null_and_a_reason(monkeypatch):
    from stormpy.bench import callgrind, fastpath
    monkeypatch.setattr(callgrind.shutil, "which", lambda name: None)
    assert "valgrind" in callgrind.why_no_callgrind()
    args = types.SimpleNamespace(names=[5], queries=100, seed=1, rounds=1, repeat=1, batch=32,
                                 callgrind=None, cg_queries=100, annotate=False, json=True)
    (row,) = fastpath.fastpath_rows(args)
    assert row["instructions_per_query"] is None
    assert "valgrind" in row["instructions_reason"]


def test_sweep_batch_has_a_row_per_batch_size_with_both_modes():
    r = bench("sweep", "batch", "--json", "--names", "10", "--queries", "200", "--rounds", "1",
              "--passes", "1")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [row["batch"] for row in rows] == [1, 2, 4, 8, 16, 32, 64]
    for row in rows:
        assert row["memcpy_qps"] > 0 and row["precopy_qps"] > 0 and row["precopy_over_memcpy"] > 0


def test_sweep_zone_has_a_row_per_zone_size():
    r = bench("sweep", "zone", "--names", "1,50", "--queries", "200", "--rounds", "1", "--passes", "1")
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stdout.splitlines() if l.startswith("| ")]
    assert len(lines) == 3  # header and two rows
    assert lines[1].startswith("| 1 |") and lines[2].startswith("| 50 |")


def test_sweep_answer_copies_only_answers_past_the_minimum():
    """Axis answer: serve-dns's precopy copies none of the 100-byte answers and every
    800-byte one (hits: 4 rounds of 300 queries, less the first copies); with every
    answer copied, the 100-byte ones too."""
    from stormpy._core import PRECOPY_MIN_BYTES
    r = bench("sweep", "answer", "--json", "--names", "20", "--sizes", "100,800",
              "--queries", "300", "--rounds", "4", "--passes", "1")
    assert r.returncode == 0, r.stderr
    small, large = json.loads(r.stdout)["rows"]
    assert (small["answer_bytes"], large["answer_bytes"]) == (100, 800)
    assert small["answer_bytes"] < PRECOPY_MIN_BYTES < large["answer_bytes"]
    assert small["precopy_hits"] == 0 and 1100 < large["precopy_hits"] < 1200
    assert 1100 < small["precopy_all_hits"] < 1200
    for row in (small, large):
        assert row["memcpy_qps"] > 0 and row["precopy_all_over_memcpy"] > 0


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to scale to")
def test_cores_runs_one_worker_then_one_per_cpu():
    r = bench("cores", "--json", "--names", "20", "--queries", "300", "--rounds", "2",
              "--repeat", "2")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    n = len(os.sched_getaffinity(0))
    assert len(out["cpus"]) == n and len(out["ratios"]) == 2 and out["answered_share"] == 1.0
    # each worker replays every query `rounds` times from its own queue
    assert out["frames"] == [300 * 2] * 2 + [300 * 2 * n] * 2
    assert all(x > 0 for x in out["ratios"]) and out["veth"]


@pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns: no C store")
def test_ixfr_times_every_step_and_serves_the_delta():
    r = bench("ixfr", "--json", "--records", "1000")
    assert r.returncode == 0, r.stderr
    steps = json.loads(r.stdout)["1000"]
    assert steps["swap after the IXFR"] == pytest.approx(
        steps["patch the C store"] + steps["edit the table"] + steps["place for the workers"],
        abs=1e-3)
    assert all(v >= 0 for v in steps.values()) and steps["read (dnspython)"] > 0


@pytest.mark.skipif(not _core.ZONE_READER, reason="built without ldns: no C store")
@pytest.mark.skipif(find_tool("knotd") is None, reason="knotd not installed")
def test_notify_times_knot_to_stormpy_with_the_table_edited(tmp_path):
    csv_path = tmp_path / "notify.csv"
    r = bench("notify", "--records", "1000", "--rounds", "2", "--csv", str(csv_path))
    assert r.returncode == 0, r.stderr
    rows = list(csv.reader(open(csv_path)))
    assert rows[0][:2] == ["round", "seconds to answer"] and len(rows) == 5, rows
    assert rows[1][0] == "first AXFR" and int(rows[1][6]) > 0, rows
    # the first NOTIFY after the AXFR is acted on at once: an IXFR applied in C
    assert all(row[5] == "C, edited" and 0 < float(row[1]) < 30 and float(row[2]) >= float(row[3])
               and int(row[6]) > 0 for row in rows[2:4]), rows
    assert rows[4][0] == "restart" and 0 < float(rows[4][1]) < 30, rows


def test_compile_reports_time_and_memory():
    r = bench("compile", "--records", "100", "--rounds", "1", "--no-knot", "--python-path", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    compiled = {row["path"]: row for row in rows if "path" in row}
    assert set(compiled) == ({"C", "Python"} if _core.ZONE_READER else {"Python"})
    assert len({row["keys"] for row in compiled.values()}) == 1   # the same table both ways
    assert all(row["seconds"] > 0 and row["peak_mib"] > 0 for row in rows)


def test_peers_without_root_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    args = cli.build_parser().parse_args(["peers", "--rounds", "1"])
    assert "root" in peers.why_not(args)
    assert cli.run(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "root" in err and "Traceback" not in err


def test_peers_rejects_unknown_servers_before_touching_the_network(monkeypatch):
    monkeypatch.setattr(peers, "why_not", lambda args: None)
    args = cli.build_parser().parse_args(["peers", "--servers", "bind9"])
    with pytest.raises(BenchError, match="unknown server"):
        peers.run_peers(args)


def test_kxdpgun_output_is_parsed():
    text = """using interface veth0, XDP threads 1, UDP, native mode
thread#00: sent 50048, received 44698
total queries:     50048 (50048 pps)
total replies:     44698 (44698 pps) (89%)
responded NOERROR:   22348
responded NXDOMAIN:  22350
duration: 1 s
"""
    got = peers.parse_kxdpgun(text, 1.0)
    assert got["sent"] == 50048 and got["replies"] == 44698
    assert got["replies_per_s"] == 44698.0
    assert got["rcodes"] == {"NOERROR": 22348, "NXDOMAIN": 22350}


def test_bad_input_is_one_line():
    r = bench("sockets", "--rounds", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = bench("sweep", "batch", "--batches", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_png_step_says_why_without_matplotlib(tmp_path, monkeypatch):
    from stormpy.bench import report
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    why = report.bar_chart(str(tmp_path / "x.png"), ["a"], [1.0], "t", "y")
    assert "matplotlib" in why and not (tmp_path / "x.png").exists()


RESPONDER_PATHS = {"dns", "kv", "echo", "slow32", "slow256", "scapy"}


def responders_args(**kw):
    args = dict(packets=120, rounds=2, repeat=1, batch=32, seconds=30.0, scapy_packets=40,
                callgrind=False, cg_packets=100, seed=1, names=10, json=True, csv=None)
    args.update(kw)
    return types.SimpleNamespace(**args)


def test_responders_json_has_every_path_and_checked_replies():
    r = bench("responders", "--json", "--packets", "150", "--rounds", "2", "--repeat", "1",
              "--names", "10", "--scapy-packets", "40", "--no-callgrind")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)  # exactly one JSON object on stdout
    assert set(out["paths"]) == RESPONDER_PATHS
    for name, p in out["paths"].items():
        assert p["pps"] > 0 and p["ns_per_packet"] > 0, name
        assert p["instructions_per_packet"] is None, name
        v = p["verified"]
        # every reply was checked before timing: one per query, the expected payload
        assert v["ok"] and v["replies"] == v["queries"] == v["checked"] == 150, name
    assert out["paths"]["slow32"]["batch"] == 32 and out["paths"]["slow256"]["batch"] == 256
    assert out["paths"]["scapy"]["packets"] == 40 and not out["paths"]["scapy"]["stopped_by_time"]
    assert out["paths"]["dns"]["packets"] == out["paths"]["kv"]["packets"] == 300  # 150 x 2 rounds
    assert out["paths"]["kv"]["verified"]["sample_reply_payload"].startswith(("VALUE ", "NOT_FOUND"))
    assert out["paths"]["echo"]["verified"]["sample_reply_payload"].startswith("ECHO ")
    assert out["paths"]["slow32"]["verified"]["sample_reply_payload"].startswith("ECHO ")
    assert out["verified"] is True
    assert {"kv_over_dns_ns", "kv_over_dns_instructions", "slow32_over_scapy_pps",
            "kv_over_scapy_pps"} <= set(out["ratios"])
    assert out["ratios"]["kv_over_dns_instructions"] is None
    assert set(out["targets"]) == {"rule_within_20pct_of_dns_time",
                                   "rule_within_20pct_of_dns_instructions", "slow_path_500k_pps"}
    assert out["targets"]["rule_within_20pct_of_dns_instructions"] is None
    assert "callgrind" in out["instructions_reason"]


def test_responders_table_is_printed():
    r = bench("responders", "--packets", "100", "--rounds", "1", "--repeat", "1", "--names", "5",
              "--scapy-packets", "20", "--no-callgrind")
    assert r.returncode == 0, r.stderr
    rows = [l for l in r.stdout.splitlines() if l.startswith("| ")]
    assert len(rows) == 7  # header and six paths
    assert "scapy AnsweringMachine" in rows[-1]
    assert any(l.startswith("replies: every path's replies checked") and l.endswith(": ok")
               for l in r.stdout.splitlines())


def test_responders_reply_checker_rejects_wrong_replies():
    from stormpy.bench import frames, responders
    rw = responders.ResponderWorkload(40, 1)
    replies, _ = rw.rules.run_frames(rw.kv_frames)
    assert responders.verify("kv", replies, rw.kv_frames, rw.kv_expect)["checked"] == 40
    good, query = replies[0], rw.kv_frames[0]
    assert frames.check_reply(good, query, rw.kv_expect[0]) is None
    assert "payload" in frames.check_reply(good, query, b"something else")
    flipped = good[:-1] + bytes([good[-1] ^ 1])  # payload changed, checksum not
    assert "checksum" in frames.check_reply(flipped, query, rw.kv_expect[0])
    assert "ports" in frames.check_reply(good, rw.kv_frames[1], rw.kv_expect[0])
    with pytest.raises(BenchError, match="39 replies to 40 queries"):
        responders.verify("kv", replies[:-1], rw.kv_frames, rw.kv_expect)


def test_responders_broken_slow_path_is_an_error_not_a_figure(monkeypatch):
    from stormpy.bench import responders
    monkeypatch.setattr(responders, "echo_handler",
                        lambda pkts: [(p, b"wrong") for p in pkts])
    with pytest.raises(BenchError, match="slow32: reply 0 is wrong: payload"):
        responders.responders_result(responders_args())
    monkeypatch.setattr(responders, "echo_handler", lambda pkts: [])  # answers nothing
    with pytest.raises(BenchError, match="slow32: 0 replies to 120 queries"):
        responders.responders_result(responders_args())


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_responders_counts_instructions_with_callgrind():
    r = bench("responders", "--json", "--packets", "100", "--rounds", "1", "--repeat", "1",
              "--names", "10", "--scapy-packets", "20", "--cg-packets", "100", timeout=900)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for name in ("dns", "kv", "echo", "slow32"):
        assert out["paths"][name]["instructions_per_packet"] > 0, name
    assert out["ratios"]["kv_over_dns_instructions"] > 0
    assert out["targets"]["rule_within_20pct_of_dns_instructions"] in (True, False)
    assert "instructions_reason" not in out


def test_cpu_measures_the_floor_and_the_driver_per_reply(tmp_path):
    """One short point each: the floor (the reflect stage) and serve-dns --xdp-answer,
    with CPU counted (its NAPI thread found and pinned) and a CSV row per point."""
    from support.backends import NO_NETNS, NO_XDP
    if NO_NETNS or NO_XDP:
        pytest.skip(NO_NETNS or NO_XDP)
    out = str(tmp_path / "cpu")
    r = bench("cpu", "--servers", "floor,stormpy-xdp-answer", "--loads", "20000", "--rounds", "1",
              "--seconds", "1", "--out", out, timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {row["server"]: row for row in csv.DictReader(open(out + ".csv"))}
    assert set(rows) == {"floor", "stormpy-xdp-answer"}
    for row in rows.values():
        assert int(row["replies/s"].replace(",", "")) > 15_000, row
        assert float(row["CPU us a reply"]) > 0 and row["NAPI share"] != "0%", row
    assert float(rows["floor"]["above the floor"]) == 0.0
    assert os.path.exists(out + ".png")


def test_cpu_rejects_a_bad_load_list_before_touching_the_network():
    r = bench("cpu", "--loads", "10k,max")
    assert r.returncode == 2 and "--loads: queries/s numbers" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
