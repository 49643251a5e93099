"""Seed 002 (Ongaro, Cox, Rixner, VEE 2008): ping latency to an idle guest behind compute and
streaming guests on Xen 3.3 Credit1, and the mechanism behind it (docs/seed002.md).

The short form runs 10 s of simulated time per point; VMSCHED_SLOW=1 adds the 120 s form. What
is asserted is what the mechanism requires of a faithful model, not the slides' numbers: with
dom0 scanning its event channels lowest-first, the streams' lower ports keep it busy and the
later guests' backend ports (G8's among them) are never served; the round-robin fix serves
every port; BOOST and not tickling on every wake shorten the ping; deferring the tickle to the
end of dom0's batch of events keeps that gain without making a lone wake wait for a slice.
With dom0 alone on a pCPU of its own (the other machine the slides allow), the stages line up
with the slides' order under ERRATA X6's reading: hundreds of ms without BOOST, a few ms with
it, lower again with the tickle deferred. Every ping mean is reported beside the requests it
does not count.
"""

import pytest
from phases import fixed_phases

from vmsched import reproductions
from vmsched.reproductions import seed002
from vmsched.reproductions.seed002 import (
    DOM0_OWN_PCPU,
    MACHINES,
    MIXES,
    ONE_PCPU,
    _one,
    main,
    points,
)

FULL = "compute + stream"


def point(order, boost, tickle, mix=FULL, duration_ms=10000, seed=None, machine=ONE_PCPU):
    return _one((mix, order, boost, tickle, duration_ms, seed, machine))


def own(order, boost, tickle, mix=FULL, duration_ms=10000):
    """A point on the machine with dom0 alone on pCPU 0 and the fifteen guests on pCPU 1."""
    return point(order, boost, tickle, mix=mix, duration_ms=duration_ms, machine=DOM0_OWN_PCPU)


def test_registered_with_its_source():
    r = reproductions.get("seed002")
    assert r.source == "002_c93a1aee7be7816d" and "ping" in r.title


def test_lowest_first_starves_the_later_backends_and_the_ping():
    # BOOST and tickle as Xen 3.x shipped them: every packet netback hands a streaming guest
    # wakes it BOOSTed and it preempts dom0 after a few ports; each new dom0 upcall starts at
    # port 0 again, so the NIC and the first backends are served and G8's port, the highest,
    # never is: no ping is answered.
    row = point("lowest_first", True, True)
    assert row["g8_port"] > row["nic_port"]
    assert row["g8_port_served"] == 0
    assert row["ping_replies"] == 0 and row["ping_requests"] > 0
    assert row["g8_port_pending_ms"] > 0.9 * (10000 - 1000), row


def test_round_robin_serves_every_port_and_answers_the_ping():
    starved = point("lowest_first", True, True)
    fixed = point("round_robin", True, True)
    assert fixed["g8_port_served"] > 0
    assert fixed["ping_replies"] >= fixed["ping_requests"] - 1
    # The whole stream traffic gets through better once no backend is starved.
    assert fixed["stream_min_mbps"] > starved["stream_min_mbps"]


def test_boost_shortens_the_ping_under_round_robin():
    # Without BOOST a woken dom0 or G8 waits at the tail of UNDER behind the compute guests'
    # 30 ms slices; with it, it preempts them.
    boost, plain = point("round_robin", True, True), point("round_robin", False, True)
    assert boost["ping_mean_ms"] < plain["ping_mean_ms"]
    assert boost["g8_wait_max_ms"] < plain["g8_wait_max_ms"]


def test_no_tickle_keeps_dom0_from_being_preempted_mid_upcall():
    # Tickling on every wake lets each streaming guest dom0 notifies preempt dom0 mid-upcall;
    # dom0, no longer BOOST, then waits behind the compute guests. Without the tickle dom0
    # finishes its upcall first (the slides' "waiting until all events have been processed"),
    # so the worst ping is shorter. The mean is not asserted: over 120 s the two means are
    # within 15 % of each other (docs/seed002.md, Disagreements).
    tickle, quiet = point("round_robin", True, True), point("round_robin", True, False)
    assert quiet["ping_max_ms"] < tickle["ping_max_ms"]


def test_no_tickle_makes_a_lone_wake_wait_for_the_slice_end():
    # The model's tickle_on_wake = false raises no reschedule at all (docs/credit1.md): with
    # dom0 idle between pings (compute guests only), the BOOSTed G8 and dom0 wait for the
    # running compute guest's 30 ms slice to end, where tickling would preempt at once.
    tickle = point("round_robin", True, True, mix="compute only")
    quiet = point("round_robin", True, False, mix="compute only")
    assert tickle["ping_max_ms"] < 1.0
    assert 1.0 < quiet["ping_max_ms"] <= 3 * 30.0 + 1.0


def test_a_deferred_tickle_answers_a_lone_ping_at_once():
    # The deferred tickle (docs/credit1.md): the NIC's interrupt wakes dom0 outside any batch of
    # events and is tickled at once, so with dom0 idle between pings it answers as fast as the
    # tickle on every wake, where no tickle waits for a compute guest's slice.
    tickle = point("round_robin", True, True, mix="compute only")
    deferred = point("round_robin", True, "deferred", mix="compute only")
    assert deferred["ping_max_ms"] == tickle["ping_max_ms"] < 1.0


def test_a_deferred_tickle_lets_dom0_finish_its_upcall_in_the_full_mix():
    # With the full mix, dom0's notifications to the streaming guests no longer preempt it: it is
    # never preempted, and the worst ping is below the tickle-on-every-wake one.
    tickle = point("round_robin", True, True)
    deferred = point("round_robin", True, "deferred")
    assert deferred["dom0_preemptions"] == 0 < tickle["dom0_preemptions"]
    assert deferred["ping_max_ms"] < tickle["ping_max_ms"]
    assert deferred["ping_replies"] >= deferred["ping_requests"] - deferred["ping_dropped"] - 1


def test_scan_order_is_irrelevant_without_busy_ports():
    # Compute guests only: dom0's only busy ports are the NIC's and G8's, one ping at a time, so
    # lowest-first and round-robin serve them the same way.
    for boost in (False, True):
        a = point("lowest_first", boost, True, mix="compute only")
        b = point("round_robin", boost, True, mix="compute only")
        assert a["ping_mean_ms"] == b["ping_mean_ms"] and a["ping_max_ms"] == b["ping_max_ms"]


def test_the_reproduction_prints_every_combination(tmp_path):
    from io import StringIO

    from rich.console import Console

    buf = StringIO()
    assert main(quick=True, jobs=1, out=tmp_path, console=Console(file=buf, width=250)) == 0
    text = buf.getvalue()
    assert "36.6 s" in text and "5.1 ms" in text
    # Both readings of the slides' pairing are printed; under the shipped one the original
    # starves G8's port.
    assert "Reading shipped" in text and "Reading X6" in text
    assert "original: published 36.6 s / 67.2 ms\n    1 pCPU: simulated no reply in 10 s" in text
    assert (tmp_path / "seed002_lowest_first_boost_tickle.pftrace").stat().st_size > 0
    assert len(points(1000)) == len(MACHINES) * len(MIXES) * 12
    assert "deferred tickle" in text
    assert (tmp_path / "seed002.csv").exists()
    # Both machines, each with its own tables and its row under every slide of both readings,
    # and the unanswered requests beside every mean; the plot of both.
    assert f"seed002, {ONE_PCPU}, {FULL}" in text and f"seed002, {DOM0_OWN_PCPU}, {FULL}" in text
    for machine in MACHINES:
        assert text.count(f"    {machine}: simulated") == 9
    assert "not answered 9/9 (9 pending)" in text
    assert text.count("not answered") >= 18
    assert (tmp_path / "seed002_ping.png").stat().st_size > 0


@pytest.mark.slow
def test_full_length_orders_of_magnitude():
    starved = point("lowest_first", True, True, duration_ms=120000)
    fixed = point("round_robin", True, True, duration_ms=120000)
    quiet = point("round_robin", True, False, duration_ms=120000)
    assert starved["ping_replies"] == 0 and starved["g8_port_served"] == 0
    assert fixed["ping_replies"] >= fixed["ping_requests"] - 2
    assert quiet["ping_max_ms"] < fixed["ping_max_ms"]
    # dom0 on its own pCPU: the X6 reading's last stages in the slides' order and magnitude.
    plain = own("round_robin", False, True, duration_ms=120000)
    boost = own("round_robin", True, True, duration_ms=120000)
    deferred = own("round_robin", True, "deferred", duration_ms=120000)
    assert deferred["ping_mean_ms"] < boost["ping_mean_ms"] < 10.0 < 50.0 < plain["ping_mean_ms"]


def test_the_trace_shows_who_dom0_waits_behind(tmp_path):
    # The schedule of the starving combination: each time dom0 runs, a guest it notified wakes
    # BOOSTed and takes the pCPU from it (a streaming guest, or G8 with its request), and the
    # compute guests' 30 ms slices fill dom0's waits.
    from test_trace import Decoded

    import vmsched

    path = tmp_path / "s.pftrace"
    vmsched.run("seed002_io_ping", set={"run.duration_ms": 3000, "host.boost_on_wake": True},
                trace=path)
    d = Decoded(path)
    host = next(pid for pid, n in d.processes().items() if n.startswith("host "))
    (pcpu,) = list(d.threads(host))
    sl = sorted(s for s in d.slices[pcpu] if s[0] >= 1_000_000_000)
    after_dom0 = [b[2] for a, b in zip(sl, sl[1:]) if a[2] == "dom0.v0"]
    assert len(after_dom0) >= 10
    assert all(n.startswith(("stream", "g8")) for n in after_dom0), after_dom0
    runs = [s for s in sl if s[2] == "dom0.v0"]
    gaps = [(a[1], b[0]) for a, b in zip(runs, runs[1:])]
    gap_ns = sum(hi - lo for lo, hi in gaps)
    compute_ns = sum(min(s[1], hi) - max(s[0], lo) for lo, hi in gaps for s in sl
                     if s[2].startswith("compute") and s[1] > lo and s[0] < hi)
    assert compute_ns > 0.95 * gap_ns


def test_the_shipped_scenario_is_the_starving_original():
    # As shipped, the scenario is Xen 3 unstable's original (lowest-first, BOOST, tickle): run
    # as it is, G8's backend port in dom0 stays pending and no ping is answered.
    import polars as pl

    import vmsched

    r = vmsched.run("seed002_io_ping", set={"run.duration_ms": 5000})
    port = r.ports.filter(pl.col("handler").str.starts_with("netback:g8")).row(0, named=True)
    assert port["served"] == 0 and port["pending_ns"] > 0
    assert r.counter("ping", "replies") == 0 and r.counter("ping", "requests") > 0


@pytest.mark.parametrize("reserved", [0, 26])
def test_starvation_does_not_depend_on_the_assumed_port_numbers(reserved):
    # dom0's ports bound before the NIC's are assumed (16). With none, or with 26 (the streams'
    # backends then straddle the first 32-bit selector word and G8's is in the second), the
    # starved ports are still the highest ones: every port never served is above every port
    # served, G8's is among them and the NIC's is not.
    import polars as pl

    import vmsched

    r = vmsched.run("seed002_io_ping", set={"run.duration_ms": 5000,
                                           "domain.0.netback.reserved_ports": reserved})
    dom0 = r.ports.filter((pl.col("level") == "dom0") & (pl.col("handler") != "reserved"))
    never = dom0.filter(pl.col("served") == 0)
    served = dom0.filter(pl.col("served") > 0)
    assert never["port"].min() > served["port"].max()
    assert "netback:g8/ping" in never["handler"].to_list()
    assert "nic" in served["handler"].to_list()


def test_the_ping_mean_comes_with_the_requests_it_does_not_count():
    # The mean is over the answered requests; the rest are dropped on a full ring, answered after
    # the timeout, or still pending at the end, and the three add up to what was lost.
    for row in (point("lowest_first", True, True), point("round_robin", True, True),
                own("round_robin", True, True)):
        assert row["ping_lost"] == row["ping_requests"] - row["ping_replies"]
        assert row["ping_lost"] == row["ping_dropped"] + row["ping_late"] + row["ping_unanswered"]
    # The starved original's requests are all still pending (the 100 s timeout outlasts the run).
    starved = point("lowest_first", True, True)
    assert starved["ping_unanswered"] == starved["ping_requests"] > 0


def test_dom0_on_its_own_pcpu_gives_the_slides_stage_ordering():
    # ERRATA X6's reading, on the machine where dom0 has a pCPU to itself: the round-robin fix
    # without BOOST waits hundreds of ms (G8 and the woken dom0 queue at the tail of UNDER behind
    # the compute guests' 30 ms slices on the guests' pCPU), with BOOST a few ms (the slides: 259.2
    # ms, then 6.6 ms), and deferring the tickle to the end of dom0's batch lowers it again (5.1
    # ms). The means are over the answered requests; most requests must be answered.
    # At fixed phases (run.vary = false): with seeded start offsets the deferred tickle does
    # not lower the mean on the shipped seed (1.79 against 1.58 ms); to be restated over seeds.
    with fixed_phases(seed002):
        fix = own("round_robin", False, True)
        boost = own("round_robin", True, True)
        deferred = own("round_robin", True, "deferred")
    for r in (fix, boost, deferred):
        assert r["ping_replies"] >= r["ping_requests"] // 2, r
    assert fix["ping_mean_ms"] > 50.0
    assert boost["ping_mean_ms"] < 10.0 < 10 * boost["ping_mean_ms"] < fix["ping_mean_ms"]
    assert deferred["ping_mean_ms"] < boost["ping_mean_ms"]
    # dom0 is never preempted on its own pCPU when nothing but its own wakes are tickled there.
    assert deferred["dom0_preemptions"] == 0


def test_dom0_on_its_own_pcpu_still_starves_under_lowest_first_with_boost_and_tickle():
    # The shipped reading's original starves G8's port on this machine too: dom0 never blocks
    # (the streams keep its low ports busy), every upcall restarts at port 0.
    row = own("lowest_first", True, True)
    assert row["g8_port_served"] == 0 and row["ping_replies"] == 0 < row["ping_requests"]
    # The round-robin fix reaches it.
    assert own("round_robin", True, True)["g8_port_served"] > 0


def test_the_machine_decides_the_boost_stages():
    # The same configuration (round-robin, BOOST) on the two machines: with dom0 sharing the
    # pCPU with the compute guests the ping is ~100 ms (docs/seed002.md, "Why the last stage is
    # ~100 ms"); with a pCPU of its own, a few ms. Without BOOST the machine matters far less.
    for tickle in (True, "deferred"):
        shared, alone = point("round_robin", True, tickle), own("round_robin", True, tickle)
        assert 10 * alone["ping_mean_ms"] < shared["ping_mean_ms"]
    shared, alone = point("round_robin", False, True), own("round_robin", False, True)
    assert alone["ping_mean_ms"] > shared["ping_mean_ms"] / 4


def test_the_stage_comparisons_pair_each_step_with_the_one_before():
    # Issue 14: per machine and reading, each step of the slides against the one before it;
    # a combination whose ping is never answered cannot be compared on its mean.
    from vmsched.reproductions.seed002 import FULL_MIX, STAGES, TICKLE_COLUMN, comparisons

    rows = []
    for m in MACHINES:
        for key in {k for pairs in STAGES.values() for pair in pairs for k in pair}:
            for seed in (1, 2, 3):
                starved = key == ("lowest_first", True, True)
                rows.append({"machine": m, "mix": FULL_MIX, "order": key[0], "boost": key[1],
                             "tickle": TICKLE_COLUMN[key[2]], "seed": seed,
                             "ping_mean_ms": None if starved else
                             (50.0 if key[0] == "lowest_first" else 5.0) + seed})
    cs = comparisons(rows)
    assert len(cs) == len(MACHINES) * sum(len(p) for p in STAGES.values())
    by = {(m, r, later, earlier): c for m, r, later, earlier, c in cs}
    for m in MACHINES:
        shipped = by[(m, "shipped", ("round_robin", True, True), ("lowest_first", True, True))]
        assert shipped.b.n == 0 and not shipped.significant
        x6 = by[(m, "X6", ("round_robin", False, True), ("lowest_first", False, True))]
        assert x6.sign == "<" and x6.verdict().startswith("RR, no BOOST, tickle < LF, no BOOST")
        same = by[(m, "X6", ("round_robin", True, False), ("round_robin", True, True))]
        assert same.sign == "=" and "indistinguishable" in same.verdict()
