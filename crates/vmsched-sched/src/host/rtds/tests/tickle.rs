//! Wake and tickle (§4.7, §4.8).

use super::*;

/// §4.8 step 1: the first idle CPU, scanning from the vCPU's own CPU in cycle order, is
/// tickled, and a tickled CPU is not tickled again before it reschedules.
#[test]
fn idle_cpu_scanned_from_own_cpu_is_tickled() {
    let mut ents: Vec<EntityParams> = (0..3).map(|i| rt(i, 4, 4000, 10_000, true)).collect();
    for p in &mut ents {
        p.initial_cpu = CpuId(2);
    }
    let mut h = harness(4, ents);
    wake(&mut h, 0);
    assert_eq!(h.take_resched(), vec![2]);
    wake(&mut h, 1);
    assert_eq!(
        h.take_resched(),
        vec![3],
        "CPU 2 is tickled: the next in cycle order"
    );
    wake(&mut h, 2);
    assert_eq!(h.take_resched(), vec![0], "wraps around");
}

/// §4.8 step 2: with every CPU busy the one running the lowest-priority vCPU (latest
/// deadline) is tickled if the woken vCPU strictly beats it; otherwise nothing is.
#[test]
fn busy_cpus_the_latest_deadline_is_preempted() {
    let ents = vec![
        rt_on(0, 2, 0, 4000, 8_000, true),
        rt_on(1, 2, 1, 4000, 12_000, true),
        rt(2, 2, 4000, 10_000, true),
        rt(3, 2, 4000, 20_000, true),
    ];
    let mut h = harness(2, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    assert_eq!((h.curr(0), h.curr(1)), (Some(0), Some(1)));
    // Deadline 10 ms beats CPU 1's 12 ms (the latest), not CPU 0's 8 ms.
    wake(&mut h, 2);
    assert_eq!(h.take_resched(), vec![1]);
    h.schedule(1);
    h.pump();
    assert_eq!(h.curr(1), Some(2));
    // Deadline 20 ms beats nobody: no tickle.
    wake(&mut h, 3);
    assert!(h.take_resched().is_empty());
    assert_eq!(runq(&h), vec![1, 3]);
}

/// §4.8: equal priority never preempts.
#[test]
fn equal_priority_does_not_tickle_a_busy_cpu() {
    let ents = (0..2)
        .map(|i| rt_on(i, 1, 0, 4000, 10_000, false))
        .collect();
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    h.pump();
    wake(&mut h, 1);
    assert!(h.take_resched().is_empty());
}

/// §4.7: waking a running or queued vCPU does nothing; the wake of a vCPU still being
/// switched out (`scheduled`) is deferred to `context_saved`.
#[test]
fn wake_of_a_running_queued_or_scheduled_vcpu() {
    let ents = (0..2)
        .map(|i| rt_on(i, 1, 0, 4000, 10_000, false))
        .collect();
    let mut h = harness(1, ents);
    wake(&mut h, 0);
    wake(&mut h, 1);
    h.pump();
    let before = (runq(&h), replq(&h));
    ops(&mut h, |o, x| o.wake(x, EntityId(0), WakeInfo::default()));
    ops(&mut h, |o, x| o.wake(x, EntityId(1), WakeInfo::default()));
    assert_eq!((runq(&h), replq(&h)), before);
    assert!(h.take_resched().is_empty());
    // Being switched out: queued only at context_saved.
    h.sched.ops.units[1].q = Q::None;
    h.sched.ops.runq.clear();
    h.sched.ops.units[1].scheduled = true;
    ops(&mut h, |o, x| o.wake(x, EntityId(1), WakeInfo::default()));
    assert!(h.sched.ops.units[1].delayed_runq_add);
    assert!(runq(&h).is_empty());
    ops(&mut h, |o, x| o.context_saved(x, EntityId(1)));
    assert_eq!(runq(&h), vec![1]);
}
