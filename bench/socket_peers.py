#!/usr/bin/env python3
"""Moved: this is `stormpy bench sockets` now (stormpy/bench/sockets.py). Same options."""
import sys

from stormpy.bench.sockets import entry

if __name__ == "__main__":
    sys.exit(entry())
