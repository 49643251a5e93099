"""Sweep resume keys (issue 18 item 0): a finished point is reused only for the very same run
(scenario content, every fixed override, the point's values); a damaged point file is run
again; an invalid point is a ScenarioError before anything runs."""

import json

import polars as pl
import pytest

import vmsched

GRID = {"host.ratelimit_us": [1000, 20000]}
FIXED = {"run.duration_ms": 100, "run.warmup_ms": 0}


def sweep(scen, out, **kw):
    kw.setdefault("set", FIXED)
    return vmsched.sweep(scen, GRID, seeds=1, jobs=1, out=out, progress=False, **kw)


def points(out):
    return {p.name: p.stat().st_mtime_ns for p in (out / "points").glob("*.json")}


def same(a, b):
    return a.sort(a.columns).equals(b.sort(b.columns))


def test_a_changed_fixed_override_is_not_reused(tmp_path):
    out = tmp_path / "s"
    long = sweep("seed000_context1_ratelimit", out)
    before = points(out)
    short_set = {**FIXED, "run.duration_ms": 60}
    short = sweep("seed000_context1_ratelimit", out, set=short_set)
    assert len(points(out)) == 2 * len(before), "the new fixed value reused the old points"
    fresh = sweep("seed000_context1_ratelimit", tmp_path / "fresh", set=short_set)
    assert same(short, fresh) and not same(short, long)
    # The first sweep's points are still there, and reused as they are.
    again = sweep("seed000_context1_ratelimit", out)
    assert same(again, long)
    assert all(points(out)[k] == v for k, v in before.items())


def test_a_changed_scenario_file_is_not_reused(tmp_path):
    src = vmsched.scenario_path("seed000_context1_ratelimit").read_text()
    scen = tmp_path / "mine.toml"
    scen.write_text(src)
    out = tmp_path / "s"
    first = sweep(scen, out)
    assert len(points(out)) == 2
    # A comment changes nothing that runs: reused.
    scen.write_text("# a comment\n" + src)
    assert same(sweep(scen, out), first) and len(points(out)) == 2
    # A changed value is a new run.
    scen.write_text(src.replace("sample_interval_us = 1000", "sample_interval_us = 500", 1))
    changed = sweep(scen, out)
    assert len(points(out)) == 4
    assert same(changed, sweep(scen, tmp_path / "fresh"))
    # The file's own seed: the sweep's seeds count up from it.
    scen.write_text(src.replace("seed = 1\n", "seed = 5\n", 1))
    seeded = sweep(scen, out)
    assert len(points(out)) == 6
    assert set(seeded["run.seed"]) == {5}


@pytest.mark.parametrize("damage", ["truncated", "empty", "not json", "other key", "binary"])
def test_a_damaged_point_file_is_run_again(tmp_path, damage):
    out = tmp_path / "s"
    first = sweep("seed000_context1_ratelimit", out)
    files = sorted((out / "points").glob("*.json"))
    victim, other = files
    text = victim.read_text()
    if damage == "truncated":
        victim.write_text(text[: len(text) // 2])
    elif damage == "empty":
        victim.write_text("")
    elif damage == "not json":
        victim.write_text("[1, 2")
    elif damage == "other key":
        victim.write_text(other.read_text())
    else:
        victim.write_bytes(b"\xff\xfe\x00garbage")
    stamp = other.stat().st_mtime_ns
    again = sweep("seed000_context1_ratelimit", out)
    assert same(again, first)
    assert json.loads(victim.read_text())["key"] == victim.stem
    assert other.stat().st_mtime_ns == stamp, "an intact point was run again"


def test_an_invalid_point_is_a_scenario_error_before_any_run(tmp_path):
    out = tmp_path / "s"
    with pytest.raises(vmsched.ScenarioError, match="ratelimit_us"):
        vmsched.sweep("seed000_context1_ratelimit", {"host.ratelimit_us": [1000, 50]}, jobs=2,
                      out=out, progress=False, set=FIXED)
    assert not out.exists() or points(out) == {}


def test_a_directory_that_is_not_a_sweep_is_refused_or_replaced(tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    with pytest.raises(FileExistsError, match="not a sweep"):
        sweep("seed000_context1_ratelimit", out)
    df = sweep("seed000_context1_ratelimit", out, overwrite=True)
    assert not (out / "summary.json").exists()
    assert df.filter(pl.col("workload") == "context1").height == 2
    # overwrite also discards an earlier sweep's points
    before = points(out)
    sweep("seed000_context1_ratelimit", out, overwrite=True)
    after = points(out)
    assert after.keys() == before.keys()
    assert all(after[k] != before[k] for k in before)


def test_sweep_files_are_not_written_through_links(tmp_path):
    out = tmp_path / "s"
    sweep("seed000_context1_ratelimit", out)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (out / "sweep.csv").unlink()
    (out / "sweep.csv").symlink_to(victim)
    sweep("seed000_context1_ratelimit", out)
    assert victim.read_text() == "keep me" and not (out / "sweep.csv").is_symlink()


def test_the_key_changes_with_the_cores_code_not_with_the_memory_limit(monkeypatch):
    from vmsched import _core, sweep_runner
    from vmsched.errors import read_scenario

    path = str(vmsched.scenario_path("seed000_context1_ratelimit"))
    text = read_scenario(path)
    key = sweep_runner.point_key(path, text, list(FIXED.items()), {"host.ratelimit_us": 1000})
    assert len(_core.__build__) == 16 and int(_core.__build__, 16) >= 0
    limited = sweep_runner.point_key(path, text, [*FIXED.items(), ("run.memory_limit_mb", 64)],
                                     {"host.ratelimit_us": 1000})
    assert limited == key, "the memory limit does not change what a run computes"
    monkeypatch.setattr(_core, "__build__", "0" * 16)
    assert sweep_runner.point_key(path, text, list(FIXED.items()),
                                  {"host.ratelimit_us": 1000}) != key
