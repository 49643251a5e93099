//! CPU selection at wake-up (§1.16): wake_affine, select_idle_sibling, wake_wide, affinity.

use super::*;
use vmsched_core::testkit::{llcs, smt_pairs};

// --- §1.16 CPU selection --------------------------------------------------------------------------

const W: u32 = 0; // the waker, pinned to vCPU 0
const P: u32 = 1; // the wakee, last ran on vCPU 1

/// W on vCPU 0, P free with prev vCPU 1, fillers pinned on vCPUs 1..=3; `busy` fillers run.
fn sis_setup(busy: &[u32], p: CfsParams) -> Harness<CfsSched> {
    let mut ents = vec![pinned(0, 4, 0), placed_on(1, 4, 1)];
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
    h.sched.cls.fair.ses[P as usize].cpu = 2;
    h.sched.cls.fair.ses[P as usize].recent_used_cpu = 2;
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 2);
}

/// §1.16 wake_affine_idle (sync, waker alone) across LLCs: the wakee is pulled into the waker's
/// LLC even though its prev vCPU (other LLC) is idle; without sync WA_WEIGHT keeps prev.
#[test]
fn sync_wakeup_pulls_across_llcs() {
    let t = llcs(4, 2);
    for (sync, want) in [(true, 1), (false, 2)] {
        let ents = vec![pinned(0, 4, 0), placed_on(1, 4, 2)];
        let mut h = Harness::with_topology(Cfs::sched(CfsParams::default(), &t), t.clone(), ents);
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
    // Make prev heavier: 2048 more PELT load on vCPU 1 (the loads are PELT's load_avg, with
    // the wakee's load taken off its previous vCPU).
    h.sched.cls.fair.rqs[1].pelt.avg.load_avg += 2048;
    wake_from(&mut h, P, 0, false);
    assert_eq!(
        cpu_of(&h, P),
        0,
        "(load(0) + load(P))·100 < (load(1) − load(P))·108"
    );
}

/// §1.16 wake_wide: an M:N waker pattern is not pulled to the waker.
#[test]
fn wake_wide_disables_affine_wakeups() {
    let mut h = sis_setup(&[1, 2, 3], CfsParams::default());
    h.sched.cls.fair.ses[W as usize].wakee_flips = 16;
    h.sched.cls.fair.ses[W as usize].last_wakee = Some(P as usize);
    h.sched.cls.fair.ses[P as usize].wakee_flips = 4; // ≥ llc size 4, and 16 ≥ 4 × 4
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
    assert_eq!(h.sched.cls.fair.ses[0].wakee_flips, 6);
    h.advance(ms(1100));
    wake_from(&mut h, B, 0, false);
    assert_eq!(
        h.sched.cls.fair.ses[0].wakee_flips, 4,
        "6 halved to 3, then +1"
    );
}

/// §1.16: hard affinity always wins.
#[test]
fn affinity_is_respected() {
    let mut h = sis_setup(&[3], CfsParams::default());
    h.sched.cls.fair.ses[P as usize].allowed = CpuSet::single(CpuId(3));
    h.sched.cls.fair.ses[P as usize].cpu = 3;
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
    h.cpus[1].backing = RunState::Runnable;
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 1);
    let p = CfsParams {
        vcpu_is_preempted: true,
        ..Default::default()
    };
    let mut h = sis_setup(&[], p);
    h.cpus[1].executing = false;
    h.cpus[1].backing = RunState::Runnable;
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 2);
}

/// x86 `vcpu_is_preempted` reads "runnable, not running" (Xen `xen_vcpu_stolen`): an idle vCPU
/// the host has halted (blocked) or parked (offline) is not preempted, so it still counts as
/// idle with the option on.
#[test]
fn halted_vcpu_is_not_preempted() {
    for state in [RunState::Blocked, RunState::Offline] {
        let p = CfsParams {
            vcpu_is_preempted: true,
            ..Default::default()
        };
        let mut h = sis_setup(&[], p);
        h.cpus[1].executing = false;
        h.cpus[1].backing = state;
        wake_from(&mut h, P, 0, true);
        assert_eq!(cpu_of(&h, P), 1, "a {state:?} vCPU is idle, not preempted");
    }
}

/// §1.16 recent_used_cpu: the waker's vCPU is remembered and tried before the scan.
#[test]
fn recent_used_cpu_is_tried_before_the_scan() {
    let mut h = sis_setup(&[1], CfsParams::default());
    h.sched.cls.fair.ses[P as usize].recent_used_cpu = 3;
    h.sched.cls.fair.ses[W as usize].recent_used_cpu = 2;
    wake_from(&mut h, P, 0, true);
    assert_eq!(cpu_of(&h, P), 3, "recent vCPU 3 beats the scan's vCPU 2");
    assert_eq!(
        h.sched.cls.fair.ses[P as usize].recent_used_cpu, 1,
        "prev remembered instead"
    );
    assert_eq!(
        h.sched.cls.fair.ses[W as usize].recent_used_cpu, 0,
        "waker records its vCPU"
    );
}

/// §1.16: a vCPU running only SCHED_IDLE tasks counts as idle for placement.
#[test]
fn sched_idle_cpu_counts_as_idle() {
    let mut ents = vec![pinned(0, 2, 0), placed_on(1, 2, 0)];
    let mut bg = pinned(2, 2, 1);
    bg.linux.policy = Policy::Idle;
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
    let t = smt_pairs(4);
    let ents = vec![pinned(0, 4, 0), placed_on(1, 4, 0)];
    let mut h = Harness::with_topology(Cfs::sched(CfsParams::default(), &t), t, ents);
    assert!(h.sched.cls.fair.smt);
    start(&mut h, A);
    // B's prev (0) is busy; vCPU 1 is idle but its core is busy; core 1 (vCPUs 2, 3) is idle.
    wake_from(&mut h, B, 0, false);
    assert_eq!(cpu_of(&h, B), 2);
}
