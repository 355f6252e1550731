"""The memory shared with the worker processes that holds the published table."""
from __future__ import annotations

from stormpy import _core
from stormpy.errors import StormpyError


def shared_table_ref(table, workers: int, reserve: int = 0, keep_freed_pages: bool = False):
    """The published table and the workers' state, in memory shared with worker
    processes. The region reserves address space for several reloads of a zone
    that grows (pages are only taken when written), at least `reserve` bytes; a
    smaller one is tried where the kernel refuses to overcommit. keep_freed_pages:
    see TableRef."""
    size = max(256 << 20, 8 * table.flat_size() + (64 << 20), reserve)
    while True:
        try:
            return _core.TableRef(table, workers, shared_bytes=size,
                                  keep_freed_pages=keep_freed_pages)
        except StormpyError:
            if size <= 3 * table.flat_size() + (16 << 20):
                raise
            size //= 2
