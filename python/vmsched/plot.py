"""Plots people trust (issue 13 item 5): the rules every vmsched figure follows, in one place.

- Every axis is labelled with its unit: `axis_label` reads it off a parameter's name
  (`host.ratelimit_us` → µs), a workload's figure carries its own (`score (lps)`).
- Where bars or figures are compared, y starts at 0 (`finish`), so a 2 % difference does not
  look like a tenfold one. A quantity spanning decades (a worst wait from µs to s) goes on a log
  scale drawn as points, never as bars (a bar's length means nothing on a log axis), and the
  axis says "log scale".
- Wherever several seeds ran, the spread is shown: the mean with bars for its 95 % confidence
  interval (`mean_ci95`, `vmsched.stats`; sweep.png), or from the min to the max (`spread`).

`plot_sweep` draws `vmsched sweep`'s sweep.png by these rules; the reproductions
(`vmsched.reproductions.seed00N`) call `finish` and the helpers for theirs; the HTML report
(`vmsched.report`) follows the same rules with plotly.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from vmsched._lazy import lazy

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy("polars")


_UNIT_SUFFIX = re.compile(r"_(ns|us|ms|s|pct|hz|mb)$")
_UNIT_NAMES = {"ns": "ns", "us": "µs", "ms": "ms", "s": "s", "pct": "%", "hz": "Hz", "mb": "MB"}


def axis_label(key: str) -> str:
    """A parameter's axis title with its unit, from the suffix of its name
    (`host.ratelimit_us` → `host.ratelimit_us (µs)`); a name without one is left as it is."""
    m = _UNIT_SUFFIX.search(key)
    return f"{key} ({_UNIT_NAMES[m.group(1)]})" if m else key


def spread(values) -> tuple[float, float, float]:
    """(mean, min, max) of the values of several seeds."""
    v = [float(x) for x in values]
    return sum(v) / len(v), min(v), max(v)


def mean_ci95(values) -> tuple[float, float]:
    """(mean, half-width of its 95 % confidence interval: Student's t with n − 1 degrees of
    freedom; NaN for a single value)."""
    from vmsched.stats import summarize

    s = summarize(values)
    return s.mean, s.ci95


def finish(ax, xlabel: str, ylabel: str, *, zero: bool = True, log_y: bool = False,
           title: str | None = None, legend: bool = False) -> None:
    """Labels both axes (`xlabel`, `ylabel`: with their units), starts y at 0 unless `zero` is
    False (a quantity with negative values) or `log_y` (then the axis says "log scale"), adds a
    light grid, and the title and legend if asked. Call it after drawing."""
    if log_y:
        ax.set_yscale("log")
        if ylabel and "log scale" not in ylabel:
            ylabel = f"{ylabel}, log scale"
    elif zero:
        lo, hi = ax.get_ylim()
        ax.set_ylim(bottom=0, top=max(hi, 0) * (1.0 if lo <= 0 else 1.05) or 1.0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if title is not None:
        ax.set_title(title, fontsize=9)
    if legend:
        ax.legend(fontsize=7)


def pyplot():
    """matplotlib's pyplot on the file-only backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_sweep(df: pl.DataFrame, keys: list[str], path: str | Path, title: str = "") -> Path:
    """Writes sweep.png (`sweep_figure`) to `path`."""
    plt = pyplot()
    fig = sweep_figure(df, keys, title)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def sweep_figure(df: pl.DataFrame, keys: list[str], title: str = ""):
    """A sweep's figure (matplotlib): each workload's figure against the first swept parameter
    (`keys[0]`), one line per combination of the others; the mean over the seeds, with bars
    for its 95 % confidence interval when several seeds ran (`vmsched.stats.aggregate`); y
    from 0; x on a log scale when its values span 20 times or more."""
    from vmsched.stats import aggregate

    plt = pyplot()
    x = keys[0]
    others = keys[1:]
    seeds = df["run.seed"].n_unique() if "run.seed" in df.columns else 1
    workloads = [w for w in df["workload"].unique(maintain_order=True).to_list()]
    # Only workloads with a meaningful figure (not plain CPU loops).
    workloads = [w for w in workloads if df.filter(pl.col("workload") == w)["unit"][0] != "-"] or workloads
    fig, axes = plt.subplots(1, len(workloads), figsize=(6 * len(workloads), 4), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        sub = df.filter(pl.col("workload") == w)
        groups = sub.group_by(others, maintain_order=True) if others else [((), sub)]
        for key, g in groups:
            agg = aggregate(g, [x]).sort(x)
            label = ", ".join(f"{k}={v}" for k, v in zip(others, key if isinstance(key, tuple) else (key,)))
            xs, mean = agg[x].to_list(), agg["mean"].to_list()
            if seeds > 1:
                # A point with one seed (a failed run) has no interval: no bar.
                err = [0.0 if c != c else c for c in agg["ci95"].to_list()]
                ax.errorbar(xs, mean, yerr=err, marker="o", capsize=3, label=label or w)
            else:
                ax.plot(xs, mean, marker="o", label=label or w)
        log = (all(isinstance(v, (int, float)) and v > 0 for v in sub[x].to_list())
               and max(sub[x]) / max(min(sub[x]), 1) >= 20)
        if log:
            ax.set_xscale("log")
        spread_note = (f"mean of {seeds} seeds, bars 95 % CI (Student's t)" if seeds > 1
                       else "one seed per point")
        finish(ax, axis_label(x) + (", log scale" if log else ""),
               f"{sub['figure'][0]} of {w} ({sub['unit'][0]})", title=spread_note,
               legend=bool(others))
    fig.suptitle(title)
    fig.tight_layout()
    return fig
