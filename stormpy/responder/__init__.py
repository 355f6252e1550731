"""Custom responders: a Responder's rules and Templates are compiled into the table and
answered in C (api); serve() runs one with serve-dns's options (server)."""
from stormpy.responder.api import Responder, ResponderStats, Template
from stormpy.responder.server import serve

__all__ = ["Responder", "ResponderStats", "Template", "serve"]
