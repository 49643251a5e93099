"""Reproduction of seed 000 (VA Linux, "Understanding Your Hypervisor: Why Open Source Matters",
2026; source document 000_b3ad2313bd30aebd): UnixBench Context1 score against the
Credit2 ratelimit (1, 5, 20, 128 ms). The document reports 20 ms best, through wakeup preemption
after steal time is charged to the running task. The talk says only "Xen 4.20", and the point
release decides Credit2's slice length (ERRATA X3), so both 4.20.0 and 4.20.2 are run; and it
does not say whether the pair shared a vCPU (ERRATA L1), so three co-location cases are run.
Each point runs several seeds (5 of 10 s; the short form 3 of 0.7 s), and the document's ranking
is checked as three comparisons per case and version, 20 ms against 128, 5 and 1 ms (Welch's
t-test, Holm-corrected over all of them: `vmsched.stats`): the printed verdict says which hold
and which are indistinguishable.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.table import Table

from vmsched.api import _atomic_write, run
from vmsched.executor import make_executor
from vmsched.reproductions import register

RATELIMITS_MS = [1, 5, 20, 128]
VERSIONS = ["4.20.0", "4.20.2"]
CASES = {
    "pinned pair": "seed000_context1_ratelimit",
    "N-copy (4 pairs)": "seed000_ncopy",
    "lone unpinned pair": "seed000_unpinned",
}
GRAN_NS = 3_000_000  # the guest's wakeup granularity (4 vCPUs: factor 3)


def _one(args) -> dict:
    """One point: (case, scenario, version, ratelimit in ms, duration in ms[, seed])."""
    case, scen, version, r_ms, duration_ms, *seed = args
    ov = {"host.version": version, "host.ratelimit_us": r_ms * 1000,
          "run.duration_ms": duration_ms, "run.warmup_ms": min(500, duration_ms // 10)}
    if seed:
        ov["run.seed"] = seed[0]
    res = run(scen, set=ov)
    wls = res.workloads.filter(pl.col("kind") == "context1")
    score = sum(wls["value"].to_list())
    fast = sum(wls["count_fast"].to_list())
    slow = sum(wls["count_slow"].to_list())
    vcpu = res.entities.filter(pl.col("name") == "domU1.v0").row(0, named=True)
    row = {
        "case": case, "version": version, "ratelimit_ms": r_ms, "score_lps": score,
        "fast": fast, "slow": slow, "fast_pct": 100.0 * fast / max(1, fast + slow),
        "vcpu0_share_pct": 100.0 * vcpu["cpu_share"],
        # Loops per second of the pair's vCPU running: the score without the share's window noise.
        "lps_per_vcpu_s": score / max(vcpu["cpu_share"], 1e-9) if case != "N-copy (4 pairs)" else None, "vcpu0_preemptions": vcpu["preemptions"],
        "vcpu0_worst_wait_ms": vcpu["wait_max_ns"] / 1e6,
    }
    gaps = res.series.filter(pl.col("name").str.contains("context1", literal=True))
    if gaps.height:
        first = gaps.filter(pl.col("name") == gaps["name"][0])
        vals = first["value"].to_list()
        row["gap_over_gran_pct"] = 100.0 * sum(abs(v) > GRAN_NS for v in vals) / len(vals)
        row["gap_mean_abs_ms"] = sum(abs(v) for v in vals) / len(vals) / 1e6
        row["_series"] = {"t_ns": first["t_ns"].to_list(), "values": vals}
    return row


#: Seeds per point and simulated time per run (ms): full form and short form (CI's).
SEEDS, QUICK_SEEDS = 5, 3
DURATION_MS, QUICK_DURATION_MS = 10000, 700
#: The comparisons the document's ranking makes: 20 ms (its best) against each other ratelimit.
BEST_DOC = 20
VERSUS = [128, 5, 1]


def points(quick: bool) -> list[tuple]:
    """Every (case, scenario, version, ratelimit, duration, seed) of the reproduction."""
    duration = QUICK_DURATION_MS if quick else DURATION_MS
    seeds = range(1, (QUICK_SEEDS if quick else SEEDS) + 1)
    return [(case, scen, v, r, duration, seed) for case, scen in CASES.items() for v in VERSIONS
            for r in RATELIMITS_MS for seed in seeds]


def comparisons(df: pl.DataFrame, figure: str = "score_lps") -> list:
    """20 ms against 128, 5 and 1 ms per case and Credit2 version (Welch's t-test on `figure`
    over the seeds), Holm-corrected over all of them (`vmsched.stats`). Returns a list of
    (case, version, other ratelimit, `Comparison`)."""
    from vmsched.stats import compare_all

    keys, pairs = [], []
    for case in CASES:
        for v in VERSIONS:
            sub = df.filter((pl.col("case") == case) & (pl.col("version") == v))
            best = sub.filter(pl.col("ratelimit_ms") == BEST_DOC)[figure].to_list()
            for other in VERSUS:
                vals = sub.filter(pl.col("ratelimit_ms") == other)[figure].to_list()
                keys.append((case, v, other))
                pairs.append((f"{BEST_DOC} ms", best, f"{other} ms", vals))
    return [(*k, c) for k, c in zip(keys, compare_all(pairs))]


def holds(cs: list) -> str:
    """Whether the document's "20 ms best" holds for one case and version, from its three
    comparisons: "holds" (20 ms significantly above each), "fails" (significantly below one),
    else "not shown" (indistinguishable from one at least)."""
    if any(c.sign == "<" for c in cs):
        return "fails"
    return "holds" if all(c.sign == ">" for c in cs) else "not shown"


#: The cases the UnixBench driver runs: the one-pair cases, and the N-copy form as `Run` runs
#: it (`./Run -c 4`: 4 copies started together every pass; the shipped
#: seed000_unixbench_ncopy.toml).
UB_CASES = {**{k: v for k, v in CASES.items() if k != "N-copy (4 pairs)"},
            "N-copy (Run -c 4)": "seed000_unixbench_ncopy"}
#: The driver's passes, pass length (s) and idle gap (ms): `Run`'s own, and the short form's.
UB_RUN, UB_QUICK = (10, 10, 3000), (3, 1, 300)
#: Seeds per point with the driver (each run is already `passes` passes).
UB_SEEDS, UB_QUICK_SEEDS = 3, 2


def _one_unixbench(args) -> dict:
    """One point with UnixBench's `Run` driver: (case, scenario, version, ratelimit in ms,
    (passes, pass_s, gap_ms), seed). The run covers every pass, no warm-up."""
    case, scen, version, r_ms, (passes, pass_s, gap_ms), seed = args
    total_ms = passes * (gap_ms + 1000 * pass_s) + 200
    ov = {"host.version": version, "host.ratelimit_us": r_ms * 1000,
          "run.duration_ms": total_ms, "run.warmup_ms": 0, "run.seed": seed,
          "run.sample_interval_us": 0,
          "domain.0.workload.0.driver": "unixbench", "domain.0.workload.0.passes": passes,
          "domain.0.workload.0.pass_s": pass_s, "domain.0.workload.0.gap_ms": gap_ms}
    res = run(scen, set=ov)
    w = res.workloads.filter(pl.col("kind") == "context1").row(0, named=True)
    per_pass = [w[f"count_pass{k}"] for k in range(1, passes + 1)]
    fast, slow = w["count_fast"], w["count_slow"]
    return {"case": case, "version": version, "ratelimit_ms": r_ms, "seed": seed,
            "score_lps": w["value"], "fast_pct": 100.0 * fast / max(1, fast + slow),
            "window_lps": sum(per_pass) / (passes * pass_s),
            "pass_min": min(per_pass), "pass_max": max(per_pass)}


def main_unixbench(quick: bool, jobs: int | None, outdir: Path, console: Console) -> int:
    """Seed 000 with UnixBench's `Run` driver (workload/context1.rs, docs/seed000.md "As
    UnixBench runs it"): the one-pair cases, both versions, the four ratelimits, a few seeds;
    prints `Run`'s score (mean ± 95 % CI over the seeds), the passes' spread, and the same
    comparisons as the main table; writes seed000_unixbench.csv and seed000_unixbench.png (Run's
    score against the ratelimit per case and version, mean and 95 % interval over the seeds)."""
    from vmsched.stats import aggregate, compare_all, family_note

    passes, pass_s, gap_ms = UB_QUICK if quick else UB_RUN
    n_seeds = UB_QUICK_SEEDS if quick else UB_SEEDS
    pts = [(case, scen, v, r, (passes, pass_s, gap_ms), seed)
           for case, scen in UB_CASES.items() for v in VERSIONS for r in RATELIMITS_MS
           for seed in range(1, n_seeds + 1)]
    with make_executor(jobs, len(pts)) as ex:
        rows = [f.result() for _, f in ex.imap_unordered(_one_unixbench, ((p,) for p in pts))]
    keys = ["case", "version", "ratelimit_ms"]
    df = pl.DataFrame(rows).sort([*keys, "seed"])
    df.write_csv(outdir / "seed000_unixbench.csv")
    summary = aggregate(df, keys, "score_lps")
    form = (f"{passes} passes of {pass_s} s after {gap_ms / 1000:g} s idle"
            + (" (short form, not Run's 10 × 10 s)" if quick else " (Run's defaults)")
            + f", {n_seeds} seeds per point")
    cmp_keys, pairs = [], []
    for case in UB_CASES:
        for v in VERSIONS:
            sub = df.filter((pl.col("case") == case) & (pl.col("version") == v))
            best = sub.filter(pl.col("ratelimit_ms") == BEST_DOC)["score_lps"].to_list()
            for other in VERSUS:
                vals = sub.filter(pl.col("ratelimit_ms") == other)["score_lps"].to_list()
                cmp_keys.append((case, v))
                pairs.append((f"{BEST_DOC} ms", best, f"{other} ms", vals))
    cmp = list(zip(cmp_keys, compare_all(pairs)))
    for case in UB_CASES:
        for v in VERSIONS:
            t = Table(title=f"seed000 as UnixBench runs it, {case}, Credit2 {v} ({form}): "
                            "Run's score (worst third of the passes dropped, geometric mean)")
            for c in ("ratelimit", "Run score (lps)", "CV", "index", "fast %",
                      "passes' min..max (count)"):
                t.add_column(c, justify="right")
            sub = summary.filter((pl.col("case") == case) & (pl.col("version") == v)).sort(
                "ratelimit_ms")
            for r in sub.iter_rows(named=True):
                runs = df.filter((pl.col("case") == case) & (pl.col("version") == v)
                                 & (pl.col("ratelimit_ms") == r["ratelimit_ms"]))
                t.add_row(f"{r['ratelimit_ms']} ms", f"{r['mean']:,.0f} ± {r['ci95']:,.0f}",
                          f"{100 * r['cv']:.2f} %", f"{r['mean'] / 4000 * 10:,.1f}",
                          f"{runs['fast_pct'].mean():.1f}",
                          f"{runs['pass_min'].min():,}..{runs['pass_max'].max():,}")
            console.print(t)
            cs = [c for k, c in cmp if k == (case, v)]
            console.print(f"[bold]As UnixBench runs it[/bold] {case}, Credit2 {v}: {BEST_DOC} ms "
                          f"best {holds(cs)}")
            for c in cs:
                console.print(f"  {c.verdict()}", highlight=False)
    console.print(family_note([c for _, c in cmp]) + f" n = {n_seeds} seeds per point. "
                  "Index = score / 4000 × 10 (UnixBench pgms/index.base).", highlight=False)
    _score_panels(df, list(UB_CASES), outdir / "seed000_unixbench.png",
                  "Run's Context1 score (lps)", f"as UnixBench runs it, {passes} × {pass_s} s")
    return 0


def main(quick: bool = False, jobs: int | None = None, out: str | Path = "out/reproduce/seed000",
         console: Console | None = None, unixbench: bool = False) -> int:
    """Runs every point (3 cases × 2 versions × 4 ratelimits × seeds), prints per case and
    version the mean score with its 95 % interval and CV, which of the document's comparisons
    (20 ms against 128, 5 and 1 ms) hold (Welch, Holm-corrected), and writes seed000.csv/json
    (per run), seed000_summary.csv (per point) and plots into `out`. `unixbench`: then also the
    second table, Context1 run as UnixBench's `Run` script runs it (`main_unixbench`)."""
    from vmsched.stats import aggregate, family_note

    console = console or Console()
    pts = points(quick)
    n_seeds = QUICK_SEEDS if quick else SEEDS
    duration = pts[0][4]
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    from rich.progress import Progress

    done = {}
    with Progress(console=console) as prog:
        task = prog.add_task(f"seed000: {len(pts)} runs ({n_seeds} seeds per point) of "
                             f"{duration / 1000:g} s simulated", total=len(pts))
        with make_executor(jobs, len(pts)) as ex:
            for (p,), f in ex.imap_unordered(_one, ((p,) for p in pts)):
                done[p] = {**f.result(), "seed": p[5]}
                prog.advance(task)
    rows = [done[p] for p in pts]
    # The gap series of seed 1 only (the plot's).
    series = {(r["case"], r["version"], r["ratelimit_ms"]): r.get("_series") for r in rows
              if r["seed"] == 1}
    for r in rows:
        r.pop("_series", None)
    df = pl.DataFrame(rows)
    df.write_csv(outdir / "seed000.csv")
    _atomic_write(outdir / "seed000.json", json.dumps(rows, indent=1))
    keys = ["case", "version", "ratelimit_ms"]
    score = aggregate(df, keys, "score_lps")
    summary = score.join(aggregate(df, keys, "fast_pct").select(
        *keys, pl.col("mean").alias("fast_pct_mean")), on=keys, how="left")
    summary.write_csv(outdir / "seed000_summary.csv")
    cmp = comparisons(df)

    form = (f"short form: {n_seeds} seeds of {duration / 1000:g} s per point" if quick
            else f"{n_seeds} seeds of {duration / 1000:g} s per point")
    verdicts = []
    for case in CASES:
        for v in VERSIONS:
            sub = summary.filter((pl.col("case") == case) & (pl.col("version") == v)).sort(
                "ratelimit_ms")
            top = sub["mean"].max()
            t = Table(title=f"seed000, {case}, Credit2 {v} ({form}): Context1 score, mean "
                            "± 95 % CI (Student's t), CV = std / mean")
            for c in ("ratelimit", "score (lps)", "CV", "vs best mean", "fast %",
                      "lps per vCPU0 s", "vCPU0 share", "vCPU0 preempted", "vCPU0 worst wait"):
                t.add_column(c, justify="right")
            for r in sub.iter_rows(named=True):
                runs = df.filter((pl.col("case") == case) & (pl.col("version") == v)
                                 & (pl.col("ratelimit_ms") == r["ratelimit_ms"]))
                per = runs["lps_per_vcpu_s"].to_list()
                t.add_row(f"{r['ratelimit_ms']} ms", f"{r['mean']:,.0f} ± {r['ci95']:,.0f}",
                          f"{100 * r['cv']:.2f} %", f"{100 * r['mean'] / top:.1f}%",
                          f"{r['fast_pct_mean']:.1f}",
                          "-" if per[0] is None else f"{sum(per) / len(per):,.0f}",
                          f"{runs['vcpu0_share_pct'].mean():.1f}%",
                          f"{runs['vcpu0_preemptions'].mean():.1f}",
                          f"{runs['vcpu0_worst_wait_ms'].max():.2f} ms")
            console.print(t)
            cs = [c for cc, vv, _, c in cmp if cc == case and vv == v]
            ranked = sub.sort(["mean", "ratelimit_ms"], descending=[True, False])
            order = " > ".join(f"{r} ms" for r in ranked["ratelimit_ms"])
            verdicts.append((case, v, order, cs))
    console.print(f"\n[bold]Published[/bold] (seed 000): among 1/5/20/128 ms, {BEST_DOC} ms gives "
                  "the best Context1 score.")
    for case, v, order, cs in verdicts:
        h = holds(cs)
        mark = {"holds": "[green]holds[/green]", "fails": "[red]fails[/red]",
                "not shown": "[yellow]not shown[/yellow]"}[h]
        console.print(f"[bold]Simulated[/bold] {case}, Credit2 {v}: {BEST_DOC} ms best {mark} "
                      f"(means: {order})")
        for c in cs:
            console.print(f"  {c.verdict()}", highlight=False)
    console.print(family_note([c for *_, c in cmp]) + f" n = {n_seeds} seeds per point.",
                  highlight=False)
    console.print("Why: docs/seed000.md. Tables: " + str(outdir))
    _plots(df, series, outdir)
    if unixbench:
        return main_unixbench(quick, jobs, outdir, console)
    return 0


def _plots(df: pl.DataFrame, series: dict, outdir: Path) -> None:
    """seed000_score.png: the Context1 score against the ratelimit per case and version, the
    mean over the seeds with its 95 % confidence interval, y from 0; seed000_gap.png: the
    pinned pair's vruntime gap over time, seed 1 (vmsched.plot's rules)."""
    from vmsched.plot import finish, pyplot

    plt = pyplot()
    _score_panels(df, list(CASES), outdir / "seed000_score.png", "Context1 score (lps)")

    keys = [k for k, s in series.items() if s and k[0] == "pinned pair"]
    if keys:
        fig, axes = plt.subplots(len(VERSIONS), 1, figsize=(10, 3.2 * len(VERSIONS)), squeeze=False)
        for ax, v in zip(axes[:, 0], VERSIONS):
            for r in RATELIMITS_MS:
                s = series.get(("pinned pair", v, r))
                if not s:
                    continue
                t = [x / 1e9 for x in s["t_ns"]]
                ax.plot(t, [x / 1e6 for x in s["values"]], lw=0.7, label=f"{r} ms")
            ax.axhline(3, color="k", ls=":", lw=0.8)
            ax.axhline(-3, color="k", ls=":", lw=0.8)
            ax.set_xlim(0, min(2.0, max(t)))
            finish(ax, "simulated time (s)", "vruntime(parent) − vruntime(child) (ms)",
                   zero=False, title=f"pinned pair, Credit2 {v}: the vruntime gap (±3 ms = "
                   "wakeup granularity), per ratelimit")
            ax.legend(fontsize=8, ncol=4)
        fig.tight_layout()
        fig.savefig(outdir / "seed000_gap.png", dpi=110)
        plt.close(fig)


def _score_panels(df: pl.DataFrame, cases: list[str], path: Path, ylabel: str,
                  what: str = "") -> None:
    """One panel per case: `score_lps` against the ratelimit per Credit2 version, the mean over
    the seeds with its 95 % confidence interval, y from 0 (vmsched.plot's rules)."""
    from vmsched.plot import finish, pyplot
    from vmsched.stats import aggregate

    plt = pyplot()
    n = df["seed"].n_unique()
    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 3.8), squeeze=False)
    for ax, case in zip(axes[0], cases):
        for v in VERSIONS:
            sub = df.filter((pl.col("case") == case) & (pl.col("version") == v))
            agg = aggregate(sub, ["ratelimit_ms"], "score_lps").sort("ratelimit_ms")
            err = [0.0 if c != c else c for c in agg["ci95"].to_list()]
            ax.errorbar(agg["ratelimit_ms"].to_list(), agg["mean"].to_list(), yerr=err,
                        marker="o", capsize=3, label=f"Credit2 {v}")
        ax.set_xscale("log")
        ax.set_xticks(RATELIMITS_MS, [str(r) for r in RATELIMITS_MS])
        head = f"{case}\n{what}, " if what else f"{case} ("
        tail = ")" if not what else ""
        finish(ax, "Credit2 ratelimit (ms, log scale)", ylabel,
               title=f"{head}mean of {n} seeds, bars 95 % CI{tail}", legend=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


REPRODUCTION = register(
    name="seed000",
    title="VA Linux 2026, Understanding Your Hypervisor: Context1 against the Credit2 ratelimit",
    source="000_b3ad2313bd30aebd",
    run=main,
)
