//! Unit tests of the null scheduler, one per rule of xen-schedulers.md §6 (and of
//! `null.c` where the spec is short), plus the conformance cases that a scheduler without time
//! sharing can pass in their null form (a waiting vCPU never runs; a blocked vCPU's CPU idles).

use super::*;
use vmsched_core::cpuset::CpuSet;
use vmsched_core::sched::{EntityParams, SchedCtx, Scheduler};
use vmsched_core::testkit::{params, pinned, placed_on, Harness};
use vmsched_core::time::ms;

fn harness(ncpus: usize, ents: Vec<EntityParams>) -> Harness<NullSched> {
    Harness::new(Null::sched(ncpus), ncpus, ents)
}

fn wake(h: &mut Harness<NullSched>, e: u32) {
    h.wake(e, WakeInfo::default());
}

fn assigned(h: &Harness<NullSched>, cpu: u32) -> Option<u32> {
    h.sched.ops.assigned(CpuId(cpu)).map(|e| e.0)
}

fn waitq(h: &Harness<NullSched>) -> Vec<u32> {
    h.sched.ops.waitq().iter().map(|e| e.0).collect()
}

/// VCPUOP_down / VCPUOP_up of vCPU `e`, as the engine calls it (`Scheduler::set_down`).
fn set_down(h: &mut Harness<NullSched>, e: u32, down: bool) {
    let mut ctx = SchedCtx::new(h.now, h.clock, &h.cpus, &h.ents, &mut h.requests);
    h.sched.set_down(&mut ctx, EntityId(e), down);
}

/// §6 insert: vCPUs take their own CPU when it is free, else the first free CPU of their
/// affinity; beyond the pCPUs they wait in FIFO order.
#[test]
fn insert_assigns_one_to_one_then_queues() {
    // All five start on CPU 1 of 3.
    let ents = (0..5).map(|i| placed_on(i, 3, 1)).collect();
    let h = harness(3, ents);
    assert_eq!(
        (assigned(&h, 0), assigned(&h, 1), assigned(&h, 2)),
        (Some(1), Some(0), Some(2))
    );
    assert_eq!(waitq(&h), vec![3, 4]);
    assert!(h.sched.ops.cpus_free.is_empty());
}

/// §6 insert: hard affinity bounds the choice; soft affinity is tried first.
#[test]
fn insert_honours_hard_then_soft_affinity() {
    let mut a = placed_on(0, 4, 0);
    a.hard_affinity = CpuSet::from_ids([2, 3]);
    let mut b = placed_on(1, 4, 0);
    b.soft_affinity = CpuSet::from_ids([3]);
    let mut c = pinned(2, 4, 2);
    c.initial_cpu = CpuId(2);
    let h = harness(4, vec![a, b, c]);
    assert_eq!(
        assigned(&h, 2),
        Some(0),
        "a: first free CPU of its hard affinity"
    );
    assert_eq!(assigned(&h, 3), Some(1), "b: its soft affinity first");
    assert_eq!(waitq(&h), vec![2], "c: pinned to a taken CPU: waits");
}

/// §6 do_schedule: a CPU runs its vCPU with no timer (no time slicing), idles while that vCPU
/// is blocked, and never gives it to a waiting vCPU meanwhile.
#[test]
fn a_cpu_runs_only_its_vcpu_without_a_slice() {
    let ents = (0..2).map(|i| pinned(i, 1, 0)).collect();
    let mut h = harness(1, ents);
    wake(&mut h, 1);
    assert!(
        h.take_resched().is_empty(),
        "a waiting vCPU's wake reschedules nothing"
    );
    wake(&mut h, 0);
    assert_eq!(
        h.take_resched(),
        vec![0],
        "the assigned vCPU's CPU reschedules"
    );
    let pick = h.schedule(0);
    assert_eq!((pick.next, pick.slice), (Some(EntityId(0)), None));
    h.run_for(ms(500), ms(1));
    assert_eq!(h.run_ns[1], 0, "the waiting vCPU never runs");
    assert_eq!(h.run_ns[0], ms(500));
    let pick = h.block(0);
    assert_eq!(pick.next, None, "blocked: its CPU idles");
    h.run_for(ms(100), ms(1));
    assert_eq!(h.run_ns[1], 0);
    assert_eq!(assigned(&h, 0), Some(0));
}

/// §6 yield: no hook; the vCPU keeps its CPU.
#[test]
fn yield_keeps_the_cpu() {
    let mut h = harness(1, vec![params(0, 1)]);
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.yield_(0).next, Some(EntityId(0)));
}

/// Domain pause: the vCPU keeps its CPU (a pause is not going offline), which idles; the
/// unpause reschedules it there.
#[test]
fn a_paused_vcpu_keeps_its_cpu() {
    let ents = (0..2).map(|i| pinned(i, 1, 0)).collect();
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    h.set_paused(0, true);
    h.pump();
    assert_eq!(h.curr(0), None);
    assert_eq!(assigned(&h, 0), Some(0));
    assert_eq!(waitq(&h), vec![1]);
    h.set_paused(0, false);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
}

/// §6 deassign: a vCPU the guest takes down frees its CPU, which goes to the first waiting
/// vCPU whose soft affinity holds it (before an earlier one that only may run there), and
/// reschedules. Coming up again with no free CPU, the vCPU waits at the tail.
#[test]
fn going_down_hands_the_cpu_to_a_waiter_soft_affinity_first() {
    // Waiters 2 (no soft affinity) and 3 (soft affinity CPU 0), in that order.
    let mut ents: Vec<EntityParams> = (0..4).map(|i| params(i, 2)).collect();
    ents[3].soft_affinity = CpuSet::from_ids([0]);
    let mut h = harness(2, ents);
    assert_eq!(waitq(&h), vec![2, 3]);
    for e in 0..4 {
        wake(&mut h, e);
    }
    h.pump();
    set_down(&mut h, 0, true);
    h.pump();
    assert_eq!(assigned(&h, 0), Some(3), "the soft-affine waiter first");
    assert_eq!(h.curr(0), Some(3));
    assert_eq!(waitq(&h), vec![2]);
    set_down(&mut h, 0, false);
    h.pump();
    assert_eq!(waitq(&h), vec![2, 0], "no free CPU: it waits at the tail");
    // vCPU 1 goes down: CPU 1 goes to vCPU 2, the head.
    set_down(&mut h, 1, true);
    h.pump();
    assert_eq!((assigned(&h, 1), h.curr(1)), (Some(2), Some(2)));
    assert_eq!(waitq(&h), vec![0]);
}

/// §6 wake: a vCPU coming up whose CPU is free (and allowed) takes it at once.
#[test]
fn coming_up_takes_its_free_cpu() {
    let mut h = harness(2, vec![params(0, 2), params(1, 2)]);
    wake(&mut h, 0);
    h.pump();
    set_down(&mut h, 0, true);
    h.pump();
    assert_eq!(assigned(&h, 0), None);
    set_down(&mut h, 0, false);
    assert_eq!(assigned(&h, 0), Some(0));
    assert_eq!(h.take_resched(), vec![0]);
}

/// §6 wake: a vCPU coming up whose CPU was taken meanwhile waits and has every free CPU of its
/// affinity reschedule; the first to do so takes it.
#[test]
fn coming_up_without_its_cpu_waits_and_free_cpus_pick_it() {
    let ents = vec![placed_on(0, 3, 0), placed_on(1, 3, 1), placed_on(2, 3, 0)];
    let mut h = harness(3, ents);
    assert_eq!(assigned(&h, 2), Some(2));
    for e in 0..3 {
        wake(&mut h, e);
    }
    h.pump();
    // 0 goes down: CPU 0 is free, and nobody waits for it.
    set_down(&mut h, 0, true);
    h.pump();
    assert_eq!(assigned(&h, 0), None);
    // Move vCPU 0's record to the busy CPU 1 (as after a migration) and bring it up.
    h.sched.ops.units[0].processor = CpuId(1);
    set_down(&mut h, 0, false);
    assert_eq!(waitq(&h), vec![0]);
    assert_eq!(h.take_resched(), vec![0], "every free CPU of its affinity");
    h.schedule(0);
    h.pump();
    assert_eq!((assigned(&h, 0), h.curr(0)), (Some(0), Some(0)));
    assert!(waitq(&h).is_empty());
}

/// Removal (domain destroyed): the CPU goes to the first waiter; a waiter removed leaves the
/// queue.
#[test]
fn removal_frees_the_cpu_for_a_waiter() {
    let ents = (0..3).map(|i| pinned(i, 1, 0)).collect();
    let mut h = harness(1, ents);
    for e in 0..3 {
        wake(&mut h, e);
    }
    h.pump();
    h.set_paused(2, true);
    h.remove(2);
    assert_eq!(waitq(&h), vec![1]);
    h.set_paused(0, true);
    h.pump();
    h.remove(0);
    h.pump();
    assert_eq!((assigned(&h, 0), h.curr(0)), (Some(1), Some(1)));
    assert!(waitq(&h).is_empty());
}

/// CPU hot-plug: a CPU leaving the pool sends its vCPU to a free CPU, or to the waitqueue;
/// a CPU joining takes the first waiting vCPU that may run there.
#[test]
fn cpu_offline_moves_the_vcpu_and_online_takes_a_waiter() {
    let ents = (0..3).map(|i| params(i, 4)).collect();
    let mut h = harness(4, ents);
    for e in 0..3 {
        wake(&mut h, e);
    }
    h.pump();
    assert_eq!(h.curr(2), Some(2));
    h.cpu_offline(2);
    assert_eq!(
        (assigned(&h, 3), h.curr(3)),
        (Some(2), Some(2)),
        "to the free CPU 3"
    );
    h.cpu_offline(3);
    assert_eq!(waitq(&h), vec![2], "no free CPU left: it waits");
    assert_eq!(h.curr(3), None);
    h.cpu_online(2);
    assert_eq!((assigned(&h, 2), h.curr(2)), (Some(2), Some(2)));
    assert!(waitq(&h).is_empty());
}

/// Work conservation within what null promises: as many CPUs busy as runnable vCPUs up to the
/// pCPUs, each vCPU on its own CPU for the whole run.
#[test]
fn each_vcpu_keeps_its_own_cpu() {
    let ents = (0..3).map(|i| params(i, 4)).collect();
    let mut h = harness(4, ents);
    for e in 0..3 {
        wake(&mut h, e);
    }
    h.pump();
    h.run_for(ms(200), ms(1));
    for e in 0..3u32 {
        assert_eq!(h.curr(e), Some(e));
        assert_eq!(h.run_ns[e as usize], ms(200));
    }
    assert_eq!(h.curr(3), None);
}
