"""Sweeps under faults (issue 18 item 6), with real processes and real signals: SIGKILL and
SIGINT of the sweep, a worker killed, a point that fails, two sweeps into one directory, a full
disk. Each leaves every finished point exactly once, leaves no worker behind, resumes without
redoing finished points, and ends with the table of an uninterrupted sweep. Waits poll for a
condition with a generous bound; nothing asserts how long anything takes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest

import vmsched
from vmsched.errors import SweepBusyError, SweepError
from vmsched.executor import ProcessExecutor, WorkerDied

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")

SCEN = "seed000_ncopy"
#: Six points of a second or two of wall time each.
GRID = {"host.ratelimit_us": [500, 1000, 2000, 4000, 8000, 16000]}
FIXED = {"run.duration_ms": 20000, "run.warmup_ms": 0}
#: Generous: a loaded 2-core machine shared with other builds.
BOUND_S = 300


def cli_args(out: Path, jobs: int = 2) -> list[str]:
    vals = ",".join(str(v) for v in GRID["host.ratelimit_us"])
    args = [sys.executable, "-m", "vmsched.cli", "sweep", SCEN, "--set",
            f"host.ratelimit_us={vals}", "--jobs", str(jobs), "-o", str(out)]
    for k, v in FIXED.items():
        args += ["--set", f"{k}={v}"]
    return args


def sweep(out: Path, **kw) -> pl.DataFrame:
    kw.setdefault("set", FIXED)
    kw.setdefault("jobs", 2)
    return vmsched.sweep(SCEN, GRID, out=out, progress=False, **kw)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> pl.DataFrame:
    """The uninterrupted sweep's table."""
    return sweep(tmp_path_factory.mktemp("ref") / "s")


def same(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    return a.sort(a.columns).equals(b.sort(b.columns))


def points(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (out / "points").glob("*.json")
            if not p.name.startswith(".")}


def wait_for(cond, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + BOUND_S
    while True:
        v = cond()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the sweep ended before {what}: {proc.communicate()}")
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.05)


def children(pid: int) -> list[int]:
    """Live processes whose parent is `pid`."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid and stat[0] not in "ZX":
                out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in "ZX"


def cpu_seconds(pid: int) -> float:
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def start(out: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen(cli_args(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.communicate()


def resumed_equals_reference(out: Path, finished: dict[str, int], reference) -> None:
    """A rerun does not redo the finished points, leaves each point once and no temporary
    file, and its table is the uninterrupted sweep's."""
    df = sweep(out)
    after = points(out)
    assert all(after[k] == v for k, v in finished.items()), "a finished point was run again"
    assert len(after) == len(GRID["host.ratelimit_us"])
    assert [p.name for p in (out / "points").iterdir() if p.name.startswith(".")] == []
    assert same(df, reference)
    assert same(pl.read_parquet(out / "sweep.parquet"), reference)


def test_sigkill_of_the_sweep_leaves_no_worker_and_resumes(tmp_path, reference):
    out = tmp_path / "s"
    p = start(out)
    try:
        wait_for(lambda: points(out), "a point finished", p)
        workers = children(p.pid)
        assert workers, "the sweep runs its points in worker processes"
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=BOUND_S)
    finally:
        stop(p)
    # No orphan: the workers end with their parent (PR_SET_PDEATHSIG, the lifeline pipe).
    wait_for(lambda: not any(alive(w) for w in workers), "the workers ended")
    finished = points(out)
    assert 0 < len(finished) < len(GRID["host.ratelimit_us"])
    resumed_equals_reference(out, finished, reference)


def test_sigint_of_the_sweep_prints_one_line_and_resumes(tmp_path, reference):
    out = tmp_path / "s"
    # A terminal's Ctrl-C goes to the whole foreground process group: the workers get it too.
    p = start(out, start_new_session=True)
    try:
        wait_for(lambda: points(out), "a point finished", p)
        workers = children(p.pid)
        os.killpg(p.pid, signal.SIGINT)
        stdout, stderr = p.communicate(timeout=BOUND_S)
    finally:
        stop(p)
    assert p.returncode == 130, stdout + stderr
    assert "Traceback" not in stdout + stderr, stdout + stderr
    assert stderr == "", stderr
    lines = [ln for ln in stdout.splitlines() if ln.startswith("interrupted:")]
    assert len(lines) == 1 and "finished points are kept" in lines[0], stdout
    wait_for(lambda: not any(alive(w) for w in workers), "the workers ended")
    finished = points(out)
    assert len(finished) < len(GRID["host.ratelimit_us"])
    resumed_equals_reference(out, finished, reference)


def test_a_killed_worker_is_replaced_and_its_point_run_again(tmp_path, reference):
    out = tmp_path / "s"
    p = start(out)
    try:
        # A worker that has used a second of CPU is inside a point (start-up takes less).
        victim = wait_for(lambda: next((w for w in children(p.pid) if cpu_seconds(w) > 1.0),
                                       None), "a worker ran a point", p)
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = p.communicate(timeout=BOUND_S)
    finally:
        stop(p)
    assert p.returncode == 0, stdout + stderr
    assert len(points(out)) == len(GRID["host.ratelimit_us"])
    assert same(pl.read_parquet(out / "sweep.parquet"), reference)
    resumed_equals_reference(out, points(out), reference)


def _die_on_three(x: int) -> int:
    if x == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return x * x


def test_a_point_that_kills_its_worker_every_time_is_that_points_error():
    with ProcessExecutor(2, tries=2) as ex:
        got = dict(ex.imap_unordered(_die_on_three, [(i,) for i in range(6)]))
    with pytest.raises(WorkerDied, match=r"killed by SIGKILL\) on each of its 2 tries"):
        got[(3,)].result()
    assert {i: got[(i,)].result() for i in (0, 1, 2, 4, 5)} == {i: i * i for i in (0, 1, 2, 4, 5)}


def test_a_point_that_fails_is_reported_and_the_others_finish(tmp_path, capsys):
    # A memory limit the 1-µs sampling point cannot meet: its run is refused in its worker.
    grid = {"run.sample_interval_us": [1000, 1, 500]}
    base = {"run.duration_ms": 200, "run.warmup_ms": 0, "run.memory_limit_mb": 8}
    out = tmp_path / "s"
    with pytest.raises(SweepError) as e:
        vmsched.sweep("seed000_context1_ratelimit", grid, jobs=2, out=out, progress=False,
                      set=base)
    (point, msg), = e.value.failures
    assert point["run.sample_interval_us"] == 1 and "run.sample_interval_us" in msg
    assert "1 of 3 sweep points failed" in str(e.value)
    finished = points(out)
    assert len(finished) == 2
    assert set(e.value.table["run.sample_interval_us"]) == {1000, 500}
    # The CLI: one line per failed point and a summary, exit status 1.
    from vmsched import cli
    args = ["sweep", "seed000_context1_ratelimit", "--set", "run.sample_interval_us=1000,1,500",
            "--jobs", "2", "-o", str(out)] + [f"--set={k}={v}" for k, v in base.items()]
    capsys.readouterr()
    assert cli.main(args) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [ln for ln in lines if ln.startswith("failed point: run.sample_interval_us=1 ")]
    assert lines[-1].startswith("error: 1 of 3 points failed")
    assert points(out) == finished, "the finished points were not run again"
    # With the limit raised (the limit is not part of a point's key), the rerun completes it.
    base["run.memory_limit_mb"] = 4096
    df = vmsched.sweep("seed000_context1_ratelimit", grid, jobs=2, out=out, progress=False,
                       set=base)
    assert all(points(out)[k] == v for k, v in finished.items()) and len(points(out)) == 3
    fresh = vmsched.sweep("seed000_context1_ratelimit", grid, jobs=2, out=tmp_path / "fresh",
                          progress=False, set=base)
    assert same(df, fresh)


def test_two_sweeps_into_one_directory(tmp_path, reference):
    out = tmp_path / "s"
    p = start(out)
    try:
        wait_for(lambda: (out / ".lock").exists() and "pid" in (out / ".lock").read_text(),
                 "the first sweep took its lock", p)
        # The second refuses at once, in Python and on the command line.
        with pytest.raises(SweepBusyError, match=f"in use by another sweep \\(pid {p.pid}\\)"):
            sweep(out)
        with pytest.raises(SweepBusyError):
            sweep(out, overwrite=True)
        r = subprocess.run(cli_args(out), capture_output=True, text=True, timeout=BOUND_S)
        assert r.returncode == 2 and r.stderr == "", r.stdout + r.stderr
        assert r.stdout.strip().splitlines()[-1].startswith("error: output directory")
        assert p.poll() is None, "the first sweep goes on"
        # Killed, it releases the lock with its life.
        wait_for(lambda: points(out), "a point finished", p)
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=BOUND_S)
    finally:
        stop(p)
    resumed_equals_reference(out, points(out), reference)


FULL_DISK = textwrap.dedent("""
    import errno, json, subprocess, sys
    import vmsched
    d, grid, fixed = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", d], check=True)
    out = d + "/s"
    report = {}
    try:
        vmsched.sweep("seed000_context1_ratelimit", grid, jobs=2, out=out, progress=False,
                      set=fixed)
        report["first"] = "finished"
    except OSError as e:
        report["first"] = errno.errorcode.get(e.errno, str(e))
    import os, pathlib
    pts = pathlib.Path(out) / "points"
    stamp = lambda: {p.name: p.stat().st_mtime_ns for p in pts.iterdir()}
    report["after_full"] = stamp()
    subprocess.run(["mount", "-o", "remount,size=64m", d], check=True)
    df = vmsched.sweep("seed000_context1_ratelimit", grid, jobs=2, out=out, progress=False,
                       set=fixed)
    report["after_resume"] = stamp()
    report["table"] = df.sort(df.columns).to_dicts()
    print(json.dumps(report))
""")


@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("mount") is None,
                    reason="needs unshare(1) and mount(8)")
def test_a_full_disk_stops_the_sweep_and_it_resumes(tmp_path):
    """A real tmpfs of 16 KiB (4 pages: the lock file and three point files), mounted in a
    private user and mount namespace (`unshare -rm`, no root needed where user namespaces are
    allowed): the sweep stops on ENOSPC keeping the points written; with the tmpfs grown, the
    rerun finishes the rest."""
    grid = {"host.ratelimit_us": [500, 1000, 2000, 4000, 8000, 16000]}
    fixed = {"run.duration_ms": 100, "run.warmup_ms": 0}
    d = tmp_path / "disk"
    d.mkdir()
    probe = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "tmpfs", str(d)],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {probe.stderr!r}")
    r = subprocess.run(["unshare", "-rm", sys.executable, "-c", FULL_DISK, str(d),
                        json.dumps(grid), json.dumps(fixed)],
                       capture_output=True, text=True, timeout=BOUND_S)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout.splitlines()[-1])
    assert rep["first"] == "ENOSPC"
    full = {k: v for k, v in rep["after_full"].items() if not k.startswith(".")}
    assert 0 < len(full) < 6, rep["after_full"]
    assert [k for k in rep["after_full"] if k.startswith(".")] == [], "a temporary file left"
    after = rep["after_resume"]
    assert all(after[k] == v for k, v in full.items()), "a finished point was run again"
    assert len(after) == 6 and not any(k.startswith(".") for k in after)
    fresh = vmsched.sweep("seed000_context1_ratelimit", grid, jobs=2, out=tmp_path / "fresh",
                          progress=False, set=fixed)
    assert fresh.sort(fresh.columns).to_dicts() == rep["table"]
