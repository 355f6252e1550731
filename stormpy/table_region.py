"""The memory shared with the worker processes that holds the published table."""
from __future__ import annotations

import logging

from stormpy import _core
from stormpy.errors import StormpyError

log = logging.getLogger("stormpy")

SHMEM_HUGE_PAGES = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
HUGE_PAGES_WORTH = 64 << 20     # a table past this misses the TLB on most lookups


def shared_table_ref(table, workers: int, reserve: int = 0, keep_freed_pages: bool = False):
    """The published table and the workers' state, in memory shared with worker
    processes. The region reserves address space for several reloads of a zone
    that grows (pages are only taken when written), at least `reserve` bytes; a
    smaller one is tried where the kernel refuses to overcommit. keep_freed_pages:
    see TableRef."""
    size = max(256 << 20, 8 * table.flat_size() + (64 << 20), reserve)
    if table.flat_size() >= HUGE_PAGES_WORTH and shared_huge_pages() == "never":
        log.info("the table (%d MB) is in 4 KiB pages: 'echo advise > %s' gives it huge pages, "
                 "about 17%% faster lookups at a million names", table.flat_size() >> 20,
                 SHMEM_HUGE_PAGES)
    while True:
        try:
            return _core.TableRef(table, workers, shared_bytes=size,
                                  keep_freed_pages=keep_freed_pages)
        except StormpyError:
            if size <= 3 * table.flat_size() + (16 << 20):
                raise
            size //= 2


def shared_huge_pages() -> str | None:
    """The kernel's policy for huge pages in shared memory (the bracketed word of
    shmem_enabled), or None where it cannot be read."""
    try:
        with open(SHMEM_HUGE_PAGES) as f:
            words = f.read().split()
    except OSError:
        return None
    return next((w.strip("[]") for w in words if w.startswith("[")), None)
