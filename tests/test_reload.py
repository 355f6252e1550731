"""SIGHUP reload: new data appears, bad data is refused, and nothing is lost meanwhile."""
import signal
import threading
import time

import dns.message
import dns.rdatatype
import pytest

from support.client import udp
from support.servers import StormpyServer


def www_address(addr):
    r = udp(dns.message.make_query("www.example.com", "A"), addr)
    return None if r is None else [rr.address for rr in r.answer[0]][0]


def wait_for(predicate, seconds=15.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def rewrite(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_reload_swaps_in_new_data(example_zone_copy):
    with StormpyServer([("example.com.", str(example_zone_copy))], workers=2) as srv:
        assert www_address(srv.addr) == "192.0.2.80"
        rewrite(example_zone_copy, "www     IN A    192.0.2.80", "www     IN A    192.0.2.81")
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: www_address(srv.addr) == "192.0.2.81")


def test_failed_reload_keeps_serving_the_old_zone(example_zone_copy):
    with StormpyServer([("example.com.", str(example_zone_copy))], workers=1) as srv:
        rewrite(example_zone_copy, "www     IN A    192.0.2.80", "www     IN A    192.0.2.800")
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: "reload failed" in srv.output())
        log = srv.output()
        assert f"{example_zone_copy}:21:" in log, log          # file:line of the bad record
        assert "Traceback" not in log
        assert www_address(srv.addr) == "192.0.2.80"
        assert srv.proc.poll() is None


def test_no_query_lost_or_mixed_during_reloads(example_zone_copy):
    """Queries run while the zone flips between two versions: every one is answered,
    each with one version's data, never a mix or an error."""
    with StormpyServer([("example.com.", str(example_zone_copy))], workers=2) as srv:
        versions = {"192.0.2.80", "192.0.2.81"}
        results, stop = [], threading.Event()

        def client():
            sent = 0
            while not stop.is_set() and sent < 20000:   # bounded in count and time
                sent += 1
                r = udp(dns.message.make_query("www.example.com", "A"), srv.addr, timeout=1.0)
                results.append(None if r is None else
                               (r.rcode(), tuple(sorted(x.address for x in r.answer[0]))))

        threads = [threading.Thread(target=client) for _ in range(2)]
        for t in threads:
            t.start()
        current = "192.0.2.80"
        for _ in range(6):
            time.sleep(0.4)
            nxt = "192.0.2.81" if current == "192.0.2.80" else "192.0.2.80"
            rewrite(example_zone_copy, f"www     IN A    {current}", f"www     IN A    {nxt}")
            current = nxt
            srv.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert len(results) > 100
        assert results.count(None) == 0, "queries lost during reload"
        assert all(rcode == 0 and len(addrs) == 1 and addrs[0] in versions for rcode, addrs in results)
        assert srv.output().count("reloaded") == 6


@pytest.mark.parametrize("native", [True, False], ids=["read in C", "read by dnspython"])
def test_records_differ_sees_a_change_that_keeps_the_count(example_zone_copy, native):
    """What a same-serial reload is warned of: a changed address or TTL differs, the same
    records written otherwise (a comment) do not."""
    from stormpy.dns.journal import records_differ as _records_differ
    from stormpy.dns.zone import load_zone
    old = load_zone(str(example_zone_copy), native=native)
    assert (getattr(old, "native", None) is not None) == native
    assert not _records_differ(old, load_zone(str(example_zone_copy), native=native))
    rewrite(example_zone_copy, "192.0.2.53", "192.0.2.54")
    changed = load_zone(str(example_zone_copy), native=native)
    assert changed.record_count == old.record_count and _records_differ(old, changed)
    rewrite(example_zone_copy, "192.0.2.54", "192.0.2.53 ; a comment")
    assert not _records_differ(old, load_zone(str(example_zone_copy), native=native))
    rewrite(example_zone_copy, "ns1     IN A    192.0.2.53", "ns1 60 IN A 192.0.2.53")
    assert _records_differ(old, load_zone(str(example_zone_copy), native=native))
