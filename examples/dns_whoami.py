"""A DNS server customised in Python: the zone is compiled by serve-dns's compiler
and answered in C, and one dynamic name, whoami.example.com, is answered in
Python with the asker's network: TXT gives its prefix (/24 for IPv4, /56 for
IPv6), and A the address of the site that serves that prefix.

    .venv/bin/python examples/dns_whoami.py --listen 127.0.0.1:5353
    dig @127.0.0.1 -p 5353 whoami.example.com TXT
"""
import ipaddress
import os

import dns.exception
import dns.flags
import dns.message
import dns.rdatatype
import dns.rrset

import stormpy

ZONE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "zones", "example.zone")
WHOAMI = "whoami.example.com."
SITES = {ipaddress.ip_network("198.18.0.0/15"): "192.0.2.18",
         ipaddress.ip_network("127.0.0.0/8"): "192.0.2.127"}
ANYWHERE_ELSE = "192.0.2.1"


def prefix_of(address: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    ip = ipaddress.ip_address(address)
    return ipaddress.ip_network(f"{ip}/{24 if ip.version == 4 else 56}", strict=False)


def site_for(address: str) -> str:
    ip = ipaddress.ip_address(address)
    return next((site for net, site in SITES.items() if ip in net), ANYWHERE_ELSE)


def whoami(packets):
    """The handler: queries for WHOAMI, in batches; a bad one is skipped, not fatal."""
    for packet in packets:
        try:
            query = dns.message.from_wire(bytes(packet.payload))
        except dns.exception.DNSException:
            continue
        if not query.question:
            continue
        reply = dns.message.make_response(query)
        reply.flags |= dns.flags.AA
        question = query.question[0]
        if question.rdtype == dns.rdatatype.TXT:
            reply.answer.append(dns.rrset.from_text(question.name, 0, "IN", "TXT",
                                                    f'"{prefix_of(packet.src)}"'))
        elif question.rdtype == dns.rdatatype.A:
            reply.answer.append(dns.rrset.from_text(question.name, 0, "IN", "A",
                                                    site_for(packet.src)))
        yield packet, reply.to_wire()


server = stormpy.Responder(53, name="example.com with whoami", handler=whoami)
server.zones(ZONE, dynamic=[WHOAMI])

if __name__ == "__main__":
    raise SystemExit(stormpy.serve(server))
