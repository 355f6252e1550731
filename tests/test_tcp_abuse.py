"""DNS over TCP holds under abuse: `reliability.py tcp-abuse` scaled down. For 8 s an
attacker namespace holds idle, chatty, non-reading and slow-loris connections from 16
addresses, reopening what the server cuts, while a real client in another namespace asks
every 20 ms, UDP and TCP in turn; it must get 99% of its answers on each. (The full run,
its figures beside Knot's and NSD's, is docs/RELIABILITY.md "TCP under abuse".)"""
import pytest

from reliability_tcp import MIN_ANSWERED, abuse_run, answered_percent, row
from support.netns import why_no_netns

NO_NETNS = why_no_netns()
pytestmark = pytest.mark.skipif(NO_NETNS is not None, reason=f"{NO_NETNS}")

# idle, chatty, non-reading, slow-loris: more idle connections than the 512 that
# stormpy's asyncio TCP held
SCALED_DOWN = [600, 50, 40, 20]


# with the per-source limit off, the timeouts and the pool's eviction are what hold
@pytest.mark.parametrize("args", [(), ("--tcp-max-per-source=0",)], ids=["defaults", "no-source-limit"])
def test_a_real_client_is_answered_while_tcp_is_abused(args):
    result = abuse_run("stormpy", seconds=8, after=0, counts=SCALED_DOWN, stormpy_args=args)
    for proto in ("udp", "tcp"):
        assert answered_percent(result["client"][proto]) >= MIN_ANSWERED, row(result)
    assert result["alive"], row(result)
    # the abuse did happen: every kind connected, the chatty ones were answered
    assert all(result["attack"][k]["established"] > 0 for k in ("idle", "chatty", "nonread", "loris"))
    assert result["attack"]["chatty"]["answers"] > 0, row(result)
