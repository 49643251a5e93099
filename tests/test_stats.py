"""Spread and significance (vmsched.stats, docs/statistics.md): the confidence interval of a known
sample, Welch's verdict as an effect grows, Holm's correction, and the multi-seed outputs of
`run --seeds`, `sweep` and their tables."""

import json
import math
from dataclasses import replace

import polars as pl
import pytest

import vmsched
from vmsched import stats
from vmsched.cli import main

#: Student's t quantiles at 97.5 % (two-sided 95 %), from a printed table.
T975 = {1: 12.7062047, 2: 4.3026527, 4: 2.7764451}


def test_ci_of_a_known_sample():
    # mean 12; deviations -2, 0, 2, -1, 1: sample variance 10 / 4; t(4) = 2.776.
    s = stats.summarize([10, 12, 14, 11, 13])
    std = math.sqrt(10 / 4)
    assert s.n == 5 and s.mean == 12
    assert s.std == pytest.approx(std)
    assert s.ci95 == pytest.approx(T975[4] * std / math.sqrt(5), rel=1e-6)
    assert (s.ci_lo, s.ci_hi) == pytest.approx((12 - s.ci95, 12 + s.ci95))
    assert s.cv == pytest.approx(std / 12)
    assert (s.min, s.max) == (10, 14)
    assert stats.t_quantile(1) == pytest.approx(T975[1], rel=1e-6)
    one = stats.summarize([3.0])
    assert one.n == 1 and math.isnan(one.ci95) and one.std == 0


def test_the_verdict_flips_from_indistinguishable_to_significant_as_the_effect_grows():
    noise = [0.0, 1.0, -1.0, 0.5, -0.5]
    base = [100 + e for e in noise]
    verdicts = {}
    for effect in (0.1, 0.5, 1.0, 2.0, 5.0):
        other = [100 + effect + e for e in reversed(noise)]
        verdicts[effect] = stats.compare(other, base, "fast", "slow")
    small, large = verdicts[0.1], verdicts[5.0]
    assert not small.significant and small.sign == "="
    assert small.verdict().startswith("fast and slow: indistinguishable (p = ")
    assert small.verdict().endswith("n = 5 each)")
    assert large.significant and large.sign == ">"
    assert large.verdict().startswith("fast > slow by 5.0 % ± ")
    # p falls as the effect grows; once significant, it stays so.
    ps = [verdicts[e].p for e in sorted(verdicts)]
    assert ps == sorted(ps, reverse=True)
    flags = [verdicts[e].significant for e in sorted(verdicts)]
    assert flags == sorted(flags) and flags[0] is False and flags[-1] is True
    # The other way round, the sign turns.
    assert stats.compare(base, [100 + 5 + e for e in noise], "slow", "fast").sign == "<"


def test_welch_interval_and_degrees_of_freedom_by_hand():
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    c = stats.compare(a, b)
    va, vb = stats.summarize(a).std ** 2 / 4, stats.summarize(b).std ** 2 / 6
    df = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 5)
    assert c.df == pytest.approx(df)
    assert c.diff == pytest.approx(2.5 - 7.0)
    from scipy.stats import t

    assert c.diff_ci95 == pytest.approx(t.ppf(0.975, df) * math.sqrt(va + vb))
    tstat = c.diff / math.sqrt(va + vb)
    assert c.p == pytest.approx(2 * t.sf(abs(tstat), df))
    from scipy.stats import ttest_ind

    assert c.p == pytest.approx(ttest_ind(a, b, equal_var=False).pvalue)


def test_holm_adjusts_the_sorted_p_values_step_down():
    base = stats.compare([1, 2, 3], [1, 2, 3])
    cs = [replace(base, p=p, p_adj=p) for p in (0.01, 0.04, 0.03)]
    adj = stats.holm(cs)
    # 0.01 × 3 = 0.03; 0.03 × 2 = 0.06; 0.04 × 1 = 0.04, raised to 0.06 (monotone).
    assert [c.p_adj for c in adj] == pytest.approx([0.03, 0.06, 0.06])
    assert [c.significant for c in adj] == [True, False, False]
    assert all(c.comparisons == 3 and c.correction == "Holm" for c in adj)
    assert "Holm-adjusted 0.060 over 3" in adj[1].verdict()
    note = stats.family_note(adj)
    assert "3 comparisons" in note and "Holm-corrected" in note and "α = 0.05" in note


def test_zero_spread_and_single_seeds():
    same = stats.compare([5, 5, 5], [5, 5, 5], "x", "y")
    assert not same.significant and same.p == 1.0
    apart = stats.compare([6, 6, 6], [5, 5, 5], "x", "y")
    assert apart.significant and apart.verdict().startswith("x > y by 20.0 % ± 0.0 %")
    one = stats.compare([6], [5, 5], "x", "y")
    assert not one.significant and "cannot tell" in one.verdict()


def test_aggregate_groups_in_first_seen_order():
    df = pl.DataFrame({"k": [2, 1, 2, 1, 2], "value": [1.0, 10.0, 3.0, 12.0, 5.0]})
    agg = stats.aggregate(df, ["k"])
    assert agg["k"].to_list() == [2, 1]
    assert agg["n"].to_list() == [3, 2]
    assert agg["mean"].to_list() == pytest.approx([3.0, 11.0])
    assert agg["ci95"][1] == pytest.approx(T975[1] * math.sqrt(2) / math.sqrt(2))
    assert agg["cv"][0] == pytest.approx(2.0 / 3.0)


SHORT = ["--set", "run.duration_ms=300", "--set", "run.warmup_ms=50"]


def test_run_seeds_writes_each_seed_and_a_summary(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "seed000_context1_ratelimit", "--seeds", "3", "--jobs", "1",
                 *SHORT, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "3 seeds (1..3)" in text and "95 % CI" in text
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["seed-1", "seed-2", "seed-3"]
    for s in (1, 2, 3):
        assert (out / f"seed-{s}" / "workloads.parquet").is_file()
        assert json.loads((out / f"seed-{s}" / "summary.json").read_text())[
            "overrides"]["run.seed"] == s
    per = pl.read_csv(out / "per_seed.csv")
    assert sorted(per["seed"].unique().to_list()) == [1, 2, 3]
    summ = pl.read_parquet(out / "summary.parquet")
    assert summ.equals(pl.read_csv(out / "summary.csv", schema=summ.schema))
    ctx = summ.filter((pl.col("name") == "context1") & (pl.col("kind") != "vcpu")).row(
        0, named=True)
    scores = per.filter((pl.col("name") == "context1") & (pl.col("kind") != "vcpu"))["value"]
    assert ctx["n"] == 3 and ctx["mean"] == pytest.approx(scores.mean())
    assert ctx["ci95"] == pytest.approx(T975[2] * scores.std() / math.sqrt(3))
    assert ctx["cv"] == pytest.approx(scores.std() / scores.mean())
    # Each seed is the run a single --seed S makes.
    one = vmsched.run("seed000_context1_ratelimit", seed=2,
                      set={"run.duration_ms": 300, "run.warmup_ms": 50})
    assert scores[1] == one.figure("context1")["value"]


def test_run_seeds_in_the_api_counts_up_from_the_seed():
    res = vmsched.run("seed000_context1_ratelimit", seed=7, seeds=2, jobs=1,
                      set={"run.duration_ms": 200, "run.warmup_ms": 20})
    assert isinstance(res, vmsched.SeedRuns) and res.seeds == [7, 8]
    assert [dict(r.overrides)["run.seed"] for r in res.results] == [7, 8]
    assert res.figure("context1").n == 2
    # One seed keeps a plain Result.
    assert isinstance(vmsched.run("seed000_context1_ratelimit", seeds=1,
                                  set={"run.duration_ms": 100, "run.warmup_ms": 10}), vmsched.Result)
    with pytest.raises(ValueError, match="trace"):
        vmsched.run("seed000_context1_ratelimit", seeds=2, trace="x.pftrace")


def test_run_seeds_refuses_single_run_views(capsys):
    assert main(["run", "seed000_context1_ratelimit", "--seeds", "2", "--xenmon"]) == 2
    assert "--xenmon shows one run" in capsys.readouterr().out


def test_sweep_summary_has_ci_and_cv_columns(tmp_path):
    out = tmp_path / "s"
    df = vmsched.sweep("seed000_context1_ratelimit", {"host.ratelimit_us": [1000, 20000]},
                       seeds=2, jobs=1, out=out, progress=False,
                       set={"run.duration_ms": 300, "run.warmup_ms": 50})
    summ = pl.read_parquet(out / "summary.parquet")
    assert {"mean", "ci95", "ci_lo", "ci_hi", "cv", "n"} <= set(summ.columns)
    assert pl.read_csv(out / "summary.csv").height == summ.height
    for r in summ.filter(pl.col("workload") == "context1").iter_rows(named=True):
        v = df.filter((pl.col("workload") == "context1")
                      & (pl.col("host.ratelimit_us") == r["host.ratelimit_us"]))["value"]
        assert r["n"] == 2 and r["mean"] == pytest.approx(v.mean())
        assert r["ci95"] == pytest.approx(T975[1] * v.std() / math.sqrt(2))
        assert r["cv"] == pytest.approx(v.std() / v.mean())


def test_no_values_on_one_side_cannot_be_compared():
    c = stats.compare([], [1.0, 2.0], "x", "y")
    assert c.a.n == 0 and not c.testable and not c.significant
    assert "cannot tell (n = 0 and 2" in c.verdict()


def test_identical_seeds_have_exactly_no_spread():
    # Five seeds of seed 002 giving 107.90132478632478 ms each: the sum divided by 5 misses the
    # value by an ulp, which left a spread of 1e-14 and a p of 1e-63 instead of "no spread".
    v = [107.90132478632478] * 5
    assert math.fsum(v) / 5 != v[0]
    s = stats.summarize(v)
    assert s.std == 0 and s.ci95 == 0 and s.mean == v[0]
    c = stats.compare(v, [162.0826923076923] * 5)
    assert c.p == 0 and "no spread" in c.verdict()
