"""Parameter spaces and designs of experiments, for `vmsched sweep --design` and `vmsched tune`.

A parameter is a scenario field (a dotted key, as `--set` takes it) with a range or a list of
choices, written `KEY=LO..HI` (integers if both ends are, else floats), `KEY=LO..HI:log` (sampled
on a log scale; LO > 0) or `KEY=A,B,C` (categorical: the values as listed). `parse_param` reads
that text, `Param` holds it.

Designs (`points`): `grid` is the Cartesian product of lists (ranges are refused: a grid needs
listed values); `random` draws each point's values independently and uniformly (on the log
scale where asked); `lhs` is a Latin hypercube (McKay, Beckman and Conover, 1979): the unit
interval of every parameter is cut into `samples` equal strata, each stratum is used by exactly
one point, and the strata of different parameters are paired by independent random
permutations. Both draw from Python's `random.Random(seed)`, so the same parameters, samples and
seed give the same points on every machine.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

DESIGNS = ("grid", "random", "lhs")


@dataclass(frozen=True)
class Param:
    """One searched parameter: `kind` "int" or "float" with `low`..`high` (inclusive) and
    `log`, or "cat" with `choices`."""

    name: str
    kind: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple = ()

    def __post_init__(self):
        where = f"--param {self.name}"
        if not self.name:
            raise ValueError(f"{where}: the key is empty")
        if self.kind == "cat":
            if not self.choices:
                raise ValueError(f"{where}: no values")
            return
        if self.kind not in ("int", "float"):
            raise ValueError(f"{where}: unknown kind {self.kind!r}")
        if self.low is None or self.high is None or not self.low <= self.high:
            raise ValueError(f"{where}: the range {self.low}..{self.high} is empty "
                             "(write LO..HI with LO <= HI)")
        if self.log and self.low <= 0:
            raise ValueError(f"{where}: a log scale needs LO > 0, got {self.low}")

    def from_unit(self, u: float) -> Any:
        """The value at position `u` in [0, 1) of the parameter's range (or of its choices)."""
        if self.kind == "cat":
            return self.choices[min(int(u * len(self.choices)), len(self.choices) - 1)]
        lo, hi = float(self.low), float(self.high)
        if self.kind == "int":
            hi += 1.0  # every integer of LO..HI gets an equal share of [0, 1)
        if self.log:
            v = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
        else:
            v = lo + u * (hi - lo)
        if self.kind == "int":
            return int(min(max(math.floor(v), self.low), self.high))
        return min(max(v, self.low), self.high)

    def text(self) -> str:
        """The parameter as `--param` takes it."""
        if self.kind == "cat":
            return f"{self.name}=" + ",".join(str(c) for c in self.choices)
        return f"{self.name}={self.low}..{self.high}" + (":log" if self.log else "")


def _number(text: str, where: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{where}: '{text}' is not a number") from None


def parse_param(item: str, value=None) -> Param:
    """`KEY=LO..HI[:log]` or `KEY=A,B,C` as a `Param`. `value(key, text)` types categorical
    values (default: int, float, else the text). Raises `ValueError` naming the item."""
    if "=" not in item:
        raise ValueError(f"--param '{item}': expected KEY=LO..HI, KEY=LO..HI:log or KEY=A,B,C")
    key, spec = (s.strip() for s in item.split("=", 1))
    where = f"--param {key}" if key else f"--param '{item}'"
    if not key:
        raise ValueError(f"{where}: the key is empty")
    log = False
    if spec.endswith(":log"):
        spec, log = spec[: -len(":log")].strip(), True
    if ".." in spec:
        lo_t, hi_t = (s.strip() for s in spec.split("..", 1))
        lo, hi = _number(lo_t, where), _number(hi_t, where)
        kind = "int" if isinstance(lo, int) and isinstance(hi, int) else "float"
        return Param(key, kind, lo, hi, log)
    if log:
        raise ValueError(f"{where}: ':log' applies to a range LO..HI")
    parts = [p.strip() for p in spec.split(",")]
    if not spec or any(p == "" for p in parts):
        raise ValueError(f"{where}: expected LO..HI, LO..HI:log or a list A,B,C; got '{spec}'")
    value = value or (lambda _k, t: _auto(t))
    return Param(key, "cat", choices=tuple(value(key, p) for p in parts))


def _auto(text: str):
    try:
        return int(text)
    except ValueError:
        pass
    try:
        f = float(text)
        return f if repr(f) == text else text
    except ValueError:
        return text


def as_params(space: Mapping[str, Any] | Iterable[Param | str]) -> list[Param]:
    """Parameters from a mapping (`{"k": "0..100"}`, `{"k": [1, 2, 3]}`, `{"k": (0, 100)}`, a
    `Param`) or from a list of `Param`s or `--param` strings."""
    if isinstance(space, Mapping):
        out = []
        for k, v in space.items():
            if isinstance(v, Param):
                out.append(v if v.name == k else Param(k, v.kind, v.low, v.high, v.log,
                                                       v.choices))
            elif isinstance(v, str):
                out.append(parse_param(f"{k}={v}"))
            elif isinstance(v, tuple) and len(v) == 2 and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
                kind = "int" if all(isinstance(x, int) for x in v) else "float"
                out.append(Param(str(k), kind, v[0], v[1]))
            else:
                vals = tuple(v)
                out.append(Param(str(k), "cat", choices=vals))
        return out
    return [p if isinstance(p, Param) else parse_param(p) for p in space]


def points(params: Sequence[Param], design: str = "grid", samples: int | None = None,
           seed: int = 0) -> list[dict]:
    """The design's points, each a {key: value} dict, in a fixed order."""
    if design not in DESIGNS:
        raise ValueError(f"--design: unknown design '{design}' (known: {', '.join(DESIGNS)})")
    if design == "grid":
        for p in params:
            if p.kind != "cat":
                raise ValueError(f"--param {p.name}: a range ({p.low}..{p.high}) needs "
                                 "--design random or lhs with --samples; a grid takes listed "
                                 "values")
        if samples is not None:
            raise ValueError("--samples is for --design random or lhs")
        keys = [p.name for p in params]
        return [dict(zip(keys, combo)) for combo in itertools.product(*(p.choices
                                                                          for p in params))]
    if samples is None or samples < 1:
        raise ValueError(f"--design {design} needs --samples N (N >= 1)")
    rng = random.Random(seed)
    if design == "random":
        return [{p.name: p.from_unit(rng.random()) for p in params} for _ in range(samples)]
    # Latin hypercube: a permutation of the strata per parameter, a uniform draw in each.
    cols = []
    for p in params:
        strata = list(range(samples))
        rng.shuffle(strata)
        cols.append([p.from_unit((s + rng.random()) / samples) for s in strata])
    return [{p.name: cols[j][i] for j, p in enumerate(params)} for i in range(samples)]
