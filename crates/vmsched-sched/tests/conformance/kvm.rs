//! The KVM host level: the Linux kernels as `[host] scheduler = "linux"` builds them, under the
//! guest cases plus the hooks only a KVM host answers (run-queue length, directed yield, a
//! change of class at run time).

use vmsched_core::testkit::Harness;
use vmsched_core::{CpuId, Scheduler, WakeCause, WakeInfo, NS_PER_MS};

use vmsched_sched::guest::eevdf::EevdfKernel::{V6_12, V6_18, V6_6};

use crate::cases::*;
use crate::guest::{bfs, bfs_nice_change_moves_shares, cfs, eevdf};

/// KVM host: `nr_running(cpu)` counts the entities runnable there, the running one included
/// (`rq->nr_running`, read by KVM's halt polling as `single_task_running()`).
fn nr_running_counts_runnable_entities<S: Scheduler>(s: S) {
    let ents = vec![
        pinned(0, 2, 0),
        pinned(1, 2, 0),
        pinned(2, 2, 0),
        pinned(3, 2, 1),
    ];
    let mut h = Harness::new(s, 2, ents);
    assert_eq!(h.sched.nr_running(CpuId(0)), Some(0));
    for e in 0..4 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    h.run_for(5 * NS_PER_MS, 100_000);
    assert_eq!(h.sched.nr_running(CpuId(0)), Some(3));
    assert_eq!(h.sched.nr_running(CpuId(1)), Some(1));
    let x = h.curr(0).expect("CPU 0 runs");
    h.block(x);
    h.pump();
    assert_eq!(h.sched.nr_running(CpuId(0)), Some(2));
}

/// KVM host: a directed yield (`yield_to`, from `kvm_vcpu_on_spin`) is refused for a running
/// target (the yielder itself) and accepted for a queued one; the CPU it yields never idles,
/// and the target does get the CPU after some of the yields. (Whether the yielder may be picked
/// again at once is each class's rule: CFS's next buddy within the wakeup granularity, EEVDF's
/// PICK_BUDDY from 6.12 and its yield, L3.)
fn directed_yield_reaches_the_target<S: Scheduler>(s: S) {
    let ents = (0..3).map(|i| pinned(i, 1, 0)).collect();
    let mut h = Harness::new(s, 1, ents);
    for e in 0..3 {
        h.wake(e, WakeInfo::of(WakeCause::Fork));
        h.pump();
    }
    let mut target_ran = 0;
    for _ in 0..20 {
        h.run_for(3 * NS_PER_MS, 100_000);
        let x = h.curr(0).expect("the CPU runs");
        assert_eq!(h.yield_to(x, x), Some(false), "a running target is refused");
        let target = (x + 1) % 3;
        assert_eq!(h.yield_to(x, target), Some(true));
        h.pump();
        let now = h.curr(0).expect("a directed yield idled the CPU");
        target_ran += u32::from(now == target);
    }
    assert!(target_ran > 0, "the target never got the CPU");
}

/// The Linux kernels as KVM hosts, as `[host] scheduler = "linux"` builds them
/// (`KvmHostParams::make`).
fn kvm_cfs(n: usize) -> vmsched_sched::guest::cfs::CfsSched {
    cfs(n).into_kvm_host("linux-cfs")
}

fn kvm_eevdf(
    kernel: vmsched_sched::guest::eevdf::EevdfKernel,
    n: usize,
) -> vmsched_sched::guest::eevdf::EevdfSched {
    eevdf(kernel, n).into_kvm_host("linux-eevdf")
}

linux_host_conformance!(kvm_cfs_host, kvm_cfs);
linux_host_conformance!(kvm_eevdf_6_6_host, |n| kvm_eevdf(V6_6, n));
linux_host_conformance!(kvm_eevdf_6_12_host, |n| kvm_eevdf(V6_12, n));
linux_host_conformance!(kvm_eevdf_6_18_host, |n| kvm_eevdf(V6_18, n));

/// BFS 0.458 as a KVM host (host/kvm.rs): the BFS guest's cases. BFS has no `yield_to` and no
/// per-CPU run-queue length in the model (docs/kvm.md), so the directed-yield and `nr_running`
/// cases do not apply.
mod kvm_bfs_host {
    use super::*;
    fn kvm_bfs(n: usize) -> vmsched_sched::guest::bfs::BfsSched {
        bfs(n).into_kvm_host("linux-bfs")
    }
    common_conformance!(common, kvm_bfs, {});
    #[test]
    fn nice_change_moves_shares() {
        super::bfs_nice_change_moves_shares(kvm_bfs(1));
    }
    conformance_cases!(kvm_bfs, false; deterministic, class_change_takes_effect);
}
