"""The client side of the namespace tests, run inside a client namespace (or locally) by
support/netns.py and support/responders.py; prints its results as JSON:

    ns_client.py dns SERVER PORT udp|tcp TIMEOUT QUESTIONS   [[name, type, payload?], ...]
    ns_client.py udp HOST PORT TIMEOUT PAYLOADS              hex payloads -> hex replies
    ns_client.py tcp HOST PORT TIMEOUT LINES                 lines -> the lines answered
    ns_client.py diff SERVER PORT SEED                       the differential UDP cases
    ns_client.py wire SERVER PORT udp|tcp TIMEOUT FILE       hex queries (JSON file) -> hex replies
    ns_client.py synflood SERVER PORT COUNT SECONDS          SYNs from spoofed sources
    ns_client.py seen IFACE HOST PORT TIMEOUT PAYLOADS       `udp`, and the frames IFACE carried
"""
import json
import random
import socket
import struct
import sys
import time

from support import dnsdiff
from support.client import summary, tcp_lines, tcp_query, udp_payloads, udp_query


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s & 0xffff) + (s >> 16)
    s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def synflood(server, port, count, seconds):
    """SYNs to SERVER:PORT from random sources in 198.19.0.0/16 (the benchmarking
    range), COUNT spread evenly over SECONDS; returns how many were sent."""
    rng = random.Random(5)
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    dst = socket.inet_aton(server)
    start = time.monotonic()
    pace = float(seconds) / int(count)
    sent = 0
    for i in range(int(count)):
        ahead = start + i * pace - time.monotonic()
        if ahead > 0.002:
            time.sleep(ahead)
        src = socket.inet_aton(f"198.19.{rng.randrange(256)}.{rng.randrange(1, 255)}")
        tcp = struct.pack("!HHIIBBHHH", rng.randrange(1024, 65535), int(port),
                          rng.getrandbits(32), 0, 5 << 4, 0x02, 64240, 0, 0)
        tcp = tcp[:16] + struct.pack("!H", checksum(src + dst + struct.pack("!BBH", 0, 6, 20)
                                                     + tcp)) + tcp[18:]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 0, 0, 64, 6, 0, src, dst)
        ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
        try:
            raw.sendto(ip + tcp, (server, 0))
            sent += 1
        except OSError:
            time.sleep(0.001)        # the queue is full: let it drain
    return sent


def seen(iface, host, port, timeout, payloads):
    """`udp` mode's exchange, and the frames to or from PORT that IFACE carried meanwhile
    as this host saw them: [[sent, hex frame], ...]."""
    from stormpy.tap import frame_ports
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))   # ETH_P_ALL
    raw.bind((iface, 0))
    replies = udp_payloads(host, int(port), float(timeout), json.loads(payloads))
    raw.setblocking(False)
    frames = []
    while True:
        try:
            frame, addr = raw.recvfrom(65535)
        except BlockingIOError:
            break
        if int(port) in frame_ports(frame):
            frames.append([addr[2] == socket.PACKET_OUTGOING, frame.hex()])
    return {"replies": replies, "frames": frames}


def main(mode, *args):
    if mode == "synflood":
        return synflood(*args)
    if mode == "seen":
        return seen(*args)
    if mode == "dns":
        server, port, proto, timeout, questions = args
        return [summary(q[0], q[1], server, int(port), proto == "tcp",
                        q[2] if len(q) > 2 else None, float(timeout))
                for q in json.loads(questions)]
    if mode == "wire":
        server, port, proto, timeout, path = args
        ask = tcp_query if proto == "tcp" else udp_query
        with open(path) as f:
            replies = [ask(bytes.fromhex(q), (server, int(port)), float(timeout)) for q in json.load(f)]
        return [r.hex() if r is not None else None for r in replies]
    if mode in ("udp", "tcp"):
        host, port, timeout, items = args
        exchange = udp_payloads if mode == "udp" else tcp_lines
        return exchange(host, int(port), float(timeout), json.loads(items))
    server, port, seed = args
    cases = dnsdiff.udp_cases(dnsdiff.generate_queries(int(seed)))
    replies = (udp_query(case.wire(i + 1), (server, int(port)), case.timeout)
               for i, case in enumerate(cases))
    return [r.hex() if r is not None else None for r in replies]


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
