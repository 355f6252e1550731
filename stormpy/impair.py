"""`stormpy impair LEFT RIGHT`: a path with loss, duplication, delay and reordering
between two interfaces, for kernels without netem (the HTTP tests under loss, the
labs). Run it in a namespace that joins the two hosts' links: every frame arriving
on one interface leaves on the other, impaired, through AF_PACKET in C
(native/include/stormpy/app/impair/impair.h), one thread per direction."""
from __future__ import annotations

import signal
import sys
import threading
import time

from stormpy import argtypes
from stormpy.errors import StormpyError


def add_arguments(p) -> None:
    p.add_argument("left", metavar="LEFT", help="one interface of the path")
    p.add_argument("right", metavar="RIGHT", help="the other")
    p.add_argument("--loss", type=argtypes.percent, default=0.0, metavar="PCT",
                   help="drop this share of frames, at random (e.g. 1 or 1%%)")
    p.add_argument("--duplicate", type=argtypes.percent, default=0.0, metavar="PCT",
                   help="send this share of frames twice")
    p.add_argument("--delay", type=argtypes.milliseconds, default=0.0, metavar="MS",
                   help="hold every frame this long (one way)")
    p.add_argument("--reorder", type=argtypes.percent, default=0.0, metavar="PCT",
                   help="hold this share of frames --reorder-delay longer, so later ones pass them")
    p.add_argument("--reorder-delay", type=argtypes.milliseconds, default=2.0, metavar="MS",
                   help="how much longer a reordered frame is held (default 2)")
    p.add_argument("--one-way", action="store_true",
                   help="impair only LEFT to RIGHT; RIGHT to LEFT is forwarded as it comes")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--duration", type=float, default=0.0, metavar="S",
                   help="stop after S seconds (default: at SIGINT or SIGTERM)")


def run(args) -> int:
    from stormpy import _core
    from stormpy.errors import BackendError

    impaired = dict(loss=args.loss, duplicate=args.duplicate, reorder=args.reorder,
                    delay_us=int(args.delay * 1000), reorder_us=int(args.reorder_delay * 1000))
    try:
        ways = [(f"{args.left}->{args.right}",
                 _core.Impairer(args.left, args.right, seed=args.seed, **impaired)),
                (f"{args.right}->{args.left}",
                 _core.Impairer(args.right, args.left, seed=args.seed + 1,
                                **({} if args.one_way else impaired)))]
    except BackendError as e:
        raise StormpyError(f"impair: {e}") from None
    errors: list[str] = []

    def forward(name, way):
        try:
            way.run()
        except OSError as e:
            errors.append(f"{name}: {e.strerror}")

    threads = [threading.Thread(target=forward, args=w, daemon=True) for w in ways]
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    for t in threads:
        t.start()
    print(f"impair: forwarding {args.left} <-> {args.right} (loss {args.loss}%, duplicate "
          f"{args.duplicate}%, delay {args.delay} ms, reorder {args.reorder}%"
          f"{', one way' if args.one_way else ''})", file=sys.stderr, flush=True)
    deadline = time.monotonic() + args.duration if args.duration else None
    while not stop.is_set() and not errors and all(t.is_alive() for t in threads):
        stop.wait(0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic())))
        if deadline is not None and time.monotonic() >= deadline:
            break
    for _, way in ways:
        way.stop()
    for t in threads:
        t.join(timeout=5)
    for name, way in ways:
        c = way.counters()
        print(f"{name}: received={c['received']} sent={c['sent']} lost={c['lost']} "
              f"duplicated={c['duplicated']} reordered={c['reordered']} "
              f"overflow={c['overflow']} oversized={c['oversized']}", flush=True)
        if c["oversized"]:
            print(f"impair: {c['oversized']} frames longer than 2048 bytes were dropped: the "
                  f"hosts send segments bigger than frames; turn that off on their interfaces "
                  f"(ethtool -K IFACE tx off tso off gso off)", file=sys.stderr, flush=True)
    if errors:
        raise StormpyError("impair: " + "; ".join(errors))
    return 0
