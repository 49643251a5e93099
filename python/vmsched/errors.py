"""The project's exceptions, and reading a scenario file into text.

`ScenarioError` is raised for every bad input (the file cannot be read, is not text, is too
large, or does not validate), by the Python front and by the core (`vmsched._core` raises this
very class). It carries `file`, `line` and `field`, prints as one line, and pickles, so a sweep
point's error crosses a process pool intact. `CoreError` is a broken invariant in the core.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: The largest scenario file read (bytes). Shipped scenarios are a few KiB; a file this large is
#: a mistake (a binary, a log), refused before it is read whole.
MAX_SCENARIO_BYTES = 16 * 1024 * 1024


class ScenarioError(Exception):
    """A scenario that cannot be used: unreadable, not UTF-8 text, too large, or invalid.

    `file`: the path as given; `line`: 1-based line (None if not known); `field`: the dotted
    field path (`domain.0.vcpus`; "" for errors of the file as a whole); `message`: what is
    wrong. `str(e)` is one line: `file:line: field: message`. `e.args` is
    (text, file, line, field, message)."""

    def __init__(self, text: str, file: str | None = None, line: int | None = None,
                 field: str | None = None, message: str | None = None):
        super().__init__(text, file, line, field, message)
        self.file = file
        self.line = line
        self.field = field or ""
        self.message = text if message is None else message

    @classmethod
    def make(cls, file: str | os.PathLike, message: str, line: int | None = None,
             field: str = "") -> ScenarioError:
        """An error laid out as the core lays out its own (`file:line: field: message`)."""
        file = str(file)
        text = file + (f":{line}" if line is not None else "") + (f": {field}" if field else "")
        return cls(f"{text}: {message}", file, line, field, message)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class CoreError(Exception):
    """The simulation core broke an invariant, or could not go on (a run that makes no progress
    in simulated time). The message is the core's own."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class SweepError(Exception):
    """A sweep that finished with some points failed (docs/python.md, Sweeps under faults).

    The other points finished and are in the sweep's directory (a rerun reuses them and tries
    the failed ones again). `failures`: (point, message) pairs, the point as a dict of its
    values; `table`: the finished points' rows (a polars DataFrame, or None if none finished).
    `str(e)` is one line."""

    def __init__(self, failures: list[tuple[dict, str]], total: int, table=None):
        super().__init__(failures, total)
        self.failures = failures
        self.total = total
        self.table = table

    def __reduce__(self):
        return (type(self), (self.failures, self.total, self.table))

    def __str__(self) -> str:
        parts = "; ".join(f"{point_label(p)}: {m}" for p, m in self.failures)
        return f"{len(self.failures)} of {self.total} sweep points failed: {parts}"


class SweepBusyError(OSError):
    """The sweep's output directory is in use by another sweep (its lock is held)."""


def point_label(point: dict) -> str:
    """A sweep point as `key=value` pairs, for messages."""
    return " ".join(f"{k}={v}" for k, v in point.items())


class BudgetWarning(UserWarning):
    """A run that is allowed but large: it will write more than `api.OUTPUT_NOTICE_BYTES` of
    results, or its events per simulated second may be so many that every simulated second
    takes minutes (docs/limits.md)."""


def _position(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    return f"byte offset {offset} (line {line})"


def read_scenario(path: str | os.PathLike, limit: int = MAX_SCENARIO_BYTES) -> str:
    """The text of scenario file `path`; every failure is a one-line `ScenarioError`.

    Accepted: UTF-8, with or without a byte-order mark (dropped). Refused: a missing path, a
    directory, a file that cannot be read (permissions), one larger than `limit` bytes, one
    holding NUL bytes (a binary), UTF-16/32 (by its byte-order mark) and invalid UTF-8, each
    naming the byte offset where it fails."""
    p = Path(path)
    try:
        st = os.stat(p)
        if stat.S_ISDIR(st.st_mode):
            raise ScenarioError.make(p, "is a directory, not a scenario file")
        if not stat.S_ISREG(st.st_mode):
            raise ScenarioError.make(p, "is not a regular file (a device, pipe or socket)")
        with open(p, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise ScenarioError.make(p, "no such file") from None
    except PermissionError:
        raise ScenarioError.make(p, "cannot be read: permission denied") from None
    except OSError as e:
        raise ScenarioError.make(p, f"cannot be read: {e.strerror or e}") from None
    if len(data) > limit:
        raise ScenarioError.make(
            p, f"is larger than the {limit // (1024 * 1024)} MiB limit for a scenario file")
    for bom, name in ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                      (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")):
        if data.startswith(bom):
            raise ScenarioError.make(p, f"is {name} text (byte-order mark at byte offset 0); "
                                        "save it as UTF-8", line=1)
    skip = 3 if data.startswith(b"\xef\xbb\xbf") else 0  # a UTF-8 byte-order mark
    nul = data.find(b"\0")
    if nul >= 0:
        raise ScenarioError.make(p, "is a binary file (or UTF-16/32 text without a byte-order "
                                    f"mark), not TOML: a NUL byte at {_position(data, nul)}",
                                 line=data.count(b"\n", 0, nul) + 1)
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as e:
        off = skip + e.start
        raise ScenarioError.make(p, f"is not UTF-8 text: invalid byte 0x{data[off]:02x} at "
                                    f"{_position(data, off)}",
                                 line=data.count(b"\n", 0, off) + 1) from None
