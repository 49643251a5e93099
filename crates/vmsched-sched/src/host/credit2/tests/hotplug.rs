//! CPU hot-plug (xen-schedulers.md §1, cpupools; Xen 4.20 `csched2_deinit_pdata`,
//! `csched2_free_pdata`, `cpu_add_to_runqueue`, `init_cpu_runqueue`, and the core's
//! `cpu_disable_scheduler`): runqueue membership, freed and reused runqueues, the runqueue load
//! and where the vCPUs of an offlined pCPU go. The harness takes a CPU offline as the engine
//! does (`Harness::cpu_offline`).

use super::*;
use vmsched_core::testkit::sockets;

/// Two sockets of two cores: runqueue 0 = CPUs 0, 1; runqueue 1 = CPUs 2, 3.
fn two_sockets(n: usize) -> Harness<Credit2Sched> {
    harness(
        Credit2Params::default(),
        sockets(2, 2),
        (0..n).map(|i| params(i, 4)).collect(),
    )
}

fn busy(h: &mut Harness<Credit2Sched>, n: u32) {
    for e in 0..n {
        wake(h, e);
        h.pump();
    }
    h.run_for(50 * ms(1), us(100));
}

/// Runnable vCPUs (running or queued) counted by the live runqueues' `load`.
fn total_load(h: &Harness<Credit2Sched>) -> i64 {
    let o = &h.sched.ops;
    (0..o.rqs.len())
        .filter(|&r| o.rq_live(r))
        .map(|r| o.rqs[r].load)
        .sum()
}

#[test]
fn an_offlined_cpu_leaves_its_runqueue_masks() {
    let mut h = flat_harness(Credit2Params::default(), 4, 2);
    busy(&mut h, 2);
    assert_eq!(h.sched.ops.nr_runqueues(), 1);
    h.cpu_offline(3);
    let o = &h.sched.ops;
    let rq = &o.rqs[0];
    let c3 = CpuId(3);
    assert!(!rq.active.contains(c3) && !rq.idle.contains(c3));
    assert!(!rq.smt_idle.contains(c3) && !rq.tickled.contains(c3));
    assert!(!o.online.contains(c3));
    assert_eq!(rq.nr_cpus, 3);
    assert_eq!(rq.active.len(), 3);
    for c in 0..3 {
        assert!(!o.sibling_mask[c].contains(c3));
    }
    // No vCPU is left assigned to the CPU, and their cached affinity excludes it.
    for u in &o.units {
        assert_ne!(u.processor, c3);
        assert!(!u.hard.contains(c3));
    }
}

#[test]
fn a_runqueue_left_without_cpus_is_freed_and_its_index_reused() {
    let mut h = two_sockets(4);
    busy(&mut h, 4);
    assert_eq!(h.sched.ops.nr_runqueues(), 2);
    assert!(!h.sched.ops.rqs[1].svc.is_empty());
    h.cpu_offline(2);
    h.cpu_offline(3);
    let o = &h.sched.ops;
    assert!(!o.rq_live(1), "runqueue 1 has no CPU left");
    assert!(o.rqs[1].svc.is_empty() && o.rqs[1].runq.is_empty());
    assert_eq!(
        o.rqs[0].svc.len(),
        4,
        "every vCPU now belongs to runqueue 0"
    );
    assert_eq!(total_load(&h), 4, "four busy vCPUs, all counted once");
    // The first CPU back matches no live runqueue (another socket): a new one, with the first
    // free index; its sibling joins it.
    h.cpu_online(3);
    assert_eq!(h.sched.ops.runqueue_of(CpuId(3)), 1);
    assert!(h.sched.ops.rq_live(1));
    assert_eq!(h.sched.ops.rqs[1].pick_bias, CpuId(3));
    h.cpu_online(2);
    assert_eq!(h.sched.ops.runqueue_of(CpuId(2)), 1);
    assert_eq!(h.sched.ops.rqs[1].nr_cpus, 2);
    assert_eq!(h.sched.ops.nr_runqueues(), 2, "no runqueue was added");
    // The load balancer spreads the vCPUs again: both runqueues get work.
    h.run_for(500 * ms(1), us(100));
    assert!(
        !h.sched.ops.rqs[1].svc.is_empty(),
        "runqueue 1 in use again"
    );
    assert_eq!(total_load(&h), 4);
}

#[test]
fn the_vcpus_of_an_offlined_cpu_move_and_the_load_follows() {
    // One runqueue, two CPUs, three busy vCPUs: one runs on each CPU, one is queued.
    let mut h = flat_harness(Credit2Params::default(), 2, 3);
    busy(&mut h, 3);
    let on1 = h.curr(1).expect("CPU 1 busy");
    assert_eq!(total_load(&h), 3);
    h.cpu_offline(1);
    let o = &h.sched.ops;
    for e in 0..3 {
        assert_eq!(o.units[e].processor, CpuId(0), "vCPU {e} moved to CPU 0");
    }
    assert_eq!(total_load(&h), 3, "still three runnable vCPUs");
    let mut q = runq(&h, 0);
    q.sort();
    let mut want: Vec<u32> = (0..3).filter(|&e| Some(e) != h.curr(0)).collect();
    want.sort();
    assert_eq!(q, want, "the two not running are queued");
    assert!(
        q.contains(&on1),
        "the vCPU that ran on CPU 1 is queued after its migration"
    );
    // They share CPU 0 from now on.
    let before = h.run_ns.clone();
    h.run_for(300 * ms(1), us(100));
    for e in 0..3 {
        assert!(
            h.run_ns[e] - before[e] > 50 * ms(1) as u64,
            "{:?}",
            h.run_ns
        );
    }
}

#[test]
fn a_cpu_coming_online_reschedules_and_takes_queued_work() {
    let mut h = flat_harness(Credit2Params::default(), 2, 2);
    busy(&mut h, 2);
    h.cpu_offline(1);
    h.run_for(20 * ms(1), us(100));
    assert_eq!(h.curr(1), None);
    // Upstream raises SCHEDULE_SOFTIRQ on the new CPU: it picks the queued vCPU at once,
    // before anything else happens.
    h.cpu_online(1);
    assert!(h.curr(1).is_some(), "CPU 1 took the queued vCPU");
    assert!(h.curr(0).is_some());
}
