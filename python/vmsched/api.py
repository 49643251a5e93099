"""The Python API: `run`, `sweep`, `check`, returning polars DataFrames."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import polars as pl

from vmsched import _core

SCENARIO_DIR = Path(__file__).parent / "scenarios"


def scenario_path(name: str | os.PathLike) -> Path:
    """A scenario file path, or the name of a shipped scenario (with or without `.toml`)."""
    p = Path(name)
    if p.exists():
        return p
    for cand in (SCENARIO_DIR / p.name, SCENARIO_DIR / f"{p.name}.toml"):
        if cand.exists():
            return cand
    shipped = ", ".join(sorted(q.stem for q in SCENARIO_DIR.glob("*.toml")))
    raise FileNotFoundError(f"no scenario file '{name}' (shipped scenarios: {shipped})")


def _overrides(set: Mapping[str, Any] | Iterable[str] | None, seed: int | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if set is None:
        pass
    elif isinstance(set, Mapping):
        out = [(str(k), _toml_value(v)) for k, v in set.items()]
    else:
        for item in set:
            if "=" not in item:
                raise ValueError(f"--set expects key=value, got '{item}'")
            k, v = item.split("=", 1)
            out.append((k.strip(), v.strip()))
    if seed is not None:
        out.append(("run.seed", str(int(seed))))
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot express {v!r} as a TOML value")


def check(scenario: str | os.PathLike, set=None, seed: int | None = None) -> dict:
    """Validates a scenario (raises `ScenarioError`) and returns it as a dict."""
    p = scenario_path(scenario)
    return json.loads(_core.check(str(p), p.read_text(), _overrides(set, seed)))


@dataclass
class Result:
    """The results of one run."""

    scenario: str
    overrides: list[tuple[str, str]]
    raw: dict = field(repr=False)

    @property
    def entities(self) -> pl.DataFrame:
        """One row per entity at every level (vCPUs at the host, tasks in guests)."""
        return pl.DataFrame(self.raw["entities"])

    @property
    def workloads(self) -> pl.DataFrame:
        """One row per workload with its benchmark figure and counters."""
        rows = []
        for w in self.raw["workloads"]:
            row = {
                "level": w["level"],
                "workload": w["name"],
                "kind": w["kind"],
                "figure": w["figure"]["name"],
                "value": w["figure"]["value"],
                "unit": w["figure"]["unit"],
            }
            for k, v in w["counters"]:
                row[f"count_{k}"] = v
            for k, h in w["histograms"]:
                for m in ("count", "min_us", "avg_us", "max_us", "p50_ns", "p99_ns", "p999_ns", "overflows"):
                    row[f"{k}_{m}"] = h[m]
            rows.append(row)
        return pl.DataFrame(rows)

    @property
    def series(self) -> pl.DataFrame:
        """Sampled series (long format: name, t_ns, value); empty unless the run sampled."""
        frames = [
            pl.DataFrame({"name": s["name"], "t_ns": s["t_ns"], "value": s["values"]},
                         schema={"name": pl.String, "t_ns": pl.UInt64, "value": pl.Int64})
            for s in self.raw["series"]
        ]
        if not frames:
            return pl.DataFrame(schema={"name": pl.String, "t_ns": pl.UInt64, "value": pl.Int64})
        return pl.concat(frames)

    @property
    def trace(self) -> dict | None:
        """If the run wrote a trace: records kept and dropped, the bound, and `truncated_at_ns`
        (None unless the bound was reached: the trace then ends there)."""
        return self.raw.get("trace")

    def workload(self, name: str) -> dict:
        for w in self.raw["workloads"]:
            if w["name"] == name:
                return w
        raise KeyError(f"no workload '{name}' (have {[w['name'] for w in self.raw['workloads']]})")

    def figure(self, name: str) -> dict:
        return self.workload(name)["figure"]

    def counter(self, workload: str, counter: str) -> int:
        return dict(self.workload(workload)["counters"])[counter]

    def summary(self) -> dict:
        return {
            "scenario": self.scenario,
            "overrides": dict(self.overrides),
            "duration_ns": self.raw["duration_ns"],
            "measured_ns": self.raw["measured_ns"],
            "events": self.raw["events"],
            "workloads": [
                {"level": w["level"], "name": w["name"], "kind": w["kind"],
                 "figure": w["figure"]["name"], "value": w["figure"]["value"],
                 "unit": w["figure"]["unit"], "counters": dict(w["counters"])}
                for w in self.raw["workloads"]
            ],
        }

    def write(self, out: str | os.PathLike, overwrite: bool = False) -> Path:
        """Writes summary.json, the raw results and Parquet tables into directory `out`.

        The files are written into a fresh temporary directory beside `out`, which is renamed
        into place at the end: `out` holds a complete set of results or is left as it was. An
        existing non-empty `out` is refused (`FileExistsError`) unless `overwrite`, which
        replaces it whole."""
        out = check_output_dir(out, overwrite)

        def fill(d: Path) -> None:
            (d / "summary.json").write_text(json.dumps(self.summary(), indent=2))
            (d / "results.json").write_text(json.dumps(self.raw))
            self.entities.write_parquet(d / "entities.parquet")
            self.workloads.write_parquet(d / "workloads.parquet")
            if self.raw["series"]:
                self.series.write_parquet(d / "series.parquet")

        return write_output_dir(out, fill, overwrite)


def _atomic_write(path: Path, text: str) -> None:
    """Replaces `path` with `text` atomically, never writing through a symbolic link."""
    _replace_file(path, lambda tmp: tmp.write_text(text))


def _replace_file(path: Path, fill) -> None:
    """Calls `fill(tmp)` on a fresh temporary file beside `path`, then renames it over `path`.

    The temporary file is created exclusively (never an existing file or link), and the rename
    replaces a symbolic link at `path` instead of writing to its target."""
    path = Path(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        fill(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_output_dir(out: str | os.PathLike, overwrite: bool = False) -> Path:
    """Checks, before any work, that results can go to directory `out`; returns it as a Path.

    Refused with a one-line `OSError`: a path naming a file or below one; an existing non-empty
    directory or a symbolic link, unless `overwrite` (then it is replaced whole at the end)."""
    out = Path(os.path.abspath(out))  # normalised, links not followed
    for parent in reversed(out.parents):
        if parent.exists() and not parent.is_dir():
            raise NotADirectoryError(f"output '{out}': '{parent}' is a file, not a directory")
    if out.is_symlink():
        if not overwrite:
            raise FileExistsError(f"output '{out}' is a symbolic link; results are never "
                                  "written through one (replace it whole with --force)")
    elif out.exists():
        if not out.is_dir():
            raise NotADirectoryError(f"output '{out}' is a file, not a directory")
        if not overwrite and any(out.iterdir()):
            raise FileExistsError(f"output directory '{out}' already exists and is not empty "
                                  "(choose another, or replace it whole with --force)")
    return out


def write_output_dir(out: Path, fill, overwrite: bool = False) -> Path:
    """Calls `fill(tmp)` on a fresh temporary directory beside `out`, then moves it into place.

    With `overwrite`, an existing `out` (directory or link) is replaced whole; the old one is
    removed only after the new one is in place. On any failure, or Ctrl-C, the temporary
    directory is removed and `out` is left as it was."""
    out = check_output_dir(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    old = None
    try:
        fill(tmp)
        os.chmod(tmp, 0o777 & ~_umask())
        if out.is_symlink() or (out.exists() and (overwrite or any(out.iterdir()))):
            check_output_dir(out, overwrite)
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
            os.replace(out, old / "x")
        # Renaming a directory onto an empty one replaces it; onto anything else it fails.
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            # Put the old directory back if it was moved aside; drop the empty holder.
            if os.path.lexists(old / "x") and not os.path.lexists(out):
                os.replace(old / "x", out)
            if not os.path.lexists(old / "x"):
                old.rmdir()
        raise
    if old is not None:
        target = old / "x"
        if target.is_symlink() or not target.is_dir():
            target.unlink()
        else:
            shutil.rmtree(target)
        old.rmdir()
    return out


def run(scenario: str | os.PathLike, set=None, seed: int | None = None,
        out: str | os.PathLike | None = None, progress=None, overwrite: bool = False,
        trace: str | os.PathLike | None = None, trace_max_records: int | None = None) -> Result:
    """Runs a scenario file (or a shipped scenario's name) with `--set`-style overrides.

    `progress`, if given, is called with the fraction of simulated time done (0..1].
    `out`: a directory for the results (see `Result.write`), checked before the run starts;
    an existing non-empty one is refused unless `overwrite`.
    `trace`, if given, is a file to write the run's schedule to as a Perfetto trace (docs/trace.md),
    keeping at most `trace_max_records` records (default 4,000,000); `Result.trace` then tells how
    many were kept and whether the trace was truncated."""
    p = scenario_path(scenario)
    ov = _overrides(set, seed)
    if trace_max_records is not None and trace_max_records < 1:
        raise ValueError(f"trace_max_records must be at least 1, got {trace_max_records}")
    if out is not None:
        check_output_dir(out, overwrite)
    raw = json.loads(_core.run(str(p), p.read_text(), ov, progress,
                               None if trace is None else str(trace), trace_max_records))
    r = Result(scenario=str(p), overrides=ov, raw=raw)
    if out is not None:
        r.write(out, overwrite=overwrite)
    return r


def sweep(scenario: str | os.PathLike, grid: Mapping[str, Iterable[Any]], seeds: int = 1,
          jobs: int | None = None, out: str | os.PathLike | None = None, progress: bool = True,
          set=None, overwrite: bool = False) -> pl.DataFrame:
    """Runs the Cartesian product of `grid` (× `seeds` seeds) and returns one row per workload
    per point. See `vmsched.sweep_runner` for resuming and parallelism; `overwrite` discards
    the points an earlier sweep left in `out`."""
    from vmsched.sweep_runner import run_sweep

    return run_sweep(scenario, grid, seeds=seeds, jobs=jobs, out=out, progress=progress, base=set,
                     overwrite=overwrite)
