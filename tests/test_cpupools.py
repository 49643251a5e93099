"""Cpupools from Python (docs/cpupools.md): the shipped scenario's entity rows say their pool,
`cpupool_migrate` given as a Python event moves a domain, and a bad pool event names its field."""

from pathlib import Path

import polars as pl
import pytest

import vmsched
from vmsched.api import SCENARIO_DIR

# The pool scenarios shared with crates/vmsched-sched/tests/cpupool_lifecycle.rs.
FIXTURES = Path(__file__).parent / "fixtures" / "pools"
RT_POOL = FIXTURES / "rt_pool.toml"
LIFECYCLE = FIXTURES / "lifecycle.toml"


def test_the_shipped_scenario_says_each_entity_s_pool():
    r = vmsched.run(SCENARIO_DIR / "cpupools.toml")
    pools = dict(r.entities.filter(pl.col("kind") == "vcpu").select("name", "pool").iter_rows())
    assert pools["batch.v0"] == "Pool-0"
    assert pools["ctl.v0"] == "rt"
    # ui moved into "rt" at 1000 ms: its pool at the end.
    assert pools["ui.v0"] == "rt"


def test_a_python_migrate_event_moves_the_domain():
    f = RT_POOL
    # Fixed start (run.vary = false): "200 ms alone" is counted from time 0.
    r = vmsched.run(f, set={"run.vary": False},
                    events=[{"at_ms": 200, "action": "cpupool_migrate", "domain": "a",
                                "pool": "rt", "budget_us": 2000, "period_us": 10000,
                                "extratime": False}])
    row = r.entities.filter(pl.col("name") == "a.v0").row(0, named=True)
    assert row["pool"] == "rt"
    # 200 ms alone on a pCPU, then 2 ms of every 10 ms.
    assert row["running_ns"] == pytest.approx(200_000_000 + 40_000_000, rel=0.02)


def test_a_bad_pool_event_names_its_field():
    f = RT_POOL
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.run(f, events=[{"at_ms": 10, "action": "cpupool_cpu_remove", "pool": "rt",
                                "cpu": 1}])
    assert "event.0.cpu" in str(e.value)


def test_the_lifecycle_fixture_s_pool_life_runs_from_python_events():
    """cpupool_lifecycle.rs's timeline given as Python events: pool x made, given pCPUs 2 and
    3, domain m in and back out, the pCPUs given back, x destroyed; m ran and ends in Pool-0."""
    def ev(at, action, **kw):
        return {"at_ms": at, "action": action, **kw}
    events = [ev(100, "cpupool_create", pool="x")]
    events += [ev(200, "cpupool_cpu_remove", pool="Pool-0", cpu=c) for c in (2, 3)]
    events += [ev(250, "cpupool_cpu_add", pool="x", cpu=c) for c in (2, 3)]
    events += [ev(300, "cpupool_migrate", domain="m", pool="x"),
               ev(600, "cpupool_migrate", domain="m", pool="Pool-0")]
    events += [ev(700, "cpupool_cpu_remove", pool="x", cpu=c) for c in (2, 3)]
    events += [ev(750, "cpupool_destroy", pool="x")]
    events += [ev(800, "cpupool_cpu_add", pool="Pool-0", cpu=c) for c in (2, 3)]
    r = vmsched.run(LIFECYCLE, events=events)
    vcpus = r.entities.filter(pl.col("kind") == "vcpu")
    rows = {row["name"]: row for row in vcpus.iter_rows(named=True)}
    for v in ("m.v0", "m.v1"):
        assert rows[v]["pool"] == "Pool-0"
        assert rows[v]["running_ns"] > 0
