"""Modules imported on first use (issue 15 item 4: sweep workers and the CLI start fast).

`import vmsched` used to import polars (about 1 s of a cold start, most of a sweep worker's
start-up and of `vmsched --help`). The package's modules now name polars through
`pl = lazy("polars")`: a stand-in whose first attribute access (`pl.DataFrame`, `pl.col`)
imports the real module, after which every access is forwarded to it. Nothing is put in
`sys.modules` ahead of the import, so other libraries' checks for polars see only the real
module. Type checkers see the real import (`if TYPE_CHECKING: import polars as pl`).
"""

from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule:
    """Stands for module `name` until an attribute is read, then imports and forwards to it."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def _load(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attr: str):
        return getattr(self._load(), attr)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not yet imported"
        return f"<lazy module {self._name!r} ({state})>"


def lazy(name: str) -> LazyModule:
    """A stand-in for module `name`, imported on first attribute access."""
    return LazyModule(name)
