"""Run inside a namespace holding IFACE: the XDP program's answer stage against the
workers' fast path, frame by frame (BPF_PROG_TEST_RUN on one side, the memory
backend on the other), with no traffic. Prints a JSON report for test_xdp_answer.

    ns_xdp_answer.py IFACE SEED ZONE [ZONE...]

Every frame the program answers (XDP_TX) must be byte for byte the worker's reply to
it; every frame it does not answer must leave it untouched."""
import json
import random
import sys

import dns.name
from scapy.layers.dns import DNS, DNSQR, DNSRROPT
from scapy.layers.inet import IP, UDP, IPOption_NOP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether

from stormpy import _core
from stormpy.dns import xdp
from stormpy.dns.compiler import assign_zone_slots, compile_zones
from stormpy.dns.zone import load_zone

SERVER_MAC, CLIENT_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
SERVER, CLIENT = "198.18.0.1", "198.18.0.2"
IDENTITY = {"mac": bytes.fromhex(SERVER_MAC.replace(":", "")), "addresses": [bytes([198, 18, 0, 1])]}


def frame(qname, qtype, rnd, edns=False, dns_fields=None, ip_fields=None, udp_fields=None,
          opt_fields=None, eth=None):
    d = DNS(id=rnd.randrange(65536), rd=rnd.random() < 0.5, cd=rnd.random() < 0.5,
            qd=DNSQR(qname=qname, qtype=qtype),
            ar=DNSRROPT(**dict({"rclass": 1232, "z": 0}, **(opt_fields or {}))) if edns else None,
            **(dns_fields or {}))
    udp = UDP(**dict({"sport": rnd.randrange(1024, 65536), "dport": 53}, **(udp_fields or {})))
    ip = IP(**dict({"src": CLIENT, "dst": SERVER, "id": rnd.randrange(65536)}, **(ip_fields or {})))
    return bytes((eth or Ether(src=CLIENT_MAC, dst=SERVER_MAC)) / ip / udp / d)


def mixed_case(owner: bytes, rnd) -> str:
    text = dns.name.from_wire(owner, 0)[0].to_text()
    return "".join(c.upper() if rnd.random() < 0.5 else c for c in text)


def judge(program, ref, frames, report, kind):
    """Each frame through both sides; the report counts and keeps the first problems."""
    for f in frames:
        verdict, out = program.test_run(f)
        replies, counted = _core.run_memory_worker(ref, [f])
        if verdict == "tx":
            report[kind]["tx"] += 1
            # what the worker counts for the frames the driver answers, to compare
            for key, n in (("rcode", 16), ("zone_answers", len(counted["zone_answers"]))):
                mine = report["worker_counts"].setdefault(key, [0] * n)
                report["worker_counts"][key] = [a + b for a, b in zip(mine, counted[key])]
            if replies != [out]:
                report["problems"].append(f"{kind}: driver {out.hex()} worker "
                                          f"{replies[0].hex() if replies else None} for {f.hex()}")
        else:
            report[kind]["up"] += 1
            if out != f:
                report["problems"].append(f"{kind}: {verdict} changed the frame {f.hex()}")


def left_to_workers(pairs, rnd):
    """Queries the driver must leave alone, each a variation of an answerable one."""
    owner, rdtype = pairs[0]
    name = mixed_case(owner, rnd)
    variations = {
        "DO bit": dict(edns=True, opt_fields={"z": 0x8000}),
        "EDNS version 1": dict(edns=True, opt_fields={"version": 1}),
        "EDNS size 511": dict(edns=True, opt_fields={"rclass": 511}),
        "opcode NOTIFY": dict(dns_fields={"opcode": 4}),
        "a response": dict(dns_fields={"qr": 1}),
        "an answer record": dict(dns_fields={"ancount": 1}),
        "UDP checksum 0": dict(udp_fields={"chksum": 0}),
        "bad UDP checksum": dict(udp_fields={"chksum": 0x1234}),
        "bad IP checksum": dict(ip_fields={"chksum": 0x1234}),
        "IP options": dict(ip_fields={"options": [IPOption_NOP()] * 4}),
        "a fragment": dict(ip_fields={"flags": 1}),
        "another address": dict(ip_fields={"dst": "198.18.0.9"}),
        "source port 0": dict(udp_fields={"sport": 0}),
        "loopback source": dict(ip_fields={"src": "127.0.0.1"}),
        "multicast source MAC": dict(eth=Ether(src="03:00:00:00:00:02", dst=SERVER_MAC)),
        "another MAC": dict(eth=Ether(src=CLIENT_MAC, dst="02:00:00:00:00:09")),
        "a VLAN tag": dict(eth=Ether(src=CLIENT_MAC, dst=SERVER_MAC) / Dot1Q(vlan=5)),
    }
    out = {k: frame(name, rdtype, rnd, **v) for k, v in variations.items()}
    good = frame(name, rdtype, rnd)
    out["a byte after the question"] = bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC) /
                                             IP(src=CLIENT, dst=SERVER) / UDP(sport=5353, dport=53) /
                                             (bytes(DNS(qd=DNSQR(qname=name, qtype=rdtype))) + b"\0"))
    cut = bytearray(good[:-6])
    cut[16:18] = (len(cut) - 14).to_bytes(2, "big")          # IP length agrees; UDP's does not
    out["cut in the question"] = bytes(cut)
    out["two questions"] = bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC) / IP(src=CLIENT, dst=SERVER) /
                                 UDP(sport=5353, dport=53) /
                                 DNS(qd=[DNSQR(qname=name, qtype=rdtype), DNSQR(qname=name)]))
    out["a compressed name"] = _compressed(name, rdtype)
    out["class CH"] = bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC) / IP(src=CLIENT, dst=SERVER) /
                            UDP(sport=5353, dport=53) / DNS(qd=DNSQR(qname=name, qtype=rdtype,
                                                                     qclass=3)))
    out["IPv6"] = bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC) / IPv6(src="2001:2::2", dst="2001:2::1") /
                        UDP(sport=5353, dport=53) / DNS(qd=DNSQR(qname=name, qtype=rdtype)))
    # options the workers answer FORMERR to, or more than the driver walks
    out["an option past its OPT"] = _with_options(name, rdtype, b"\x00\x0a\x00\x09" + bytes(8))
    out["a cut option header"] = _with_options(name, rdtype, b"\x00\x0a\x00")
    out["nine options"] = _with_options(name, rdtype, b"\x00\x0c\x00\x00" * 9)
    out["65 bytes of options"] = _with_options(name, rdtype, b"\x00\x0c\x00\x3d" + bytes(61))
    # an NSID request: the workers send the server's (--nsid)
    out["an NSID request"] = _with_options(name, rdtype, b"\x00\x03\x00\x00")
    out["NSID among other options"] = _with_options(
        name, rdtype, b"\x00\x0a\x00\x08" + bytes(8) + b"\x00\x03\x00\x00" + b"\x00\x0c\x00\x00")
    out["ANY"] = frame(name, 255, rnd)
    out["a name not held"] = frame("no-such-name-" + name, rdtype, rnd)
    return out


def _with_options(name, rdtype, options: bytes, rd=False):
    """A query whose OPT record carries `options` as they are, well-formed or not."""
    question = dns.name.from_text(name).to_wire() + rdtype.to_bytes(2, "big") + b"\x00\x01"
    opt = b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00" + len(options).to_bytes(2, "big") + options
    msg = b"\x12\x34" + (b"\x01" if rd else b"\x00") + b"\x00\x00\x01\x00\x00\x00\x00\x00\x01"
    return bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC) / IP(src=CLIENT, dst=SERVER) /
                 UDP(sport=5353, dport=53) / (msg + question + opt))


def with_options(pairs, rnd):
    """Answerable questions with EDNS options the workers skip (none is answered): a
    client COOKIE (BIND sends one), a client and server COOKIE, several at once, and
    exactly as many bytes and options as the driver walks."""
    sets = [b"\x00\x0a\x00\x08" + bytes(range(8)),
            b"\x00\x0a\x00\x18" + bytes(range(24)),
            b"\x00\x0a\x00\x08" + bytes(8) + b"\x00\x0c\x00\x02\x00\x00",
            b"\x00\x0c\x00\x3c" + bytes(60),
            b"\x00\x0c\x00\x00" * 8]
    return [_with_options(mixed_case(o, rnd), t, rnd.choice(sets), rd=rnd.random() < 0.5)
            for o, t in rnd.sample(pairs, min(len(pairs), 300))]


def _compressed(name, rdtype):
    """The question's name as a pointer to a copy of it in the header's place: legal
    wire, and no plain QUERY's."""
    wire = dns.name.from_text(name).to_wire()
    msg = (bytes(2) + b"\x00\x00" + (1).to_bytes(2, "big") + bytes(6) + b"\xc0\x0c" +
           rdtype.to_bytes(2, "big") + b"\x00\x01" + wire)
    return bytes(Ether(src=CLIENT_MAC, dst=SERVER_MAC) / IP(src=CLIENT, dst=SERVER) /
                 UDP(sport=5353, dport=53) / msg)


def not_held(pairs, rnd):
    """Questions the driver answers from a name's other-types or an ancestor's below
    entry: other types at held names, and names under them the zones do not hold."""
    out = []
    for owner, _ in pairs:
        name = mixed_case(owner, rnd)
        for rdtype in rnd.sample([15, 16, 33, 257, 99, 65000, 43, 255, 5, 2, 6], 3):
            out.append(frame(name, rdtype, rnd, edns=rnd.random() < 0.5))
        for _ in range(2):
            child = ".".join(rnd.choice(["x", "Nope", "a-b", "zz9", "*"])
                             for _ in range(rnd.randint(1, 3)))
            out.append(frame(f"{child}.{name}".replace("..", "."), rnd.choice([1, 28, 15, 16]),
                             rnd, edns=rnd.random() < 0.5))
    return out


def mutations(frames, rnd, count):
    """Answerable frames with 1 to 3 bytes changed, or cut, or grown."""
    out = []
    for _ in range(count):
        f = bytearray(rnd.choice(frames))
        how = rnd.random()
        if how < 0.8:
            for _ in range(rnd.randint(1, 3)):
                f[rnd.randrange(len(f))] = rnd.randrange(256)
        elif how < 0.9:
            f = f[:rnd.randrange(14, len(f))]
        else:
            f += bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 8)))
        out.append(bytes(f))
    return out


def main():
    iface, seed, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    rnd = random.Random(seed)
    zones = [load_zone(p) for p in paths]
    slots = {}
    assign_zone_slots(slots, zones)      # the per-zone counters, as a server numbers them
    table, _ = compile_zones(zones, zone_slots=slots)
    answers = xdp.driver_answers(table, zones, 1232)
    limited = xdp.driver_answers(table, zones, 1232, entries=60)
    pairs = list(xdp._pairs(zones))
    ref = _core.TableRef(table, 1)       # the table is the workers' from here on
    program = _core.XdpProgram(iface, 53, "auto", answer=True)
    report = {k: {"tx": 0, "up": 0}
              for k in ("held", "left", "mutated", "before", "not_held", "limited", "options")}
    report.update(problems=[], left_names=[], worker_counts={}, instructions=program.instructions(),
                  entries=answers.count, left_out=answers.left, pairs=len(pairs))
    probe = frame(mixed_case(pairs[0][0], rnd), pairs[0][1], rnd)
    judge(program, ref, [probe], report, "before")      # nothing published: all go up
    xdp.publish(program, answers, IDENTITY)
    held = [frame(mixed_case(o, rnd), t, rnd, edns=rnd.random() < 0.5) for o, t in pairs]
    judge(program, ref, held, report, "held")
    others = not_held(pairs, rnd)
    judge(program, ref, others, report, "not_held")
    optioned = with_options(pairs, rnd)
    judge(program, ref, optioned, report, "options")
    for what, f in left_to_workers(pairs, rnd).items():
        if program.test_run(f)[0] == "tx":
            report["left_names"].append(what)
    judge(program, ref, list(left_to_workers(pairs, rnd).values()), report, "left")
    judge(program, ref, mutations(held + others + optioned, rnd, 3000), report, "mutated")
    report["stats"] = program.counters()
    report["worker_counts_then"] = dict(report["worker_counts"])
    # a generation cut short by its entry limit, swapped in: what it holds stays right
    report["limited_over"] = limited.over
    xdp.publish(program, limited, IDENTITY)
    judge(program, ref, held + others, report, "limited")
    program.detach()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
