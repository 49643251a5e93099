//! Runqueue arrangement by topology (§3.4, X4) and placement at insertion.

use super::*;
use vmsched_core::testkit::{smt_pairs, sockets};

#[test]
fn arm_topology_is_one_runqueue() {
    let topo = vec![CpuTopo::default(); 8];
    for arr in [
        RunqueueArrangement::Core,
        RunqueueArrangement::Socket,
        RunqueueArrangement::Node,
    ] {
        let s = Credit2::new(
            Credit2Params {
                runqueue: arr,
                ..Default::default()
            },
            &topo,
            1,
        );
        assert_eq!(s.nr_runqueues(), 1, "{arr:?}");
        assert_eq!(s.rqs[0].active, CpuSet::first_n(8));
        assert_eq!(s.sibling_mask[3], CpuSet::single(CpuId(3)), "no SMT on Arm");
    }
}

#[test]
fn sixteen_cpu_cap_splits_evenly() {
    let topo = vec![CpuTopo::default(); 20];
    let s = Credit2::new(Credit2Params::default(), &topo, 1);
    assert_eq!(s.nr_runqueues(), 2);
    assert_eq!(s.rqs[0].active, CpuSet::first_n(10));
    assert_eq!(s.rqs[1].active, CpuSet::from_ids(10..20));
    let s = Credit2::new(Credit2Params::default(), &vec![CpuTopo::default(); 16], 1);
    assert_eq!(s.nr_runqueues(), 1);
}

#[test]
fn cpu_arrangement_is_one_runqueue_per_cpu_and_socket_splits_sockets() {
    let s = Credit2::new(
        Credit2Params {
            runqueue: RunqueueArrangement::Cpu,
            ..Default::default()
        },
        &flat(4),
        1,
    );
    assert_eq!(s.nr_runqueues(), 4);
    assert_eq!(
        (0..4).map(|c| s.runqueue_of(CpuId(c))).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    let topo = sockets(2, 4);
    let s = Credit2::new(Credit2Params::default(), &topo, 1);
    assert_eq!(s.nr_runqueues(), 2);
    assert_eq!(s.rqs[1].active, CpuSet::from_ids(4..8));
    // core arrangement with SMT pairs: siblings share a runqueue.
    let topo = smt_pairs(4);
    let s = Credit2::new(
        Credit2Params {
            runqueue: RunqueueArrangement::Core,
            ..Default::default()
        },
        &topo,
        1,
    );
    assert_eq!(s.nr_runqueues(), 2);
    assert_eq!(s.rqs[0].active, CpuSet::from_ids([0, 1]));
    let s = Credit2::new(
        Credit2Params {
            runqueue: RunqueueArrangement::All,
            ..Default::default()
        },
        &topo,
        1,
    );
    assert_eq!(s.nr_runqueues(), 1);
}

#[test]
fn insert_picks_the_least_loaded_runqueue() {
    let p = Credit2Params {
        runqueue: RunqueueArrangement::Cpu,
        ..Default::default()
    };
    let h = flat_harness(p, 2, 4);
    let rqs: Vec<usize> = (0..4).map(|e| h.sched.ops.units[e].rq).collect();
    assert_eq!(rqs, vec![0, 1, 0, 1], "each insert adds 0.5 to b_avgload");
    assert_eq!(h.sched.ops.rqs[0].b_avgload, 1 << 18);
}
