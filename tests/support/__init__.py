"""Shared test helpers: the one DNS client, server processes (Knot, stormpy), network
namespaces, and the differential query set."""
