"""Shared fixtures. Servers run as subprocesses on 127.0.0.1 with free ports."""
import os
import shutil

import pytest

from support.nginx import nginx_site  # noqa: F401  (fixture)
from support.servers import knot_server, stormpy_server  # noqa: F401  (fixtures)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE_ZONE = os.path.join(REPO, "zones", "example.zone")


@pytest.fixture
def example_zone_copy(tmp_path):
    """A private copy of zones/example.zone that a test may rewrite."""
    path = tmp_path / "example.zone"
    shutil.copy(EXAMPLE_ZONE, path)
    return path
