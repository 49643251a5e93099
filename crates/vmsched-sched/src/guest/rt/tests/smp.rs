//! §3.2 SMP: wake placement (`select_task_rq_rt`), push and pull.
use super::*;

/// A waking RT task whose previous CPU runs a higher RT task goes to the CPU at the lowest
/// level (one running a fair task rather than one running a lower RT task).
#[test]
fn wake_placement_finds_the_lowest_cpu() {
    // CPU 0: FIFO 50 (task 0); CPU 1: FIFO 5 (task 1); CPU 2: a fair task (task 2).
    let ents = vec![
        fifo(pinned(0, 3, 0), 50),
        fifo(pinned(1, 3, 1), 5),
        pinned(2, 3, 2),
        fifo(params(3, 3), 20),
    ];
    let mut h = harness(3, ents);
    for e in 0..3 {
        wake(&mut h, e);
    }
    h.pump();
    assert_eq!((h.curr(0), h.curr(1)), (Some(0), Some(1)));
    // Task 3 last ran on CPU 0.
    h.sched.cls.rt.tasks[3].cpu = CpuId(0);
    wake(&mut h, 3);
    h.pump();
    assert_eq!(
        h.curr(2),
        Some(3),
        "placed on the CPU running only fair work"
    );
    assert_eq!(h.curr(1), Some(1));
}

/// A waking task stays on its previous CPU when that CPU's current RT task ranks below it (it
/// preempts there); the preempted task is then pushed to the idle CPU.
#[test]
fn wake_placement_stays_when_it_preempts() {
    let ents = vec![fifo(params(0, 2), 5), fifo(params(1, 2), 20)];
    let mut h = harness(2, ents);
    h.sched.cls.rt.tasks[0].cpu = CpuId(0);
    h.sched.cls.rt.tasks[1].cpu = CpuId(0);
    wake(&mut h, 0);
    h.pump();
    assert_eq!(h.curr(0), Some(0));
    wake(&mut h, 1);
    h.pump();
    assert_eq!(h.curr(0), Some(1));
    assert_eq!(
        h.curr(1),
        Some(0),
        "the preempted task was pushed to the idle CPU"
    );
}

/// Push: a movable task that cannot preempt where it wakes is pushed to a CPU where it runs.
#[test]
fn a_queued_task_is_pushed_to_a_lower_cpu() {
    let ents = vec![fifo(pinned(0, 2, 0), 50), fifo(params(1, 2), 10)];
    let mut h = harness(2, ents);
    wake(&mut h, 0);
    h.pump();
    h.sched.cls.rt.tasks[1].cpu = CpuId(0);
    wake(&mut h, 1);
    h.pump();
    assert_eq!((h.curr(0), h.curr(1)), (Some(0), Some(1)));
}

/// Pull: when a CPU's RT task blocks, it pulls the highest queued RT task from a CPU with
/// more than one.
#[test]
fn a_cpu_whose_rt_task_blocks_pulls() {
    // CPU 0 runs FIFO 50 with FIFO 20 queued behind it; CPU 1 runs FIFO 40 (pinned).
    let ents = vec![
        fifo(pinned(0, 2, 0), 50),
        fifo(params(1, 2), 20),
        fifo(pinned(2, 2, 1), 40),
    ];
    let mut h = harness(2, ents);
    wake(&mut h, 0);
    wake(&mut h, 2);
    h.pump();
    // Queue task 1 on CPU 0 behind task 0 without placement (as if it arrived while CPU 1
    // ran something higher).
    h.sched.cls.rt.tasks[1].cpu = CpuId(0);
    h.ents[1].runnable = true;
    {
        let mut req = Vec::new();
        let mut ctx =
            vmsched_core::sched::SchedCtx::new(h.now, h.clock, &h.cpus, &h.ents, &mut req);
        let mut lx = LinuxCtx::new(&mut ctx, &mut h.sched.rq);
        h.sched.cls.rt.enqueue(&mut lx, 0, EntityId(1), false);
    }
    assert_eq!(h.curr(0), Some(0));
    h.block(2);
    assert_eq!(h.curr(1), Some(1), "CPU 1 pulled the waiting task");
}

/// §3.1 across CPUs: RT tasks woken on one CPU end up running on every CPU before any fair
/// task runs.
#[test]
fn rt_tasks_spread_before_fair_runs() {
    let ents = vec![
        params(0, 2),
        params(1, 2),
        fifo(params(2, 2), 10),
        fifo(params(3, 2), 10),
    ];
    let mut h = harness(2, ents);
    fork(&mut h, 0);
    fork(&mut h, 1);
    h.pump();
    h.run_for(ms(10), ms(1));
    h.sched.cls.rt.tasks[2].cpu = CpuId(0);
    h.sched.cls.rt.tasks[3].cpu = CpuId(0);
    wake(&mut h, 2);
    wake(&mut h, 3);
    h.pump();
    let mut on: Vec<_> = [h.curr(0), h.curr(1)].into_iter().flatten().collect();
    on.sort();
    assert_eq!(on, [2, 3]);
}
