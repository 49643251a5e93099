"""Property tests (hypothesis) of the Python front, item 5 of issue 18 (docs/fuzzing.md): random
override dicts, `key=value` lists and sweep grids applied to the shipped scenarios. `vmsched.check`
and a sweep's point keys either return or raise `vmsched.ScenarioError` or `ValueError`, nothing
else. The Rust side of the same inputs is fuzzed by fuzz/fuzz_targets/overrides.rs."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vmsched
from vmsched.api import scenario_path
from vmsched.sweep_runner import expand, point_key

SCENARIOS = ["seed000_ncopy", "seed000_context1_ratelimit", "seed000_unpinned"]

# Keys the shipped scenarios have (and near misses); the rest are free text.
KNOWN = [
    "run.duration_ms", "run.warmup_ms", "run.seed", "run.sample_interval_us",
    "machine.pcpus", "machine.arch", "machine.sockets", "machine.threads_per_core",
    "host.scheduler", "host.version", "host.ratelimit_us", "host.runqueue",
    "domain.0.vcpus", "domain.0.pcpus", "domain.0.weight", "domain.0.cap",
    "domain.1.vcpus", "domain.0.sched.hz", "domain.0.kernel.preempt",
    "domain.0.workload.0.copies", "domain.0.workload.0.jitter_pct",
    "domain.0.workload.0.nice", "domain.1.workload.0.copies", "domain.5.vcpus",
    "domain.x.vcpus", "run", "domain", "domain.0", "domain.0.workload", "", ".", "run..seed",
]

keys = st.one_of(st.sampled_from(KNOWN), st.text(max_size=24))
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**63 - 1, 2**63, 2**64, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=16),
    st.sampled_from(["4.21", "cfs", "credit2", "pinned", "true", "[0, 1]", "1e300", "nan"]),
)
values = st.one_of(scalars, st.lists(scalars, max_size=4),
                   st.lists(st.lists(scalars, max_size=3), max_size=3))

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

ALLOWED = (vmsched.ScenarioError, ValueError)


def _check(name, set):
    try:
        out = vmsched.check(name, set=set)
    except ALLOWED:
        return
    assert isinstance(out, dict)


@FAST
@given(st.sampled_from(SCENARIOS), st.dictionaries(keys, values, max_size=5))
def test_override_dicts_validate_or_raise_a_project_error(name, overrides):
    _check(name, overrides)


@FAST
@given(st.sampled_from(SCENARIOS),
       st.lists(st.one_of(st.tuples(keys, st.text(max_size=16)).map("=".join),
                          st.text(max_size=30)), max_size=5))
def test_key_value_texts_validate_or_raise_a_project_error(name, items):
    _check(name, items)


@FAST
@given(st.sampled_from(SCENARIOS),
       st.dictionaries(keys, st.lists(values, min_size=1, max_size=3), min_size=1, max_size=3))
def test_sweep_grid_points_validate_or_raise_a_project_error(name, grid):
    """Every point of a grid is keyed as a sweep keys it before running: its resolved scenario
    validates, or the point's error is a project error."""
    p = scenario_path(name)
    text = p.read_text()
    for point in expand(grid, seeds=1)[:6]:
        try:
            key = point_key(str(p), text, [], point)
        except ALLOWED:
            continue
        assert isinstance(key, str) and len(key) == 32


@pytest.mark.parametrize("v", [math.nan, math.inf, 2**64, -(2**63) - 1, [[[1]]], ""])
def test_edge_values_of_a_number_field(v):
    _check("seed000_ncopy", {"run.duration_ms": v})
