"""Parameter sweeps on the local cores.

Every point of the grid (× seeds) is one run. Each finished run is written atomically to
`OUT/points/<id>.json` as it finishes, so an interrupted sweep resumes without redoing or losing
finished points. The table and the plot are made from all point files at the end.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Iterable, Mapping

import polars as pl

from vmsched.api import _atomic_write, _overrides, _toml_value, run, scenario_path


def expand(grid: Mapping[str, Iterable[Any]], seeds: int, base_seed: int = 1) -> list[dict]:
    keys = list(grid)
    points = []
    for combo in itertools.product(*(list(grid[k]) for k in keys)):
        for s in range(seeds):
            p = dict(zip(keys, combo))
            p["run.seed"] = base_seed + s
            points.append(p)
    return points


def point_id(point: Mapping[str, Any]) -> str:
    text = json.dumps(sorted((k, _toml_value(v)) for k, v in point.items()))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _run_point(scenario: str, base: list[tuple[str, str]], point: dict) -> dict:
    ov = list(base) + [(k, _toml_value(v)) for k, v in point.items()]
    r = run(scenario, set=[f"{k}={v}" for k, v in ov])
    return {"point": point, "summary": r.summary()}


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


def run_sweep(scenario, grid, seeds=1, jobs=None, out=None, progress=True, base=None) -> pl.DataFrame:
    path = str(scenario_path(scenario))
    base_ov = _overrides(base, None)
    seed0 = int(dict(base_ov).get("run.seed", 1))
    points = expand(grid, seeds, seed0)
    outdir = Path(out) if out is not None else None
    done: dict[str, dict] = {}
    if outdir is not None:
        (outdir / "points").mkdir(parents=True, exist_ok=True)
        for p in points:
            f = outdir / "points" / f"{point_id(p)}.json"
            if f.exists():
                done[point_id(p)] = json.loads(f.read_text())
    todo = [p for p in points if point_id(p) not in done]
    jobs = jobs or os.cpu_count() or 1

    def record(rec: dict) -> None:
        pid = point_id(rec["point"])
        done[pid] = rec
        if outdir is not None:
            _atomic_write(outdir / "points" / f"{pid}.json", json.dumps(rec))

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
    try:
        if jobs == 1 or len(todo) <= 1:
            for p in todo:
                record(_run_point(path, base_ov, p))
                if bar:
                    bar.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=jobs) as ex:
                futs = [ex.submit(_run_point, path, base_ov, p) for p in todo]
                for f in as_completed(futs):
                    record(f.result())
                    if bar:
                        bar.advance(task)
    finally:
        if bar:
            bar.stop()
    rows = [r for p in points for r in rows_of(done[point_id(p)])]
    df = pl.DataFrame(rows)
    if outdir is not None:
        df.write_parquet(outdir / "sweep.parquet")
        df.write_csv(outdir / "sweep.csv")
        from vmsched.plot import plot_sweep

        plot_sweep(df, list(grid), outdir / "sweep.png", title=Path(path).stem)
    return df
