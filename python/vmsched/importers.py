"""Real configuration files in: xl.cfg domains, Linux sysctl dumps, rt-app workloads, and
scheduler traces (perf sched, ftrace) as replay scenarios (docs/replay.md).

The readers are Rust (`vmsched-core`'s `import` module, reached through `vmsched._core`); this
module only names them for Python and builds whole scenarios from their fragments. Every input
error raises `vmsched.ScenarioError` naming the file, the line and the key (docs/import.md).

    >>> d = vmsched.import_xl("guest.cfg")           # doctest: +SKIP
    >>> d.table["domain"][0]["vcpus"], d.notes[0]    # doctest: +SKIP
    (4, Note(line=3, key='memory', message='ignored (...)'))
    >>> text = vmsched.import_skeleton([d], host="credit2", pcpus=8)   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from vmsched import _core


@dataclass(frozen=True)
class Note:
    """Something read and not carried into the scenario (or carried approximately)."""

    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        return (f"line {self.line}: " if self.line is not None else "") + \
            f"{self.key}: {self.message}"


@dataclass(frozen=True)
class Imported:
    """One file read: `table` is the scenario fragment as a dict rooted at the scenario
    (`{"domain": [{...}]}`), `toml` the same as TOML text, `notes` what was left out."""

    path: str
    format: str
    table: dict
    toml: str
    notes: list[Note] = field(default_factory=list)


def _import(fmt: str, path: str | os.PathLike, pcpus: int | None = None) -> Imported:
    js, text, notes = _core.import_file(fmt, os.fspath(path), pcpus)
    return Imported(str(path), fmt, json.loads(js), text, [Note(*n) for n in notes])


def import_xl(path: str | os.PathLike, pcpus: int | None = None) -> Imported:
    """A Xen xl.cfg file as one `[[domain]]` (name, vcpus, pcpus / vcpu_pcpus, soft_pcpus,
    weight, cap). `pcpus`: the host's pCPU count, needed to expand `"all,^N"`."""
    return _import("xl", path, pcpus)


def import_sysctl(path: str | os.PathLike) -> Imported:
    """A Linux sysctl / sched_features dump as the guest's `[domain.sched]` CFS parameters."""
    return _import("sysctl", path)


def import_rtapp(path: str | os.PathLike) -> Imported:
    """An rt-app JSON file as `kind = "program"` workloads of one domain."""
    return _import("rtapp", path)


def _max_cpu(v) -> int:
    """The largest pCPU or vCPU number a fragment names (affinities, vCPU counts less one)."""
    if isinstance(v, dict):
        out = 0
        for k, x in v.items():
            if k in ("pcpus", "vcpu_pcpus", "soft_pcpus", "affinity"):
                out = max(out, _max_int(x))
            elif k == "vcpus" and isinstance(x, int):
                out = max(out, x - 1)
            else:
                out = max(out, _max_cpu(x))
        return out
    if isinstance(v, list):
        return max((_max_cpu(x) for x in v), default=0)
    return 0


def _max_int(v) -> int:
    if isinstance(v, int):
        return v
    if isinstance(v, list):
        return max((_max_int(x) for x in v), default=0)
    return 0


def import_skeleton(parts: list[Imported], host: str = "credit2",
                    pcpus: int | None = None) -> str:
    """A whole scenario (TOML text, validated) from imported files: `[machine] pcpus` (default:
    enough for every pCPU and vCPU the files name), `[host] scheduler = host`, one `[[domain]]`
    per xl.cfg file (or one domain `guest` with `pcpus` vCPUs); sysctl and rt-app parts go into
    the first domain. Raises ScenarioError naming the field when the result does not validate."""
    if pcpus is None:
        pcpus = max((_max_cpu(p.table) for p in parts), default=0) + 1
    return _core.import_skeleton(host, pcpus, [p.toml for p in parts])


@dataclass(frozen=True)
class TracedTask:
    """One task of an imported scheduler trace: its replay name (`comm:pid`) and what the
    trace recorded of it (CPU time, wake-ups)."""

    name: str
    pid: int
    comm: str
    cpu_ns: int
    wakes: int


@dataclass(frozen=True)
class ImportedTrace:
    """A scheduler trace read into a whole replay scenario (docs/replay.md): `toml` the
    scenario's text, `tasks` the replayed tasks, `notes` what the reader left out."""

    path: str
    format: str
    toml: str
    tasks: list[TracedTask]
    notes: list[Note] = field(default_factory=list)


#: The `perf script` fields the perf reader expects (vmsched-core import/schedtrace.rs).
PERF_SCRIPT_FIELDS = "comm,tid,cpu,time,event,trace"


def perf_script_text(path: str | os.PathLike, perf: str = "perf") -> str:
    """The text of a `perf sched record` file as the perf reader reads it: `perf script --ns
    -F comm,tid,cpu,time,event,trace` (perf.data's binary format is perf's to read). Raises
    OSError when perf is missing or fails."""
    import shutil
    import subprocess

    exe = shutil.which(perf)
    if exe is None:
        raise OSError(f"{path}: a perf.data file needs `perf` to read it (Debian: linux-perf); "
                      "or give the text of `perf script --ns -F "
                      f"{PERF_SCRIPT_FIELDS}`")
    p = subprocess.run([exe, "script", "-i", os.fspath(path), "--ns", "-F", PERF_SCRIPT_FIELDS],
                       capture_output=True, text=True, errors="replace")
    if p.returncode != 0:
        err = " ".join(p.stderr.split())[-400:]
        raise OSError(f"{path}: perf script failed (exit {p.returncode}): {err}")
    return p.stdout


def _import_trace(fmt: str, path, pids, comms, scheduler, kernel, cpus,
                  observed_affinity, pinned_guest) -> ImportedTrace:
    path = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(8)
    if fmt == "perf" and head == b"PERFILE2":
        text = perf_script_text(path)
    else:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    if kernel is None and scheduler == "eevdf":
        kernel = "6.18"
    toml, notes, tasks = _core.import_trace(fmt, path, text, list(pids or []),
                                            list(comms or []), scheduler, kernel, cpus,
                                            observed_affinity, pinned_guest)
    return ImportedTrace(path, fmt, toml, [TracedTask(*t) for t in tasks],
                         [Note(*n) for n in notes])


def import_perf(path: str | os.PathLike, pids=None, comms=None, scheduler: str = "eevdf",
                kernel: str | None = None, cpus: int | None = None,
                observed_affinity: bool = True, pinned_guest: bool = False) -> ImportedTrace:
    """A `perf sched record` recording (perf.data, read with `perf script`, or the text of
    `perf script --ns -F comm,tid,cpu,time,event,trace`) as a whole replay scenario: a
    bare-metal level with `cpus` CPUs (default: the trace's; a KVM host's Linux with the tasks
    as its `[[host.process]]`, or with `pinned_guest` a guest of the pinned host), the
    kernel's scheduler `scheduler` (`kernel` 6.18 for EEVDF unless given), a `kind = "replay"`
    workload of the tasks whose pid is in `pids` or comm in `comms` (default: every task but
    idle), each pinned to the CPUs it ran on unless `observed_affinity` is False.
    docs/replay.md."""
    return _import_trace("perf", path, pids, comms, scheduler, kernel, cpus, observed_affinity,
                         pinned_guest)


def import_ftrace(path: str | os.PathLike, pids=None, comms=None, scheduler: str = "eevdf",
                  kernel: str | None = None, cpus: int | None = None,
                  observed_affinity: bool = True, pinned_guest: bool = False) -> ImportedTrace:
    """An ftrace `trace` file with sched_switch and sched_waking/sched_wakeup(_new) events as a
    whole replay scenario (as `import_perf`)."""
    return _import_trace("ftrace", path, pids, comms, scheduler, kernel, cpus,
                         observed_affinity, pinned_guest)
