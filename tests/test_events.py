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


def test_added_events_are_part_of_the_result(tmp_path):
    """A result says what it was made of: the events added (in summary.json too). A generator
    of events is read once and serves both the estimate and the run."""
    import json

    f = tmp_path / "two.toml"
    f.write_text(SRC)
    evs = [{"at_ms": 100, "action": "pause", "domain": "a"},
           {"at_ms": 300, "action": "unpause", "domain": "a"}]
    r = vmsched.run(f, events=(e for e in evs), out=tmp_path / "out")
    assert r.added_events == tuple(evs)
    assert vcpu(r, "a.v0")["offline_ns"] == 200_000_000
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["added_events"] == evs
    assert vmsched.run(f).added_events == ()


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


def test_the_scenario_reference_cpu_events_run(tmp_path):
    """docs/scenarios.md's CPU offline/online example, on a machine and domain it fits."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "scenarios.md").read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", text, re.S)
                 if '"cpu_offline"' in b)
    src = SRC.replace("pcpus = 1", "pcpus = 4").replace("vcpus = 1", "vcpus = 2", 1).replace(
        "duration_ms = 600", "duration_ms = 2000")
    f = tmp_path / "cpu_events.toml"
    f.write_text(src + block)
    r = vmsched.run(f)
    # a's vCPU 1 is down from 1500 ms to the end.
    assert vcpu(r, "a.v1")["offline_ns"] == 500_000_000
    assert vcpu(r, "a.v1")["final_state"] == "offline"


HOTPLUG = """
[run]
duration_ms = 600
warmup_ms = 0
[machine]
pcpus = 2
[host]
scheduler = "credit2"
version = "4.20.2"
[[domain]]
name = "g"
vcpus = 2
[domain.sched]
scheduler = "cfs"
[[domain.workload]]
kind = "cpu_loop"
name = "loop"
copies = 2
pin_each = true
"""


def test_events_take_a_guest_cpu_offline_and_online(tmp_path):
    f = tmp_path / "hotplug.toml"
    f.write_text(HOTPLUG)
    r = vmsched.run(f, events=[
        {"at_ms": 100, "action": "cpu_offline", "domain": "g", "cpu": 1},
        {"at_ms": 400, "action": "cpu_online", "domain": "g", "cpu": 1},
    ])
    # The vCPU is down (offline at the host) for the 300 ms its guest CPU is offline.
    assert vcpu(r, "g.v1")["offline_ns"] == 300_000_000
    # loop.1 was pinned to the offlined CPU: it falls back to CPU 0 and keeps running there,
    # sharing it with loop.0.
    t1 = vcpu(r, "loop.1")
    assert t1["running_ns"] > 100_000_000 + 200_000_000 + 100_000_000
    for name in ("g.v0", "g.v1", "loop.0", "loop.1"):
        e = vcpu(r, name)
        assert e["running_ns"] + e["runnable_ns"] + e["blocked_ns"] + e["offline_ns"] \
            == r.duration_ns
    assert vcpu(vmsched.run(f), "g.v1")["offline_ns"] == 0
    # Linux's select_fallback_rq gave loop.1 every CPU; the run logs it.
    assert len(r.log) == 1 and "loop.1" in r.log[0] and "breaking affinity" in r.log[0]


def test_events_take_a_host_pcpu_offline(tmp_path):
    f = tmp_path / "hotplug.toml"
    f.write_text(HOTPLUG)
    # Fixed start (run.vary = false): "100 ms on two pCPUs" is counted from time 0.
    r = vmsched.run(f, set={"run.vary": False},
                    events=[{"at_ms": 100, "action": "cpu_offline", "cpu": 1}])
    # One pCPU left for two busy vCPUs: 100 ms on two pCPUs, then 500 ms on one.
    total = vcpu(r, "g.v0")["running_ns"] + vcpu(r, "g.v1")["running_ns"]
    assert total == pytest.approx(2 * 100_000_000 + 500_000_000, rel=0.01)
    # Neither vCPU is down: a pCPU going offline only moves them.
    assert vcpu(r, "g.v0")["offline_ns"] == 0 == vcpu(r, "g.v1")["offline_ns"]


def test_bad_cpu_events_name_the_field(tmp_path):
    f = tmp_path / "hotplug.toml"
    f.write_text(HOTPLUG)
    for ev in ({"at_ms": 10, "action": "cpu_offline", "cpu": 0},
               {"at_ms": 10, "action": "cpu_offline", "domain": "g", "cpu": 0},
               {"at_ms": 10, "action": "cpu_offline", "cpu": 7},
               {"at_ms": 10, "action": "cpu_online", "domain": "g", "cpu": 1},
               {"at_ms": 10, "action": "cpu_offline"}):
        with pytest.raises(vmsched.ScenarioError) as e:
            vmsched.check(f, events=[ev])
        assert e.value.args[3] == "event.0.cpu", ev


def test_shipped_hotplug_rightsizing_cuts_the_latency(tmp_path):
    """The shipped `hotplug_rightsizing` scenario: with its guest fitted to the two pCPUs left
    (vCPUs 2 and 3 offline), cyclictest's typical latency is far below that of the same run
    left overcommitted (four vCPUs on two pCPUs)."""
    from vmsched.api import scenario_path

    src = scenario_path("hotplug_rightsizing").read_text()
    marker = "# The guest fits itself"
    assert marker in src
    over = tmp_path / "over.toml"
    over.write_text(src.split(marker)[0])
    right = vmsched.run("hotplug_rightsizing")
    left = vmsched.run(over)
    # Right-sized: vCPUs 2 and 3 are down for the whole measured phase; overcommitted they wait.
    assert vcpu(right, "app.v2")["offline_ns"] == right.measured_ns
    assert vcpu(left, "app.v2")["runnable_ns"] > left.measured_ns / 2

    def ct(r):
        return r.workloads.filter(pl.col("workload") == "ct").row(0, named=True)

    a, b = ct(right), ct(left)
    for t in range(4):
        assert a[f"latency_t{t}_avg_us"] * 5 < b[f"latency_t{t}_avg_us"], (a, b)
        assert a[f"latency_t{t}_p99_ns"] * 5 < b[f"latency_t{t}_p99_ns"], (a, b)
