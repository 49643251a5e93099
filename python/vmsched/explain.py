"""Latency explained: a task's wake-ups, each latency split into its causes (docs/explain.md).

`explain(run, task, worst=N | at=TIME)` takes a run directory (written by `vmsched run -o DIR`
or `Result.write`) or a `Result`, makes the run again with the trace on (the simulation is
deterministic: the same scenario text, overrides and seed give the same run, which is checked
by its event count), and lets the core (`vmsched_core::trace::explain`) split each chosen
wake-up's latency, as the metrics measure it, into segments in time order with who ran instead.
Nothing is recorded during the original run, so a run pays nothing for being explainable.
`attribution(run)` sums the same segments over every measured wake-up of every task: where each
task's waiting went, by cause and by who ran instead.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vmsched import _core
from vmsched._lazy import lazy
from vmsched.errors import read_scenario

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy("polars")

#: The file `Result.write` keeps the scenario text in (with the added events), so a run
#: directory can be explained after its scenario file changed.
SCENARIO_FILE = "scenario.toml"

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_time(text: str | int | float) -> int:
    """A simulated time in ns: a number with a unit (`612.5ms`, `80us`, `1.2s`, `5000ns`); a
    bare number is milliseconds."""
    if isinstance(text, (int, float)):
        return int(round(text * 1_000_000))
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s)?\s*", text)
    if not m:
        raise ValueError(f"--at: expected a time such as 612.5ms, 80us or 1.2s, got '{text}'")
    return int(round(float(m.group(1)) * _UNITS[m.group(2) or "ms"]))


@dataclass
class Explanation:
    """What `explain` found. `wakeups`: the chosen wake-ups (longest first for `worst`), each a
    dict with `start_ns`/`end_ns` (the measure's bounds), `latency_ns`, `wake_ns` (runnable),
    `run_ns` (switched in), `measure` (`wait`: wake to switch-in, the entity's wait histogram;
    `timer latency`: timer expiry to first step, the workload's latency histogram), `cause`
    (what woke it), `cpu`, `measured` (counted by the metrics: after the warm-up) and
    `segments`: dicts with `start_ns`, `end_ns`, `cause`, `rule` (the rule in force, in a few
    words), `scheduler`, `cpu`, `who` (what ran instead) and `text` (a sentence)."""

    task: str
    total: int
    measured: int
    warmup_ns: int
    trace: dict
    wakeups: list[dict] = field(default_factory=list)

    @property
    def segments(self) -> pl.DataFrame:
        """One row per segment: `wakeup` (index in `wakeups`), the wake-up's `latency_ns`,
        the segment's `start_ns`, `end_ns`, `dur_ns`, `cause`, `rule`, `scheduler`, `cpu`,
        `who`, `text`."""
        rows = [{"wakeup": i, "latency_ns": w["latency_ns"], **s,
                 "dur_ns": s["end_ns"] - s["start_ns"]}
                for i, w in enumerate(self.wakeups) for s in w["segments"]]
        schema = {"wakeup": pl.Int64, "latency_ns": pl.UInt64, "start_ns": pl.UInt64,
                  "end_ns": pl.UInt64, "cause": pl.Utf8, "rule": pl.Utf8, "scheduler": pl.Utf8,
                  "cpu": pl.Utf8, "who": pl.Utf8, "text": pl.Utf8, "dur_ns": pl.UInt64}
        return pl.DataFrame(rows, schema=schema)

    def text(self, width: int = 120) -> str:
        """The printed timeline (as `vmsched explain` prints it), as plain text."""
        from rich.console import Console

        c = Console(width=width, record=True, file=open(os.devnull, "w"), color_system=None)
        self.print(c)
        return c.export_text()

    def print(self, console=None) -> None:
        """Prints each wake-up as a timeline of its segments (rich)."""
        from rich.console import Console
        from rich.markup import escape
        from rich.padding import Padding
        from rich.text import Text

        console = console or Console()
        tr = self.trace
        console.print(f"[bold]{escape(self.task)}[/bold]: {self.total:,} wake-ups, "
                      f"{self.measured:,} measured (after the {_dur(self.warmup_ns)} warm-up); "
                      f"{len(self.wakeups)} explained", highlight=False)
        if tr.get("truncated_at_ns") is not None:
            console.print(f"[yellow]warning:[/yellow] the trace stopped at "
                          f"{tr['truncated_at_ns'] / 1e6:.3f} ms (--trace-limit "
                          f"{tr['max_records']:,}): later wake-ups are not seen", highlight=False)
        for k, w in enumerate(self.wakeups, 1):
            lat = w["latency_ns"]
            what = ("wake-up to switch-in" if w["measure"] == "wait"
                    else "timer expiry to first step")
            head = ("" if w["measure"] == "wait" else f"#{k} timer expired at "
                    f"{_at(w['start_ns'])}, ") + (
                    f"#{k} woke" if w["measure"] == "wait" else "woke") + (
                    f" at {_at(w['wake_ns'])} ({w['cause']}"
                    + (f", from {w['waker_cpu']}" if w["waker_cpu"] else "")
                    + f"), ran at {_at(w['run_ns'])} on {w['cpu']}: "
                    + f"{_dur(lat)} {w['measure']} ({what})"
                    + ("" if w["measured"] else "; in the warm-up, not measured"))
            console.print(Text(head, style="bold"))
            for s in w["segments"]:
                d = s["end_ns"] - s["start_ns"]
                share = f"{100 * d / lat:5.1f}%" if lat else ""
                line = Text(f"  {'+' + _dur(s['start_ns'] - w['start_ns']):>11} "
                            f"{_dur(d):>10} {share:>6}  ")
                line.append(s["cause"], style="bold")
                line.append(f" [{s['rule']}]")
                console.print(line)
                console.print(Padding(Text(s["text"]), (0, 0, 0, 33)))


def _dur(ns: float) -> str:
    a = abs(ns)
    if a < 1_000:
        return f"{ns:.0f} ns"
    if a < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    if a < 1_000_000_000:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e9:.3f} s"


def _at(ns: int) -> str:
    return f"{ns / 1e6:.6f} ms"


def _from_dir(run_dir: Path) -> tuple[str, str, list[tuple[str, Any]], int]:
    """(scenario path, scenario text, overrides, events) of a run directory."""
    summary = run_dir / "summary.json"
    if not summary.is_file():
        raise FileNotFoundError(f"{run_dir}: no summary.json (a run directory written by "
                                "`vmsched run -o DIR`)")
    s = json.loads(summary.read_text())
    saved = run_dir / SCENARIO_FILE
    if saved.is_file():
        text = read_scenario(saved)
    else:
        from vmsched.api import _with_events

        text = _with_events(read_scenario(s["scenario"]), s.get("added_events"))
    return s["scenario"], text, list(s.get("overrides", {}).items()), s["events"]


def _source(run) -> tuple[str, str, list[tuple[str, Any]], int]:
    """(scenario path, text, overrides, events) of a run directory or a `Result`."""
    from vmsched.api import Result, _with_events

    if isinstance(run, Result):
        text = _with_events(read_scenario(run.scenario), run.added_events)
        return run.scenario, text, list(run.overrides), run.events
    return _from_dir(Path(run))


def _check_events(got: int, want: int) -> None:
    if got != want:
        raise ValueError(f"the run could not be made again: it took {got:,} events, the run "
                         f"says {want:,} (was it written by another version of vmsched?)")


def explain(run, task: str, worst: int | None = None, at: str | int | float | None = None,
            trace_max_records: int | None = None) -> Explanation:
    """Explains the wake-ups of `task` (a task's name; `DOMAIN/NAME` when several domains have
    one) of `run`: a run directory or a `vmsched.Result`. `worst`: the N longest measured
    wake-ups (default 5); `at`: the one whose latency contains that simulated time (a number of
    ms, or text with a unit: `612.5ms`), or the first after it. The run is made again with a
    trace of at most `trace_max_records` records (default 4,000,000): wake-ups after the trace
    ends are not seen (`Explanation.trace["truncated_at_ns"]`)."""
    if worst is not None and at is not None:
        raise ValueError("give worst or at, not both")
    if worst is not None and worst < 1:
        raise ValueError(f"worst must be at least 1, got {worst}")
    path, text, overrides, events = _source(run)
    at_ns = None if at is None else parse_time(at)
    out = _core.explain(str(path), text, task, overrides, worst, at_ns, trace_max_records)
    _check_events(out["events"], events)
    return Explanation(task=out["task"], total=out["total"], measured=out["measured"],
                       warmup_ns=out["warmup_ns"], trace=out["trace"], wakeups=out["wakeups"])


def attribution(run, trace_max_records: int | None = None) -> pl.DataFrame:
    """Where every task's measured wake-up latencies went (issue 13 item 3): one row per task,
    measure, cause, rule and entity that ran instead (`who`, null for none), with the time
    (`ns`), its `share` of the task's summed latency of that measure (`total_ns`, over
    `wakeups` wake-ups) and the number of `segments`; per task and measure the largest first.
    `run`: a run directory or a `Result`; the run is made again with the trace on, as for
    `explain`."""
    path, text, overrides, events = _source(run)
    out = _core.attribution(str(path), text, overrides, trace_max_records)
    _check_events(out["events"], events)
    schema = {"level": pl.Utf8, "task": pl.Utf8, "measure": pl.Utf8, "cause": pl.Utf8,
              "rule": pl.Utf8, "who": pl.Utf8, "ns": pl.UInt64, "segments": pl.UInt64,
              "wakeups": pl.UInt64, "total_ns": pl.UInt64}
    df = pl.DataFrame(out["columns"], schema=schema)
    return df.with_columns(share=pl.when(pl.col("total_ns") > 0)
                           .then(pl.col("ns") / pl.col("total_ns")).otherwise(0.0))


def print_attribution(df: pl.DataFrame, console=None, top: int = 6) -> None:
    """The attribution as a short summary per task and measure: its `top` largest shares."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    for (level, task, measure), g in df.group_by(["level", "task", "measure"],
                                                 maintain_order=True):
        n, total = g["wakeups"][0], g["total_ns"][0]
        if not n:
            continue
        t = Table(title=escape(f"{level}/{task}: {n:,} wake-ups, {measure} {_dur(total)} in all, "
                               f"{_dur(total / n)} each on average"), title_justify="left")
        for c in ("share", "time", "cause", "rule", "instead"):
            t.add_column(c, justify="right" if c in ("share", "time") else "left")
        for r in g.head(top).iter_rows(named=True):
            t.add_row(f"{100 * r['share']:.1f}%", _dur(r["ns"]), r["cause"], r["rule"],
                      escape(r["who"] or ""))
        if g.height > top:
            rest = g["ns"][top:].sum()
            t.add_row(f"{100 * rest / total:.1f}%", _dur(rest), f"({g.height - top} more)", "",
                      "")
        console.print(t)
