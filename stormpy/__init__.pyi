from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence, Union

__version__: str

Buffer = Union[bytes, bytearray, memoryview]
Reply = Union[tuple["Packet", Buffer], Buffer]
Handler = Callable[[list["Packet"]], Iterable[Reply] | None]

class Packet:
    """A packet no fast-path rule answered; valid only during the handler call."""
    @property
    def data(self) -> memoryview: ...
    @property
    def payload(self) -> memoryview | None: ...
    @property
    def udp(self) -> bool: ...
    @property
    def family(self) -> int: ...
    @property
    def src(self) -> str | None: ...
    @property
    def dst(self) -> str | None: ...
    @property
    def sport(self) -> int: ...
    @property
    def dport(self) -> int: ...

class Template:
    data: bytes
    copy: tuple[tuple[int, int, int], ...]
    echo: slice | None
    echo_at: int
    def __init__(self, data: Buffer | Any, *, copy: Iterable[tuple[int, int, int]] = ...,
                 echo: slice | None = ..., echo_at: int | None = ...) -> None: ...

class Responder:
    port: int
    handler: Handler | None
    all_frames: bool
    name: str
    def __init__(self, port: int, *, handler: Handler | None = ..., all_frames: bool = ...,
                 name: str | None = ...) -> None: ...
    def rule(self, name: str | None = ..., *, prefix: bytes = ..., at: int = ...,
             template: Template | Buffer | Any | None = ..., key: slice | None = ...,
             key_stop: bytes = ..., values: Mapping[str | bytes, Template | Buffer] | None = ...,
             default: Template | Buffer | None = ...) -> str: ...
    def zones(self, *paths: str, origins: Iterable[str | None] = ...,
              dynamic: Iterable[str] = ...) -> None: ...
    def control(self, task: Callable[["Responder"], Awaitable[None]]) -> Callable[["Responder"], Awaitable[None]]: ...
    def update(self, name: str, *, values: Mapping[str | bytes, Template | Buffer] | None = ...,
               template: Template | Buffer | None = ...,
               set_values: Mapping[str | bytes, Template | Buffer] | None = ...,
               delete: Iterable[str | bytes] = ...) -> None: ...
    def run_frames(self, frames: Iterable[bytes], *, batch: int = ..., rounds: int = ...,
                   identity: dict | None = ...) -> tuple[list[bytes], dict]: ...

def serve(responder: Responder, argv: Sequence[str] | None = ..., *, prog: str | None = ...,
          **defaults: Any) -> int: ...
