"""The registry of reproductions: one module per source document.

Each module in this package reproduces the experiments of one source document
(/work/shared/seeds: `000_b3ad2313bd30aebd.txt` is seed 000) and registers itself at import:

    REPRODUCTION = register(name="seed000", title="...", source="000_b3ad2313bd30aebd", run=main)

where `main(quick, jobs, out, console) -> int` runs the points, prints the simulated result beside
the published one and writes tables and plots under `out/<name>/`. `vmsched reproduce --list`
lists the registry (`registered()`); `vmsched reproduce NAME` runs one (`get(NAME)`). Adding a document is adding a module.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

_REGISTRY: dict[str, Reproduction] = {}


@dataclass(frozen=True)
class Reproduction:
    """One source document's reproduction."""

    name: str
    title: str
    #: The source document's id: its file name without `.txt` in the seeds directory.
    source: str
    run: Callable[..., int]


def register(name: str, title: str, source: str, run: Callable[..., int]) -> Reproduction:
    if name in _REGISTRY and _REGISTRY[name].run is not run:
        raise ValueError(f"reproduction '{name}' is registered twice")
    r = Reproduction(name=name, title=title, source=source, run=run)
    _REGISTRY[name] = r
    return r


def _load_all() -> None:
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not m.name.startswith("_"):
            importlib.import_module(f"{__name__}.{m.name}")


def registered() -> list[Reproduction]:
    """Every registered reproduction, by name."""
    _load_all()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def get(name: str) -> Reproduction:
    """The reproduction called `name`; KeyError naming the known ones if there is none."""
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no reproduction '{name}' (have: {', '.join(sorted(_REGISTRY))})") from None
