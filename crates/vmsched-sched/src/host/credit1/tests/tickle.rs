//! Tickling on wake (§2.8, ERRATA X10): 3.3 raises its CPU when the woken vCPU beats the
//! running one plus every idler; 4.20 decides about the woken vCPU's CPU, tickles one idler of
//! its affinity (round robin on the waker's CPU) and takes the tickled CPUs out of the idlers.

use super::*;

/// Three CPUs: vCPU 0 (a hog) runs on CPU 0; vCPU 1 (blocked) last ran on CPU 0 and may run
/// anywhere; CPUs 1 and 2 idle.
fn busy_and_idlers(v: Credit1Version) -> H {
    let mut h = harness(exact(v), flat(3), vec![pinned(0, 3, 0), placed_on(1, 3, 0)]);
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    h.advance(ms(5));
    tick(&mut h, 0);
    h.pump();
    let u = &mut ops_mut(&mut h).units[1];
    u.processor = CpuId(0);
    u.migrating = false;
    h
}

#[test]
fn v3_3_tickles_its_cpu_when_it_beats_the_current_and_every_idler() {
    let mut h = busy_and_idlers(V33);
    wake(&mut h, 1);
    assert_eq!(pri(&h, 1), PRI_BOOST);
    assert_eq!(h.take_resched(), vec![0, 1, 2]);
    assert!(
        ops(&h).idlers.contains(CpuId(1)),
        "3.3 leaves the idlers alone"
    );
}

#[test]
fn v3_3_an_equal_priority_wake_tickles_only_the_idlers() {
    let mut h = busy_and_idlers(V33);
    set_pri(&mut h, 1, PRI_OVER);
    set_pri(&mut h, 0, PRI_OVER);
    wake(&mut h, 1);
    assert_eq!(h.take_resched(), vec![1, 2]);
}

#[test]
fn x10_v4_20_tickles_one_idler_and_not_its_busy_cpu_even_when_boosted() {
    let mut h = busy_and_idlers(V420);
    wake(&mut h, 1);
    assert_eq!(pri(&h, 1), PRI_BOOST);
    let asked = h.take_resched();
    assert_eq!(asked.len(), 1, "one idler: {asked:?}");
    assert!(
        asked[0] == 1 || asked[0] == 2,
        "an idler, not CPU 0: {asked:?}"
    );
    assert!(
        !ops(&h).idlers.contains(CpuId(asked[0])),
        "tickled: no longer idle"
    );
    // The idler steals it.
    h.schedule(asked[0]);
    assert_eq!(h.curr(asked[0]), Some(1));
    assert_eq!(h.curr(0), Some(0), "the hog was not preempted");
}

#[test]
fn v4_20_the_idler_cursor_cycles_per_waking_cpu() {
    let mut h = busy_and_idlers(V420);
    ops_mut(&mut h).pcpus[2].last_tickle = CpuId(0);
    wake_from(&mut h, 1, 2);
    assert_eq!(h.take_resched(), vec![1], "cycle after CPU 0 in {{1, 2}}");
    assert_eq!(ops(&h).pcpus[2].last_tickle, CpuId(1));
}

#[test]
fn v4_20_tickle_one_idle_cpu_off_tickles_every_idler() {
    let p = Credit1Params {
        tickle_one_idle_cpu: Some(false),
        ..exact(V420)
    };
    let mut h = harness(p, flat(3), vec![pinned(0, 3, 0), placed_on(1, 3, 0)]);
    wake(&mut h, 0);
    h.pump();
    ops_mut(&mut h).units[1].migrating = false;
    ops_mut(&mut h).units[1].processor = CpuId(0);
    wake(&mut h, 1);
    assert_eq!(h.take_resched(), vec![1, 2]);
}

#[test]
fn v4_20_with_no_idler_it_tickles_its_cpu_only_if_it_beats_the_current() {
    let mut h = harness(exact(V420), flat(1), vec![pinned(0, 1, 0), pinned(1, 1, 0)]);
    wake(&mut h, 0);
    h.pump();
    set_pri(&mut h, 1, PRI_OVER);
    wake(&mut h, 1);
    assert!(h.take_resched().is_empty(), "OVER does not beat UNDER");
    h.block(0);
    h.pump();
    assert_eq!(h.curr(0), Some(1));
    ops_mut(&mut h).units[0].migrating = false;
    wake(&mut h, 0);
    assert_eq!(h.take_resched(), vec![0], "BOOST beats OVER");
}

#[test]
fn v4_20_a_wake_on_an_idle_cpu_tickles_that_cpu() {
    let mut h = free(V420, 2, 1);
    let cpu = unit(&h, 0).processor.0;
    wake(&mut h, 0);
    assert_eq!(h.take_resched(), vec![cpu]);
}

#[test]
fn v4_20_soft_affinity_idlers_come_first() {
    let mut p1 = placed_on(1, 3, 0);
    p1.soft_affinity = CpuSet::from_ids([0, 2]);
    let mut h = harness(exact(V420), flat(3), vec![pinned(0, 3, 0), p1]);
    wake(&mut h, 0);
    h.pump();
    ops_mut(&mut h).units[1].migrating = false;
    ops_mut(&mut h).units[1].processor = CpuId(0);
    assert!(unit(&h, 1).has_soft);
    wake(&mut h, 1);
    assert_eq!(h.take_resched(), vec![2], "the idler in its soft affinity");
}
