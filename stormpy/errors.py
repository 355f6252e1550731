"""Errors a user can cause; the CLI prints them as one line, never a traceback."""


class StormpyError(Exception):
    """A user-facing error: bad input, a busy port, a missing permission."""


class ZoneError(StormpyError):
    """A zone file that cannot be loaded or compiled; the message names file:line."""


class BackendError(StormpyError):
    """An I/O backend that cannot start here: a missing interface, permission or kernel feature."""
