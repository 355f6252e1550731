"""The fast path's instructions per query must not creep back up: callgrind counts them
on the workload of `stormpy bench fastpath` (tests/instructions.json names the command;
100 names, so that compiling the zone under valgrind takes seconds, not a minute), and a
count more than 10% above the one recorded there fails. Counts are stable under
noise, unlike time. After a change that lowers them, record the new figures (the same
command prints them) there and in docs/PERFORMANCE.md section 2."""
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from stormpy.bench.callgrind import TOGGLE, count_instructions
from stormpy.bench.fastpath import callgrind_args

RECORDED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "instructions.json")
TOLERANCE = 0.10


@pytest.mark.skipif(shutil.which("valgrind") is None,
                    reason="valgrind is not installed: instructions are not counted")
def test_instructions_per_query_stay_within_ten_percent_of_the_recorded():
    with open(RECORDED) as f:
        rec = json.load(f)
    jobs = {what: callgrind_args(what, rec["names"], rec["queries"], rec["seed"])
            for what in ("dns", "frame")}
    # one valgrind per layer at the same time, each counting inside its own function
    with ThreadPoolExecutor(2) as pool:
        runs = {what: pool.submit(count_instructions, {what: jobs[what]}, TOGGLE[what],
                                  rec["queries"], 600, "") for what in jobs}
        counts = {what: run.result()[what][0] for what, run in runs.items()}
    measured = {"dns_instructions_per_query": counts["dns"],
                "instructions_per_query": counts["frame"]}
    print(f"instructions per query: {measured} (recorded: DNS layer "
          f"{rec['dns_instructions_per_query']}, frame {rec['instructions_per_query']})")
    for key, value in measured.items():
        limit = rec[key] * (1 + TOLERANCE)
        assert value <= limit, (f"{key}: {value} instructions per query, more than 10% above "
                                f"the {rec[key]} recorded in tests/instructions.json")
