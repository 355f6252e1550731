"""Serving a custom responder: `stormpy.serve(responder)`.

The responder runs in the server serve-dns runs in (stormpy.server): one C worker
process per socket or NIC queue, forked with the table in shared memory, restarted
if it dies, with the same options (--iface, --backend, --cpus, --batch, --poll, ...).
Each worker answers from the responder's rules and calls its handler, in that
worker's process, for the rest. The server process is the control plane: the
responder's control tasks run in its event loop, and Responder.update() publishes a
new table there.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from stormpy.config import ServerConfig, add_serving_arguments, serving_config
from stormpy.errors import StormpyError
from stormpy.responder.api import Responder
from stormpy.server import Server

log = logging.getLogger("stormpy")


class ResponderServer(Server):
    """The server with a responder's table, workers and control tasks."""

    def __init__(self, responder: Responder, cfg: ServerConfig):
        self.responder = responder
        self.steer_all = responder.all_frames
        super().__init__(cfg)

    def load(self):
        return self.responder.compile()

    def configure_worker(self, w, local_address):
        w.set_responder(self.responder.handler, self.steer_all, local_address)

    def import_for_reload(self) -> None:
        if self.responder._zones:          # Responder.update() compiles them again
            from stormpy.dns.zone import import_rdata_classes
            import_rdata_classes()

    def describe(self) -> str:
        s = self.stats
        what = (f"{s.zones} zone(s), {s.records} records" if s.zones else
                f"{s.rules} rule(s), {s.responses} template(s), {s.keys} keys")
        handler = self.responder.handler
        return f"{self.responder.name}: {what}" + (
            f", handler {getattr(handler, '__qualname__', handler)}" if handler else "")

    def snapshot(self) -> dict:
        """`stormpy stats`: a responder of rules counts rules and templates, not zones."""
        snap = super().snapshot()
        if not self.stats.zones:
            del snap["zones"], snap["records"]
            snap.update(rules=self.stats.rules, templates=self.stats.responses)
        return snap

    def publish(self) -> None:
        """Compile the responder again and swap the table in (Responder.update)."""
        table, stats = self.load()
        self.ref.publish(table)
        self.stats = stats
        self.reloads += 1
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.ref.reclaim(1000)
            return
        loop.run_in_executor(None, self.ref.reclaim, 5000)

    def start_workers(self):
        self.responder._server_pid = os.getpid()    # before the workers are forked
        cfg = self.cfg     # the port served, which --listen or --port may have changed
        self.responder.port = cfg.port if cfg.iface else cfg.listen[0][1]
        super().start_workers()
        self.responder._server = self
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._control(task)) for task in self.responder._controls]

    async def _control(self, task):
        try:
            await task(self.responder)
        except asyncio.CancelledError:
            raise
        except StormpyError as e:
            log.error("control task %s: %s", getattr(task, "__qualname__", task), e)
        except Exception:
            log.exception("control task %s failed; the workers go on serving",
                          getattr(task, "__qualname__", task))

    def stop_workers(self):
        for t in getattr(self, "_tasks", []):
            t.cancel()
        self.responder._server = self.responder._server_pid = None
        super().stop_workers()


def build_parser(responder: Responder, prog: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=f"Serve {responder.name} with stormpy.")
    add_serving_arguments(p, default_port=responder.port)
    p.add_argument("--max-reply", type=int, default=1472, metavar="BYTES",
                   help="largest UDP payload a socket worker sends (default 1472)")
    p.add_argument("--pcap", metavar="FILE",
                   help="answer the frames of this capture on the memory backend, then exit")
    p.add_argument("--out", metavar="FILE", help="with --pcap: write the replies here")
    return p


def serve(responder: Responder, argv: list[str] | None = None, *, prog: str | None = None,
          **defaults) -> int:
    """Serve responder until SIGTERM or SIGINT, with the command line's options
    (argv, default sys.argv[1:]); `defaults` sets option defaults (batch=1,
    poll="busy", ...). Returns the exit status; user errors are one line."""
    parser = build_parser(responder, prog)
    unknown = sorted(set(defaults) - {a.dest for a in parser._actions})
    if unknown or isinstance(argv, str):
        why = (f"no option {unknown[0]!r} to give a default to" if unknown else
               "argv is a list of arguments, like ['--listen', '127.0.0.1:9000']")
        print(f"{parser.prog}: error: serve(): {why}", file=sys.stderr)
        return 2
    parser.set_defaults(**defaults)
    args = parser.parse_args(argv)
    try:
        if args.pcap:
            return _replay(responder, args)
        if responder.all_frames and not args.iface:
            raise StormpyError(f"{responder.name} answers whole frames (ARP, ICMP): "
                               f"it needs --iface and a ring backend")
        if not 512 <= args.max_reply <= 65507:
            raise StormpyError("--max-reply: between 512 and 65507 bytes")
        if args.mode != "memcpy":
            raise StormpyError("--mode precopy is for serve-dns; a responder renders each reply")
        cfg = serving_config(args, ("127.0.0.1", responder.port), max_udp=args.max_reply)
        server = ResponderServer(responder, cfg)
        asyncio.run(server.serve())
    except StormpyError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _replay(responder: Responder, args) -> int:
    """The memory backend: a capture's frames through the real worker loop."""
    from stormpy.pcap import read_frames, write_frames
    frames = read_frames(args.pcap)
    replies, counters = responder.run_frames(frames, batch=args.batch)
    if args.out:
        write_frames(args.out, replies)
    print(f"{len(frames)} frames, {len(replies)} replies: {counters['rule_answers']} by rules, "
          f"{counters['slow_replies']} by the handler ({counters['slow_path']} handed to it, "
          f"{counters['handler_errors']} failed batches)")
    return 0
