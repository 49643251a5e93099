"""Real configuration files in: xl.cfg domains, Linux sysctl dumps, rt-app workloads.

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
