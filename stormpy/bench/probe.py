"""Asking a server under test questions with known answers (dnspython on both sides):
is it up, does it answer correctly, did its replies under load have the expected mix of
rcodes. `python -m stormpy.bench.probe SPEC [WAIT]` asks them from another network
namespace (once the server answers at all, within WAIT seconds) and prints the problems
as JSON (bench peers, the labs)."""
from __future__ import annotations

import json
import sys
import time
from typing import Optional

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

from stormpy.bench.processes import LOOPBACK


def ask(port: int, name: str, rdtype, timeout: float = 0.5,
        host: str = LOOPBACK) -> Optional[dns.message.Message]:
    """One UDP query (no RD) to host:port; None on timeout, unreachable or garbage."""
    query = dns.message.make_query(name, rdtype)
    query.flags = 0
    try:
        return dns.query.udp(query, host, timeout=timeout, port=port)
    except (dns.exception.DNSException, OSError, ValueError):
        return None


def _records(reply: dns.message.Message) -> int:
    return sum(len(rrset) for rrset in reply.answer)


def _rcode(reply: dns.message.Message) -> str:
    return dns.rcode.to_text(reply.rcode())


def answer_problems(port: int, samples: list, nxdomain_name: str, nodata_name: str,
                    host: str = LOOPBACK) -> list:
    """Ask the samples' A records, an NXDOMAIN and a NODATA question; the problems found."""
    problems = []
    for name, want in samples:
        r = ask(port, name, dns.rdatatype.A, timeout=2.0, host=host)
        if r is None:
            problems.append(f"no reply to {name} A")
            continue
        addrs = [rd.address for rrset in r.answer if rrset.rdtype == dns.rdatatype.A for rd in rrset]
        if not r.flags & dns.flags.QR:
            problems.append(f"{name} A: QR bit not set")
        if r.rcode() != dns.rcode.NOERROR:
            problems.append(f"{name} A: rcode {_rcode(r)}, want NOERROR")
        if addrs != [want]:
            problems.append(f"{name} A: answer {addrs}, want [{want}]")
        if not r.flags & dns.flags.AA:
            problems.append(f"{name} A: AA bit not set")
    r = ask(port, nxdomain_name, dns.rdatatype.A, timeout=2.0, host=host)
    if r is None or r.rcode() != dns.rcode.NXDOMAIN or r.answer:
        got = "no reply" if r is None else f"rcode {_rcode(r)}, {_records(r)} answers"
        problems.append(f"{nxdomain_name} A: {got}, want NXDOMAIN")
    r = ask(port, nodata_name, dns.rdatatype.AAAA, timeout=2.0, host=host)
    if r is None or r.rcode() != dns.rcode.NOERROR or r.answer:
        got = "no reply" if r is None else f"rcode {_rcode(r)}, {_records(r)} answers"
        problems.append(f"{nodata_name} AAAA: {got}, want NOERROR/NODATA")
    return problems


def await_reply(port: int, name: str, host: str, wait: float) -> bool:
    """Ask name A until any reply comes, for at most `wait` seconds: the first try with a
    0.1 s timeout, half as long again each next one (a question to a server still
    starting would otherwise wait out a full check's 2 s)."""
    deadline, timeout = time.monotonic() + wait, 0.1
    while ask(port, name, dns.rdatatype.A, timeout=timeout, host=host) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
        timeout = min(1.0, 1.5 * timeout)
    return True


def workload_problems(port: int, wl, host: str = LOOPBACK) -> list:
    return answer_problems(port, wl.samples, wl.nxdomain_name, wl.nodata_name, host)


def probe_spec(wl, port: int, host: str) -> str:
    """The argument of `python -m stormpy.bench.probe` for this workload's questions."""
    return json.dumps({"samples": wl.samples, "nx": wl.nxdomain_name, "nodata": wl.nodata_name,
                       "port": port, "host": host})


def rcode_mix_problems(rcodes: dict, expected_nxdomain_share: float) -> list:
    """A server that answers wrongly under load (REFUSED, SERVFAIL, no NXDOMAIN...)."""
    total = sum(rcodes.values())
    if total == 0:
        return ["no replies"]
    other = {k: v for k, v in rcodes.items() if k not in ("NOERROR", "NXDOMAIN")}
    out = []
    if sum(other.values()) > 0.001 * total:
        out.append("unexpected rcodes " + ", ".join(f"{k}={v}" for k, v in other.items()))
    nx = rcodes.get("NXDOMAIN", 0) / total
    if abs(nx - expected_nxdomain_share) > 0.02:
        out.append(f"NXDOMAIN share {nx:.1%}, expected {expected_nxdomain_share:.1%}")
    return out


if __name__ == "__main__":
    # SPEC [WAIT]: with WAIT, the questions are asked once the server answers at all
    spec = json.loads(sys.argv[1])
    first = spec["samples"][0][0]
    if len(sys.argv) > 2 and not await_reply(spec["port"], first, spec["host"],
                                             float(sys.argv[2])):
        print(json.dumps([f"no reply to {first} A"]))
    else:
        print(json.dumps(answer_problems(spec["port"], [tuple(s) for s in spec["samples"]],
                                         spec["nx"], spec["nodata"], host=spec["host"])))
