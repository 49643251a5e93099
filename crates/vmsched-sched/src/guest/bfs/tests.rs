//! BFS unit tests: one per rule of spec §4 (and ERRATA L8), on the test harness.

use super::*;
use vmsched_core::cpuset::CpuSet;
use vmsched_core::sched::WakeCause;
use vmsched_core::testkit::{flat, params, pinned_to, Harness};
use vmsched_core::time::ms;

fn bfs(ncpus: usize, hz: u32, ents: Vec<vmsched_core::EntityParams>) -> Harness<BfsSched> {
    let p = BfsParams {
        hz,
        ..Default::default()
    };
    Harness::new(Bfs::sched(p, &flat(ncpus)), ncpus, ents)
}

fn st(h: &Harness<BfsSched>, e: u32) -> (u64, i64, bool) {
    h.sched.cls.fair.task_state(EntityId(e))
}

fn fork(h: &mut Harness<BfsSched>, e: u32) {
    h.wake(e, WakeInfo::of(WakeCause::Fork));
    h.pump();
}

/// §4.1/§4.2: the ratio table and the nice-0 offset (41.09 ms at rr_interval 6).
#[test]
fn prio_ratios_and_deadline_offsets() {
    let r = prio_ratios();
    assert_eq!(
        (r[0], r[5], r[10], r[20], r[21], r[39]),
        (128, 203, 324, 836, 919, 5089)
    );
    let b = Bfs::new(BfsParams::default(), &flat(1));
    assert_eq!(b.deadline_diff(20), 836 * 6 * 8192);
    assert_eq!(b.deadline_diff(20), 41_091_072);
    assert_eq!(b.deadline_diff(0), 6_291_456);
}

/// §4.2, L8: the first slice is `rr_interval << 10` units, charged in 1.024 µs units; a
/// sleeper keeps its deadline and the rest of its slice.
#[test]
fn sleepers_keep_deadline_and_remaining_slice_in_1024ns_units() {
    let mut h = bfs(1, 100, vec![params(0, 1)]);
    fork(&mut h, 0);
    let (dl0, ts0, _) = st(&h, 0);
    assert_eq!(ts0, 6144);
    assert_eq!(
        dl0, 41_091_072,
        "a fork on an idle CPU gets a fresh deadline"
    );
    h.advance(3_000_000);
    h.block(0);
    assert_eq!(st(&h, 0), (dl0, 6144 - (3_000_000 >> 10), false));
    h.advance(ms(100));
    h.wake(0, WakeInfo::default());
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    assert_eq!(st(&h, 0).0, dl0, "the deadline is not renewed by the sleep");
    assert_eq!(st(&h, 0).1, 6144 - 2929);
}

/// BFS 0.440 update_cpu_clock (niffy_diff): a charge interval longer than two jiffies (a vCPU
/// kept away by its host) counts as 1 ns; up to two jiffies it is charged in full.
#[test]
fn charges_longer_than_two_jiffies_count_as_nothing() {
    for (gap, left) in [(ms(2), 6144 - (ms(2) >> 10) as i64), (ms(2) + 1, 6144)] {
        let mut h = bfs(1, 1000, vec![params(0, 1)]);
        fork(&mut h, 0);
        h.advance(gap);
        h.block(0);
        assert_eq!(st(&h, 0).1, left, "gap {gap}");
    }
}

/// §4.3 + L8: a slice used up (below RESCHED_US = 100 units) is refilled at the deschedule with
/// deadline = now + offset; a slice of 100 units or more is not.
#[test]
fn used_up_slice_is_refilled_at_deschedule() {
    let mut h = bfs(1, 100, vec![params(0, 1)]);
    fork(&mut h, 0);
    let (dl0, _, _) = st(&h, 0);
    // 6144 − 100 = 6044 units = 6_189_056 ns leaves exactly RESCHED_US: no refill.
    h.advance(6_189_056);
    h.block(0);
    assert_eq!(st(&h, 0), (dl0, 100, false));
    h.wake(0, WakeInfo::default());
    h.pump();
    h.advance(1024);
    let now = h.now;
    h.block(0);
    assert_eq!(
        st(&h, 0),
        (now + 41_091_072, 6144, false),
        "99 units left: refilled"
    );
}

/// §4.3: the earliest deadline runs; nice only changes the deadline offset.
#[test]
fn earliest_deadline_first_and_nice_offsets() {
    let mut n10 = params(1, 1);
    n10.linux.nice = 10;
    let mut h = bfs(1, 1000, vec![params(0, 1), n10, params(2, 1)]);
    // Fresh deadlines on an idle CPU: 2 and 1 (nice 10) at 1 ms, 0 at 2 ms.
    h.advance(ms(1));
    fork(&mut h, 2);
    h.block(2);
    fork(&mut h, 1);
    h.block(1);
    h.advance(ms(1));
    fork(&mut h, 0);
    h.block(0);
    assert_eq!(st(&h, 2).0, ms(1) + 41_091_072);
    assert_eq!(st(&h, 1).0, ms(1) + 2161 * 6 * 8192, "nice 10: 106.2 ms");
    assert_eq!(st(&h, 0).0, ms(2) + 41_091_072);
    h.wake(1, WakeInfo::default());
    h.pump();
    assert_eq!(h.curr(0), Some(1));
    h.wake(2, WakeInfo::default());
    h.wake(0, WakeInfo::default());
    h.pump();
    assert_eq!(h.curr(0), Some(2), "the earliest deadline is picked");
    h.block(2);
    assert_eq!(h.curr(0), Some(0), "then 0, though nice 10 woke first");
    h.block(0);
    assert_eq!(h.curr(0), Some(1));
}

/// §4.5: a wakee with an earlier deadline than the running task preempts it; one with a later
/// deadline does not.
#[test]
fn wakeup_preempts_on_earlier_deadline_only() {
    let mut h = bfs(1, 1000, vec![params(0, 1), params(1, 1)]);
    fork(&mut h, 1);
    h.block(1); // 1: deadline 41.09 ms, nearly a full slice
    h.advance(ms(1));
    fork(&mut h, 0); // 0: fresh deadline 42.09 ms
    assert!(st(&h, 1).0 < st(&h, 0).0);
    h.wake(1, WakeInfo::default());
    assert_eq!(h.take_resched(), vec![0], "earlier deadline preempts");
    h.schedule(0);
    assert_eq!(h.curr(0), Some(1));
    // Now 0 (later deadline) is queued; block it out by running 1, then wake 0 against 1.
    h.block(1);
    assert_eq!(h.curr(0), Some(0));
    h.block(0);
    h.wake(1, WakeInfo::default());
    h.pump();
    h.wake(0, WakeInfo::default());
    assert!(h.take_resched().is_empty(), "a later deadline waits");
}

/// §4.5: WF_SYNC with no idle CPU: no preemption at all, even with an earlier deadline.
#[test]
fn sync_wakeup_without_idle_cpu_does_not_preempt() {
    let mut h = bfs(1, 1000, vec![params(0, 1), params(1, 1)]);
    fork(&mut h, 1);
    h.block(1);
    h.advance(ms(1));
    fork(&mut h, 0);
    h.wake(
        1,
        WakeInfo {
            sync: true,
            ..Default::default()
        },
    );
    assert!(h.take_resched().is_empty());
    h.block(0);
    assert_eq!(h.curr(0), Some(1));
}

/// §4.5 try_preempt: with an idle CPU allowed, that CPU is woken (the wakee's last CPU first);
/// with every CPU busy, the CPU running the latest deadline is the one preempted.
#[test]
fn try_preempt_targets_latest_deadline_or_idle_cpu() {
    let ents = vec![params(0, 2), params(1, 2), params(2, 2)];
    let mut h = bfs(2, 1000, ents);
    fork(&mut h, 2);
    h.block(2); // 2: deadline 41.09 ms
    h.advance(ms(1));
    fork(&mut h, 0); // CPU 0, deadline 42.09 ms
    h.advance(ms(2));
    h.wake(1, WakeInfo::of(WakeCause::Fork));
    assert_eq!(h.take_resched(), vec![1], "its last CPU, idle");
    h.schedule(1);
    assert_eq!(h.curr(1), Some(1));
    assert_eq!(st(&h, 1).0, ms(3) + 41_091_072);
    h.wake(2, WakeInfo::default());
    assert_eq!(
        h.take_resched(),
        vec![1],
        "the latest deadline is preempted"
    );
}

/// §4.3 sticky: a task descheduled while runnable becomes its CPU's sticky task; another CPU
/// sees its deadline shifted left by the cache distance and takes a later local deadline first,
/// while its own CPU takes it at its plain deadline.
#[test]
fn sticky_task_is_avoided_by_other_cpus() {
    let ents = (0..4).map(|i| params(i, 2)).collect();
    let mut h = bfs(2, 1000, ents);
    fork(&mut h, 0); // A on CPU 0, deadline 41.09 ms
    h.advance(ms(1));
    fork(&mut h, 3); // D on CPU 1, deadline 42.09 ms, then asleep
    h.block(3);
    fork(&mut h, 1); // B on CPU 1, deadline 42.09 ms
                     // C is forked by A (CPU 0 busy, no idle CPU): same deadline, A rescheduled.
    h.wake(2, WakeInfo::of(WakeCause::Fork));
    h.pump();
    assert_eq!(h.curr(0), Some(2), "the child first");
    assert!(st(&h, 0).2, "A, descheduled while runnable, is sticky");
    h.wake(3, WakeInfo::default());
    assert!(h.take_resched().is_empty(), "D's 42.09 ms preempts nothing");
    h.block(1);
    assert_eq!(
        h.curr(1),
        Some(3),
        "CPU 1 passes over A (41.09 ms << 2) for D"
    );
    assert!(st(&h, 0).2);
    h.block(2);
    assert_eq!(h.curr(0), Some(0), "A's own CPU takes it");
    assert!(!st(&h, 0).2, "taking a task unsticks it");
}

/// §4.3: a lone runnable previous task runs on, its used-up slice refilled.
#[test]
fn lone_task_reruns_with_refilled_slice() {
    let mut h = bfs(1, 100, vec![params(0, 1)]);
    fork(&mut h, 0);
    h.run_for(ms(100), ms(1));
    assert_eq!(h.curr(0), Some(0));
    let (dl, ts, _) = st(&h, 0);
    assert!(dl > 41_091_072, "refilled at least once: {dl}");
    assert!(ts > 0);
}

/// §4.4: HZ = 100 and two hogs: each runs a whole tick (10 ms) at a time, since the first tick
/// after 6.29 ms of slice finds it used up; shares are even.
#[test]
fn tick_expiry_round_robins_hogs_at_tick_granularity() {
    let ents = (0..2).map(|i| pinned_to(params(i, 1), 0)).collect();
    let mut h = bfs(1, 100, ents);
    fork(&mut h, 0);
    fork(&mut h, 1);
    let first = h.curr(0).unwrap();
    h.run_for(ms(10) - 1, ms(1));
    assert_eq!(h.curr(0), Some(first));
    h.run_for(1, 1);
    assert_ne!(h.curr(0), Some(first), "expired at the 10 ms tick");
    h.run_for(ms(990), ms(1));
    let (a, b) = (h.run_ns[0], h.run_ns[1]);
    assert!(a.abs_diff(b) <= ms(10), "even shares: {a} {b}");
}

/// §4.4 dither: a task scheduled within the first half of a tick whose slice is at most half a
/// jiffy (5000 units at HZ 100) at a tick is expired there; scheduled in the second half, the
/// same slice runs on.
#[test]
fn dither_expires_half_jiffy_slices_early() {
    for (offset, expires) in [(ms(5), true), (ms(5) + 1, false)] {
        let mut h = bfs(1, 100, vec![params(0, 1)]);
        fork(&mut h, 0);
        h.run_for(ms(10), ms(1)); // the tick at 10 ms
        h.advance(offset);
        h.block(0);
        h.wake(0, WakeInfo::default());
        h.pump();
        assert_eq!(h.sched.cls.fair.cpus[0].dither, expires);
        // 4000 units left after the charge at the 20 ms tick.
        h.sched.cls.fair.t[0].time_slice = 4000 + ns_to_us(ms(5) - (offset - ms(5)));
        h.advance(ms(10) - offset);
        h.tick(0);
        assert_eq!(st(&h, 0).1, if expires { 0 } else { 4000 });
        assert_eq!(h.take_resched().len(), expires as usize, "offset {offset}");
    }
}

/// §4.3 RT: an RT task is above every normal deadline; SCHED_FIFO is never charged; SCHED_RR
/// tasks of one level round-robin by slice.
#[test]
fn rt_levels_fifo_uncharged_rr_round_robin() {
    let mut f = params(1, 1);
    f.linux.policy = Policy::Fifo;
    f.linux.rt_priority = 10;
    let mut h = bfs(1, 1000, vec![params(0, 1), f]);
    fork(&mut h, 1);
    h.block(1);
    fork(&mut h, 0);
    h.wake(1, WakeInfo::default());
    assert_eq!(h.take_resched(), vec![0], "RT preempts a normal task");
    h.schedule(0);
    h.run_for(ms(100), ms(1));
    assert_eq!(h.curr(0), Some(1));
    assert_eq!(st(&h, 1).1, 6144, "FIFO is never charged");
    // Two RR tasks of one level share the CPU by slices.
    let mut r = params(0, 1);
    r.linux.policy = Policy::Rr;
    r.linux.rt_priority = 5;
    let mut h = bfs(1, 1000, vec![r.clone(), r]);
    fork(&mut h, 0);
    fork(&mut h, 1);
    h.run_for(ms(1000), ms(1));
    let (a, b) = (h.run_ns[0], h.run_ns[1]);
    assert!(a.abs_diff(b) <= ms(8), "RR shares: {a} {b}");
}

/// §4.6 SCHED_IDLEPRIO: runs only when nothing else wants the CPU and never preempts a
/// normal task, whatever its deadline.
#[test]
fn idleprio_runs_only_when_idle() {
    let mut i = params(1, 1);
    i.linux.policy = Policy::Idle;
    let mut h = bfs(1, 1000, vec![params(0, 1), i]);
    fork(&mut h, 1);
    assert_eq!(h.curr(0), Some(1), "an idle CPU takes it");
    h.block(1);
    h.advance(ms(1));
    fork(&mut h, 0);
    h.wake(1, WakeInfo::default());
    assert!(h.take_resched().is_empty(), "never preempts a normal task");
    assert!(st(&h, 1).0 < st(&h, 0).0, "despite an earlier deadline");
    let before = h.run_ns[1];
    h.run_for(ms(500), ms(1));
    assert_eq!(h.run_ns[1], before, "never picked while a normal task runs");
    h.block(0);
    assert_eq!(h.curr(0), Some(1));
}

/// §4.5 fork: the child inherits the forker's deadline and half its slice, and the forker is
/// rescheduled when no idle CPU suits the child (child runs first).
#[test]
fn fork_splits_slice_and_child_runs_first() {
    let mut h = bfs(1, 1000, vec![params(0, 1), params(1, 1)]);
    fork(&mut h, 0);
    h.advance(ms(1));
    let (dl, _, _) = st(&h, 0);
    h.wake(
        1,
        WakeInfo {
            cause: WakeCause::Fork,
            parent: Some(EntityId(0)),
            waker_cpu: Some(CpuId(0)),
            ..Default::default()
        },
    );
    assert_eq!(h.take_resched(), vec![0], "the forker is rescheduled");
    assert_eq!(st(&h, 1).0, dl);
    assert_eq!(st(&h, 1).1, 3072, "half of the charged-at-tick slice");
    h.schedule(0);
    assert_eq!(
        h.curr(0),
        Some(1),
        "child first: same deadline, earlier in the queue"
    );
    assert_eq!(st(&h, 0).0, dl, "the forker keeps its deadline");
}

/// §4.5 fork with less than 2 × RESCHED_US left: the forker's slice is zeroed (it is refilled
/// at its reschedule) and the child gets a fresh slice and deadline.
#[test]
fn fork_from_an_exhausted_forker_refills_both() {
    let mut h = bfs(1, 1000, vec![params(0, 1), params(1, 1)]);
    fork(&mut h, 0);
    h.sched.cls.fair.t[0].time_slice = 150;
    h.advance(ms(1));
    h.wake(
        1,
        WakeInfo {
            cause: WakeCause::Fork,
            parent: Some(EntityId(0)),
            waker_cpu: Some(CpuId(0)),
            ..Default::default()
        },
    );
    assert_eq!(st(&h, 1), (ms(1) + 41_091_072, 6144, false));
    assert_eq!(h.take_resched(), vec![0]);
    h.schedule(0);
    assert_eq!(
        st(&h, 0).1,
        6144,
        "the forker is refilled at its deschedule"
    );
    assert_eq!(
        h.curr(0),
        Some(1),
        "equal deadlines: the child, queued first"
    );
}

/// L8 consequence: a sleeper whose accumulated run time uses up its slice gets a deadline 41 ms
/// out, later than a hog that refilled before it, and does not preempt the hog until the hog
/// refills again.
#[test]
fn sleeper_refill_loses_to_hogs_that_refilled_earlier() {
    let mut h = bfs(1, 1000, vec![params(0, 1), params(1, 1)]);
    fork(&mut h, 1);
    h.block(1);
    fork(&mut h, 0); // hog: inherits nothing (idle CPU), deadline 41.09 ms
    h.run_for(ms(7), ms(1));
    // The hog refilled alone at 6 ms (dithered: 288 units left; deadline 47.09 ms); the
    // sleeper's slice is nearly spent.
    assert_eq!(st(&h, 0).0, ms(6) + 41_091_072);
    h.sched.cls.fair.t[1].time_slice = 150;
    h.wake(1, WakeInfo::default());
    assert_eq!(h.take_resched(), vec![0], "old deadline 41.09 ms preempts");
    h.schedule(0);
    h.advance(100_000);
    h.block(1); // 97 units used: 53 left, refilled at 7.1 ms → 48.19 ms
    assert_eq!(st(&h, 1).0, 7_100_000 + 41_091_072);
    assert!(st(&h, 1).0 > st(&h, 0).0);
    h.advance(ms(1));
    h.wake(1, WakeInfo::default());
    assert!(h.take_resched().is_empty(), "no longer preempts the hog");
}

/// Hard affinity: a queued task is never taken by a CPU outside it (earliest_deadline_task
/// skips it), and a CPU with only such tasks idles.
#[test]
fn affinity_limits_the_global_queue() {
    let mut p = params(1, 2);
    p.hard_affinity = CpuSet::from_ids([0]);
    p.initial_cpu = CpuId(0);
    let mut h = bfs(2, 1000, vec![pinned_to(params(0, 2), 0), p]);
    fork(&mut h, 0);
    fork(&mut h, 1);
    h.run_for(ms(200), ms(1));
    assert_eq!(h.curr(1), None);
    assert!(h.run_ns[1] > ms(50) && h.run_ns[0] > ms(50));
}
