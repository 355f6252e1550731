"""A primary that misbehaves on request, run in a test namespace (test_secondary.py):

    ns_fake_primary.py HOST PORT MODEFILE

It serves example.com.'s SOA over UDP and AXFR/IXFR over TCP. Each request reads
MODEFILE: "good SERIAL" transfers the zone with that serial; "truncated SERIAL" cuts
the connection in the middle of a message; "garbled SERIAL" sends a message with
random bytes in its records; "noend SERIAL" closes before the final SOA; "wrongzone
SERIAL" transfers another zone's records; "huge SERIAL" a good transfer whose TXT
RRset at big.example.com. makes an answer over 65535 bytes (served SERVFAIL). Every wait is bounded; it exits on SIGTERM."""
import random
import socket
import struct
import sys
import threading

import dns.message
import dns.rrset

ORIGIN = "example.com."


def records(serial: int, origin: str = ORIGIN) -> list:
    soa = dns.rrset.from_text(origin, 300, "IN", "SOA", f"ns.{origin} hm.{origin} {serial} 300 2 600 60")
    body = [dns.rrset.from_text(origin, 300, "IN", "NS", f"ns.{origin}"),
            dns.rrset.from_text(f"ns.{origin}", 300, "IN", "A", "198.18.0.2"),
            dns.rrset.from_text(f"www.{origin}", 300, "IN", "A", f"192.0.2.{serial % 250 + 1}")]
    body += [dns.rrset.from_text(f"h{i}.{origin}", 300, "IN", "TXT", f'"fake {i} {"x" * 60}"')
             for i in range(300)]
    return [soa, *body, soa]


def mode(path: str) -> tuple[str, int]:
    with open(path) as f:
        name, serial = f.read().split()
    return name, int(serial)


def serve_udp(sock, path):
    while True:
        data, peer = sock.recvfrom(65535)
        try:
            q = dns.message.from_wire(data)
        except Exception:
            continue
        r = dns.message.make_response(q)
        r.answer.append(records(mode(path)[1])[0])
        sock.sendto(r.to_wire(), peer)


def send(conn, wire: bytes):
    conn.sendall(struct.pack("!H", len(wire)) + wire)


def serve_tcp(conn, path):
    with conn:
        conn.settimeout(5)
        try:
            size = struct.unpack("!H", conn.recv(2))[0]
            q = dns.message.from_wire(conn.recv(size))
        except Exception:
            return
        how, serial = mode(path)
        rrsets = records(serial, "example.org." if how == "wrongzone" else ORIGIN)
        if how == "huge":      # the RRset in two halves, one per message
            big = [dns.rrset.from_text(f"big.{ORIGIN}", 300, "IN", "TXT",
                                       *(f'"{i:03d} {"y" * 220}"' for i in range(k, 300, 2)))
                   for k in (0, 1)]
            rrsets = [rrsets[0], big[0], *rrsets[1:-1], big[1], rrsets[-1]]
        if how == "noend":
            rrsets = rrsets[:-1]
        half = len(rrsets) // 2
        for i, part in enumerate((rrsets[:half], rrsets[half:])):
            r = dns.message.make_response(q)
            r.answer = part
            wire = r.to_wire()
            if how == "truncated" and i == 1:
                conn.sendall(struct.pack("!H", len(wire)) + wire[:len(wire) // 2])
                return
            if how == "garbled" and i == 1:
                rng = random.Random(serial)
                wire = wire[:40] + bytes(rng.randrange(256) for _ in range(len(wire) - 40))
            send(conn, wire)


def main():
    host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((host, port))
    threading.Thread(target=serve_udp, args=(udp, path), daemon=True).start()
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((host, port))
    tcp.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = tcp.accept()
        threading.Thread(target=serve_tcp, args=(conn, path), daemon=True).start()


if __name__ == "__main__":
    main()
