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
    with pytest.raises(vmsched.ScenarioError, match="seed000_context1_ratelimit"):
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


# Results as Arrow tables.

def test_the_core_returns_arrow_tables():
    from vmsched import _core

    p = vmsched.scenario_path("seed000_context1_ratelimit")
    out = _core.run(str(p), p.read_text(), [("run.duration_ms", 300), ("run.warmup_ms", 50)])
    assert set(out["tables"]) == set(vmsched.api.TABLES)
    ents = out["tables"]["entities"]
    assert hasattr(ents, "__arrow_c_stream__") and len(ents) == 8
    df = pl.DataFrame(ents)
    assert df.schema["running_ns"] == pl.UInt64 and df.schema["cpu_share"] == pl.Float64
    assert df.columns == ents.column_names
    # The window starts up to run.start_spread_us (10 ms) after the warm-up (run.vary).
    assert 50_000_000 <= out["warmup_ns"] < 60_000_000
    assert out["measured_ns"] == out["duration_ns"] - out["warmup_ns"] == 300_000_000 - out["warmup_ns"]


def test_tables_agree_with_each_other_and_with_raw():
    r = vmsched.run("seed000_context1_ratelimit", set=SMALL)
    w = r.workloads
    # A counter is a column of the workload table, null for workloads without it.
    assert w.filter(pl.col("workload") == "hog")["count_fast"].to_list() == [None]
    fast = w.filter(pl.col("workload") == "context1")["count_fast"][0]
    assert fast == r.counter("context1", "fast")
    long = r.counters.filter(pl.col("workload") == "context1")
    assert dict(zip(long["counter"], long["value"])) == dict(r.workload("context1")["counters"])
    raw = r.raw
    assert raw["entities"] == r.entities.to_dicts()
    assert [s["name"] for s in raw["series"]] == r.series["name"].unique(maintain_order=True).to_list()
    assert sum(len(s["t_ns"]) for s in raw["series"]) == r.series.height
    with pytest.raises(KeyError, match="no counter 'nope'"):
        r.counter("context1", "nope")
    with pytest.raises(KeyError, match="no workload"):
        r.counter("nope", "fast")


def test_histograms_are_a_table_with_their_buckets(tmp_path):
    f = tmp_path / "ct.toml"
    f.write_text('[run]\nduration_ms = 100\n[machine]\npcpus = 1\n[host]\nscheduler = "pinned"\n'
                 '[[domain]]\nname = "g"\nvcpus = 1\n[domain.sched]\nscheduler = "cfs"\n'
                 '[[domain.workload]]\nkind = "cyclictest"\nname = "ct"\nhistogram_us = 100\n')
    r = vmsched.run(f, out=tmp_path / "out")
    h = r.histograms
    assert h.height >= 1 and h.schema["buckets_us"] == pl.List(pl.UInt64)
    row = h.row(0, named=True)
    assert len(row["buckets_us"]) == 100
    assert sum(row["buckets_us"]) + row["overflows"] == row["count"]
    wide = r.workloads.row(0, named=True)
    assert wide[f"{row['histogram']}_count"] == row["count"]
    assert pl.read_parquet(tmp_path / "out" / "histograms.parquet").height == h.height


def test_summary_is_small_and_has_no_series(tmp_path):
    r = vmsched.run("seed000_context1_ratelimit", set=SMALL, out=tmp_path)
    assert r.series.height > 200
    text = (tmp_path / "summary.json").read_text()
    summary = json.loads(text)
    assert "series" not in summary and len(text) < 4000
    assert summary["workloads"][0]["counters"]["fast"] == r.counter("context1", "fast")
    assert pl.read_parquet(tmp_path / "series.parquet").equals(r.series)
    assert pl.read_parquet(tmp_path / "counters.parquet").equals(r.counters)


# Typed overrides.

def test_versions_need_no_quotes():
    for v in ("4.21", "4.20.2"):
        assert vmsched.check("seed000_context1_ratelimit", set=[f"host.version={v}"])["host"]["version"] == v
    s = vmsched.check("seed000_context1_ratelimit", set={"host.version": "4.21",
                                                       "domain.0.sched.version": "5.10"})
    assert s["host"]["version"] == "4.21" and s["domain"][0]["sched"]["version"] == "5.10"


def test_python_values_keep_their_types():
    s = vmsched.check("seed000_context1_ratelimit",
                      set={"host.ratelimit_us": 20000, "domain.0.kernel.paravirt_time_accounting": True,
                           "domain.0.pcpus": [0, 1]}, seed=7)
    assert s["host"]["ratelimit_us"] == 20000 and s["run"]["seed"] == 7
    assert s["domain"][0]["kernel"]["paravirt_time_accounting"] is True
    assert s["domain"][0]["pcpus"] == [0, 1]
    # Text is read by the field's type, from a mapping as from a command line.
    s = vmsched.check("seed000_context1_ratelimit", set={"host.ratelimit_us": "20000"})
    assert s["host"]["ratelimit_us"] == 20000


def test_a_value_of_the_wrong_type_names_the_key_and_the_type():
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check("seed000_context1_ratelimit", set={"host.version": 4.21})
    _, _, _, field, message = e.value.args
    assert field == "host.version" and "expected a string" in message and "4.21" in message
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.check("seed000_context1_ratelimit", set=["host.ratelimit_us=fast"])
    assert e.value.args[3] == "host.ratelimit_us" and "expected an integer" in e.value.args[4]
    with pytest.raises(TypeError, match="run.seed"):
        vmsched.check("seed000_context1_ratelimit", set={"run.seed": None})


def test_field_value_reads_text_as_the_core_does():
    from vmsched.api import field_value

    assert field_value("seed000_context1_ratelimit", "host.version", "4.21") == "4.21"
    assert field_value("seed000_context1_ratelimit", "host.ratelimit_us", "5000") == 5000
    with pytest.raises(vmsched.ScenarioError, match="expected an integer"):
        field_value("seed000_context1_ratelimit", "run.seed", "x")
