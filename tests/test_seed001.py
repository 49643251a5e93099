"""Seed 001 (Fujitsu, Xen Summit 2008): the worst wait of a video guest (HVM1) while two HVM
guests boot on Xen 3.3 Credit1, and the talk's two improvements (docs/seed001.md).

The short form runs 8 s of simulated time per point (6 s of boots); VMSCHED_SLOW=1 adds the
full 26 s form. What is asserted is what the mechanism requires of a faithful model, not the
talk's numbers: the boots make HVM1 wait far longer than the video alone does; behind the
longest wait is a booting vCPU holding HVM1's pCPU; boost credit keeps HVM1 BOOST, so its wait
is bounded by a few BOOST slices and no frame is dropped and no sound skips; the first improvement shortens the
wait of a player whose bursts fit the 2 ms BOOST slice, and a longer burst is demoted to UNDER
and waits behind the booting vCPUs' slices (the talk's own "many vCPUs in UNDER priority").
"""

from functools import cache

import pytest
from phases import fixed_phases

from vmsched import reproductions
from vmsched.reproductions import seed001
from vmsched.reproductions.seed001 import CONFIGS, DECODES, main, points

QUICK_MS = 8000


@cache
def point(config, phase, decode_us=5000, duration_ms=QUICK_MS):
    return seed001.point(config, phase, decode_us, duration_ms)


def test_registered_with_its_source():
    r = reproductions.get("seed001")
    assert r.source == "001_d608ab95022a7653" and "video" in r.title


def test_the_python_api_names_its_configurations():
    with pytest.raises(KeyError, match="first improvement"):
        seed001.point("second improvement")
    with pytest.raises(KeyError, match="M1"):
        seed001.point("baseline", "M3")


def test_the_boots_make_the_video_guest_wait_far_longer_than_the_video_alone():
    m1, m2 = point("baseline", "M1"), point("baseline", "M2")
    # The video alone on four pCPUs: dom0 and HVM1 always find their pCPU free.
    assert m1["hvm1_wait_max_us"] < 100
    # During the boots HVM1 waits milliseconds behind the booting vCPUs.
    assert m2["hvm1_wait_max_us"] > 1000
    assert m2["hvm1_wait_max_us"] > 100 * max(m1["hvm1_wait_max_us"], 1)
    assert m1["frames"] > 0 and m1["dropped"] == 0


def test_boost_credit_bounds_the_wait_by_a_few_boost_slices_and_drops_nothing():
    base, boost = point("baseline", "M2"), point("boost credit", "M2")
    # BOOST vCPUs take turns at the 2 ms BOOST slice: "a few times of allocated time".
    assert boost["hvm1_wait_max_us"] <= 3 * 2000 + 100
    assert boost["hvm1_wait_max_us"] < base["hvm1_wait_max_us"]
    assert boost["dropped"] == 0 and boost["shown"] == boost["frames"]


def test_the_boots_make_the_sound_skip_and_boost_credit_stops_it():
    # The sound thread refills the device every 10 ms, one period ahead: a wait of most of a
    # period behind a booting vCPU is a skip (the talk's "tracks"); the video alone never
    # skips, and with boost credit HVM1's vCPUs stay BOOST and wait at most a BOOST slice.
    m1, base, boost = point("baseline", "M1"), point("baseline", "M2"), point("boost credit", "M2")
    assert m1["audio_periods"] > 0 and m1["audio_skips"] == 0
    assert base["audio_skips"] > 0
    assert boost["audio_skips"] == 0 and boost["audio_periods"] == base["audio_periods"]


def test_the_first_improvement_halves_the_wait_of_bursts_that_fit_the_boost_slice():
    # A 1 ms decode (at most 1.4 ms) finishes within the 2 ms BOOST slice: the booting vCPUs
    # no longer hold a BOOSTed pCPU for up to 30 ms, and HVM1 never leaves BOOST.
    base, first = point("baseline", "M2", 1000), point("first improvement", "M2", 1000)
    assert first["hvm1_wait_max_us"] < base["hvm1_wait_max_us"] / 2


def test_a_burst_longer_than_the_boost_slice_is_demoted_and_waits_behind_the_boots():
    # A 5 ms decode outlives the 2 ms BOOST slice: HVM1 is demoted to UNDER and queued behind
    # the booting vCPUs, whose slices are far longer than 2 ms. Its worst wait is then a wait
    # after preemption, longer than the BOOST slice; boost credit keeps it BOOST instead.
    # At fixed phases (run.vary = false): with seeded start offsets the booting vCPUs' slices
    # do not all fall across HVM1's decode; to be restated over seeds.
    with fixed_phases(seed001):
        first = seed001.point("first improvement", "M2", 5000, QUICK_MS)
        boost = seed001.point("boost credit", "M2", 5000, QUICK_MS)
    assert first["hvm1_wait_preempt_us"] > 2000
    assert first["hvm1_wait_preempt_us"] >= first["hvm1_wait_wake_us"]
    assert first["boot_alloc_per_ex_ms"] > 2 * 2
    assert boost["hvm1_wait_preempt_us"] < first["hvm1_wait_preempt_us"]


def test_the_longest_wait_is_behind_a_booting_vcpu(tmp_path):
    # In the baseline's trace, HVM1's longest `runnable` slice after the boots start is spent
    # behind a booting guest's vCPU: the pCPU HVM1 then runs on was running hvm2 or hvm3 (a
    # vCPU BOOSTed at an I/O completion keeps the pCPU: ERRATA X8), not dom0 or nobody.
    from test_trace import Decoded

    import vmsched

    path = tmp_path / "s.pftrace"
    vmsched.run("seed001_video_boost_credit", set={"run.duration_ms": 4000}, trace=path)
    d = Decoded(path)
    (vcpu,) = [u for u, n in d.threads().items() if n == "hvm1.v0"]
    sl = sorted(d.slices[vcpu])
    waits = [(e - b, b, e, i) for i, (b, e, _, cat) in enumerate(sl)
             if cat == "runnable" and b >= 1_000_000_000]
    assert waits
    _, lo, hi, i = max(waits)
    # The slice after the wait: running, named after the pCPU.
    nb, _, pcpu_name, cat = sl[i + 1]
    assert cat == "running" and nb == hi
    host = next(pid for pid, n in d.processes().items() if n.startswith("host "))
    (pcpu,) = [u for u, n in d.threads(host).items() if n == pcpu_name]
    during = {}
    for b, e, n, _ in d.slices[pcpu]:
        if e > lo and b < hi:
            during[n] = during.get(n, 0) + min(e, hi) - max(b, lo)
    assert during, (lo, hi, pcpu_name)
    who = max(during, key=during.get)
    assert who.startswith(("hvm2.", "hvm3.")), during
    assert during[who] > 0.5 * (hi - lo), during


def test_the_reproduction_prints_every_configuration(tmp_path):
    from io import StringIO

    from rich.console import Console

    buf = StringIO()
    assert main(quick=True, jobs=1, out=tmp_path, console=Console(file=buf, width=250)) == 0
    text = buf.getvalue()
    for c in CONFIGS:
        assert c in text
    assert "M2 ~1000x M1" in text and "no dropped frame" in text
    assert "where HVM1 waited longest" in text
    assert (tmp_path / "seed001_baseline_boots.pftrace").stat().st_size > 0
    assert (tmp_path / "seed001.csv").exists()
    assert len(points(1000)) == len(CONFIGS) * 2 * len(DECODES)


def test_the_shipped_scenario_is_the_baseline_with_the_boots():
    import polars as pl

    import vmsched

    r = vmsched.run("seed001_video_boost_credit", set={"run.duration_ms": 3000})
    boots = r.workloads.filter(pl.col("kind") == "vmboot")
    assert sorted(boots["level"].to_list()) == ["hvm2", "hvm3"]
    assert all(v > 0 for v in boots["value"].to_list())
    video = r.workloads.filter(pl.col("kind") == "video").row(0, named=True)
    assert video["unit"] == "frames" and video["count_frames"] > 0


def test_the_boots_io_goes_over_dom0s_device_models():
    # ERRATA X9: each booting vCPU's emulated disk accesses block it in Xen (offline) while
    # dom0's device model serves them on the vCPU's ioreq port; dom0 has no other work.
    import polars as pl

    import vmsched

    r = vmsched.run("seed001_video_boost_credit", set={"run.duration_ms": 3000})
    served = {p["handler"]: p["served"] for p in r.ports.iter_rows(named=True)}
    host = {e["name"]: e for e in r.entities.filter(pl.col("level") == "host").iter_rows(named=True)}
    # The measured window starts at 0.5 s (up to 10 ms later: run.vary) and the guests are
    # created at 1 s; each access keeps its vCPU offline at least for dom0's 2 + 10 µs of
    # device-model work.
    before = 1_000_000_000 - r.warmup_ns
    for v in ("hvm2.v0", "hvm2.v1", "hvm3.v0", "hvm3.v1"):
        assert served[f"ioreq:{v}"] > 50, served
        assert host[v]["offline_ns"] >= before + served[f"ioreq:{v}"] * 12_000, host[v]
    # dom0 runs the device models' work and nothing else.
    total = sum(n for h, n in served.items() if h.startswith("ioreq:"))
    assert host["dom0.v0"]["running_ns"] == total * 12_000


@pytest.mark.slow
def test_full_length_orders_of_magnitude():
    full = 26000
    m1 = point("baseline", "M1", 5000, full)
    base = point("baseline", "M2", 5000, full)
    boost = point("boost credit", "M2", 5000, full)
    first_short = point("first improvement", "M2", 1000, full)
    base_short = point("baseline", "M2", 1000, full)
    assert base["hvm1_wait_max_us"] > 100 * max(m1["hvm1_wait_max_us"], 1)
    assert boost["hvm1_wait_max_us"] <= 3 * 2000 + 100 and boost["dropped"] == 0
    assert base["audio_skips"] > 0 and boost["audio_skips"] == 0
    assert first_short["hvm1_wait_max_us"] < base_short["hvm1_wait_max_us"] / 2


def test_the_comparisons_state_a_difference_only_where_significant():
    # Issue 14: the improvements against the baseline over several seeds (Welch, Holm over 4).
    from vmsched.reproductions.seed001 import (
        IMPROVEMENTS,
        QUICK_CMP_SEEDS,
        cmp_points,
        comparisons,
    )

    # The tables' M2 runs are seed 1: the comparisons add the others, at the tables' length.
    pts = cmp_points(True, 4000)
    assert len(pts) == len(DECODES) * len(CONFIGS) * (QUICK_CMP_SEEDS - 1)
    assert {p[3] for p in pts} == {4000} and {p[4] for p in pts} == {2, 3}
    fake = [{"config": c, "phase": "M2", "decode_us": d, "seed": s,
             "hvm1_wait_max_us": (10_000 if c == "baseline" else 3_000) + 100 * s}
            for d in DECODES for c in CONFIGS for s in (1, 2, 3)]
    cs = comparisons(fake)
    assert [(d, c) for d, c, _ in cs] == [(d, c) for d in DECODES for c in IMPROVEMENTS]
    for _, c, cmp in cs:
        assert cmp.sign == "<" and cmp.comparisons == 4
        assert cmp.verdict().startswith(f"{c} < baseline by 68.6 % ± ")
        assert cmp.rel_pct == pytest.approx(-100 * 7.0 / 10.2)
