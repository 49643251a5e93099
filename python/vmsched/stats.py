"""Spread and significance over seeds (issue 14 item 1): what every multi-seed result reports.

A figure that ran under several seeds is summarised by its mean, the 95 % confidence interval of
that mean (Student's t with n − 1 degrees of freedom) and its coefficient of variation (sample
standard deviation over the mean). Two figures are compared with Welch's two-sample t-test
(unequal variances; the Welch–Satterthwaite degrees of freedom), which returns a verdict in words:

    20 ms and 128 ms: indistinguishable (p = 0.41, n = 5 each)
    20 ms > 128 ms by 3.1 % ± 0.8 % (p = 0.002, n = 5 each)

A ranking is stated only where the difference is significant at `ALPHA` (0.05, two-sided). When
one result makes several comparisons, `compare_all` applies Holm's step-down correction over
them (it keeps the family-wise error rate at α; Holm 1979), and the verdict shows the adjusted p.
The quantiles and the test's p come from scipy's Student's t (`scipy.special.stdtrit` and
`stdtr`, which `scipy.stats.t` calls, without `scipy.stats`' second of import time; the p is
the one `scipy.stats.ttest_ind(equal_var=False)` gives, which a test checks).

Zero spread: a figure that every seed gives the same value has a CI of 0. Two such figures that
differ are reported as different (p = 0: no seed disagrees), and two that are equal as
indistinguishable (p = 1); a sample of one seed cannot be tested ("cannot tell").

`aggregate` turns a long table of per-seed values (`vmsched sweep`'s rows, `run --seeds`'s) into
one row per group with n, mean, ci95 (the half-width), ci_lo, ci_hi, cv, std, min and max.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable, Sequence

from vmsched._lazy import lazy

if TYPE_CHECKING:
    import polars as pl
else:
    pl = lazy("polars")


#: The significance level of every comparison (two-sided).
ALPHA = 0.05
#: The confidence level of every interval.
CONFIDENCE = 0.95


def t_quantile(df: float, confidence: float = CONFIDENCE) -> float:
    """Student's t quantile for a two-sided interval of `confidence` with `df` degrees of
    freedom (`scipy.special.stdtrit`, what `scipy.stats.t.ppf` calls); NaN unless df > 0."""
    from scipy.special import stdtrit

    if not df > 0:
        return math.nan
    return float(stdtrit(df, 0.5 + confidence / 2))


def t_two_sided_p(t: float, df: float) -> float:
    """The two-sided p-value of Student's t statistic `t` with `df` degrees of freedom
    (`scipy.special.stdtr`, the t distribution's CDF)."""
    from scipy.special import stdtr

    return float(2 * stdtr(df, -abs(t)))


@dataclass(frozen=True)
class Summary:
    """A figure over n seeds: mean, sample standard deviation, the half-width of the mean's
    confidence interval (`ci95`; NaN for n = 1), coefficient of variation (std / |mean|; NaN for
    a zero mean), min and max."""

    n: int
    mean: float
    std: float
    ci95: float
    cv: float
    min: float
    max: float

    @property
    def ci_lo(self) -> float:
        return self.mean - self.ci95

    @property
    def ci_hi(self) -> float:
        return self.mean + self.ci95

    def text(self, fmt: str = ".4g", unit: str = "") -> str:
        """`mean ± ci95 unit (CV x %, n = N)`; a single value as `mean unit (n = 1)`."""
        u = f" {unit}" if unit and unit != "-" else ""
        if self.n < 2:
            return f"{self.mean:{fmt}}{u} (n = 1)"
        return (f"{self.mean:{fmt}} ± {self.ci95:{fmt}}{u} "
                f"(CV {100 * self.cv:.2f} %, n = {self.n})")


def summarize(values: Iterable[float], confidence: float = CONFIDENCE) -> Summary:
    """The `Summary` of the values of several seeds (at least one)."""
    v = [float(x) for x in values]
    n = len(v)
    if n == 0:
        raise ValueError("summarize: no values")
    lo, hi = min(v), max(v)
    if lo == hi:
        # Every seed gave the same value: exactly no spread (the rounded quotient of the sum
        # can miss the value by an ulp and leave a spread of 1e-14).
        mean, std = lo, 0.0
    else:
        mean = math.fsum(v) / n
        std = math.sqrt(math.fsum((x - mean) ** 2 for x in v) / (n - 1)) if n > 1 else 0.0
    half = t_quantile(n - 1, confidence) * std / math.sqrt(n) if n > 1 else math.nan
    cv = std / abs(mean) if mean else math.nan
    return Summary(n=n, mean=mean, std=std, ci95=half, cv=cv, min=lo, max=hi)


def _summary_or_none(v: list[float], confidence: float) -> Summary:
    """`summarize`, or an all-NaN summary of n = 0 for no values (nothing to compare)."""
    if v:
        return summarize(v, confidence)
    nan = math.nan
    return Summary(n=0, mean=nan, std=nan, ci95=nan, cv=nan, min=nan, max=nan)


@dataclass(frozen=True)
class Comparison:
    """Welch's test of `a` against `b` (labelled `a_label`, `b_label`).

    `diff`: mean(a) − mean(b) and `diff_ci95` the half-width of its confidence interval (Welch's
    degrees of freedom `df`); `rel_pct` and `rel_ci_pct`: the same relative to |mean(b)|, in %
    (the denominator's own uncertainty left out); `p`: the two-sided p-value; `p_adj`: after the
    correction for `comparisons` comparisons (`correction` names it; equal to `p` for one
    comparison); `significant`: `p_adj` < `alpha`."""

    a_label: str
    b_label: str
    a: Summary
    b: Summary
    diff: float
    diff_ci95: float
    rel_pct: float
    rel_ci_pct: float
    df: float
    p: float
    p_adj: float
    alpha: float = ALPHA
    comparisons: int = 1
    correction: str = "none"

    @property
    def testable(self) -> bool:
        return self.a.n >= 2 and self.b.n >= 2

    @property
    def significant(self) -> bool:
        return self.testable and self.p_adj < self.alpha

    @property
    def sign(self) -> str:
        """">" or "<" if significant (a's mean against b's), else "="."""
        if not self.significant:
            return "="
        return ">" if self.diff > 0 else "<"

    def verdict(self) -> str:
        """The comparison in words: "A > B by x % ± y % (p = …)", "A and B: indistinguishable
        (p = …, n = …)", or "A and B: cannot tell (n = 1)"."""
        a, b = self.a_label, self.b_label
        if not self.testable:
            return f"{a} and {b}: cannot tell (n = {self.a.n} and {self.b.n}; a test needs 2 each)"
        n = f"n = {self.a.n} each" if self.a.n == self.b.n else f"n = {self.a.n} and {self.b.n}"
        p = self.p_text()
        if not self.significant:
            return f"{a} and {b}: indistinguishable ({p}, {n})"
        if math.isfinite(self.rel_pct):
            by = f"{abs(self.rel_pct):.1f} % ± {self.rel_ci_pct:.1f} %"
        else:
            by = f"{abs(self.diff):.4g} ± {self.diff_ci95:.4g}"
        return f"{a} {self.sign} {b} by {by} ({p}, {n})"


    def p_text(self) -> str:
        """"p = 0.002", with the adjusted p if corrected ("p = 0.002, Holm-adjusted 0.012 over
        6"), or "p = 0: no spread over the seeds"."""
        if self.p == 0:
            return "p = 0: no spread over the seeds"
        p = f"p = {_p(self.p)}"
        if self.comparisons > 1 and self.correction != "none":
            p += f", {self.correction}-adjusted {_p(self.p_adj)} over {self.comparisons}"
        return p


def _p(p: float) -> str:
    if p < 0.001:
        return f"{p:.1e}"
    return f"{p:.3f}" if p < 0.1 else f"{p:.2f}"


def compare(a: Iterable[float], b: Iterable[float], a_label: str = "a", b_label: str = "b",
            alpha: float = ALPHA, confidence: float = CONFIDENCE) -> Comparison:
    """Welch's two-sample t-test of the values `a` against `b` (as `scipy.stats.ttest_ind` with
    `equal_var=False`), with the confidence interval of the difference of the means."""
    av, bv = [float(x) for x in a], [float(x) for x in b]
    sa, sb = _summary_or_none(av, confidence), _summary_or_none(bv, confidence)
    diff = sa.mean - sb.mean
    if sa.n < 2 or sb.n < 2:
        p, df, half = math.nan, math.nan, math.nan
    else:
        va, vb = sa.std ** 2 / sa.n, sb.std ** 2 / sb.n
        se2 = va + vb
        if se2 == 0:
            # Every seed gives the same value on both sides.
            p, df, half = (1.0 if diff == 0 else 0.0), math.nan, 0.0
        else:
            df = se2 ** 2 / ((va ** 2 / (sa.n - 1) if va else 0.0)
                             + (vb ** 2 / (sb.n - 1) if vb else 0.0))
            half = t_quantile(df, confidence) * math.sqrt(se2)
            # Welch's t statistic against Student's t with the Welch–Satterthwaite df: what
            # scipy.stats.ttest_ind(equal_var=False) returns, without its precision warning
            # when one side's seeds agree exactly.
            p = t_two_sided_p(diff / math.sqrt(se2), df)
    base = abs(sb.mean)
    rel = 100 * diff / base if base else math.nan
    rel_ci = 100 * half / base if base else math.nan
    return Comparison(a_label=a_label, b_label=b_label, a=sa, b=sb, diff=diff, diff_ci95=half,
                      rel_pct=rel, rel_ci_pct=rel_ci, df=df, p=p, p_adj=p, alpha=alpha)


def holm(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """Holm's step-down correction over `comparisons` (the untestable ones left out of the
    count): the i-th smallest of m p-values is multiplied by m − i (from 0), made monotone and
    capped at 1. Returns the comparisons in their order with `p_adj`, `comparisons` and
    `correction` set."""
    idx = [i for i, c in enumerate(comparisons) if c.testable]
    m = len(idx)
    out = list(comparisons)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: comparisons[i].p)):
        running = max(running, min(1.0, (m - rank) * comparisons[i].p))
        out[i] = replace(comparisons[i], p_adj=running, comparisons=m,
                         correction="Holm" if m > 1 else "none")
    return out


def compare_all(pairs: Iterable[tuple[str, Iterable[float], str, Iterable[float]]],
                alpha: float = ALPHA, correction: str = "holm") -> list[Comparison]:
    """Compares each (a_label, a_values, b_label, b_values) of `pairs` (Welch) and corrects the
    p-values for their number: `correction` "holm" (default) or "none"."""
    cs = [compare(av, bv, al, bl, alpha=alpha) for al, av, bl, bv in pairs]
    if correction == "holm":
        return holm(cs)
    if correction != "none":
        raise ValueError(f"correction: 'holm' or 'none', got '{correction}'")
    return cs


def family_note(comparisons: Sequence[Comparison]) -> str:
    """One line saying how the verdicts above were decided: α, the number of comparisons and
    the correction."""
    m = sum(c.testable for c in comparisons)
    alpha = comparisons[0].alpha if comparisons else ALPHA
    corr = ("Holm-corrected" if any(c.correction == "Holm" for c in comparisons)
            else "uncorrected")
    return (f"Welch's t-test, two-sided, α = {alpha:g}, {m} comparison{'s' if m != 1 else ''}, "
            f"{corr}: a ranking (> or <) is stated only where significant.")


#: The columns `aggregate` adds per group.
AGG_COLUMNS = ("n", "mean", "ci95", "ci_lo", "ci_hi", "cv", "std", "min", "max")


def aggregate(df: pl.DataFrame, by: list[str], value: str = "value") -> pl.DataFrame:
    """One row per group of `by` (in first-seen order) with the `AGG_COLUMNS` of `value` over
    the group's rows (the seeds): n, mean, the 95 % CI's half-width and bounds, CV, std, min,
    max. A group of one row has a NaN CI and a zero std."""
    rows = []
    for key, g in df.group_by(by, maintain_order=True):
        vals = [x for x in g[value].to_list() if x is not None]
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        if not vals:
            rows.append({**row, **{c: None for c in AGG_COLUMNS}})
            continue
        s = summarize(vals)
        rows.append({**row, "n": s.n, "mean": s.mean, "ci95": s.ci95, "ci_lo": s.ci_lo,
                     "ci_hi": s.ci_hi, "cv": s.cv, "std": s.std, "min": s.min, "max": s.max})
    schema = {c: df.schema[c] for c in by}
    schema.update({"n": pl.Int64, **{c: pl.Float64 for c in AGG_COLUMNS if c != "n"}})
    return pl.DataFrame(rows, schema=schema)
