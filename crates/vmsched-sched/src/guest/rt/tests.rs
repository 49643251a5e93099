//! Unit tests of the RT class (SCHED_FIFO, SCHED_RR) under CFS in the Linux core: one test per
//! rule of `linux-schedulers.md` §3 (section numbers in the doc comments), driven through the
//! engine's test [`Harness`].

use super::*;
use crate::guest::cfs::{Cfs, CfsParams, CfsSched};
use crate::guest::linux_core::ClassId;
use vmsched_core::sched::{EntityParams, WakeCause};
use vmsched_core::testkit::{flat, params, pinned, Harness};
use vmsched_core::time::ms;

mod bandwidth;
mod fair_server;
mod props;
mod smp;

fn harness_with(p: CfsParams, n: usize, ents: Vec<EntityParams>) -> Harness<CfsSched> {
    let t = flat(n);
    Harness::with_topology(Cfs::sched(p, &t), t, ents)
}

fn harness(n: usize, ents: Vec<EntityParams>) -> Harness<CfsSched> {
    harness_with(CfsParams::default(), n, ents)
}

/// A task of `policy` at user priority `prio`.
fn rt(mut p: EntityParams, policy: Policy, prio: u32) -> EntityParams {
    p.linux.policy = policy;
    p.linux.rt_priority = prio;
    p
}

fn fifo(p: EntityParams, prio: u32) -> EntityParams {
    rt(p, Policy::Fifo, prio)
}

fn rr(p: EntityParams, prio: u32) -> EntityParams {
    rt(p, Policy::Rr, prio)
}

fn wake(h: &mut Harness<CfsSched>, e: u32) {
    h.wake(e, WakeInfo::default());
}

fn fork(h: &mut Harness<CfsSched>, e: u32) {
    h.wake(e, WakeInfo::of(WakeCause::Fork));
}

/// §3.1: SCHED_FIFO and SCHED_RR tasks belong to the RT class, the others to CFS.
#[test]
fn policies_choose_the_class() {
    let h = harness(
        1,
        vec![
            params(0, 1),
            fifo(params(1, 1), 10),
            rr(params(2, 1), 10),
            rt(params(3, 1), Policy::Batch, 0),
        ],
    );
    let k: Vec<ClassId> = (0..4).map(|e| h.sched.class_of(EntityId(e))).collect();
    assert_eq!(k, [ClassId::Fair, ClassId::Rt, ClassId::Rt, ClassId::Fair]);
    assert_eq!(
        h.sched.cls.rt.prio(EntityId(1)),
        89,
        "prio = 99 − rt_priority"
    );
}

/// §3.1: the pick is the head of the highest non-empty priority list, whatever the order of
/// arrival.
#[test]
fn the_highest_priority_runs_first() {
    let prios = [5, 50, 99, 1, 50];
    let ents = (0..5).map(|i| fifo(params(i, 1), prios[i])).collect();
    let mut h = harness(1, ents);
    for e in 0..5 {
        wake(&mut h, e);
    }
    h.pump();
    let mut order = Vec::new();
    while let Some(c) = h.curr(0) {
        order.push(c);
        h.block(c);
    }
    // 99 first, then the two 50s in arrival order, then 5, then 1.
    assert_eq!(order, [2, 1, 4, 0, 3]);
}

/// §3.2: a FIFO task has no slice: ticks never take the CPU from it, even with another FIFO
/// task of its priority waiting.
#[test]
fn fifo_runs_without_a_slice() {
    let mut h = harness(1, vec![fifo(params(0, 1), 10), fifo(params(1, 1), 10)]);
    wake(&mut h, 0);
    h.pump();
    wake(&mut h, 1);
    h.run_for(ms(500), ms(1));
    assert_eq!(h.curr(0), Some(0));
    assert_eq!(h.run_ns[1], 0, "the equal-priority FIFO task never ran");
}

/// §3.2: an RR task runs `sched_rr_timeslice` (100 ms = 25 ticks at HZ 250), then goes to the
/// tail behind its equal-priority peer; the two alternate every slice.
#[test]
fn rr_slice_expiry_requeues_at_the_tail() {
    let mut h = harness(1, vec![rr(params(0, 1), 10), rr(params(1, 1), 10)]);
    assert_eq!(h.sched.cls.rt.rr_timeslice_ticks(), 25);
    wake(&mut h, 0);
    h.pump();
    wake(&mut h, 1);
    h.run_for(ms(99), ms(1));
    assert_eq!(h.curr(0), Some(0), "still within the first slice");
    h.run_for(ms(2), ms(1));
    assert_eq!(h.curr(0), Some(1), "the peer runs after 100 ms");
    h.run_for(ms(100), ms(1));
    assert_eq!(h.curr(0), Some(0), "and back after another slice");
    assert!(
        (ms(100)..=ms(102)).contains(&h.run_ns[0]),
        "{}",
        h.run_ns[0]
    );
    assert!((ms(99)..=ms(101)).contains(&h.run_ns[1]), "{}", h.run_ns[1]);
}

/// §3.2: an RR task alone at its priority keeps running when its slice ends (the slice is
/// refilled, no reschedule), and a lower-priority RR task does not get a turn.
#[test]
fn rr_alone_at_its_priority_keeps_the_cpu() {
    let mut h = harness(1, vec![rr(params(0, 1), 20), rr(params(1, 1), 10)]);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    h.run_for(ms(400), ms(1));
    assert_eq!(h.curr(0), Some(0));
    assert_eq!(h.run_ns[1], 0);
}

/// §3.2: sched_yield moves an RT task to the tail of its list: its equal-priority peer runs.
#[test]
fn yield_moves_to_the_tail() {
    let mut h = harness(1, vec![fifo(params(0, 1), 10), fifo(params(1, 1), 10)]);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    h.yield_(0);
    assert_eq!(h.curr(0), Some(1));
    h.yield_(1);
    assert_eq!(h.curr(0), Some(0));
}

/// §3.2: a waking task of strictly higher priority preempts; an equal one (on a single CPU,
/// where neither could run elsewhere) does not; a preempted task keeps its place at the head.
#[test]
fn higher_priority_preempts_equal_does_not() {
    let ents = vec![
        fifo(params(0, 1), 10),
        fifo(params(1, 1), 10),
        fifo(params(2, 1), 30),
    ];
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    h.pump();
    h.advance(ms(1));
    wake(&mut h, 1);
    assert!(
        h.take_resched().is_empty(),
        "equal priority does not preempt"
    );
    wake(&mut h, 2);
    assert_eq!(h.take_resched(), vec![0], "higher priority preempts");
    h.schedule(0);
    assert_eq!(h.curr(0), Some(2));
    h.block(2);
    assert_eq!(
        h.curr(0),
        Some(0),
        "the preempted task resumes before its peer"
    );
}

/// §3.1: a waking RT task preempts a fair task at once, and the tick of CFS never takes the
/// CPU back while the RT task runs; the fair task runs again when the RT task blocks.
#[test]
fn rt_preempts_fair_at_once() {
    let mut h = harness(1, vec![params(0, 1), fifo(params(1, 1), 1)]);
    fork(&mut h, 0);
    h.pump();
    h.run_for(ms(30), ms(1));
    wake(&mut h, 1);
    assert_eq!(h.take_resched(), vec![0]);
    h.schedule(0);
    assert_eq!(h.curr(0), Some(1));
    let fair = h.run_ns[0];
    h.run_for(ms(200), ms(1));
    assert_eq!(h.run_ns[0], fair, "the fair task waits while RT runs");
    h.block(1);
    assert_eq!(h.curr(0), Some(0));
}

/// ERRATA L7: an equal-priority wake-up preempts when the current task can run elsewhere and
/// the wakee cannot (pinned); the current task is then pushed to the free CPU.
#[test]
fn equal_priority_preempts_when_only_curr_can_move() {
    // CPU 1 runs a fair task: a CPU at the normal level, where the current RT task could go.
    let ents = vec![
        fifo(params(0, 2), 10),
        fifo(pinned(1, 2, 0), 10),
        pinned(2, 2, 1),
    ];
    let mut h = harness(2, ents);
    h.ents[0].params.initial_cpu = CpuId(0);
    fork(&mut h, 2);
    h.pump();
    assert_eq!(h.curr(1), Some(2));
    h.sched.cls.rt.tasks[0].cpu = CpuId(0);
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    wake(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(1), "the pinned wakee took CPU 0");
    assert_eq!(h.curr(1), Some(0), "the preempted task was pushed to CPU 1");
}

/// A run-time priority change: a queued task that now outranks the running one preempts it;
/// a running task that drops below a queued one gives the CPU up.
#[test]
fn priority_changes_reorder_and_preempt() {
    let mut h = harness(1, vec![fifo(params(0, 1), 10), fifo(params(1, 1), 5)]);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    h.ents[1].params.linux.rt_priority = 20;
    h.prio_changed(1);
    h.pump();
    assert_eq!(h.curr(0), Some(1), "raised above the running task");
    h.ents[1].params.linux.rt_priority = 1;
    h.prio_changed(1);
    h.pump();
    assert_eq!(h.curr(0), Some(0), "dropped below the queued task");
}

/// Bad sysctls are refused by name.
#[test]
fn bad_parameters_are_refused_by_field() {
    let bad = |f: fn(&mut RtParams)| {
        let mut p = RtParams::default();
        f(&mut p);
        p.validate().unwrap_err()
    };
    assert!(bad(|p| p.sched_rr_timeslice_ms = 0).starts_with("sched_rr_timeslice_ms:"));
    assert!(bad(|p| p.sched_rt_period_us = 0).starts_with("sched_rt_period_us:"));
    assert!(bad(|p| p.sched_rt_runtime_us = 1_000_001).starts_with("sched_rt_runtime_us:"));
    assert!(bad(|p| p.sched_rt_runtime_us = -2).starts_with("sched_rt_runtime_us:"));
    assert_eq!(RtParams::default().validate(), Ok(()));
    let mut c = CfsParams::default();
    c.rt.sched_rr_timeslice_ms = 0;
    assert!(c
        .validate()
        .unwrap_err()
        .starts_with("rt.sched_rr_timeslice_ms:"));
}
