"""`perf sched latency` and `perf sched timehist`, printed from a run (issue 13 item 6).

Scheduler people read these two views of Linux's `perf sched` every day; `vmsched perf RUN_DIR`
prints a run in them, one block per level (the host's vCPUs, as `perf sched` on a KVM host
sees them; each guest's tasks, as it sees them inside the guest). The columns and their layout
are those of Debian's linux-perf 6.1; what each figure is, and how it is made from the trace,
is in `vmsched_core::trace::perf_sched` and docs/report.md. The run is made again with the
trace on, as for `vmsched explain`. Times are the simulation's (seconds from the start).

Differences from perf: a task is named by its vmsched name (perf prints `comm:pid`, or
`comm:(N)` when it merges N threads of one name); perf's idle lines and its pid columns have
no counterpart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmsched._lazy import lazy
from vmsched.explain import _check_events, _source

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy("polars")

#: Debian linux-perf 6.1's `perf sched latency` header and rules.
LATENCY_RULE = " " + "-" * 139
LATENCY_HEADER = ("  Task                  |   Runtime ms  | Switches | Avg delay ms    | "
                  "Max delay ms    | Max delay start           | Max delay end          |")
#: Its `perf sched timehist` header (three lines).
TIMEHIST_HEADER = (
    "           time    cpu  task name                       wait time  sch delay   run time\n"
    "                        [tid/pid]                          (msec)     (msec)     (msec)\n"
    "--------------- ------  ------------------------------  ---------  ---------  ---------")

#: The tables' column types, by polars dtype name (resolved when a table is built, so that
#: importing this module does not import polars).
_LAT_SCHEMA = {"level": "Utf8", "task": "Utf8", "runtime_ns": "UInt64",
               "switches": "UInt64", "delays": "UInt64", "delay_sum_ns": "UInt64",
               "delay_max_ns": "UInt64", "max_start_ns": "UInt64", "max_end_ns": "UInt64"}
_TH_SCHEMA = {"level": "Utf8", "time_ns": "UInt64", "cpu": "UInt32", "task": "Utf8",
              "wait_ns": "UInt64", "sch_delay_ns": "UInt64", "run_ns": "UInt64"}


def _schema(names: dict[str, str]) -> dict:
    return {k: getattr(pl, v) for k, v in names.items()}


def perf_sched(run, window: tuple[int, int] | None = None,
               trace_max_records: int | None = None) -> dict[str, pl.DataFrame]:
    """The figures of `perf sched latency` (`latency`: one row per entity of every level, from
    the warm-up's end) and, with `window` (start, end in ns), of `perf sched timehist`
    (`timehist`: one row per run that ends in the window) of `run` (a run directory or a
    `Result`), as DataFrames."""
    from vmsched import _core

    path, text, overrides, events = _source(run)
    out = _core.perf_sched(str(path), text, overrides, window, trace_max_records)
    _check_events(out["events"], events)
    res = {"latency": pl.DataFrame(out["latency"], schema=_schema(_LAT_SCHEMA)).with_columns(
        avg_delay_ns=pl.when(pl.col("delays") > 0)
        .then(pl.col("delay_sum_ns") / pl.col("delays")).otherwise(0.0))}
    if "timehist" in out:
        res["timehist"] = pl.DataFrame(out["timehist"], schema=_schema(_TH_SCHEMA))
    return res


def latency_text(df: pl.DataFrame) -> str:
    """`perf sched latency`'s table of one level's rows (as `perf_sched` gives them): the
    largest average delay first, as perf sorts by default (avg, max, switches, runtime)."""
    df = df.sort(["avg_delay_ns", "delay_max_ns", "switches", "runtime_ns", "task"],
                 descending=[True, True, True, True, False])
    lines = ["", LATENCY_RULE, LATENCY_HEADER, LATENCY_RULE]
    for r in df.iter_rows(named=True):
        lines.append(f"  {r['task']:<22}|{r['runtime_ns'] / 1e6:11.3f} ms |{r['switches']:9d} |"
                     f" avg:{r['avg_delay_ns'] / 1e6:8.3f} ms | max:{r['delay_max_ns'] / 1e6:8.3f}"
                     f" ms | max start: {r['max_start_ns'] / 1e9:12.6f} s | max end: "
                     f"{r['max_end_ns'] / 1e9:12.6f} s")
    lines += [" " + "-" * 113,
              f"  {'TOTAL:':<22}|{df['runtime_ns'].sum() / 1e6:11.3f} ms |"
              f"{df['switches'].sum():9d} |",
              " " + "-" * 51, ""]
    return "\n".join(lines)


def timehist_text(df: pl.DataFrame) -> str:
    """`perf sched timehist`'s lines of one level's runs (as `perf_sched` gives them)."""
    lines = [TIMEHIST_HEADER]
    for r in df.iter_rows(named=True):
        lines.append(f"{r['time_ns'] / 1e9:15.6f} [{r['cpu']:04d}]  {r['task']:<30}  "
                     f"{r['wait_ns'] / 1e6:9.3f}  {r['sch_delay_ns'] / 1e6:9.3f}  "
                     f"{r['run_ns'] / 1e6:9.3f} ")
    return "\n".join(lines) + "\n"


def levels(df: pl.DataFrame) -> list[str]:
    """The levels of a table, in order of first appearance (the host first)."""
    return df["level"].unique(maintain_order=True).to_list()
