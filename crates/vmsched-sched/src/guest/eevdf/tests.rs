//! Unit tests of the EEVDF model: one test per rule of `linux-schedulers.md` §2 and of ERRATA
//! L2–L6 (named in each test's doc comment), driven through the engine's test [`Harness`].
//! Shared helpers and the core quantities (V, lag, eligibility, deadlines, the pick) are here;
//! placement, preemption, DELAY_DEQUEUE and the parameters have their own files.

use super::*;
use vmsched_core::sched::{EntityParams, Scheduler, WakeCause};
use vmsched_core::testkit::{flat, pinned, Harness};

mod delay;
mod params;
mod place;
mod preempt;

const A: u32 = 0;
const B: u32 = 1;
const C: u32 = 2;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn harness_with(p: EevdfParams, n: usize, ents: Vec<EntityParams>) -> Harness<EevdfSched> {
    let t = flat(n);
    Harness::with_topology(Eevdf::sched(p, &t), t, ents)
}

fn harness(kernel: EevdfKernel, n: usize, ents: Vec<EntityParams>) -> Harness<EevdfSched> {
    harness_with(EevdfParams::new(kernel), n, ents)
}

/// `kernel` with the flags `f` changes.
fn with_features(kernel: EevdfKernel, f: impl FnOnce(&mut EevdfFeatures)) -> EevdfParams {
    let mut p = EevdfParams::new(kernel);
    f(&mut p.features);
    p
}

fn fair(h: &Harness<EevdfSched>) -> &Eevdf {
    &h.sched.cls.fair
}

fn se(h: &Harness<EevdfSched>, e: u32) -> &Se {
    &h.sched.cls.fair.ses[e as usize]
}

fn wake(h: &mut Harness<EevdfSched>, e: u32) {
    h.wake(e, WakeInfo::default());
}

/// Wakes `e` and lets its CPU pick what it picks.
fn wake_pump(h: &mut Harness<EevdfSched>, e: u32) {
    wake(h, e);
    h.pump();
}

/// A task pinned to CPU 0 of `n` with a nice value and (6.12+) its own slice.
fn task(i: usize, n: usize, nice: i32, slice_ns: u64) -> EntityParams {
    let mut p = pinned(i, n, 0);
    p.linux.nice = nice;
    p.linux.times.sched_runtime_ns = slice_ns;
    p
}

/// Charges the running task up to now (the tick's `update_curr`).
fn charge(h: &mut Harness<EevdfSched>, cpu: u32) {
    h.tick(cpu);
}

/// V of `cpu` recomputed from scratch from every entity on the queue and curr.
fn v_from_scratch(f: &Eevdf, cpu: usize) -> u64 {
    let rq = &f.rqs[cpu];
    let v0 = rq.min_vruntime;
    let mut sum: i128 = 0;
    let mut load: i128 = 0;
    for e in rq.queue.iter().copied().chain(rq.curr) {
        if !f.ses[e].on_rq {
            continue;
        }
        let w = f.ses[e].load.weight as i128;
        sum += w * vdiff(f.ses[e].vruntime, v0) as i128;
        load += w;
    }
    if load == 0 {
        return v0;
    }
    v0.wrapping_add(sum.div_euclid(load) as u64)
}

/// The kept sums equal the sums over the queue (upstream's avg_vruntime / avg_load).
fn assert_sums(f: &Eevdf) {
    for (c, rq) in f.rqs.iter().enumerate() {
        let (mut sum, mut load) = (0i64, 0i64);
        for &e in &rq.queue {
            let w = f.ses[e].load.weight as i64;
            sum += w * vdiff(f.ses[e].vruntime, rq.min_vruntime);
            load += w;
        }
        assert_eq!(
            (rq.avg_vruntime, rq.avg_load),
            (sum, load),
            "CPU {c}: kept sums"
        );
        assert_eq!(f.avg_vruntime(c), v_from_scratch(f, c), "CPU {c}: V");
    }
}

// --- §2.3 core quantities ----------------------------------------------------------------------

/// §2.2, §2.3: `avg_vruntime`/`avg_load` are kept as Σ w·(v − min_vruntime) and Σ w over the
/// queued entities through enqueues, dequeues, picks, ticks and moves of min_vruntime, and V is
/// their floored quotient (with curr added): checked after every step of a mixed run.
#[test]
fn avg_vruntime_is_the_weighted_mean_kept_incrementally() {
    for kernel in [EevdfKernel::V6_6, EevdfKernel::V6_12, EevdfKernel::V6_18] {
        let ents = vec![task(0, 1, 0, 0), task(1, 1, 5, 0), task(2, 1, -3, 0)];
        let mut h = harness(kernel, 1, ents);
        for e in [A, B, C] {
            wake_pump(&mut h, e);
            assert_sums(fair(&h));
        }
        for step in 0..40u64 {
            h.run_for(700 * US + step * 37 * US, 100 * US);
            assert_sums(fair(&h));
            let curr = h.curr(0).unwrap();
            if step % 3 == 0 {
                h.block(curr);
                assert_sums(fair(&h));
                wake_pump(&mut h, curr);
                assert_sums(fair(&h));
            }
        }
    }
}

/// §2.3 eligibility: `vruntime_eligible` tests v ≤ V exactly, without the division's
/// rounding: every vruntime up to V is eligible, none above it.
#[test]
fn eligible_iff_vruntime_at_most_v() {
    let ents = vec![task(0, 1, 0, 0), task(1, 1, 5, 0), task(2, 1, -3, 0)];
    let mut h = harness(EevdfKernel::V6_12, 1, ents);
    for e in [A, B, C] {
        wake_pump(&mut h, e);
    }
    h.run_for(5 * MS + 123 * US, 100 * US);
    let f = fair(&h);
    let v = f.avg_vruntime(0);
    for d in -5i64..=5 {
        let x = v.wrapping_add(d as u64);
        assert_eq!(f.vruntime_eligible(0, x), d <= 0, "v = V + {d}");
    }
}

/// §2.3: the task that has run ahead of the weighted average is not eligible; the one behind
/// it is.
#[test]
fn the_task_ahead_of_v_is_not_eligible() {
    let mut h = harness(
        EevdfKernel::V6_6,
        1,
        vec![task(0, 1, 0, 0), task(1, 1, 0, 0)],
    );
    wake_pump(&mut h, A);
    wake_pump(&mut h, B);
    assert_eq!(h.curr(0), Some(A));
    h.advance(300 * US);
    charge(&mut h, 0);
    let f = fair(&h);
    assert!(!f.entity_eligible(0, A as usize), "A ran 0.3 ms ahead of B");
    assert!(f.entity_eligible(0, B as usize));
    assert_eq!(
        vdiff(f.ses[A as usize].vruntime, f.avg_vruntime(0)),
        150_000,
        "V is halfway between two equal weights"
    );
}

/// §2.3: the deadline is the vruntime at placement plus the slice in virtual time
/// (`calc_delta_fair`: a nice-5 task's virtual slice is 1024/335 of the wall one).
#[test]
fn deadline_is_one_virtual_slice_after_placement() {
    let mut h = harness(
        EevdfKernel::V6_6,
        1,
        vec![task(0, 1, 0, 0), task(1, 1, 5, 0)],
    );
    wake_pump(&mut h, A);
    wake_pump(&mut h, B);
    let base = fair(&h).base_slice;
    assert_eq!(base, 750_000, "one CPU: 0.75 ms");
    let a = se(&h, A);
    assert_eq!(vdiff(a.deadline, a.vruntime), 750_000);
    let b = se(&h, B);
    let want = calc_delta_fair(base, LoadWeight::of_task(5, Policy::Normal));
    assert_eq!(vdiff(b.deadline, b.vruntime) as u64, want);
    assert!(
        (2_290_000..2_300_000).contains(&want),
        "≈ 0.75 ms × 1024/335"
    );
}

/// §2.4 update_deadline: once the vruntime reaches the deadline, the new deadline is one slice
/// after the *current* vruntime (not the old deadline plus a slice), and with another task
/// queued the CPU is rescheduled.
#[test]
fn update_deadline_renews_from_the_current_vruntime() {
    let mut h = harness(
        EevdfKernel::V6_12,
        1,
        vec![task(0, 1, 0, 0), task(1, 1, 0, 0)],
    );
    wake_pump(&mut h, A);
    wake_pump(&mut h, B);
    let d0 = se(&h, A).deadline;
    h.advance(900 * US); // past the 0.75 ms request, no tick yet
    assert!(h.take_resched().is_empty());
    charge(&mut h, 0);
    let a = se(&h, A);
    assert_eq!(vdiff(a.vruntime, d0), 150_000);
    assert_eq!(
        vdiff(a.deadline, a.vruntime),
        750_000,
        "from the current vruntime"
    );
    assert_eq!(h.take_resched(), vec![0], "request used up: reschedule");
}

/// §2.1 and its 6.15 rationale: with ticks at 1 ms and 8 vCPUs, a task picked just after a
/// tick uses up a 3.0 ms slice (6.12) only at the 4th tick, a 2.8 ms one (6.18) at the 3rd.
#[test]
fn slice_expiry_is_tick_granular_and_6_18_saves_a_tick() {
    for (kernel, ticks) in [(EevdfKernel::V6_12, 4), (EevdfKernel::V6_18, 3)] {
        let mut p = EevdfParams::new(kernel);
        p.hz = 1000;
        let ents = vec![pinned(0, 8, 0), pinned(1, 8, 0)];
        let mut h = harness_with(p, 8, ents);
        h.advance(100 * US);
        wake_pump(&mut h, A);
        wake_pump(&mut h, B);
        assert_eq!(h.curr(0), Some(A));
        let mut n = 0;
        while h.curr(0) == Some(A) {
            let next_tick = (h.now / MS + 1) * MS;
            h.advance(next_tick - h.now);
            h.tick(0);
            h.pump();
            n += 1;
            assert!(n < 10, "{kernel:?}: A never preempted");
        }
        assert_eq!(n, ticks, "{kernel:?}: preempted at tick {n}");
    }
}

// --- §2.5 the pick -------------------------------------------------------------------------------

/// §2.5: the pick takes the eligible entity with the earliest deadline: of three tasks placed
/// at the same V with slices 3, 0.5 and 1 ms (6.12 custom slices), the 0.5 ms one.
#[test]
fn pick_takes_the_earliest_deadline_among_eligible() {
    let ents = vec![
        task(0, 1, 0, 3 * MS),
        task(1, 1, 0, 500 * US),
        task(2, 1, 0, MS),
    ];
    let mut h = harness(EevdfKernel::V6_12, 1, ents);
    wake(&mut h, A);
    wake(&mut h, B);
    wake(&mut h, C);
    h.pump();
    assert_eq!(h.curr(0), Some(B));
}

/// §2.5: an entity that is not eligible is not picked even with the earliest deadline: B (0.5
/// ms slice) has run 0.4 ms ahead of V; at the next pick C (1 ms) runs, though B's deadline is
/// still the earliest.
#[test]
fn pick_skips_the_earliest_deadline_when_not_eligible() {
    let ents = vec![
        task(0, 1, 0, 3 * MS),
        task(1, 1, 0, 500 * US),
        task(2, 1, 0, MS),
    ];
    let mut h = harness(EevdfKernel::V6_12, 1, ents);
    wake(&mut h, A);
    wake(&mut h, B);
    wake(&mut h, C);
    h.pump();
    h.advance(400 * US);
    charge(&mut h, 0);
    let f = fair(&h);
    assert!(!f.entity_eligible(0, B as usize));
    assert!(before(se(&h, B).deadline, se(&h, C).deadline));
    h.schedule(0);
    assert_eq!(h.curr(0), Some(C));
}

/// §2.5 ties: equal deadlines are taken in insertion order (the tree puts an equal key right).
#[test]
fn equal_deadlines_are_picked_in_insertion_order() {
    for first in [A, B] {
        let mut h = harness(
            EevdfKernel::V6_6,
            1,
            vec![task(0, 1, 0, 0), task(1, 1, 0, 0)],
        );
        let second = A + B - first;
        wake(&mut h, first);
        wake(&mut h, second);
        assert_eq!(se(&h, A).deadline, se(&h, B).deadline);
        h.pump();
        assert_eq!(h.curr(0), Some(first));
    }
}

/// The pick's structure: the same entity as a scan over every queued entity for the eligible
/// one with the smallest deadline (first inserted among equals), over a long mixed run.
#[test]
fn pick_agrees_with_a_brute_force_search() {
    let ents = vec![
        task(0, 1, 0, 0),
        task(1, 1, 5, 300 * US),
        task(2, 1, -3, 2 * MS),
        task(3, 1, 2, 0),
    ];
    let mut h = harness(EevdfKernel::V6_12, 1, ents);
    for e in 0..4 {
        wake_pump(&mut h, e);
    }
    for step in 0..60u64 {
        h.run_for(200 * US + step * 13 * US, 50 * US);
        let f = fair(&h);
        let brute = f.rqs[0]
            .queue
            .iter()
            .copied()
            .filter(|&x| f.entity_eligible(0, x))
            .min_by(|&x, &y| vdiff(f.ses[x].deadline, f.ses[y].deadline).cmp(&0));
        let scan = f.pick_eevdf(0, None, false);
        if let (Some(b), Some(s)) = (brute, scan) {
            assert_eq!(f.ses[b].deadline, f.ses[s].deadline, "step {step}");
            assert!(f.entity_eligible(0, s));
        }
        if step % 4 == 1 {
            let c = h.curr(0).unwrap();
            h.block(c);
            wake_pump(&mut h, c);
        }
    }
}

/// §2.3: CPU-bound tasks share a CPU in proportion to their weights (nice 0, 5, −3).
#[test]
fn shares_follow_weights() {
    for kernel in [EevdfKernel::V6_6, EevdfKernel::V6_12, EevdfKernel::V6_18] {
        let nices = [0, 5, -3];
        let ents = (0..3).map(|i| task(i, 1, nices[i], 0)).collect();
        let mut h = harness(kernel, 1, ents);
        for e in [A, B, C] {
            wake_pump(&mut h, e);
        }
        h.run_for(3_000 * MS, MS);
        let w: Vec<f64> = nices
            .iter()
            .map(|&n| LoadWeight::of_task(n, Policy::Normal).weight as f64)
            .collect();
        let total: f64 = w.iter().sum();
        let run: f64 = h.run_ns.iter().sum::<u64>() as f64;
        for i in 0..3 {
            let share = h.run_ns[i] as f64 / run;
            assert!(
                (share - w[i] / total).abs() < 0.01,
                "{kernel:?}: task {i} got {share:.3}, want {:.3}",
                w[i] / total
            );
        }
    }
}

/// The lag saved at a dequeue is clamped to ±calc_delta_fair(max(2·slice, TICK_NSEC)) (6.6–6.18
/// `entity_lag`).
#[test]
fn lag_is_clamped_to_two_slices_or_a_tick() {
    let h = harness(
        EevdfKernel::V6_12,
        1,
        vec![task(0, 1, 0, 0), task(1, 1, 5, 0)],
    );
    let f = fair(&h);
    let v = 1_000_000_000u64;
    let mut g = Eevdf::new(EevdfParams::new(EevdfKernel::V6_12), &flat(1));
    g.ses = f.ses.clone();
    g.ses[0].vruntime = v - 50 * MS;
    g.ses[0].slice = 750 * US;
    // 2 × 0.75 ms < the 4 ms tick at HZ 250: the tick bounds it.
    assert_eq!(g.entity_lag(v, 0), 4 * MS as i64);
    g.ses[0].vruntime = v + 50 * MS;
    assert_eq!(g.entity_lag(v, 0), -(4 * MS as i64));
    g.ses[1].vruntime = v - 50 * MS;
    g.ses[1].slice = 3 * MS;
    let limit = calc_delta_fair(6 * MS, LoadWeight::of_task(5, Policy::Normal)) as i64;
    assert_eq!(
        g.entity_lag(v, 1),
        limit,
        "2 × 3 ms, in nice 5's virtual time"
    );
}

/// A lone task keeps its CPU and renews its deadline without rescheduling.
#[test]
fn a_lone_task_is_never_rescheduled() {
    let mut h = harness(EevdfKernel::V6_18, 1, vec![task(0, 1, 0, 0)]);
    wake_pump(&mut h, A);
    for _ in 0..50 {
        h.advance(MS);
        charge(&mut h, 0);
        assert!(h.take_resched().is_empty());
    }
    assert_eq!(h.curr(0), Some(A));
}

/// Fork through the core (`WakeCause::Fork`) with a parent running on CPU 0.
fn fork(h: &mut Harness<EevdfSched>, child: u32, parent: u32) {
    h.wake(
        child,
        WakeInfo {
            cause: WakeCause::Fork,
            waker_cpu: Some(CpuId(0)),
            parent: Some(EntityId(parent)),
            ..Default::default()
        },
    );
}

/// The probe is the vruntime.
#[test]
fn probe_reads_the_vruntime() {
    let mut h = harness(EevdfKernel::V6_6, 1, vec![task(0, 1, 0, 0)]);
    wake_pump(&mut h, A);
    h.advance(MS);
    charge(&mut h, 0);
    assert_eq!(h.sched.probe(EntityId(A)), Some(se(&h, A).vruntime as i64));
}
