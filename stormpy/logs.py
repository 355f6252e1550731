"""Where a server's log goes (--log stderr|syslog|FILE) and how each line reads:

    2026-11-23T15:04:05Z stormpy[4242]: info: serving ...      on stderr and in a FILE
    stormpy[4242]: info: serving ...                           to syslog, which dates it

Every line carries its level, as Knot's do. A FILE is appended to and reopened when it
is moved or removed (logrotate), so no signal is needed."""
from __future__ import annotations

import logging
import logging.handlers
import os
import socket
import sys
import time

from stormpy.errors import StormpyError

SYSLOG_SOCKET = "/dev/log"
LOG_HELP = ("where the log goes: stderr (the default), syslog (through /dev/log; "
            "syslog:SOCKET for another socket), or a FILE it is appended to")


class LevelFormatter(logging.Formatter):
    """`[DATE ]stormpy[PID]: LEVEL: MESSAGE`, the date in UTC (ISO 8601) unless syslog
    adds its own."""

    converter = time.gmtime

    def __init__(self, dated: bool):
        prefix = "%(asctime)s " if dated else ""
        super().__init__(f"{prefix}stormpy[%(process)d]: %(levelname)s: %(message)s",
                         datefmt="%Y-%m-%dT%H:%M:%SZ")

    def format(self, record: logging.LogRecord) -> str:
        record = logging.makeLogRecord(record.__dict__)
        record.levelname = record.levelname.lower()
        return super().format(record)


def _syslog_handler(path: str) -> logging.Handler:
    if not os.path.exists(path):
        raise StormpyError(f"--log syslog: {path} does not exist (no syslog daemon is "
                           f"running here); use --log stderr or --log FILE")
    try:
        return logging.handlers.SysLogHandler(path, logging.handlers.SysLogHandler.LOG_DAEMON,
                                              socktype=socket.SOCK_DGRAM)
    except OSError as e:
        raise StormpyError(f"--log syslog: cannot send to {path}: {e.strerror or e}") from None


def _file_handler(path: str) -> logging.Handler:
    try:
        return logging.handlers.WatchedFileHandler(path, mode="a", encoding="utf-8")
    except OSError as e:
        raise StormpyError(f"--log {path}: cannot open it for appending: "
                           f"{e.strerror or e}") from None


def setup_logging(target: str = "stderr") -> None:
    """Send the log (every logger's, at INFO and above) to target; StormpyError, one
    line, when it cannot go there. A second call replaces the first one's handler."""
    if target == "stderr":
        handler = logging.StreamHandler(sys.stderr)
    elif target == "syslog" or target.startswith("syslog:"):
        handler = _syslog_handler(target.partition(":")[2] or SYSLOG_SOCKET)
    else:
        handler = _file_handler(target)
    handler.setFormatter(LevelFormatter(dated=not isinstance(handler,
                                                             logging.handlers.SysLogHandler)))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h.formatter, LevelFormatter)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
