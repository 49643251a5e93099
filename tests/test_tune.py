"""Designs of experiments for sweeps and tuning with Optuna (issue 16 items 2-5): parameter
syntax and its errors; random and Latin-hypercube designs, seeded and deterministic, from the
CLI and Python; the metric names objectives use; `vmsched tune` and `vmsched.tune` with one
objective and with a Pareto front under constraints, confirmed on more seeds; a tune killed
mid-study resumes without redoing its trials; errors name the bad --param or --objective; the
docs/tuning.md example in its short form. Optuna is an optional extra: its tests skip without
it, except under CI (CI=true), whose install step must provide it. Nothing asserts timing."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

import vmsched
from vmsched import cli
from vmsched.design import Param, parse_param, points

ROOT = Path(__file__).resolve().parent.parent
SCEN = "seed000_context1_ratelimit"
SHORT = {"run.duration_ms": 300, "run.warmup_ms": 0}
RL = "host.ratelimit_us"
GRAN = "domain.0.sched.sched_wakeup_granularity_ns"
BOUND_S = 300

tune_mod = sys.modules["vmsched.tune"]


def need_optuna():
    try:
        import optuna  # noqa: F401
    except ImportError:
        msg = "Optuna is not installed (pip install 'vmsched[tune]')"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg}: CI's install step (scripts/test.sh) must provide it")
        pytest.skip(msg)


def short_args() -> list[str]:
    return [a for k, v in SHORT.items() for a in ("--set", f"{k}={v}")]


# --- parameters and designs ------------------------------------------------------------------

def test_param_syntax():
    assert parse_param("a.b=0..128000") == Param("a.b", "int", 0, 128000)
    assert parse_param("a.b=0.5..2") == Param("a.b", "float", 0.5, 2.0)
    assert parse_param("a.b=10..1000:log") == Param("a.b", "int", 10, 1000, log=True)
    assert parse_param("k=cfs,eevdf, bfs") == Param("k", "cat", choices=("cfs", "eevdf", "bfs"))
    assert parse_param("k=1,2.5").choices == (1, 2.5)


@pytest.mark.parametrize("bad, says", [
    ("a.b", "--param 'a.b'"),
    ("a.b=5..1", "--param a.b: the range 5..1 is empty"),
    ("a.b=0..100:log", "--param a.b: a log scale needs LO > 0"),
    ("a.b=x..100", "--param a.b: 'x' is not a number"),
    ("a.b=1,,2", "--param a.b"),
    ("a.b=1,2:log", "--param a.b: ':log' applies to a range"),
    ("=1..2", "the key is empty"),
])
def test_bad_params_are_named(bad, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_param(bad)


def test_designs_are_seeded_deterministic_and_in_range():
    ps = [parse_param("x=0..99"), parse_param("y=1..1000:log"), parse_param("z=0.0..1.0"),
          parse_param("c=a,b,c,d")]
    for design in ("random", "lhs"):
        a = points(ps, design, 40, seed=7)
        assert a == points(ps, design, 40, seed=7)
        assert a != points(ps, design, 40, seed=8)
        assert len(a) == 40
        for p in a:
            assert 0 <= p["x"] <= 99 and isinstance(p["x"], int)
            assert 1 <= p["y"] <= 1000 and isinstance(p["y"], int)
            assert 0.0 <= p["z"] <= 1.0 and isinstance(p["z"], float)
            assert p["c"] in "abcd"


def test_lhs_uses_every_stratum_of_every_parameter_once():
    n = 25
    ps = [Param("u", "float", 0.0, 1.0), Param("v", "float", 10.0, 20.0)]
    pts = points(ps, "lhs", n, seed=3)
    for name, lo, hi in (("u", 0.0, 1.0), ("v", 10.0, 20.0)):
        strata = sorted(int((p[name] - lo) / (hi - lo) * n) for p in pts)
        assert strata == list(range(n))
    # On a log scale the strata are equal in log space.
    pts = points([Param("w", "float", 1.0, 1e4, log=True)], "lhs", 8, seed=1)
    import math

    assert sorted(int(math.log10(p["w"]) / 4 * 8) for p in pts) == list(range(8))


def test_grid_takes_lists_and_refuses_ranges():
    assert points([parse_param("a=1,2"), parse_param("b=x,y")]) == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    with pytest.raises(ValueError, match="--param a: a range"):
        points([parse_param("a=1..5")])
    with pytest.raises(ValueError, match="needs --samples"):
        points([parse_param("a=1..5")], "lhs")
    with pytest.raises(ValueError, match="unknown design 'sobol'"):
        points([parse_param("a=1..5")], "sobol", 3)


def test_sampled_sweeps_from_python_and_the_cli_agree(tmp_path, capsys):
    grid = {RL: "100..128000:log", GRAN: [1000000, 4000000]}
    df = vmsched.sweep(SCEN, grid, design="lhs", samples=4, design_seed=5, jobs=1,
                       out=tmp_path / "py", progress=False, set=SHORT)
    ctx = df.filter(pl.col("workload") == "context1")
    assert ctx.height == 4
    assert set(ctx[GRAN]) <= {1000000, 4000000}
    assert all(100 <= v <= 128000 for v in ctx[RL])
    code = cli.main(["sweep", SCEN, "--set", f"{RL}=100..128000:log", "--set",
                     f"{GRAN}=1000000,4000000", *short_args(), "--design", "lhs",
                     "--samples", "4", "--design-seed", "5", "--jobs", "1",
                     "-o", str(tmp_path / "cli")])
    assert code == 0, capsys.readouterr().out
    cli_df = pl.read_parquet(tmp_path / "cli" / "sweep.parquet")
    assert cli_df.sort(cli_df.columns).equals(df.sort(df.columns))
    assert (tmp_path / "cli" / "sweep.png").is_file()
    # Another seed, other points; a random design too.
    other = vmsched.sweep(SCEN, grid, design="random", samples=4, design_seed=5, jobs=1,
                          out=tmp_path / "rnd", progress=False, set=SHORT)
    assert set(other[RL]) != set(df[RL])


def test_sweep_design_errors_name_the_option(tmp_path, capsys):
    code = cli.main(["sweep", SCEN, "--set", f"{RL}=100..1000", *short_args(),
                     "-o", str(tmp_path / "a")])
    assert code == 2 and f"--set {RL}: a range (100..1000) needs --design random or lhs" in capsys.readouterr().out
    code = cli.main(["sweep", SCEN, "--set", f"{RL}=100..1000", *short_args(), "--design",
                     "lhs", "-o", str(tmp_path / "b")])
    assert code == 2 and "--design lhs needs --samples" in capsys.readouterr().out


# --- metrics ---------------------------------------------------------------------------------

def test_metric_names_follow_the_result_tables():
    r = vmsched.run("rt_cyclictest", set={"run.duration_ms": 400})
    m, units = tune_mod.metrics(r)
    ct = r.workloads.filter(pl.col("workload") == "ct").row(0, named=True)
    assert m["ct.avg_latency"] == ct["value"] and units["ct.avg_latency"] == "us"
    assert m["ct.latency_t0_p99_ns"] == ct["latency_t0_p99_ns"]
    assert m["ct.p99_us"] == max(ct["latency_t0_p99_ns"], ct["latency_t1_p99_ns"]) / 1000
    assert m["ct.max_us"] == max(ct["latency_t0_max_us"], ct["latency_t1_max_us"])
    assert m["loop.cpu"] == r.figure("loop")["value"]
    assert m["rt/loop.cpu"] == m["loop.cpu"]
    r = vmsched.run(SCEN, set=SHORT)
    m, units = tune_mod.metrics(r)
    assert m["context1.score"] == r.figure("context1")["value"] and units["context1.score"] == "lps"
    assert m["context1.count_fast"] == r.counter("context1", "fast")


# --- tuning ----------------------------------------------------------------------------------

def test_tune_one_objective_from_python_is_deterministic(tmp_path):
    need_optuna()
    kw = dict(trials=5, seeds=2, jobs=1, set=SHORT, progress=False, confirm_seeds=3)
    params = {RL: "100..128000:log", GRAN: "500000..8000000"}
    a = vmsched.tune(SCEN, params, "max context1.score", out=tmp_path / "a", **kw)
    b = vmsched.tune(SCEN, params, ["max context1.score"], out=tmp_path / "b", **kw)
    assert a.trials.equals(b.trials)
    assert a.trials.height == 5 and set(a.trials["state"]) == {"COMPLETE"}
    # The best point is the trial with the highest mean, with its spread and confirmation.
    best = a.best
    assert best["context1.score mean"] == a.trials["context1.score mean"].max()
    assert best["context1.score min"] <= best["context1.score mean"] <= best["context1.score max"]
    assert best["confirm_seeds"] == 3 and best["confirmed context1.score mean"] > 0
    # Every run is a point file; the confirmation adds one seed to the best trial only.
    assert len(list((tmp_path / "a" / "points").glob("*.json"))) <= 5 * 2 + 1
    for f in ("trials.csv", "trials.parquet", "front.csv", "front.parquet", "study.db"):
        assert (tmp_path / "a" / f).is_file()
    # A trial's mean is the mean of its runs' figures, read back from the point files.
    t0 = a.trials.row(0, named=True)
    recs = [json.loads(p.read_text()) for p in (tmp_path / "a" / "points").glob("*.json")]
    mine = [r["metrics"]["context1.score"] for r in recs
            if r["point"][RL] == t0[RL] and r["point"][GRAN] == t0[GRAN]
            and r["point"]["run.seed"] in (1, 2)]
    assert len(mine) == 2 and t0["context1.score mean"] == pytest.approx(sum(mine) / 2)


def test_tune_more_trials_resumes_the_study(tmp_path):
    need_optuna()
    kw = dict(jobs=1, set=SHORT, progress=False, out=tmp_path / "t")
    params = {RL: "100..128000:log"}
    first = vmsched.tune(SCEN, params, "max context1.score", trials=3, **kw)
    stamps = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t" / "points").glob("*.json")}
    more = vmsched.tune(SCEN, params, "max context1.score", trials=5, **kw)
    assert more.trials.height == 5
    assert more.trials.head(3).equals(first.trials)
    now = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t" / "points").glob("*.json")}
    assert all(now[k] == v for k, v in stamps.items())
    # Another search in the same study is refused, naming what differs.
    with pytest.raises(ValueError, match="objectives"):
        vmsched.tune(SCEN, params, "min context1.score", trials=5, **kw)


def test_pareto_front_with_a_constraint_from_the_cli(tmp_path, capsys):
    need_optuna()
    out = tmp_path / "p"
    code = cli.main(["tune", "rt_cyclictest", "--param", f"{RL}=100..20000:log", "--param",
                     "domain.0.sched.rt.sched_rt_runtime_us=100000..195000",
                     "--objective", "min ct.p99_us", "--objective", "max loop.cpu",
                     "--constraint", "ct.max_us <= 20000", "--set", "run.duration_ms=400",
                     "--trials", "8", "--jobs", "1", "--confirm-seeds", "2", "-o", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "Pareto front" in text
    trials = pl.read_parquet(out / "trials.parquet")
    front = pl.read_parquet(out / "front.parquet")
    assert (out / "front.png").stat().st_size > 0
    feas = trials.filter(pl.col("feasible"))
    assert (feas["ct.max_us mean"] <= 20000).all()
    assert front.height >= 1 and set(front["trial"]) <= set(feas["trial"])
    # No feasible trial dominates a front point; every feasible trial off the front is
    # dominated by (or ties) one on it.
    def dom(a, b):
        return (a["ct.p99_us mean"] <= b["ct.p99_us mean"] and a["loop.cpu mean"]
                >= b["loop.cpu mean"] and (a["ct.p99_us mean"], a["loop.cpu mean"])
                != (b["ct.p99_us mean"], b["loop.cpu mean"]))

    fr = list(front.iter_rows(named=True))
    for f in fr:
        assert not any(dom(t, f) for t in feas.iter_rows(named=True))
    for t in feas.iter_rows(named=True):
        assert t["trial"] in front["trial"] or any(
            dom(f, t) or (f["ct.p99_us mean"], f["loop.cpu mean"])
            == (t["ct.p99_us mean"], t["loop.cpu mean"]) for f in fr)
    # Confirmed on 2 seeds: seed 1 is the trial's own run.
    assert (front["confirm_seeds"] == 2).all()
    assert "confirmed ct.p99_us mean" in front.columns and "confirmed_feasible" in front.columns


@pytest.mark.parametrize("args, says", [
    (["--param", "domain.0.sched.nope=1..5", "--objective", "max context1.score"],
     "--param domain.0.sched.nope"),
    (["--param", f"{RL}=5..1", "--objective", "max context1.score"], f"--param {RL}"),
    (["--param", f"{RL}=100..1000", "--objective", "max context1.nope"],
     "--objective context1.nope: no such metric in the run (known: "),
    (["--param", f"{RL}=100..1000", "--objective", "max context1.score", "--objective",
      "min hog.nope"], "--objective hog.nope: no such metric in the run (known: "),
    (["--param", f"{RL}=100..1000", "--objective", "biggest context1.score"],
     "--objective 'biggest context1.score'"),
    (["--param", f"{RL}=100..1000", "--objective", "max context1.score", "--constraint",
      "context1.score ~ 5"], "--constraint 'context1.score ~ 5'"),
    (["--param", f"{RL}=100..1000", "--objective", "max context1.score", "--constraint",
      "hog.nope <= 5"], "--constraint hog.nope: no such metric"),
])
def test_tune_errors_name_the_option(tmp_path, capsys, args, says):
    need_optuna()
    code = cli.main(["tune", SCEN, *args, *short_args(), "--trials", "2", "--jobs", "1",
                     "-o", str(tmp_path / "e")])
    text = capsys.readouterr().out
    assert code == 2, text
    assert says in text
    if "known" in says:
        assert "context1.score" in text and "hog.cpu" in text
        # The corrected command runs in the same directory.
        fixed = [a.replace("context1.nope", "context1.score").replace("hog.nope", "hog.cpu")
                 for a in args]
        code = cli.main(["tune", SCEN, *fixed, *short_args(), "--trials", "2", "--jobs", "1",
                         "-o", str(tmp_path / "e")])
        text = capsys.readouterr().out
        assert code == 0, text
        assert "Pareto front" in text if "min hog.cpu" in fixed else "best point" in text


def test_without_optuna_tune_says_what_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)
    code = cli.main(["tune", SCEN, "--param", f"{RL}=100..1000", "--objective",
                     "max context1.score", "-o", str(tmp_path / "n")])
    assert code == 2 and "pip install 'vmsched[tune]'" in capsys.readouterr().out


def _complete(db: Path) -> list[int]:
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return [n for (n,) in con.execute(
            "SELECT number FROM trials WHERE state = 'COMPLETE' ORDER BY number")]
    except sqlite3.DatabaseError:
        return []
    finally:
        con.close()


def test_a_killed_tune_resumes_without_redoing_its_trials(tmp_path):
    need_optuna()
    out = tmp_path / "k"
    args = [sys.executable, "-m", "vmsched.cli", "tune", SCEN, "--param",
            f"{RL}=100..128000:log", "--objective", "max context1.score", "--set",
            "run.duration_ms=3000", "--set", "run.warmup_ms=0", "--seeds", "2",
            "--trials", "8", "--jobs", "1", "-o", str(out)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + BOUND_S
    try:
        while len(_complete(out / "study.db")) < 2:
            assert proc.poll() is None, f"the tune ended first: {proc.communicate()}"
            assert time.monotonic() < deadline, "no trial finished"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    done = _complete(out / "study.db")
    assert 2 <= len(done) < 8, "the tune was not stopped mid-study"
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "points").glob("*.json")}
    # Its runs are kept whole; rerun to the end.
    for p in (out / "points").glob("*.json"):
        assert json.loads(p.read_text())["key"] == p.stem
    r = subprocess.run(args, capture_output=True, text=True, timeout=BOUND_S)
    assert r.returncode == 0, r.stdout + r.stderr
    trials = pl.read_parquet(out / "trials.parquet")
    complete = trials.filter(pl.col("state") == "COMPLETE")
    assert complete.height == 8
    # The trials done before are there as they were, and not done again: no run of theirs
    # (nor any other finished run) was made twice.
    assert set(done) <= set(complete["trial"])
    now = {p.name: p.stat().st_mtime_ns for p in (out / "points").glob("*.json")}
    assert all(now[k] == v for k, v in stamps.items())
    # A trial that was running when it was killed is marked failed and asked again.
    failed = trials.filter(pl.col("state") == "FAIL")
    assert trials.height == 8 + failed.height


def test_the_tuning_docs_example_runs(tmp_path, capsys):
    """docs/tuning.md's example, in its short form: its command with fewer, shorter trials."""
    need_optuna()
    doc = (ROOT / "docs" / "tuning.md").read_text()
    start = doc.index("```sh\nvmsched tune docs/examples/seed000_latency.toml")
    block = doc[start + len("```sh\n"): doc.index("```", start + 6)]
    import shlex

    argv = shlex.split(block.replace("\\\n", " "))
    assert argv[:2] == ["vmsched", "tune"]
    argv = argv[1:]
    argv[1] = str(ROOT / argv[1])
    # The short form: fewer trials, shorter runs, into the test's directory.
    short = {"--trials": "6", "--seeds": "1", "--confirm-seeds": "2", "-o": str(tmp_path / "d")}
    for k, v in short.items():
        if k in argv:
            argv[argv.index(k) + 1] = v
        else:
            argv += [k, v]
    argv += ["--set", "run.duration_ms=1000", "--jobs", "1"]
    code = cli.main(argv)
    text = capsys.readouterr().out
    assert code == 0, text
    assert "best point" in text
    front = pl.read_parquet(tmp_path / "d" / "front.parquet")
    trials = pl.read_parquet(tmp_path / "d" / "trials.parquet")
    assert trials.height == 6
    if front.height:
        assert front["context1.score mean"][0] >= 30000
        assert front["ct.p99_us mean"][0] == trials.filter(pl.col("feasible"))[
            "ct.p99_us mean"].min()


def test_a_trial_whose_values_do_not_fit_together_fails_alone(tmp_path):
    need_optuna()
    res = vmsched.tune(SCEN, {"run.warmup_ms": "0..300", "run.duration_ms": "250..300"},
                       "max context1.score", trials=6, jobs=1, progress=False,
                       out=tmp_path / "f", set={"run.warmup_ms": 0})
    t = res.trials
    assert t.filter(pl.col("state") == "COMPLETE").height == 6
    for row in t.filter(pl.col("state") == "FAIL").iter_rows(named=True):
        assert row["run.warmup_ms"] >= row["run.duration_ms"]
        assert "run.warmup_ms" in row["error"] and not row["feasible"]
    for row in t.filter(pl.col("state") == "COMPLETE").iter_rows(named=True):
        assert row["run.warmup_ms"] < row["run.duration_ms"]
    assert res.best["state"] == "COMPLETE"


def test_a_study_stopped_before_any_trial_takes_a_new_search(tmp_path):
    need_optuna()
    kw = dict(trials=2, jobs=1, set=SHORT, progress=False, out=tmp_path / "s")
    with pytest.raises(ValueError, match="--objective context1.nope"):
        vmsched.tune(SCEN, {RL: "100..1000"}, "max context1.nope", **kw)
    res = vmsched.tune(SCEN, {RL: "100..1000"}, ["min context1.score", "max hog.cpu"], **kw)
    assert [d.name for d in res.study.directions] == ["MINIMIZE", "MAXIMIZE"]
    assert res.trials.filter(pl.col("state") == "COMPLETE").height == 2


def test_ctrl_c_stops_a_tune_which_then_resumes(tmp_path):
    need_optuna()
    out = tmp_path / "c"
    args = [sys.executable, "-m", "vmsched.cli", "tune", SCEN, "--param",
            f"{RL}=100..128000:log", "--objective", "max context1.score", "--set",
            "run.duration_ms=3000", "--set", "run.warmup_ms=0", "--trials", "12", "--jobs", "2",
            "-o", str(out)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + BOUND_S
    try:
        while len(_complete(out / "study.db")) < 2:
            assert proc.poll() is None, f"the tune ended first: {proc.communicate()}"
            assert time.monotonic() < deadline, "no trial finished"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole process group
        text, _ = proc.communicate(timeout=BOUND_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, text
    assert "interrupted: the tune was stopped" in text
    done = _complete(out / "study.db")
    assert len(done) < 12
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "points").glob("*.json")}
    r = subprocess.run(args, capture_output=True, text=True, timeout=BOUND_S)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(done) <= set(_complete(out / "study.db")) and len(_complete(out / "study.db")) == 12
    now = {p.name: p.stat().st_mtime_ns for p in (out / "points").glob("*.json")}
    assert all(now[k] == v for k, v in stamps.items())
