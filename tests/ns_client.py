"""The client side of the namespace tests, run inside a client namespace (or locally) by
support/netns.py and support/responders.py; prints its results as JSON:

    ns_client.py dns SERVER PORT udp|tcp TIMEOUT QUESTIONS   [[name, type, payload?], ...]
    ns_client.py udp HOST PORT TIMEOUT PAYLOADS              hex payloads -> hex replies
    ns_client.py tcp HOST PORT TIMEOUT LINES                 lines -> the lines answered
    ns_client.py diff SERVER PORT SEED                       the differential UDP cases
"""
import json
import sys

from support import dnsdiff
from support.client import summary, tcp_lines, udp_payloads, udp_query


def main(mode, *args):
    if mode == "dns":
        server, port, proto, timeout, questions = args
        return [summary(q[0], q[1], server, int(port), proto == "tcp",
                        q[2] if len(q) > 2 else None, float(timeout))
                for q in json.loads(questions)]
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
