"""Custom responders: rules answered in C from templates, and Python for the rest.

A Responder serves one UDP port. Its rules are compiled into the same C table as
serve-dns's zones (native/include/stormpy/app/rules/rules.h): the match, the key lookup and
the template's patches run in the worker's C loop. Packets no rule answers reach
the responder's handler, a Python callable, once per batch. `update()` rebuilds
the table and swaps it atomically under running workers, as a zone reload does.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from stormpy import _core
from stormpy.errors import StormpyError

log = logging.getLogger("stormpy")

_TO_END = 0xFFFF
_MAX_PAYLOAD = 0xFFFF


def _payload_of(data) -> bytes:
    """Template bytes from bytes, or from a scapy packet: with a UDP layer, its payload
    (stormpy writes the headers from the request)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    try:
        from scapy.layers.inet import UDP
        from scapy.packet import Packet as ScapyPacket
    except ImportError:       # pragma: no cover - scapy is a dependency
        ScapyPacket, UDP = (), None
    if isinstance(data, ScapyPacket):
        if UDP is not None and data.haslayer(UDP):
            return bytes(data[UDP].payload)
        return bytes(data)
    raise StormpyError(f"a template is bytes or a scapy packet, not {type(data).__name__}")


def _bytes_arg(value, what: str) -> bytes:
    """A match, a key or a stop: bytes as given, or text in UTF-8."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise StormpyError(f"{what}: bytes or text, not {type(value).__name__} {value!r}")


def _list_arg(value, what: str) -> list:
    """Names or keys given as a list: one string would be taken letter by letter."""
    if isinstance(value, (str, bytes)):
        raise StormpyError(f"{what}: a list, not one string (give [{value!r}])")
    try:
        return list(value)
    except TypeError:
        raise StormpyError(f"{what}: a list, not {type(value).__name__}") from None


def _slice_bounds(s: slice | None, what: str) -> tuple[int, int]:
    if s is None:
        return 0, _TO_END
    if not isinstance(s, slice) or s.step not in (None, 1):
        raise StormpyError(f"{what} must be a slice of the request payload, like slice(4, None)")
    start = 0 if s.start is None else s.start
    stop = _TO_END if s.stop is None else s.stop
    if not 0 <= start <= stop <= _TO_END:
        raise StormpyError(f"{what}: offsets from 0 to {_TO_END}, start before stop")
    return start, stop


class Template:
    """A response built ahead of time, and what changes per request.

    data: the UDP payload to send, as bytes or a scapy packet (with a UDP layer, its
    payload is taken). Addresses and ports always come from the request, swapped,
    and checksums are computed from stored sums: there is nothing to declare.
    copy: (dst, src, length) triples: request payload[src:src+length] replaces
    data[dst:dst+length] (a transaction ID). echo: a slice of the request payload
    inserted at echo_at (default: the end of data); at most one.
    """

    __slots__ = ("data", "copy", "echo", "echo_at")

    def __init__(self, data, *, copy: Iterable[tuple[int, int, int]] = (),
                 echo: slice | None = None, echo_at: int | None = None):
        self.data = _payload_of(data)
        self.copy = tuple(tuple(c) for c in copy)
        self.echo = echo
        if echo is None and echo_at is not None:
            raise StormpyError("echo_at= without echo=: give the slice of the request to insert")
        self.echo_at = len(self.data) if echo_at is None else echo_at
        if len(self.data) > _MAX_PAYLOAD:
            raise StormpyError(f"a template of {len(self.data)} bytes: at most {_MAX_PAYLOAD}")
        for c in self.copy:
            if len(c) != 3 or any(not isinstance(v, int) or v < 0 for v in c):
                raise StormpyError(f"copy={c!r}: expected (dst, src, length), whole numbers")
            dst, src, length = c
            if dst + length > len(self.data) or src + length > _MAX_PAYLOAD:
                raise StormpyError(f"copy={c!r}: bytes {dst}..{dst + length} are not all "
                                   f"in the {len(self.data)}-byte template")
        if echo is not None:
            _slice_bounds(echo, "echo")
            if not 0 <= self.echo_at <= len(self.data):
                raise StormpyError(f"echo_at={echo_at}: outside the {len(self.data)}-byte template")

    def patches(self):
        """(op, field, dst, src, length, mask) for the table."""
        out = [(_core.PATCH_COPY, 0, dst, src, length, 0) for dst, src, length in self.copy]
        if self.echo is not None:
            out.append((_core.PATCH_INSERT, 1, self.echo_at, 0, 0, 0))
        return out

    def min_len(self) -> int:
        """The shortest request payload every patch can read."""
        need = [src + length for _, src, length in self.copy]
        if self.echo is not None:
            need.append(_slice_bounds(self.echo, "echo")[0])
        return max(need, default=0)

    def __repr__(self):
        return f"Template({self.data!r}, copy={self.copy!r}, echo={self.echo!r})"


def _template(value) -> Template:
    return value if isinstance(value, Template) else Template(value)


@dataclass
class _Rule:
    name: str
    prefix: bytes
    match_off: int
    key: slice | None
    key_stop: bytes
    template: Template | None
    values: dict = field(default_factory=dict)
    keyed: bool = False


class Responder:
    """A specialized UDP responder on one port.

    handler(packets) -> replies, if given, runs in each worker for what no rule
    answers, once per batch. packets is a list of stormpy.Packet; each reply is
    (packet, payload) for a UDP reply to that packet, or bytes for a whole Ethernet
    frame sent as it is (ring backends). all_frames hands the handler every frame
    the rules do not answer, ARP and ICMP included (a ring backend then takes the
    whole queue from the kernel, even on AF_XDP).
    """

    def __init__(self, port: int, *, handler: Callable | None = None,
                 all_frames: bool = False, name: str | None = None):
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise StormpyError(f"port {port!r}: expected 1 to 65535")
        if handler is not None and not callable(handler):
            raise StormpyError(f"handler={handler!r}: a function of a list of packets")
        if name is not None and not isinstance(name, str):
            raise StormpyError(f"name={name!r}: text")
        self.port = port
        self.handler = handler
        self.all_frames = all_frames
        self.name = name or f"responder on port {port}"
        self._rules: list[_Rule] = []
        self._zones: list[str] = []
        self._origins: list[str | None] = []
        self._dynamic: list[str] = []
        self._controls: list[Callable] = []
        self._server = None     # the running server, which publishes updates
        self._server_pid = None  # and its process (the workers hold copies of this object)

    # -- definition ------------------------------------------------------------
    def rule(self, name: str | None = None, *, prefix: bytes = b"", at: int = 0,
             template=None, key: slice | None = None, key_stop: bytes = b"",
             values: Mapping | None = None, default=None) -> str:
        """Answer payloads that have `prefix` at offset `at` in C.

        Without key: every such payload gets `template`. With key (a slice of the
        payload, cut at the first byte of key_stop): the key is looked up in
        `values` (key bytes -> template or bytes), and an absent key gets `default`,
        or goes to the handler when default is None. Rules are tried in the order
        they were added. Returns the rule's name, for update()."""
        if self._zones:
            raise StormpyError("a responder serves either zones or rules on its port")
        name = name or f"rule{len(self._rules)}"
        if any(r.name == name for r in self._rules):
            raise StormpyError(f"rule {name!r} is defined twice")
        if len(self._rules) >= 64:
            raise StormpyError("at most 64 rules")
        prefix = _bytes_arg(prefix, f"rule {name}: prefix")
        key_stop = _bytes_arg(key_stop, f"rule {name}: key_stop")
        if len(prefix) > 32:
            raise StormpyError(f"rule {name}: a match of {len(prefix)} bytes; at most 32")
        if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= _TO_END - len(prefix):
            raise StormpyError(f"rule {name}: at={at!r}: an offset in the payload, "
                               f"0 to {_TO_END - len(prefix)}")
        if len(key_stop) > 4:
            raise StormpyError(f"rule {name}: at most 4 key_stop bytes")
        if key is None and values is not None:
            raise StormpyError(f"rule {name}: values need a key")
        if key is None and template is None:
            raise StormpyError(f"rule {name}: give a template, or a key and values")
        if key is not None and template is not None:
            raise StormpyError(f"rule {name}: a keyed rule answers from values; its "
                               f"answer to an absent key is default=, not template=")
        _slice_bounds(key, f"rule {name}: key")
        fixed = template if key is None else default
        rule = _Rule(name, prefix, at, key, bytes(key_stop),
                     None if fixed is None else _template(fixed), keyed=key is not None)
        rule.values = self._values(values or {})
        self._rules.append(rule)
        return name

    def zones(self, *paths: str, origins: Iterable[str | None] = (),
              dynamic: Iterable[str] = ()):
        """Serve DNS on the port from zone files, compiled as serve-dns compiles them;
        queries for the `dynamic` names (which the zones must not have) go to the
        handler instead."""
        if self._rules:
            raise StormpyError("a responder serves either zones or rules on its port")
        for path in paths:
            if not isinstance(path, (str, os.PathLike)):
                raise StormpyError(f"zones(): a zone file's path, not {type(path).__name__} "
                                   f"{path!r} (give them as zones(a, b))")
        self._zones = [os.fspath(p) for p in paths]
        self._origins = _list_arg(origins, "origins") or [None] * len(self._zones)
        self._dynamic = _list_arg(dynamic, "dynamic")

    def control(self, task: Callable):
        """Decorator: `async def task(responder)` runs in the server process's event
        loop while serving (the control plane: updates come from here)."""
        self._controls.append(task)
        return task

    @staticmethod
    def _values(values: Mapping) -> dict:
        if not isinstance(values, Mapping):
            raise StormpyError(f"values: a mapping of key -> reply, not {type(values).__name__}")
        out = {}
        for k, v in values.items():
            k = _bytes_arg(k, "a key in values")
            if len(k) > 1024:
                raise StormpyError(f"a key of {len(k)} bytes: at most 1024")
            out[k] = _template(v)
        return out

    def _find(self, name: str) -> _Rule:
        for r in self._rules:
            if r.name == name:
                return r
        raise StormpyError(f"no rule named {name!r}")

    # -- updates ---------------------------------------------------------------
    def update(self, name: str, *, values: Mapping | None = None, template=None,
               set_values: Mapping | None = None, delete: Iterable = ()) -> None:
        """Change a rule: replace its values, set or delete some keys, or replace its
        template (its default, for a keyed rule). While serving, the new table is
        published at once: every worker answers from it from its next batch, never a
        mix of old and new. A change that does not compile changes nothing. Only the
        server process publishes: call it from a control task, not from the handler."""
        if self._server_pid is not None and os.getpid() != self._server_pid:
            raise StormpyError("update() changes what every worker answers, so it runs in the "
                               "server process: call it from a @responder.control task, not "
                               "from the handler (which runs in one worker)")
        rule = self._find(name)
        new = _Rule(rule.name, rule.prefix, rule.match_off, rule.key, rule.key_stop,
                    rule.template, dict(rule.values), rule.keyed)
        if values is not None:
            new.values = self._values(values)
        if set_values:
            new.values.update(self._values(set_values))
        for k in _list_arg(delete, "delete"):
            new.values.pop(_bytes_arg(k, "a key in delete"), None)
        if template is not None:
            new.template = _template(template)
        if (values is not None or set_values or delete) and not rule.keyed:
            raise StormpyError(f"rule {name} has no key, so no values")
        index = self._rules.index(rule)
        self._rules[index] = new
        try:
            if self._server is not None:
                self._server.publish()
        except BaseException:
            self._rules[index] = rule
            raise

    # -- compiling -------------------------------------------------------------
    def _add_rules(self, builder) -> int:
        specs = []
        responses = 0
        for i, rule in enumerate(self._rules):
            tag = _core.rule_tag(i)
            templates = list(rule.values.values()) + ([rule.template] if rule.template else [])
            # Shorter payloads are not this rule's. A value's template is not counted:
            # one key's reply must not change which payloads the rule takes (a value
            # whose patches read past a payload is not sent, and counted).
            min_len = max([len(rule.prefix) + rule.match_off] +
                          ([rule.template.min_len()] if rule.template else []) +
                          [_slice_bounds(t.echo, "echo")[0] for t in templates
                           if t.echo is not None] +
                          ([_slice_bounds(rule.key, "key")[0]] if rule.key else []))
            if min_len > _MAX_PAYLOAD:
                raise StormpyError(f"rule {rule.name}: it reads past the largest UDP payload")
            fixed = None
            if rule.template is not None:
                fixed = builder.add_response(rule.template.data, rule.template.patches())
                responses += 1
            for key, tmpl in rule.values.items():
                builder.add_key(tag, key, builder.add_response(tmpl.data, tmpl.patches()))
                responses += 1
            echo = next((t.echo for t in templates if t.echo is not None), None)
            for t in templates:
                if t.echo is not None and t.echo != echo:
                    raise StormpyError(f"rule {rule.name}: its templates echo different slices")
            key_off, key_end = _slice_bounds(rule.key, "key")
            echo_off, echo_end = _slice_bounds(echo, "echo")
            specs.append(dict(match=rule.prefix, match_off=rule.match_off, min_len=min_len,
                              keyed=rule.keyed, key_off=key_off, key_end=key_end,
                              stops=rule.key_stop, echo_off=echo_off, echo_end=echo_end,
                              response=fixed))
        builder.set_rules(specs, dns=bool(self._zones))
        return responses

    def _add_dynamic(self, builder) -> None:
        import dns.name
        slow = builder.add_response(b"", (), _core.RESPONSE_SLOW_PATH)
        for text in self._dynamic:
            try:
                name = dns.name.from_text(text).canonicalize().to_wire()
            except Exception as e:
                raise StormpyError(f"dynamic name {text!r}: {e}") from None
            builder.add_key(_core.DNS_OTHER << 32 | 1 << 16, name, slow)

    def compile(self):
        """The table: (stormpy._core.Table, stats). Raises StormpyError, one line."""
        if self._zones:
            from stormpy.dns.compiler import compile_zones
            from stormpy.dns.zone import load_zones
            zones = load_zones(self._zones, self._origins)
            self._check_dynamic(zones)

            def extend(builder):
                self._add_dynamic(builder)
                builder.set_rules([], dns=True)
            table, stats = compile_zones(zones, extend=extend)
            table.check_rules()
            return table, ResponderStats(rules=0, keys=stats.keys, responses=stats.responses,
                                         zones=stats.zones, records=stats.records)
        builder = _core.TableBuilder()
        try:
            responses = self._add_rules(builder)
        except ValueError as e:
            raise StormpyError(f"{self.name}: {e}") from None
        table = builder.finish()
        try:
            table.check_rules()
        except ValueError as e:
            raise StormpyError(f"{self.name}: {e}") from None
        info = table.info()
        return table, ResponderStats(rules=len(self._rules), keys=info["keys"],
                                     responses=responses)

    def _check_dynamic(self, zones) -> None:
        import dns.name
        for text in self._dynamic:
            name = dns.name.from_text(text)
            for z in zones:
                if name.is_subdomain(z.origin) and z.zone.get_node(name) is not None:
                    raise StormpyError(f"dynamic name {text}: zone {z.origin} has records "
                                       f"there; a dynamic name must not be in the zone")

    # -- running without a server: the memory backend --------------------------
    def run_frames(self, frames: Iterable[bytes], *, batch: int = 32, rounds: int = 1,
                   identity: dict | None = None) -> tuple[list[bytes], dict]:
        """Answer Ethernet frames through the real worker loop on the memory backend
        (no kernel, no root): (reply frames, counters)."""
        table, _ = self.compile()
        ref = _core.TableRef(table, 1)
        return _core.run_memory_worker(ref, list(frames), port=self.port, batch=batch,
                                       rounds=rounds, identity=identity, responder=True,
                                       handler=self.handler, all_frames=self.all_frames,
                                       max_udp=4096)


@dataclass
class ResponderStats:
    rules: int = 0
    keys: int = 0
    responses: int = 0
    zones: int = 0
    records: int = 0
