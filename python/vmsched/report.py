"""`vmsched report`: one self-contained HTML file a person reads (issue 13 item 4, docs/report.md).

`report(path, out=...)` takes a run directory (`vmsched run -o DIR`, `Result.write`) or a sweep
directory (`vmsched sweep -o DIR`) and writes one HTML file with every script and style inline,
so it opens without a network. For a run: its summary tables (workloads, entities), the
latency histogram and CDF of each measured task, where each task's waiting went (the
attribution of docs/explain.md), the worst wake-ups of one task explained segment by segment,
and a Gantt chart of a window (by default around the worst of them) with the host level (pCPU →
vCPU) and the guest levels (vCPU → task) on one time axis, the explained wake-up's segments
in a row of their own. For a sweep: the table of its figures and each workload's figure
against each swept parameter, mean with the min–max over seeds.

The run is made again with the trace on, as `vmsched explain` makes it (the simulation is
deterministic; the event count is checked), once: the attribution, the latencies, the explained
wake-ups and the Gantt chart all read that one trace (`_core.traced`; until issue 13's last
step each was a run of its own, because the task to explain is chosen from the latencies and
each binding made its own run). A Gantt window with more than `gantt_max_segments` bars is not
drawn: its section says so and names the option (plotly would take minutes on a second of
seed 000). Figures are plotly's, its script embedded once in the page.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vmsched._lazy import lazy
from vmsched.explain import Explanation, _dur, _source, parse_time
from vmsched.plot import axis_label
from vmsched.stats import aggregate

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy("polars")

#: The Gantt chart's default window: the worst wake-up widened on each side by this (ns), or by
#: a fifth of its latency if that is more.
GANTT_PAD_NS = 500_000
#: The Gantt chart's default window when no task has a wake-up to explain: this much (ns) from
#: the warm-up's end.
NO_TASK_WINDOW_NS = 10_000_000
#: The most bars (what a CPU ran, between two switches) a Gantt chart draws by default.
GANTT_MAX_SEGMENTS = 20_000
#: Tasks whose latency figures the report draws, the worst first; the others are listed.
MAX_TASKS = 12
#: The colours of the explained segments' causes (docs/explain.md's table), in its order.
CAUSE_COLORS = {
    "timer slack": "#616161", "vcpu halted": "#8d6e63", "vcpu offline": "#3e2723",
    "host wait": "#d62728", "host tickle": "#ff7f0e", "kernel work": "#9467bd",
    "guest runqueue": "#1f77b4", "resched ipi": "#17becf", "dispatch": "#2ca02c",
}
#: Entities' colours: softer than the causes' (which are saturated), so that the Gantt chart's
#: explained row does not read as one of the entities.
_PALETTE = ["#66c2a5", "#fc8d62", "#8da0cb", "#e78ac3", "#a6d854", "#ffd92f", "#e5c494",
            "#b3b3b3", "#8dd3c7", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69",
            "#fccde5", "#bc80bd", "#ccebc5", "#ffed6f"]
#: Lines' colours (the sweep's figures).
_LINES = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222;
       padding: 0 1em; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
h3 { margin-top: 1.4em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { border: 1px solid #ddd; padding: 2px 6px; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
p.note { color: #555; font-size: 0.9em; } .vm-fig { margin: 0.5em 0 1.2em 0; }
code { background: #f4f4f4; padding: 0 3px; } nav a { margin-right: 1em; }
"""


@dataclass
class _Page:
    """The page being built: its sections (title, HTML) and figures."""

    title: str
    sections: list[tuple[str, str, str]]
    figures: int = 0

    def section(self, anchor: str, title: str, body: str) -> None:
        self.sections.append((anchor, title, body))

    def figure(self, fig) -> str:
        """The figure's div (its script runs when the page loads; plotly.js is in the head)."""
        self.figures += 1
        div = fig.to_html(full_html=False, include_plotlyjs=False,
                          div_id=f"vm-fig-{self.figures}",
                          config={"displaylogo": False, "responsive": True})
        return f'<div class="vm-fig" data-fig="{self.figures}">{div}</div>'

    def html(self) -> str:
        from plotly.offline import get_plotlyjs

        nav = " ".join(f'<a href="#{a}">{html.escape(t)}</a>' for a, t, _ in self.sections)
        body = "\n".join(f'<section id="{a}"><h2>{html.escape(t)}</h2>\n{b}\n</section>'
                         for a, t, b in self.sections)
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
                f"<title>{html.escape(self.title)}</title>\n<style>{_CSS}</style>\n"
                f'<script type="text/javascript">{get_plotlyjs()}</script>\n</head>\n<body>\n'
                f"<h1>{html.escape(self.title)}</h1>\n<nav>{nav}</nav>\n{body}\n</body></html>\n")


def _esc(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def _table(df: pl.DataFrame, num: set[str] | None = None) -> str:
    """An HTML table of `df`; columns in `num` right-aligned."""
    num = num if num is not None else {c for c, t in df.schema.items() if t.is_numeric()}
    head = "".join(f"<th>{_esc(c)}</th>" for c in df.columns)
    rows = []
    for r in df.iter_rows():
        cells = []
        for c, v in zip(df.columns, r):
            if isinstance(v, float):
                v = "" if math.isnan(v) else f"{v:,.3f}".rstrip("0").rstrip(".")
            elif isinstance(v, int) and not isinstance(v, bool):
                v = f"{v:,}"
            cells.append(f'<td class="num">{_esc(v)}</td>' if c in num else f"<td>{_esc(v)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _color(i: int) -> str:
    return _PALETTE[i % len(_PALETTE)]


def parse_window(text: str, option: str = "--window") -> tuple[int, int]:
    """`START..END` (each a time as `--at` takes it: `860ms`, `0.9s`, a bare number of ms) as
    (start, end) in ns; errors name `option`."""
    parts = text.split("..")
    if len(parts) != 2:
        raise ValueError(f"{option}: expected START..END (e.g. 860ms..890ms), got '{text}'")
    try:
        a, b = (parse_time(p) for p in parts)
    except ValueError:
        raise ValueError(f"{option}: expected START..END with times such as 860ms, 0.9s or a "
                         f"number of ms, got '{text}'") from None
    if b <= a:
        raise ValueError(f"{option}: the end ({parts[1]}) must be after the start ({parts[0]})")
    return a, b


def report(path, out=None, task: str | None = None, window: str | tuple[int, int] | None = None,
           worst: int = 3, trace_max_records: int | None = None,
           gantt_max_segments: int = GANTT_MAX_SEGMENTS) -> Path:
    """Writes the HTML report of a run directory or a sweep directory (`path`) to `out`
    (default: `report.html` inside it) and returns its path. Run directories: `task` is the task
    whose `worst` longest wake-ups are explained (default: the one with the longest measured
    latency); `window` is the Gantt chart's (`"860ms..890ms"` or (start, end) in ns; default:
    around the worst of them). The run is made again with a trace of at most
    `trace_max_records` records, as for `vmsched explain`. A Gantt window with more than
    `gantt_max_segments` bars is not drawn (the section says so)."""
    path = Path(path)
    if worst < 1:
        raise ValueError(f"worst must be at least 1, got {worst}")
    if gantt_max_segments < 1:
        raise ValueError(f"gantt_max_segments must be at least 1, got {gantt_max_segments}")
    if (path / "sweep.parquet").is_file():
        page = _sweep_page(path)
    elif (path / "summary.json").is_file():
        win = parse_window(window) if isinstance(window, str) else window
        page = _run_page(path, task, win, worst, trace_max_records, gantt_max_segments)
    else:
        raise FileNotFoundError(f"{path}: neither a run directory (summary.json, written by "
                                "`vmsched run -o DIR`) nor a sweep directory (sweep.parquet)")
    out = Path(out) if out is not None else path / "report.html"
    from vmsched.api import _atomic_write

    _atomic_write(out, page.html())
    return out


# ---- a run ----------------------------------------------------------------------------------

def _run_page(run_dir: Path, task: str | None, window, worst: int, limit,
              max_segments: int = GANTT_MAX_SEGMENTS) -> _Page:
    from vmsched import _core
    from vmsched.explain import _check_events

    s = json.loads((run_dir / "summary.json").read_text())
    name = Path(s["scenario"]).stem
    page = _Page(title=f"vmsched report: {name}", sections=[])
    ov = ", ".join(f"{k}={v}" for k, v in s.get("overrides", {}).items()) or "none"
    page.section("run", "The run", (
        f"<p>Scenario <code>{_esc(s['scenario'])}</code>, overrides: {_esc(ov)}. "
        f"{s['duration_ns'] / 1e9:.3f} s simulated, of which {s['measured_ns'] / 1e9:.3f} s "
        f"measured (after the warm-up); {s['events']:,} events. Made from "
        f"<code>{_esc(run_dir)}</code>.</p>"))
    _workloads_section(page, run_dir)
    _entities_section(page, run_dir)

    # The run again with the trace on, once: attribution and every measured latency, then
    # the explained wake-ups and the Gantt chart from the same trace.
    spath, text, overrides, events = _source(run_dir)
    run = _core.traced(str(spath), text, overrides, limit)
    _check_events(run.events, events)
    att = run.attribution(True)
    lat = att["latencies"]
    lat_rows = [{"level": lv, "task": t, "measure": m, "lat": v}
                for lv, t, m, v in zip(lat["level"], lat["task"], lat["measure"],
                                       lat["latency_ns"])]
    lat_rows.sort(key=lambda r: (-max(r["lat"]), r["level"], r["task"], r["measure"]))
    truncated = att["trace"].get("truncated_at_ns")
    _latency_section(page, lat_rows, truncated)
    _attribution_section(page, att)

    if task is None:
        task = _default_task(lat_rows)
    if task is None:
        page.section("explained", "Worst wake-ups explained",
                     "<p>No task had a measured wake-up: nothing to explain.</p>")
        # The Gantt chart all the same: the window asked for, or the first 10 ms measured.
        warm = s["duration_ns"] - s["measured_ns"]
        win = window or (warm, min(s["duration_ns"], warm + NO_TASK_WINDOW_NS))
        g = run.gantt(win)
        _gantt_section(page, g, Explanation(task="", total=0, measured=0, warmup_ns=warm,
                                            trace={}, wakeups=[]), max_segments)
        return page
    # The Gantt window: the one asked for, or the worst wake-up widened on each side by
    # 0.5 ms or a fifth of its latency, whichever is more.
    out = run.explain(task, worst, None, window, None if window is not None else GANTT_PAD_NS)
    ex = Explanation(task=out["task"], total=out["total"], measured=out["measured"],
                     warmup_ns=out["warmup_ns"], trace=out["trace"], wakeups=out["wakeups"])
    _explained_section(page, ex)
    if "gantt" in out:
        _gantt_section(page, out["gantt"], ex, max_segments)
    return page


def _default_task(lat_rows: list[dict]) -> str | None:
    """The task with the longest measured latency (DOMAIN/NAME if its name is not unique)."""
    if not lat_rows:
        return None
    r = lat_rows[0]
    names = [x["task"] for x in lat_rows if x["level"] != r["level"]]
    return f"{r['level']}/{r['task']}" if r["task"] in names else r["task"]


def _workloads_section(page: _Page, run_dir: Path) -> None:
    wl = pl.read_parquet(run_dir / "workloads.parquet")
    cols = [c for c in ("level", "workload", "kind", "figure", "value", "unit") if c in wl.columns]
    extra = [c for c in wl.columns if c not in cols and wl[c].null_count() < wl.height]
    t = wl.select(cols).rename({"level": "domain"}) if "level" in cols else wl.select(cols)
    body = _table(t)
    if extra:
        body += ("<p class='note'>Counters and histogram figures of each workload (null where a "
                 "workload has none; <code>_us</code>/<code>_ns</code> columns are µs/ns):</p>"
                 + _table(wl.select(["workload", *extra])))
    page.section("workloads", "Workloads", body)


def _entities_section(page: _Page, run_dir: Path) -> None:
    e = pl.read_parquet(run_dir / "entities.parquet")
    ms = lambda c: (pl.col(c) / 1e6)  # noqa: E731
    t = e.select(
        pl.col("level"), pl.col("name").alias("entity"), pl.col("kind"),
        (pl.col("cpu_share") * 100).alias("CPU share (%)"),
        ms("running_ns").alias("running (ms)"), ms("runnable_ns").alias("runnable (ms)"),
        ms("blocked_ns").alias("blocked (ms)"), ms("offline_ns").alias("offline (ms)"),
        pl.col("runs"), pl.col("preemptions"), pl.col("migrations"),
        (pl.col("wait_mean_ns") / 1e3).alias("wait mean (µs)"),
        (pl.col("wait_p99_ns") / 1e3).alias("wait p99 (µs)"),
        (pl.col("wait_max_ns") / 1e3).alias("worst wait (µs)"))
    page.section("entities", "Entities", (
        "<p class='note'>Every entity at every level over the measured time: vCPUs at the host, "
        "tasks in their guests. Wait is runnable to running (xenmon's waited).</p>" + _table(t)))


def _latency_section(page: _Page, rows: list[dict], truncated) -> None:
    import numpy as np
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if not rows:
        page.section("latency", "Latency histograms and CDFs",
                     "<p>No task had a measured wake-up.</p>")
        return
    parts = [("<p class='note'>Every measured wake-up of each task (after the warm-up): "
              "<b>wait</b> is wake-up to switch-in, <b>timer latency</b> timer expiry to first "
              "step (docs/explain.md). Tasks by their worst latency, the worst first.</p>")]
    if truncated is not None:
        parts.append(f"<p class='note'>The trace stopped at {truncated / 1e6:.3f} ms: wake-ups "
                     "after it are not counted here.</p>")
    summary = pl.DataFrame([{
        "domain": r["level"], "task": r["task"], "measure": r["measure"],
        "wake-ups": len(r["lat"]), "mean (µs)": sum(r["lat"]) / len(r["lat"]) / 1e3,
        "p50 (µs)": _quantile(r["lat"], 0.5) / 1e3, "p99 (µs)": _quantile(r["lat"], 0.99) / 1e3,
        "max (µs)": max(r["lat"]) / 1e3} for r in rows])
    parts.append(_table(summary))
    for r in rows[:MAX_TASKS]:
        us = np.asarray(r["lat"], dtype=float) / 1e3
        fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1, subplot_titles=(
            "histogram", "CDF"))
        # Log-spaced bins: a latency's tail is decades above its body.
        pos = us[us > 0]
        lo, hi = (pos.min(), pos.max()) if len(pos) else (1e-3, 1e-3)
        hi = max(hi, lo * 1.01)
        edges = np.geomspace(lo, hi, 41)
        counts, _ = np.histogram(pos, bins=edges)
        fig.add_trace(go.Scatter(x=edges, y=np.append(counts, counts[-1]), mode="lines",
                                 line_shape="hv", fill="tozeroy", line_color="#1f77b4",
                                 showlegend=False,
                                 hovertemplate="from %{x:.3g} µs: %{y} wake-ups<extra></extra>"),
                      1, 1)
        xs = np.sort(us)
        n = len(xs)
        idx = np.unique(np.linspace(0, n - 1, min(n, 1500)).astype(int))
        fig.add_trace(go.Scatter(x=xs[idx], y=(idx + 1) / n, mode="lines", line_shape="hv",
                                 line_color="#d62728", showlegend=False,
                                 hovertemplate="%{x:.1f} µs: %{y:.4f}<extra></extra>"), 1, 2)
        fig.update_xaxes(title_text=f"{r['measure']} (µs, log scale)", type="log", row=1, col=1)
        fig.update_yaxes(title_text="wake-ups per bin (count, log scale)", type="log", row=1,
                         col=1)
        fig.update_xaxes(title_text=f"{r['measure']} (µs, log scale)", type="log", row=1, col=2)
        fig.update_yaxes(title_text="fraction of wake-ups ≤ x", range=[0, 1.02], row=1, col=2)
        fig.update_layout(height=330, margin=dict(l=60, r=20, t=60, b=50),
                          title_text=(f"{r['level']}/{r['task']}: {r['measure']}, "
                                      f"{n:,} wake-ups, worst {_dur(max(r['lat']))}"))
        parts.append(f"<h3>{_esc(r['level'])}/{_esc(r['task'])}: {_esc(r['measure'])}</h3>")
        if len(pos) < n:
            parts.append(f"<p class='note'>{n - len(pos):,} wake-ups of 0 ns are not on the "
                         "histogram's log axis (the CDF counts them).</p>")
        parts.append(page.figure(fig))
    if len(rows) > MAX_TASKS:
        rest = ", ".join(f"{r['level']}/{r['task']} ({r['measure']})" for r in rows[MAX_TASKS:])
        parts.append(f"<p class='note'>Not drawn (shorter worst latency; in the table above): "
                     f"{_esc(rest)}.</p>")
    page.section("latency", "Latency histograms and CDFs", "\n".join(parts))


def _quantile(v: list[int], q: float) -> float:
    s = sorted(v)
    return float(s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))])


def _attribution_section(page: _Page, att: dict) -> None:
    import plotly.graph_objects as go

    df = pl.DataFrame(att["columns"], schema={
        "level": pl.Utf8, "task": pl.Utf8, "measure": pl.Utf8, "cause": pl.Utf8,
        "rule": pl.Utf8, "who": pl.Utf8, "ns": pl.UInt64, "segments": pl.UInt64,
        "wakeups": pl.UInt64, "total_ns": pl.UInt64}).filter(pl.col("wakeups") > 0)
    if df.height == 0:
        page.section("attribution", "Where the waiting went",
                     "<p>No task had a measured wake-up.</p>")
        return
    by_cause = (df.group_by(["level", "task", "measure", "cause"], maintain_order=True)
                .agg(pl.col("ns").sum(), pl.col("total_ns").first()))
    keys = (by_cause.group_by(["level", "task", "measure"], maintain_order=True)
            .agg(pl.col("total_ns").first()).sort("total_ns", descending=True).head(30))
    labels = [f"{r['level']}/{r['task']} ({r['measure']})" for r in keys.iter_rows(named=True)]
    fig = go.Figure()
    for cause, color in CAUSE_COLORS.items():
        xs = []
        for r in keys.iter_rows(named=True):
            m = by_cause.filter((pl.col("level") == r["level"]) & (pl.col("task") == r["task"])
                                & (pl.col("measure") == r["measure"])
                                & (pl.col("cause") == cause))
            xs.append(100 * m["ns"].sum() / r["total_ns"] if r["total_ns"] else 0.0)
        if any(xs):
            fig.add_trace(go.Bar(y=labels, x=xs, name=cause, orientation="h", marker_color=color,
                                 hovertemplate="%{y}: %{x:.1f} % " + cause + "<extra></extra>"))
    fig.update_layout(barmode="stack", height=max(220, 120 + 28 * len(labels)),
                      margin=dict(l=260, r=20, t=40, b=50), legend_title_text="cause",
                      title_text="share of each task's summed latency, by cause")
    fig.update_xaxes(title_text="share of the summed latency (%)", range=[0, 100])
    fig.update_yaxes(autorange="reversed", title_text="task (measure)")
    top = (df.sort(["total_ns", "level", "task", "measure", "ns"],
                   descending=[True, False, False, False, True])
           .group_by(["level", "task", "measure"], maintain_order=True).head(5)
           .select("level", "task", "measure", pl.col("wakeups").alias("wake-ups"),
                   (pl.col("total_ns") / 1e6).alias("summed latency (ms)"),
                   (pl.col("ns") / pl.col("total_ns") * 100).alias("share (%)"),
                   (pl.col("ns") / 1e6).alias("time (ms)"), "cause", "rule",
                   pl.col("who").alias("who ran instead")))
    page.section("attribution", "Where the waiting went", (
        "<p class='note'>Each task's measured latencies summed, split by cause (docs/explain.md): "
        "the parts add up to the whole. The table gives each task's five largest shares by "
        "cause, rule and who ran instead (<code>vmsched explain RUN_DIR --attribution</code>)."
        "</p>" + page.figure(fig) + _table(top)))


def _explained_section(page: _Page, ex: Explanation) -> None:
    parts = [f"<p><b>{_esc(ex.task)}</b>: {ex.total:,} wake-ups, {ex.measured:,} measured "
             f"(after the {_dur(ex.warmup_ns)} warm-up); the {len(ex.wakeups)} longest explained "
             f"(<code>vmsched explain RUN_DIR --task {_esc(ex.task)}</code>).</p>"]
    if not ex.wakeups:
        parts.append("<p>No measured wake-up.</p>")
    for k, w in enumerate(ex.wakeups, 1):
        lat = w["latency_ns"]
        what = "wake-up to switch-in" if w["measure"] == "wait" else "timer expiry to first step"
        parts.append(
            f"<h3>#{k}: {_dur(lat)} {_esc(w['measure'])} ({what})</h3><p>Woke at "
            f"{w['wake_ns'] / 1e6:.6f} ms ({_esc(w['cause'])}"
            + (f", from {_esc(w['waker_cpu'])}" if w["waker_cpu"] else "")
            + f"), ran at {w['run_ns'] / 1e6:.6f} ms on {_esc(w['cpu'])}"
            + ("" if w["measured"] else "; in the warm-up, not measured") + ".</p>")
        segs = pl.DataFrame([{
            "from start": "+" + _dur(s["start_ns"] - w["start_ns"]),
            "duration": _dur(s["end_ns"] - s["start_ns"]),
            "share (%)": 100 * (s["end_ns"] - s["start_ns"]) / lat if lat else 0.0,
            "cause": s["cause"], "rule": s["rule"], "who ran instead": s["who"],
            "what happened": s["text"]} for s in w["segments"]],
            schema={"from start": pl.Utf8, "duration": pl.Utf8, "share (%)": pl.Float64,
                    "cause": pl.Utf8, "rule": pl.Utf8, "who ran instead": pl.Utf8,
                    "what happened": pl.Utf8})
        parts.append(_table(segs, num={"from start", "duration", "share (%)"}))
    page.section("explained", "Worst wake-ups explained", "\n".join(parts))


def _gantt_section(page: _Page, g: dict, ex: Explanation,
                   max_segments: int = GANTT_MAX_SEGMENTS) -> None:
    import plotly.graph_objects as go

    a, b = g["window"]
    n = len(g["columns"]["start_ns"])
    if n > max_segments:
        page.section("gantt", "Timeline (Gantt chart)", (
            f"<p class='note'>Not drawn: the window {a / 1e6:.3f} to {b / 1e6:.3f} ms holds "
            f"{n:,} bars, more than the bound of {max_segments:,} (a chart that large takes "
            "the browser minutes). Choose a narrower window with <code>--window "
            "START..END</code>, or raise the bound with <code>--gantt-max-segments N</code> "
            "(Python: <code>gantt_max_segments</code>).</p>"))
        return
    df = pl.DataFrame(g["columns"], schema={"level": pl.Utf8, "cpu": pl.Utf8, "vcpu": pl.Utf8,
                                            "ent": pl.Utf8, "start_ns": pl.Int64,
                                            "end_ns": pl.Int64})
    # An entity's name, or DOMAIN/NAME where several levels have one of that name.
    levels_of: dict[str, set[str]] = {}
    for lv, e in df.select("level", "ent").unique().iter_rows():
        levels_of.setdefault(e, set()).add(lv)
    df = df.with_columns(pl.struct("level", "ent").map_elements(
        lambda r: f"{r['level']}/{r['ent']}" if len(levels_of[r["ent"]]) > 1 else r["ent"],
        return_dtype=pl.Utf8).alias("ent"))
    host = df.filter(pl.col("vcpu").is_null())
    guest = df.filter(pl.col("vcpu").is_not_null())
    # When each vCPU runs at the host: a guest CPU's task makes progress only then.
    runs: dict[str, list[tuple[int, int]]] = {}
    for r in host.iter_rows(named=True):
        runs.setdefault(r["ent"], []).append((r["start_ns"], r["end_ns"]))
    rows_host = [f"{lv}: {c}" for lv, c in host.select("level", "cpu").unique(
        maintain_order=True).iter_rows()]
    rows_guest = [f"{lv}: {c}" for lv, c in guest.select("level", "cpu").unique(
        maintain_order=True).iter_rows()]
    w0 = next((w for w in ex.wakeups if w["start_ns"] < b and w["end_ns"] > a), None)
    seg_row = f"{ex.task}: wake-up explained" if w0 else None
    order = ([seg_row] if seg_row else []) + rows_host + rows_guest
    # Bars: (row, entity, start, end, running at the host?).
    bars: list[tuple[str, str, int, int, bool]] = []
    for r in host.iter_rows(named=True):
        bars.append((f"{r['level']}: {r['cpu']}", r["ent"], r["start_ns"], r["end_ns"], True))
    for r in guest.iter_rows(named=True):
        row = f"{r['level']}: {r['cpu']}"
        for s, e, on in _split_by(r["start_ns"], r["end_ns"], runs.get(r["vcpu"], [])):
            bars.append((row, r["ent"], s, e, on))
    ents = sorted({x[1] for x in bars})
    colors = {e: _color(i) for i, e in enumerate(ents)}
    fig = go.Figure()
    for ent in ents:
        for on in (True, False):
            sel = [x for x in bars if x[1] == ent and x[4] == on]
            if not sel:
                continue
            fig.add_trace(go.Bar(
                y=[x[0] for x in sel], x=[(x[3] - x[2]) / 1e6 for x in sel],
                base=[x[2] / 1e6 for x in sel], orientation="h",
                name=ent if on else f"{ent} (vCPU not running)", legendgroup=ent,
                marker=dict(color=colors[ent], opacity=1.0 if on else 0.35,
                            pattern_shape="" if on else "/"),
                customdata=[[(x[3] - x[2]) / 1e3] for x in sel],
                hovertemplate=(f"{ent}" + ("" if on else " (its vCPU is not running)")
                               + "<br>%{base:.6f} ms, for %{customdata[0]:.1f} µs"
                               "<extra>%{y}</extra>")))
    if w0:
        for cause in CAUSE_COLORS:
            segs = [s for s in w0["segments"] if s["cause"] == cause]
            if segs:
                fig.add_trace(go.Bar(
                    y=[seg_row] * len(segs), x=[(s["end_ns"] - s["start_ns"]) / 1e6 for s in segs],
                    base=[s["start_ns"] / 1e6 for s in segs], orientation="h",
                    name=f"{cause} (explained)", marker_color=CAUSE_COLORS[cause],
                    customdata=[[s["rule"], s["who"] or "", (s["end_ns"] - s["start_ns"]) / 1e3]
                                for s in segs],
                    hovertemplate=(f"{cause} [%{{customdata[0]}}] %{{customdata[1]}}<br>"
                                   "%{base:.6f} ms, for %{customdata[2]:.1f} µs<extra></extra>")))
        fig.add_vrect(x0=w0["start_ns"] / 1e6, x1=w0["end_ns"] / 1e6, fillcolor="#ffd54f",
                      opacity=0.15, line_width=0, layer="below")
    fig.update_layout(barmode="overlay", height=160 + 34 * len(order),
                      margin=dict(l=220, r=20, t=50, b=50), legend_title_text="runs",
                      title_text=f"what each CPU ran, {a / 1e6:.3f} to {b / 1e6:.3f} ms")
    fig.update_xaxes(title_text="simulated time (ms)", range=[a / 1e6, b / 1e6])
    fig.update_yaxes(title_text="CPU (level: CPU)", categoryorder="array",
                     categoryarray=order[::-1])
    note = ("<p class='note'>Rows: the host's pCPUs (which vCPU each runs), then each guest's "
            "CPUs (the vCPU as a CPU of its guest: which task it runs). A guest's task is "
            "hatched and pale while its vCPU is not running at the host: the guest still counts "
            "it as running, but it makes no progress.")
    if w0:
        note += (f" The top row is the explained wake-up of {_esc(ex.task)} "
                 f"({_dur(w0['latency_ns'])}, shaded), its segments coloured by cause.")
    note += (" Choose another window with <code>--window START..END</code>.</p>")
    page.section("gantt", "Timeline (Gantt chart)", note + page.figure(fig))


def _split_by(s: int, e: int, on: list[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """[s, e) cut into the parts inside the intervals `on` (sorted, disjoint) and outside."""
    out: list[tuple[int, int, bool]] = []
    t = s
    for a, b in on:
        if b <= t:
            continue
        if a >= e:
            break
        if a > t:
            out.append((t, a, False))
        x, y = max(a, t), min(b, e)
        if x < y:
            out.append((x, y, True))
        t = y
    if t < e:
        out.append((t, e, False))
    return out


# ---- a sweep --------------------------------------------------------------------------------

def _sweep_page(sweep_dir: Path) -> _Page:
    df = pl.read_parquet(sweep_dir / "sweep.parquet")
    keys = _sweep_keys(df)
    page = _Page(title=f"vmsched sweep report: {sweep_dir.name}", sections=[])
    seeds = df["run.seed"].n_unique() if "run.seed" in df.columns else 1
    page.section("sweep", "The sweep", (
        f"<p>Sweep directory <code>{_esc(sweep_dir)}</code>: {len(keys)} swept parameter(s) "
        f"({_esc(', '.join(keys))}), {seeds} seed(s) per point, {df.height:,} rows (one per "
        "workload per run).</p>"))
    wl = _measured(df)
    summary = (aggregate(wl, keys + ["level", "workload", "figure", "unit"])
               .with_columns((100 * pl.col("cv")).alias("CV %"))
               .select(*keys, "level", "workload", "figure", "unit", "mean",
                       pl.col("ci95").alias("95 % CI ±"), "CV %", "min", "max",
                       pl.col("n").alias("runs")))
    page.section("table", "Figures per point", (
        "<p class='note'>Each workload's figure per point of the grid: mean over the seeds, "
        "the half-width of its 95 % confidence interval (Student's t), the coefficient of "
        "variation (std / mean), min and max (docs/statistics.md).</p>" + _table(summary)))
    parts = [f"<h3>{_esc(level)}/{_esc(w)} against {_esc(x)}</h3>" + page.figure(fig)
             for level, w, x, fig in sweep_figures(df)]
    page.section("figures", "Figures against each swept parameter",
                 "\n".join(parts) or "<p>No swept parameter.</p>")
    return page


def _sweep_keys(df: pl.DataFrame) -> list[str]:
    """The swept parameters: a sweep's rows start with the point's values, `run.seed` last."""
    cols = df.columns
    return cols[:cols.index("run.seed")] if "run.seed" in cols else []


def _measured(df: pl.DataFrame) -> pl.DataFrame:
    """The rows of workloads with a figure of their own (not plain CPU loops' "-")."""
    wl = df.filter(pl.col("unit") != "-")
    return wl if wl.height else df


def sweep_figures(df: pl.DataFrame) -> list[tuple[str, str, str, Any]]:
    """(domain, workload, swept parameter, plotly figure) for each workload's figure against
    each swept parameter of a sweep's table (`sweep.parquet`): one line per combination of the
    other parameters, the mean over the seeds with error bars from their min to their max, y
    from 0, x on a log scale when its values span 20 times or more."""
    import plotly.graph_objects as go

    keys = _sweep_keys(df)
    seeds = df["run.seed"].n_unique() if "run.seed" in df.columns else 1
    out = []
    for (level, w, fig_name, unit), sub in _measured(df).group_by(
            ["level", "workload", "figure", "unit"], maintain_order=True):
        for x in keys:
            others = [k for k in keys if k != x]
            fig = go.Figure()
            groups = sub.group_by(others, maintain_order=True) if others else [((), sub)]
            for i, (gk, g) in enumerate(groups):
                agg = (g.group_by(x).agg(pl.col("value").mean().alias("mean"),
                                         pl.col("value").min().alias("lo"),
                                         pl.col("value").max().alias("hi"),
                                         pl.len().alias("n")).sort(x))
                gk = gk if isinstance(gk, tuple) else (gk,)
                label = ", ".join(f"{k}={v}" for k, v in zip(others, gk)) or w
                mean = agg["mean"].to_list()
                fig.add_trace(go.Scatter(
                    x=agg[x].to_list(), y=mean, mode="lines+markers", name=label,
                    line_color=_LINES[i % len(_LINES)],
                    customdata=agg.select("lo", "hi", "n").rows(),
                    error_y=dict(type="data", symmetric=False,
                                 array=[h - m for h, m in zip(agg["hi"], mean)],
                                 arrayminus=[m - lo for lo, m in zip(agg["lo"], mean)],
                                 visible=seeds > 1),
                    hovertemplate=(f"{x}=%{{x}}: mean %{{y:.4g}} {unit} (min "
                                   "%{customdata[0]:.4g}, max %{customdata[1]:.4g}, "
                                   "%{customdata[2]} runs)<extra></extra>")))
            xs = sub[x].to_list()
            log = (all(isinstance(v, (int, float)) and v > 0 for v in xs)
                   and max(xs) / max(min(xs), 1e-12) >= 20)
            spread = "mean, bars min–max over the seeds" if seeds > 1 else "one seed per point"
            fig.update_layout(height=380, margin=dict(l=70, r=20, t=50, b=50),
                              title_text=f"{level}/{w}: {fig_name} against {x} ({spread})")
            fig.update_xaxes(title_text=axis_label(x) + (", log scale" if log else ""),
                             type="log" if log else None)
            fig.update_yaxes(title_text=f"{fig_name} ({unit})", rangemode="tozero")
            out.append((level, w, x, fig))
    return out
