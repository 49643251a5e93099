"""Seed 000 (VA Linux 2026): Context1 against the Credit2 ratelimit, and the mechanism behind it.

The short form runs 2 s of simulated time per point; VMSCHED_SLOW=1 runs the full 10 s form.
What is asserted is what the document's mechanism requires of a faithful model (steal charged to
the running task, wakeup preemption at a gap above 3 ms, 9 ms sleeper credit), plus the ordering
among 1, 5 and 20 ms the document reports. The document's "20 ms beats 128 ms" is NOT asserted:
the model finds them within about 1 % of each other; docs/seed000.md explains why.
"""

import pytest

import vmsched
from vmsched.reproduce import _one

PINNED = "seed000_context1_ratelimit"


def point(version, r_ms, duration_ms=2000, scen=PINNED, case="pinned pair", seed=None):
    return _one((case, scen, version, r_ms, duration_ms, *([] if seed is None else [seed])))


def test_point_release_decides_the_slice():
    # ERRATA X3: on 4.20.0 ratelimits of 1 and 5 ms both give ~10 ms slices, so identical runs;
    # on 4.20.2 the slice is the ratelimit.
    # With exact timers the two runs were identical; with the timer jitter (run.vary) a wake-up
    # now and then lands inside the 1-5 ms ratelimit window after a switch, where the two
    # differ, so the scores agree to 2 % (seed 1: 29,410 and 29,757 lps) and the slices are
    # the same.
    a, b = point("4.20.0", 1), point("4.20.0", 5)
    assert abs(a["score_lps"] - b["score_lps"]) < 0.02 * a["score_lps"]
    assert abs(a["vcpu0_preemptions"] - b["vcpu0_preemptions"]) <= 0.02 * a["vcpu0_preemptions"]
    assert 9.9 <= a["vcpu0_worst_wait_ms"] <= 10.1
    c, d = point("4.20.2", 1), point("4.20.2", 5)
    assert 0.99 <= c["vcpu0_worst_wait_ms"] <= 1.01 and 4.99 <= d["vcpu0_worst_wait_ms"] <= 5.01
    assert c["vcpu0_preemptions"] > 4 * d["vcpu0_preemptions"]


SEEDS = range(1, 7)


def seeded_points(version, r_ms, duration_ms=2000):
    """`point` once per seed of SEEDS."""
    return [point(version, r_ms, duration_ms, seed=seed) for seed in SEEDS]


def mean(xs):
    return sum(xs) / len(xs)


def test_20ms_beats_1_and_5ms_through_the_fast_pattern():
    # At 1 and 5 ms the share of fast round trips and the score vary much from seed to seed
    # (1 ms, 2 s runs: 63 % to 92 % fast, 20 ms ahead by 1.5 % to 10 %), so the ordering is
    # asserted on the mean over six seeds; 20 ms is in the fast pattern on every seed.
    runs = {r: seeded_points("4.20.2", r) for r in (1, 5, 20)}
    for row in runs[20]:
        assert row["fast_pct"] > 95, row
        assert row["gap_over_gran_pct"] > 90
    score = {r: mean([row["score_lps"] for row in runs[r]]) for r in runs}
    fast = {r: mean([row["fast_pct"] for row in runs[r]]) for r in runs}
    assert score[20] > 1.03 * score[1]
    assert score[20] > 1.03 * score[5]
    assert fast[5] < 85 and fast[1] < 85


def test_the_mechanism_needs_steal_charged_to_the_running_task():
    # No warm-up: a reset of the counters between a round trip's sleep and its count makes one
    # round trip look fast (the derived fast/slow split is off by one at the reset).
    for r in (5000, 20000):
        res = vmsched.run(PINNED, set={"host.version": "4.20.2", "host.ratelimit_us": r,
                                      "run.duration_ms": 1500, "run.warmup_ms": 0,
                                      "domain.0.kernel.paravirt_time_accounting": True})
        assert res.counter("context1", "fast") == 0, "with steal accounting there is no jump"


def test_the_mechanism_needs_interference():
    res = vmsched.run(PINNED, set={"run.duration_ms": 1500, "domain.1.workload": []})
    assert res.counter("context1", "fast") == 0


def test_a_lone_unpinned_pair_never_shares_a_run_queue():
    # ERRATA L1: sync wake-ups return to the wakee's idle previous vCPU; the pair ping-pongs and
    # the vruntime comparison of the talk never happens.
    row = point("4.20.2", 20, duration_ms=1000, scen="seed000_unpinned", case="lone")
    assert row["fast"] == 0


def test_n_copy_pairs_co_locate():
    row = point("4.20.2", 20, duration_ms=1000, scen="seed000_ncopy", case="ncopy")
    assert row["fast_pct"] > 50


@pytest.mark.slow
def test_full_length_ordering():
    rows = {r: point("4.20.2", r, duration_ms=10000) for r in (1, 5, 20, 128)}
    assert rows[20]["score_lps"] > 1.03 * max(rows[1]["score_lps"], rows[5]["score_lps"])
    # 20 and 128 ms: the model finds them equal within 2 % (the document: 20 ms best).
    assert abs(rows[20]["score_lps"] / rows[128]["score_lps"] - 1) < 0.02


def test_declaration_order_changes_no_figure_beyond_the_seed_spread(tmp_path):
    # Issue 10 item 9: the pinned pair with domU2 declared before domU1. Ties that upstream
    # breaks by no rule (which domain boots first, the guests' tick phases) are drawn from the
    # seed per domain name (docs/design.md, Ties), so the ranking of the ratelimits is the same
    # and each figure's mean over the seeds moves by no more than its seed-to-seed spread.
    from pathlib import Path

    import polars as pl

    src = (Path(vmsched.__file__).parent / "scenarios" / f"{PINNED}.toml").read_text()
    head, d1, d2 = src.split("[[domain]]")
    swapped = tmp_path / "swapped.toml"
    swapped.write_text(head + "[[domain]]" + d2.rstrip() + "\n\n[[domain]]" + d1)
    assert swapped.read_text().index('"domU2"') < swapped.read_text().index('"domU1"')

    def figures(scen, r_ms, seed):
        res = vmsched.run(scen, set={"host.version": "4.20.2", "host.ratelimit_us": r_ms * 1000,
                                     "run.duration_ms": 1500, "run.warmup_ms": 150,
                                     "run.seed": seed})
        score = sum(res.workloads.filter(pl.col("kind") == "context1")["value"].to_list())
        v = res.entities.filter(pl.col("name") == "domU1.v0").row(0, named=True)
        return {"score": score, "preemptions": v["preemptions"], "wait_max": v["wait_max_ns"],
                "share": v["cpu_share"]}

    seeds = range(1, 5)
    means = {}
    for name, scen in (("declared", PINNED), ("swapped", str(swapped))):
        for r in (1, 5, 20, 128):
            rows = [figures(scen, r, s) for s in seeds]
            means[name, r] = {k: (mean([x[k] for x in rows]),
                                  max(x[k] for x in rows) - min(x[k] for x in rows))
                              for k in rows[0]}

    def ranking(name):
        return sorted((1, 5, 20, 128), key=lambda r: (-means[name, r]["score"][0], r))

    assert ranking("declared") == ranking("swapped")
    for r in (1, 5, 20, 128):
        for k, (m, spread) in means["declared", r].items():
            assert abs(m - means["swapped", r][k][0]) <= spread, (r, k, m, means["swapped", r][k])


def test_the_quick_reproduction_states_which_comparisons_hold(tmp_path):
    # Issue 14: several seeds per point, and a verdict per comparison of the document's ranking
    # (20 ms against 128, 5 and 1 ms) that states a ranking only where Welch's test, corrected
    # over all of them, finds one.
    import re
    from io import StringIO

    import polars as pl
    from rich.console import Console

    from vmsched.reproductions.seed000 import CASES, QUICK_SEEDS, VERSIONS, comparisons, main

    buf = StringIO()
    assert main(quick=True, jobs=1, out=tmp_path, console=Console(file=buf, width=250)) == 0
    text = buf.getvalue()
    n = len(CASES) * len(VERSIONS) * 3
    assert f"{n} comparisons, Holm-corrected" in text
    verdict = re.compile(r"^  20 ms (and (128|5|1) ms: indistinguishable \(p = "
                         r"|[<>] (128|5|1) ms by [0-9.]+ % ± [0-9.]+ % \(p = )", re.M)
    assert len(verdict.findall(text)) == n
    for case in CASES:
        for v in VERSIONS:
            assert re.search(rf"Simulated {re.escape(case)}, Credit2 {v}: 20 ms best "
                             r"(holds|fails|not shown)", text)
    df = pl.read_csv(tmp_path / "seed000.csv")
    assert sorted(df["seed"].unique().to_list()) == list(range(1, QUICK_SEEDS + 1))
    summ = pl.read_csv(tmp_path / "seed000_summary.csv")
    assert summ["n"].to_list() == [QUICK_SEEDS] * summ.height
    # The printed verdicts are the comparisons of the written runs.
    for case, v, other, c in comparisons(df):
        assert c.verdict() in text
    # The lone unpinned pair cannot show the mechanism (ERRATA L1): at 1 and 5 ms it scores
    # about one loop per slice, twice its 20 ms score on every seed, so the claim fails there.
    assert "Simulated lone unpinned pair, Credit2 4.20.2: 20 ms best fails" in text


def test_the_unixbench_driver_scores_as_run_does():
    # Issue 14 item 2: Context1 run as UnixBench's Run script runs it (passes of fresh
    # processes after idle gaps). Run's score is the geometric mean of count / elapsed over
    # the best two thirds of the passes, so it lies between the worst kept pass's rate and the
    # best pass's.
    from vmsched.reproductions.seed000 import _one_unixbench

    r = _one_unixbench(("pinned pair", PINNED, "4.20.2", 20, (3, 1, 300), 1))
    assert r["pass_min"] > 10_000
    # Elapsed is the pass (1 s) plus at most a round trip and a slice of the other guest.
    assert r["pass_min"] / 1.1 <= r["score_lps"] <= r["pass_max"]
    assert r["window_lps"] == pytest.approx((r["pass_min"] + r["pass_max"]) / 2, rel=0.5)
    # `./Run -c 4` (the shipped seed000_unixbench_ncopy): a pass counts its 4 copies together,
    # each pair on its own vCPU beside a hog: more than twice the pinned pair's score.
    n = _one_unixbench(("N-copy (Run -c 4)", "seed000_unixbench_ncopy", "4.20.2", 20,
                        (3, 1, 300), 1))
    assert n["score_lps"] > 2 * r["score_lps"]
    assert n["pass_min"] / 1.1 <= n["score_lps"] <= n["pass_max"]


def test_the_unixbench_table_states_which_comparisons_hold(tmp_path):
    import re
    from io import StringIO

    import polars as pl
    from rich.console import Console

    from vmsched.reproductions.seed000 import UB_CASES, UB_QUICK_SEEDS, VERSIONS, main_unixbench

    buf = StringIO()
    assert main_unixbench(True, 1, tmp_path, Console(file=buf, width=250)) == 0
    text = buf.getvalue()
    for case in UB_CASES:
        for v in VERSIONS:
            assert re.search(rf"As UnixBench runs it {re.escape(case)}, Credit2 {v}: 20 ms best "
                             r"(holds|fails|not shown)", text)
    assert f"{len(UB_CASES) * len(VERSIONS) * 3} comparisons" in text
    df = pl.read_csv(tmp_path / "seed000_unixbench.csv")
    assert df.height == len(UB_CASES) * len(VERSIONS) * 4 * UB_QUICK_SEEDS
    assert (df["score_lps"] > 0).all()
    # The figure: Run's score per ratelimit, mean and 95 % interval over the seeds.
    assert (tmp_path / "seed000_unixbench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unixbench_is_refused_for_another_reproduction(capsys):
    from vmsched.cli import main

    assert main(["reproduce", "seed002", "--unixbench"]) == 2
    assert "error: --unixbench" in capsys.readouterr().out
