"""cyclictest's own output format (rt-tests v0.89, -q -h N; ERRATA W3)."""

import vmsched
from vmsched.formats import cyclictest_histogram

SCEN = """
[run]
duration_ms = 200
[machine]
pcpus = 1
[host]
scheduler = "pinned"
[[domain]]
name = "g"
vcpus = 1
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cyclictest"
name = "ct"
histogram_us = 100
"""


def test_cyclictest_histogram_block(tmp_path):
    f = tmp_path / "ct.toml"
    f.write_text(SCEN)
    r = vmsched.run(f, set={"run.vary": False})  # an exact sample count: fixed phases
    out = cyclictest_histogram(r.workload("ct")).splitlines()
    assert out[1] == "# Histogram"
    rows = out[2:102]
    assert rows[0].startswith("000000 ") and rows[99].startswith("000099 ")
    counts = [int(x.split()[1]) for x in rows]
    total = next(line for line in out if line.startswith("# Total:"))
    assert int(total.split(":")[1]) == sum(counts) == 199
    assert any(line.startswith("# Min Latencies: 00050") for line in out)
    assert any(line.startswith("# Histogram Overflows:") for line in out)
