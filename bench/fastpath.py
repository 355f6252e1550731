#!/usr/bin/env python3
"""Moved: this is `stormpy bench fastpath` now (stormpy/bench/fastpath.py)."""
import sys

from stormpy.bench.cli import main

if __name__ == "__main__":
    sys.exit(main(["fastpath", *sys.argv[1:]]))
