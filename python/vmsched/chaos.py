"""Chaos mode's figure (issue 14 item 6; docs/chaos.md): a workload's latency against the
steal rate injected into its guest (`[domain.chaos]`), as `vmsched chaos SCENARIO --rates ...`
draws it.

`sweep` runs the scenario once per rate (and seed) with `domain.N.chaos.rate` set, keeping the
rest of the table (`duration`, `mean_us`) as given, and returns one row per rate, seed and
histogram with its p99 and max; `plot` draws p99 and max against the rate by the rules of
`vmsched.plot` (axes with units, y from 0 unless the values span decades, then a log axis of
points, when no value is below 1 µs; the 95 % confidence interval over the seeds when there
are several). The steal each
run really caused is read back from the guest's vCPUs (their time runnable or offline at the
host) and kept in the table beside the rate asked for, with the stalls injected and their
stalled share (`Result.chaos`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vmsched import api
from vmsched._lazy import lazy
from vmsched.plot import finish, mean_ci95, pyplot

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy("polars")

DISTS = ("exponential", "uniform", "fixed")


def sweep(scenario, rates, domain: int = 0, duration: str = "exponential",
          mean_us: float = 1000.0, seeds: int = 1, set=None) -> pl.DataFrame:
    """Runs `scenario` once per rate in `rates` (fractions in [0, 1)) and seed (`seeds` of
    them, from the scenario's `run.seed` up), with stalls of `duration` ("exponential",
    "uniform" or "fixed") of mean `mean_us` injected into domain number `domain`; `set`: other
    overrides. Returns rate, seed, steal (the share of the guest vCPUs' measured time they were
    runnable or offline at the host), stalls (the stalls injected into the guest's vCPUs over
    the measured window) and stalled (their stalled share of it, per vCPU: the rate drawn),
    level, workload, histogram, p99_us, max_us."""
    if duration not in DISTS:
        raise ValueError(f"duration must be one of {', '.join(DISTS)}, got {duration!r}")
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    rates = [float(r) for r in rates]
    for r in rates:
        if not 0.0 <= r < 1.0:
            raise ValueError(f"a rate is a fraction of time in [0, 1), got {r}")
    if not rates:
        raise ValueError("give at least one rate")
    base = api._overrides(set, None)
    checked = api.check(scenario, set=base)
    domains = checked.get("domain", [])
    if not 0 <= domain < len(domains):
        raise ValueError(f"no domain number {domain} (the scenario has {len(domains)})")
    guest = domains[domain]["name"]
    first = int(checked["run"]["seed"])
    rows = []
    for rate in rates:
        ov = list(base)
        if rate > 0:
            ov += [(f"domain.{domain}.chaos.rate", rate),
                   (f"domain.{domain}.chaos.duration", duration),
                   (f"domain.{domain}.chaos.mean_us", float(mean_us))]
        for k in range(seeds):
            r = api.run(scenario, set=ov, seed=first + k)
            ent = r.entities
            host = ent.filter(pl.col("kind") == "vcpu")
            v = host.filter(pl.col("name").str.starts_with(f"{guest}.v"))
            steal = (float((v["runnable_ns"] + v["offline_ns"]).sum())
                     / max(1, r.measured_ns * max(1, v.height)))
            # What was injected (the results' chaos table; none at rate 0).
            c = r.chaos
            stalls = int(c["stalls"].sum()) if c.height else 0
            stalled = (float(c["stalled_ns"].sum()) / max(1, r.measured_ns * c.height)
                       if c.height else 0.0)
            h = r.histograms
            if h.height == 0:
                raise ValueError(f"{scenario}: no workload with a latency histogram to plot")
            for row in h.iter_rows(named=True):
                rows.append({"rate": rate, "seed": first + k, "steal": steal,
                             "stalls": stalls, "stalled": stalled,
                             "level": row["level"], "workload": row["workload"],
                             "histogram": row["histogram"],
                             "p99_us": row["p99_ns"] / 1e3, "max_us": row["max_ns"] / 1e3})
    return pl.DataFrame(rows)


def plot(df: pl.DataFrame, path, title: str = "") -> Path:
    """Writes the figure: one panel per histogram, its p99 and max (µs) against the injected
    steal rate (%)."""
    plt = pyplot()
    keys = df.select("level", "workload", "histogram").unique(maintain_order=True).rows()
    fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4), squeeze=False)
    seeds = df["seed"].n_unique()
    for ax, (lv, wl, hist) in zip(axes[0], keys):
        sub = df.filter((pl.col("level") == lv) & (pl.col("workload") == wl)
                        & (pl.col("histogram") == hist))
        # Latencies of 0 (an idle guest on a host without costs) cannot go on a log axis, so
        # one is used only when every value is at least 1 µs and they span decades.
        vals = [x for c in ("p99_us", "max_us") for x in sub[c].to_list()]
        log = min(vals) >= 1.0 and max(vals) / min(vals) >= 100
        for col, label in (("p99_us", "p99"), ("max_us", "max")):
            xs, ys, err = [], [], []
            for (rate,), g in sub.group_by(["rate"], maintain_order=True):
                m, ci = mean_ci95(g[col].to_list())
                xs.append(rate * 100)
                ys.append(m)
                err.append(0.0 if ci != ci else ci)
            order = sorted(range(len(xs)), key=xs.__getitem__)
            xs, ys, err = ([v[i] for i in order] for v in (xs, ys, err))
            if seeds > 1:
                ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)
            else:
                ax.plot(xs, ys, marker="o", label=label)
        finish(ax, "injected steal rate (%)", f"{hist} latency (µs)", log_y=log,
               title=f"{lv}/{wl}" + (f", mean of {seeds} seeds, 95 % CI" if seeds > 1 else ""),
               legend=True)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
