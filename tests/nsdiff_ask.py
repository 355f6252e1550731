"""Run inside the client namespace by test_xdp_differential.py: send every UDP case of
the differential query set to a server, print the raw responses as JSON hex."""
import json
import socket
import sys

import dnsdiff

server, port, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = []
for i, case in enumerate(dnsdiff.udp_cases(dnsdiff.generate_queries(seed))):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(case.timeout)
        s.sendto(case.wire(i + 1), (server, port))
        try:
            out.append(s.recv(65535).hex())
        except socket.timeout:
            out.append(None)
print(json.dumps(out))
