//! BOOST (§2.8, ERRATA X7, X8): who is boosted on a wake, what a BOOST vCPU preempts, and how it
//! loses BOOST (a tick that finds it running, without a reschedule; the accounting pass).

use super::*;

/// vCPU 0 runs on CPU 0 (a hog, UNDER); vCPU 1 is blocked, never run.
fn hog_and_sleeper(v: Credit1Version) -> H {
    let mut h = one_cpu(v, 2);
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    h.advance(ms(5));
    tick(&mut h, 0);
    h.pump();
    assert_eq!(pri(&h, 0), PRI_UNDER);
    // The 4.20 insertion's pick left MIGRATING on vCPU 1: clear it as an earlier wake would.
    ops_mut(&mut h).units[1].migrating = false;
    h
}

#[test]
fn x7_boost_goes_by_the_stored_priority_not_the_credit() {
    for v in [V33, V420] {
        let mut h = hog_and_sleeper(v);
        set_credit(&mut h, 1, -120);
        assert_eq!(pri(&h, 1), PRI_UNDER);
        wake(&mut h, 1);
        assert_eq!(
            pri(&h, 1),
            PRI_BOOST,
            "{v:?}: UNDER with negative credit is boosted"
        );
    }
}

#[test]
fn an_over_vcpu_is_never_boosted() {
    for v in [V33, V420] {
        let mut h = hog_and_sleeper(v);
        set_pri(&mut h, 1, PRI_OVER);
        set_credit(&mut h, 1, 50);
        wake(&mut h, 1);
        assert_eq!(pri(&h, 1), PRI_OVER, "{v:?}");
        assert_eq!(runq(&h, 0), vec![1]);
        assert!(
            h.take_resched().is_empty(),
            "{v:?}: OVER does not beat UNDER"
        );
    }
}

#[test]
fn a_boosted_wake_preempts_an_under_hog_at_once() {
    for v in [V33, V420] {
        let mut h = hog_and_sleeper(v);
        h.advance(ms(3)); // past the 4.20 ratelimit
        wake(&mut h, 1);
        assert_eq!(h.take_resched(), vec![0], "{v:?}: its CPU is tickled");
        assert_eq!(h.schedule(0).next, Some(EntityId(1)), "{v:?}");
        assert_eq!(runq(&h, 0), vec![0], "{v:?}: the hog waits");
    }
}

#[test]
fn v4_20_the_wake_that_ends_a_migration_is_not_boosted() {
    let mut h = one_cpu(V420, 2);
    assert!(
        unit(&h, 1).migrating,
        "insertion picks a CPU (csched_res_pick)"
    );
    wake(&mut h, 0);
    wake(&mut h, 1);
    assert_eq!(pri(&h, 1), PRI_UNDER, "the first wake after insertion");
    assert!(!unit(&h, 1).migrating, "the wake clears the flag");
    // 3.3 has no such flag: the first wake boosts.
    let mut h = one_cpu(V33, 1);
    wake(&mut h, 0);
    assert_eq!(pri(&h, 0), PRI_BOOST);
}

#[test]
fn x8_a_tick_demotes_a_running_boost_vcpu_without_a_reschedule() {
    for v in [V33, V420] {
        let mut h = hog_and_sleeper(v);
        h.advance(ms(3));
        wake(&mut h, 1);
        h.pump();
        assert_eq!((h.curr(0), pri(&h, 1)), (Some(1), PRI_BOOST), "{v:?}");
        // A third vCPU-to-be: the hog waits UNDER; vCPU 1 keeps running after the tick.
        h.advance(ms(2));
        tick(&mut h, 0);
        assert_eq!(pri(&h, 1), PRI_UNDER, "{v:?}: BOOST ends at the tick");
        assert!(
            h.take_resched().is_empty(),
            "{v:?}: the tick raises no reschedule"
        );
        h.pump();
        assert_eq!(
            h.curr(0),
            Some(1),
            "{v:?}: it keeps the CPU until its slice ends"
        );
    }
}

#[test]
fn x8_a_boost_vcpu_queued_behind_a_boost_current_waits_for_its_slice() {
    // vCPU 0 runs BOOST (3.3: its first wake boosts); vCPU 1 wakes BOOST: not strictly higher,
    // no preemption; the tick demotes vCPU 0 without rescheduling: vCPU 1 waits for the slice.
    let mut h = one_cpu(V33, 2);
    wake(&mut h, 0);
    h.pump();
    assert_eq!(pri(&h, 0), PRI_BOOST);
    h.advance(ms(1));
    wake(&mut h, 1);
    assert!(h.take_resched().is_empty(), "BOOST does not preempt BOOST");
    h.advance(ms(9));
    tick(&mut h, 0);
    assert_eq!(pri(&h, 0), PRI_UNDER);
    assert!(h.take_resched().is_empty());
    assert_eq!(
        h.timer[0],
        Some(ms(30)),
        "vCPU 1 waits until 30 ms after the switch-in"
    );
}

#[test]
fn the_accounting_pass_overwrites_boost_of_active_vcpus() {
    let mut h = hog_and_sleeper(V420);
    activate(&mut h, 1);
    set_pri(&mut h, 1, PRI_BOOST);
    acct(&mut h);
    assert_eq!(pri(&h, 1), PRI_UNDER);
}

#[test]
fn a_parked_vcpu_unparked_by_the_pass_is_not_boosted() {
    let mut p = pinned(0, 1, 0);
    p.xen.cap_pct = 10;
    let mut h = harness(exact(V33), flat(1), vec![p, pinned(1, 1, 0)]);
    wake(&mut h, 0);
    h.pump();
    activate(&mut h, 0);
    set_credit(&mut h, 0, -300);
    acct(&mut h);
    h.pump();
    assert!(h.sched.is_parked(EntityId(0)));
    set_credit(&mut h, 0, 0);
    acct(&mut h);
    assert!(!h.sched.is_parked(EntityId(0)));
    assert_eq!(
        pri(&h, 0),
        PRI_UNDER,
        "vcpu_unpause's wake sees PARKED: no BOOST"
    );
}
