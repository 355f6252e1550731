"""Zones signed the way an operator signs them: the signed-zone tests and the fuzz table
take their DNSSEC data from stormpy.bench.signing."""
from stormpy.bench.signing import NSEC3_FLAGS, available, sign_zone  # noqa: F401
