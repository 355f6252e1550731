"""stormpy: prepackaged-response packet processing with a C fast path.

Custom responders in five names: a Responder on a UDP port, with rules whose
Templates are answered in C, and a handler that gets the other Packets in
batches; serve() runs it with serve-dns's options.
"""
__version__ = "0.1.0"

import os as _os
import signal as _signal
import sys as _sys

# A server started from the command line remembers a SIGHUP from its first moment: the
# imports take a third of a second, and the default action would end a server that a
# `systemctl reload` reaches that early. Once serving, the server takes the signal over
# and reloads if one came (server.py; stormpy.reloads.defer_sighup for scripts).
_sighups_before_serving: list[bool] = []


def _remember_sighup(*_) -> None:
    _sighups_before_serving.append(True)


if _os.path.basename(_sys.argv[0]) in ("stormpy", "-m") and \
        _sys.argv[1:2] in (["serve-dns"], ["serve-http"], ["serve"]):
    _signal.signal(_signal.SIGHUP, _remember_sighup)

from stormpy._core import Packet  # noqa: E402
from stormpy.responder import Responder, Template, serve  # noqa: E402

__all__ = ["Packet", "Responder", "Template", "serve", "__version__"]
