"""A UDP/TCP client for the responder tests, run inside a client namespace (or
locally): `nsudp.py udp HOST PORT TIMEOUT JSON` sends each hex payload of JSON and
prints the replies (hex, or null after TIMEOUT) as JSON; `nsudp.py tcp HOST PORT
TIMEOUT JSON` sends the lines and prints the lines answered."""
import json
import socket
import sys


def udp(host, port, timeout, payloads):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    out = []
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        for p in payloads:
            s.sendto(bytes.fromhex(p), (host, port))
            try:
                while True:
                    data, peer = s.recvfrom(65535)
                    if peer[1] == port:
                        out.append(data.hex())
                        break
            except socket.timeout:
                out.append(None)
    return out


def tcp(host, port, timeout, lines):
    out = []
    with socket.create_connection((host, port), timeout=timeout) as s:
        f = s.makefile("rwb")
        for line in lines:
            f.write(line.encode() + b"\n")
            f.flush()
            out.append(f.readline().decode().rstrip("\n"))
    return out


if __name__ == "__main__":
    kind, host, port, timeout, items = sys.argv[1:6]
    print(json.dumps((udp if kind == "udp" else tcp)(host, int(port), float(timeout),
                                                    json.loads(items))))
