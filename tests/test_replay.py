"""Counterfactual replay of a real trace (issue 14 item 5, docs/replay.md): a small workload is
recorded with `perf sched record` in the test itself, imported, replayed under the machine's
own scheduler (EEVDF 6.18) and compared with its recording; the CLI's import and compare.

Skipped (with the reason) only where perf cannot record: perf or taskset missing, or perf
refused (perf_event_paranoid, no tracefs).
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from replay_workload import WORKLOAD

import vmsched
from vmsched.cli import main
from vmsched.replay import recorded


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """(perf.data path, the workload's pids: ping, pong, burner)."""
    d = tmp_path_factory.mktemp("replay")
    for tool in ("perf", "taskset"):
        if shutil.which(tool) is None:
            pytest.skip(f"`{tool}` is not installed (Debian: linux-perf, util-linux)")
    (d / "wl.py").write_text(WORKLOAD)
    data, pids = d / "perf.data", d / "pids.txt"
    p = subprocess.run(["perf", "sched", "record", "-q", "-o", str(data), "--", "taskset", "-c",
                        "0", sys.executable, str(d / "wl.py"), "1000", "0.2", str(pids)],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or not data.exists() or not pids.exists():
        pytest.skip(f"perf sched record cannot record here (exit {p.returncode}): "
                    f"{' '.join(p.stderr.split())[-300:]}")
    return data, [int(x) for x in pids.read_text().split()]


def _check(df, pids, cpu_tol, wake_tol, slack_ns=0):
    rows = {r["task"].rsplit(":", 1)[1]: r for r in df.iter_rows(named=True)}
    for pid in pids:
        r = rows[str(pid)]
        assert r["recorded_cpu_ns"] > 0
        assert abs(r["replayed_cpu_ns"] - r["recorded_cpu_ns"]) <= \
            cpu_tol * r["recorded_cpu_ns"] + 1_000_000 + slack_ns, r
        assert abs(r["replayed_wakes"] - r["recorded_wakes"]) <= \
            wake_tol * r["recorded_wakes"] + 2, r


def test_a_recorded_trace_replays_within_tolerance(recording, tmp_path):
    data, (ping, pong, burner) = recording
    # The workload alone (selected by pid): in the recording it shared CPU 0 with whatever
    # else ran there; in the replay it has it to itself, so it can fall short of its
    # recording only by being scheduled worse than the real kernel scheduled it. Tolerance:
    # 10% (+1 ms, +2 wakes): the model has no interrupt or context-switch time, and a
    # replayed wake-up is not WF_SYNC (docs/replay.md).
    t = vmsched.import_perf(data, pids=[ping, pong, burner])
    assert {x.pid for x in t.tasks} == {ping, pong, burner}
    by = {x.pid: x for x in t.tasks}
    # 1000 round trips: each side sleeps at most once a round (less when its byte is
    # already there, or when it was preempted rather than asleep) and computes 50 µs a round.
    for pid in (ping, pong):
        assert 100 <= by[pid].wakes <= 1100, by[pid]
        assert by[pid].cpu_ns >= 40_000_000, by[pid]
    assert by[burner].cpu_ns >= 20_000_000
    path = tmp_path / "replay.toml"
    path.write_text(t.toml)
    df = vmsched.replay_compare(path)
    _check(df, [ping, pong, burner], 0.10, 0.10)
    # Every task of the machine replayed: the workload competes with what really competed
    # with it, on the CPUs each task ran on. The machine this runs on may be shared and
    # busy (every CPU saturated), where a scheduling difference delays the chain of
    # wake-ups: 25%. And where the recording kept every CPU busy, the work the replay could
    # not fit in the trace's span (at most 10 % of all, checked) falls on whichever tasks
    # come last, possibly all on one of the workload's: its CPU time may fall short by that
    # much more. (A 2-CPU machine at load 14 recorded 768 ms of work in 387 ms; the replay
    # fitted 727 ms, 42 ms short, 25 of them the burner's: 0.74 of its recording.)
    t = vmsched.import_perf(data)
    assert len(t.tasks) > 3
    path.write_text(t.toml)
    df = vmsched.replay_compare(path)
    rec, rep = df["recorded_cpu_ns"].sum(), df["replayed_cpu_ns"].sum()
    assert rep >= 0.9 * rec, (rep, rec)
    _check(df, [ping, pong, burner], 0.25, 0.25, slack_ns=rec - rep)


def test_the_cli_imports_and_compares_under_another_scheduler(recording, tmp_path, capsys):
    data, (ping, pong, burner) = recording
    out = tmp_path / "r.toml"
    assert main(["import", "perf", str(data), "-o", str(out), "--pid", str(ping), "--pid",
                 str(pong)]) == 0
    text = out.read_text()
    # Bare metal: the machine's kernel on the host level, the tasks its processes.
    assert 'hypervisor = "kvm"' in text and "[[host.process]]" in text
    assert "[[domain]]" not in text and 'kernel = "6.18"' in text
    # The counterfactual: the same recording under CFS 5.10.
    capsys.readouterr()
    assert main(["replay-compare", str(out), "--set", "host.sched.scheduler=cfs",
                 "--set", "host.sched.kernel=5.10"]) in (0, 2)
    capsys.readouterr()
    # The old form on request: a guest of the pinned host.
    assert main(["import", "perf", str(data), "-o", str(out), "--force", "--pid", str(ping),
                 "--pid", str(pong), "--pinned-guest"]) == 0
    text = out.read_text()
    assert 'scheduler = "pinned"' in text and "[[domain.workload]]" in text
    assert main(["replay-compare", str(out), "--set", "domain.0.sched.scheduler=cfs",
                 "--set", "domain.0.sched.kernel=5.10"]) in (0, 2)
    capsys.readouterr()
    assert main(["import", "perf", str(data), "-o", str(out), "--force", "--pid", str(ping),
                 "--pid", str(pong), "--scheduler", "cfs"]) == 0
    assert "kernel" not in out.read_text()
    capsys.readouterr()
    assert main(["replay-compare", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["task", "cpu", "ms"]
    assert len(lines) == 3


FTRACE = """\
# tracer: nop
            ping-10      [000] d..2.   100.000000: sched_switch: prev_comm=sh prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=ping next_pid=10 next_prio=120
            ping-10      [000] d..3.   100.000100: sched_wakeup: comm=pong pid=11 prio=120 target_cpu=000
            ping-10      [000] d..2.   100.000200: sched_switch: prev_comm=ping prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=pong next_pid=11 next_prio=120
            pong-11      [000] d..3.   100.000400: sched_wakeup: comm=ping pid=10 prio=120 target_cpu=000
            pong-11      [000] d..2.   100.000500: sched_switch: prev_comm=pong prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=ping next_pid=10 next_prio=120
            ping-10      [000] d..2.   100.001800: sched_switch: prev_comm=ping prev_pid=10 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
"""


def test_ftrace_text_imports_and_replays_exactly_when_alone(tmp_path):
    f = tmp_path / "trace"
    f.write_text(FTRACE)
    t = vmsched.import_ftrace(f)
    assert [x.name for x in t.tasks] == ["ping:10", "pong:11"]
    assert (t.tasks[0].cpu_ns, t.tasks[0].wakes) == (200_000 + 1_300_000, 1)
    p = tmp_path / "s.toml"
    p.write_text(t.toml)
    df = vmsched.replay_compare(p)
    assert df["replayed_cpu_ns"].to_list() == df["recorded_cpu_ns"].to_list()
    assert df["replayed_wakes"].to_list() == df["recorded_wakes"].to_list()
    assert recorded("c5 s3 w1 k1 c7 x") == (12, 2)


def test_bad_traces_name_the_line(tmp_path, capsys):
    f = tmp_path / "trace"
    f.write_text("# tracer: nop\nnot an event\n")
    with pytest.raises(vmsched.ScenarioError) as e:
        vmsched.import_ftrace(f)
    assert e.value.line == 2
    assert main(["import", "ftrace", str(f)]) == 2
    assert ":2:" in capsys.readouterr().out
    f.write_text(FTRACE)
    assert main(["import", "ftrace", str(f), "--host", "credit2"]) == 2
