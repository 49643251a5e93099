//! The switches of seed 002 (ERRATA X6: `boost_on_wake`, `tickle_on_wake`) and the options of
//! seed 001 (ERRATA X13: exact debit, the BOOST slice, credit kept above the limit, levelled
//! domain credits, boost credit), each against the same situation with it off.

use super::*;
use vmsched_core::sched::WakeCause;

/// `n` vCPUs (one domain each) pinned to CPU 0 of a one-CPU machine, with parameters `p`.
fn one_cpu_with(p: Credit1Params, n: usize) -> H {
    harness(p, flat(1), (0..n).map(|i| pinned(i, 1, 0)).collect())
}

/// vCPU 0 runs on CPU 0 as an UNDER hog, 3 ms after its switch-in (past 4.20's ratelimit);
/// vCPU 1 is blocked, never run, UNDER.
fn hog_and_sleeper_with(p: Credit1Params) -> H {
    let mut h = one_cpu_with(p, 2);
    wake(&mut h, 0);
    run_on(&mut h, 0);
    assert_eq!(h.curr(0), Some(0));
    set_pri(&mut h, 0, PRI_UNDER);
    // The 4.20 insertion's pick left MIGRATING on vCPU 1: clear it as an earlier wake would.
    ops_mut(&mut h).units[1].migrating = false;
    h.advance(ms(3));
    h
}

/// Lets CPU `cpu` pick up what a wake queued there: its reschedule if the wake tickled it, else
/// (`tickle_on_wake = false`) its next slice end, brought forward.
fn run_on(h: &mut H, cpu: u32) {
    h.pump();
    if h.curr(cpu).is_none() {
        h.schedule(cpu);
    }
}

// ------------------------------------------------------------------------------------------
// Seed 002 (ERRATA X6)
// ------------------------------------------------------------------------------------------

#[test]
fn x6_without_boost_on_wake_an_under_wake_stays_under_and_does_not_preempt() {
    for v in [V33, V420] {
        for on in [true, false] {
            let p = Credit1Params {
                boost_on_wake: Some(on),
                ..exact(v)
            };
            let mut h = hog_and_sleeper_with(p);
            wake(&mut h, 1);
            if on {
                assert_eq!(pri(&h, 1), PRI_BOOST, "{v:?}");
                assert_eq!(
                    h.take_resched(),
                    vec![0],
                    "{v:?}: BOOST beats the UNDER hog"
                );
            } else {
                assert_eq!(pri(&h, 1), PRI_UNDER, "{v:?}: no BOOST");
                assert_eq!(runq(&h, 0), vec![1], "{v:?}");
                assert!(
                    h.take_resched().is_empty(),
                    "{v:?}: UNDER does not beat UNDER: no tickle"
                );
            }
        }
    }
}

#[test]
fn x6_without_boost_on_wake_the_woken_vcpu_goes_to_the_tail_of_its_class() {
    // Three vCPUs on one CPU: 0 runs, 2 is queued UNDER; 1 wakes UNDER and queues behind 2.
    let p = Credit1Params {
        boost_on_wake: Some(false),
        ..exact(V33)
    };
    let mut h = one_cpu_with(p, 3);
    wake(&mut h, 0);
    h.pump();
    wake(&mut h, 2);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    wake(&mut h, 1);
    assert_eq!(runq(&h, 0), vec![2, 1]);
    // The 3.3 domctl re-wake does not boost either.
    with_ctx(&mut h, |ops, x| ops.dom_cntl(x, 0));
    assert_eq!(
        pri(&h, 0),
        PRI_UNDER,
        "a running vCPU re-woken by the domctl"
    );
}

#[test]
fn x6_without_tickle_on_wake_a_boosted_wake_raises_no_reschedule() {
    for on in [true, false] {
        let p = Credit1Params {
            tickle_on_wake: Some(on),
            ..exact(V33)
        };
        let mut h = hog_and_sleeper_with(p);
        wake(&mut h, 1);
        assert_eq!(pri(&h, 1), PRI_BOOST, "BOOST is unchanged");
        assert_eq!(runq(&h, 0), vec![1]);
        if on {
            assert_eq!(h.take_resched(), vec![0]);
        } else {
            assert!(h.take_resched().is_empty(), "queued, no tickle");
            // The next natural scheduling point (the hog's slice end) runs it.
            assert_eq!(h.schedule(0).next, Some(EntityId(1)));
        }
    }
}

#[test]
fn seed002_deferred_tickle_raises_one_reschedule_when_the_senders_batch_ends() {
    // vCPU 0 (the sender, e.g. dom0 in its upcall) runs on CPU 0; vCPUs 1 and 2 are woken by
    // its events, then its batch ends.
    for deferred in [false, true] {
        let p = Credit1Params {
            deferred_tickle: deferred,
            ..exact(V33)
        };
        let mut h = one_cpu_with(p, 3);
        wake(&mut h, 0);
        run_on(&mut h, 0);
        set_pri(&mut h, 0, PRI_UNDER);
        let by0 = WakeInfo {
            cause: WakeCause::Event,
            waker: Some(EntityId(0)),
            ..Default::default()
        };
        h.wake(1, by0);
        let r1 = h.take_resched();
        h.wake(2, by0);
        let r2 = h.take_resched();
        assert_eq!((pri(&h, 1), pri(&h, 2)), (PRI_BOOST, PRI_BOOST));
        assert_eq!(runq(&h, 0), vec![1, 2]);
        if !deferred {
            assert_eq!((r1, r2), (vec![0], vec![0]), "a tickle per wake");
            continue;
        }
        assert!(r1.is_empty() && r2.is_empty(), "queued, tickles deferred");
        // Another sender's batch ending changes nothing.
        with_ctx(&mut h, |ops, x| ops.wake_batch_end(x, EntityId(2)));
        assert!(h.take_resched().is_empty());
        with_ctx(&mut h, |ops, x| ops.wake_batch_end(x, EntityId(0)));
        assert_eq!(h.take_resched(), vec![0], "one reschedule for the batch");
        assert_eq!(
            h.schedule(0).next,
            Some(EntityId(1)),
            "the first BOOSTed wakee"
        );
        with_ctx(&mut h, |ops, x| ops.wake_batch_end(x, EntityId(0)));
        assert!(h.take_resched().is_empty(), "the batch was flushed");
    }
}

#[test]
fn seed002_deferred_tickle_tickles_a_wake_from_outside_a_batch_at_once() {
    let p = Credit1Params {
        deferred_tickle: true,
        ..exact(V33)
    };
    let mut h = hog_and_sleeper_with(p);
    h.wake(1, WakeInfo::of(WakeCause::Event));
    assert_eq!(
        h.take_resched(),
        vec![0],
        "a physical interrupt's event, a timer"
    );
}

#[test]
fn seed002_deferred_tickle_is_3_3_only_and_needs_the_tickle() {
    let p = Credit1Params {
        deferred_tickle: true,
        ..exact(V420)
    };
    assert!(p.validate().unwrap_err().starts_with("deferred_tickle"));
    let p = Credit1Params {
        deferred_tickle: true,
        tickle_on_wake: Some(false),
        ..exact(V33)
    };
    assert!(p.validate().unwrap_err().starts_with("deferred_tickle"));
}

#[test]
fn x6_without_tickle_on_wake_an_idle_cpu_is_not_tickled_either() {
    // Two CPUs: vCPU 0 runs on CPU 0; CPU 1 idles; vCPU 1 (free) wakes on CPU 0.
    for on in [true, false] {
        let p = Credit1Params {
            tickle_on_wake: Some(on),
            ..exact(V33)
        };
        let mut h = harness(p, flat(2), vec![params(0, 2), params(1, 2)]);
        // Both on CPU 0 (3.3's initial placement spreads domains).
        for e in 0..2 {
            ops_mut(&mut h).units[e].processor = CpuId(0);
        }
        wake(&mut h, 0);
        run_on(&mut h, 0);
        assert_eq!(h.curr(0), Some(0));
        set_pri(&mut h, 0, PRI_BOOST);
        wake(&mut h, 1);
        let r = h.take_resched();
        if on {
            assert_eq!(r, vec![1], "3.3 tickles every idler when its CPU is busy");
        } else {
            assert!(r.is_empty(), "{r:?}");
            // CPU 1's idle slice ends: it steals the waiter.
            assert_eq!(h.schedule(1).next, Some(EntityId(1)));
        }
    }
}

#[test]
fn x6_tickle_on_wake_is_a_3_3_switch_and_boost_on_wake_fits_both_eras() {
    let p = Credit1Params {
        tickle_on_wake: Some(false),
        ..exact(V420)
    };
    assert!(p.validate().unwrap_err().starts_with("tickle_on_wake: "));
    for v in [V33, V420] {
        let p = Credit1Params {
            boost_on_wake: Some(false),
            ..exact(v)
        };
        p.validate().unwrap();
    }
}

// ------------------------------------------------------------------------------------------
// Seed 001 (ERRATA X13), 3.3 only
// ------------------------------------------------------------------------------------------

#[test]
fn x13_exact_debit_charges_the_run_time_at_the_switch_and_the_tick() {
    for on in [false, true] {
        let p = Credit1Params {
            exact_debit: on,
            ..exact(V33)
        };
        let mut h = one_cpu_with(p, 2);
        wake(&mut h, 0);
        h.pump();
        h.advance(us(3250));
        h.block(0);
        // 3.25 ms: 32.5 credits; sampling charges nothing without a tick.
        assert_eq!(credit(&h, 0), if on { -32 } else { 0 }, "on={on}");
        wake(&mut h, 1);
        h.pump();
        assert_eq!(h.curr(0), Some(1));
        h.advance(ms(4));
        tick(&mut h, 0);
        assert_eq!(credit(&h, 1), if on { -40 } else { -100 }, "on={on}");
        // The remainder is carried: 0.5 credit more makes vCPU 0's next whole credit.
        wake(&mut h, 0);
        h.advance(ms(1));
        h.block(1);
        assert_eq!(h.curr(0), Some(0));
        h.advance(us(50));
        h.block(0);
        assert_eq!(credit(&h, 0), if on { -33 } else { 0 }, "on={on}");
    }
}

#[test]
fn x13_exact_debit_drains_an_inactive_vcpu_that_only_the_tick_reactivates() {
    // Upstream's exact accounting (Xen commit 78c9b2a64b, 4.0; still so in 4.20's
    // `burn_credits` from `csched_schedule` and `__csched_unit_acct_start` only from the
    // tick's `csched_unit_acct`): a vCPU off the active list is debited at every switch-out
    // but joins the active list only when a tick finds it running. So one that runs only
    // between ticks drains its credit while inactive (seed 001's OVER case, docs/seed001.md).
    let p = Credit1Params {
        exact_debit: true,
        ..exact(V33)
    };
    let mut h = one_cpu_with(p, 2);
    assert!(!unit(&h, 0).active, "a new vCPU is inactive");
    for round in 1..=3 {
        wake(&mut h, 0);
        h.pump();
        assert_eq!(h.curr(0), Some(0));
        h.advance(ms(3));
        h.block(0);
        assert_eq!(credit(&h, 0), -30 * round, "debited at the switch-out");
        assert!(!unit(&h, 0).active, "still inactive: no tick caught it");
        h.advance(ms(1));
    }
    wake(&mut h, 0);
    h.pump();
    h.advance(ms(1));
    tick(&mut h, 0);
    assert!(
        unit(&h, 0).active,
        "the tick that finds it running activates it"
    );
    assert_eq!(credit(&h, 0), -100);
}

#[test]
fn x13_the_boost_slice_is_2_ms_and_then_the_vcpu_is_under() {
    for slice in [None, Some(2)] {
        let p = Credit1Params {
            boost_slice_ms: slice,
            ..exact(V33)
        };
        let mut h = one_cpu_with(p, 2);
        wake(&mut h, 0);
        wake(&mut h, 1);
        assert_eq!((pri(&h, 0), pri(&h, 1)), (PRI_BOOST, PRI_BOOST));
        let pick = h.schedule(0);
        assert_eq!(pick.next, Some(EntityId(0)));
        let want = slice.map_or(ms(30), ms);
        assert_eq!(pick.slice, Some(want), "{slice:?}");
        h.advance(want);
        let pick = h.schedule(0);
        assert_eq!(pick.next, Some(EntityId(1)), "{slice:?}");
        if slice.is_some() {
            assert_eq!(pri(&h, 0), PRI_UNDER, "after its BOOST slice");
            assert_eq!(pick.slice, Some(ms(2)), "the next BOOST vCPU's slice");
        } else {
            assert_eq!(pri(&h, 0), PRI_BOOST, "3.3: BOOST until a tick or a pass");
        }
    }
}

#[test]
fn x13_a_boost_vcpu_rescheduled_within_its_boost_slice_keeps_boost() {
    let p = Credit1Params {
        boost_slice_ms: Some(2),
        ..exact(V33)
    };
    let mut h = one_cpu_with(p, 1);
    wake(&mut h, 0);
    h.schedule(0);
    h.advance(ms(1));
    h.schedule(0);
    assert_eq!(pri(&h, 0), PRI_BOOST);
}

#[test]
fn x13_credit_above_the_limit_is_kept_not_zeroed() {
    for on in [false, true] {
        let p = Credit1Params {
            keep_credit_above_limit: on,
            ..exact(V33)
        };
        let mut h = one_cpu_with(p, 1);
        activate(&mut h, 0);
        set_credit(&mut h, 0, 250);
        acct(&mut h); // + 300
        assert!(!unit(&h, 0).active, "it leaves the active set either way");
        assert_eq!(credit(&h, 0), if on { 300 } else { 0 }, "on={on}");
        assert_eq!(pri(&h, 0), PRI_UNDER);
    }
}

#[test]
fn x13_levelled_credits_give_a_domains_vcpus_one_priority() {
    // One domain of two vCPUs on two CPUs (pool credit 600, all to the domain: 300 each).
    for on in [false, true] {
        let p = Credit1Params {
            level_domain_credits: on,
            ..exact(V33)
        };
        let mut ents = vec![params(0, 2), params(1, 2)];
        ents[1].group = 0;
        let mut h = harness(p, flat(2), ents);
        activate(&mut h, 0);
        activate(&mut h, 1);
        set_credit(&mut h, 0, 101);
        set_credit(&mut h, 1, -400);
        acct(&mut h);
        if on {
            // (101 − 400) / 2 = −150 rest 1: the head (vCPU 1, activated last) gets −149.
            assert_eq!((credit(&h, 1), credit(&h, 0)), (151, 150));
            assert_eq!((pri(&h, 0), pri(&h, 1)), (PRI_UNDER, PRI_UNDER));
        } else {
            assert_eq!((credit(&h, 0), credit(&h, 1)), (0, -100));
            assert_eq!((pri(&h, 0), pri(&h, 1)), (PRI_UNDER, PRI_OVER));
        }
    }
}

/// Domain 0 (vCPU 0) holds boost credit (limit 100 ms, ratio 20 %), beside domain 1 (vCPU 1),
/// both on CPU 0; `boost` false: plain 3.3.
fn boost_pair(boost: bool) -> H {
    let mut h = one_cpu(V33, 2);
    if boost {
        ops_mut(&mut h).set_boost_domain(0, 100, 20);
    }
    h
}

#[test]
fn x13_the_boost_ratio_hands_out_boost_credit_in_place_of_credit() {
    for boost in [false, true] {
        let mut h = boost_pair(boost);
        activate(&mut h, 0);
        activate(&mut h, 1);
        acct(&mut h); // 150 each by weight
        let b = ops(&h).boost_credit(EntityId(0));
        if boost {
            // 20 % of one CPU's 300 per pass: 60 as boost credit, 90 as credit.
            assert_eq!((b, credit(&h, 0)), (60, 90));
            assert_eq!(pri(&h, 0), PRI_BOOST, "BOOST while boost credit lasts");
        } else {
            assert_eq!((b, credit(&h, 0)), (0, 150));
            assert_eq!(pri(&h, 0), PRI_UNDER);
        }
        assert_eq!((credit(&h, 1), pri(&h, 1)), (150, PRI_UNDER));
    }
}

#[test]
fn x13_boost_credit_keeps_boost_across_ticks_and_wakes_until_it_runs_out() {
    for boost in [false, true] {
        let mut h = boost_pair(boost);
        wake(&mut h, 1);
        h.pump();
        set_pri(&mut h, 1, PRI_UNDER);
        activate(&mut h, 0);
        ops_mut(&mut h).units[0].boost_credit = if boost { 150 } else { 0 };
        set_pri(&mut h, 0, PRI_OVER);
        // An OVER vCPU with boost credit wakes BOOST and preempts the UNDER hog.
        wake(&mut h, 0);
        assert_eq!(pri(&h, 0), if boost { PRI_BOOST } else { PRI_OVER });
        h.pump();
        assert_eq!(h.curr(0), Some(if boost { 0 } else { 1 }));
        if !boost {
            continue;
        }
        // The tick charges boost credit and leaves it BOOST.
        h.advance(ms(10));
        tick(&mut h, 0);
        assert_eq!(ops(&h).boost_credit(EntityId(0)), 50);
        assert_eq!((pri(&h, 0), credit(&h, 0)), (PRI_BOOST, 0));
        // It blocks and wakes again: still BOOST.
        h.block(0);
        wake(&mut h, 0);
        assert_eq!(pri(&h, 0), PRI_BOOST);
        h.pump();
        assert_eq!(h.curr(0), Some(0));
        // The next tick's 100 credits: 50 from boost credit, which runs out (UNDER), 50 from
        // credit.
        h.advance(ms(10));
        tick(&mut h, 0);
        assert_eq!(ops(&h).boost_credit(EntityId(0)), 0);
        assert_eq!((pri(&h, 0), credit(&h, 0)), (PRI_UNDER, -50));
    }
}

#[test]
fn x13_the_boost_limit_caps_boost_credit_and_takes_the_excess_above_300() {
    let mut h = boost_pair(true);
    activate(&mut h, 0);
    ops_mut(&mut h).units[0].boost_credit = 990;
    set_credit(&mut h, 0, 290);
    acct(&mut h); // alone: 300 − 60 = 240 credit, 60 boost credit
                  // Boost credit 990 + 60 → the limit, 1000 (100 ms); credit 530 > 300: kept at 300 when it
                  // leaves the active set, the excess to boost credit (already full).
    assert_eq!(ops(&h).boost_credit(EntityId(0)), 1000);
    assert_eq!(credit(&h, 0), 300);
    assert!(!unit(&h, 0).active);
    ops_mut(&mut h).units[0].boost_credit = 100;
    activate(&mut h, 0);
    set_credit(&mut h, 0, 290);
    acct(&mut h);
    assert_eq!(ops(&h).boost_credit(EntityId(0)), 100 + 60 + 230);
}

#[test]
fn x13_the_seed_001_options_are_3_3_only_and_checked_by_name() {
    let boost = vec![Credit1BoostDomain {
        domain: "hvm1".into(),
        limit_ms: 100,
        ratio_pct: 20,
    }];
    let all = Credit1Params {
        exact_debit: true,
        boost_slice_ms: Some(2),
        keep_credit_above_limit: true,
        level_domain_credits: true,
        boost_domains: boost.clone(),
        tickle_on_wake: Some(false),
        boost_on_wake: Some(true),
        ..exact(V33)
    };
    all.validate().unwrap();
    let refused = |p: Credit1Params, field: &str| {
        let e = p.validate().unwrap_err();
        assert!(e.starts_with(&format!("{field}: ")), "{field}: {e}");
    };
    refused(
        Credit1Params {
            exact_debit: true,
            ..exact(V420)
        },
        "exact_debit",
    );
    refused(
        Credit1Params {
            boost_slice_ms: Some(2),
            ..exact(V420)
        },
        "boost_slice_ms",
    );
    refused(
        Credit1Params {
            keep_credit_above_limit: true,
            ..exact(V420)
        },
        "keep_credit_above_limit",
    );
    refused(
        Credit1Params {
            level_domain_credits: true,
            ..exact(V420)
        },
        "level_domain_credits",
    );
    refused(
        Credit1Params {
            boost_domains: boost.clone(),
            ..exact(V420)
        },
        "boost_domains",
    );
    refused(
        Credit1Params {
            boost_slice_ms: Some(31),
            ..exact(V33)
        },
        "boost_slice_ms",
    );
    for (limit_ms, ratio_pct) in [(0, 20), (10_001, 20), (100, 0), (100, 101)] {
        refused(
            Credit1Params {
                boost_domains: vec![Credit1BoostDomain {
                    domain: "d".into(),
                    limit_ms,
                    ratio_pct,
                }],
                ..exact(V33)
            },
            "boost_domains",
        );
    }
    let mut twice = boost.clone();
    twice.extend(boost);
    refused(
        Credit1Params {
            boost_domains: twice,
            ..exact(V33)
        },
        "boost_domains",
    );
}

/// A finding, not a rule of the talk: boost credit refilled at every pass (every 30 ms) makes a
/// boost domain BOOST again at each slice end, and without the BOOST slice a BOOST vCPU keeps
/// its CPU for the whole 30 ms slice (the tick's demotion does not reschedule, X8), so an UNDER
/// neighbour is always queued behind a BOOST vCPU; the 2 ms BOOST slice gives it its turn.
#[test]
fn x13_without_the_boost_slice_boost_credit_can_starve_an_under_neighbour() {
    for slice in [None, Some(2)] {
        let p = Credit1Params {
            boost_slice_ms: slice,
            ..exact(V33)
        };
        let mut h = one_cpu_with(p, 3);
        ops_mut(&mut h).set_boost_domain(0, 100, 30);
        ops_mut(&mut h).set_boost_domain(1, 10, 5);
        for e in 0..3 {
            wake(&mut h, e);
            h.pump();
        }
        h.run_for(3_000_000_000, 100_000);
        let share = h.run_ns[2] as f64 / 3e9;
        if slice.is_none() {
            assert!(share < 0.05, "starved: {:?}", h.run_ns);
        } else {
            assert!(share > 0.3, "its third: {:?}", h.run_ns);
        }
    }
}

#[test]
fn x13_exact_debit_charges_a_vcpu_running_on_a_cpu_taken_offline() {
    for on in [false, true] {
        let p = Credit1Params {
            exact_debit: on,
            ..exact(V33)
        };
        let mut h = harness(p, flat(2), vec![params(0, 2)]);
        wake(&mut h, 0);
        h.pump();
        // 3.3 places a new domain off CPU 0's core.
        assert_eq!(h.curr(1), Some(0));
        h.advance(ms(3));
        h.cpu_offline(1);
        assert_eq!(credit(&h, 0), if on { -30 } else { 0 }, "on={on}");
    }
}

/// A finding of the talk's rules: the pass refills boost credit (ratio > 0) and a vCPU holding
/// boost credit is BOOST, so a boost domain's vCPU is BOOST after every pass even with negative
/// credit, and is UNDER (not OVER) once its boost credit runs out: it is never OVER.
#[test]
fn x13_a_boost_domains_vcpu_is_boost_after_every_pass_even_in_debt() {
    for boost in [false, true] {
        let mut h = boost_pair(boost);
        activate(&mut h, 0);
        activate(&mut h, 1);
        set_credit(&mut h, 0, -250);
        acct(&mut h);
        if boost {
            assert_eq!((pri(&h, 0), credit(&h, 0)), (PRI_BOOST, -160));
        } else {
            assert_eq!((pri(&h, 0), credit(&h, 0)), (PRI_OVER, -100));
        }
    }
}
