"""stormpy: prepackaged-response packet processing with a C fast path.

Custom responders in five names: a Responder on a UDP port, with rules whose
Templates are answered in C, and a handler that gets the other Packets in
batches; serve() runs it with serve-dns's options.
"""
__version__ = "0.1.0"

from stormpy._core import Packet
from stormpy.responder import Responder, Template, serve

__all__ = ["Packet", "Responder", "Template", "serve", "__version__"]
