"""`vmsched reproduce`: run a source document's experiments and print the simulated result beside
the published one. The reproductions themselves live in `vmsched.reproductions`, one module per
source document, found by name in its registry.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from vmsched.reproductions import get, registered
from vmsched.reproductions.seed000 import _one  # noqa: F401  (kept importable from here)


def main(name: str, quick: bool = False, jobs: int | None = None, out: str = "out/reproduce",
         console: Console | None = None, **options) -> int:
    """Runs reproduction `name`, writing under `out/<name>/`; `options` are the reproduction's
    own (seed000: `unixbench`)."""
    return get(name).run(quick=quick, jobs=jobs, out=Path(out) / name, console=console,
                         **options)


def listing() -> list[tuple[str, str, str]]:
    """(name, source document id, title) of every registered reproduction."""
    return [(r.name, r.source, r.title) for r in registered()]
