"""Tuning: searching scenario parameters for the best objective, or for a Pareto front under
constraints, with Optuna (an optional extra: `pip install vmsched[tune]`; docs/tuning.md).

A study searches `params` (`vmsched.design.Param`: integer and float ranges, log scales, lists)
for one or more `objectives` ("max context1.score", "min ct.p99_us") subject to `constraints`
("ct.max_us <= 500"). Objectives and constraints name a run's metrics (`metrics`): for every
workload W of the Result's `workloads` table, `W.<figure>` (its benchmark figure, as a sweep's
`figure` column names it: `context1.score`, `hog.cpu`), `W.count_<counter>` (the sweep's
counter columns) and `W.<histogram>_<figure>` (the table's histogram columns, such as
`ct.latency_t0_p99_ns`), with, over all of W's histograms (cyclictest's one per thread),
`W.p50_us`, `W.p99_us`, `W.p999_us`, `W.max_us` (the worst), `W.min_us` and `W.avg_us` (weighted by
samples). A workload name shared by several domains is `DOMAIN/W`.

Each trial runs `seeds` seeds (counting up from the scenario's `run.seed`, as a sweep's do) and
is told the means; the spread (standard deviation, min, max) is kept with it. Runs go through the
executor seam (`vmsched.executor`: local processes, or Ray tasks) and each is written to
`OUT/points/<key>.json` as it finishes, keyed as a sweep's points are
(`vmsched.sweep_runner.point_key`). The study lives in SQLite (`OUT/study.db` by default), so a
tune that is stopped resumes: finished trials are kept, a trial that was running is asked
again with the same parameters (its finished runs are read back, not run again). The sampler is
Optuna's TPE by default (multi-objective and constrained as Optuna implements it), seeded, so
one job gives the same trials every time.

With several objectives the result is the Pareto front of the feasible trials (computed here:
a trial is on it if no other feasible trial is at least as good on every objective and better
on one); each front point is run again on `confirm_seeds` seeds to confirm it. The front is
written as a table and plotted (`front.png`: the first two objectives, with units).
"""

from __future__ import annotations

import json
import re
import statistics
import warnings
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from vmsched import _core
from vmsched._lazy import lazy
from vmsched.api import _atomic_write, _overrides, _replace_file, run, scenario_path
from vmsched.design import Param, as_params
from vmsched.errors import ScenarioError, read_scenario
from vmsched.executor import Executor, make_executor

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy("polars")

#: Histogram figures summed up over a workload's histograms: (name, column suffix, how).
_HIST_AGG = (("p50_us", "_p50_ns", "max"), ("p99_us", "_p99_ns", "max"),
             ("p999_us", "_p999_ns", "max"), ("max_us", "_max_us", "max"),
             ("min_us", "_min_us", "min"), ("avg_us", "_avg_us", "mean"))

SAMPLERS = ("tpe", "random", "nsga2")


class OptunaNotInstalled(ImportError):
    """`vmsched tune` without Optuna; says what to install."""


def _import_optuna():
    try:
        import optuna
    except ImportError:
        raise OptunaNotInstalled("vmsched tune needs Optuna, an optional extra: pip install "
                                 "'vmsched[tune]' (or pip install optuna)") from None
    return optuna


# --- metrics -------------------------------------------------------------------------------

def metrics(result) -> tuple[dict[str, float], dict[str, str]]:
    """A run's metrics by name, and their units (see the module doc for the names)."""
    wl = result.workloads
    names = wl["workload"].to_list()
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    for row in wl.iter_rows(named=True):
        w = row["workload"]
        prefixes = [f"{row['level']}/{w}"] + ([w] if names.count(w) == 1 else [])
        found: dict[str, tuple[float, str]] = {}
        if row["value"] is not None:
            found[row["figure"]] = (float(row["value"]), row["unit"])
        hist: dict[str, list[tuple[str, float]]] = {}
        for col, v in row.items():
            if v is None or col in ("level", "workload", "kind", "figure", "value", "unit"):
                continue
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            if col.startswith("count_"):
                found[col] = (float(v), "count")
                continue
            unit = ("us" if col.endswith("_us") else "ns" if col.endswith("_ns")
                    else "samples")
            found[col] = (float(v), unit)
            for _name, suffix, _how in _HIST_AGG + (("count", "_count", "sum"),):
                if col.endswith(suffix):
                    hist.setdefault(suffix, []).append((col[: -len(suffix)], float(v)))
        counts = dict(hist.get("_count", []))
        for name, suffix, how in _HIST_AGG:
            xs = hist.get(suffix)
            if not xs:
                continue
            scale = 1000.0 if suffix.endswith("_ns") else 1.0
            if how == "max":
                v = max(x for _, x in xs) / scale
            elif how == "min":
                v = min(x for _, x in xs) / scale
            else:
                n = sum(counts.get(h, 0) for h, _ in xs)
                v = (sum(x * counts.get(h, 0) for h, x in xs) / n if n
                     else statistics.fmean(x for _, x in xs)) / scale
            found[name] = (v, "us")
        for p in prefixes:
            for k, (v, u) in found.items():
                values[f"{p}.{k}"] = v
                units[f"{p}.{k}"] = u
    return values, units


def _run_metrics(scenario: str, base: list, point: dict, key: str) -> dict:
    """One run of a trial (in a worker): its record, as a sweep's point file plus `metrics`."""
    from vmsched.sweep_runner import _point_overrides

    ov = _point_overrides(base, point)
    r = run(scenario, set=[f"{k}={v}" for k, v in ov])
    vals, units = metrics(r)
    return {"key": key, "point": point, "summary": r.summary(), "metrics": vals,
            "units": units}


# --- objectives and constraints --------------------------------------------------------------

@dataclass(frozen=True)
class Objective:
    """`max NAME` or `min NAME`."""

    name: str
    direction: str  # "maximize" or "minimize"

    def text(self) -> str:
        return f"{'max' if self.direction == 'maximize' else 'min'} {self.name}"


@dataclass(frozen=True)
class Constraint:
    """`NAME <= BOUND` (or >=, <, >): feasible when `violation` is at most 0."""

    name: str
    op: str
    bound: float

    def violation(self, v: float) -> float:
        return v - self.bound if self.op in ("<=", "<") else self.bound - v

    def holds(self, v: float) -> bool:
        return {"<=": v <= self.bound, "<": v < self.bound, ">=": v >= self.bound,
                ">": v > self.bound}[self.op]

    def text(self) -> str:
        return f"{self.name} {self.op} {self.bound:g}"


def parse_objective(text: str | Objective) -> Objective:
    if isinstance(text, Objective):
        return text
    parts = str(text).split()
    if len(parts) != 2 or parts[0].lower() not in ("max", "min", "maximize", "minimize"):
        raise ValueError(f"--objective '{text}': expected 'max NAME' or 'min NAME' "
                         "(e.g. 'max context1.score')")
    d = "maximize" if parts[0].lower().startswith("max") else "minimize"
    return Objective(parts[1], d)


_CONSTRAINT = re.compile(r"^\s*(\S+)\s*(<=|>=|<|>)\s*(\S+)\s*$")


def parse_constraint(text: str | Constraint) -> Constraint:
    if isinstance(text, Constraint):
        return text
    m = _CONSTRAINT.match(str(text))
    if not m:
        raise ValueError(f"--constraint '{text}': expected 'NAME <= BOUND' or 'NAME >= BOUND' "
                         "(e.g. 'ct.max_us <= 500')")
    try:
        bound = float(m.group(3))
    except ValueError:
        raise ValueError(f"--constraint '{text}': the bound '{m.group(3)}' is not a number") \
            from None
    return Constraint(m.group(1), m.group(2), bound)


def _check_names(vals: Mapping[str, float], objectives: Sequence[Objective],
                 constraints: Sequence[Constraint]) -> None:
    """Every objective and constraint names a metric of the run, or a ValueError listing
    them."""
    for what, name in ([("--objective", o.name) for o in objectives]
                       + [("--constraint", c.name) for c in constraints]):
        if name not in vals:
            known = ", ".join(sorted(vals))
            raise ValueError(f"{what} {name}: no such metric in the run (known: {known})")


# --- the study -------------------------------------------------------------------------------

@dataclass
class TuneResult:
    """What `tune` returns: the Optuna `study`, the `trials` table (one row per trial: number,
    state, parameters, per objective and constraint its mean, std, min and max over the seeds,
    `feasible`), the `front` table (the best trial, or the Pareto front: the same columns plus
    `confirmed_*` over `confirm_seeds` seeds and `confirmed_feasible`), and `out`."""

    study: Any
    trials: pl.DataFrame
    front: pl.DataFrame
    objectives: list[Objective]
    constraints: list[Constraint]
    params: list[Param]
    units: dict[str, str] = field(default_factory=dict)
    out: Path | None = None

    @property
    def best(self) -> dict | None:
        """The first row of `front` (the best trial for one objective), or None."""
        return self.front.row(0, named=True) if self.front.height else None


def _sampler(optuna, name: str, seed: int, constraints: Sequence[Constraint]):
    cfunc = (lambda t: t.user_attrs.get("constraints", [0.0] * len(constraints))) \
        if constraints else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constraints_func is "experimental" in Optuna
        if name == "tpe":
            return optuna.samplers.TPESampler(seed=seed, constraints_func=cfunc)
        if name == "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed, constraints_func=cfunc)
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"--sampler: unknown sampler '{name}' (known: {', '.join(SAMPLERS)})")


def _suggest(trial, p: Param):
    if p.kind == "int":
        return trial.suggest_int(p.name, int(p.low), int(p.high), log=p.log)
    if p.kind == "float":
        return trial.suggest_float(p.name, float(p.low), float(p.high), log=p.log)
    return trial.suggest_categorical(p.name, list(p.choices))


def _spread(xs: list[float]) -> dict:
    return {"mean": statistics.fmean(xs), "std": statistics.stdev(xs) if len(xs) > 1 else 0.0,
            "min": min(xs), "max": max(xs)}


class _Runs:
    """The runs of a study: cached in `OUT/points`, submitted to the executor, collected."""

    def __init__(self, path: str, text: str, base_ov: list, outdir: Path | None, seed0: int,
                 objectives, constraints):
        from vmsched.sweep_runner import point_key

        self.path, self.text, self.base_ov = path, text, base_ov
        self.outdir, self.seed0 = outdir, seed0
        self.objectives, self.constraints = objectives, constraints
        self._key = point_key
        self.units: dict[str, str] = {}
        self.checked = False

    def points(self, params: dict, seeds: int) -> list[tuple[dict, str]]:
        pts = [{**params, "run.seed": self.seed0 + s} for s in range(seeds)]
        return [(p, self._key(self.path, self.text, self.base_ov, p)) for p in pts]

    def cached(self, key: str) -> dict | None:
        if self.outdir is None:
            return None
        from vmsched.sweep_runner import _load_point

        rec = _load_point(self.outdir / "points" / f"{key}.json", key)
        return rec if rec is not None and isinstance(rec.get("metrics"), dict) else None

    def record(self, rec: dict) -> None:
        if not self.checked:
            _check_names(rec["metrics"], self.objectives, self.constraints)
            self.checked = True
        self.units.update(rec.get("units", {}))
        if self.outdir is not None:
            _atomic_write(self.outdir / "points" / f"{rec['key']}.json", json.dumps(rec))

    def figures(self, recs: list[dict]) -> dict[str, dict]:
        """Mean, std, min, max over the seeds of every objective and constraint."""
        names = [o.name for o in self.objectives] + [c.name for c in self.constraints]
        return {n: _spread([r["metrics"][n] for r in recs]) for n in dict.fromkeys(names)}


def _evaluate(runs: _Runs, ex: Executor, jobs: list[tuple[Any, list[tuple[dict, str]]]],
              on_done) -> None:
    """Runs every (tag, points) job's points (those not cached) and calls `on_done(tag,
    records or error text)` as each job's last point comes back."""
    waiting: dict[Future, tuple[int, str]] = {}
    state = []
    for i, (tag, pts) in enumerate(jobs):
        recs: dict[str, dict] = {}
        for _p, k in pts:
            rec = runs.cached(k)
            if rec is not None:
                recs[k] = rec
        state.append({"tag": tag, "keys": [k for _, k in pts], "recs": recs, "error": None})
        for p, k in dict((k, (p, k)) for p, k in pts if k not in recs).values():
            waiting[ex.submit(_run_metrics, runs.path, runs.base_ov, p, k)] = (i, k)
        if all(k in recs for k in state[i]["keys"]):
            on_done(tag, [recs[k] for k in state[i]["keys"]])
    while waiting:
        done, _ = futures_wait(list(waiting), timeout=0.2, return_when=FIRST_COMPLETED)
        for f in done:
            i, k = waiting.pop(f)
            s = state[i]
            try:
                rec = f.result()
            except Exception as e:  # this run's error fails its trial; the others go on
                s["error"] = " ".join(str(e).split("\n")) or type(e).__name__
            else:
                runs.record(rec)
                s["recs"][k] = rec
            if any(w[0] == i for w in waiting.values()):
                continue
            if s["error"] is not None:
                on_done(s["tag"], s["error"])
            else:
                on_done(s["tag"], [s["recs"][kk] for kk in s["keys"]])


def tune(scenario, params, objectives, constraints=(), trials: int = 20, seeds: int = 1,
         jobs: int | None = None, out=None, study: str | None = None, storage=None,
         sampler: str = "tpe", sampler_seed: int = 0, confirm_seeds: int | None = None,
         set=None, executor=None, address: str | None = None, progress: bool = True,
         overwrite: bool = False) -> TuneResult:
    """Searches `params` for the best `objectives` under `constraints` with Optuna.

    `params`: a mapping of keys to ranges ("LO..HI", "LO..HI:log", (LO, HI)) or lists, or a
    list of `--param` strings or `Param`s. `objectives`: "max NAME" / "min NAME" strings (one,
    or several for a Pareto front); `constraints`: "NAME <= BOUND" strings (see the module doc
    for the names). `trials`: the study's size in all (a resumed study runs what is missing);
    `seeds`: runs per trial, averaged; `confirm_seeds`: the seeds each front point is run on
    again (default: `seeds`). `out`: the directory for the runs, the study (`study.db`, unless
    `storage`: a SQLite file path or an Optuna storage URL) and the tables (trials.parquet,
    trials.csv, front.parquet, front.csv, front.png); an earlier tune there is resumed, unless
    `overwrite`. `study`: the study's name (default: the scenario's). `sampler`: "tpe"
    (default), "nsga2" or "random", seeded with `sampler_seed`. `executor`, `address`, `jobs`:
    where runs go, as for `vmsched.sweep`; `jobs` runs at once (default: every core, or the Ray
    cluster's CPUs)."""
    optuna = _import_optuna()
    from vmsched.sweep_runner import _lock, _prepare_outdir

    params = as_params(params)
    if not params:
        raise ValueError("vmsched tune: give at least one --param KEY=LO..HI")
    objectives = [parse_objective(o) for o in ([objectives] if isinstance(objectives, str)
                                               else objectives)]
    if not objectives:
        raise ValueError("vmsched tune: give at least one --objective 'max NAME' or 'min NAME'")
    constraints = [parse_constraint(c) for c in ([constraints] if isinstance(constraints, str)
                                                 else constraints)]
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    confirm_seeds = confirm_seeds or seeds
    if confirm_seeds < seeds:
        raise ValueError(f"--confirm-seeds ({confirm_seeds}) must be at least --seeds ({seeds})")
    if sampler not in SAMPLERS:
        raise ValueError(f"--sampler: unknown sampler '{sampler}' (known: {', '.join(SAMPLERS)})")
    path = str(scenario_path(scenario))
    text = read_scenario(path)
    base_ov = _overrides(set, None)
    seed0 = int(json.loads(_core.check(path, text, base_ov))["run"]["seed"])
    _check_params(path, text, base_ov, params)

    outdir = _prepare_outdir(out, overwrite) if out is not None else None
    lock = _lock(outdir) if outdir is not None else None
    try:
        if storage is None:
            url = (f"sqlite:///{outdir / 'study.db'}" if outdir is not None else None)
        elif "://" in str(storage):
            url = str(storage)
        else:
            url = f"sqlite:///{Path(storage).resolve()}"
        name = study or Path(path).stem
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        directions = [o.direction for o in objectives]

        def open_study(load: bool):
            return optuna.create_study(storage=url, study_name=name, load_if_exists=load,
                                       directions=directions,
                                       sampler=_sampler(optuna, sampler, sampler_seed,
                                                        constraints))

        st = open_study(True)
        if [d.name.lower() for d in st.directions] != directions and not st.get_trials(
                deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            # Optuna loads a study with its own directions; one without a complete trial is
            # made again with the new ones (a differing study with trials is refused below).
            optuna.delete_study(study_name=name, storage=url)
            st = open_study(False)
        _check_spec(st, name, path, params, objectives, constraints, seeds, base_ov)
        runs = _Runs(path, text, base_ov, outdir, seed0, objectives, constraints)
        with make_executor(jobs, None, executor, address) as ex:
            _optimise(optuna, st, runs, ex, params, trials, seeds, _parallel(ex, jobs),
                      progress)
            result = _finish(st, runs, ex, params, objectives, constraints, seeds,
                             confirm_seeds, outdir)
        return result
    finally:
        if lock is not None:
            lock.close()


def _check_params(path, text, base_ov, params: Sequence[Param]) -> None:
    """Each parameter's ends (or values) validate, else a ValueError naming the `--param`."""
    for p in params:
        for v in ((p.low, p.high) if p.kind != "cat" else p.choices):
            try:
                _core.check(path, text, [*base_ov, (p.name, v)])
            except ScenarioError as e:
                raise ValueError(f"--param {p.name}: {v!r} does not fit the scenario ({e})") \
                    from None


def _check_spec(st, name, path, params, objectives, constraints, seeds, base_ov) -> None:
    """A resumed study must be the same search: else a ValueError saying what differs."""
    spec = {"scenario": Path(path).name, "params": [p.text() for p in params],
            "objectives": [o.text() for o in objectives],
            "constraints": [c.text() for c in constraints], "seeds": seeds,
            "set": [[k, str(v)] for k, v in base_ov]}
    old = st.user_attrs.get("vmsched")
    import optuna

    # A study without a complete trial has nothing to keep (a tune stopped by a misspelt
    # objective, say): it takes the new search.
    if old is None or not st.get_trials(deepcopy=False,
                                        states=(optuna.trial.TrialState.COMPLETE,)):
        st.set_user_attr("vmsched", spec)
        return
    for k in spec:
        if old.get(k) != spec[k]:
            raise ValueError(f"study '{name}' was made with other {k} ({old.get(k)}, now "
                             f"{spec[k]}); resume it with the same ones, or give another "
                             "--study or output directory")


def _parallel(ex: Executor, jobs: int | None) -> int:
    if jobs:
        return jobs
    n = getattr(ex, "jobs", None)
    if n:
        return n
    ray = getattr(ex, "_ray", None)
    if ray is not None:
        return max(1, int(ray.cluster_resources().get("CPU", 1)))
    return 1


def _optimise(optuna, st, runs: _Runs, ex: Executor, params, trials: int, seeds: int,
              parallel: int, progress: bool) -> None:
    TrialState = optuna.trial.TrialState
    # Trials left running by a tune that was stopped: asked again with the same parameters
    # (their finished runs are read back from OUT/points).
    for t in st.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        st.tell(t.number, state=TrialState.FAIL)
        st.enqueue_trial(t.params, user_attrs={"retry_of": t.number})
    done = len(st.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    bar = task = None
    if progress and done < trials:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        bar = Progress("[progress.description]{task.description}", BarColumn(),
                       MofNCompleteColumn(), TimeElapsedColumn())
        bar.start()
        task = bar.add_task(f"tune {Path(runs.path).stem}", total=trials, completed=done)
    # Trials in flight: at most as many as keep `parallel` runs busy.
    width = max(1, -(-parallel // seeds))
    inflight: dict[int, Any] = {}
    failed_in_a_row = 0

    def told(trial, recs) -> None:
        nonlocal done, failed_in_a_row
        inflight.pop(trial.number, None)
        if isinstance(recs, str):
            trial.set_user_attr("error", recs)
            st.tell(trial, state=TrialState.FAIL)
            failed_in_a_row += 1
            return
        failed_in_a_row = 0
        figs = runs.figures(recs)
        trial.set_user_attr("figures", figs)
        trial.set_user_attr("keys", [r["key"] for r in recs])
        if runs.constraints:
            trial.set_user_attr("constraints", [c.violation(figs[c.name]["mean"])
                                                for c in runs.constraints])
        st.tell(trial, [figs[o.name]["mean"] for o in runs.objectives])
        done += 1
        if bar:
            bar.update(task, completed=done)

    try:
        while done < trials:
            if failed_in_a_row >= max(10, trials):
                raise ValueError(f"{failed_in_a_row} trials in a row failed; the last: "
                                 + str(st.trials[-1].user_attrs.get("error")))
            batch = []
            while (len(inflight) + len(batch) < min(width, trials - done)
                   and failed_in_a_row < max(10, trials)):
                trial = st.ask()
                for p in params:
                    _suggest(trial, p)
                try:
                    batch.append((trial, runs.points(dict(trial.params), seeds)))
                except ScenarioError as e:  # these values together do not validate
                    told(trial, " ".join(str(e).split("\n")))
            for trial, _ in batch:
                inflight[trial.number] = trial
            # One batch at a time: its trials are told as they finish; then the next is asked.
            _evaluate(runs, ex, batch, told)
    finally:
        if bar:
            bar.stop()


def pareto_front(rows: list[dict], objectives: Sequence[Objective]) -> list[dict]:
    """The rows no other row dominates (at least as good on every objective, better on one),
    in the order given."""
    def better_eq(a, b):
        return all((a[o.name] >= b[o.name]) if o.direction == "maximize"
                   else (a[o.name] <= b[o.name]) for o in objectives)

    def dominates(a, b):
        return better_eq(a, b) and any(a[o.name] != b[o.name] for o in objectives)

    return [r for r in rows if not any(dominates(q, r) for q in rows if q is not r)]


def _finish(st, runs: _Runs, ex, params, objectives, constraints, seeds, confirm_seeds,
            outdir) -> TuneResult:
    import optuna

    rows = []
    complete = []
    for t in st.get_trials(deepcopy=False):
        row: dict[str, Any] = {"trial": t.number, "state": t.state.name}
        for p in params:
            row[p.name] = t.params.get(p.name)
        figs = t.user_attrs.get("figures", {})
        for n, f in figs.items():
            for stat in ("mean", "std", "min", "max"):
                row[f"{n} {stat}"] = f[stat]
        feasible = (t.state == optuna.trial.TrialState.COMPLETE
                    and all(c.holds(figs[c.name]["mean"]) for c in constraints))
        row["feasible"] = feasible
        row["error"] = t.user_attrs.get("error")
        rows.append(row)
        if feasible:
            complete.append((t, {n: f["mean"] for n, f in figs.items()}))
    trials_df = pl.DataFrame(rows, infer_schema_length=None)
    # The front: the best feasible trial, or the Pareto front of the feasible trials (ties on
    # every objective: the first trial stands for them).
    if len(objectives) == 1:
        o = objectives[0]
        best = sorted(complete, key=lambda tm: (-tm[1][o.name] if o.direction == "maximize"
                                                else tm[1][o.name], tm[0].number))[:1]
        front = best
    else:
        uniq: list = []
        for t, m in complete:
            if not any(all(m[o.name] == fm[o.name] for o in objectives) for _, fm in uniq):
                uniq.append((t, m))
        best_m = pareto_front([m for _, m in uniq], objectives)
        front = [(t, m) for t, m in uniq if any(m is f for f in best_m)]
    # Confirmation: each front point on `confirm_seeds` seeds (the first `seeds` are read back).
    confirmed: dict[int, Any] = {}
    if front:
        jobs = [(t.number, runs.points(dict(t.params), confirm_seeds)) for t, _ in front]

        def got(number, recs):
            confirmed[number] = recs

        _evaluate(runs, ex, jobs, got)
    front_rows = []
    for t, _m in front:
        row = next(r for r in rows if r["trial"] == t.number)
        row = dict(row)
        recs = confirmed.get(t.number)
        row["confirm_seeds"] = confirm_seeds
        if isinstance(recs, list):
            figs = runs.figures(recs)
            for n, f in figs.items():
                for stat in ("mean", "std", "min", "max"):
                    row[f"confirmed {n} {stat}"] = f[stat]
            row["confirmed_feasible"] = all(c.holds(figs[c.name]["mean"]) for c in constraints)
            row["confirm_error"] = None
        else:
            row["confirmed_feasible"] = False
            row["confirm_error"] = recs
        front_rows.append(row)
    front_df = pl.DataFrame(front_rows, infer_schema_length=None)
    res = TuneResult(study=st, trials=trials_df, front=front_df, objectives=list(objectives),
                     constraints=list(constraints), params=list(params),
                     units=dict(runs.units), out=outdir)
    if outdir is not None:
        _replace_file(outdir / "trials.parquet", trials_df.write_parquet)
        _replace_file(outdir / "trials.csv", trials_df.write_csv)
        _replace_file(outdir / "front.parquet", front_df.write_parquet)
        _replace_file(outdir / "front.csv", front_df.write_csv)
        if len(objectives) >= 2:
            _replace_file(outdir / "front.png", lambda f: plot_front(res, f))
    return res


def _label(name: str, units: Mapping[str, str]) -> str:
    u = units.get(name, "")
    u = {"us": "µs", "cpus": "CPUs"}.get(u, u)
    return f"{name} ({u})" if u and u != "-" else name


def plot_front(res: TuneResult, path) -> Path:
    """The first two objectives of every complete trial (grey: infeasible), the Pareto front
    (joined, red) and its confirmed means with their standard deviation (black bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ox, oy = res.objectives[0].name, res.objectives[1].name
    df = res.trials.filter(pl.col("state") == "COMPLETE")
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for feas, colour, label in ((False, "0.7", "infeasible"), (True, "tab:blue", "feasible")):
        sub = df.filter(pl.col("feasible") == feas)
        if sub.height:
            ax.scatter(sub[f"{ox} mean"], sub[f"{oy} mean"], s=18, c=colour, label=label)
    if res.front.height:
        fr = res.front.sort(f"{ox} mean")
        ax.plot(fr[f"{ox} mean"], fr[f"{oy} mean"], "o-", c="tab:red", label="Pareto front")
        if f"confirmed {ox} mean" in fr.columns:
            ax.errorbar(fr[f"confirmed {ox} mean"], fr[f"confirmed {oy} mean"],
                        xerr=fr[f"confirmed {ox} std"], yerr=fr[f"confirmed {oy} std"],
                        fmt="none", ecolor="k", capsize=3,
                        label=f"confirmed ({fr['confirm_seeds'][0]} seeds, ±1 sd)")
    ax.set_xlabel(_label(ox, res.units) + f" [{res.objectives[0].text().split()[0]}]")
    ax.set_ylabel(_label(oy, res.units) + f" [{res.objectives[1].text().split()[0]}]")
    if res.constraints:
        ax.set_title("subject to " + ", ".join(c.text() for c in res.constraints), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def describe(res: TuneResult) -> list[str]:
    """Lines for the terminal: the best point (or the front), with spreads."""
    def fig(row, name, prefix=""):
        m, s = row.get(f"{prefix}{name} mean"), row.get(f"{prefix}{name} std")
        lo, hi = row.get(f"{prefix}{name} min"), row.get(f"{prefix}{name} max")
        if m is None:
            return f"{name} -"
        u = res.units.get(name, "")
        return f"{name} {m:.6g} ± {s:.3g} {u} (min {lo:.6g}, max {hi:.6g})".replace("  ", " ")

    out = []
    n = res.trials.filter(pl.col("state") == "COMPLETE").height
    nfeas = res.trials.filter(pl.col("feasible")).height
    out.append(f"{n} complete trials, {nfeas} feasible")
    if not res.front.height:
        out.append("no feasible trial" + (": " + ", ".join(c.text() for c in res.constraints)
                                          if res.constraints else ""))
        return out
    title = "best point" if len(res.objectives) == 1 else f"Pareto front ({res.front.height})"
    out.append(title + ":")
    for row in res.front.iter_rows(named=True):
        ps = ", ".join(f"{p.name}={row[p.name]}" for p in res.params)
        out.append(f"  trial {row['trial']}: {ps}")
        names = list(dict.fromkeys([o.name for o in res.objectives]
                                   + [c.name for c in res.constraints]))
        for name in names:
            out.append(f"    {fig(row, name)}")
            if f"confirmed {name} mean" in row:
                out.append(f"      confirmed on {row['confirm_seeds']} seeds: "
                           f"{fig(row, name, 'confirmed ')}")
        if res.constraints:
            out.append("    constraints hold on the confirmation: "
                       + ("yes" if row["confirmed_feasible"] else "NO"))
    return out


__all__ = ["Constraint", "Objective", "TuneResult", "metrics", "parse_constraint",
           "parse_objective", "pareto_front", "plot_front", "tune"]

