"""`stormpy lab`: the seeds' experiments as labs a course hands out (issue 13). Each lab
is a module here with a handout in docs/labs/; this registry names them in order."""
from __future__ import annotations

import importlib

LABS = {"batching": "stormpy.lab.batching", "polling": "stormpy.lab.polling",
        "precopy": "stormpy.lab.precopy", "steering": "stormpy.lab.steering",
        "coalescing": "stormpy.lab.coalescing", "txqueues": "stormpy.lab.txqueues",
        "own-stack": "stormpy.lab.own_stack"}


def lab_module(name: str):
    """The lab's module (NUMBER, IDEA, NEEDS, QUESTIONS, run), or None when there is none."""
    path = LABS.get(name)
    return importlib.import_module(path) if path else None
