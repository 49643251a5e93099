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


def point(version, r_ms, duration_ms=2000, scen=PINNED, case="pinned pair"):
    return _one((case, scen, version, r_ms, duration_ms))


def test_point_release_decides_the_slice():
    # ERRATA X3: on 4.20.0 ratelimits of 1 and 5 ms both give ~10 ms slices, so identical runs;
    # on 4.20.2 the slice is the ratelimit.
    a, b = point("4.20.0", 1), point("4.20.0", 5)
    assert a["score_lps"] == b["score_lps"] and a["vcpu0_preemptions"] == b["vcpu0_preemptions"]
    assert 9.9 <= a["vcpu0_worst_wait_ms"] <= 10.1
    c, d = point("4.20.2", 1), point("4.20.2", 5)
    assert 0.99 <= c["vcpu0_worst_wait_ms"] <= 1.01 and 4.99 <= d["vcpu0_worst_wait_ms"] <= 5.01
    assert c["vcpu0_preemptions"] > 4 * d["vcpu0_preemptions"]


def test_20ms_beats_1_and_5ms_through_the_fast_pattern():
    rows = {r: point("4.20.2", r) for r in (1, 5, 20)}
    assert rows[20]["fast_pct"] > 95, rows[20]
    assert rows[20]["gap_over_gran_pct"] > 90
    assert rows[20]["score_lps"] > 1.03 * rows[1]["score_lps"]
    assert rows[20]["score_lps"] > 1.03 * rows[5]["score_lps"]
    assert rows[5]["fast_pct"] < 85 and rows[1]["fast_pct"] < 85


def test_the_mechanism_needs_steal_charged_to_the_running_task():
    for r in (5000, 20000):
        res = vmsched.run(PINNED, set={"host.version": "4.20.2", "host.ratelimit_us": r,
                                      "run.duration_ms": 1500,
                                      "domain.0.kernel.paravirt_time_accounting": True})
        assert res.counter("context1", "fast") == 0, "with steal accounting there is no jump"


def test_the_mechanism_needs_interference():
    res = vmsched.run(PINNED, set={"run.duration_ms": 1500, "domain.1.workload.0.copies": 0})
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
