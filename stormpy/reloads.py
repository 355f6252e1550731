"""Reloads one at a time, none lost: a reload asked for (SIGHUP, `stormpy ctl reload`)
while one runs is remembered and runs once that one has finished, so an edit made
during a long reload is always loaded. Requests that arrive during the same run
share the next one, which re-reads what any of them asked for."""
from __future__ import annotations

import asyncio
import logging
import signal
from typing import Awaitable, Callable

import stormpy

log = logging.getLogger("stormpy")
def defer_sighup() -> None:
    """Until a server takes SIGHUP over, one is remembered, not fatal (its default
    action): a `systemctl reload` just after a start would end a server still loading
    its zones. The command line's servers do this from the package's first line."""
    signal.signal(signal.SIGHUP, stormpy._remember_sighup)


def asked_while_starting() -> bool:
    return bool(stormpy._sighups_before_serving)


def config_changed(cfg) -> list[str]:
    """Knot DNS's reload reads its configuration too; this one does not (zones or a
    listen address added take a restart): when the file changed, say so."""
    if not cfg.config_file:
        return []
    from stormpy.configfile import file_digest
    if file_digest(cfg.config_file) == cfg.config_digest:
        return []
    note = (f"{cfg.config_file} changed since the start: a reload reads the zone files or "
            f"the site again, not the configuration; restart to apply it")
    log.warning("%s", note)
    return [note]

# run(names) reloads the named zones (None: everything) and returns its result
Run = Callable[["frozenset[str] | None"], Awaitable[dict]]


class ReloadQueue:
    def __init__(self, run: Run):
        self._run = run
        self._driver: asyncio.Task | None = None
        self._next: asyncio.Future | None = None     # the queued run's result
        self._names: frozenset[str] | None = None    # what it re-reads (None: everything)
        self.running = False

    @property
    def queued(self) -> bool:
        return self._next is not None and self.running

    async def request(self, names: frozenset[str] | None = None) -> dict:
        """Ask for a reload of names (None: all) and wait for the run that does it."""
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            self._names = names
        elif self._names is not None:
            self._names = None if names is None else self._names | names
        future = self._next
        if self._driver is None or self._driver.done():
            self._driver = asyncio.ensure_future(self._drive())
        return await asyncio.shield(future)    # a client that leaves does not cancel it

    async def _drive(self):
        while self._next is not None:
            future, names = self._next, self._names
            self._next = self._names = None
            self.running = True
            try:
                future.set_result(await self._run(names))
            except Exception as e:          # run() reports failures itself; this is a bug
                future.set_exception(e)
            finally:
                self.running = False
