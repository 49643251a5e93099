//! The scheduling decision: candidate selection (§3.11) and yield (§3.10).

use super::*;

// ------------------------------------------------------------------------------------------
// §3.11 candidate selection
// ------------------------------------------------------------------------------------------

#[test]
fn candidate_skips_vcpus_tickled_for_another_cpu() {
    let mut h = flat_harness(rl(0), 2, 2);
    set_processor(&mut h, 0, 1);
    set_processor(&mut h, 1, 0);
    wake(&mut h, 0);
    assert_eq!(h.sched.ops.units[0].tickled_cpu, Some(CpuId(1)));
    wake(&mut h, 1);
    assert_eq!(h.take_resched(), vec![1, 0]);
    // e0 is first in the queue but reserved for CPU 1, still tickled.
    h.schedule(0);
    assert_eq!(h.curr(0), Some(1));
    h.schedule(1);
    assert_eq!(h.curr(1), Some(0));
}

#[test]
fn candidate_skips_on_migrate_resist_and_keeps_scanning() {
    let mut h = flat_harness(rl(0), 2, 3);
    set_processor(&mut h, 0, 0);
    wake(&mut h, 0);
    h.schedule(0);
    h.take_resched();
    h.sched.ops.rqs[0].idle.remove(CpuId(1)); // CPU 1 busy elsewhere: wakes queue only
    h.sched.ops.rqs[0].smt_idle = CpuSet::empty();
    set_credit(&mut h, 0, 5 * MS);
    set_processor(&mut h, 1, 1);
    set_processor(&mut h, 2, 0);
    set_credit(&mut h, 1, 5 * MS + 400 * US);
    set_credit(&mut h, 2, 5 * MS + 100 * US);
    wake(&mut h, 1);
    wake(&mut h, 2);
    assert_eq!(runq(&h, 0), vec![1, 2]);
    h.schedule(0);
    assert_eq!(
        h.curr(0),
        Some(2),
        "e1 leads by less than MIGRATE_RESIST from another CPU"
    );
    // With a lead of exactly 500 µs, the skip (default + RESIST > w) no longer applies.
    let mut h = flat_harness(rl(0), 2, 2);
    set_processor(&mut h, 0, 0);
    wake(&mut h, 0);
    h.schedule(0);
    h.sched.ops.rqs[0].idle.remove(CpuId(1));
    h.sched.ops.rqs[0].smt_idle = CpuSet::empty();
    set_credit(&mut h, 0, 5 * MS);
    set_processor(&mut h, 1, 1);
    wake(&mut h, 1);
    set_credit(&mut h, 1, 5 * MS + 500 * US);
    h.schedule(0);
    assert_eq!(h.curr(0), Some(1));
    assert_eq!(
        credit(&h, 1),
        5_550 * US,
        "pulled over: +MIGRATE_COMPENSATION"
    );
    assert_eq!(h.sched.ops.processor(EntityId(1)), CpuId(0));
}

#[test]
fn candidate_respects_hard_affinity() {
    let mut ents = vec![params(0, 2), params(1, 2)];
    ents[0].hard_affinity = CpuSet::from_ids([1]);
    let mut h = harness(rl(0), flat(2), ents);
    h.sched.ops.rqs[0].idle = CpuSet::empty();
    h.sched.ops.rqs[0].smt_idle = CpuSet::empty();
    set_processor(&mut h, 1, 0);
    set_credit(&mut h, 1, MS);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.schedule(0);
    assert_eq!(h.curr(0), Some(1));
    h.schedule(1);
    assert_eq!(h.curr(1), Some(0));
}

// ------------------------------------------------------------------------------------------
// §3.10 yield
// ------------------------------------------------------------------------------------------

#[test]
fn yield_bypasses_ratelimit_and_the_credit_stop() {
    let mut h = flat_harness(Credit2Params::default(), 1, 2);
    wake(&mut h, 0);
    h.schedule(0);
    wake(&mut h, 1);
    set_credit(&mut h, 1, MS);
    h.advance(us(100));
    assert_eq!(
        h.yield_(0).next,
        Some(EntityId(1)),
        "yield within R, to a vCPU with less credit"
    );
    assert!(!h.sched.ops.units[0].yield_, "the flag is consumed");
    // Alone, the yielder continues.
    let mut h = flat_harness(Credit2Params::default(), 1, 1);
    wake(&mut h, 0);
    h.schedule(0);
    h.advance(us(100));
    assert_eq!(h.yield_(0).next, Some(EntityId(0)));
}

#[test]
fn yield_does_not_bypass_migrate_resist() {
    let mut h = flat_harness(Credit2Params::default(), 2, 2);
    set_processor(&mut h, 0, 0);
    wake(&mut h, 0);
    h.schedule(0);
    h.sched.ops.rqs[0].idle.remove(CpuId(1));
    h.sched.ops.rqs[0].smt_idle = CpuSet::empty();
    set_processor(&mut h, 1, 1);
    wake(&mut h, 1);
    h.advance(us(100));
    // e1 (10 ms) vs the yielder's 9.9 ms + 500 µs: resisted.
    assert_eq!(h.yield_(0).next, Some(EntityId(0)));
}
