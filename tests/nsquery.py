"""Run inside a client namespace by netns.py: ask questions, print JSON answers."""
import json
import sys

import dns.message
import dns.query

server, port, proto, timeout, questions = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
    float(sys.argv[4]), json.loads(sys.argv[5])
out = []
for question in questions:
    name, qtype = question[:2]
    payload = question[2] if len(question) > 2 else None     # EDNS payload size, if any
    q = dns.message.make_query(name, qtype, use_edns=0 if payload else None, payload=payload or 512)
    try:
        ask = dns.query.tcp if proto == "tcp" else dns.query.udp
        r = ask(q, server, port=port, timeout=timeout)
        out.append({"rcode": r.rcode(), "aa": bool(r.flags & 0x0400), "tc": bool(r.flags & 0x0200),
                    "answer": sorted(str(rd) for rrset in r.answer for rd in rrset),
                    "question": r.question[0].name.to_text()})
    except Exception:
        out.append(None)
print(json.dumps(out))
