"""Parallel jobs from Python (docs/parallel.md): the shipped nas_parallel scenario, the job's
runtime as its figure and through `Result.job`, an unfinished job, and placement errors that
name their field."""

import math
from pathlib import Path

import pytest

import vmsched


def test_nas_parallel_reports_the_job_runtime():
    r = vmsched.run("nas_parallel")
    fig = r.figure("lu")
    assert (fig["name"], fig["unit"]) == ("runtime", "s")
    assert fig["value"] > 0
    rows = r.workloads.filter(r.workloads["workload"] == "lu")
    # One row per domain of the placement, each with the job-wide figure.
    assert list(rows["level"]) == ["d1", "d2", "d3", "d4"]
    assert set(rows["kind"]) == {"parallel"} and rows["value"].n_unique() == 1
    job = r.job("lu")
    assert job["finished"] and job["ranks"] == job["ranks_done"] == 16
    assert job["runtime_s"] == fig["value"]
    assert job["net_msgs"] > 0
    ends = [p["end_ns"] for p in job["parts"]]
    start = r.counter("lu", "start_ns")
    assert max(ends) - start == round(job["runtime_s"] * 1e9)
    assert job["iteration"]["count"] == 3


def test_a_job_still_running_at_the_end_has_no_runtime():
    r = vmsched.run("nas_parallel", set={"run.duration_ms": 100})
    job = r.job("lu")
    assert not job["finished"] and job["ranks_done"] < 16
    assert math.isnan(job["runtime_s"])


def test_placement_errors_name_the_field(tmp_path):
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check("nas_parallel", set={"domain.0.workload.0.class": "Z"})
    assert "domain.0.workload.0.class" in str(e.value)
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check("nas_parallel", set={"domain.4.name": "d9"})
    assert "domain.0.workload.0.placement.3.domain" in str(e.value)
    # LU runs on a power of two of ranks: 14 is refused, EP takes them.
    src = (Path(vmsched.__file__).parent / "scenarios" / "nas_parallel.toml").read_text()
    f = tmp_path / "nas14.toml"
    f.write_text(src.replace('{ domain = "d4", ranks = 4 }', '{ domain = "d4", ranks = 2 }'))
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check(f)
    assert "domain.0.workload.0.placement" in str(e.value) and "14" in str(e.value)
    vmsched.check(f, set={"domain.0.workload.0.kernel": "ep"})
