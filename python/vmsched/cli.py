"""The `vmsched` command: run, sweep, tune, reproduce, explain, report, perf, check, list, import,
replay-compare."""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

import vmsched
from vmsched import api
from vmsched.api import SCENARIO_DIR, Result, check_output_dir, field_value
from vmsched.errors import SweepError, point_label

console = Console(width=None if sys.stdout.isatty() else 160)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def print_result(r: Result) -> None:
    import polars as pl

    t = Table(title=f"{escape(Path(r.scenario).stem)}: {r.measured_ns / 1e9:.3f} s simulated, "
                    f"{r.events:,} events")
    for c in ("level", "entity", "CPU share", "runnable ms", "wait mean ms", "worst wait ms",
              "runs", "preempted", "migrations"):
        t.add_column(c, justify="right" if c not in ("level", "entity") else "left")
    for e in r.entities.filter(pl.col("kind") == "vcpu").iter_rows(named=True):
        t.add_row(escape(e["level"]), escape(e["name"]), f"{100 * e['cpu_share']:.1f}%",
                  _ms(e["runnable_ns"]),
                  _ms(e["wait_mean_ns"]), _ms(e["wait_max_ns"]), str(e["runs"]),
                  str(e["preemptions"]), str(e["migrations"]))
    console.print(t)
    w = Table(title="workloads")
    for c in ("domain", "workload", "figure", "value", "unit", "counters"):
        w.add_column(c)
    for wl in r.workload_records():
        f = wl["figure"]
        counters = ", ".join(f"{k}={v}" for k, v in wl["counters"])
        for name, h in wl["histograms"]:
            counters += (", " if counters else "") + (
                f"{name}: min {h['min_us']} avg {h['avg_us']:.1f} max {h['max_us']} us, "
                f"p99 {h['p99_ns'] / 1e3:.1f} us")
        w.add_row(*map(escape, (wl["level"], wl["name"], f["name"], f"{f['value']:.1f}",
                                f["unit"], counters)))
    console.print(w)
    for line in r.log:
        console.print(f"[dim]log:[/dim] {escape(line)}")


def _split_grid(items: list[str], value=None) -> tuple[dict, list[str]]:
    """`key=v1,v2` → a grid axis; `key=v` → a fixed override. Commas inside [] are kept.
    `value(key, text)` types an axis's values (default: a guess from the text alone)."""
    value = value or (lambda _key, text: _auto(text))
    grid: dict[str, list] = {}
    fixed: list[str] = []
    for item in items:
        if "=" not in item:
            raise ValueError(f"--set expects key=value, got '{item}'")
        k, v = item.split("=", 1)
        parts, depth, cur = [], 0, ""
        for ch in v:
            depth += ch == "["
            depth -= ch == "]"
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        if len(parts) > 1:
            grid[k.strip()] = [value(k.strip(), p.strip()) for p in parts]
        else:
            fixed.append(item)
    return grid, fixed


def _auto(v: str):
    try:
        return int(v)
    except ValueError:
        pass
    try:
        f = float(v)
        # "5.10" is a version, not 5.1: keep text whose float form reads differently.
        return f if repr(f) == v else v
    except ValueError:
        return v


def _positive_int(v: str) -> int:
    n = int(v)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def cmd_run(a) -> int:
    if a.seeds is not None and a.seeds > 1:
        return _run_seeds(a)
    # Refusals before the progress bar (which would leave a blank line): one line each.
    if a.output:
        check_output_dir(a.output, a.force)
    # The budget (docs/limits.md): refused here if over the memory limit; a large output or a
    # run of very many events gets one line first.
    est = vmsched.estimate(a.scenario, set=a.set, seed=a.seed,
                           trace=bool(a.trace) or bool(a.xentrace),
                           trace_max_records=a.trace_limit, memory_limit_mb=a.memory_limit_mb)
    for note in (est.output_notice() if a.output else None, est.events_notice()):
        if note:
            _error(note, "note")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmsched.BudgetWarning)
        r = _run_with_bar(a)
    print_result(r)
    if a.trace:
        _print_trace(a.trace, r.trace)
    if a.xentrace:
        _print_xentrace(a.xentrace, r.xentrace)
    if a.cyclictest:
        from vmsched.formats import cyclictest_histogram

        for wl in r.workload_records():
            if wl["kind"] == "cyclictest":
                print(cyclictest_histogram(wl))
    if a.xenmon:
        print(r.xenmon_text(), flush=True)
    if a.output:
        console.print(f"results written to {escape(str(a.output))}/ (summary.json, *.parquet)")
    return 0


def _run_seeds(a) -> int:
    """`vmsched run --seeds K` (K > 1): K runs, `--jobs` at a time; the per-seed figures and
    their summary (mean, 95 % CI, CV; docs/statistics.md)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    for flag, on in (("--trace", a.trace), ("--xentrace", a.xentrace),
                     ("--cyclictest", a.cyclictest), ("--xenmon", a.xenmon)):
        if on:
            raise ValueError(f"{flag} shows one run: give it without --seeds (or with "
                             "--seeds 1, or --seed S for the seed to look at)")
    if a.output:
        check_output_dir(a.output, a.force)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmsched.BudgetWarning)
        with Progress("[progress.description]{task.description}", BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                      transient=True) as bar:
            task = bar.add_task(f"simulating {escape(Path(str(a.scenario)).stem)}, "
                                f"{a.seeds} seeds", total=a.seeds)
            res = vmsched.run(a.scenario, set=a.set, seed=a.seed, seeds=a.seeds, jobs=a.jobs,
                              out=a.output, overwrite=a.force,
                              memory_limit_mb=a.memory_limit_mb,
                              progress=lambda f: bar.update(task, completed=f * a.seeds))
    print_seeds(res)
    if a.output:
        console.print(f"results written to {escape(str(a.output))}/ (seed-S/ per seed, "
                      "per_seed.csv/.parquet, summary.csv/.parquet, summary.json)")
    return 0


def print_seeds(res) -> None:
    """The tables of `vmsched run --seeds K`: each workload's figure per seed, then every
    figure's mean, 95 % CI, CV, min and max over the seeds."""
    import polars as pl

    stem = escape(Path(res.scenario).stem)
    per = res.per_seed
    wl = per.filter(pl.col("kind") != "vcpu")
    t = Table(title=f"{stem}: workload figures per seed")
    t.add_column("seed", justify="right")
    cols = list(dict.fromkeys(zip(wl["level"], wl["name"], wl["figure"], wl["unit"])))
    for lv, name, fig, unit in cols:
        t.add_column(escape(f"{lv}/{name} {fig} ({unit})"), justify="right")
    for s in res.seeds:
        row = wl.filter(pl.col("seed") == s)
        vals = {(r["level"], r["name"], r["figure"], r["unit"]): r["value"]
                for r in row.iter_rows(named=True)}
        t.add_row(str(s), *[_num(vals.get(c)) for c in cols])
    console.print(t)
    summ = res.summary
    t = Table(title=f"{stem}: {len(res.seeds)} seeds ({res.seeds[0]}..{res.seeds[-1]}), mean "
                    "with its 95 % confidence interval (Student's t), CV = std / mean")
    for c in ("level", "name", "figure", "unit", "mean", "95 % CI", "CV", "min", "max"):
        t.add_column(c, justify="left" if c in ("level", "name", "figure", "unit") else "right")
    idle = 0
    for r in summ.iter_rows(named=True):
        if r["kind"] == "vcpu" and r["min"] == 0 and r["max"] == 0:
            idle += 1  # an idle vCPU's zeros: in summary.csv, not worth a line here
            continue
        ci = "-" if r["ci95"] is None or r["ci95"] != r["ci95"] else (
            f"{_num(r['ci_lo'])} .. {_num(r['ci_hi'])}")
        cv = "-" if r["cv"] is None or r["cv"] != r["cv"] else f"{100 * r['cv']:.2f} %"
        t.add_row(*map(escape, (r["level"], r["name"], r["figure"], r["unit"],
                                _num(r["mean"]), ci, cv, _num(r["min"]), _num(r["max"]))))
    console.print(t)
    if idle:
        console.print(f"({idle} vCPU figures that are 0 on every seed not shown)",
                      highlight=False)


def _num(v) -> str:
    """A figure for a table: 4 significant digits, from 1,000 on a whole number with
    thousands separators; "-" for none."""
    if v is None or v != v:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def _run_with_bar(a) -> Result:
    from rich.progress import BarColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    with Progress("[progress.description]{task.description}", BarColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=console, transient=True) as bar:
        task = bar.add_task(f"simulating {escape(Path(str(a.scenario)).stem)}", total=1.0)
        return vmsched.run(a.scenario, set=a.set, seed=a.seed, out=a.output, overwrite=a.force,
                           progress=lambda f: bar.update(task, completed=f),
                           trace=a.trace, trace_max_records=a.trace_limit,
                           memory_limit_mb=a.memory_limit_mb, xentrace=a.xentrace,
                           xentrace_cpu_hz=a.xentrace_cpu_hz)


def _print_trace(path: str, info: dict) -> None:
    console.print(f"trace written to {escape(str(path))} ({info['records']:,} records): open it in "
                  "https://ui.perfetto.dev")
    if info["truncated_at_ns"] is not None:
        console.print(f"[yellow]warning:[/yellow] trace truncated at "
                      f"{info['truncated_at_ns'] / 1e6:.3f} ms: {info['dropped']:,} records dropped "
                      f"beyond --trace-limit {info['max_records']:,}", highlight=False)


def _print_xentrace(path: str, info: dict) -> None:
    doms = ", ".join(f"{name}={d}" for name, d in info["domains"])
    console.print(f"xentrace written to {escape(str(path))} ({info['records']:,} records, "
                  f"cycles at {info['cpu_hz'] / 1e9:g} GHz; domain ids: {escape(doms)}): read it "
                  f"with xenalyze --cpu-hz={info['cpu_hz']} or xentrace_format", highlight=False)
    t = info["trace"]
    if t["truncated_at_ns"] is not None:
        console.print(f"[yellow]warning:[/yellow] xentrace truncated at "
                      f"{t['truncated_at_ns'] / 1e6:.3f} ms: {t['dropped']:,} records dropped "
                      f"beyond --trace-limit {t['max_records']:,}", highlight=False)


def cmd_xenmon(a) -> int:
    import polars as pl

    from vmsched.formats import xenmon_screen

    path = Path(a.run_dir) / "xenmon.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no xenmon table (a run directory written by "
                                "`vmsched run -o DIR`, whose run had vCPUs)")
    print(xenmon_screen(pl.read_parquet(path), window=a.window, vcpus=a.vcpus), flush=True)
    return 0


def cmd_explain(a) -> int:
    from vmsched.explain import attribution, explain, print_attribution

    if a.attribution:
        with console.status(f"making the run of {escape(str(a.run_dir))} again with the trace on"):
            df = attribution(a.run_dir, trace_max_records=a.trace_limit)
        if a.task:
            df = df.filter((df["task"] == a.task) | ((df["level"] + "/" + df["task"]) == a.task))
            if df.height == 0:
                raise ValueError(f"--task: no measured wake-up of '{a.task}'")
        print_attribution(df, console)
        if a.output:
            out = Path(a.output)
            if out.exists() and not a.force:
                raise FileExistsError(f"-o {a.output}: exists (--force replaces it)")
            df.write_parquet(out)
            console.print(f"attribution written to {escape(str(out))}")
        return 0
    if not a.task:
        raise ValueError("--task NAME is needed (or --attribution for every task)")
    if a.output:
        raise ValueError("-o is for --attribution")
    with console.status(f"making the run of {escape(str(a.run_dir))} again with the trace on"):
        ex = explain(a.run_dir, a.task, worst=a.worst, at=a.at, trace_max_records=a.trace_limit)
    ex.print(console)
    if not ex.wakeups:
        console.print("no wake-up " + ("at that time" if a.at is not None else "was measured"))
    return 0


def cmd_report(a) -> int:
    from vmsched.report import parse_window, report

    if a.window is not None:
        parse_window(a.window)  # a bad window is refused before the run is made again
    out = Path(a.output) if a.output else Path(a.path) / "report.html"
    if out.is_dir():
        raise IsADirectoryError(f"-o {out}: is a directory")
    if out.exists() and not a.force:
        raise FileExistsError(f"{out}: exists (--force replaces it)")
    with console.status(f"making the report of {escape(str(a.path))}"):
        path = report(a.path, out=out, task=a.task, window=a.window, worst=a.worst,
                      trace_max_records=a.trace_limit,
                      gantt_max_segments=a.gantt_max_segments)
    console.print(f"report written to {escape(str(path))} (one file: open it in a browser, "
                  "no network needed)", highlight=False)
    return 0


def cmd_perf(a) -> int:
    from vmsched.perf import latency_text, levels, perf_sched, timehist_text
    from vmsched.report import parse_window

    window = parse_window(a.timehist, "--timehist") if a.timehist else None
    with console.status(f"making the run of {escape(str(a.run_dir))} again with the trace on"):
        figs = perf_sched(a.run_dir, window=window, trace_max_records=a.trace_limit)
    df = figs["timehist"] if window else figs["latency"]
    names = levels(figs["latency"])
    if a.level is not None:
        if a.level not in names:
            raise ValueError(f"--level: no level '{a.level}' (levels: {', '.join(names)})")
        names = [a.level]
    for lv in names:
        sub = df.filter(df["level"] == lv)
        print(f"# {lv}: perf sched {'timehist' if window else 'latency'}", flush=True)
        print(timehist_text(sub) if window else latency_text(sub), flush=True)
    return 0


def cmd_sweep(a) -> int:
    # Axis values are typed by their fields (as the core reads them, with the fixed overrides).
    if a.memory_limit_mb is not None:
        a.set = [*a.set, f"run.memory_limit_mb={a.memory_limit_mb}"]
    if a.design != "grid":
        return _sweep_sampled(a)
    for item in a.set:
        k, _, v = item.partition("=")
        if _RANGE.match(v):
            raise ValueError(f"--set {k.strip()}: a range ({v.strip()}) needs --design random "
                             "or lhs with --samples; a grid takes listed values")
    _, fixed = _split_grid(a.set)
    grid, fixed = _split_grid(a.set, lambda k, text: field_value(a.scenario, k, text, set=fixed))
    if not grid:
        raise ValueError("vmsched sweep: give at least one --set key=v1,v2,... to sweep")
    df = vmsched.sweep(a.scenario, grid, seeds=a.seeds, jobs=a.jobs, out=a.output, set=fixed,
                       overwrite=a.force, samples=a.samples, **_executor_args(a))
    return _print_sweep(a, df, list(grid))


#: `LO..HI` or `LO..HI:log`: a parameter range (vmsched.design).
_RANGE = re.compile(r"^\s*[-+0-9.eE]+\s*\.\.\s*[-+0-9.eE]+\s*(:log)?\s*$")


def _executor_args(a) -> dict:
    """`--ray [ADDRESS]` as `vmsched.sweep`'s executor arguments."""
    if a.ray is None:
        return {}
    return {"executor": "ray", "address": a.ray or None}


def _sweep_sampled(a) -> int:
    """`vmsched sweep --design random|lhs`: `--set KEY=LO..HI[:log]` (or a list) is sampled,
    `--set KEY=V` is fixed."""
    from vmsched.design import Param, parse_param

    ranges = [s for s in a.set if _RANGE.match(s.split("=", 1)[-1])]
    rest = [s for s in a.set if s not in ranges]
    _, fixed = _split_grid(rest)
    lists, fixed = _split_grid(rest, lambda k, text: field_value(a.scenario, k, text, set=fixed))
    params = [parse_param(s) for s in ranges]
    params += [Param(k, "cat", choices=tuple(v)) for k, v in lists.items()]
    if not params:
        raise ValueError(f"vmsched sweep --design {a.design}: give at least one --set "
                         "KEY=LO..HI (or KEY=A,B,C) to sample")
    df = vmsched.sweep(a.scenario, {p.name: p for p in params}, seeds=a.seeds, jobs=a.jobs,
                       out=a.output, set=fixed, overwrite=a.force, design=a.design,
                       samples=a.samples, design_seed=a.design_seed, **_executor_args(a))
    return _print_sweep(a, df, [p.name for p in params])


def _print_sweep(a, df, keys: list[str]) -> int:
    import polars as pl

    from vmsched.sweep_runner import summarize

    summary = summarize(df.filter(pl.col("unit") != "-"))
    t = Table(title=f"sweep of {escape(Path(str(vmsched.scenario_path(a.scenario))).stem)}: "
                    "mean over the seeds, its 95 % confidence interval (Student's t), CV = "
                    "std / mean")
    cols = keys + ["workload", "unit", "mean", "95 % CI", "CV", "runs"]
    for c in cols:
        t.add_column(c, justify="right" if c in ("mean", "95 % CI", "CV", "runs") else "left")
    for r in summary.iter_rows(named=True):
        ci = "-" if r["ci95"] != r["ci95"] else f"{_num(r['ci_lo'])} .. {_num(r['ci_hi'])}"
        cv = "-" if r["cv"] != r["cv"] else f"{100 * r['cv']:.2f} %"
        t.add_row(*[escape(str(r[k])) for k in keys + ["workload", "unit"]],
                  _num(r["mean"]), ci, cv, str(r["n"]))
    console.print(t)
    console.print(f"tables and plot written to {escape(str(a.output))}/ "
                  "(sweep.csv/.parquet per run, summary.csv/.parquet per point, sweep.png)")
    return 0


def cmd_tune(a) -> int:
    """`vmsched tune`: an Optuna study over --param ranges for --objective(s) under
    --constraint(s) (vmsched.tune, docs/tuning.md)."""
    from vmsched.design import parse_param
    from vmsched.tune import describe, tune

    if a.memory_limit_mb is not None:
        a.set = [*a.set, f"run.memory_limit_mb={a.memory_limit_mb}"]
    params = [parse_param(p, lambda k, text: field_value(a.scenario, k, text, set=a.set))
              for p in a.param]
    out = a.output or str(Path("out") / "tune" / Path(str(a.scenario)).stem)
    a.output = out
    res = tune(a.scenario, params, a.objective, a.constraint, trials=a.trials, seeds=a.seeds,
               jobs=a.jobs, out=out, study=a.study, storage=a.storage, sampler=a.sampler,
               sampler_seed=a.sampler_seed, confirm_seeds=a.confirm_seeds, set=a.set,
               overwrite=a.force, **_executor_args(a))
    for line in describe(res):
        console.print(escape(line), highlight=False)
    files = "trials.csv, trials.parquet, front.csv, front.parquet"
    if len(res.objectives) > 1:
        files += ", front.png"
    console.print(f"tables written to {escape(out)}/ ({files}); the study is in "
                  f"{escape(a.storage or out + '/study.db')}", highlight=False)
    return 0


def _add_tune_parser(sub) -> None:
    p = sub.add_parser("tune", help="search parameters for the best objective (Optuna)",
                       description="Search scenario parameters with Optuna (TPE by default) for "
                       "the best --objective, or for the Pareto front of several under "
                       "--constraint bounds; each trial averages --seeds runs; the study is "
                       "kept in SQLite, so a stopped tune resumes (docs/tuning.md; pip install "
                       "'vmsched[tune]').")
    p.add_argument("scenario")
    p.add_argument("--param", action="append", default=[], required=True,
                   metavar="KEY=LO..HI[:log]|KEY=A,B,C",
                   help="a searched parameter: an integer or float range (log scale with "
                        ":log) or a list of values")
    p.add_argument("--objective", action="append", default=[], required=True,
                   metavar="'max|min NAME'",
                   help="what to maximise or minimise, e.g. 'max context1.score', "
                        "'min ct.p99_us'; several give a Pareto front")
    p.add_argument("--constraint", action="append", default=[], metavar="'NAME <= BOUND'",
                   help="a bound a trial must meet to count, e.g. 'ct.max_us <= 500'")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a fixed override")
    p.add_argument("--trials", type=_positive_int, default=20,
                   help="trials in the study in all (a resumed study runs what is missing; "
                        "default 20)")
    p.add_argument("--seeds", type=_positive_int, default=1, help="runs per trial, averaged")
    p.add_argument("--confirm-seeds", type=_positive_int, metavar="N",
                   help="run the best point (or each front point) again on N seeds")
    p.add_argument("--jobs", type=_positive_int,
                   help="runs at once (default: all cores, or the Ray cluster's CPUs)")
    p.add_argument("--sampler", choices=("tpe", "nsga2", "random"), default="tpe",
                   help="Optuna's sampler (default tpe)")
    p.add_argument("--sampler-seed", type=int, default=0, metavar="S",
                   help="the sampler's seed (default 0; one job gives the same trials)")
    p.add_argument("--study", metavar="NAME", help="the study's name (default: the scenario's)")
    p.add_argument("--storage", metavar="PATH",
                   help="the study's SQLite file or an Optuna storage URL (default: "
                        "OUT/study.db)")
    p.add_argument("-o", "--output", help="output directory (resumable; default "
                   "out/tune/SCENARIO)")
    p.add_argument("--force", action="store_true",
                   help="replace the output directory whole instead of resuming it")
    p.add_argument("--memory-limit-mb", type=_positive_int, metavar="MB",
                   help="the memory each run may plan to use (run.memory_limit_mb)")
    _add_ray_arg(p)
    p.set_defaults(fn=cmd_tune)


def cmd_reproduce(a) -> int:
    from vmsched import reproduce

    if a.list or a.name is None:
        t = Table(title="reproductions")
        for c in ("name", "source document", "title"):
            t.add_column(c)
        for row in reproduce.listing():
            t.add_row(*row)
        console.print(t)
        return 0 if a.list else 2
    if a.unixbench and a.name != "seed000":
        _error(f"--unixbench: only seed000 runs Context1 with UnixBench's driver, not {a.name}")
        return 2
    try:
        extra = {"unixbench": True} if a.unixbench else {}
        return reproduce.main(a.name, quick=a.quick, jobs=a.jobs, out=a.output, console=console,
                              **extra)
    except KeyError as e:
        _error(e.args[0])
        return 2


def cmd_chaos(a) -> int:
    """Runs the rates, prints the table and writes the figure (vmsched.chaos)."""
    from vmsched import chaos

    try:
        rates = [float(x) for x in a.rates.split(",") if x.strip()]
    except ValueError:
        _error(f"--rates: not a list of numbers: {a.rates}")
        return 2
    try:
        df = chaos.sweep(a.scenario, rates, domain=a.domain, duration=a.duration,
                         mean_us=a.mean_us, seeds=a.seeds, set=a.set)
    except ValueError as e:
        _error(str(e))
        return 2
    t = Table("rate", "seed", "stalls", "stalled", "steal", "workload", "histogram",
              "p99 (µs)", "max (µs)")
    for r in df.iter_rows(named=True):
        t.add_row(f"{r['rate']:g}", str(r["seed"]), f"{r['stalls']:,}", f"{r['stalled']:.3f}",
                  f"{r['steal']:.3f}",
                  f"{r['level']}/{r['workload']}", r["histogram"], f"{r['p99_us']:.1f}",
                  f"{r['max_us']:.1f}")
    console.print(t)
    path = chaos.plot(df, a.output, title=Path(str(a.scenario)).stem)
    console.print(f"wrote {escape(str(path))}", highlight=False)
    return 0


def cmd_check(a) -> int:
    """Validates the file, then says what running it would cost (docs/limits.md). A run this
    machine's memory limit would refuse is still a valid file: that is said, not failed."""
    vmsched.check(a.scenario, set=a.set)
    console.print(f"{escape(str(a.scenario))}: ok", highlight=False)
    try:
        est = vmsched.estimate(a.scenario, set=a.set)
    except vmsched.ScenarioError as e:
        console.print(f"note: {escape(str(e))}", highlight=False)
        return 0
    field, _what, _n = est.parts[0] if est.parts else ("", "", 0)
    line = f"estimate: peak memory {api._mb(est.memory_bytes)}"
    if field:
        line += f" (most for {field})"
    line += f", results up to {api._mb(est.output_bytes)}"
    if est.events is not None:
        line += f", up to {est.events[0]:,} events (most for {est.events[1]})"
    console.print(escape(line), highlight=False)
    return 0


# `[host] scheduler = "..."`: the registry's names (crates/vmsched-sched/src/build/host.rs), with the
# release modelled and the page that documents each. tests/test_cli.py checks every name loads.
HOST_SCHEDULERS = (
    ("credit2", "Xen Credit2, 4.20.0-4.21; 4.2.1, historic (docs/credit2.md)"),
    ("credit", "Xen Credit1, 3.3 or 4.20 (docs/credit1.md)"),
    ("rtds", "Xen RTDS, 4.20: budget/period per vCPU, global EDF (docs/rtds.md)"),
    ("null", "Xen null, 4.20: one vCPU per pCPU, a waitqueue (docs/null.md)"),
    ("arinc653", "Xen ARINC 653, 4.20: a fixed table of slots (docs/arinc653.md)"),
    ("sedf", "Xen SEDF, historic (4.2.1; removed in 4.6): slice per period, EDF (docs/sedf.md)"),
    ("bvt", "Xen BVT, historic (3.0; removed in 3.1): borrowed virtual time (docs/bvt.md)"),
    ("pinned", "vCPU k owns pCPU k; for tests, not a real scheduler"),
    ("linux", "a Linux KVM host (hypervisor = \"kvm\"): CFS 5.10 or EEVDF 6.6/6.12/6.18 over "
              "vCPU threads and host processes (docs/kvm.md)"),
)


def cmd_list(a) -> int:
    for p in sorted(SCENARIO_DIR.glob("*.toml")):
        first = next((ln for ln in p.read_text().splitlines() if ln.startswith("description")), "")
        desc = escape(first.split("=", 1)[-1].strip().strip(chr(34)))
        console.print(f"[bold]{escape(p.stem)}[/bold] {desc}")
    console.print(escape("\nhost schedulers ([host] scheduler = ...):"), highlight=False)
    for name, desc in HOST_SCHEDULERS:
        console.print(f"  [bold]{name}[/bold] {escape(desc)}", highlight=False)
    return 0


def cmd_import(a) -> int:
    """Prints (or writes with -o) the TOML of imported files; the notes as comments."""
    from vmsched import importers

    if a.format in ("perf", "ftrace"):
        return _cmd_import_trace(a)
    if (a.sysctl or a.rtapp) and not a.host:
        raise ValueError("vmsched import: --sysctl and --rtapp combine files into a whole "
                         "scenario; give --host too")
    read = {"xl": lambda p: importers.import_xl(p, a.pcpus), "sysctl": importers.import_sysctl,
            "rtapp": importers.import_rtapp}
    parts = [read[a.format](f) for f in a.files]
    parts += [importers.import_sysctl(f) for f in a.sysctl]
    parts += [importers.import_rtapp(f) for f in a.rtapp]
    lines = []
    for p in parts:
        lines.append(f"# {p.format}: {' '.join(p.path.splitlines())}")
        lines += [f"#   note: {' '.join(str(n).splitlines())}" for n in p.notes]
    if a.host:
        body = importers.import_skeleton(parts, host=a.host, pcpus=a.pcpus)
    else:
        body = "\n".join(p.toml for p in parts)
    _write_text(a, "\n".join(lines) + "\n\n" + body)
    return 0


def _write_text(a, text: str) -> None:
    """`text` to `-o FILE` (atomically; --force to replace) or to stdout."""
    if a.output:
        out = Path(a.output)
        if out.is_dir():
            raise ValueError(f"-o {a.output}: is a directory")
        if out.exists() and not a.force:
            raise ValueError(f"-o {a.output}: exists (--force replaces it)")
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text)
        tmp.replace(out)
        print(f"written to {a.output}", flush=True)
    else:
        print(text, end="", flush=True)


def _cmd_import_trace(a) -> int:
    """`vmsched import perf|ftrace TRACE`: a whole replay scenario (docs/replay.md)."""
    from vmsched import importers

    if len(a.files) != 1:
        raise ValueError(f"vmsched import {a.format}: give one trace file")
    if a.host or a.sysctl or a.rtapp:
        raise ValueError(f"vmsched import {a.format}: --host, --sysctl and --rtapp are for "
                         "configuration files; a trace becomes a bare-metal scenario")
    read = importers.import_perf if a.format == "perf" else importers.import_ftrace
    t = read(a.files[0], pids=a.pid, comms=a.comm, scheduler=a.scheduler, kernel=a.kernel,
             cpus=a.pcpus, observed_affinity=not a.any_cpu, pinned_guest=a.pinned_guest)
    lines = [f"# {t.format}: {' '.join(t.path.splitlines())}: {len(t.tasks)} tasks"]
    lines += [f"#   note: {' '.join(str(n).splitlines())}" for n in t.notes]
    _write_text(a, "\n".join(lines) + "\n\n" + t.toml)
    return 0


def cmd_replay_compare(a) -> int:
    from vmsched.replay import compare_text, replay_compare

    df = replay_compare(a.scenario, set=a.set, seed=a.seed)
    print(compare_text(df, a.limit), flush=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="vmsched", description=vmsched.__doc__.splitlines()[0])
    ap.add_argument("--version", action="version", version=f"vmsched {vmsched.__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("run", help="run a scenario and print its summary")
    p.add_argument("scenario", help="a scenario file, or the name of a shipped scenario")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field, e.g. host.ratelimit_us=20000 or domain.1.weight=512")
    p.add_argument("--seed", type=int, help="the run's seed (with --seeds: the first)")
    p.add_argument("--seeds", type=_positive_int, metavar="K",
                   help="run K seeds (the scenario's run.seed, or --seed, counting up) and "
                        "print each figure per seed and its mean, 95 %% confidence interval "
                        "and coefficient of variation (docs/statistics.md)")
    p.add_argument("--jobs", type=_positive_int,
                   help="with --seeds: parallel runs (default: all cores)")
    p.add_argument("-o", "--output", help="directory for summary.json and Parquet tables "
                   "(new or empty; written whole at the end; with --seeds, per-seed and "
                   "summary tables as CSV and Parquet and one directory per seed)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing output directory whole")
    p.add_argument("--cyclictest", action="store_true",
                   help="also print cyclictest's own -q -h output for cyclictest workloads")
    p.add_argument("--xenmon", action="store_true",
                   help="also print xenmon's per-domain lines, over the run and its last "
                        "window (docs/xenmon.md)")
    p.add_argument("--trace", metavar="FILE",
                   help="write the schedule as a Perfetto trace (open it in ui.perfetto.dev)")
    p.add_argument("--trace-limit", type=_positive_int, metavar="N",
                   help="keep at most N trace records (default 4,000,000); later ones are dropped "
                        "and the trace ends where they start")
    p.add_argument("--xentrace", metavar="FILE",
                   help="write the host level as Xen's binary trace (read it with xenalyze or "
                        "xentrace_format; docs/trace.md); bounded by --trace-limit")
    p.add_argument("--xentrace-cpu-hz", type=_positive_int, metavar="HZ",
                   help="the CPU frequency the xentrace cycle counts assume (default "
                        "2400000000, xenalyze's default --cpu-hz)")
    p.add_argument("--memory-limit-mb", type=_positive_int, metavar="MB",
                   help="the memory the run may plan to use (default: run.memory_limit_mb, else "
                        "80%% of the available memory); a run estimated above it is refused")
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("sweep", help="run a grid of parameter values")
    p.add_argument("scenario")
    p.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="a swept parameter (several values) or a fixed override (one value)")
    p.add_argument("--seeds", type=int, default=1, help="seeds per point")
    p.add_argument("--jobs", type=int, help="parallel runs (default: all cores)")
    p.add_argument("-o", "--output", required=True, help="output directory (resumable)")
    p.add_argument("--force", action="store_true",
                   help="replace the output directory whole instead of resuming it")
    p.add_argument("--memory-limit-mb", type=_positive_int, metavar="MB",
                   help="the memory each run may plan to use (run.memory_limit_mb)")
    _add_design_args(p)
    _add_ray_arg(p)
    p.set_defaults(fn=cmd_sweep)

    _add_tune_parser(sub)

    p = sub.add_parser("reproduce", help="reproduce a source document's experiment")
    p.add_argument("name", nargs="?", help="a reproduction's name (see --list)")
    p.add_argument("--list", action="store_true", help="list the reproductions and their sources")
    p.add_argument("--quick", action="store_true", help="short runs (for CI)")
    p.add_argument("--jobs", type=int)
    p.add_argument("-o", "--output", default="out/reproduce", help="output directory")
    p.add_argument("--unixbench", action="store_true",
                   help="seed000: also run Context1 as UnixBench's Run script does (passes of "
                        "fresh processes with idle gaps; a second table)")
    p.set_defaults(fn=cmd_reproduce)

    p = sub.add_parser("xenmon", help="print a run's xenmon figures as xenmon prints them",
                       description="Print the xenmon table of a run directory (vmsched run -o "
                       "DIR) as xenmon prints its per-domain lines: the whole run beside one "
                       "window (docs/xenmon.md).")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--window", type=int, metavar="N",
                   help="the window to show beside the run (default: the last)")
    p.add_argument("--vcpus", action="store_true", help="also a block of lines per vCPU")
    p.set_defaults(fn=cmd_xenmon)

    p = sub.add_parser("explain", help="split a task's wake-up latencies into their causes",
                       description="Make the run of RUN_DIR (vmsched run -o DIR) again with the "
                       "trace on and split the latency of a task's wake-ups, as the metrics "
                       "measure it, into its causes in time order, with who ran instead: timer "
                       "slack, the host holding the vCPU's pCPU (and the rule: slice, "
                       "ratelimit, halt polling), the guest runqueue (and the wake-up check), "
                       "IPIs, kernel work (docs/explain.md).")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--task", metavar="NAME",
                   help="the task (DOMAIN/NAME when several domains have one)")
    p.add_argument("--attribution", action="store_true",
                   help="instead: where every task's (or --task's) measured wake-up latencies "
                        "went, by cause, rule and who ran instead, summed over the run")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="with --attribution: also write the table as Parquet")
    p.add_argument("--force", action="store_true", help="replace an existing -o FILE")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--worst", type=_positive_int, metavar="N",
                   help="the N longest measured wake-ups (default 5)")
    g.add_argument("--at", metavar="TIME",
                   help="the wake-up whose latency contains TIME (612.5ms, 80us, 1.2s; a bare "
                        "number is ms), or the first after it")
    p.add_argument("--trace-limit", type=_positive_int, metavar="N",
                   help="keep at most N trace records (default 4,000,000); wake-ups after the "
                        "trace ends are not seen")
    p.set_defaults(fn=cmd_explain)

    p = sub.add_parser("report", help="write a run's or a sweep's HTML report",
                       description="Write one self-contained HTML file (no network needed to "
                       "view it) for a run directory (vmsched run -o DIR): its tables, latency "
                       "histograms and CDFs, where the waiting went, the worst wake-ups "
                       "explained and a Gantt chart of host and guest levels; or for a sweep "
                       "directory (vmsched sweep -o DIR): each figure against each swept "
                       "parameter with its spread over the seeds (docs/report.md).")
    p.add_argument("path", metavar="RUN_OR_SWEEP_DIR")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the HTML file (default: report.html in the directory)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--task", metavar="NAME",
                   help="the task whose worst wake-ups are explained (default: the one with "
                        "the longest measured latency; DOMAIN/NAME when several have the name)")
    p.add_argument("--worst", type=_positive_int, default=3, metavar="N",
                   help="explain its N longest wake-ups (default 3)")
    p.add_argument("--window", metavar="START..END",
                   help="the Gantt chart's window (860ms..890ms; a bare number is ms); "
                        "default: around the worst wake-up")
    p.add_argument("--trace-limit", type=_positive_int, metavar="N",
                   help="keep at most N trace records when making the run again (default "
                        "4,000,000)")
    p.add_argument("--gantt-max-segments", type=_positive_int, default=20_000, metavar="N",
                   help="draw the Gantt chart only if its window holds at most N bars "
                        "(default 20,000); a larger window gets a note instead")
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("perf", help="print a run as perf sched latency / timehist print it",
                       description="Make the run of RUN_DIR (vmsched run -o DIR) again with the "
                       "trace on and print it as Linux's `perf sched latency` prints a trace "
                       "(per task: runtime, switches, average and worst delay from runnable to "
                       "running, from the warm-up's end), or with --timehist as `perf sched "
                       "timehist` (one line per run that ends in the window), one block per "
                       "level: the host's vCPUs, each guest's tasks (docs/report.md).")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--timehist", metavar="START..END",
                   help="the timehist lines of the runs that end in this window (860ms..870ms)")
    p.add_argument("--level", metavar="NAME", help="only this level (host, or a domain)")
    p.add_argument("--trace-limit", type=_positive_int, metavar="N",
                   help="keep at most N trace records (default 4,000,000)")
    p.set_defaults(fn=cmd_perf)

    p = sub.add_parser("chaos", help="plot a workload's latency against injected steal rate",
                       description="Run a scenario at several injected steal rates "
                       "([domain.chaos], docs/chaos.md) and plot each latency histogram's p99 "
                       "and max against the rate.")
    p.add_argument("scenario")
    p.add_argument("--rates", default="0,0.05,0.1,0.2,0.3", metavar="R1,R2,...",
                   help="steal rates, fractions of time in [0, 1) (default 0,0.05,0.1,0.2,0.3)")
    p.add_argument("--domain", type=int, default=0, metavar="N",
                   help="the domain (its number in the file) to inject into (default 0)")
    p.add_argument("--duration", choices=["exponential", "uniform", "fixed"],
                   default="exponential", help="the stall duration's distribution")
    p.add_argument("--mean-us", type=float, default=1000.0, metavar="US",
                   help="the mean stall (µs; default 1000)")
    p.add_argument("--seeds", type=_positive_int, default=1, help="seeds per rate")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("-o", "--output", default="chaos.png", help="the PNG to write")
    p.set_defaults(fn=cmd_chaos)

    p = sub.add_parser("check", help="validate a scenario file")
    p.add_argument("scenario")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.set_defaults(fn=cmd_check)

    p = sub.add_parser("import", help="read xl.cfg, sysctl or rt-app files into scenario TOML",
                       description="Read real configuration files into scenario TOML: xl.cfg "
                       "domains, Linux sysctl/sched_features dumps (the guest's CFS parameters), "
                       "rt-app JSON (program workloads). Notes (what was left out) are printed "
                       "as comments. docs/import.md has the mapping.")
    p.add_argument("format", choices=("xl", "sysctl", "rtapp", "perf", "ftrace"))
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--host", metavar="SCHEDULER",
                   help="print a whole scenario with this host scheduler (e.g. credit2), checked")
    p.add_argument("--pcpus", type=_positive_int, metavar="N",
                   help="the host's pCPU count (xl's \"all,^N\"; the whole scenario's machine)")
    p.add_argument("--sysctl", action="append", default=[], metavar="FILE",
                   help="with --host: the guest's sysctl dump too")
    p.add_argument("--rtapp", action="append", default=[], metavar="FILE",
                   help="with --host: an rt-app workload of the guest too")
    p.add_argument("-o", "--output", metavar="FILE", help="write the TOML to FILE")
    p.add_argument("--force", action="store_true", help="replace an existing -o FILE")
    g = p.add_argument_group("perf and ftrace traces (a replay scenario, docs/replay.md)")
    g.add_argument("--pid", type=int, action="append", default=[], metavar="PID",
                   help="replay this task (repeatable; default: every task but idle)")
    g.add_argument("--comm", action="append", default=[], metavar="COMM",
                   help="replay the tasks of this comm (repeatable)")
    g.add_argument("--scheduler", default="eevdf", metavar="NAME",
                   help="the kernel's scheduler, [domain.sched] scheduler (default eevdf)")
    g.add_argument("--kernel", metavar="VERSION",
                   help="its kernel version (default 6.18 for eevdf)")
    g.add_argument("--any-cpu", action="store_true",
                   help="let tasks run on any CPU (default: only on those they ran on)")
    g.add_argument("--pinned-guest", action="store_true",
                   help="write the level as a guest of the pinned host (one vCPU per CPU) "
                        "instead of bare metal (a KVM host's Linux running the tasks as "
                        "[[host.process]])")
    p.set_defaults(fn=cmd_import)

    _add_calib_parsers(sub)

    p = sub.add_parser("replay-compare",
                       help="run a replay scenario and compare each task with its recording",
                       description="Run a scenario made by `vmsched import perf|ftrace` (with "
                       "--set: another scheduler or parameters) and print each replayed task's "
                       "recorded and replayed CPU time and wake-ups. docs/replay.md.")
    p.add_argument("scenario")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--seed", type=int)
    p.add_argument("--limit", type=_positive_int, metavar="N",
                   help="only the N tasks with the most recorded CPU time")
    p.set_defaults(fn=cmd_replay_compare)

    p = sub.add_parser("list", help="list the shipped scenarios")
    p.set_defaults(fn=cmd_list)
    return ap


def cmd_calibrate(a) -> int:
    from vmsched.calibrate import calibrate

    if a.output and Path(a.output).exists() and not a.force:
        raise OSError(f"{a.output} exists (--force replaces it)")
    text, _ = calibrate(a.output, quick=a.quick, name=a.name)
    if a.output:
        console.print(f"cost profile written to {escape(str(a.output))}")
    else:
        print(text, end="")
    return 0


def cmd_validate(a) -> int:
    from vmsched.validate import table, validate

    rows, notes = validate(a.profile, quick=a.quick,
                           progress=lambda name: print(f"running {name} ...", file=sys.stderr,
                                                       flush=True))
    print(table(rows, notes))
    return 0


def _add_calib_parsers(sub) -> None:
    """`calibrate` and `validate` (python/vmsched/calibrate.py, validate.py; docs/validation.md)."""
    p = sub.add_parser("calibrate", help="measure this machine's per-operation costs into a "
                                         "cost profile",
                       description="Runs the shipped microbenchmarks (pipe, round trip, context "
                                   "switch, wake-up, timer) and prints or writes a cost profile "
                                   "that a scenario names with costs = \"PATH\".")
    p.add_argument("-o", "--output", metavar="FILE", help="write the profile to FILE")
    p.add_argument("--force", action="store_true", help="replace an existing -o FILE")
    p.add_argument("--name", default="local", help="the profile's name (default: local)")
    p.add_argument("--quick", action="store_true", help="few repetitions (CI)")
    p.set_defaults(fn=cmd_calibrate)

    p = sub.add_parser("validate", help="run workloads on this machine's Linux and in the "
                                        "model, side by side",
                       description="cyclictest (0-4 hogs, SCHED_OTHER and FIFO), the Context1 "
                                   "pair (0-2 hogs) and hackbench, real and modelled (bare "
                                   "metal, the running kernel's scheduler, a cost profile); "
                                   "prints both with their ratio. docs/validation.md.")
    p.add_argument("--profile", metavar="FILE",
                   help="a cost profile (default: measure one first with calibrate)")
    p.add_argument("--quick", action="store_true", help="short runs (CI)")
    p.set_defaults(fn=cmd_validate)


def _add_design_args(p) -> None:
    p.add_argument("--design", choices=("grid", "random", "lhs"), default="grid",
                   help="grid: every combination of the listed values (default); random or "
                        "lhs (Latin hypercube): --samples points drawn from --set "
                        "KEY=LO..HI[:log] ranges and KEY=A,B,C lists")
    p.add_argument("--samples", type=_positive_int, metavar="N",
                   help="points to draw for --design random or lhs")
    p.add_argument("--design-seed", type=int, default=0, metavar="S",
                   help="the seed of the random or lhs draw (default 0; same seed, same points)")


def _add_ray_arg(p) -> None:
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run the points as Ray tasks on the cluster at ADDRESS (auto, "
                        "HOST:PORT, ray://HOST:10001), or on a local Ray instance without one "
                        "(pip install 'vmsched[ray]')")


def _error(msg: object, what: str = "error") -> None:
    """One line on stdout, as plain text: never read as markup, newlines folded."""
    text = " ".join(str(msg).split("\n"))
    print(f"{what}: {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """The command line. Exit status: 0 done; 1 a sweep finished with some points failed
    (each printed on its own line; the others are kept); 2 bad input (the scenario, an
    override, a path, a sweep directory in use); 3 an internal error in the core; 130
    interrupted (Ctrl-C), leaving no partial output (a sweep keeps its finished points)."""
    a = build_parser().parse_args(argv)
    try:
        return a.fn(a)
    except vmsched.ScenarioError as e:
        _error(e)
        return 2
    except SweepError as e:
        # The other points finished and are kept: one line per failed point, then a summary.
        for point, msg in e.failures:
            _error(f"{point_label(point)}: {msg}", "failed point")
        _error(f"{len(e.failures)} of {e.total} points failed; the others are in "
               f"{a.output}/points (run the sweep again to retry the failed ones)")
        return 1
    except ImportError as e:
        # An optional extra that is not installed (Ray, Optuna): what to install.
        _error(e)
        return 2
    except OSError as e:
        # An output path that names a file, an output directory that exists, a --trace file
        # that cannot be written: one line, the path as plain text.
        _error(e)
        return 2
    except ValueError as e:
        # A malformed --set item or override value.
        _error(e)
        return 2
    except vmsched.CoreError as e:
        _error(e, "internal error in the simulation core")
        return 3
    except KeyboardInterrupt:
        if a.cmd == "sweep":
            _error(f"the sweep was stopped; its finished points are kept in {a.output}/points "
                   "(run it again to resume)", "interrupted")
        elif a.cmd == "tune":
            _error(f"the tune was stopped; its finished trials and runs are kept in {a.output} "
                   "(run it again to resume)", "interrupted")
        else:
            _error("the run was stopped; no results were written", "interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
