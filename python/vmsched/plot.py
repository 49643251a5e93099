"""Plots: a workload figure against a swept parameter."""

from __future__ import annotations

from pathlib import Path

import polars as pl


def plot_sweep(df: pl.DataFrame, keys: list[str], path: str | Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = keys[0]
    others = keys[1:]
    workloads = [w for w in df["workload"].unique(maintain_order=True).to_list()]
    # Only workloads with a meaningful figure (not plain CPU loops).
    workloads = [w for w in workloads if df.filter(pl.col("workload") == w)["unit"][0] != "-"] or workloads
    fig, axes = plt.subplots(1, len(workloads), figsize=(6 * len(workloads), 4), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        sub = df.filter(pl.col("workload") == w)
        groups = sub.group_by(others, maintain_order=True) if others else [((), sub)]
        for key, g in groups:
            agg = g.group_by(x).agg(
                pl.col("value").mean().alias("mean"),
                pl.col("value").min().alias("lo"),
                pl.col("value").max().alias("hi"),
            ).sort(x)
            label = ", ".join(f"{k}={v}" for k, v in zip(others, key if isinstance(key, tuple) else (key,)))
            xs = agg[x].to_list()
            ax.plot(xs, agg["mean"].to_list(), marker="o", label=label or w)
            ax.fill_between(xs, agg["lo"].to_list(), agg["hi"].to_list(), alpha=0.2)
        ax.set_xlabel(x)
        ax.set_ylabel(f"{w} ({sub['unit'][0]})")
        if all(isinstance(v, (int, float)) and v > 0 for v in sub[x].to_list()):
            span = max(sub[x]) / max(min(sub[x]), 1)
            if span >= 20:
                ax.set_xscale("log")
        ax.grid(alpha=0.3)
        if others:
            ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
