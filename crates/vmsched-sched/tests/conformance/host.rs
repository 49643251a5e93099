//! The host level: Xen's schedulers (Credit2 4.20 and 4.2.1, Credit1 3.3 and 4.20 with seed 001's
//! and seed 002's options, RTDS, pinned, null, ARINC653, SEDF, BVT) under the host cases, and the
//! cases that do not apply to a policy, with the reason.

use vmsched_core::testkit::flat;

use crate::cases::*;

fn credit2(n: usize) -> vmsched_sched::host::credit2::Credit2Sched {
    let topo = vec![Default::default(); n];
    vmsched_sched::host::credit2::Credit2::sched(Default::default(), &topo, 4)
}

/// Credit2 as in Xen 4.2.1 (no affinity: pinned entities may run anywhere).
fn credit2_v4_2_1(n: usize) -> vmsched_sched::host::credit2::Credit2Sched {
    let topo = vec![Default::default(); n];
    let p = vmsched_sched::host::credit2::Credit2Params {
        version: vmsched_sched::host::credit2::Credit2Version::V4_2_1,
        ..Default::default()
    };
    vmsched_sched::host::credit2::Credit2::sched(p, &topo, 4)
}

fn credit1(
    version: vmsched_sched::host::credit1::Credit1Version,
    n: usize,
) -> vmsched_sched::host::credit1::Credit1Sched {
    let topo = vec![Default::default(); n];
    let p = vmsched_sched::host::credit1::Credit1Params {
        version,
        ..Default::default()
    };
    vmsched_sched::host::credit1::Credit1::sched(p, &topo, 4)
}

fn credit1_v3_3(n: usize) -> vmsched_sched::host::credit1::Credit1Sched {
    credit1(vmsched_sched::host::credit1::Credit1Version::V3_3, n)
}

fn credit1_v4_20(n: usize) -> vmsched_sched::host::credit1::Credit1Sched {
    credit1(vmsched_sched::host::credit1::Credit1Version::V4_20, n)
}

/// Xen 3.3 Credit1 with seed 001's first improvement (ERRATA X13). Boost credit is left out: by
/// design a boost domain can keep its CPU from UNDER neighbours (docs/credit1.md).
fn credit1_v3_3_seed001(n: usize) -> vmsched_sched::host::credit1::Credit1Sched {
    let topo = vec![Default::default(); n];
    let p = vmsched_sched::host::credit1::Credit1Params {
        version: vmsched_sched::host::credit1::Credit1Version::V3_3,
        exact_debit: true,
        boost_slice_ms: Some(2),
        keep_credit_above_limit: true,
        level_domain_credits: true,
        ..Default::default()
    };
    vmsched_sched::host::credit1::Credit1::sched(p, &topo, 4)
}

/// Credit1 without BOOST (seed 002's `boost_on_wake = false`, ERRATA X6).
fn credit1_no_boost(
    version: vmsched_sched::host::credit1::Credit1Version,
    n: usize,
) -> vmsched_sched::host::credit1::Credit1Sched {
    let topo = vec![Default::default(); n];
    let p = vmsched_sched::host::credit1::Credit1Params {
        version,
        boost_on_wake: Some(false),
        ..Default::default()
    };
    vmsched_sched::host::credit1::Credit1::sched(p, &topo, 4)
}

fn credit1_v3_3_no_boost(n: usize) -> vmsched_sched::host::credit1::Credit1Sched {
    credit1_no_boost(vmsched_sched::host::credit1::Credit1Version::V3_3, n)
}

fn credit1_v4_20_no_boost(n: usize) -> vmsched_sched::host::credit1::Credit1Sched {
    credit1_no_boost(vmsched_sched::host::credit1::Credit1Version::V4_20, n)
}

host_conformance!(credit2_host, credit2);
host_conformance!(credit1_3_3_host, credit1_v3_3);
host_conformance!(credit1_4_20_host, credit1_v4_20);
host_conformance!(credit1_3_3_seed001_host, credit1_v3_3_seed001);
host_conformance!(credit1_3_3_no_boost_host, credit1_v3_3_no_boost);
host_conformance!(credit1_4_20_no_boost_host, credit1_v4_20_no_boost);
fn rtds(n: usize) -> vmsched_sched::host::rtds::RtdsSched {
    vmsched_sched::host::rtds::Rtds::sched(Default::default(), &flat(n))
}

host_conformance!(rtds_host, rtds, budget_change_moves_shares);

mod pinned_host {
    #[test]
    fn lone_entity_runs() {
        super::lone_entity_runs(vmsched_sched::host::pinned::Pinned::new(1));
    }
}

/// Xen's null scheduler shares no CPU (a vCPU beyond the pCPUs waits until one is freed, a
/// blocked vCPU's CPU idles), so the cases about sharing a CPU do not apply; its own forms of
/// them are in `host/null/tests.rs`. These hold as for every policy.
mod null_host {
    fn null(n: usize) -> vmsched_sched::host::null::NullSched {
        vmsched_sched::host::null::Null::sched(n)
    }
    #[test]
    fn lone_entity_runs() {
        super::lone_entity_runs(null(1));
    }
    #[test]
    fn idle_cpu_takes_waking_entity() {
        super::idle_cpu_takes_waking_entity(null(2));
    }
    #[test]
    fn work_conserving() {
        super::work_conserving(null(4));
    }
    #[test]
    fn wake_reschedules_cpu_in_affinity() {
        super::wake_reschedules_cpu_in_affinity(null(3));
    }
}

/// Xen's ARINC653 follows a fixed table (Xen 4.20's default here: a 10 ms slot per vCPU of
/// domain 0, so entity 0), so the cases where a policy must share a CPU or hand a blocked
/// vCPU's time to another do not apply: a slot is never given away. Its own rules, and the
/// whole-run check that it follows its table to the nanosecond, are in
/// `host/arinc653/tests.rs` and `tests/xen_family.rs`.
mod arinc653_host {
    fn arinc653(n: usize) -> vmsched_sched::host::arinc653::Arinc653Sched {
        vmsched_sched::host::arinc653::Arinc653::sched(&Default::default(), n, None)
    }
    #[test]
    fn lone_entity_runs() {
        super::lone_entity_runs(arinc653(1));
    }
    #[test]
    fn wake_reschedules_cpu_in_affinity() {
        super::wake_reschedules_cpu_in_affinity(arinc653(3));
    }
}

/// Credit2 as in Xen 4.2.1 ignores hard affinity (its CPU pick, tickle and candidate selection
/// never read it; scenarios refuse pinning under it) and has no caps, so the cases that pin
/// entities to a CPU of several, or cap them (the scripted run), do not apply; the
/// one-CPU form of the sharing case does. Its own rules are in `host/credit2/tests/v4_2.rs`.
mod credit2_4_2_1_host {
    use super::credit2_v4_2_1 as c;
    #[test]
    fn lone_entity_runs() {
        super::lone_entity_runs(c(1));
    }
    #[test]
    fn n_entities_one_cpu_all_progress() {
        super::n_entities_one_cpu_all_progress(c(1), 1);
    }
    #[test]
    fn idle_cpu_takes_waking_entity() {
        super::idle_cpu_takes_waking_entity(c(2));
    }
    #[test]
    fn work_conserving() {
        super::work_conserving(c(4));
    }
    #[test]
    fn block_and_wake() {
        super::block_and_wake(c(1));
    }
    #[test]
    fn wake_reschedules_cpu_in_affinity() {
        super::wake_reschedules_cpu_in_affinity(c(3));
    }
    #[test]
    fn yield_keeps_cpu_busy() {
        super::yield_keeps_cpu_busy(c(1), c(1));
    }
    #[test]
    fn weight_change_moves_shares() {
        super::weight_change_moves_shares(c(1));
    }
    #[test]
    fn paused_entity_gets_no_cpu() {
        super::paused_entity_gets_no_cpu(c(1));
    }
    #[test]
    fn removed_entity_never_runs() {
        super::removed_entity_never_runs(c(1), true);
    }
}

fn sedf(n: usize) -> vmsched_sched::host::sedf::SedfSched {
    vmsched_sched::host::sedf::Sedf::sched(&Default::default(), n)
}

/// SEDF (historic, Xen 4.2.1) is not work-conserving: extra time comes in 500 µs quanta and
/// only with a whole quantum left before the next period begins (the CPU idles for the rest),
/// and every CPU has its own queues, a vCPU never moving to an idle CPU; it takes no run-time
/// weight. So the cases that want a CPU never idle with work queued, an idle CPU to take a
/// waking vCPU of another, or a weight change do not apply; these do. Its own rules are in
/// `host/sedf/tests.rs`.
mod sedf_host {
    use super::sedf;
    #[test]
    fn affinity_holds() {
        super::affinity_holds(sedf(4));
    }
    #[test]
    fn wake_reschedules_cpu_in_affinity() {
        super::wake_reschedules_cpu_in_affinity(sedf(3));
    }
    #[test]
    fn timers_well_formed() {
        super::timers_well_formed(sedf(2), true);
    }
    #[test]
    fn deterministic() {
        super::deterministic(sedf(2), sedf(2), true);
    }
}

fn bvt(n: usize) -> vmsched_sched::host::bvt::BvtSched {
    vmsched_sched::host::bvt::Bvt::sched(&Default::default(), n, 4, &[])
}

/// BVT (historic, Xen 3.0): every CPU has its own runqueue and a vCPU never moves to an idle
/// CPU, and it takes no run-time weight (its weight, `mcu_advance`, is set in `[host]`) nor CPU
/// hot-plug; the other cases hold. Its own rules are in `host/bvt/tests.rs`.
mod bvt_host {
    use super::bvt;
    #[test]
    fn lone_entity_runs() {
        super::lone_entity_runs(bvt(1));
    }
    #[test]
    fn n_entities_one_cpu_all_progress() {
        super::n_entities_one_cpu_all_progress(bvt(2), 2);
    }
    #[test]
    fn affinity_holds() {
        super::affinity_holds(bvt(4));
    }
    #[test]
    fn work_conserving() {
        super::work_conserving(bvt(4));
    }
    #[test]
    fn block_and_wake() {
        super::block_and_wake(bvt(1));
    }
    #[test]
    fn wake_reschedules_cpu_in_affinity() {
        super::wake_reschedules_cpu_in_affinity(bvt(3));
    }
    #[test]
    fn yield_keeps_cpu_busy() {
        super::yield_keeps_cpu_busy(bvt(1), bvt(1));
    }
    #[test]
    fn paused_entity_gets_no_cpu() {
        super::paused_entity_gets_no_cpu(bvt(1));
    }
    #[test]
    fn removed_entity_never_runs() {
        super::removed_entity_never_runs(bvt(1), true);
    }
    #[test]
    fn timers_well_formed() {
        super::timers_well_formed(bvt(2), true);
    }
    #[test]
    fn deterministic() {
        super::deterministic(bvt(2), bvt(2), true);
    }
}
