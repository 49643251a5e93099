"""The executor seam: points run inline or in processes, results and errors come back."""

import os

import pytest

from vmsched.executor import InlineExecutor, ProcessExecutor, make_executor


def square(x):
    return x * x


def fail_on_three(x):
    if x == 3:
        raise ValueError("three")
    return os.getpid()


@pytest.mark.parametrize("ex", [InlineExecutor, lambda: ProcessExecutor(2)])
def test_every_point_comes_back_once(ex):
    with ex() as e:
        got = {item: f.result() for item, f in e.imap_unordered(square, [(i,) for i in range(6)])}
    assert got == {(i,): i * i for i in range(6)}


@pytest.mark.parametrize("ex", [InlineExecutor, lambda: ProcessExecutor(2)])
def test_a_points_error_travels_in_its_future(ex):
    with ex() as e:
        outcomes = dict(e.imap_unordered(fail_on_three, [(i,) for i in range(5)]))
    with pytest.raises(ValueError, match="three"):
        outcomes[(3,)].result()
    assert all(outcomes[(i,)].exception() is None for i in (0, 1, 2, 4))


def test_processes_run_elsewhere_inline_runs_here():
    with ProcessExecutor(2) as e:
        pids = {e.submit(fail_on_three, i).result() for i in (0, 1)}
    assert os.getpid() not in pids
    assert InlineExecutor().submit(fail_on_three, 0).result() == os.getpid()


def test_inline_runs_each_point_when_asked():
    seen = []

    def note(x):
        seen.append(x)
        return x

    it = InlineExecutor().imap_unordered(note, [(1,), (2,)])
    assert seen == []
    next(it)
    assert seen == [1]


def test_make_executor_picks_by_jobs_and_points():
    assert isinstance(make_executor(1), InlineExecutor)
    assert isinstance(make_executor(4, points=1), InlineExecutor)
    ex = make_executor(4, points=2)
    try:
        assert isinstance(ex, ProcessExecutor) and ex.jobs == 2
    finally:
        ex.shutdown()


def test_a_sweep_runs_its_points_through_the_executor(monkeypatch, tmp_path):
    import vmsched
    from vmsched import sweep_runner

    submitted = []

    class Recording(InlineExecutor):
        def submit(self, fn, /, *args):
            submitted.append(next(a for a in args if isinstance(a, dict)))
            return super().submit(fn, *args)

    monkeypatch.setattr(sweep_runner, "make_executor", lambda jobs, points: Recording())
    df = vmsched.sweep("seed000_context1_ratelimit", {"host.ratelimit_us": [1000, 5000]},
                       out=tmp_path, progress=False,
                       set={"run.duration_ms": 100, "run.warmup_ms": 0})
    assert sorted(p["host.ratelimit_us"] for p in submitted) == [1000, 5000]
    assert df.filter(df["workload"] == "context1").height == 2
