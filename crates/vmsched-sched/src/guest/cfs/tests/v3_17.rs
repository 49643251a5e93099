//! The Linux 3.17 rules (`cfs/v3_17.rs`), each against 5.10 on the same setup.

use super::*;
use vmsched_core::testkit::{llcs, smt_pairs};

fn v3_17() -> CfsParams {
    CfsParams {
        version: CfsVersion::V3_17,
        ..Default::default()
    }
}

/// §1.14 [3.x]: steal is subtracted in whole ticks (4 ms at HZ 250) and the rest stays
/// pending, where 5.10 subtracts it exactly.
#[test]
fn steal_is_subtracted_in_whole_ticks() {
    for (p, want) in [
        (v3_17(), [ms(6), ms(9), ms(13)]),
        (CfsParams::default(), [ms(4), ms(7), ms(11)]),
    ] {
        let v = p.version;
        let mut h = harness_with(p, 1, vec![pinned(0, 1, 0)]);
        h.clock.steal_accounting = true;
        start(&mut h, A);
        let base = h.sched.rq[0].clock_task;
        h.cpus[0].steal_ns = ms(6);
        h.advance(ms(10));
        h.tick(0);
        // 3.17: 6 ms of steal → 4 ms subtracted, 2 ms pending; then 2 ms < a tick: nothing.
        for (k, (d, w)) in [(0, want[0]), (ms(3), want[1]), (ms(4), want[2])]
            .into_iter()
            .enumerate()
        {
            if k > 0 {
                h.advance(d);
                h.tick(0);
            }
            assert_eq!(h.sched.rq[0].clock_task - base, w, "{v:?} step {k}");
        }
    }
}

/// §1.19: 3.17 has no vcpu_is_preempted (4.10) and no fair server (6.12): both are refused,
/// naming the field; it takes 32-bit ARM's HZ 200 (as 5.10 does).
#[test]
fn options_3_17_lacks_are_refused() {
    let mut p = v3_17();
    p.vcpu_is_preempted = true;
    assert!(p.validate().unwrap_err().starts_with("vcpu_is_preempted"));
    let mut p = v3_17();
    p.rt.fair_server = Some(true);
    assert!(p.validate().unwrap_err().starts_with("rt.fair_server"));
    let p = CfsParams {
        vcpu_is_preempted: true,
        ..Default::default()
    };
    assert!(p.validate().is_ok(), "5.10 has both");
    // 32-bit ARM's HZ 200 (seed 003's Exynos kernels) exists in 3.17, and still in 5.10's
    // arch/arm/Kconfig choice (params.rs, `arm32_hz_choices_exist_in_5_10_and_3_17`); a rate
    // no Kconfig offers is refused in both.
    let p = CfsParams { hz: 200, ..v3_17() };
    assert!(p.validate().is_ok());
    let p = CfsParams { hz: 128, ..v3_17() };
    assert!(p.validate().unwrap_err().starts_with("hz"));
}

/// 3.17 select_idle_sibling: no `recent_used_cpu`; the first idle vCPU from the target on.
#[test]
fn no_recent_used_cpu_in_3_17() {
    for (p, want) in [(v3_17(), 2), (CfsParams::default(), 3)] {
        let ents = vec![
            pinned(0, 4, 0),
            placed_on(1, 4, 1),
            pinned(2, 4, 1),
            pinned(3, 4, 1),
        ];
        let mut h = harness_with(p, 4, ents);
        start(&mut h, 0);
        start(&mut h, 2);
        h.sched.cls.fair.ses[1].recent_used_cpu = 3;
        h.advance(ms(5));
        wake_from(&mut h, 1, 0, false);
        assert_eq!(cpu_of(&h, 1), want);
    }
}

/// 3.17 has no WA_IDLE (4.14): a sync wake-up from a waker alone on its vCPU is not pulled into
/// the waker's LLC when the wakee's previous vCPU (other LLC) is idle.
#[test]
fn no_wa_idle_in_3_17() {
    let t = llcs(4, 2);
    for (p, want) in [(v3_17(), 2), (CfsParams::default(), 1)] {
        let ents = vec![pinned(0, 4, 0), placed_on(1, 4, 2)];
        let mut h = Harness::with_topology(Cfs::sched(p, &t), t.clone(), ents);
        start(&mut h, 0);
        wake_from(&mut h, 1, 0, true);
        assert_eq!(cpu_of(&h, 1), want);
    }
}

/// 3.17 select_idle_sibling with SMT: only a fully idle core, else an idle thread of the
/// target's own core; with neither it stays on the busy target, where 5.10 scans on to any idle
/// vCPU of the LLC.
#[test]
fn only_idle_cores_or_own_siblings_in_3_17() {
    let t = smt_pairs(6); // cores {0,1} {2,3} {4,5}
    for (p, busy, want) in [
        (v3_17(), vec![1, 2, 3], 4), // core {4,5} fully idle
        (v3_17(), vec![1, 2, 4], 1), // no idle core, sibling 0 busy: the target
        (CfsParams::default(), vec![1, 2, 4], 3),
    ] {
        let mut ents = vec![pinned(0, 6, 0), placed_on(1, 6, 1)];
        for (k, &c) in busy.iter().enumerate() {
            ents.push(pinned(2 + k, 6, c));
        }
        let mut h = Harness::with_topology(Cfs::sched(p.clone(), &t), t.clone(), ents);
        start(&mut h, 0);
        for k in 0..busy.len() as u32 {
            start(&mut h, 2 + k);
        }
        h.sched.cls.fair.ses[1].recent_used_cpu = 1;
        h.advance(ms(5));
        wake_from(&mut h, 1, 0, false);
        assert_eq!(cpu_of(&h, 1), want, "{:?} busy {busy:?}", p.version);
    }
}

/// 3.17 find_idlest_cpu: the least loaded vCPU, ties to the parent's, else the first; 5.10
/// prefers the idle vCPU that went idle last.
#[test]
fn fork_takes_the_first_least_loaded_cpu_in_3_17() {
    for (p, want) in [(v3_17(), 1), (CfsParams::default(), 3)] {
        let mut h = harness_with(p, 4, vec![pinned(0, 4, 0), params(1, 4)]);
        start(&mut h, 0);
        h.sched.rq[3].idle_stamp = Some(ms(1));
        h.advance(ms(5));
        fork_from(&mut h, 1, 0);
        assert_eq!(cpu_of(&h, 1), want);
    }
}
