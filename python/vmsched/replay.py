"""Counterfactual replay, compared (issue 14 item 5; docs/replay.md).

A replay scenario (`vmsched import perf|ftrace TRACE`) holds each recorded task's program: its
CPU bursts (`c<ns>`), timer-like sleeps (`s<ns>`) and dependency sleeps (`w<k>`). What the
trace recorded of a task is read back from that program (the CPU time is the sum of its
bursts, the wake-ups the number of its sleeps); what the replay did is the run's executed CPU
time of the task and its workload counter (one per task, bumped at each wake-up). So the
comparison needs only the scenario, whatever scheduler or parameters the run was given.

    >>> df = vmsched.replay_compare("trace.toml", set=["host.sched.kernel=6.6"])  # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import tomllib

from vmsched._lazy import lazy
from vmsched.errors import read_scenario

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy("polars")

#: The comparison's column types, by polars dtype name (resolved when the table is built, so
#: that importing this module does not import polars).
_SCHEMA = {"workload": "Utf8", "task": "Utf8", "recorded_cpu_ns": "UInt64",
           "replayed_cpu_ns": "UInt64", "recorded_wakes": "UInt64",
           "replayed_wakes": "UInt64"}


def recorded(steps: str) -> tuple[int, int]:
    """(CPU ns, wake-ups) of a replay task's `steps` (workload/replay.rs's tokens)."""
    cpu = wakes = 0
    for tok in steps.split():
        if tok[0] == "c":
            cpu += int(tok[1:])
        elif tok[0] in "sw":
            wakes += 1
    return cpu, wakes


def _replay_workloads(table: dict) -> list[tuple[str, dict]]:
    """The replay workloads of a scenario table, with where they are (`level`)."""
    out = []
    for d in table.get("domain", []):
        out += [(d.get("name", ""), w) for w in d.get("workload", []) if w.get("kind") == "replay"]
    out += [("host", w) for w in table.get("host", {}).get("process", [])
            if w.get("kind") == "replay"]
    return out


def compare(table: dict, result) -> pl.DataFrame:
    """Per replayed task of `table` (a scenario as a dict): recorded against replayed CPU time
    and wake-ups in `result` (a `vmsched.Result` of that scenario), with their ratios."""
    ents = {r["name"]: r for r in result.entities.iter_rows(named=True) if r["kind"] == "task"}
    rows = []
    for _, w in _replay_workloads(table):
        for t in w.get("tasks", []):
            cpu, wakes = recorded(t.get("steps", ""))
            e = ents.get(f"{w['name']}.{t['name']}")
            rows.append({"workload": w["name"], "task": t["name"], "recorded_cpu_ns": cpu,
                         "replayed_cpu_ns": e["executed_ns"] if e else 0,
                         "recorded_wakes": wakes,
                         "replayed_wakes": result.counter(w["name"], t["name"])})
    df = pl.DataFrame(rows, schema={k: getattr(pl, v) for k, v in _SCHEMA.items()})
    return df.with_columns(
        cpu_ratio=pl.when(pl.col("recorded_cpu_ns") > 0)
        .then(pl.col("replayed_cpu_ns") / pl.col("recorded_cpu_ns")).otherwise(None),
        wake_ratio=pl.when(pl.col("recorded_wakes") > 0)
        .then(pl.col("replayed_wakes") / pl.col("recorded_wakes")).otherwise(None))


def replay_compare(scenario: str | os.PathLike, set=None, seed: int | None = None,
                   result=None) -> pl.DataFrame:
    """Runs a replay scenario (with `set` overrides: another scheduler, other parameters) and
    compares each replayed task with its recording (see `compare`). `result`: an existing
    run of it instead of a new one."""
    from vmsched import api

    path = api.scenario_path(scenario)
    table = tomllib.loads(read_scenario(path))
    if result is None:
        result = api.run(path, set=set, seed=seed)
    return compare(table, result)


def compare_text(df: pl.DataFrame, limit: int | None = None) -> str:
    """The comparison as a table, the tasks with the most recorded CPU time first."""
    df = df.sort(["recorded_cpu_ns", "recorded_wakes", "task"], descending=[True, True, False])
    if limit is not None:
        df = df.head(limit)
    w = max([len("task")] + [len(t) for t in df["task"]])
    lines = [f"{'task':<{w}}  {'cpu ms':>10}  {'replayed':>10}  {'ratio':>6}  "
             f"{'wakes':>7}  {'replayed':>8}  {'ratio':>6}"]
    for r in df.iter_rows(named=True):
        def ratio(x):
            return f"{x:6.3f}" if x is not None else f"{'-':>6}"
        lines.append(f"{r['task']:<{w}}  {r['recorded_cpu_ns'] / 1e6:10.3f}  "
                     f"{r['replayed_cpu_ns'] / 1e6:10.3f}  {ratio(r['cpu_ratio'])}  "
                     f"{r['recorded_wakes']:7d}  {r['replayed_wakes']:8d}  "
                     f"{ratio(r['wake_ratio'])}")
    return "\n".join(lines)
