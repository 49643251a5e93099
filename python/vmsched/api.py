"""The Python API: `run`, `sweep`, `check`, returning polars DataFrames.

A run's results cross the binding as Arrow tables (`vmsched._core` exports each with the Arrow
PyCapsule interface); `Result` holds them as polars DataFrames, made without copying through
Python objects. Overrides (`set=`) are typed: Python values keep their types, and text (`"k=v"`
items, or `str` values) is read by the type of the field it sets.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from vmsched import _core
from vmsched._lazy import lazy
from vmsched.errors import BudgetWarning, ScenarioError, read_scenario

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy("polars")

SCENARIO_DIR = Path(__file__).parent / "scenarios"


def scenario_path(name: str | os.PathLike) -> Path:
    """A scenario file path, or the name of a shipped scenario (with or without `.toml`).

    A name that is neither raises `ScenarioError` listing the shipped scenarios. The path is not
    read here: `read_scenario` refuses what is not a readable UTF-8 file."""
    p = Path(name)
    if p.exists() or p.is_symlink():
        return p
    for cand in (SCENARIO_DIR / p.name, SCENARIO_DIR / f"{p.name}.toml"):
        if cand.exists():
            return cand
    shipped = ", ".join(sorted(q.stem for q in SCENARIO_DIR.glob("*.toml")))
    raise ScenarioError.make(name, "no such file, nor a shipped scenario "
                                   f"(shipped scenarios: {shipped})")


Override = tuple[str, Any]


def _overrides(set: Mapping[str, Any] | Iterable[str] | None, seed: int | None) -> list[Override]:
    """`set=` as (key, value) pairs for the core: a mapping's values as given (bool, int, float,
    str, list), `key=value` strings as text, (key, value) pairs as given; `seed` becomes
    `run.seed`."""
    out: list[Override] = []
    if set is None:
        pass
    elif isinstance(set, Mapping):
        out = [(str(k), v) for k, v in set.items()]
    else:
        for item in set:
            if isinstance(item, tuple) and len(item) == 2:
                out.append((str(item[0]), item[1]))
                continue
            if "=" not in item:
                raise ValueError(f"--set expects key=value, got '{item}'")
            k, v = item.split("=", 1)
            out.append((k.strip(), v.strip()))
    if seed is not None:
        out.append(("run.seed", int(seed)))
    return out


def _toml_value(v: Any) -> str:
    """A value as TOML text (the sweep's point ids are made of it)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot express {v!r} as a TOML value")


def _with_events(text: str, events: Iterable[Mapping[str, Any]] | None) -> str:
    """The scenario's text with `events` appended as `[[event]]` tables (the same schema,
    docs/scenarios.md): they follow the file's own events, so the first one given here is
    `event.N` in errors when the file has N."""
    if not events:
        return text
    parts = [text.rstrip("\n"), ""]
    for i, ev in enumerate(events):
        if not isinstance(ev, Mapping):
            raise TypeError(f"events[{i}] must be a mapping of event fields, got {ev!r}")
        parts.append("[[event]]")
        for k, v in ev.items():
            key = k if str(k).replace("_", "").isalnum() else json.dumps(str(k))
            try:
                parts.append(f"{key} = {_toml_value(v)}")
            except TypeError as e:
                raise TypeError(f"events[{i}].{k}: {e}") from None
    return "\n".join(parts) + "\n"


def check(scenario: str | os.PathLike, set=None, seed: int | None = None,
          events: Iterable[Mapping[str, Any]] | None = None) -> dict:
    """Validates a scenario (raises `ScenarioError`) and returns it as a dict. `events` as in
    `run`."""
    p = scenario_path(scenario)
    return json.loads(_core.check(str(p), _with_events(read_scenario(p), events),
                                  _overrides(set, seed)))


#: A run that will write more results than this (bytes, uncompressed) says so before it starts:
#: the CLI prints one line, `run(out=...)` warns (`BudgetWarning`).
OUTPUT_NOTICE_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True)
class Estimate:
    """What a run will cost, computed before it is built (docs/limits.md).

    `memory_bytes`: the memory the run is expected to need at its peak; `parts`: (field, what,
    bytes), largest first, the field being the one to lower to shrink that part; `limit_bytes`:
    the memory limit in force; `output_bytes`: the result tables `Result.write` writes
    (uncompressed, an upper bound of the Parquet files), `output_field` the field behind most
    of it; `events`: None, or (an upper bound of the run's events, the field that contributes
    most) when it passes the warning threshold."""

    memory_bytes: int
    limit_bytes: int
    parts: list[tuple[str, str, int]]
    output_bytes: int
    output_field: str
    events: tuple[int, str] | None

    def output_notice(self) -> str | None:
        """One line if the run writes more than `OUTPUT_NOTICE_BYTES`, else None."""
        if self.output_bytes <= OUTPUT_NOTICE_BYTES:
            return None
        return (f"the results will take up to {_mb(self.output_bytes)} on disk (most for "
                f"{self.output_field}; Parquet, compressed, is usually smaller)")

    def events_notice(self) -> str | None:
        """One line if the run may take very many events, else None."""
        if self.events is None:
            return None
        n, field = self.events
        return (f"the run may take up to {n:,} events (most from {field}): minutes or more; "
                "Ctrl-C stops it")


def _mb(n: int) -> str:
    return f"{-(-n // (1024 * 1024)):,} MB"


def estimate(scenario: str | os.PathLike, set=None, seed: int | None = None,
             events: Iterable[Mapping[str, Any]] | None = None, trace: bool = False,
             trace_max_records: int | None = None,
             memory_limit_mb: int | None = None) -> Estimate:
    """The cost of running a scenario (memory, output size, events), without running it.

    Raises `ScenarioError` if the scenario is bad, or if its memory estimate exceeds the limit
    (`memory_limit_mb`, else the scenario's `run.memory_limit_mb`, else 80% of the available
    memory), naming the field of the largest part. `trace`: the run writes a trace of at most
    `trace_max_records` records."""
    p = scenario_path(scenario)
    records = (trace_max_records or 4_000_000) if trace else None
    d = _core.estimate(str(p), _with_events(read_scenario(p), events), _overrides(set, seed),
                       records, memory_limit_mb)
    return Estimate(memory_bytes=d["memory_bytes"], limit_bytes=d["limit_bytes"],
                    parts=[tuple(x) for x in d["parts"]], output_bytes=d["output_bytes"],
                    output_field=d["output_field"],
                    events=None if d["events"] is None else tuple(d["events"]))


def field_value(scenario: str | os.PathLike, key: str, text: str, set=None) -> Any:
    """`text` as the core reads it for field `key` of `scenario` (by the field's type: "4.21"
    for a version, 20000 for a number of microseconds), with the overrides `set` applied first.
    Raises `ScenarioError` naming the key and the expected type if it does not fit."""
    s = check(scenario, set=[*_overrides(set, None), (key, text)])
    cur: Any = s
    for seg in key.split("."):
        if isinstance(cur, list) and seg.isdigit() and int(seg) < len(cur):
            cur = cur[int(seg)]
        elif isinstance(cur, dict) and seg in cur:
            cur = cur[seg]
        else:
            return text
    return cur


#: The tables a run returns, each a polars DataFrame (see `Result`).
TABLES = ("entities", "workloads", "counters", "histograms", "series", "xenmon")


@dataclass(eq=False)
class Result:
    """The results of one run, as tables.

    `entities`: one row per entity at every level (vCPUs at the host, tasks in guests);
    `workloads`: one row per workload, its benchmark figure (`figure`, `value`, `unit`), its
    counters as `count_<name>` and its histograms' figures as `<histogram>_<figure>` columns
    (null where a workload has no such counter or histogram); `counters`: the counters long
    (level, workload, counter, value); `histograms`: one row per histogram with its figures and
    its buckets as a list; `series`: sampled series, long (name, t_ns, value); `xenmon`:
    xenmon's figures per domain and vCPU, over the run and each window (docs/xenmon.md).
    """

    scenario: str
    overrides: list[Override]
    tables: dict[str, pl.DataFrame] = field(repr=False)
    duration_ns: int = 0
    warmup_ns: int = 0
    measured_ns: int = 0
    events: int = 0
    #: If the run wrote a trace: its counts (see `trace`).
    trace_info: dict | None = None
    #: If the run wrote a xentrace file: what it holds (see `xentrace`).
    xentrace_info: dict | None = None
    #: What the run logged as Xen or Linux would (a CPU going offline breaking an affinity).
    log: tuple[str, ...] = ()
    #: The `events=` given to `run`, added to the file's `[[event]]` timeline (with `scenario`
    #: and `overrides`, what the run was made of).
    added_events: tuple[dict, ...] = ()

    @classmethod
    def _from_core(cls, scenario: str, overrides: list[Override], out: dict) -> Result:
        tables = {name: pl.DataFrame(t) for name, t in out["tables"].items()}
        return cls(scenario=scenario, overrides=overrides, tables=tables,
                   duration_ns=out["duration_ns"], warmup_ns=out["warmup_ns"],
                   measured_ns=out["measured_ns"], events=out["events"],
                   trace_info=out.get("trace"), xentrace_info=out.get("xentrace"),
                   log=tuple(out.get("log", ())))

    @property
    def entities(self) -> pl.DataFrame:
        """One row per entity at every level (vCPUs at the host, tasks in guests)."""
        return self.tables["entities"]

    @property
    def workloads(self) -> pl.DataFrame:
        """One row per workload with its benchmark figure, counters and histogram figures."""
        return self.tables["workloads"]

    @property
    def counters(self) -> pl.DataFrame:
        """One row per workload and counter (level, workload, counter, value)."""
        return self.tables["counters"]

    @property
    def histograms(self) -> pl.DataFrame:
        """One row per histogram (level, workload, histogram, figures, buckets_us list)."""
        return self.tables["histograms"]

    @property
    def ports(self) -> pl.DataFrame:
        """Event-channel ports of the I/O path (docs/io.md): level, port, vcpu, handler,
        served, max_wait_ns, pending_ns; empty without I/O."""
        return self.tables.get("ports", pl.DataFrame())

    @property
    def chaos(self) -> pl.DataFrame:
        """Chaos mode's stalls (docs/chaos.md): one row per stalled vCPU (domain, vcpu, name of
        its host entity, stalls, stalled_ns over the measured window, the configured rate and
        mean_us); empty without `[domain.chaos]`."""
        return self.tables.get("chaos", pl.DataFrame())

    @property
    def coord(self) -> pl.DataFrame:
        """Coordinated scheduling with a KVM host (docs/kvm.md): one row per coordinated
        domain (domain, boost_hypercalls, unboost_hypercalls, bound_expiries); empty without."""
        return self.tables.get("coord", pl.DataFrame())

    @property
    def xenmon(self) -> pl.DataFrame:
        """xenmon's figures (docs/xenmon.md): one row per domain and per host vCPU over the
        measured run (`window` null) and over each `run.xenmon_window_ms` window: gotten,
        blocked, waited and offline time and %, execution count, slice allocated and waited
        per execution, worst wait after a wake and after a preemption."""
        return self.tables.get("xenmon", pl.DataFrame())

    def xenmon_text(self, window: int | None = None, vcpus: bool = False) -> str:
        """`xenmon` printed as xenmon prints it (`vmsched.formats.xenmon_screen`)."""
        from vmsched.formats import xenmon_screen

        return xenmon_screen(self.xenmon, window=window, vcpus=vcpus)

    @property
    def series(self) -> pl.DataFrame:
        """Sampled series (long format: name, t_ns, value); empty unless the run sampled."""
        return self.tables["series"]

    def workload_records(self) -> list[dict]:
        """Every workload as a dict: level, name, kind, figure {name, value, unit},
        counters [(name, value)], histograms [(name, {figure: value, buckets_us: [...]})]."""
        counters = self.counters.partition_by(["level", "workload"], as_dict=True,
                                              include_key=False, maintain_order=True)
        hists = self.histograms.partition_by(["level", "workload"], as_dict=True,
                                             include_key=False, maintain_order=True)
        out = []
        for w in self.workloads.select("level", "workload", "kind", "figure", "value",
                                       "unit").iter_rows(named=True):
            key = (w["level"], w["workload"])
            c = counters.get(key)
            h = hists.get(key)
            out.append({
                "level": w["level"], "name": w["workload"], "kind": w["kind"],
                "figure": {"name": w["figure"], "value": w["value"], "unit": w["unit"]},
                "counters": [] if c is None else list(c.iter_rows()),
                "histograms": [] if h is None else [
                    (r.pop("histogram"), r) for r in h.to_dicts()],
            })
        return out

    @property
    def raw(self) -> dict:
        """The results as one nested dict (made from the tables; for JSON and old callers)."""
        series = [{"name": name, "t_ns": g["t_ns"].to_list(), "values": g["value"].to_list()}
                  for (name,), g in self.series.group_by("name", maintain_order=True)]
        raw = {
            "duration_ns": self.duration_ns, "warmup_ns": self.warmup_ns,
            "measured_ns": self.measured_ns, "events": self.events,
            "entities": self.entities.to_dicts(),
            "workloads": self.workload_records(),
            "series": series,
        }
        if self.trace_info is not None:
            raw["trace"] = self.trace_info
        if self.xentrace_info is not None:
            raw["xentrace"] = self.xentrace_info
        return raw

    @property
    def trace(self) -> dict | None:
        """If the run wrote a trace: records kept and dropped, the bound, and `truncated_at_ns`
        (None unless the bound was reached: the trace then ends there)."""
        return self.trace_info

    @property
    def xentrace(self) -> dict | None:
        """If the run wrote a xentrace file (docs/trace.md): `records` written, `by_event`
        ((Xen event id, count) pairs), `cpu_hz` (the CPU frequency its cycle counts assume),
        `domains` ((domain name, Xen domain id) pairs), `pools` (on a machine with cpupools:
        (pool name, scheduler, Xen scheduler id or None) per pool) and `trace` (the trace's counts, as
        `Result.trace`: `truncated_at_ns` is set if the bound was reached)."""
        return self.xentrace_info

    def explain(self, task: str, worst: int | None = None, at=None,
                trace_max_records: int | None = None):
        """Explains the wake-ups of `task` in this run (`vmsched.explain.explain`; the run is
        made again with the trace on): the `worst` N longest, or the one at time `at` (ms, or
        text with a unit). Returns an `Explanation` (`.print()`, `.text()`, `.segments`)."""
        from vmsched.explain import explain

        return explain(self, task, worst=worst, at=at, trace_max_records=trace_max_records)

    def attribution(self, trace_max_records: int | None = None) -> pl.DataFrame:
        """Where each task's measured wake-up latencies went, by cause, rule and who ran
        instead (`vmsched.explain.attribution`; the run is made again with the trace on)."""
        from vmsched.explain import attribution

        return attribution(self, trace_max_records=trace_max_records)

    def workload(self, name: str) -> dict:
        """The first workload called `name` (see `workload_records` for its shape)."""
        records = self.workload_records()
        for w in records:
            if w["name"] == name:
                return w
        raise KeyError(f"no workload '{name}' (have {[w['name'] for w in records]})")

    def figure(self, name: str) -> dict:
        return self.workload(name)["figure"]

    def job(self, name: str) -> dict:
        """A parallel job's outcome (docs/parallel.md): `runtime_s` (from its start to the
        last rank's finish; NaN if a rank had not finished by the end of the run),
        `finished`, `ranks`, `ranks_done`, `net_msgs` (messages between domains), `parts`
        (the domains of its ranks, each with `end_ns`, when its last rank finished) and
        `iteration` (rank 0's iteration times: the histogram's figures in µs)."""
        parts = [w for w in self.workload_records()
                 if w["name"] == name and w["kind"] == "parallel"]
        if not parts:
            raise KeyError(f"no parallel job '{name}'")
        c = dict(parts[0]["counters"])
        first = dict(parts[0]["histograms"]).get("iteration", {})
        return {
            "runtime_s": parts[0]["figure"]["value"],
            "finished": c["ranks_started"] > 0 and c["ranks_done"] == c["ranks_started"],
            "ranks": c["ranks_started"],
            "ranks_done": c["ranks_done"],
            "net_msgs": c["net_msgs"],
            "parts": [{"domain": w["level"], "end_ns": dict(w["counters"])["part_end_ns"]}
                      for w in parts],
            "iteration": {k: v for k, v in first.items() if k != "buckets_us"},
        }

    def counter(self, workload: str, counter: str) -> int:
        c = self.counters.filter((pl.col("workload") == workload) & (pl.col("counter") == counter))
        if c.height == 0:
            self.workload(workload)  # raises KeyError naming the workloads if there is none
            raise KeyError(f"workload '{workload}' has no counter '{counter}'")
        return c["value"][0]

    def summary(self) -> dict:
        """Figures and counters of every workload, without per-sample series (small)."""
        return {
            "scenario": self.scenario,
            "overrides": dict(self.overrides),
            "added_events": [dict(e) for e in self.added_events],
            "duration_ns": self.duration_ns,
            "measured_ns": self.measured_ns,
            "events": self.events,
            "workloads": [
                {"level": w["level"], "name": w["name"], "kind": w["kind"],
                 "figure": w["figure"]["name"], "value": w["figure"]["value"],
                 "unit": w["figure"]["unit"], "counters": dict(w["counters"])}
                for w in self.workload_records()
            ],
        }

    def write(self, out: str | os.PathLike, overwrite: bool = False) -> Path:
        """Writes summary.json, one Parquet file per non-empty table and the scenario as run
        (`scenario.toml`, which `vmsched explain` makes the run again from) into directory `out`.

        The files are written into a fresh temporary directory beside `out`, which is renamed
        into place at the end: `out` holds a complete set of results or is left as it was. An
        existing non-empty `out` is refused (`FileExistsError`) unless `overwrite`, which
        replaces it whole."""
        out = check_output_dir(out, overwrite)
        return write_output_dir(out, self._fill, overwrite)

    def _fill(self, d: Path) -> None:
        """Writes this run's files into the existing directory `d` (see `write`)."""
        from vmsched.explain import SCENARIO_FILE

        try:
            # The scenario as run, so `vmsched explain DIR` can make the run again.
            text = _with_events(read_scenario(self.scenario), self.added_events)
        except ScenarioError:
            text = None
        (d / "summary.json").write_text(json.dumps(self.summary(), indent=2))
        if text is not None:
            (d / SCENARIO_FILE).write_text(text)
        for name, df in self.tables.items():
            if df.height or name in ("entities", "workloads"):
                df.write_parquet(d / f"{name}.parquet")


#: A run's figures that `SeedRuns` summarises per host vCPU: (entity column, figure, unit,
#: scale from the column's unit).
VCPU_FIGURES = (("cpu_share", "CPU share", "%", 100.0), ("wait_mean_ns", "wait mean", "ms", 1e-6),
                ("wait_max_ns", "worst wait", "ms", 1e-6), ("preemptions", "preemptions", "count",
                                                            1.0))


@dataclass(eq=False)
class SeedRuns:
    """One scenario run under several seeds (`run(..., seeds=K)`, `vmsched run --seeds K`).

    `seeds`: the seeds, counting up from the base seed (`seed=`, else the scenario's
    `run.seed`); `results`: each seed's `Result`, in the order of `seeds`. `per_seed`: one row
    per seed and figure (each workload's benchmark figure; each host vCPU's CPU share, mean and
    worst wait and preemptions); `summary`: one row per figure with its spread over the seeds
    (`vmsched.stats.aggregate`: n, mean, 95 % CI half-width and bounds, CV, std, min, max)."""

    scenario: str
    overrides: list[Override]
    seeds: list[int]
    results: list[Result] = field(repr=False)

    @property
    def per_seed(self) -> pl.DataFrame:
        """seed, level, name, kind, figure, unit, value: one row per seed and figure."""
        rows = []
        for s, r in zip(self.seeds, self.results):
            for w in r.workloads.select("level", "workload", "kind", "figure", "value",
                                        "unit").iter_rows(named=True):
                rows.append({"seed": s, "level": w["level"], "name": w["workload"],
                             "kind": w["kind"], "figure": w["figure"], "unit": w["unit"],
                             "value": None if w["value"] is None else float(w["value"])})
            ents = r.entities
            if ents.height:
                ents = ents.filter(pl.col("kind") == "vcpu")
            for e in ents.iter_rows(named=True):
                for col, fig, unit, scale in VCPU_FIGURES:
                    rows.append({"seed": s, "level": e["level"], "name": e["name"],
                                 "kind": "vcpu", "figure": fig, "unit": unit,
                                 "value": float(e[col]) * scale})
        return pl.DataFrame(rows, schema={"seed": pl.Int64, "level": pl.String,
                                          "name": pl.String, "kind": pl.String,
                                          "figure": pl.String, "unit": pl.String,
                                          "value": pl.Float64})

    @property
    def summary(self) -> pl.DataFrame:
        """One row per figure: level, name, kind, figure, unit, then `vmsched.stats.AGG_COLUMNS`
        over the seeds."""
        from vmsched.stats import aggregate

        return aggregate(self.per_seed, ["level", "name", "kind", "figure", "unit"])

    def figure(self, name: str, figure: str | None = None):
        """The `vmsched.stats.Summary` of a workload's (or vCPU's) figure over the seeds; for a
        vCPU, `figure` names which ("CPU share", "wait mean", "worst wait", "preemptions")."""
        from vmsched.stats import summarize

        df = self.per_seed.filter(pl.col("name") == name)
        if figure is not None:
            df = df.filter(pl.col("figure") == figure)
        elif df.height:
            df = df.filter(pl.col("figure") == df["figure"][0])
        if df.height == 0:
            raise KeyError(f"no figure '{figure or name}' of '{name}'")
        return summarize(df.sort("seed")["value"].to_list())

    def write(self, out: str | os.PathLike, overwrite: bool = False) -> Path:
        """Writes into directory `out` (as `Result.write`: whole, or not at all):
        `seed-<S>/` per seed (that run's files, which `vmsched explain` and `report` read),
        `per_seed.parquet`/`.csv` and `summary.parquet`/`.csv` (the tables above) and
        `summary.json` (the scenario, overrides, seeds and the summary's rows)."""
        out = check_output_dir(out, overwrite)
        per_seed, summary = self.per_seed, self.summary

        def fill(d: Path) -> None:
            for s, r in zip(self.seeds, self.results):
                sub = d / f"seed-{s}"
                sub.mkdir()
                r._fill(sub)
            per_seed.write_parquet(d / "per_seed.parquet")
            per_seed.write_csv(d / "per_seed.csv")
            summary.write_parquet(d / "summary.parquet")
            summary.write_csv(d / "summary.csv")
            (d / "summary.json").write_text(json.dumps({
                "scenario": self.scenario, "overrides": dict(self.overrides),
                "seeds": self.seeds, "summary": summary.to_dicts()}, indent=2))

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
        trace: str | os.PathLike | None = None, trace_max_records: int | None = None,
        events: Iterable[Mapping[str, Any]] | None = None,
        memory_limit_mb: int | None = None, xentrace: str | os.PathLike | None = None,
        xentrace_cpu_hz: int | None = None, seeds: int | None = None, jobs: int | None = None,
        executor=None) -> Result | SeedRuns:
    """Runs a scenario file (or a shipped scenario's name) with overrides: `set` is a mapping
    of dotted keys to Python values (`{"host.version": "4.21", "run.seed": 3}`) or `key=value`
    strings as on the command line.

    `seeds`: run the scenario under this many seeds, counting up from `seed` (else from the
    scenario's `run.seed`, after `set`), `jobs` at a time through `executor` (as for `sweep`;
    default: processes on this machine), and return a `SeedRuns` (each seed's `Result`, a
    per-seed table and a summary with the mean, 95 % CI and CV of every figure;
    docs/statistics.md). `progress` is then called with the fraction of seeds done. Not with
    `trace` or `xentrace`. None or 1: one run, a `Result` as without it.

    `progress`, if given, is called with the fraction of simulated time done (0..1].
    `out`: a directory for the results (see `Result.write`), checked before the run starts;
    an existing non-empty one is refused unless `overwrite`.
    `trace`, if given, is a file to write the run's schedule to as a Perfetto trace (docs/trace.md),
    keeping at most `trace_max_records` records (default 4,000,000); `Result.trace` then tells how
    many were kept and whether the trace was truncated.
    `xentrace`, if given, is a file to write the host level to as Xen's binary trace, for
    `xentrace_format` and `xenalyze` (docs/trace.md): the same records and bound as `trace` (both
    may be given); its cycle counts assume a CPU of `xentrace_cpu_hz` (default 2.4 GHz, xenalyze's
    default `--cpu-hz`). `Result.xentrace` tells what was written and the domain ids used.
    `events`: run-time changes added to the scenario's `[[event]]` timeline, one mapping per
    event with the same fields (`{"at_ms": 500, "action": "pause", "domain": "a"}`; schema in
    docs/scenarios.md), validated with the scenario.
    `memory_limit_mb`: the memory the run may plan to use; the run is refused
    (`ScenarioError` naming the field that needs most) before it starts if its estimate is
    larger. Default: the scenario's `run.memory_limit_mb`, else 80% of the available memory
    (docs/limits.md). A run that will write more than `OUTPUT_NOTICE_BYTES` into `out`, or may
    take very many events, warns first (`vmsched.BudgetWarning`)."""
    if seeds is not None and seeds != 1:
        return _run_seeds(scenario, set, seed, seeds, jobs, executor, out, progress, overwrite,
                          events, memory_limit_mb, traced=trace is not None or
                          xentrace is not None)
    p = scenario_path(scenario)
    ov = _overrides(set, seed)
    if trace_max_records is not None and trace_max_records < 1:
        raise ValueError(f"trace_max_records must be at least 1, got {trace_max_records}")
    if xentrace_cpu_hz is not None and xentrace_cpu_hz < 1:
        raise ValueError(f"xentrace_cpu_hz must be at least 1, got {xentrace_cpu_hz}")
    traced = trace is not None or xentrace is not None
    if out is not None:
        check_output_dir(out, overwrite)
    events = None if events is None else [dict(e) if isinstance(e, Mapping) else e
                                          for e in events]
    est = estimate(p, set=ov, events=events, trace=traced,
                   trace_max_records=trace_max_records, memory_limit_mb=memory_limit_mb)
    for note in (est.output_notice() if out is not None else None, est.events_notice()):
        if note:
            warnings.warn(note, BudgetWarning, stacklevel=2)
    r = Result._from_core(str(p), ov, _core.run(str(p), _with_events(read_scenario(p), events),
                                                ov, progress,
                                                None if trace is None else str(trace),
                                                trace_max_records, memory_limit_mb,
                                                None if xentrace is None else str(xentrace),
                                                xentrace_cpu_hz))
    r.added_events = tuple(events or ())
    if out is not None:
        r.write(out, overwrite=overwrite)
    return r


def base_seed(scenario: str | os.PathLike, set=None, seed: int | None = None,
              events: Iterable[Mapping[str, Any]] | None = None) -> int:
    """The seed a multi-seed run counts up from: `seed`, else the scenario's `run.seed` after
    the overrides `set`."""
    if seed is not None:
        return int(seed)
    return int(check(scenario, set=set, events=events)["run"]["seed"])


def _seed_run(path: str, ov: list[Override], events, memory_limit_mb) -> Result:
    """One seed of `run(..., seeds=K)` (module level: a worker process calls it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)
        return run(path, set=ov, events=events, memory_limit_mb=memory_limit_mb)


def _run_seeds(scenario, set, seed, seeds, jobs, executor, out, progress, overwrite, events,
               memory_limit_mb, traced: bool) -> SeedRuns:
    from vmsched.executor import make_executor

    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"seeds must be a whole number at least 1, got {seeds!r}")
    if traced:
        raise ValueError("trace and xentrace record one run: give them without seeds (or "
                         "with seeds=1)")
    p = scenario_path(scenario)
    if out is not None:
        check_output_dir(out, overwrite)
    events = None if events is None else [dict(e) if isinstance(e, Mapping) else e
                                          for e in events]
    ov = _overrides(set, None)
    s0 = base_seed(p, set=ov, seed=seed, events=events)
    seed_list = [s0 + i for i in range(seeds)]
    # The budget of one run (each seed's is the same): refused here if over the memory limit.
    est = estimate(p, set=ov, seed=s0, events=events, memory_limit_mb=memory_limit_mb)
    note = est.events_notice()
    if note:
        warnings.warn(note, BudgetWarning, stacklevel=3)
    done: dict[int, Result] = {}
    with make_executor(jobs, seeds, executor) as ex:
        items = ((str(p), [*ov, ("run.seed", s)], events, memory_limit_mb) for s in seed_list)
        for (_, sov, _, _), f in ex.imap_unordered(_seed_run, items):
            r = f.result()
            r.added_events = tuple(events or ())
            done[dict(sov)["run.seed"]] = r
            if progress is not None:
                progress(len(done) / seeds)
    res = SeedRuns(scenario=str(p), overrides=ov, seeds=seed_list,
                   results=[done[s] for s in seed_list])
    if out is not None:
        res.write(out, overwrite=overwrite)
    return res


def sweep(scenario: str | os.PathLike, grid: Mapping[str, Iterable[Any]], seeds: int = 1,
          jobs: int | None = None, out: str | os.PathLike | None = None, progress: bool = True,
          set=None, overwrite: bool = False, design: str = "grid", samples: int | None = None,
          design_seed: int = 0, executor=None, address: str | None = None) -> pl.DataFrame:
    """Runs the points of a design (× `seeds` seeds) and returns one row per workload per
    point. See `vmsched.sweep_runner` for resuming and parallelism; `overwrite` discards
    the points an earlier sweep left in `out`.

    `design`: "grid" (default; the Cartesian product of `grid`'s lists), or "random" or "lhs"
    (Latin hypercube): `samples` points drawn with `design_seed` from `grid`'s ranges ("LO..HI",
    "LO..HI:log", (LO, HI)) and lists (`vmsched.design`). `executor`: None or "local" (processes
    on this machine, `jobs` of them), "ray" (Ray tasks on the cluster at `address`, else on a
    local Ray instance; `pip install vmsched[ray]`), or a `vmsched.executor.Executor`."""
    from vmsched.sweep_runner import run_sweep

    return run_sweep(scenario, grid, seeds=seeds, jobs=jobs, out=out, progress=progress, base=set,
                     overwrite=overwrite, design=design, samples=samples,
                     design_seed=design_seed, executor=executor, address=address)
