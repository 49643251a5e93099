"""Run-time changes from Python: `vmsched.run(..., events=[...])` adds `[[event]]` tables to the
scenario's timeline, validated with it (docs/python.md)."""

import polars as pl
import pytest

import vmsched

SRC = """
[run]
duration_ms = 600
[machine]
pcpus = 1
[host]
scheduler = "credit2"
version = "4.20.2"
[[domain]]
name = "a"
vcpus = 1
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
[[domain]]
name = "b"
vcpus = 1
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
"""


def vcpu(r, name):
    return r.entities.filter(pl.col("name") == name).row(0, named=True)


def test_events_pause_a_domain(tmp_path):
    f = tmp_path / "two.toml"
    f.write_text(SRC)
    r = vmsched.run(f, events=[
        {"at_ms": 100, "action": "pause", "domain": "a"},
        {"at_ms": 300, "action": "unpause", "domain": "a"},
    ])
    a = vcpu(r, "a.v0")
    assert a["offline_ns"] == 200_000_000
    # Without the events the same scenario has no offline time.
    assert vcpu(vmsched.run(f), "a.v0")["offline_ns"] == 0


def test_bad_events_name_the_field(tmp_path):
    f = tmp_path / "two.toml"
    f.write_text(SRC)
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check(f, events=[{"at_ms": 10, "action": "sched_domain", "domain": "a",
                                  "weight": 0}])
    assert e.value.args[3] == "event.0.weight"
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.run(f, events=[{"at_ms": 10, "action": "pause", "domain": "nope"}])
    assert e.value.args[3] == "event.0.domain"
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.run(f, events=[{"at_ms": 10, "action": "pause", "domain": "a", "frob": 1}])
    assert "frob" in e.value.args[0]
    with pytest.raises(TypeError, match="events\\[0\\]"):
        vmsched.run(f, events=[{"at_ms": 10, "action": "pause", "domain": {"x": 1}}])


def test_the_scenario_reference_events_run(tmp_path):
    """docs/scenarios.md's `[[event]]` example, on a scenario with the names it uses."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "scenarios.md").read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if "[[event]]" in b)
    src = SRC.replace('name = "loop"', 'name = "hog"\ncopies = 2', 1).replace(
        "duration_ms = 600", "duration_ms = 3000")
    f = tmp_path / "events.toml"
    f.write_text(src + block)
    r = vmsched.run(f)
    # Paused for the last 500 ms, and parked by its 50 % cap before that.
    a = vcpu(r, "a.v0")
    assert a["offline_ns"] > 500_000_000 and a["final_state"] == "offline"
