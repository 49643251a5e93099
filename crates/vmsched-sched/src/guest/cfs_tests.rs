//! Unit tests of the CFS v5.10 model: one test per rule of `linux-schedulers.md` §1 (section
//! numbers in the test names' doc comments), driven through the engine's test [`Harness`].

use super::*;
use vmsched_core::sched::EntityParams;
use vmsched_core::testkit::{params, Harness};
use vmsched_core::time::ms;

const A: u32 = 0;
const B: u32 = 1;
const C: u32 = 2;

fn topo(n: usize) -> Vec<CpuTopo> {
    (0..n)
        .map(|c| CpuTopo {
            core: c as u32,
            ..Default::default()
        })
        .collect()
}

fn harness_with(p: CfsParams, n: usize, ents: Vec<EntityParams>) -> Harness<Cfs> {
    let t = topo(n);
    Harness::with_topology(Cfs::new(p, &t), t, ents)
}

fn harness(n: usize, ents: Vec<EntityParams>) -> Harness<Cfs> {
    harness_with(CfsParams::default(), n, ents)
}

fn pinned(i: usize, n: usize, cpu: u32) -> EntityParams {
    let mut p = params(i, n);
    p.hard_affinity = CpuSet::single(CpuId(cpu));
    p.initial_cpu = CpuId(cpu);
    p
}

fn free(i: usize, n: usize, initial: u32) -> EntityParams {
    let mut p = params(i, n);
    p.initial_cpu = CpuId(initial);
    p
}

fn vr(h: &Harness<Cfs>, e: u32) -> i64 {
    h.sched.probe(EntityId(e)).unwrap()
}

fn wake(h: &mut Harness<Cfs>, e: u32) {
    h.wake(e, WakeInfo::default());
}

fn wake_from(h: &mut Harness<Cfs>, e: u32, cpu: u32, sync: bool) {
    h.wake(
        e,
        WakeInfo {
            waker_cpu: Some(CpuId(cpu)),
            sync,
            new: false,
        },
    );
}

/// The first wake-up of a task created by the task running on `cpu` (wake_up_new_task).
fn fork_from(h: &mut Harness<Cfs>, e: u32, cpu: u32) {
    h.wake(
        e,
        WakeInfo {
            waker_cpu: Some(CpuId(cpu)),
            sync: false,
            new: true,
        },
    );
}

fn cpu_of(h: &Harness<Cfs>, e: u32) -> usize {
    h.sched.ses[e as usize].cpu
}

/// Wakes `e` with nothing else around and lets its CPU pick it.
fn start(h: &mut Harness<Cfs>, e: u32) {
    wake(h, e);
    h.deliver_resched();
    let c = cpu_of(h, e) as u32;
    assert_eq!(h.curr(c), Some(e), "start: {e} runs on {c}");
}

const MS: i64 = 1_000_000;

// --- §1.1 tunables -------------------------------------------------------------------------------

/// §1.1: LOG scaling, factor 1 + ilog2(min(ncpus, 8)).
#[test]
fn tunables_scale_logarithmically_with_vcpus() {
    for (n, lat, min_gran, wake_gran) in [
        (1, 6_000_000, 750_000, 1_000_000),
        (2, 12_000_000, 1_500_000, 2_000_000),
        (3, 12_000_000, 1_500_000, 2_000_000),
        (4, 18_000_000, 2_250_000, 3_000_000),
        (8, 24_000_000, 3_000_000, 4_000_000),
        (16, 24_000_000, 3_000_000, 4_000_000),
    ] {
        let c = Cfs::new(CfsParams::default(), &topo(n));
        assert_eq!(
            (c.tun.latency, c.tun.min_gran, c.tun.wakeup_gran),
            (lat, min_gran, wake_gran),
            "{n} vCPUs"
        );
        assert_eq!(c.tun.nr_latency, 8);
        assert_eq!(c.tun.migration_cost, 500_000);
    }
}

/// §1.1: NONE (factor 1) and LINEAR (factor min(ncpus, 8)) scaling.
#[test]
fn tunable_scaling_none_and_linear() {
    let none = CfsParams {
        sched_tunable_scaling: 0,
        ..Default::default()
    };
    let c = Cfs::new(none, &topo(4));
    assert_eq!(
        (c.tun.latency, c.tun.min_gran, c.tun.wakeup_gran),
        (6_000_000, 750_000, 1_000_000)
    );
    let linear = CfsParams {
        sched_tunable_scaling: 2,
        ..Default::default()
    };
    let c = Cfs::new(linear.clone(), &topo(3));
    assert_eq!(
        (c.tun.latency, c.tun.min_gran, c.tun.wakeup_gran),
        (18_000_000, 2_250_000, 3_000_000)
    );
    let c = Cfs::new(linear, &topo(16));
    assert_eq!(c.tun.latency, 48_000_000);
}

/// §1.1: an explicit sysctl value is the effective value, whatever the vCPU count.
#[test]
fn tunable_overrides_win() {
    let p = CfsParams {
        sched_latency_ns: Some(10_000_000),
        sched_min_granularity_ns: Some(1_000_000),
        sched_wakeup_granularity_ns: Some(0),
        ..Default::default()
    };
    let c = Cfs::new(p, &topo(4));
    assert_eq!(
        (c.tun.latency, c.tun.min_gran, c.tun.wakeup_gran),
        (10_000_000, 1_000_000, 0)
    );
}

/// §1.10: the tick period is TICK_NSEC for the configured HZ.
#[test]
fn tick_period_follows_hz() {
    for (hz, ns) in [
        (100, 10_000_000),
        (250, 4_000_000),
        (300, 3_333_333),
        (1000, 1_000_000),
    ] {
        let c = Cfs::new(
            CfsParams {
                hz,
                ..Default::default()
            },
            &topo(1),
        );
        assert_eq!(c.tick_period(), Some(ns));
    }
}

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
    assert_eq!(h.sched.sched_slice(0, 0), 8_999_995);
    for e in 2..10 {
        wake(&mut h, e);
    }
    // 10 > 8 runnable: period = 10 × 2.25 ms, slice = 22.5 ms × 1024 / 10240.
    assert_eq!(h.sched.sched_period(10), 22_500_000);
    assert_eq!(
        h.sched.sched_slice(0, 0),
        calc_delta(22_500_000, 1024, LoadWeight::of_queue(10240))
    );
}

// --- §1.4 / §1.5 update_curr, min_vruntime, vruntime representation ----------------------------------

/// §1.3/§1.5: min_vruntime starts at −2^20 and is reported by probe as a signed value.
#[test]
fn vruntime_starts_from_minus_two_to_the_twenty() {
    let h = harness(1, vec![params(0, 1)]);
    assert_eq!(h.sched.rqs[0].min_vruntime as i64, -(1 << 20));
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
    p.nice = 5;
    let mut h = harness(1, vec![p]);
    start(&mut h, A);
    h.advance(ms(1));
    h.tick(0);
    assert_eq!(vr(&h, A), 3_056_716);
    assert_eq!(h.sched.ses[0].sum_exec_runtime, 1_000_000);
}

/// §1.5: min_vruntime never decreases, even when a sleeper is placed behind it.
#[test]
fn min_vruntime_is_monotonic() {
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0), pinned(2, 4, 0)]);
    start(&mut h, A);
    let mut last = h.sched.rqs[0].min_vruntime as i64;
    let mut check = |h: &Harness<Cfs>| {
        let m = h.sched.rqs[0].min_vruntime as i64;
        assert!(m >= last, "min_vruntime went back from {last} to {m}");
        last = m;
    };
    h.advance(ms(30));
    h.tick(0);
    check(&h);
    assert_eq!(h.sched.rqs[0].min_vruntime as i64, 30 * MS);
    wake(&mut h, B); // placed at 30 − 9 = 21 ms, left of min_vruntime
    check(&h);
    assert_eq!(vr(&h, B), 21 * MS);
    assert_eq!(h.sched.rqs[0].min_vruntime as i64, 30 * MS);
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
    h.sched.ses[2].vruntime = (38 * MS) as u64;
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
    let mut h = harness(4, vec![pinned(0, 4, 0), free(1, 4, 0)]);
    start(&mut h, A);
    h.advance(ms(10));
    h.tick(0);
    // Among idle vCPUs the one that went idle last is preferred (warmest cache).
    h.sched.rqs[2].idle_stamp = Some(ms(5));
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
    assert_eq!(h.sched.rqs[0].min_vruntime as i64, 50 * MS);
    assert_eq!(h.sched.rqs[1].min_vruntime as i64, 10 * MS);
    h.sched.ses[2].vruntime = (45 * MS) as u64; // slept 5 ms behind CPU 0's min_vruntime
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
    h.sched.ses[1].vruntime = (-20 * MS) as u64;
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
    h.sched.ses[1].vruntime = (-4 * MS) as u64;
    h.advance(ms(4));
    h.tick(0);
    assert!(
        h.take_resched().is_empty(),
        "ran 4 ms, gap 8 ms: both below the 8 999 995 ns slice"
    );
    h.sched.rqs[0].last = Some(0);
    h.advance(ms(8));
    h.tick(0);
    assert_eq!(h.take_resched(), vec![0]);
    assert_eq!(h.sched.rqs[0].last, None);
}

// --- §1.12 wakeup preemption ---------------------------------------------------------------------

/// §1.12: −1 if not behind, 0 within the granularity, 1 beyond; gran uses the wakee's weight.
#[test]
fn wakeup_preempt_entity_granularity() {
    let mut heavy = pinned(2, 4, 0);
    heavy.nice = -5;
    let mut light = pinned(3, 4, 0);
    light.nice = 5;
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0), heavy, light]);
    let s = &mut h.sched;
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
    h.sched.ses[1].vruntime = (2 * MS) as u64; // exactly 3 ms behind: not enough
    wake_from(&mut h, B, 0, true);
    assert!(h.take_resched().is_empty());
    assert_eq!(h.sched.rqs[0].next, None);
    h.block(A);
    assert_eq!(h.curr(0), Some(B));
    h.advance(ms(8));
    h.tick(0);
    wake_from(&mut h, A, 0, true); // A at 5 ms, B at 10 ms: gap 5 ms > 3 ms
    assert_eq!(h.take_resched(), vec![0]);
    assert_eq!(h.sched.rqs[0].next, Some(0));
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
        a.policy = curr_policy;
        let mut b = pinned(1, 4, 0);
        b.policy = wakee_policy;
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
        h.sched.ses[1].vruntime = 0;
        h.sched.rqs[0].min_vruntime = 0;
        h.sched.ses[0].vruntime = (20 * MS) as u64;
        wake(&mut h, B);
        assert_eq!(h.take_resched(), vec![0]);
        let want = if n >= 8 { Some(0) } else { None };
        assert_eq!(h.sched.rqs[0].last, want, "{n} runnable");
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
    assert_eq!(h.sched.rqs[0].clock_task, 10_000_000);
    // It resumes: 10 ms of steal show up; each further 1 ms of running is eaten by the carry.
    h.cpus[0].steal_ns = ms(10);
    for k in 1..=10u64 {
        h.advance(ms(1));
        h.tick(0);
        assert_eq!(h.sched.rqs[0].clock_task, 10_000_000, "step {k}");
    }
    h.advance(ms(1));
    h.tick(0);
    assert_eq!(h.sched.rqs[0].clock_task, 11_000_000);
}

// --- §1.13 picking, buddies, yield -----------------------------------------------------------------

/// Sets up vCPU 0 with A current at 30 ms, C queued at 20 ms (leftmost) and B asleep at `b`.
fn buddy_setup(b: i64) -> Harness<Cfs> {
    let mut h = harness(4, vec![pinned(0, 4, 0), pinned(1, 4, 0), pinned(2, 4, 0)]);
    start(&mut h, A);
    wake(&mut h, C);
    h.sched.ses[0].vruntime = (30 * MS) as u64;
    h.sched.ses[2].vruntime = (20 * MS) as u64;
    h.sched.rqs[0].min_vruntime = (20 * MS) as u64;
    h.sched.ses[1].vruntime = b as u64;
    h
}

/// §1.13: the next buddy set by wakeup preemption is picked if within gran of the leftmost.
#[test]
fn next_buddy_is_picked_within_granularity() {
    let mut h = buddy_setup(22 * MS);
    wake_from(&mut h, B, 0, true);
    assert_eq!(h.take_resched(), vec![0]);
    assert_eq!(h.sched.rqs[0].next, Some(1));
    h.schedule(0);
    assert_eq!(h.curr(0), Some(B), "2 ms right of the leftmost: buddy wins");
    assert_eq!(h.sched.rqs[0].next, None, "cleared once picked");
    // 4 ms right of the leftmost: the leftmost wins.
    let mut h = buddy_setup(24 * MS);
    wake_from(&mut h, B, 0, true);
    assert_eq!(h.sched.rqs[0].next, Some(1));
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
        h.sched.ses[1].vruntime = (vr(&h, A) + gap) as u64;
        h.yield_(A);
        assert_eq!(h.curr(0), Some(want), "second {gap} ns to the right");
        // pick_next_entity clears only the buddies equal to the pick.
        assert_eq!(h.sched.rqs[0].skip, if want == B { Some(0) } else { None });
    }
}

/// §1.13: yield with one runnable task keeps it running and sets no skip buddy.
#[test]
fn yield_alone_keeps_running() {
    let mut h = harness(2, vec![pinned(0, 2, 0)]);
    start(&mut h, A);
    h.advance(ms(1));
    h.yield_(A);
    assert_eq!(h.curr(0), Some(A));
    assert_eq!(h.sched.rqs[0].skip, None);
}

/// §1.13: set_next_entity restarts the "ran" count even when the same task is re-picked.
#[test]
fn reschedule_restarts_the_slice_count() {
    let mut h = harness(1, vec![pinned(0, 1, 0)]);
    start(&mut h, A);
    h.advance(ms(7));
    h.schedule(0);
    let se = &h.sched.ses[0];
    assert_eq!(se.sum_exec_runtime, 7_000_000);
    assert_eq!(se.prev_sum_exec_runtime, 7_000_000);
}

// --- §1.16 CPU selection --------------------------------------------------------------------------

const W: u32 = 0; // the waker, pinned to vCPU 0
const P: u32 = 1; // the wakee, last ran on vCPU 1

/// W on vCPU 0, P free with prev vCPU 1, fillers pinned on vCPUs 1..=3; `busy` fillers run.
fn sis_setup(busy: &[u32], p: CfsParams) -> Harness<Cfs> {
    let mut ents = vec![pinned(0, 4, 0), free(1, 4, 1)];
    for c in 1..4 {
        ents.push(pinned(1 + c as usize, 4, c));
    }
    let mut h = harness_with(p, 4, ents);
    start(&mut h, W);
    for &c in busy {
        start(&mut h, 1 + c);
    }
    h.advance(ms(5));
    h
}

/// §1.16 + L1: a sync wake-up returns to the wakee's idle previous vCPU (ping-pong).
#[test]
fn sync_wakeup_prefers_idle_prev_cpu() {
    let mut h = sis_setup(&[], CfsParams::default());
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 1);
    assert_eq!(h.take_resched(), vec![1]);
}

/// §1.16 select_idle_sibling step 2: an idle prev beats the scan, which would find vCPU 1 first.
#[test]
fn idle_prev_beats_the_scan() {
    let mut h = sis_setup(&[], CfsParams::default());
    h.sched.ses[P as usize].cpu = 2;
    h.sched.ses[P as usize].recent_used_cpu = 2;
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 2);
}

/// §1.16 wake_affine_idle (sync, waker alone) across LLCs: the wakee is pulled into the waker's
/// LLC even though its prev vCPU (other LLC) is idle; without sync WA_WEIGHT keeps prev.
#[test]
fn sync_wakeup_pulls_across_llcs() {
    let t: Vec<CpuTopo> = (0..4)
        .map(|c| CpuTopo {
            core: c,
            llc: c / 2,
            ..Default::default()
        })
        .collect();
    for (sync, want) in [(true, 1), (false, 2)] {
        let ents = vec![pinned(0, 4, 0), free(1, 4, 2)];
        let mut h = Harness::with_topology(Cfs::new(CfsParams::default(), &t), t.clone(), ents);
        start(&mut h, W);
        wake_from(&mut h, P, 0, sync);
        assert_eq!(cpu_of(&h, P), want, "sync={sync}");
    }
}

/// §1.16: prev busy → the LLC scan from target+1 finds an idle vCPU.
#[test]
fn busy_prev_scans_for_an_idle_cpu() {
    let mut h = sis_setup(&[1], CfsParams::default());
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 2);
}

/// §1.16 + L1: with every other vCPU busy a sync pair co-locates on the waker's vCPU.
#[test]
fn all_busy_sync_wakeup_colocates_with_waker() {
    let mut h = sis_setup(&[1, 2, 3], CfsParams::default());
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 0);
}

/// §1.16 wake_affine_weight: all busy, no sync: this = 2048·100 vs prev = 1024·108 → prev.
#[test]
fn all_busy_non_sync_wake_affine_weight_keeps_prev() {
    let mut h = sis_setup(&[1, 2, 3], CfsParams::default());
    wake_from(&mut h, P, 0, false);
    assert_eq!(cpu_of(&h, P), 1);
}

/// §1.16 wake_affine_weight: a lighter waker CPU wins without sync.
#[test]
fn wake_affine_weight_picks_lighter_waker_cpu() {
    let mut h = sis_setup(&[1, 2, 3], CfsParams::default());
    // Make prev heavier: a second task queued on vCPU 1.
    h.sched.rqs[1].load += 2048;
    wake_from(&mut h, P, 0, false);
    assert_eq!(cpu_of(&h, P), 0, "(1024+1024)·100 < 3072·108");
}

/// §1.16 wake_wide: an M:N waker pattern is not pulled to the waker.
#[test]
fn wake_wide_disables_affine_wakeups() {
    let mut h = sis_setup(&[1, 2, 3], CfsParams::default());
    h.sched.ses[W as usize].wakee_flips = 16;
    h.sched.ses[W as usize].last_wakee = Some(P as usize);
    h.sched.ses[P as usize].wakee_flips = 4; // ≥ llc size 4, and 16 ≥ 4 × 4
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 1, "stays on prev");
}

/// §1.16 record_wakee: flips count changes of wakee and halve once per second.
#[test]
fn record_wakee_counts_flips_and_decays() {
    let mut h = harness(2, vec![pinned(0, 2, 0), pinned(1, 2, 1), pinned(2, 2, 1)]);
    start(&mut h, A);
    for i in 0..6 {
        let e = if i % 2 == 0 { B } else { C };
        wake_from(&mut h, e, 0, false);
        h.deliver_resched();
        h.block(e);
    }
    assert_eq!(h.sched.ses[0].wakee_flips, 6);
    h.advance(ms(1100));
    wake_from(&mut h, B, 0, false);
    assert_eq!(h.sched.ses[0].wakee_flips, 4, "6 halved to 3, then +1");
}

/// §1.16: hard affinity always wins.
#[test]
fn affinity_is_respected() {
    let mut h = sis_setup(&[3], CfsParams::default());
    h.sched.ses[P as usize].allowed = CpuSet::single(CpuId(3));
    h.sched.ses[P as usize].cpu = 3;
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 3);
}

/// §1.16: a wake-up from outside the guest (no waker vCPU) stays on an idle prev.
#[test]
fn interrupt_wakeup_uses_prev() {
    let mut h = sis_setup(&[], CfsParams::default());
    wake(&mut h, P);
    assert_eq!(cpu_of(&h, P), 1);
}

/// §1.16 wake_affine_idle: an idle waker vCPU (interrupt) sharing the LLC takes a busy prev's
/// wakee.
#[test]
fn idle_waker_cpu_takes_wakee_of_busy_prev() {
    let mut h = sis_setup(&[1], CfsParams::default());
    wake_from(&mut h, P, 2, false);
    assert_eq!(cpu_of(&h, P), 2);
}

/// §1.16 + L1: vcpu_is_preempted off (arm64): a descheduled idle vCPU still counts as idle;
/// on: it counts as busy.
#[test]
fn vcpu_is_preempted_switch() {
    let mut h = sis_setup(&[], CfsParams::default());
    h.cpus[1].executing = false;
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 1);
    let p = CfsParams {
        vcpu_is_preempted: true,
        ..Default::default()
    };
    let mut h = sis_setup(&[], p);
    h.cpus[1].executing = false;
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 2);
}

/// §1.16 recent_used_cpu: the waker's vCPU is remembered and tried before the scan.
#[test]
fn recent_used_cpu_is_tried_before_the_scan() {
    let mut h = sis_setup(&[1], CfsParams::default());
    h.sched.ses[P as usize].recent_used_cpu = 3;
    h.sched.ses[W as usize].recent_used_cpu = 2;
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 3, "recent vCPU 3 beats the scan's vCPU 2");
    assert_eq!(
        h.sched.ses[P as usize].recent_used_cpu, 1,
        "prev remembered instead"
    );
    assert_eq!(
        h.sched.ses[W as usize].recent_used_cpu, 0,
        "waker records its vCPU"
    );
}

/// §1.16: a vCPU running only SCHED_IDLE tasks counts as idle for placement.
#[test]
fn sched_idle_cpu_counts_as_idle() {
    let mut ents = vec![pinned(0, 2, 0), free(1, 2, 0)];
    let mut bg = pinned(2, 2, 1);
    bg.policy = Policy::Idle;
    ents.push(bg);
    let mut h = harness(2, ents);
    start(&mut h, A);
    start(&mut h, C);
    wake_from(&mut h, B, 0, false);
    assert_eq!(cpu_of(&h, B), 1);
    assert_eq!(
        h.take_resched(),
        vec![1],
        "and preempts the SCHED_IDLE task"
    );
}

/// §1.16: with SMT siblings, a wholly idle core is preferred over an idle sibling of a busy core.
#[test]
fn idle_core_preferred_with_smt() {
    let t: Vec<CpuTopo> = (0..4)
        .map(|c| CpuTopo {
            core: c / 2,
            thread: c % 2,
            ..Default::default()
        })
        .collect();
    let ents = vec![pinned(0, 4, 0), free(1, 4, 0)];
    let mut h = Harness::with_topology(Cfs::new(CfsParams::default(), &t), t, ents);
    assert!(h.sched.smt);
    start(&mut h, A);
    // B's prev (0) is busy; vCPU 1 is idle but its core is busy; core 1 (vCPUs 2, 3) is idle.
    wake_from(&mut h, B, 0, false);
    assert_eq!(cpu_of(&h, B), 2);
}

// --- §1.17 load balancing ------------------------------------------------------------------------

/// Two vCPUs: A runs on 0 with B queued behind it, X (pinned to 1) runs on 1.
fn lb_setup() -> Harness<Cfs> {
    let mut h = harness(2, vec![free(0, 2, 0), free(1, 2, 0), pinned(2, 2, 1)]);
    start(&mut h, C);
    start(&mut h, A);
    wake(&mut h, B); // prev 0 busy, 1 busy: queued on 0
    assert_eq!(cpu_of(&h, B), 0);
    h
}

/// §1.17: newidle pulls a queued, cache-cold task from an overloaded vCPU.
#[test]
fn newidle_pulls_a_cold_task() {
    let mut h = lb_setup();
    h.advance(ms(10));
    h.block(C);
    assert_eq!(h.curr(1), Some(B));
    assert_eq!(h.sched.rqs[0].nr_running, 1);
    assert!(
        h.take_resched().is_empty(),
        "the pull is served by this very schedule"
    );
}

/// §1.17: a cache-hot task (ran < 500 µs ago) is not pulled by newidle.
#[test]
fn newidle_leaves_cache_hot_tasks() {
    let mut h = lb_setup();
    h.advance(ms(10));
    h.sched.ses[1].exec_start = h.now; // ran just now (clock_task = now without steal)
    h.block(C);
    assert_eq!(h.curr(1), None);
    assert!(h.sched.rqs[1].idle_stamp.is_some());
}

/// §1.17: newidle is skipped when avg_idle < migration_cost.
#[test]
fn newidle_gated_by_avg_idle() {
    let mut h = lb_setup();
    h.advance(ms(10));
    h.sched.rqs[1].avg_idle = 100_000;
    h.block(C);
    assert_eq!(h.curr(1), None);
}

/// §1.17: a busy vCPU's tick eventually balances on behalf of an idle one (NOHZ kick).
#[test]
fn nohz_idle_balance_pulls_to_idle_cpu() {
    let mut h = lb_setup();
    h.advance(ms(10));
    h.sched.ses[1].exec_start = h.now;
    h.block(C);
    assert_eq!(h.curr(1), None);
    h.advance(ms(4));
    h.tick(0);
    assert_eq!(cpu_of(&h, B), 1);
    assert!(h.take_resched().contains(&1));
    h.schedule(1);
    assert_eq!(h.curr(1), Some(B));
}

/// §1.17: periodic balancing of a busy vCPU pulls load from an overloaded one; pinned tasks stay.
#[test]
fn periodic_balance_moves_load_not_pinned_tasks() {
    // Task 0 (pinned to vCPU 0) is the coldest queued task: it must be skipped.
    let ents = vec![
        pinned(0, 2, 0),
        free(1, 2, 0),
        free(2, 2, 0),
        free(3, 2, 0),
        pinned(4, 2, 1),
    ];
    let mut h = harness(2, ents);
    start(&mut h, 4);
    start(&mut h, 1);
    for e in [2, 3, 0] {
        wake(&mut h, e);
    }
    assert_eq!(h.sched.rqs[0].nr_running, 4);
    // Busy interval: 2 ms × 16 = 32 ms = 8 jiffies − 1 = 28 ms.
    h.advance(ms(24));
    h.tick(1);
    assert_eq!(h.sched.rqs[0].nr_running, 4, "not yet due");
    h.advance(ms(4));
    h.tick(1);
    // avg 2560, imbalance min(4096 − 2560, 2560 − 1024) = 1536: one nice-0 task moves.
    assert_eq!(h.sched.rqs[0].nr_running, 3);
    assert_eq!(h.sched.rqs[1].nr_running, 2);
    assert_eq!(cpu_of(&h, 0), 0, "the pinned task stayed");
    assert_eq!(cpu_of(&h, 2), 1, "the coldest movable task moved");
}

// --- long run --------------------------------------------------------------------------------------

/// §1.2/§1.6/§1.11: three CPU-bound tasks, nice 0/0/5, on one vCPU for 10 s of ticks share the
/// CPU as 1024:1024:335.
#[test]
fn long_run_shares_follow_weights() {
    let mut c5 = pinned(2, 1, 0);
    c5.nice = 5;
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

// --- parameters ------------------------------------------------------------------------------------

/// Parameters: ranges are checked and errors name the field.
#[test]
fn validate_rejects_bad_values() {
    assert!(CfsParams::default().validate().is_ok());
    let bad = [
        (
            CfsParams {
                hz: 0,
                ..Default::default()
            },
            "hz",
        ),
        (
            CfsParams {
                hz: 20_000,
                ..Default::default()
            },
            "hz",
        ),
        (
            CfsParams {
                sched_tunable_scaling: 3,
                ..Default::default()
            },
            "sched_tunable_scaling",
        ),
        (
            CfsParams {
                sched_latency_ns: Some(50_000),
                ..Default::default()
            },
            "sched_latency_ns",
        ),
        (
            CfsParams {
                sched_min_granularity_ns: Some(2 * NS_PER_S),
                ..Default::default()
            },
            "sched_min_granularity_ns",
        ),
        (
            CfsParams {
                sched_wakeup_granularity_ns: Some(2 * NS_PER_S),
                ..Default::default()
            },
            "sched_wakeup_granularity_ns",
        ),
        (
            CfsParams {
                sched_nr_latency: 0,
                ..Default::default()
            },
            "sched_nr_latency",
        ),
    ];
    for (p, field) in bad {
        let err = p.validate().expect_err(field);
        assert!(err.starts_with(field), "{err}");
    }
}

/// Parameters: serde defaults, the version tag and unknown-field rejection.
#[test]
fn params_deserialize_with_defaults() {
    let p: CfsParams = serde_json::from_str(r#"{"hz": 1000, "version": "5.10"}"#).unwrap();
    assert_eq!(p.hz, 1000);
    assert_eq!(p.sched_migration_cost_ns, 500_000);
    assert!(
        p.gentle_fair_sleepers
            && p.start_debit
            && !p.next_buddy
            && p.last_buddy
            && p.wakeup_preemption
    );
    assert!(!p.vcpu_is_preempted);
    assert!(serde_json::from_str::<CfsParams>(r#"{"version": "6.6"}"#).is_err());
    assert!(serde_json::from_str::<CfsParams>(r#"{"sched_latency": 1}"#).is_err());
}

#[test]
#[should_panic(expected = "validated")]
fn new_panics_on_invalid_params() {
    Cfs::new(
        CfsParams {
            hz: 0,
            ..Default::default()
        },
        &topo(1),
    );
}
