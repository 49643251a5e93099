"""`vmsched perf` (issue 13 item 6): a run printed as `perf sched latency` and `perf sched
timehist` print a trace. The figures agree with the run's own (the entities table) and with the
report's Gantt chart; the layout is perf's: the header and columns of Debian's linux-perf 6.1,
checked against a live `perf sched` where one can record here (it skips otherwise)."""

import re
import shutil
import subprocess

import polars as pl
import pytest

import vmsched
from vmsched import _core
from vmsched.cli import main
from vmsched.explain import _source
from vmsched.perf import (
    LATENCY_HEADER,
    TIMEHIST_HEADER,
    latency_text,
    perf_sched,
    timehist_text,
)

WINDOW = (868_000_000, 884_000_000)


@pytest.fixture(scope="module")
def seed000(tmp_path_factory):
    run = tmp_path_factory.mktemp("perf") / "s0"
    # Fixed phases (run.vary = false): the child waits out domU2's slices (docs/explain.md).
    vmsched.run("seed000_context1_ratelimit", set={"run.duration_ms": 1000, "run.vary": False},
                out=run)
    return run, perf_sched(run, window=WINDOW)


def test_latency_agrees_with_the_runs_entities(seed000):
    """perf's delay is runnable to running (a wake-up or a preemption), which is the
    entities' wait; its runtime and switches are their running time and runs."""
    run, figs = seed000
    lat = {(r["level"], r["task"]): r for r in figs["latency"].iter_rows(named=True)}
    ents = pl.read_parquet(run / "entities.parquet")
    checked = 0
    for e in ents.iter_rows(named=True):
        r = lat.get((e["level"], e["name"]))
        if r is None:
            assert e["runs"] == 0 and e["running_ns"] == 0, e["name"]
            continue
        assert r["runtime_ns"] == e["running_ns"], e["name"]
        assert r["switches"] == e["runs"], e["name"]
        assert r["delays"] == e["wait_count"], e["name"]
        assert r["delay_max_ns"] == e["wait_max_ns"], e["name"]
        assert r["avg_delay_ns"] == pytest.approx(e["wait_mean_ns"]), e["name"]
        if r["delays"]:
            assert r["max_end_ns"] - r["max_start_ns"] == r["delay_max_ns"]
        checked += 1
    assert checked >= 4


def test_timehist_lines_are_the_gantt_charts_runs(seed000):
    run, figs = seed000
    th = figs["timehist"]
    assert th.height > 100
    assert (th["time_ns"] >= WINDOW[0]).all() and (th["time_ns"] < WINDOW[1]).all()
    path, text, ov, _ = _source(run)
    g = pl.DataFrame(_core.explain(str(path), text, "context1.child", ov, 1, None, None,
                                   (0, WINDOW[1]), None)["gantt"]["columns"])
    slices = {(r["ent"], r["start_ns"], r["end_ns"]) for r in g.iter_rows(named=True)}
    for r in th.iter_rows(named=True):
        assert (r["task"], r["time_ns"] - r["run_ns"], r["time_ns"]) in slices, r
    # The child's 10 ms round trip: it was woken (sch delay) and waited out Credit2's slice.
    child = th.filter(pl.col("task") == "context1.child")
    assert child["sch_delay_ns"].max() >= 10_000_000
    assert (child["wait_ns"] >= child["sch_delay_ns"]).all()


def test_latency_text_has_perfs_layout(seed000):
    _, figs = seed000
    text = latency_text(figs["latency"].filter(pl.col("level") == "domU1"))
    lines = text.split("\n")
    assert lines[2] == LATENCY_HEADER
    assert lines[1] == lines[3] == " " + "-" * 139
    pipes = [i for i, c in enumerate(LATENCY_HEADER) if c == "|"]
    rows = [ln for ln in lines if ln.startswith("  context1.")]
    assert len(rows) == 2
    for row in rows:
        # perf's row: every column's bar under the header's, the last column open.
        assert [i for i, c in enumerate(row) if c == "|"] == pipes[:-1]
        assert len(row) == 140
        assert re.fullmatch(r"  \S.{21}\|\s+\d+\.\d{3} ms \|\s+\d+ \| avg:\s+\d+\.\d{3} ms \| "
                            r"max:\s+\d+\.\d{3} ms \| max start:\s+\d+\.\d{6} s \| "
                            r"max end:\s+\d+\.\d{6} s", row), row
    # The largest average delay first, as perf sorts by default.
    assert rows[0].startswith("  context1.parent")
    assert re.fullmatch(r"  TOTAL:\s+\|\s+\d+\.\d{3} ms \|\s+\d+ \|", lines[-3])


def test_timehist_text_has_perfs_layout(seed000):
    _, figs = seed000
    text = timehist_text(figs["timehist"].filter(pl.col("level") == "host"))
    lines = text.rstrip("\n").split("\n")
    assert "\n".join(lines[:3]) == TIMEHIST_HEADER
    assert len(lines) > 3
    for ln in lines[3:]:
        assert len(ln) == 88
        assert re.fullmatch(r"\s+\d+\.\d{6} \[\d{4}\]  .{30}  [ \d.]{9}  [ \d.]{9}  [ \d.]{9} ",
                            ln), ln


def test_the_command(seed000, capsys):
    run, _ = seed000
    assert main(["perf", str(run), "--level", "domU1"]) == 0
    out = capsys.readouterr().out
    assert "# domU1: perf sched latency" in out and LATENCY_HEADER in out
    assert main(["perf", str(run), "--timehist", "870ms..871ms"]) == 0
    out = capsys.readouterr().out
    assert "# host: perf sched timehist" in out and "# domU2: perf sched timehist" in out
    assert main(["perf", str(run), "--level", "nope"]) == 2
    assert main(["perf", str(run), "--timehist", "9..3"]) == 2


def test_the_headers_are_those_a_live_perf_sched_prints(tmp_path):
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("perf is not installed (Debian's linux-perf)")
    data = tmp_path / "perf.data"
    rec = subprocess.run([perf, "sched", "record", "-o", str(data), "--", "sleep", "0.02"],
                         capture_output=True, text=True, timeout=120)
    if rec.returncode != 0 or not data.is_file():
        pytest.skip(f"perf sched record cannot record here: {rec.stderr.strip()[-200:]}")
    lat = subprocess.run([perf, "sched", "latency", "-i", str(data)], capture_output=True,
                         text=True, timeout=120).stdout.split("\n")
    assert LATENCY_HEADER in lat
    th = subprocess.run([perf, "sched", "timehist", "-i", str(data)], capture_output=True,
                        text=True, timeout=120).stdout
    assert TIMEHIST_HEADER in th
    # A row of perf's has its bars where ours are.
    row = next(ln for ln in lat if ln.startswith("  ") and "avg:" in ln)
    pipes = [i for i, c in enumerate(LATENCY_HEADER) if c == "|"]
    assert [i for i, c in enumerate(row) if c == "|"][:len(pipes) - 1] == pipes[:-1]
