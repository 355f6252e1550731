"""The shared memory that holds the published table: huge pages asked for, and a line
saying how to get them when the kernel gives shared memory none and the table is big."""
import logging
import os

import pytest

from stormpy import table_region
from stormpy.dns.compiler import compile_zones
from stormpy.dns.zone import load_zone

ZONE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "zones",
                    "example.zone")


@pytest.mark.parametrize("text,policy", [
    ("always within_size advise [never] deny force\n", "never"),
    ("always within_size [advise] never deny force\n", "advise"),
    ("[always] within_size advise never deny force\n", "always"),
])
def test_the_kernels_policy_is_the_bracketed_word(text, policy, tmp_path, monkeypatch):
    path = tmp_path / "shmem_enabled"
    path.write_text(text)
    monkeypatch.setattr(table_region, "SHMEM_HUGE_PAGES", str(path))
    assert table_region.shared_huge_pages() == policy


def test_no_policy_where_the_kernel_has_none(tmp_path, monkeypatch):
    monkeypatch.setattr(table_region, "SHMEM_HUGE_PAGES", str(tmp_path / "absent"))
    assert table_region.shared_huge_pages() is None


@pytest.mark.parametrize("policy,said", [("never", True), ("advise", False), (None, False)])
def test_a_big_table_in_small_pages_says_how_to_get_huge_ones(policy, said, monkeypatch, caplog):
    table, _ = compile_zones([load_zone(ZONE)])
    monkeypatch.setattr(table_region, "HUGE_PAGES_WORTH", 0)       # every table is big here
    monkeypatch.setattr(table_region, "shared_huge_pages", lambda: policy)
    with caplog.at_level(logging.INFO, logger="stormpy"):
        ref = table_region.shared_table_ref(table, 1)
    assert ref is not None
    lines = [r.getMessage() for r in caplog.records if "huge pages" in r.getMessage()]
    assert bool(lines) == said, lines
    if said:
        assert "echo advise > " + table_region.SHMEM_HUGE_PAGES in lines[0]
