"""The differential test's zones, as Knot and stormpy each load them, and its names."""
from __future__ import annotations

import os
from typing import List, Tuple

ZONES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "zones")

# Zones for the differential test: (origin, file for Knot, file for stormpy).
# gen.example.zone uses $GENERATE, which Knot's parser lacks; Knot gets a
# hand-expanded copy with identical data.
ZONES = [
    ("example.com.", "example.com.zone", "example.com.zone"),
    ("example.net.", "example.net.zone", "example.net.zone"),
    ("gen.example.", "gen.example.expanded.zone", "gen.example.zone"),
]


def knot_zones() -> List[Tuple[str, str]]:
    return [(o, os.path.join(ZONES_DIR, k)) for o, k, _ in ZONES]


def stormpy_zones() -> List[Tuple[str, str]]:
    return [(o, os.path.join(ZONES_DIR, s)) for o, _, s in ZONES]


DEFAULT_SEED = 20240101
CHAOS_VERSION = "stormpy-difftest-version 1.0"
CHAOS_IDENTITY = "stormpy-difftest-identity"
NSID = "stormpy-difftest-nsid"     # both servers' NSID (Knot's default is the hostname)

Z = "example.com."
N = "example.net."
G = "gen.example."
