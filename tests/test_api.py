"""The Python API: run, check, sweep, results as DataFrames, files written, errors raised."""

import json

import polars as pl
import pytest

import vmsched

SMALL = {"run.duration_ms": 300, "run.warmup_ms": 50}


def test_run_returns_dataframes_and_figures():
    r = vmsched.run("seed000_context1_ratelimit", set=SMALL)
    ents = r.entities
    assert isinstance(ents, pl.DataFrame)
    assert {"level", "name", "kind", "cpu_share", "wait_max_ns"} <= set(ents.columns)
    assert set(ents.filter(pl.col("kind") == "vcpu")["name"]) == {
        "domU1.v0", "domU1.v1", "domU1.v2", "domU1.v3", "domU2.v0"}
    fig = r.figure("context1")
    assert fig["unit"] == "lps" and fig["value"] > 1000
    assert r.counter("context1", "iterations") > 0
    s = r.series
    assert s.height > 200 and s["t_ns"].is_sorted()


def test_same_seed_same_results_different_seed_may_differ():
    a = vmsched.run("seed000_ncopy", set=SMALL)
    b = vmsched.run("seed000_ncopy", set=SMALL)
    assert json.dumps(a.raw) == json.dumps(b.raw)


def test_write_outputs(tmp_path):
    r = vmsched.run("seed000_context1_ratelimit", set=SMALL, out=tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["workloads"][0]["unit"] == "lps"
    assert pl.read_parquet(tmp_path / "entities.parquet").height == r.entities.height
    assert (tmp_path / "workloads.parquet").exists()
    assert (tmp_path / "series.parquet").exists()


def test_overrides_apply():
    r1 = vmsched.run("seed000_context1_ratelimit", set={**SMALL, "domain.0.kernel.ctxsw_cost_ns": 0})
    r2 = vmsched.run("seed000_context1_ratelimit", set={**SMALL, "domain.0.kernel.ctxsw_cost_ns": 20000})
    assert r1.figure("context1")["value"] > 1.5 * r2.figure("context1")["value"]


def test_bad_override_raises_scenario_error():
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.run("seed000_context1_ratelimit", set={"host.ratelimit_us": 50})
    msg = e.value.args[0]
    assert "ratelimit_us" in msg and "after --set" in msg


def test_bad_file_names_file_and_line(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('[machine]\npcpus = 4\n[host]\nscheduler = "credit2"\n[[domain]]\nname = "a"\n'
                 'vcpus = 0\n[domain.sched]\nscheduler = "cfs"\n')
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check(f)
    text, file, line, field, message = e.value.args
    assert file.endswith("bad.toml") and line == 7 and field == "domain.0.vcpus"
    assert "1..=4096" in message


def test_unknown_scenario_name():
    with pytest.raises(FileNotFoundError, match="seed000_context1_ratelimit"):
        vmsched.run("no_such_scenario")


def test_sweep_resumes_without_rerunning(tmp_path):
    grid = {"host.ratelimit_us": [1000, 20000]}
    df = vmsched.sweep("seed000_context1_ratelimit", grid, seeds=2, jobs=2, out=tmp_path,
                       progress=False, set=SMALL)
    assert df.filter(pl.col("workload") == "context1").height == 4
    assert (tmp_path / "sweep.png").stat().st_size > 1000
    points = sorted((tmp_path / "points").glob("*.json"))
    assert len(points) == 4
    stamp = {p: p.stat().st_mtime_ns for p in points}
    points[0].unlink()
    df2 = vmsched.sweep("seed000_context1_ratelimit", grid, seeds=2, jobs=1, out=tmp_path,
                        progress=False, set=SMALL)
    assert df2.sort(df2.columns).equals(df.sort(df.columns))
    for p in points[1:]:
        assert p.stat().st_mtime_ns == stamp[p], "a finished point was run again"


def test_a_core_panic_becomes_a_python_exception():
    from vmsched import _core

    with pytest.raises(vmsched.CoreError, match="invariant: broken on purpose"):
        _core._panic_for_tests("broken on purpose")


def test_progress_is_reported_and_results_do_not_depend_on_it():
    seen = []
    a = vmsched.run("seed000_ncopy", set=SMALL, progress=seen.append)
    assert len(seen) == 100 and seen[-1] == 1.0 and seen == sorted(seen)
    b = vmsched.run("seed000_ncopy", set=SMALL)
    assert json.dumps(a.raw) == json.dumps(b.raw)


def test_progress_callback_can_stop_a_run():
    def stop(f):
        if f > 0.5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        vmsched.run("seed000_ncopy", set=SMALL, progress=stop)
