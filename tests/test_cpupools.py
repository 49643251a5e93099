"""Cpupools from Python (docs/cpupools.md): the shipped scenario's entity rows say their pool,
`cpupool_migrate` given as a Python event moves a domain, and a bad pool event names its field."""

import polars as pl
import pytest

import vmsched
from vmsched.api import SCENARIO_DIR

SRC = """
[run]
duration_ms = 400
[machine]
pcpus = 4
[host]
scheduler = "credit2"
[[cpupool]]
name = "rt"
pcpus = [2, 3]
[cpupool.sched]
scheduler = "rtds"
[[domain]]
name = "a"
vcpus = 2
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
copies = 2
pin_each = true
"""


def test_the_shipped_scenario_says_each_entity_s_pool():
    r = vmsched.run(SCENARIO_DIR / "cpupools.toml")
    pools = dict(r.entities.filter(pl.col("kind") == "vcpu").select("name", "pool").iter_rows())
    assert pools["batch.v0"] == "Pool-0"
    assert pools["ctl.v0"] == "rt"
    # ui moved into "rt" at 1000 ms: its pool at the end.
    assert pools["ui.v0"] == "rt"


def test_a_python_migrate_event_moves_the_domain(tmp_path):
    f = tmp_path / "pools.toml"
    f.write_text(SRC)
    # Fixed start (run.vary = false): "200 ms alone" is counted from time 0.
    r = vmsched.run(f, set={"run.vary": False},
                    events=[{"at_ms": 200, "action": "cpupool_migrate", "domain": "a",
                                "pool": "rt", "budget_us": 2000, "period_us": 10000,
                                "extratime": False}])
    row = r.entities.filter(pl.col("name") == "a.v0").row(0, named=True)
    assert row["pool"] == "rt"
    # 200 ms alone on a pCPU, then 2 ms of every 10 ms.
    assert row["running_ns"] == pytest.approx(200_000_000 + 40_000_000, rel=0.02)


def test_a_bad_pool_event_names_its_field(tmp_path):
    f = tmp_path / "pools.toml"
    f.write_text(SRC)
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.run(f, events=[{"at_ms": 10, "action": "cpupool_cpu_remove", "pool": "rt",
                                "cpu": 1}])
    assert "event.0.cpu" in str(e.value)
