//! §2.8 DELAY_DEQUEUE and DELAY_ZERO (6.12+).

use super::*;

/// CPU 1 runs C (pinned); A and B share CPU 0; A runs 0.5 ms (ahead of B: not eligible) and
/// blocks; then C blocks, so CPU 1 is idle. Returns the harness.
fn a_blocks_ineligible(p: EevdfParams) -> Harness<EevdfSched> {
    let ents = vec![
        vmsched_core::testkit::placed_on(0, 2, 0),
        vmsched_core::testkit::placed_on(1, 2, 0),
        pinned(2, 2, 1),
    ];
    let mut h = harness_with(p, 2, ents);
    wake_pump(&mut h, C);
    wake_pump(&mut h, A);
    wake_pump(&mut h, B);
    assert_eq!((h.curr(0), h.curr(1)), (Some(A), Some(C)));
    assert_eq!(fair(&h).ses[B as usize].cpu, 0, "B queued behind A");
    h.advance(500 * US);
    charge(&mut h, 0);
    assert!(!fair(&h).entity_eligible(0, A as usize));
    h.block(A);
    assert_eq!(h.curr(0), Some(B));
    h.block(C);
    assert_eq!(h.curr(1), None);
    h
}

/// §2.8.1: a task that sleeps while not eligible stays queued, delayed, counting in the
/// queue's load and nr_running, with its negative lag intact; without DELAY_DEQUEUE it leaves.
#[test]
fn an_ineligible_sleeper_stays_queued() {
    let h = a_blocks_ineligible(EevdfParams::new(EevdfKernel::V6_12));
    let a = se(&h, A);
    assert!(a.sched_delayed && a.on_rq);
    let rq = &fair(&h).rqs[0];
    assert_eq!(rq.nr_running, 2);
    assert_eq!(rq.load, 2048);
    assert!(rq.queue.contains(&(A as usize)));

    let p = with_features(EevdfKernel::V6_12, |f| f.DELAY_DEQUEUE = Some(false));
    let h = a_blocks_ineligible(p);
    let a = se(&h, A);
    assert!(!a.sched_delayed && !a.on_rq);
    assert!(a.vlag < 0, "left with its negative lag");
    assert_eq!(fair(&h).rqs[0].nr_running, 1);
}

/// 6.6 has no DELAY_DEQUEUE: the sleeper leaves at once.
#[test]
fn no_delay_dequeue_in_6_6() {
    let h = a_blocks_ineligible(EevdfParams::new(EevdfKernel::V6_6));
    assert!(!se(&h, A).on_rq);
}

/// §2.8.3: a delayed task woken before it is picked is requeued in place on its CPU (no CPU
/// selection, though CPU 1 is idle); without DELAY_DEQUEUE the wake-up goes to the idle CPU.
#[test]
fn a_delayed_task_wakes_in_place() {
    let mut h = a_blocks_ineligible(EevdfParams::new(EevdfKernel::V6_12));
    let v_before = se(&h, A).vruntime;
    wake(&mut h, A);
    let a = se(&h, A);
    assert_eq!(a.cpu, 0);
    assert!(a.on_rq && !a.sched_delayed);
    assert_eq!(a.vruntime, v_before, "negative lag: not re-placed");
    assert_eq!(fair(&h).rqs[0].nr_running, 2);
    h.pump();
    assert_eq!(h.curr(1), None, "CPU 1 stays idle");

    let p = with_features(EevdfKernel::V6_12, |f| f.DELAY_DEQUEUE = Some(false));
    let mut h = a_blocks_ineligible(p);
    wake_pump(&mut h, A);
    assert_eq!(se(&h, A).cpu, 1, "an ordinary wake-up takes the idle CPU");
}

/// §2.8.2 and DELAY_ZERO: while delayed, A pays back its negative lag as B runs; when the pick
/// reaches it, it is dequeued for real, and a lag that has become positive is cut to 0
/// (DELAY_ZERO) or kept (without).
#[test]
fn a_delayed_task_picked_leaves_with_its_lag_zeroed() {
    for zero in [true, false] {
        let p = with_features(EevdfKernel::V6_12, |f| f.DELAY_ZERO = Some(zero));
        let mut h = a_blocks_ineligible(p);
        // B runs its request (1.5 ms with 2 CPUs): V passes A, whose deadline is now earliest.
        let mut guard = 0;
        while se(&h, A).on_rq {
            h.run_for(100 * US, 100 * US);
            guard += 1;
            assert!(guard < 200, "A never picked");
        }
        let a = se(&h, A);
        assert!(!a.sched_delayed);
        assert_eq!(h.curr(0), Some(B));
        if zero {
            assert_eq!(a.vlag, 0, "DELAY_ZERO");
        } else {
            assert!(a.vlag > 0, "lag kept: {}", a.vlag);
        }
        assert_eq!(fair(&h).rqs[0].nr_running, 1);
    }
}

/// §2.8.3 with DELAY_ZERO: a delayed task woken once its lag has turned positive is re-placed
/// at V (lag 0) with a fresh deadline.
#[test]
fn a_delayed_task_with_positive_lag_is_replaced_at_v() {
    let mut h = a_blocks_ineligible(EevdfParams::new(EevdfKernel::V6_12));
    // Let B run until A's lag is positive but before B's request ends (no pick yet).
    h.advance(700 * US);
    charge(&mut h, 0);
    assert!(se(&h, A).sched_delayed);
    let f = fair(&h);
    assert!(f.entity_lag(f.avg_vruntime(0), A as usize) > 0);
    // V without A (it is taken out, then placed back at that V).
    let (sum, load) = f.sums(0);
    let a = &f.ses[A as usize];
    let key = vdiff(a.vruntime, f.rqs[0].min_vruntime);
    let (s2, l2) = (sum - key * 1024, load - 1024);
    let v_wo = f.rqs[0].min_vruntime.wrapping_add(s2.div_euclid(l2) as u64);
    wake(&mut h, A);
    let a = se(&h, A);
    assert_eq!(a.vruntime, v_wo);
    assert_eq!(vdiff(a.deadline, a.vruntime) as u64, fair(&h).base_slice);
    assert!(!a.sched_delayed && a.on_rq);
}

/// A CPU going offline dequeues its delayed tasks (upstream's migrate_tasks picks them, and the
/// pick completes their dequeue): nothing delayed is left behind.
#[test]
fn offline_completes_delayed_dequeues() {
    let mut h = a_blocks_ineligible(EevdfParams::new(EevdfKernel::V6_12));
    assert!(se(&h, A).sched_delayed);
    h.cpu_offline(0);
    let a = se(&h, A);
    assert!(!a.on_rq && !a.sched_delayed);
    assert_eq!(se(&h, B).cpu, 1, "B moved");
    wake_pump(&mut h, A);
    assert_eq!(se(&h, A).cpu, 1);
}

/// The balancer never moves a delayed task.
#[test]
fn delayed_tasks_are_not_migrated() {
    let h = a_blocks_ineligible(EevdfParams::new(EevdfKernel::V6_12));
    let f = fair(&h);
    assert!(!f.may_migrate(A as usize));
    assert!(f.may_migrate(B as usize));
}
