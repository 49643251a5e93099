"""Parameter sweeps, on the local cores or on a Ray cluster.

Every point of the design (× seeds) is one run. The design is the grid (the Cartesian product of
listed values), or `random` or `lhs` (Latin hypercube) samples of parameter ranges
(`vmsched.design`). Points run through an executor (`vmsched.executor`): local processes, or Ray
tasks with `executor="ray"`. Each finished run is written atomically to
`OUT/points/<key>.json` as it finishes, so an interrupted sweep resumes without redoing or losing
finished points. The tables (`sweep.parquet`/`.csv`, one row per run and workload; `summary.parquet`/
`.csv`, one row per point and figure with its mean, 95 % confidence interval and coefficient of
variation over the seeds: `summarize`) and the plot (the mean with its CI) are made from all point
files at the end.

A point's key is a hash of the scenario as the core resolves it (every field, after the fixed
overrides and the point's own values are applied), of the vmsched version and of the core's
build (`_core.__build__`: a hash of the Rust sources it was built from), so a point file is
reused only for the very same run by the very same code: changing the scenario file, a fixed
`--set` value or the simulation's code makes new points. (The memory limit is left out: it
decides whether a run starts, not what it computes.) A point file that is unreadable, truncated or holds another
key is run again.

Faults (docs/python.md, Sweeps under faults): a point that fails (its run raises, or its worker
process dies on every try) is reported as that point's error, in a `SweepError` raised after
the other points finished; the directory is locked (`OUT/.lock`, an advisory `flock` held while
the sweep runs), so a second sweep into it refuses with `SweepBusyError`; temporary files a
killed sweep left in `points/` are removed when the next one starts; a write that fails (a full
disk) stops the sweep with the `OSError`, keeping every point written before it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import vmsched
from vmsched import _core
from vmsched import design as design_mod
from vmsched._lazy import lazy
from vmsched.api import (
    _atomic_write,
    _overrides,
    _replace_file,
    _toml_value,
    check_output_dir,
    run,
    scenario_path,
)
from vmsched.design import Param, as_params
from vmsched.errors import SweepBusyError, SweepError, read_scenario
from vmsched.executor import make_executor

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy("polars")

#: Bump when a point file's meaning changes, so old files are not reused.
KEY_FORMAT = 2


def expand(grid: Mapping[str, Iterable[Any]], seeds: int, base_seed: int = 1) -> list[dict]:
    keys = list(grid)
    points = []
    for combo in itertools.product(*(list(grid[k]) for k in keys)):
        for s in range(seeds):
            p = dict(zip(keys, combo))
            p["run.seed"] = base_seed + s
            points.append(p)
    return points


Overrides = list[tuple[str, str]]


def _point_overrides(base: Overrides, point: Mapping[str, Any]) -> Overrides:
    return list(base) + [(k, _toml_value(v)) for k, v in point.items()]


def point_key(scenario: str, text: str, base: Overrides, point: Mapping[str, Any]) -> str:
    """The key of one point: a hash of the fully resolved scenario (file content, fixed
    overrides, the point's values, defaults filled in), of the vmsched version and of the
    core's source hash. Raises
    `ScenarioError` if the point's scenario does not validate."""
    resolved = json.loads(_core.check(scenario, text, _point_overrides(base, point)))
    # The memory limit decides whether a run starts, not what it computes.
    resolved.get("run", {}).pop("memory_limit_mb", None)
    doc = {"format": KEY_FORMAT, "vmsched": vmsched.__version__, "core": _core.__build__,
           "scenario": resolved}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def _load_point(f: Path, key: str) -> dict | None:
    """A finished point's record, or None if the file is missing, unreadable, truncated or
    not this key's."""
    try:
        rec = json.loads(f.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if isinstance(rec, dict) and rec.get("key") == key and isinstance(rec.get("summary"), dict):
        return rec
    return None


def _run_point(scenario: str, base: list[tuple[str, str]], point: dict, key: str) -> dict:
    ov = _point_overrides(base, point)
    r = run(scenario, set=[f"{k}={v}" for k, v in ov])
    return {"key": key, "point": point, "summary": r.summary()}


def rows_of(record: dict) -> list[dict]:
    rows = []
    for w in record["summary"]["workloads"]:
        row = dict(record["point"])
        row.update({"level": w["level"], "workload": w["name"], "figure": w["figure"],
                    "value": w["value"], "unit": w["unit"]})
        for k, v in w["counters"].items():
            row[f"count_{k}"] = v
        rows.append(row)
    return rows


def _lock(outdir: Path):
    """Takes the sweep lock of `outdir` (`.lock`, an exclusive `flock`, released by the system
    when this process ends however it ends) and returns its open file. Held by another
    process: `SweepBusyError`. Where `fcntl` is missing (Windows), no lock is taken."""
    try:
        import fcntl
    except ImportError:
        return None
    # Never through a symbolic link planted at `.lock`.
    try:
        fd = os.open(outdir / ".lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0),
                     0o666)
    except OSError as e:
        raise SweepBusyError(f"output directory '{outdir}': cannot open its lock file .lock "
                             f"({e.strerror or e})") from None
    f = os.fdopen(fd, "r+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        who = f.read().strip() or "another process"
        f.close()
        raise SweepBusyError(f"output directory '{outdir}' is in use by another sweep ({who}); "
                             "wait for it to end, or choose another directory") from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()}\n")
    f.flush()
    return f


def _prepare_outdir(out, overwrite: bool) -> Path:
    """The sweep directory: new, empty, or an earlier sweep's (resumed). Anything else is
    refused unless `overwrite`, which removes it whole first."""
    outdir = check_output_dir(out, overwrite=True)
    if outdir.is_symlink() and not overwrite:
        raise FileExistsError(f"output '{outdir}' is a symbolic link; results are never "
                              "written through one (replace it whole with --force)")
    if overwrite and (outdir.is_symlink() or outdir.exists()):
        if outdir.is_dir() and not outdir.is_symlink() and (outdir / ".lock").exists():
            held = _lock(outdir)  # refuses if another sweep runs there
            if held is not None:
                held.close()
        if outdir.is_symlink():
            outdir.unlink()
        else:
            shutil.rmtree(outdir)
    if outdir.exists() and any(outdir.iterdir()):
        pts = outdir / "points"
        if pts.is_symlink() or not pts.is_dir():
            raise FileExistsError(f"output directory '{outdir}' exists and is not a sweep's "
                                  "(choose another, or replace it whole with --force)")
    (outdir / "points").mkdir(parents=True, exist_ok=True)
    return outdir


def design_points(grid, design: str = "grid", samples: int | None = None,
                  design_seed: int = 0) -> tuple[list[dict], list[str]]:
    """The design's points (without seeds) and the swept keys. `grid`: for the grid design a
    mapping of keys to listed values; for `random` and `lhs`, of keys to ranges ("LO..HI",
    "LO..HI:log", (LO, HI)), lists (categorical) or `vmsched.design.Param`s."""
    if design == "grid":
        if samples is not None:
            raise ValueError("--samples is for --design random or lhs")
        keys = list(grid)
        for k in keys:
            v = grid[k]
            if isinstance(v, (str, Param)):
                raise ValueError(f"--set {k}: a range needs --design random or lhs with "
                                 "--samples; a grid takes listed values")
        return [dict(zip(keys, combo))
                for combo in itertools.product(*(list(grid[k]) for k in keys))], keys
    params = as_params(grid)
    return design_mod.points(params, design, samples, design_seed), [p.name for p in params]


def run_sweep(scenario, grid, seeds=1, jobs=None, out=None, progress=True, base=None,
              overwrite=False, design="grid", samples=None, design_seed=0, executor=None,
              address=None) -> pl.DataFrame:
    path = str(scenario_path(scenario))
    text = read_scenario(path)
    base_ov = _overrides(base, None)
    # Seeds count up from the scenario's own seed (after the fixed overrides).
    seed0 = int(json.loads(_core.check(path, text, base_ov))["run"]["seed"])
    base_points, swept = design_points(grid, design, samples, design_seed)
    points = [{**p, "run.seed": seed0 + s} for p in base_points for s in range(seeds)]
    keys = [point_key(path, text, base_ov, p) for p in points]
    outdir = _prepare_outdir(out, overwrite) if out is not None else None
    lock = _lock(outdir) if outdir is not None else None
    try:
        plot_keys = swept if design == "grid" else swept[:1]
        return _sweep(path, plot_keys, points, keys, base_ov, jobs, outdir, progress,
                      None if executor is None and address is None
                      else lambda n: make_executor(jobs, n, executor, address))
    finally:
        if lock is not None:
            lock.close()


def _sweep(path, grid, points, keys, base_ov, jobs, outdir, progress,
           executor=None) -> pl.DataFrame:
    done: dict[str, dict] = {}
    if outdir is not None:
        # Temporary files of a sweep that was killed while writing (never a finished point).
        for t in (outdir / "points").glob(".*"):
            if t.is_file() or t.is_symlink():
                t.unlink(missing_ok=True)
        for k in keys:
            rec = _load_point(outdir / "points" / f"{k}.json", k)
            if rec is not None:
                done[k] = rec
    todo = [(p, k) for p, k in zip(points, keys) if k not in done]
    # Points that resolve to the same run are run once.
    todo = list({k: (p, k) for p, k in todo}.values())
    jobs = jobs or os.cpu_count() or 1

    def record(rec: dict) -> None:
        done[rec["key"]] = rec
        if outdir is not None:
            _atomic_write(outdir / "points" / f"{rec['key']}.json", json.dumps(rec))

    bar = None
    if progress and todo:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), TimeRemainingColumn())
        bar.start()
        task = bar.add_task(f"sweep {Path(path).stem}", total=len(points), completed=len(points) - len(todo))
    failures: list[tuple[dict, str]] = []
    try:
        # Nothing to run (a finished sweep read back): no executor is started (no Ray).
        with (executor(len(todo)) if executor and todo
              else make_executor(jobs, len(todo))) as ex:
            for (_, _, p, _), f in ex.imap_unordered(_run_point,
                                                      ((path, base_ov, p, k) for p, k in todo)):
                try:
                    rec = f.result()
                except Exception as e:  # this point's error; the others go on
                    failures.append((p, " ".join(str(e).split("\n")) or type(e).__name__))
                else:
                    record(rec)
                if bar:
                    bar.advance(task)
    finally:
        if bar:
            bar.stop()
    rows = [r for p, k in zip(points, keys) if k in done
            for r in rows_of({**done[k], "point": p})]
    df = pl.DataFrame(rows)
    if failures:
        if outdir is not None and rows:
            _write_tables(outdir, df, grid, path)
        raise SweepError(failures, len(points), df if rows else None)
    if outdir is not None:
        _write_tables(outdir, df, grid, path)
    return df


def swept_keys(df: pl.DataFrame) -> list[str]:
    """The swept parameters of a sweep's table: its rows start with the point's values,
    `run.seed` last."""
    cols = df.columns
    return cols[:cols.index("run.seed")] if "run.seed" in cols else []


def summarize(df: pl.DataFrame) -> pl.DataFrame:
    """The sweep's aggregated table: one row per point and workload figure (the swept keys,
    level, workload, figure, unit) with its spread over the seeds: n, mean, the 95 % confidence
    interval's half-width (`ci95`) and bounds, the coefficient of variation (`cv`), std, min and
    max (`vmsched.stats.aggregate`; docs/statistics.md)."""
    from vmsched.stats import aggregate

    if df.height == 0:
        return df
    return aggregate(df, swept_keys(df) + ["level", "workload", "figure", "unit"])


def _write_tables(outdir: Path, df: pl.DataFrame, grid, path: str) -> None:
    """The sweep's tables (Parquet and CSV: every run's rows, and the aggregated summary) and
    plot, each replaced atomically."""
    from vmsched.plot import plot_sweep

    _replace_file(outdir / "sweep.parquet", df.write_parquet)
    _replace_file(outdir / "sweep.csv", df.write_csv)
    summary = summarize(df)
    _replace_file(outdir / "summary.parquet", summary.write_parquet)
    _replace_file(outdir / "summary.csv", summary.write_csv)
    _replace_file(outdir / "sweep.png",
                  lambda f: plot_sweep(df, list(grid), f, title=Path(path).stem))
