"""A worker's counters as one line of text (the log's summaries, `stormpy replay`,
`stormpy stats`)."""
from __future__ import annotations

RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED",
          9: "NOTAUTH", 16: "BADVERS"}


def format_counters(c: dict) -> str:
    rcodes = " ".join(f"{RCODES.get(i, i)}={n}" for i, n in enumerate(c["rcode"]) if n)
    # dropped= counts the queries a worker decided not to answer; what never got that far,
    # or was held back by rate limiting, is named when there is any
    rules = "".join(f" {k}={c[k]}" for k in ("rule_answers", "slow_path", "slow_replies",
                                              "handler_errors", "bad_replies", "rrl_dropped",
                                              "rrl_slipped", "malformed", "bad_source",
                                              "rx_truncated") if c.get(k))
    return (f"udp rx={c['rx']} tx={c['tx']} dropped={c['dropped']} truncated={c['truncated']} "
            f"tcp={c['tcp_queries']}{rules}{_driver(c)} {rcodes}".rstrip())


def with_driver(total: dict, driver: dict) -> dict:
    """The workers' total with the driver's answers (XdpProgram.counters(); {} without
    --xdp-answer) added to the rcodes and zones, as a worker would have counted them."""
    total.update(driver)
    for mine, theirs in (("rcode", "xdp_rcode"), ("zone_answers", "xdp_zone_answers")):
        if theirs in driver and mine in total:     # the driver's rcodes stop at 15, not 16
            extra = driver[theirs] + [0] * (len(total[mine]) - len(driver[theirs]))
            total[mine] = [a + b for a, b in zip(total[mine], extra)]
    return total


def _driver(c: dict) -> str:
    """--xdp-answer's queries, which no worker counts."""
    if "xdp_answered" not in c:
        return ""
    return f" xdp_answered={c['xdp_answered']} xdp_passed={c['xdp_passed']}"


def summed(workers) -> dict:
    """Workers' counters added up (lists element by element)."""
    total: dict = {}
    for c in workers:
        for k, v in c.items():
            if isinstance(v, list):
                total[k] = [a + b for a, b in zip(total.get(k, [0] * len(v)), v)]
            else:
                total[k] = total.get(k, 0) + v
    return total
