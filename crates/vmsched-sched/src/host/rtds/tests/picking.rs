//! The runqueue order and `rt_schedule`'s choice (§4.3, §4.6, §4.10).

use super::*;

/// §4.3, §4.6: the runqueue is sorted by deadline at one level, FIFO among equal deadlines;
/// a lower level beats any deadline of a higher level.
#[test]
fn runq_is_sorted_by_level_then_deadline_fifo_among_equals() {
    // CPU 0 is kept busy by e0 so that the others queue.
    let ents = vec![
        rt_on(0, 1, 0, 1000, 1000, false),
        rt_on(1, 1, 0, 1000, 8000, false),
        rt_on(2, 1, 0, 1000, 4000, false),
        rt_on(3, 1, 0, 1000, 8000, false),
        rt_on(4, 1, 0, 1000, 6000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    h.pump();
    for e in 1..5 {
        wake(&mut h, e);
    }
    assert_eq!(runq(&h), vec![2, 4, 1, 3]);
    // Level 1 with the earliest deadline goes behind every level-0 vCPU.
    h.set_paused(2, true);
    h.sched.ops.units[2].priority_level = 1;
    h.set_paused(2, false);
    assert_eq!(runq(&h), vec![4, 1, 3, 2]);
}

/// §4.10 step 3: the current vCPU is kept only if it has budget and *strictly* beats the
/// pick; with equal deadlines the queued vCPU takes the CPU.
#[test]
fn current_kept_only_if_it_strictly_beats_the_pick() {
    let ents = (0..2)
        .map(|i| rt_on(i, 1, 0, 4000, 10_000, false))
        .collect();
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    h.advance(us(100));
    let pick = h.schedule(0);
    assert_eq!(
        pick.next,
        Some(EntityId(1)),
        "equal deadlines: the queued one runs"
    );
    h.pump();
    assert_eq!(runq(&h), vec![0]);
    // With an earlier deadline the current one is kept.
    let ents = vec![
        rt_on(0, 1, 0, 4000, 9_000, false),
        rt_on(1, 1, 0, 4000, 10_000, false),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    h.advance(us(100));
    let pick = h.schedule(0);
    assert_eq!(pick.next, Some(EntityId(0)));
    assert_eq!(pick.slice, Some(us(3900)), "the budget left");
}

/// §4.10 step 2: a queued vCPU that is not runnable (its pause came while it was queued
/// without a `sleep`, as for a migrating vCPU) is dropped from the runqueue and `replq`.
#[test]
fn a_queued_vcpu_that_cannot_run_is_dropped_at_pick() {
    let ents = (0..2)
        .map(|i| rt_on(i, 1, 0, 4000, 10_000, false))
        .collect();
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    assert_eq!(runq(&h), vec![1]);
    // Blocked while queued (the harness lets the test say so directly).
    h.ents[1].runnable = false;
    h.advance(us(10));
    h.block(0);
    h.pump();
    assert_eq!(h.curr(0), None);
    assert!(runq(&h).is_empty());
    assert!(replq(&h).is_empty());
}

/// §4.10 step 2: the pick honours hard affinity: a CPU skips queued vCPUs it may not run.
#[test]
fn pick_skips_vcpus_not_allowed_here() {
    let ents = vec![
        rt_on(0, 2, 1, 4000, 10_000, false),
        rt_on(1, 2, 1, 4000, 5_000, false),
        rt_on(2, 2, 0, 4000, 20_000, false),
    ];
    let mut h = harness(2, ents);
    for e in 0..3 {
        wake(&mut h, e);
    }
    h.pump();
    assert_eq!(h.curr(1), Some(1));
    assert_eq!(h.curr(0), Some(2), "CPU 0 skips e0, pinned to CPU 1");
}

/// §4.10 step 5: a vCPU picked on another CPU than `processor(v)` moves there; the slice is
/// its budget left.
#[test]
fn picked_vcpu_moves_to_the_cpu_and_gets_its_budget_as_slice() {
    let mut p = rt(0, 2, 2500, 10_000, false);
    p.initial_cpu = CpuId(1);
    let mut h = harness(2, vec![p]);
    assert_eq!(h.sched.ops.units[0].processor, CpuId(1));
    wake(&mut h, 0);
    assert_eq!(h.take_resched(), vec![1], "its own CPU first");
    let pick = h.schedule(0);
    assert_eq!(pick.next, Some(EntityId(0)));
    assert_eq!(pick.slice, Some(us(2500)));
    assert_eq!(h.sched.ops.units[0].processor, CpuId(0));
}
