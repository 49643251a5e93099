//! The guest level: the Linux cores (CFS, EEVDF 6.6/6.12/6.18, the RT class with SCHED_RR
//! tasks, SCHED_DEADLINE tasks) and BFS under the guest cases, and their own parameter changes.

use vmsched_core::testkit::{flat, Harness};
use vmsched_core::{Policy, Scheduler, WakeCause, WakeInfo, NS_PER_MS};

use vmsched_sched::guest::eevdf::EevdfKernel::{V6_12, V6_18, V6_6};

use crate::cases::*;

pub(crate) fn cfs(n: usize) -> vmsched_sched::guest::cfs::CfsSched {
    vmsched_sched::guest::cfs::Cfs::sched(Default::default(), &flat(n))
}

pub(crate) fn eevdf(
    kernel: vmsched_sched::guest::eevdf::EevdfKernel,
    n: usize,
) -> vmsched_sched::guest::eevdf::EevdfSched {
    use vmsched_sched::guest::eevdf::{Eevdf, EevdfParams};
    Eevdf::sched(EevdfParams::new(kernel), &flat(n))
}

pub(crate) fn bfs(n: usize) -> vmsched_sched::guest::bfs::BfsSched {
    vmsched_sched::guest::bfs::Bfs::sched(Default::default(), &flat(n))
}

/// The BFS guest with every task SCHED_RR at priority 10: BFS's RT levels under the suite.
fn bfs_rr_tasks(n: usize) -> vmsched_sched::guest::bfs::BfsSched {
    TASK_POLICY.set((Policy::Rr, 10));
    bfs(n)
}

/// The Linux 5.10 guest with every task SCHED_RR at priority 10: the RT class under the
/// suite. Throttling is off (`sched_rt_runtime_us = -1`): with it, a CPU with only RT work
/// idles 50 ms a second by design, which the work-conservation cases would flag; the RT tests
/// (guest/rt/tests/bandwidth.rs, tests/rt.rs) cover it.
fn rr_tasks(n: usize) -> vmsched_sched::guest::cfs::CfsSched {
    TASK_POLICY.set((Policy::Rr, 10));
    let mut p = vmsched_sched::guest::cfs::CfsParams::default();
    p.rt.sched_rt_runtime_us = -1;
    vmsched_sched::guest::cfs::Cfs::sched(p, &flat(n))
}

/// Parameter change (RT guest): raising one RR task's priority gives it the CPU outright.
fn rt_priority_change_takes_the_cpu<S: Scheduler>(s: S) {
    let mut h = two_on_one_cpu(s);
    h.run_for(200 * NS_PER_MS, 100_000);
    let (a, b) = window(&mut h, 1000);
    let before = a as f64 / b as f64;
    h.ents[1].params.linux.rt_priority = 20;
    h.prio_changed(1);
    h.pump();
    let (a, b) = window(&mut h, 1000);
    assert!(
        (0.8..1.25).contains(&before),
        "equal priorities take turns: {before}"
    );
    assert_eq!(
        (a, b),
        (0, 1000 * NS_PER_MS),
        "the higher priority runs alone"
    );
}

guest_conformance!(cfs_guest, cfs);

guest_conformance!(eevdf_6_6_guest, |n| eevdf(V6_6, n));
guest_conformance!(eevdf_6_12_guest, |n| eevdf(V6_12, n));
guest_conformance!(eevdf_6_18_guest, |n| eevdf(V6_18, n));

/// BFS at a guest level: the common cases, removal, timers and determinism. Its parameter
/// change is a nice change too, but BFS turns nice into a deadline offset, not a weight, so the
/// shares it moves to are BFS's own (`bfs_nice_change_moves_shares`).
mod bfs_guest {
    use super::*;
    common_conformance!(common, bfs, {});
    #[test]
    fn nice_change_moves_shares() {
        super::bfs_nice_change_moves_shares(bfs(1));
    }
    conformance_cases!(bfs, false;
        class_change_takes_effect,
        removed_entity_never_runs,
        timers_well_formed,
        deterministic,
    );
}

/// Parameter change (BFS guest): nice 5 after the change. Each hog runs 8 ms per slice (6.29 ms
/// rounded up to the 4 ms ticks of HZ 250) and refills with deadline = now + offset; the nice-0
/// hog keeps the CPU while its new deadline (now + 41.09 ms) is before the nice-5 hog's (set
/// 66.06 ms out at its last refill), i.e. for (66.06 − 41.09 + 8) / 8 ≈ 4 slices per slice of
/// the nice-5 hog (spec §4.2: shares follow deadline offsets, not weights).
pub(crate) fn bfs_nice_change_moves_shares<S: Scheduler>(s: S) {
    let (before, after) = shares_around_nice_5(s);
    assert!((0.85..1.18).contains(&before), "nice 0:0: {before}");
    assert!((3.5..4.6).contains(&after), "nice 0:5 under BFS: {after}");
}

/// The RT class (SCHED_RR tasks) at a guest level: the common cases, removal, timers and
/// determinism, with a priority change as its parameter change.
mod rr_guest {
    use super::*;
    common_conformance!(common, rr_tasks, {});
    conformance_cases!(rr_tasks, false;
        rt_priority_change_takes_the_cpu,
        removed_entity_never_runs,
        timers_well_formed,
        deterministic,
    );
}

fn dl_tasks(n: usize) -> vmsched_sched::guest::cfs::CfsSched {
    TASK_POLICY.set((Policy::Deadline, 0));
    let mut p = vmsched_sched::guest::cfs::CfsParams::default();
    p.rt.sched_rt_runtime_us = -1;
    vmsched_sched::guest::cfs::Cfs::sched(p, &flat(n))
}

/// The deadline class (SCHED_DEADLINE tasks of full bandwidth, docs/deadline.md) at a guest
/// level: the common cases, removal, timers and determinism.
/// `yield_keeps_cpu_busy` does not apply: a deadline task's `sched_yield` gives up the rest of
/// its runtime until its next period (`yield_task_dl`), so a lone yielder leaves its CPU idle
/// until then (`lone_yielder_runs_at_its_next_period`).
mod dl_guest {
    use super::*;
    conformance_cases!(dl_tasks, false;
        lone_entity_runs,
        n_entities_one_cpu_all_progress,
        idle_cpu_takes_waking_entity,
        affinity_holds,
        work_conserving,
        block_and_wake,
        wake_reschedules_cpu_in_affinity,
        cpu_offline_and_online,
        cpu_hotplug_deterministic,
        removed_entity_never_runs,
        timers_well_formed,
        deterministic,
    );
    #[test]
    fn lone_yielder_runs_at_its_next_period() {
        let mut h = Harness::new(dl_tasks(1), 1, vec![params(0, 1)]);
        h.wake(0, WakeInfo::of(WakeCause::Fork));
        h.pump();
        h.run_for(NS_PER_MS, 100_000);
        h.yield_(0);
        h.pump();
        assert_eq!(h.curr(0), None, "the yielder waits for its next period");
        h.run_for(9 * NS_PER_MS, 100_000);
        assert_eq!(h.curr(0), Some(0), "and runs again at it");
    }
}

/// BFS with SCHED_RR tasks: its RT levels of the one global queue under the common cases.
mod bfs_rr_guest {
    use super::*;
    common_conformance!(common, bfs_rr_tasks, {});
    conformance_cases!(bfs_rr_tasks, false;
        rt_priority_change_takes_the_cpu,
        removed_entity_never_runs,
        deterministic,
    );
}
