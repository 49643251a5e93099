"""`vmsched explain` and `vmsched.explain` (docs/explain.md): a task's wake-ups, each latency
split into segments that add up to it exactly, from a run directory or a Result; seed 000's slow
round trips show the Credit2 slice the vCPU waited out, then CFS's decision."""

import subprocess
import sys

import polars as pl
import pytest

import vmsched
from vmsched.api import SCENARIO_DIR
from vmsched.explain import attribution, parse_time

# Fixed phases (run.vary = false): the child is the half that waits out domU2's slices.
SEED000 = {"run.duration_ms": 1000, "run.warmup_ms": 100, "run.vary": False}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "vmsched.cli", *args], capture_output=True,
                          text=True)


def assert_tiles(w):
    segs = w["segments"]
    assert segs[0]["start_ns"] == w["start_ns"] and segs[-1]["end_ns"] == w["end_ns"]
    for a, b in zip(segs, segs[1:]):
        assert a["end_ns"] == b["start_ns"], "contiguous"
    assert sum(s["end_ns"] - s["start_ns"] for s in segs) == w["latency_ns"]


@pytest.fixture(scope="module")
def seed000_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("ex") / "run"
    vmsched.run("seed000_context1_ratelimit", set=SEED000, out=out)
    return out


def test_seed000_slow_round_trip_shows_the_credit2_slice_then_the_cfs_decision(seed000_dir):
    ex = vmsched.explain(seed000_dir, "context1.child", worst=3)
    assert ex.task == "context1.child" and len(ex.wakeups) == 3
    assert ex.trace["truncated_at_ns"] is None
    lat = [w["latency_ns"] for w in ex.wakeups]
    assert lat == sorted(lat, reverse=True) and lat[0] > 1_000_000
    for w in ex.wakeups:
        assert_tiles(w)
        causes = [s["cause"] for s in w["segments"]]
        host = causes.index("host wait")
        h = w["segments"][host]
        assert (h["scheduler"], h["who"], h["rule"]) == ("credit2", "domU2.v0", "slice")
        assert "slice of" in h["text"]
        after = [s for s in w["segments"][host + 1:] if s["cause"] == "guest runqueue"]
        assert after and after[0]["scheduler"] == "cfs" and after[0]["who"] == "context1.parent"
        assert "wake-up" in after[0]["text"]
    # A wake-up's wait is one of the task's waits (its worst may be a preemption's).
    r = vmsched.run("seed000_context1_ratelimit", set=SEED000)
    worst = r.entities.filter(r.entities["name"] == "context1.child")["wait_max_ns"][0]
    assert worst - 10_000 < lat[0] <= worst


def test_at_picks_the_wake_up_containing_that_time_and_a_result_explains_the_same(seed000_dir):
    worst = vmsched.explain(seed000_dir, "context1.child", worst=1).wakeups[0]
    mid = (worst["start_ns"] + worst["end_ns"]) // 2
    at = vmsched.explain(seed000_dir, "context1.child", at=f"{mid}ns").wakeups
    assert len(at) == 1 and at[0] == worst
    r = vmsched.run("seed000_context1_ratelimit", set=SEED000)
    assert r.explain("context1.child", worst=1).wakeups[0] == worst
    two = vmsched.explain(seed000_dir, "context1.child", worst=2)
    seg = two.segments
    assert set(seg["wakeup"].to_list()) == {0, 1}
    sums = seg.group_by("wakeup").agg(pl.col("dur_ns").sum()).sort("wakeup")["dur_ns"].to_list()
    assert sums == [w["latency_ns"] for w in two.wakeups]


def test_cli_prints_the_timeline_and_refuses_bad_input(seed000_dir, tmp_path):
    p = cli("explain", str(seed000_dir), "--task", "context1.child", "--worst", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "host wait" in p.stdout and "domU2.v0 held pCPU 0" in p.stdout
    assert "guest runqueue" in p.stdout
    p = cli("explain", str(seed000_dir), "--task", "nope")
    assert p.returncode == 2 and "task: no task 'nope'" in p.stdout and "context1.child" in p.stdout
    p = cli("explain", str(tmp_path), "--task", "x")
    assert p.returncode == 2 and "summary.json" in p.stdout
    p = cli("explain", str(seed000_dir), "--task", "context1.child", "--at", "soon")
    assert p.returncode == 2 and "--at" in p.stdout


def test_parse_time():
    assert parse_time("612.5ms") == 612_500_000
    assert parse_time("80us") == 80_000
    assert parse_time("1.2s") == 1_200_000_000
    assert parse_time("7") == 7_000_000
    assert parse_time(1.5) == 1_500_000


@pytest.mark.parametrize("name", sorted(p.stem for p in SCENARIO_DIR.glob("*.toml")))
def test_every_shipped_scenario_adds_up(name):
    r = vmsched.run(name, set={"run.duration_ms": 1500, "run.warmup_ms": 50})
    tasks = r.entities.filter(r.entities["kind"] == "task")
    assert tasks.height
    for level, task in tasks.select("level", "name").iter_rows():
        ex = r.explain(f"{level}/{task}", worst=3)
        for w in ex.wakeups:
            assert w["measured"]
            if w["latency_ns"]:
                assert_tiles(w)


def test_the_doc_page_holds_what_the_example_script_prints():
    """docs/explain.md's outputs are generated (scripts/explain_examples.py), not hand-written."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "explain_examples.py"
    spec = importlib.util.spec_from_file_location("explain_examples", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    doc = mod.DOC.read_text()
    for name in mod.EXAMPLES:
        assert mod.block(name, mod.render(name)) in doc, (
            f"docs/explain.md's '{name}' example is stale: run scripts/explain_examples.py")


def test_attribution_adds_up_per_task_and_the_cli_prints_and_writes_it(seed000_dir, tmp_path):
    df = attribution(seed000_dir)
    assert {"level", "task", "measure", "cause", "rule", "who", "ns", "share"} <= set(df.columns)
    sums = df.group_by(["task", "measure"]).agg(pl.col("ns").sum(), pl.col("total_ns").first())
    assert (sums["ns"] == sums["total_ns"]).all()
    child = df.filter((pl.col("task") == "context1.child") & (pl.col("cause") == "host wait"))
    assert child.height and child["who"][0] == "domU2.v0" and child["rule"][0] == "slice"
    r = vmsched.run("seed000_context1_ratelimit", set=SEED000)
    assert r.attribution().equals(df)
    out = tmp_path / "a.parquet"
    p = cli("explain", str(seed000_dir), "--attribution", "--task", "context1.child",
            "-o", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "context1.child" in p.stdout and "domU2.v0" in p.stdout and "host wait" in p.stdout
    assert pl.read_parquet(out).equals(df.filter(pl.col("task") == "context1.child"))
    p = cli("explain", str(seed000_dir))
    assert p.returncode == 2 and "--task" in p.stdout
