//! The host level: Xen's schedulers (Credit2 4.20 and 4.2.1, Credit1 3.3 and 4.20 with seed 001's
//! and seed 002's options, RTDS, pinned, null, ARINC653, SEDF, BVT) under the host cases, and the
//! cases that do not apply to a policy, with the reason.

use vmsched_core::testkit::flat;

use vmsched_sched::host::credit1::Credit1Version::{self, V3_3, V4_20};
use vmsched_sched::host::credit1::{Credit1, Credit1Params, Credit1Sched};
use vmsched_sched::host::credit2::{Credit2, Credit2Params, Credit2Sched, Credit2Version};

use crate::cases::*;

fn credit2_with(p: Credit2Params, n: usize) -> Credit2Sched {
    let topo = vec![Default::default(); n];
    Credit2::sched(p, &topo, 4)
}

fn credit2(n: usize) -> Credit2Sched {
    credit2_with(Default::default(), n)
}

/// Credit2 as in Xen 4.2.1 (no affinity: pinned entities may run anywhere).
fn credit2_v4_2_1(n: usize) -> Credit2Sched {
    let version = Credit2Version::V4_2_1;
    credit2_with(
        Credit2Params {
            version,
            ..Default::default()
        },
        n,
    )
}

fn credit1(p: Credit1Params, n: usize) -> Credit1Sched {
    let topo = vec![Default::default(); n];
    Credit1::sched(p, &topo, 4)
}

/// Credit1 of a release, with its defaults.
fn era(version: Credit1Version) -> Credit1Params {
    Credit1Params {
        version,
        ..Default::default()
    }
}

/// Credit1 without BOOST (seed 002's `boost_on_wake = false`, ERRATA X6).
fn no_boost(version: Credit1Version) -> Credit1Params {
    Credit1Params {
        boost_on_wake: Some(false),
        ..era(version)
    }
}

/// Xen 3.3 Credit1 with seed 001's first improvement (ERRATA X13). Boost credit is left out: by
/// design a boost domain can keep its CPU from UNDER neighbours (docs/credit1.md).
fn seed001() -> Credit1Params {
    Credit1Params {
        exact_debit: true,
        boost_slice_ms: Some(2),
        keep_credit_above_limit: true,
        level_domain_credits: true,
        ..era(Credit1Version::V3_3)
    }
}

host_conformance!(credit2_host, credit2);
host_conformance!(credit1_3_3_host, |n| credit1(era(V3_3), n));
host_conformance!(credit1_4_20_host, |n| credit1(era(V4_20), n));
host_conformance!(credit1_3_3_seed001_host, |n| credit1(seed001(), n));
host_conformance!(credit1_3_3_no_boost_host, |n| credit1(no_boost(V3_3), n));
host_conformance!(credit1_4_20_no_boost_host, |n| credit1(no_boost(V4_20), n));

fn rtds(n: usize) -> vmsched_sched::host::rtds::RtdsSched {
    vmsched_sched::host::rtds::Rtds::sched(Default::default(), &flat(n))
}

host_conformance!(rtds_host, rtds, budget_change_moves_shares);

mod pinned_host {
    use vmsched_sched::host::pinned::Pinned;
    conformance_cases!(Pinned::new, true; lone_entity_runs);
}

/// Xen's null scheduler shares no CPU (a vCPU beyond the pCPUs waits until one is freed, a
/// blocked vCPU's CPU idles), so the cases about sharing a CPU do not apply; its own forms of
/// them are in `host/null/tests.rs`. These hold as for every policy.
mod null_host {
    fn null(n: usize) -> vmsched_sched::host::null::NullSched {
        vmsched_sched::host::null::Null::sched(n)
    }
    conformance_cases!(null, true;
        lone_entity_runs,
        idle_cpu_takes_waking_entity,
        work_conserving,
        wake_reschedules_cpu_in_affinity,
    );
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
    conformance_cases!(arinc653, true; lone_entity_runs, wake_reschedules_cpu_in_affinity);
}

/// Credit2 as in Xen 4.2.1 ignores hard affinity (its CPU pick, tickle and candidate selection
/// never read it; scenarios refuse pinning under it) and has no caps, so the cases that pin
/// entities to a CPU of several, or cap them (the scripted run), do not apply; the
/// one-CPU form of the sharing case does. Its own rules are in `host/credit2/tests/v4_2.rs`.
mod credit2_4_2_1_host {
    use super::credit2_v4_2_1 as c;
    // The one-CPU form of the sharing case: nothing pins the entities.
    #[test]
    fn n_entities_one_cpu_all_progress() {
        super::n_entities_one_cpu_all_progress(c(1), 1);
    }
    conformance_cases!(c, true;
        lone_entity_runs,
        idle_cpu_takes_waking_entity,
        work_conserving,
        block_and_wake,
        wake_reschedules_cpu_in_affinity,
        yield_keeps_cpu_busy,
        weight_change_moves_shares,
        paused_entity_gets_no_cpu,
        removed_entity_never_runs,
    );
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
    conformance_cases!(sedf, true;
        affinity_holds,
        wake_reschedules_cpu_in_affinity,
        timers_well_formed,
        deterministic,
    );
}

fn bvt(n: usize) -> vmsched_sched::host::bvt::BvtSched {
    vmsched_sched::host::bvt::Bvt::sched(&Default::default(), n, 4, &[])
}

/// BVT (historic, Xen 3.0): every CPU has its own runqueue and a vCPU never moves to an idle
/// CPU, and it takes no run-time weight (its weight, `mcu_advance`, is set in `[host]`) nor CPU
/// hot-plug; the other cases hold. Its own rules are in `host/bvt/tests.rs`.
mod bvt_host {
    use super::bvt;
    conformance_cases!(bvt, true;
        lone_entity_runs,
        n_entities_one_cpu_all_progress,
        affinity_holds,
        work_conserving,
        block_and_wake,
        wake_reschedules_cpu_in_affinity,
        yield_keeps_cpu_busy,
        paused_entity_gets_no_cpu,
        removed_entity_never_runs,
        timers_well_formed,
        deterministic,
    );
}
