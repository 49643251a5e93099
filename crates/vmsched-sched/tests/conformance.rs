//! The conformance suite every scheduler instantiates (`host_conformance!`, `guest_conformance!`).
//!
//! Each test drives one level through `vmsched_core::testkit::Harness`, which also asserts on
//! every pick that the entity is runnable, inside its hard affinity and not running elsewhere.

use vmsched_core::testkit::{flat, params, pinned_to, Harness};
use vmsched_core::{CpuId, Scheduler, WakeCause, WakeInfo, NS_PER_MS, NS_PER_S};

/// A lone entity gets its CPU at once and keeps it.
fn lone_entity_runs<S: Scheduler>(s: S) {
    let mut h = Harness::new(s, 1, vec![params(0, 1)]);
    h.wake(0, WakeInfo::of(WakeCause::Fork));
    h.pump();
    assert_eq!(h.curr(0), Some(0), "a lone runnable entity must be running");
    h.run_for(NS_PER_S, NS_PER_MS);
    assert_eq!(h.curr(0), Some(0));
    assert!(h.run_ns[0] >= NS_PER_S, "ran {} ns of 1 s", h.run_ns[0]);
}

/// N entities sharing one CPU all make progress.
fn n_entities_one_cpu_all_progress<S: Scheduler>(s: S, ncpus: usize) {
    let n = 3;
    let ents = (0..n).map(|i| pinned_to(params(i, ncpus), 0)).collect();
    let mut h = Harness::new(s, ncpus, ents);
    for e in 0..n as u32 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h.run_for(3 * NS_PER_S, 100_000);
    let total: u64 = h.run_ns.iter().sum();
    assert!(
        total >= 3 * NS_PER_S - NS_PER_MS,
        "the CPU idled with work queued: {total}"
    );
    for (i, r) in h.run_ns.iter().enumerate() {
        assert!(
            *r > 3 * NS_PER_S / 10,
            "entity {i} got only {r} ns of 3 s: {:?}",
            h.run_ns
        );
    }
}

/// An idle CPU takes a waking entity when the entity's own CPU is busy.
fn idle_cpu_takes_waking_entity<S: Scheduler>(s: S) {
    // Both entities start on CPU 0.
    let mut p1 = params(1, 2);
    p1.initial_cpu = CpuId(0);
    let mut h = Harness::new(s, 2, vec![params(0, 2), p1]);
    h.wake(0, WakeInfo::of(WakeCause::Fork));
    h.pump();
    h.run_for(10 * NS_PER_MS, NS_PER_MS);
    let c0 = (0..2)
        .find(|c| h.curr(*c) == Some(0))
        .expect("entity 0 runs");
    h.wake(
        1,
        WakeInfo {
            waker_cpu: Some(CpuId(c0)),
            ..Default::default()
        },
    );
    h.pump();
    h.run_for(5 * NS_PER_MS, NS_PER_MS / 10);
    assert!(
        h.curr(0).is_some() && h.curr(1).is_some(),
        "both entities should run on the two CPUs: {:?} {:?}",
        h.curr(0),
        h.curr(1)
    );
}

/// Hard affinity holds (the harness asserts it on every pick) even under pressure.
fn affinity_holds<S: Scheduler>(s: S) {
    let ents = (0..4)
        .map(|i| pinned_to(params(i, 4), (i % 2) as u32 + 2))
        .collect();
    let mut h = Harness::new(s, 4, ents);
    for e in 0..4 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h.run_for(NS_PER_S, 100_000);
    assert_eq!(h.curr(0), None);
    assert_eq!(h.curr(1), None);
    for (i, r) in h.run_ns.iter().enumerate() {
        assert!(*r > NS_PER_S / 4, "entity {i}: {r}");
    }
}

/// Work conservation: as many CPUs busy as there are runnable entities (up to the CPU count).
fn work_conserving<S: Scheduler>(s: S) {
    let ents = (0..3).map(|i| params(i, 4)).collect();
    let mut h = Harness::new(s, 4, ents);
    for e in 0..3 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h.run_for(200 * NS_PER_MS, 100_000);
    let busy = (0..4).filter(|c| h.curr(*c).is_some()).count();
    assert_eq!(busy, 3, "3 runnable entities on 4 CPUs must occupy 3 CPUs");
}

/// Two CPU-bound entities on one CPU for `ms` of simulated time: their CPU time in that window.
fn window<S: Scheduler>(h: &mut Harness<S>, ms: u64) -> (u64, u64) {
    let before = (h.run_ns[0], h.run_ns[1]);
    h.run_for(ms * NS_PER_MS, 100_000);
    (h.run_ns[0] - before.0, h.run_ns[1] - before.1)
}

fn two_on_one_cpu<S: Scheduler>(s: S) -> Harness<S> {
    let ents = (0..2).map(|i| pinned_to(params(i, 1), 0)).collect();
    let mut h = Harness::new(s, 1, ents);
    for e in 0..2 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h
}

/// Parameter change (host): raising one entity's weight (its group's, `adjust`) moves the
/// shares after the change, not before.
fn weight_change_moves_shares<S: Scheduler>(s: S) {
    let mut h = two_on_one_cpu(s);
    h.run_for(200 * NS_PER_MS, 100_000);
    let (a, b) = window(&mut h, 1000);
    let before = a as f64 / b as f64;
    h.ents[0].params.xen.weight = 768;
    h.adjust(0);
    h.pump();
    h.run_for(200 * NS_PER_MS, 100_000);
    let (a, b) = window(&mut h, 2000);
    let after = a as f64 / b as f64;
    assert!((0.8..1.25).contains(&before), "equal weights: {before}");
    assert!((2.4..3.6).contains(&after), "weights 768:256: {after}");
}

/// Parameter change (guest): a nice change (`prio_changed`) moves the shares after it.
fn nice_change_moves_shares<S: Scheduler>(s: S) {
    let mut h = two_on_one_cpu(s);
    h.run_for(200 * NS_PER_MS, 100_000);
    let (a, b) = window(&mut h, 1000);
    let before = a as f64 / b as f64;
    h.ents[1].params.linux.nice = 5;
    h.prio_changed(1);
    h.pump();
    h.run_for(200 * NS_PER_MS, 100_000);
    let (a, b) = window(&mut h, 2000);
    let after = a as f64 / b as f64;
    assert!((0.85..1.18).contains(&before), "nice 0:0: {before}");
    assert!((2.6..3.5).contains(&after), "nice 0:5 (1024:335): {after}");
}

/// Pause (host): a paused entity leaves its CPU at once, is reported paused, gets no CPU while
/// paused, and runs again after the unpause.
fn paused_entity_gets_no_cpu<S: Scheduler>(s: S) {
    let mut h = two_on_one_cpu(s);
    h.run_for(100 * NS_PER_MS, 100_000);
    for e in 0..2 {
        h.set_paused(e, true);
        h.pump();
        assert!(h.paused[e as usize], "entity {e} was not reported paused");
        assert_ne!(h.curr(0), Some(e), "paused entity {e} still runs");
        let (a, b) = window(&mut h, 500);
        let mine = if e == 0 { a } else { b };
        assert_eq!(mine, 0, "paused entity {e} got CPU time");
        assert_eq!(a + b, 500 * NS_PER_MS, "the other entity must have the CPU");
        h.set_paused(e, false);
        h.pump();
        assert!(!h.paused[e as usize]);
        let (a, b) = window(&mut h, 500);
        assert!(a > 0 && b > 0, "both run after the unpause: {a} {b}");
    }
}

/// Removal: of three CPU-bound entities on one CPU, the one removed (`remove`, after it was
/// taken off its CPU: paused at a host level, blocked at a guest level) never runs again, and
/// the other two share the CPU.
fn removed_entity_never_runs<S: Scheduler>(s: S, host: bool) {
    let ents = (0..3).map(|i| pinned_to(params(i, 1), 0)).collect();
    let mut h = Harness::new(s, 1, ents);
    for e in 0..3 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h.run_for(100 * NS_PER_MS, 100_000);
    let x = h.curr(0).expect("the CPU runs someone");
    if host {
        h.set_paused(x, true);
        h.pump();
    } else {
        h.block(x);
        h.pump();
    }
    assert_ne!(h.curr(0), Some(x));
    h.remove(x);
    h.pump();
    let before = h.run_ns.clone();
    h.run_for(NS_PER_S, 100_000);
    let got: Vec<u64> = (0..3).map(|i| h.run_ns[i] - before[i]).collect();
    assert_eq!(got[x as usize], 0, "the removed entity ran: {got:?}");
    assert_eq!(got.iter().sum::<u64>(), NS_PER_S, "the CPU idled: {got:?}");
    for (i, g) in got.iter().enumerate() {
        if i != x as usize {
            assert!(*g > NS_PER_S / 4, "entity {i} starved: {got:?}");
        }
    }
}

macro_rules! common_conformance {
    ($name:ident, $ctor:expr, { $($extra:item)* }) => {
        mod $name {
            use super::*;
            $($extra)*
            #[test]
            fn lone_entity_runs() {
                super::lone_entity_runs($ctor(1));
            }
            #[test]
            fn n_entities_one_cpu_all_progress() {
                super::n_entities_one_cpu_all_progress($ctor(2), 2);
            }
            #[test]
            fn idle_cpu_takes_waking_entity() {
                super::idle_cpu_takes_waking_entity($ctor(2));
            }
            #[test]
            fn affinity_holds() {
                super::affinity_holds($ctor(4));
            }
            #[test]
            fn work_conserving() {
                super::work_conserving($ctor(4));
            }
        }
    };
}

macro_rules! host_conformance {
    ($name:ident, $ctor:expr) => {
        common_conformance!($name, $ctor, {
            #[test]
            fn weight_change_moves_shares() {
                super::weight_change_moves_shares($ctor(1));
            }
            #[test]
            fn paused_entity_gets_no_cpu() {
                super::paused_entity_gets_no_cpu($ctor(1));
            }
            #[test]
            fn removed_entity_never_runs() {
                super::removed_entity_never_runs($ctor(1), true);
            }
        });
    };
}

macro_rules! guest_conformance {
    ($name:ident, $ctor:expr) => {
        common_conformance!($name, $ctor, {
            #[test]
            fn nice_change_moves_shares() {
                super::nice_change_moves_shares($ctor(1));
            }
            #[test]
            fn removed_entity_never_runs() {
                super::removed_entity_never_runs($ctor(1), false);
            }
        });
    };
}

fn credit2(n: usize) -> vmsched_sched::host::credit2::Credit2Sched {
    let topo = vec![Default::default(); n];
    vmsched_sched::host::credit2::Credit2::sched(Default::default(), &topo, 4)
}

fn cfs(n: usize) -> vmsched_sched::guest::cfs::CfsSched {
    vmsched_sched::guest::cfs::Cfs::sched(Default::default(), &flat(n))
}

host_conformance!(credit2_host, credit2);
guest_conformance!(cfs_guest, cfs);

mod pinned_host {
    #[test]
    fn lone_entity_runs() {
        super::lone_entity_runs(vmsched_sched::host::pinned::Pinned::new(1));
    }
}
