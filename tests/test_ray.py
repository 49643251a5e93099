"""Sweeps on a Ray cluster (issue 16 item 1): a real local cluster of two nodes (a head and one
worker node, one CPU each, `ray.cluster_utils.Cluster`), the worker node killed mid-sweep; the
sweep completes with every point once and the table of a local sweep. Without Ray, `--ray` says
what to install. Ray is an optional extra: these tests skip without it, except under CI
(CI=true), whose install step (scripts/test.sh) must provide it. Waits poll with a generous
bound; nothing asserts how long anything takes."""

from __future__ import annotations

import os
import sys
import threading
import time

import polars as pl
import pytest

import vmsched
from vmsched import cli

SCEN = "seed000_context1_ratelimit"
#: Six points of a fraction of a second of wall time each.
GRID = {"host.ratelimit_us": [1000, 2000, 5000, 10000, 20000, 40000]}
FIXED = {"run.duration_ms": 3000, "run.warmup_ms": 0}
BOUND_S = 300


def need_ray():
    try:
        import ray  # noqa: F401
    except ImportError:
        msg = "Ray is not installed (pip install 'vmsched[ray]')"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg}: CI's install step (scripts/test.sh) must provide it")
        pytest.skip(msg)


def same(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    return a.sort(a.columns).equals(b.sort(b.columns))


def point_files(out):
    d = out / "points"
    return sorted(p.name for p in d.glob("*.json")) if d.is_dir() else []


@pytest.fixture(scope="module")
def cluster():
    need_ray()
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True,
                head_node_args={"num_cpus": 1, "include_dashboard": False})
    worker = c.add_node(num_cpus=1)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield c, worker
    finally:
        ray.shutdown()
        c.shutdown()


def test_a_sweep_survives_its_ray_worker_node_dying(cluster, tmp_path):
    c, worker = cluster
    import ray

    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    out = tmp_path / "ray"
    result: dict = {}

    def go():
        try:
            result["df"] = vmsched.sweep(SCEN, GRID, out=out, progress=False, set=FIXED,
                                         executor="ray")
        except BaseException as e:  # handed to the test thread
            result["error"] = e

    t = threading.Thread(target=go)
    t.start()
    deadline = time.monotonic() + BOUND_S
    while not point_files(out):
        assert t.is_alive(), f"the sweep ended before any point was written: {result}"
        assert time.monotonic() < deadline, "no point was ever written"
        time.sleep(0.02)
    at_kill = len(point_files(out))
    c.remove_node(worker, allow_graceful=False)  # kills its raylet and its workers
    t.join(BOUND_S)
    assert not t.is_alive(), "the sweep did not end"
    assert "error" not in result, result.get("error")
    assert at_kill < len(GRID["host.ratelimit_us"]), "the worker died after the sweep's end"
    # Every point once, the table of a local sweep.
    assert len(point_files(out)) == len(GRID["host.ratelimit_us"])
    local = vmsched.sweep(SCEN, GRID, out=tmp_path / "local", progress=False, set=FIXED, jobs=1)
    assert same(result["df"], local)
    assert point_files(out) == point_files(tmp_path / "local")
    # Resumed on Ray: nothing is run again.
    stamps = {p: (out / "points" / p).stat().st_mtime_ns for p in point_files(out)}
    again = vmsched.sweep(SCEN, GRID, out=out, progress=False, set=FIXED, executor="ray")
    assert same(again, local)
    assert {p: (out / "points" / p).stat().st_mtime_ns for p in point_files(out)} == stamps


def test_a_points_error_comes_back_from_ray(cluster):
    from vmsched.executor import RayExecutor

    with RayExecutor() as ex:
        outcomes = dict(ex.imap_unordered(int, [("12",), ("twelve",)]))
    assert outcomes[("12",)].result() == 12
    with pytest.raises(ValueError, match="twelve"):
        outcomes[("twelve",)].result()


def test_a_point_whose_worker_dies_on_every_try_is_worker_died(cluster):
    from vmsched.executor import RayExecutor, WorkerDied

    with RayExecutor(tries=2) as ex:
        f = ex.submit(os._exit, 3)  # the worker process exits while running the point
        ok = ex.submit(int, "7")
        with pytest.raises(WorkerDied, match="died on each of its 2 tries"):
            f.result(BOUND_S)
        assert ok.result(BOUND_S) == 7


def test_without_ray_the_option_says_what_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code = cli.main(["sweep", SCEN, "--set", "host.ratelimit_us=1000,2000", "--set",
                     "run.duration_ms=100", "--set", "run.warmup_ms=0", "--ray",
                     "-o", str(tmp_path / "s")])
    out = capsys.readouterr().out
    assert code == 2
    assert "pip install 'vmsched[ray]'" in out
    with pytest.raises(ImportError, match=r"vmsched\[ray\]"):
        vmsched.sweep(SCEN, {"host.ratelimit_us": [1000, 2000]}, out=tmp_path / "p",
                      progress=False, set={"run.duration_ms": 100, "run.warmup_ms": 0},
                      executor="ray")


def test_a_tune_runs_its_trials_on_ray(cluster, tmp_path):
    try:
        import optuna  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("Optuna is not installed: CI's install step must provide it")
        pytest.skip("Optuna is not installed (pip install 'vmsched[tune]')")
    kw = dict(trials=4, seeds=2, set={"run.duration_ms": 300, "run.warmup_ms": 0},
              progress=False)
    params = {"host.ratelimit_us": "100..128000:log"}
    on_ray = vmsched.tune(SCEN, params, "max context1.score", out=tmp_path / "r",
                          executor="ray", **kw)
    assert on_ray.trials.height == 4 and set(on_ray.trials["state"]) == {"COMPLETE"}
    # Each trial's figures are those of the same runs made locally.
    for row in on_ray.trials.iter_rows(named=True):
        local = [vmsched.run(SCEN, set={**kw["set"], "host.ratelimit_us": row[
            "host.ratelimit_us"], "run.seed": s}).figure("context1")["value"] for s in (1, 2)]
        assert row["context1.score mean"] == pytest.approx(sum(local) / 2)


def test_the_cli_sweeps_and_tunes_on_ray(cluster, tmp_path, capsys):
    short = ["--set", "run.duration_ms=300", "--set", "run.warmup_ms=0"]
    code = cli.main(["sweep", SCEN, "--set", "host.ratelimit_us=100..128000:log", *short,
                     "--design", "lhs", "--samples", "3", "-o", str(tmp_path / "s"), "--ray"])
    assert code == 0, capsys.readouterr().out
    on_ray = pl.read_parquet(tmp_path / "s" / "sweep.parquet")
    local = vmsched.sweep(SCEN, {"host.ratelimit_us": "100..128000:log"}, design="lhs",
                          samples=3, jobs=1, progress=False, out=tmp_path / "l",
                          set={"run.duration_ms": 300, "run.warmup_ms": 0})
    assert same(on_ray, local)
    try:
        import optuna  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("Optuna is not installed: CI's install step must provide it")
        return
    code = cli.main(["tune", SCEN, "--param", "host.ratelimit_us=100..128000:log",
                     "--objective", "max context1.score", *short, "--trials", "3",
                     "-o", str(tmp_path / "t"), "--ray"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "best point" in text
    assert pl.read_parquet(tmp_path / "t" / "trials.parquet").height == 3
