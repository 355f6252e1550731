"""The C unit tests (parsers, table, checksums) under ASan/UBSan, run from pytest."""
import os
import shutil
import subprocess

import pytest

from conftest import REPO


def test_c_unit_tests():
    if shutil.which("make") is None or shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no make or C compiler: the C unit tests cannot be built")
    r = subprocess.run(["make", "-s", f"-j{os.cpu_count() or 2}",
                        "-C", os.path.join(REPO, "native", "tests"), "check"],
                       capture_output=True, text=True, timeout=600)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    summaries = [l for l in r.stdout.splitlines() if " passed, " in l]
    with open(os.path.join(REPO, "native", "tests", "Makefile")) as f:
        programs = next(l for l in f if l.startswith("TESTS :=")).split(":=")[1].split()
    assert len(summaries) == len(programs) >= 13 and all(l.endswith(", 0 failed") for l in summaries), r.stdout
