//! Unit tests of the CFS v5.10 model: one test per rule of `linux-schedulers.md` §1 (section
//! numbers in the test names' doc comments), driven through the engine's test [`Harness`].

use super::*;
use vmsched_core::sched::{EntityParams, RunState, SchedCtx, Scheduler, WakeCause};
use vmsched_core::testkit::{flat, params, pinned, placed_on, Harness};
use vmsched_core::time::ms;

mod balance;
mod hotplug;
mod params;
mod pelt;
mod select;
mod v3_17;

const A: u32 = 0;
const B: u32 = 1;
const C: u32 = 2;

fn harness_with(p: CfsParams, n: usize, ents: Vec<EntityParams>) -> Harness<CfsSched> {
    let t = flat(n);
    Harness::with_topology(Cfs::sched(p, &t), t, ents)
}

fn harness(n: usize, ents: Vec<EntityParams>) -> Harness<CfsSched> {
    harness_with(CfsParams::default(), n, ents)
}

fn vr(h: &Harness<CfsSched>, e: u32) -> i64 {
    h.sched.probe(EntityId(e)).unwrap()
}

fn wake(h: &mut Harness<CfsSched>, e: u32) {
    h.wake(e, WakeInfo::default());
}

fn wake_from(h: &mut Harness<CfsSched>, e: u32, cpu: u32, sync: bool) {
    h.wake(
        e,
        WakeInfo {
            waker_cpu: Some(CpuId(cpu)),
            sync,
            ..Default::default()
        },
    );
}

/// The first wake-up of a task created by the task running on `cpu` (wake_up_new_task).
fn fork_from(h: &mut Harness<CfsSched>, e: u32, cpu: u32) {
    h.wake(
        e,
        WakeInfo {
            waker_cpu: Some(CpuId(cpu)),
            cause: WakeCause::Fork,
            ..Default::default()
        },
    );
}

fn cpu_of(h: &Harness<CfsSched>, e: u32) -> usize {
    h.sched.cls.fair.ses[e as usize].cpu
}

/// Wakes `e` with nothing else around and lets its CPU pick it.
fn start(h: &mut Harness<CfsSched>, e: u32) {
    wake(h, e);
    h.deliver_resched();
    let c = cpu_of(h, e) as u32;
    assert_eq!(h.curr(c), Some(e), "start: {e} runs on {c}");
}

const MS: i64 = 1_000_000;

// --- §1.2 weights ----------------------------------------------------------------------------------

/// §1.2: the 32-bit fixed-point calc_delta, checked against hand computation.
#[test]
fn calc_delta_matches_hand_computation() {
    let n0 = LoadWeight::of_task(0, Policy::Normal);
    let n5 = LoadWeight::of_task(5, Policy::Normal);
    let m5 = LoadWeight::of_task(-5, Policy::Normal);
    assert_eq!(
        n5,
        LoadWeight {
            weight: 335,
            inv_weight: 12_820_798
        }
    );
    assert_eq!(
        m5,
        LoadWeight {
            weight: 3121,
            inv_weight: 1_376_151
        }
    );
    // nice 0 is the identity.
    assert_eq!(calc_delta_fair(12_345_678, n0), 12_345_678);
    // nice 5: 1024 × 12 820 798 = 13 128 497 152 needs 34 bits, so it is shifted right twice to
    // 3 282 124 288 with shift 30; (10^6 × 3 282 124 288) >> 30 = 3 056 716 (3.0567 ns per ns).
    assert_eq!(calc_delta_fair(1_000_000, n5), 3_056_716);
    // nice −5: 1024 × 1 376 151 = 1 409 178 624 fits; (10^6 × 1 409 178 624) >> 32 = 328 099.
    assert_eq!(calc_delta_fair(1_000_000, m5), 328_099);
    // Queues use the lazy inverse (2^32 − 1) / W: two nice-0 tasks, W = 2048 → 2 097 151;
    // an 18 ms period gives (18·10^6 × 1024·2 097 151) >> 32 = 8 999 995 ns each.
    assert_eq!(LoadWeight::of_queue(2048).inv_weight, 2_097_151);
    assert_eq!(
        calc_delta(18_000_000, 1024, LoadWeight::of_queue(2048)),
        8_999_995
    );
    assert_eq!(LoadWeight::of_queue(0).inv_weight, 0xffff_ffff);
    // SCHED_IDLE weighs 3; nice is clamped to −20..19.
    assert_eq!(
        LoadWeight::of_task(0, Policy::Idle),
        LoadWeight {
            weight: 3,
            inv_weight: 1_431_655_765
        }
    );
    assert_eq!(LoadWeight::of_task(-30, Policy::Normal).weight, 88761);
    assert_eq!(LoadWeight::of_task(25, Policy::Batch).weight, 15);
}

/// §1.6: period and slice; the period stretches beyond sched_nr_latency tasks.
#[test]
fn sched_slice_is_weighted_share_of_period() {
    let ents = (0..10).map(|i| pinned(i, 4, 0)).collect();
    let mut h = harness(4, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.deliver_resched();
    assert_eq!(h.sched.cls.fair.sched_slice(0, 0), 8_999_995);
    for e in 2..10 {
        wake(&mut h, e);
    }
    // 10 > 8 runnable: period = 10 × 2.25 ms, slice = 22.5 ms × 1024 / 10240.
    assert_eq!(h.sched.cls.fair.sched_period(10), 22_500_000);
    assert_eq!(
        h.sched.cls.fair.sched_slice(0, 0),
        calc_delta(22_500_000, 1024, LoadWeight::of_queue(10240))
    );
}

// --- §1.4 / §1.5 update_curr, min_vruntime, vruntime representation ----------------------------------

/// §1.3/§1.5: min_vruntime starts at −2^20 and is reported by probe as a signed value.
#[test]
fn vruntime_starts_from_minus_two_to_the_twenty() {
    let h = harness(1, vec![params(0, 1)]);
    assert_eq!(h.sched.cls.fair.rqs[0].min_vruntime as i64, -(1 << 20));
    assert_eq!(vr(&h, A), 0);
    // Signed-difference comparisons survive wrap-around.
    assert!(entity_before(u64::MAX - 5, 3));
    assert_eq!(max_vruntime(u64::MAX - 5, 3), 3);
    assert_eq!(min_vruntime(u64::MAX - 5, 3), u64::MAX - 5);
}

/// §1.4: update_curr charges clock_task time, scaled by weight, to the running task.
#[test]
fn update_curr_charges_weighted_time() {
    let mut p = pinned(0, 1, 0);
    p.linux.nice = 5;
    let mut h = harness(1, vec![p]);
    start(&mut h, A);
    h.advance(ms(1));
    h.tick(0);
    assert_eq!(vr(&h, A), 3_056_716);
    assert_eq!(h.sched.cls.fair.ses[0].sum_exec_runtime, 1_000_000);
}

/// §1.5: min_vruntime never decreases, even when a sleeper is placed behind it.
#[test]
fn min_vruntime_is_monotonic() {
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0), pinned(2, 4, 0)]);
    start(&mut h, A);
    let mut last = h.sched.cls.fair.rqs[0].min_vruntime as i64;
    let mut check = |h: &Harness<CfsSched>| {
        let m = h.sched.cls.fair.rqs[0].min_vruntime as i64;
        assert!(m >= last, "min_vruntime went back from {last} to {m}");
        last = m;
    };
    h.advance(ms(30));
    h.tick(0);
    check(&h);
    assert_eq!(h.sched.cls.fair.rqs[0].min_vruntime as i64, 30 * MS);
    wake(&mut h, B); // placed at 30 − 9 = 21 ms, left of min_vruntime
    check(&h);
    assert_eq!(vr(&h, B), 21 * MS);
    assert_eq!(h.sched.cls.fair.rqs[0].min_vruntime as i64, 30 * MS);
    h.deliver_resched();
    for i in 0..50u64 {
        h.advance(ms(1 + i % 3));
        h.tick(0);
        check(&h);
        if i % 7 == 0 {
            if let Some(c) = h.curr(0) {
                h.block(c);
                check(&h);
                let sleeper = (0..3).find(|&e| !h.ents[e as usize].runnable).unwrap();
                wake(&mut h, sleeper);
                check(&h);
            }
        }
        h.deliver_resched();
        check(&h);
    }
}

/// §1.3: the timeline is FIFO among equal vruntimes; a put-back task goes behind its equals.
#[test]
fn timeline_is_fifo_among_equal_vruntimes() {
    let mut h = harness(1, vec![pinned(0, 1, 0), pinned(1, 1, 0), pinned(2, 1, 0)]);
    for e in [B, A, C] {
        wake(&mut h, e);
    }
    for e in [A, B, C] {
        assert_eq!(vr(&h, e), 0);
    }
    h.deliver_resched();
    assert_eq!(h.curr(0), Some(B), "first woken runs first");
    // B is put back with vruntime 0: it goes behind A and C, which have the same key.
    h.schedule(0);
    assert_eq!(h.curr(0), Some(A));
    h.block(A);
    assert_eq!(h.curr(0), Some(C));
    h.block(C);
    assert_eq!(h.curr(0), Some(B));
}

// --- §1.7 place_entity ---------------------------------------------------------------------------

/// §1.7: a waking sleeper gets max(own vruntime, min_vruntime − latency/2): 9 ms with 4 vCPUs.
#[test]
fn place_entity_sleeper_credit_and_never_backwards() {
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0), pinned(2, 4, 0)]);
    start(&mut h, A);
    h.advance(ms(40));
    h.tick(0);
    // B slept long: pulled forward to 40 − 9 ms.
    wake(&mut h, B);
    assert_eq!(vr(&h, B), 31 * MS);
    // C is recent: its own vruntime (38 ms) is kept, not moved back to 31 ms.
    h.sched.cls.fair.ses[2].vruntime = (38 * MS) as u64;
    wake(&mut h, C);
    assert_eq!(vr(&h, C), 38 * MS);
}

/// §1.7/§1.18: without GENTLE_FAIR_SLEEPERS the credit is a whole latency.
#[test]
fn place_entity_without_gentle_sleepers() {
    let p = CfsParams {
        gentle_fair_sleepers: false,
        ..Default::default()
    };
    let mut h = harness_with(p, 4, vec![pinned(0, 4, 0), pinned(1, 4, 0)]);
    start(&mut h, A);
    h.advance(ms(40));
    h.tick(0);
    wake(&mut h, B);
    assert_eq!(vr(&h, B), 22 * MS);
}

/// §1.9: a new task starts one virtual slice after min_vruntime (START_DEBIT) and does not
/// preempt its parent.
#[test]
fn new_task_start_debit() {
    for debit in [true, false] {
        let p = CfsParams {
            start_debit: debit,
            ..Default::default()
        };
        let mut h = harness_with(p, 4, vec![pinned(0, 4, 0), pinned(1, 4, 0)]);
        start(&mut h, A);
        h.advance(ms(10));
        h.tick(0);
        fork_from(&mut h, B, 0);
        // vslice with the child counted: 18 ms × 1024 / 2048 = 8 999 995 ns.
        let expect = if debit { 10 * MS + 8_999_995 } else { 10 * MS };
        assert_eq!(vr(&h, B), expect, "start_debit={debit}");
        assert!(
            h.take_resched().is_empty(),
            "the child does not preempt the parent"
        );
    }
}

/// §1.9/§1.16: fork placement takes an idle allowed vCPU, keeping the relative vruntime.
#[test]
fn new_task_goes_to_an_idle_vcpu() {
    let mut h = harness(4, vec![pinned(0, 4, 0), placed_on(1, 4, 0)]);
    start(&mut h, A);
    h.advance(ms(10));
    h.tick(0);
    // Among idle vCPUs the one that went idle last is preferred (warmest cache).
    h.sched.rq[2].idle_stamp = Some(ms(5));
    fork_from(&mut h, B, 0);
    assert_eq!(cpu_of(&h, B), 2);
    assert_eq!(h.take_resched(), vec![2]);
    // Relative to CPU 0's min_vruntime (10 ms) it was 8 999 995 ahead; CPU 2's is −2^20.
    assert_eq!(vr(&h, B), 8_999_995 - (1 << 20));
}

// --- §1.8 migration normalisation ----------------------------------------------------------------

/// §1.8: waking on another vCPU keeps the lag relative to min_vruntime, then place_entity.
#[test]
fn wake_migration_renormalises_vruntime() {
    let mut p = params(2, 4);
    p.hard_affinity = CpuSet::from_ids([0, 1]);
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 1), p]);
    start(&mut h, A);
    h.advance(ms(40));
    start(&mut h, B);
    h.advance(ms(10));
    h.tick(0);
    h.tick(1);
    assert_eq!(h.sched.cls.fair.rqs[0].min_vruntime as i64, 50 * MS);
    assert_eq!(h.sched.cls.fair.rqs[1].min_vruntime as i64, 10 * MS);
    h.sched.cls.fair.ses[2].vruntime = (45 * MS) as u64; // slept 5 ms behind CPU 0's min_vruntime
                                                         // Sync wake-up from CPU 1 whose only task is the waker: the wakee joins CPU 1.
    wake_from(&mut h, C, 1, true);
    assert_eq!(cpu_of(&h, C), 1);
    assert_eq!(vr(&h, C), 5 * MS); // 45 − 50 + 10, within the 9 ms credit
}

// --- §1.10 / §1.11 tick preemption ---------------------------------------------------------------

/// §1.11: ran > ideal slice ⇒ resched; within the slice, the vruntime gap rule.
#[test]
fn check_preempt_tick_slice_expiry() {
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0)]);
    wake(&mut h, A);
    wake(&mut h, B);
    h.deliver_resched();
    assert_eq!(h.curr(0), Some(A));
    // Ideal slice 8 999 995 ns; gap to B below it at 4 and 8 ms.
    for _ in 0..2 {
        h.advance(ms(4));
        h.tick(0);
        assert!(h.take_resched().is_empty());
    }
    h.advance(ms(4));
    h.tick(0);
    assert_eq!(h.take_resched(), vec![0], "ran 12 ms > 9 ms slice");
    h.schedule(0);
    assert_eq!(h.curr(0), Some(B));
}

/// §1.11: below min_granularity nothing preempts; above it a vruntime gap > ideal does.
#[test]
fn check_preempt_tick_min_granularity_and_gap() {
    let p = CfsParams {
        hz: 1000,
        ..Default::default()
    };
    let mut h = harness_with(p, 4, vec![pinned(0, 4, 0), pinned(1, 4, 0)]);
    wake(&mut h, A);
    wake(&mut h, B);
    h.deliver_resched();
    // B far behind in vruntime (only queued entity, so the order stays valid).
    h.sched.cls.fair.ses[1].vruntime = (-20 * MS) as u64;
    h.advance(ms(1));
    h.tick(0);
    h.advance(ms(1));
    h.tick(0);
    assert!(
        h.take_resched().is_empty(),
        "ran 2 ms < 2.25 ms min_granularity"
    );
    h.advance(ms(1));
    h.tick(0);
    assert_eq!(h.take_resched(), vec![0], "gap 23 ms > 9 ms slice");
}

/// §1.11: a gap within the slice does not preempt; tick preemption clears curr's buddies.
#[test]
fn check_preempt_tick_gap_below_slice_and_buddy_clearing() {
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0)]);
    wake(&mut h, A);
    wake(&mut h, B);
    h.deliver_resched();
    h.sched.cls.fair.ses[1].vruntime = (-4 * MS) as u64;
    h.advance(ms(4));
    h.tick(0);
    assert!(
        h.take_resched().is_empty(),
        "ran 4 ms, gap 8 ms: both below the 8 999 995 ns slice"
    );
    h.sched.cls.fair.rqs[0].last = Some(0);
    h.advance(ms(8));
    h.tick(0);
    assert_eq!(h.take_resched(), vec![0]);
    assert_eq!(h.sched.cls.fair.rqs[0].last, None);
}

// --- §1.12 wakeup preemption ---------------------------------------------------------------------

/// §1.12: −1 if not behind, 0 within the granularity, 1 beyond; gran uses the wakee's weight.
#[test]
fn wakeup_preempt_entity_granularity() {
    let mut heavy = pinned(2, 4, 0);
    heavy.linux.nice = -5;
    let mut light = pinned(3, 4, 0);
    light.linux.nice = 5;
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0), heavy, light]);
    let s = &mut h.sched.cls.fair;
    let set = |s: &mut Cfs, e: usize, v: i64| s.ses[e].vruntime = v as u64;
    set(s, 0, 10 * MS);
    for (v, want) in [(10 * MS, -1), (11 * MS, -1), (7 * MS, 0), (7 * MS - 1, 1)] {
        set(s, 1, v);
        assert_eq!(s.wakeup_preempt_entity(0, 1), want, "nice-0 wakee at {v}");
    }
    // nice −5: gran = 3 ms × 1024/3121 = 984 299 ns of vruntime.
    assert_eq!(s.wakeup_gran(2), 984_299);
    set(s, 2, 9 * MS);
    set(s, 1, 9 * MS);
    assert_eq!(
        s.wakeup_preempt_entity(0, 2),
        1,
        "nice −5 preempts at a 1 ms gap"
    );
    assert_eq!(s.wakeup_preempt_entity(0, 1), 0, "nice 0 does not");
    // nice 5: gran = 9 170 149 ns; a 5 ms gap is not enough.
    set(s, 3, 5 * MS);
    assert_eq!(s.wakeup_preempt_entity(0, 3), 0);
}

/// §1.12: end to end, a wakee far enough behind preempts and becomes the next buddy.
#[test]
fn check_preempt_wakeup_preempts_and_sets_next_buddy() {
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0)]);
    start(&mut h, A);
    h.advance(ms(5));
    h.tick(0);
    h.sched.cls.fair.ses[1].vruntime = (2 * MS) as u64; // exactly 3 ms behind: not enough
    wake_from(&mut h, B, 0, true);
    assert!(h.take_resched().is_empty());
    assert_eq!(h.sched.cls.fair.rqs[0].next, None);
    h.block(A);
    assert_eq!(h.curr(0), Some(B));
    h.advance(ms(8));
    h.tick(0);
    wake_from(&mut h, A, 0, true); // A at 5 ms, B at 10 ms: gap 5 ms > 3 ms
    assert_eq!(h.take_resched(), vec![0]);
    assert_eq!(h.sched.cls.fair.rqs[0].next, Some(0));
}

/// §1.12 steps 4–5: BATCH and IDLE wakees never preempt; a SCHED_IDLE curr always yields to a
/// normal wakee; WAKEUP_PREEMPTION off disables the check.
#[test]
fn wakeup_preemption_policies_and_feature() {
    for (wakee_policy, curr_policy, feature, want) in [
        (Policy::Batch, Policy::Normal, true, false),
        (Policy::Idle, Policy::Normal, true, false),
        (Policy::Normal, Policy::Normal, false, false),
        (Policy::Normal, Policy::Normal, true, true),
        (Policy::Normal, Policy::Idle, false, true),
    ] {
        let mut a = pinned(0, 4, 0);
        a.linux.policy = curr_policy;
        let mut b = pinned(1, 4, 0);
        b.linux.policy = wakee_policy;
        let p = CfsParams {
            wakeup_preemption: feature,
            ..Default::default()
        };
        let mut h = harness_with(p, 4, vec![a, b]);
        start(&mut h, A);
        h.advance(ms(if curr_policy == Policy::Idle { 1 } else { 30 }));
        h.tick(0);
        wake(&mut h, B);
        let preempted = !h.take_resched().is_empty();
        assert_eq!(
            preempted, want,
            "{wakee_policy:?} wakes on {curr_policy:?}, feature {feature}"
        );
    }
}

/// §1.12 step 8: the preempted task becomes the last buddy only with ≥ nr_latency runnable.
#[test]
fn last_buddy_needs_nr_latency_tasks() {
    for n in [2usize, 8] {
        let ents = (0..n).map(|i| pinned(i, 4, 0)).collect();
        let mut h = harness(4, ents);
        start(&mut h, A);
        h.advance(ms(2));
        h.tick(0);
        for e in 2..n as u32 {
            wake(&mut h, e);
        }
        h.sched.cls.fair.ses[1].vruntime = 0;
        h.sched.cls.fair.rqs[0].min_vruntime = 0;
        h.sched.cls.fair.ses[0].vruntime = (20 * MS) as u64;
        wake(&mut h, B);
        assert_eq!(h.take_resched(), vec![0]);
        let want = if n >= 8 { Some(0) } else { None };
        assert_eq!(h.sched.cls.fair.rqs[0].last, want, "{n} runnable");
    }
}

// --- §1.14 / §1.15 steal time and the seed-000 mechanism ----------------------------------------------

/// Runs the seed-000 situation on vCPU 0 of a 4-vCPU guest: A current, B asleep level with it; the
/// host deschedules the vCPU for `gap`; A then wakes B with a pipe write. Returns (A's vruntime
/// jump, B's placement, whether B preempts A).
fn seed000(steal_accounting: bool, gap: u64) -> (i64, i64, bool) {
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0)]);
    h.clock.steal_accounting = steal_accounting;
    start(&mut h, B);
    h.advance(ms(1));
    wake_from(&mut h, A, 0, true);
    assert!(h.take_resched().is_empty());
    h.block(B);
    assert_eq!(h.curr(0), Some(A));
    h.advance(ms(1));
    h.tick(0);
    let before = vr(&h, A);
    // The vCPU is descheduled for `gap`; on resumption the pending tick fires.
    h.advance(gap);
    if steal_accounting {
        h.cpus[0].steal_ns += gap;
    }
    h.tick(0);
    let jump = vr(&h, A) - before;
    // Any resched from the tick is irrelevant here (B is asleep, A alone).
    assert!(h.take_resched().is_empty());
    wake_from(&mut h, B, 0, true);
    let preempt = h.take_resched() == vec![0];
    (jump, vr(&h, B), preempt)
}

/// §1.14/§1.15: with PVTA=n the whole gap is charged to A; B lands at min_vruntime − 9 ms and
/// preempts iff the resulting gap exceeds the 3 ms wakeup granularity.
#[test]
fn seed000_steal_charged_to_running_task_drives_wakeup_preemption() {
    let (jump, b, preempt) = seed000(false, ms(20));
    assert_eq!(jump, 20 * MS, "A charged the whole absence");
    assert_eq!(b, (1 + 20 - 9) * MS, "B placed at min_vruntime − 9 ms");
    assert!(preempt, "gap 9 ms > 3 ms");
    // Boundary: a 3 ms gap (A at 4 ms, B keeps its own 1 ms) does not preempt; 3 ms + 1 ns does.
    let (_, b, preempt) = seed000(false, ms(3));
    assert_eq!(b, MS);
    assert!(!preempt);
    let (_, _, preempt) = seed000(false, ms(3) + 1);
    assert!(preempt);
}

/// §1.14: with PVTA=y the steal is subtracted from clock_task: no jump, no preemption.
#[test]
fn seed000_steal_accounting_prevents_the_jump() {
    let (jump, b, preempt) = seed000(true, ms(20));
    assert_eq!(jump, 0);
    assert_eq!(b, MS);
    assert!(!preempt);
}

/// §1.14 + ERRATA L5: steal beyond the clock delta is carried over to later updates (5.10.y).
#[test]
fn steal_in_excess_of_delta_is_carried_over() {
    let mut h = harness(2, vec![pinned(0, 2, 0), pinned(1, 2, 0)]);
    h.clock.steal_accounting = true;
    start(&mut h, A);
    // vCPU 0 is descheduled for 10 ms; meanwhile a remote wake-up updates its clock while the
    // steal reading is still stale.
    h.advance(ms(10));
    wake_from(&mut h, B, 1, false);
    assert_eq!(h.sched.rq[0].clock_task, 10_000_000);
    // It resumes: 10 ms of steal show up; each further 1 ms of running is eaten by the carry.
    h.cpus[0].steal_ns = ms(10);
    for k in 1..=10u64 {
        h.advance(ms(1));
        h.tick(0);
        assert_eq!(h.sched.rq[0].clock_task, 10_000_000, "step {k}");
    }
    h.advance(ms(1));
    h.tick(0);
    assert_eq!(h.sched.rq[0].clock_task, 11_000_000);
}

// --- §1.13 picking, buddies, yield -----------------------------------------------------------------

/// Sets up vCPU 0 with A current at 30 ms, C queued at 20 ms (leftmost) and B asleep at `b`.
fn buddy_setup(b: i64) -> Harness<CfsSched> {
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0), pinned(2, 4, 0)]);
    start(&mut h, A);
    wake(&mut h, C);
    h.sched.cls.fair.ses[0].vruntime = (30 * MS) as u64;
    h.sched.cls.fair.ses[2].vruntime = (20 * MS) as u64;
    h.sched.cls.fair.rqs[0].min_vruntime = (20 * MS) as u64;
    h.sched.cls.fair.ses[1].vruntime = b as u64;
    h
}

/// §1.13: the next buddy set by wakeup preemption is picked if within gran of the leftmost.
#[test]
fn next_buddy_is_picked_within_granularity() {
    let mut h = buddy_setup(22 * MS);
    wake_from(&mut h, B, 0, true);
    assert_eq!(h.take_resched(), vec![0]);
    assert_eq!(h.sched.cls.fair.rqs[0].next, Some(1));
    h.schedule(0);
    assert_eq!(h.curr(0), Some(B), "2 ms right of the leftmost: buddy wins");
    assert_eq!(h.sched.cls.fair.rqs[0].next, None, "cleared once picked");
    // 4 ms right of the leftmost: the leftmost wins.
    let mut h = buddy_setup(24 * MS);
    wake_from(&mut h, B, 0, true);
    assert_eq!(h.sched.cls.fair.rqs[0].next, Some(1));
    h.schedule(0);
    assert_eq!(h.curr(0), Some(C));
}

/// §1.13: sched_yield sets the skip buddy; the second is picked if within gran.
#[test]
fn yield_skips_to_the_second_within_granularity() {
    for (gap, want) in [(2 * MS, B), (5 * MS, A)] {
        let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0)]);
        start(&mut h, A);
        wake(&mut h, B);
        h.advance(ms(1));
        h.tick(0);
        h.sched.cls.fair.ses[1].vruntime = (vr(&h, A) + gap) as u64;
        h.yield_(A);
        assert_eq!(h.curr(0), Some(want), "second {gap} ns to the right");
        // pick_next_entity clears only the buddies equal to the pick.
        assert_eq!(
            h.sched.cls.fair.rqs[0].skip,
            if want == B { Some(0) } else { None }
        );
    }
}

/// yield_to (the core's skeleton, CFS's yield_to_task_fair): the target becomes the next buddy
/// and the current task yields, so the target runs next although another queued task is further
/// left, as long as it is within the wakeup granularity of it.
#[test]
fn yield_to_runs_the_target_next() {
    let mut h = harness(1, vec![pinned(0, 1, 0), pinned(1, 1, 0), pinned(2, 1, 0)]);
    start(&mut h, A);
    wake(&mut h, B);
    wake(&mut h, C);
    h.advance(ms(1));
    h.tick(0);
    let base = vr(&h, A);
    h.sched.cls.fair.ses[1].vruntime = (base + MS / 4) as u64;
    h.sched.cls.fair.ses[2].vruntime = (base + MS / 2) as u64;
    let (ents, cpus) = (h.ents.clone(), h.cpus.clone());
    let mut reqs = Vec::new();
    let mut ctx = SchedCtx::new(h.now, h.clock, &cpus, &ents, &mut reqs);
    assert!(h.sched.yield_to(&mut ctx, EntityId(A), EntityId(C), false));
    assert_eq!(h.sched.cls.fair.rqs[0].next, Some(C as usize));
    h.schedule(0);
    assert_eq!(h.curr(0), Some(C), "B is leftmost, but C was yielded to");
    // A running or blocked target is refused.
    let (ents, cpus) = (h.ents.clone(), h.cpus.clone());
    let mut ctx = SchedCtx::new(h.now, h.clock, &cpus, &ents, &mut reqs);
    assert!(!h.sched.yield_to(&mut ctx, EntityId(A), EntityId(C), false));
}

/// §1.13: yield with one runnable task keeps it running and sets no skip buddy.
#[test]
fn yield_alone_keeps_running() {
    let mut h = harness(2, vec![pinned(0, 2, 0)]);
    start(&mut h, A);
    h.advance(ms(1));
    h.yield_(A);
    assert_eq!(h.curr(0), Some(A));
    assert_eq!(h.sched.cls.fair.rqs[0].skip, None);
}

/// §1.13: set_next_entity restarts the "ran" count even when the same task is re-picked.
#[test]
fn reschedule_restarts_the_slice_count() {
    let mut h = harness(1, vec![pinned(0, 1, 0)]);
    start(&mut h, A);
    h.advance(ms(7));
    h.schedule(0);
    let se = &h.sched.cls.fair.ses[0];
    assert_eq!(se.sum_exec_runtime, 7_000_000);
    assert_eq!(se.prev_sum_exec_runtime, 7_000_000);
}

// --- long run --------------------------------------------------------------------------------------

/// §1.2/§1.6/§1.11: three CPU-bound tasks, nice 0/0/5, on one vCPU for 10 s of ticks share the
/// CPU as 1024:1024:335.
#[test]
fn long_run_shares_follow_weights() {
    let mut c5 = pinned(2, 1, 0);
    c5.linux.nice = 5;
    let mut h = harness(1, vec![pinned(0, 1, 0), pinned(1, 1, 0), c5]);
    for e in 0..3 {
        wake(&mut h, e);
    }
    h.deliver_resched();
    let tick = h.sched.tick_period().unwrap();
    let mut ran = [0u64; 3];
    let mut t = 0;
    while t < 10 * NS_PER_S {
        ran[h.curr(0).unwrap() as usize] += tick;
        h.advance(tick);
        t += tick;
        h.tick(0);
        h.deliver_resched();
    }
    let total: u64 = ran.iter().sum();
    for (e, w) in [(0, 1024.0), (1, 1024.0), (2, 335.0)] {
        let share = ran[e] as f64 / total as f64;
        let want = w / 2383.0;
        assert!(
            (share - want).abs() < 0.01,
            "task {e}: share {share:.4}, want {want:.4}"
        );
    }
}
