"""`stormpy ctl` (after Knot's knotc) and `stormpy stats`: the client side of the control
socket (stormpy.control), one command per run, its answer as text or JSON."""
from __future__ import annotations

import argparse
import json
import time

from stormpy.config import DEFAULT_CONTROL
from stormpy.control import request
from stormpy.counters import RCODES

COMMANDS = {
    "status": "the server: pid, uptime, backend, workers alive and restarted, what it serves",
    "reload": "reload every zone (or the site), or only ZONE, and say how it went; a reload "
              "asked for while one runs follows it",
    "zone-status": "each zone's (or ZONE's) serial, file, load time, records, responses and "
                   "last error",
    "stats": "per-worker counters",
    "stop": "stop the server gracefully (as SIGTERM)",
}


def add_client_arguments(p: argparse.ArgumentParser, default=DEFAULT_CONTROL) -> None:
    p.add_argument("--control", "-s", default=default, metavar="PATH",
                   help=f"the server's --control socket (default {DEFAULT_CONTROL})")
    p.add_argument("--json", action="store_true",
                   default=argparse.SUPPRESS if default is argparse.SUPPRESS else False,
                   help="print the server's answer as JSON")


def register(sub) -> None:
    """`stormpy ctl COMMAND` and its alias `stormpy stats`."""
    c = sub.add_parser("ctl", help="control a running server: status, reload, zone-status, "
                       "stats, stop", description="Send one command to a running server over "
                       "its control socket. Root, the server's user and its --control-group "
                       "may; anyone else is refused.")
    add_client_arguments(c)
    commands = c.add_subparsers(dest="ctl_command", metavar="COMMAND", required=True)
    for name, text in COMMANDS.items():
        p = commands.add_parser(name, help=text, description=text[:1].upper() + text[1:] + ".")
        add_client_arguments(p, default=argparse.SUPPRESS)    # also after the command
        if name in ("reload", "zone-status"):
            p.add_argument("zone", nargs="?", metavar="ZONE", help="the zone's name")
    st = sub.add_parser("stats", help="per-worker counters of a running server (ctl stats)",
                        description="Print the counters of a running server: per worker rx, "
                        "tx, drops, answers by rcode, batch sizes and TX-ring-full events.")
    add_client_arguments(st)
    st.set_defaults(ctl_command="stats")


def run(args) -> int:
    name = args.ctl_command
    zone = getattr(args, "zone", None)
    answer = request(args.control, name, {"zone": zone} if zone else {},
                     timeout=None if name == "reload" else 30)
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        {"status": _print_status, "reload": _print_reload, "zone-status": _print_zones,
         "stats": _print_stats, "stop": _print_stop}[name](answer)
    return 1 if answer.get("errors") else 0     # a zone not reloaded fails a deploy script


def _print_status(s: dict) -> None:
    busy = ", reloading now" + (" with one queued" if s["reload_queued"] else "") \
        if s["reloading"] else ""
    print(f"pid {s['pid']} ({s['app']}), up {_duration(s['uptime'])}, {s['backend']} backend, "
          f"user {s['user']}")
    print(f"serving {s['serving']} on {s['listening']}")
    print(f"workers {s['workers_alive']} of {s['workers']} alive, {s['restarts']} restart(s); "
          f"reloads {s['reloads']} (failed {s['reload_failures']}){busy}")


def _print_reload(r: dict) -> None:
    print(f"reloaded {r['serving']} in {r['seconds']:.2f} s")
    for e in r.get("errors", ()):
        print(f"  not reloaded: {e}")
    for note in r.get("notes", ()):
        print(f"  note: {note}")


def _print_zones(r: dict) -> None:
    for z in r["zones"]:
        if not z["loaded_at"]:          # it failed at start, or a secondary not transferred
            print(f"{z['zone']} not loaded (from {z['file']})")
        else:
            loaded = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(z["loaded_at"]))
            print(f"{z['zone']} serial {z['serial']}, {z['records']} records, "
                  f"{z['responses']} responses, loaded {loaded} from {z['file']}")
        if "primary" in z:
            t = z["transfers"]
            print(f"  secondary of {z['primary']}: {t['axfr']} AXFR, {t['ixfr']} IXFR, "
                  f"{t['failed']} failed{', EXPIRED (SERVFAIL)' if z['expired'] else ''}")
        if z["last_error"]:
            what = ("last transfer failed" if "primary" in z else
                    "last reload failed" if z["loaded_at"] else "failed to load")
            print(f"  {what}: {z['last_error']}")


def _print_stats(snap: dict) -> None:
    if "site" in snap:
        from stormpy.http.server import format_http_worker
        print(f"pid {snap['pid']}, {snap['backend']} backend, serving {snap['serving']}; "
              f"reloads {snap['reloads']} (failed {snap['reload_failures']})")
        for i, w in enumerate(snap["workers"]):
            print(f"worker {i}: {format_http_worker(w)}")
        return
    print(f"pid {snap['pid']}, {snap['backend']} backend, serving {snap['serving']}; "
          f"tcp queries {snap['tcp_queries']}, reloads {snap['reloads']} "
          f"(failed {snap['reload_failures']})")
    if "xdp_answered" in snap:
        rcodes = " ".join(f"{RCODES.get(i, i)}={n}" for i, n in enumerate(snap["xdp_rcode"]) if n)
        print(f"XDP program: answered {snap['xdp_answered']}, passed to the workers "
              f"{snap['xdp_passed']}" + (f"; {rcodes}" if rcodes else ""))
    for i, w in enumerate(snap["workers"]):
        print(f"worker {i}: {format_tcp_worker(w) if w.get('kind') == 'tcp' else format_worker(w)}")


def _print_stop(r: dict) -> None:
    print(f"stopping pid {r['pid']}")


def _duration(seconds: float) -> str:
    minutes, s = divmod(int(seconds), 60)
    hours, m = divmod(minutes, 60)
    days, h = divmod(hours, 24)
    return (f"{days}d {h}h" if days else f"{h}h {m}m" if h else f"{m}m {s}s" if m else f"{s} s")


def format_tcp_worker(c: dict) -> str:
    """A DNS-over-TCP worker's counters on one line, for `stormpy stats`."""
    rcodes = " ".join(f"{RCODES.get(i, i)}={n}" for i, n in enumerate(c["rcode"]) if n)
    return (f"tcp queries={c['queries']} connections={c['tcp_connections']} open={c['tcp_open']} "
            f"io_timeouts={c['tcp_io_timeouts']} idle_timeouts={c['tcp_idle_timeouts']} "
            f"evicted={c['tcp_evicted']} refused={c['tcp_refused']} "
            f"source_limited={c['tcp_source_limited']} malformed={c['tcp_malformed']} "
            f"{rcodes}").rstrip()


def format_worker(c: dict) -> str:
    """One worker's counters on one line, for `stormpy stats`."""
    rcodes = " ".join(f"{RCODES.get(i, i)}={n}" for i, n in enumerate(c.get("rcode", [])) if n)
    hist = c.get("batch_hist", [])
    sizes = " ".join(f"{1 << i}+:{n}" for i, n in enumerate(hist) if n)
    extra = "".join(f" {k}={c[k]}" for k in ("tx_ring_full", "tx_held", "tx_inflight_peak",
                                             "not_ours", "bad_source", "tx_errors",
                                             "rrl_dropped", "rrl_slipped", "rule_answers",
                                             "rule_unsent", "unanswered", "slow_path",
                                             "slow_replies", "handler_errors", "bad_replies")
                    if c.get(k))
    if c.get("precopy_hits") or c.get("precopy_fills"):
        extra += (f" precopy[hits={c['precopy_hits']} fills={c['precopy_fills']} "
                  f"fallbacks={c['precopy_fallbacks']}]")
    return (f"rx={c.get('rx', 0)} tx={c.get('tx', 0)} dropped={c.get('dropped', 0)} "
            f"truncated={c.get('truncated', 0)}{extra} {rcodes} batches[{sizes}]").replace("  ", " ")
