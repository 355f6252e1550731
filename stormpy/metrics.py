"""--metrics ADDR:PORT: a server's counters in Prometheus's text exposition format.

Nothing is counted here. The workers count in their own state in shared memory (as
for `stormpy stats`); a scrape reads those counters once, in the server process's
event loop, through a prometheus_client collector: no thread beside the workers'
forks, no work per packet. The metric names and labels are listed in
docs/OPERATING.md.
"""
from __future__ import annotations

import asyncio
import os

from prometheus_client.core import (CollectorRegistry, CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from prometheus_client.exposition import generate_latest

from stormpy.errors import StormpyError


RCODE_NAMES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP",
               5: "REFUSED", 9: "NOTAUTH", 16: "BADVERS"}
REQUEST_SECONDS = 5.0       # a scraper's request head must arrive within
# The classic text format that every Prometheus reads: every name here is a legacy
# name, so generate_latest() writes exactly it (newer prometheus_client would announce
# version 1.0.0, which Prometheus 2 does not know by name).
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


def _counter(name: str, doc: str, labels=(), samples=()):
    family = CounterMetricFamily(name, doc, labels=list(labels))
    for values, value in samples:
        family.add_metric(list(values), value)
    return family


def _gauge(name: str, doc: str, labels=(), samples=()):
    family = GaugeMetricFamily(name, doc, labels=list(labels))
    for values, value in samples:
        family.add_metric(list(values), value)
    return family


def _per_worker(workers: list[dict], key: str, first: int = 0) -> list:
    """key of each worker from index `first` on."""
    return [((str(i),), c.get(key, 0)) for i, c in enumerate(workers) if i >= first]


def _batch_histogram(workers: list[dict]):
    """The RX batch sizes: worker bucket i holds batches of 2**i to 2**(i+1) - 1
    frames (the last bucket, everything larger); the sum is the frames received."""
    family = HistogramMetricFamily("stormpy_batch_size", "frames per RX batch",
                                   labels=["worker"])
    for i, c in enumerate(workers):
        hist, running, buckets = c["batch_hist"], 0, []
        for k, n in enumerate(hist):
            running += n
            buckets.append((str((2 << k) - 1) if k < len(hist) - 1 else "+Inf", running))
        family.add_metric([str(i)], buckets, c["rx"])
    return family


def server_metrics(server) -> list:
    """Every metric family of server (a stormpy.server.Server), read now."""
    workers = [server.ref.worker_counters(i) for i in range(server.pool.count)]
    out = [
        _counter("stormpy_reloads", "tables reloaded (SIGHUP)", samples=[((), server.reloads)]),
        _counter("stormpy_reload_failures", "reloads that failed, the previous table kept",
                 samples=[((), server.reload_failures)]),
        _gauge("stormpy_reload_duration_seconds", "the last successful reload's load and compile",
               samples=[((), server.reload_seconds)]),
        _counter("stormpy_worker_restarts", "worker processes started again after dying",
                 ["worker"], [((str(i),), n) for i, n in enumerate(server.pool.restarts)]),
        _gauge("stormpy_worker_up", "1 while the worker process runs with its backend open",
               ["worker"], [((str(i),), int(r)) for i, r in enumerate(server.pool.ready)]),
    ]
    if not server.stream or server.cfg.iface:     # a frame loop: not HTTP on the kernel's TCP
        out += _frame_metrics(workers)
    out += _http_metrics(workers) if server.stream else _dns_metrics(server, workers)
    if getattr(server, "responder", None) is not None:     # a custom responder's rules
        out += _rules_metrics(workers)
    driver = server.xdp.counters() if server.xdp is not None else {}
    if driver:
        out += [_counter("stormpy_xdp_answered", "queries answered in the XDP program (XDP_TX)",
                         samples=[((), driver["xdp_answered"])]),
                _counter("stormpy_xdp_passed", "queries the XDP program left to the workers",
                         samples=[((), driver["xdp_passed"])])]
    return out


def _frame_metrics(workers: list[dict]) -> list:
    reasons = {"not_answered": "dropped", "malformed": "malformed", "not_ours": "not_ours",
               "bad_source": "bad_source", "rx_truncated": "rx_truncated"}
    return [
        _counter("stormpy_rx_packets", "frames (datagrams on sockets) received", ["worker"],
                 _per_worker(workers, "rx")),
        _counter("stormpy_tx_packets", "frames (datagrams) sent", ["worker"],
                 _per_worker(workers, "tx")),
        _counter("stormpy_tx_bytes", "bytes sent", ["worker"], _per_worker(workers, "tx_bytes")),
        _counter("stormpy_tx_ring_full", "replies left unsent: no TX buffer free", ["worker"],
                 _per_worker(workers, "tx_ring_full")),
        _counter("stormpy_tx_errors", "sends the backend failed", ["worker"],
                 _per_worker(workers, "tx_errors")),
        _counter("stormpy_dropped", "frames received and not answered, by reason",
                 ["worker", "reason"],
                 [((str(i), reason), c.get(key, 0)) for i, c in enumerate(workers)
                  for reason, key in reasons.items()]),
        _batch_histogram(workers),
    ]


def _dns_metrics(server, workers: list[dict]) -> list:
    sources = [(str(i), c) for i, c in enumerate(workers)]
    driver = server.xdp.counters() if server.xdp is not None else {}
    if driver:      # the XDP program's answers, counted as a worker's: worker="xdp"
        sources.append(("xdp", {"rcode": driver["xdp_rcode"], "truncated": 0,
                                "zone_answers": driver["xdp_zone_answers"]}))
    by_zone = [sum(col) for col in zip(*(c["zone_answers"] for _, c in sources))]
    # a copy: a reload (in an executor thread) may be adding zones to it
    slots = dict(getattr(server, "zone_slots", {}))
    zones = {slot: origin.to_text() for origin, slot in slots.items()}
    zones[0] = "other"
    rcodes = []
    for worker, c in sources:
        rcodes += [((worker, RCODE_NAMES.get(k, str(k) if k < 16 else "other")), n)
                   for k, n in enumerate(c["rcode"]) if n or k in RCODE_NAMES]
    out = [
        _counter("stormpy_dns_answers", "DNS answers by rcode (TCP's by the TCP workers)",
                 ["worker", "rcode"], rcodes),
        _counter("stormpy_dns_zone_answers", "DNS answers from the table by zone (other: zones "
                 "after the first 63, CHAOS)", ["zone"],
                 [((zones[slot],), n) for slot, n in enumerate(by_zone) if slot in zones]),
        _counter("stormpy_dns_truncated", "answers sent truncated (TC) to fit", ["worker"],
                 [((w,), c["truncated"]) for w, c in sources]),
        _counter("stormpy_rrl_limited", "answers held back by rate limiting: dropped, or "
                 "slipped (sent truncated)", ["worker", "action"],
                 [((str(i), action), c[f"rrl_{action}"]) for i, c in enumerate(workers)
                  for action in ("dropped", "slipped")]),
        _gauge("stormpy_zone_serial", "the SOA serial of each zone served", ["zone"],
               [((zone,), serial) for zone, serial in
                getattr(server.stats, "serials", {}).items()]),
    ]
    if server.serves_tcp:
        tcp = workers[server.frame_workers:]
        out += [
            _gauge("stormpy_dns_tcp_connections_open", "DNS over TCP connections open",
                   ["worker"], _per_worker(workers, "tcp_open", server.frame_workers)),
            _counter("stormpy_dns_tcp_connections", "DNS over TCP connections by outcome: "
                     "accepted; closed at once as refused (all busy) or source_limited (its "
                     "address holds its share); closed later as evicted (idle, for room), "
                     "io_timeout (a query or answer too slow), idle_timeout, malformed",
                     ["result"], [((result,), sum(c[f"tcp_{key}"] for c in tcp))
                                  for result, key in TCP_RESULTS]),
        ]
    return out


TCP_RESULTS = (("accepted", "connections"), ("refused", "refused"),
               ("source_limited", "source_limited"), ("evicted", "evicted"),
               ("io_timeout", "io_timeouts"), ("idle_timeout", "idle_timeouts"),
               ("malformed", "malformed"))


def _rules_metrics(workers: list[dict]) -> list:
    return [_counter(f"stormpy_{key}", doc, ["worker"], _per_worker(workers, key)) for key, doc in (
        ("rule_answers", "answers from a rule's template"),
        ("rule_unsent", "rule answers that did not fit the frame or the MTU"),
        ("unanswered", "frames for the slow path of a responder with no handler"),
        ("slow_path", "frames handed to the Python handler"),
        ("slow_replies", "replies the Python handler returned and stormpy sent"),
        ("handler_errors", "batches whose Python handler raised"),
        ("bad_replies", "handler replies that could not be sent (type, size)"))]


def _http_metrics(workers: list[dict]) -> list:
    per_worker = {"stormpy_http_connections": ("connections accepted", "http_connections"),
                  "stormpy_http_sent_bytes": ("answer bytes sent", "http_bytes"),
                  "stormpy_http_timeouts": ("connections closed by a timeout", "http_timeouts"),
                  "stormpy_http_evicted": ("idle connections closed to make room",
                                           "http_evicted"),
                  "stormpy_http_refused": ("connections refused: no room", "http_refused"),
                  "stormpy_http_retransmits": ("segments sent again (rings)", "http_retransmits"),
                  "stormpy_http_syn_cookies_sent": ("SYN-ACKs with a cookie (rings)",
                                                    "http_cookies_sent"),
                  "stormpy_http_syn_cookies_accepted": ("connections opened by a cookie",
                                                        "http_cookies_accepted")}
    return [
        _counter("stormpy_http_requests", "HTTP requests answered, by status class",
                 ["worker", "status"],
                 [((str(i), f"{k}xx"), c["http_status"][k]) for i, c in enumerate(workers)
                  for k in range(1, 6)]),
        _gauge("stormpy_http_connections_open", "HTTP connections open", ["worker"],
               _per_worker(workers, "http_open")),
    ] + [_counter(name, doc, ["worker"], _per_worker(workers, key))
         for name, (doc, key) in per_worker.items()]


class _Collector:
    def __init__(self, server):
        self.server = server

    def collect(self):
        return server_metrics(self.server)


async def open_metrics(address: tuple[str, int] | None, server):
    """An HTTP server at address answering GET /metrics with server's metrics; None
    without an address. StormpyError (one line) when the address cannot be bound."""
    if address is None:
        return None
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(server))

    async def client(reader, writer):
        # a worker forked meanwhile closes it (Server._close_inherited), or the scraper
        # would not see the connection end until that worker exits
        fd = writer.get_extra_info("socket").fileno()
        server._client_fds.add(fd)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_SECONDS)
            method, _, rest = head.partition(b" ")
            path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
            if method not in (b"GET", b"HEAD"):
                status, body, kind = b"405 Method Not Allowed", b"GET only\n", b"text/plain"
            elif path not in (b"/metrics", b"/"):
                status, body, kind = b"404 Not Found", b"see /metrics\n", b"text/plain"
            else:
                status, body, kind = b"200 OK", generate_latest(registry), CONTENT_TYPE
            writer.write(b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n" % (status, kind, len(body)))
            if method != b"HEAD":
                writer.write(body)
            await asyncio.wait_for(writer.drain(), REQUEST_SECONDS)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError):
            pass
        finally:
            server._client_fds.discard(fd)
            writer.close()

    host, port = address
    try:
        return await asyncio.start_server(client, host, port)
    except OSError as e:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        # asyncio's bind error repeats the address: the system's words alone
        raise StormpyError(f"--metrics {where}: {os.strerror(e.errno) if e.errno else e}") from None
