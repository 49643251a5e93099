//! RT_RUNTIME_SHARE: a throttling CPU borrows RT runtime from the other CPUs of its root
//! domain (Linux `kernel/sched/rt.c`, `balance_runtime` → `do_balance_runtime`; the feature
//! flag is in `kernel/sched/features.h`). On by default up to Linux 5.9 (so in seed 003's
//! 3.17), off from 5.10 (commit 2586af1ac187, "sched/rt: Disable RT_RUNTIME_SHARE by
//! default"), which the RT class follows unless `rt_runtime_share` or the fair class's kernel
//! version says otherwise (`RtParams::with_runtime_share_default`).
//!
//! The rule: each CPU's RT queue has its own runtime, at first the global
//! `sched_rt_runtime_us`. When a queue's `rt_time` exceeds its runtime, it walks the other
//! online CPUs in index order and takes from each a 1/n share (n: the CPUs of the domain) of
//! that CPU's unused runtime (its runtime minus its `rt_time`, when positive), never growing
//! past one period; it stops once it holds a whole period. The borrowed runtime stays
//! borrowed: upstream gives it back only when a CPU leaves the domain
//! (`__disable_runtime`), which the model does not do (see Simplifications in `rt.rs`). With
//! the default 950 ms of 1 s, one RT hog on two CPUs borrows 50 ms from the idle one at its
//! first overrun and is never throttled again; two hogs find nothing to borrow.

use super::RtRq;

/// Linux v3.17: do_balance_runtime. `cpu`'s queue borrows unused runtime from the other
/// queues for which `online` holds, at most up to `period_ns` in all. Returns whether it
/// borrowed anything.
pub(super) fn do_balance_runtime(
    rqs: &mut [RtRq],
    cpu: usize,
    period_ns: u64,
    online: impl Fn(usize) -> bool,
) -> bool {
    let weight = (0..rqs.len()).filter(|&c| online(c)).count().max(1) as u64;
    let mut moved = false;
    for c in 0..rqs.len() {
        if c == cpu || !online(c) {
            continue;
        }
        let spare = rqs[c].rt_runtime.saturating_sub(rqs[c].rt_time);
        if spare == 0 {
            continue;
        }
        let diff = (spare / weight).min(period_ns.saturating_sub(rqs[cpu].rt_runtime));
        rqs[c].rt_runtime -= diff;
        rqs[cpu].rt_runtime += diff;
        moved |= diff > 0;
        if rqs[cpu].rt_runtime >= period_ns {
            break;
        }
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn rqs(runtime: u64, times: &[u64]) -> Vec<RtRq> {
        times
            .iter()
            .map(|&t| RtRq {
                rt_runtime: runtime,
                rt_time: t,
                ..RtRq::default()
            })
            .collect()
    }

    #[test]
    fn one_hog_borrows_up_to_a_whole_period_from_an_idle_cpu() {
        // 950 ms each; CPU 0 has run 951 ms, CPU 1 nothing: 1/2 of 950 ms is on offer, but
        // CPU 0 may hold at most the 1 s period, so it takes 50 ms.
        let mut q = rqs(950 * MS, &[951 * MS, 0]);
        assert!(do_balance_runtime(&mut q, 0, 1000 * MS, |_| true));
        assert_eq!(q[0].rt_runtime, 1000 * MS);
        assert_eq!(q[1].rt_runtime, 900 * MS);
        // Holding a whole period, it borrows no more.
        assert!(!do_balance_runtime(&mut q, 0, 1000 * MS, |_| true));
    }

    #[test]
    fn the_share_is_the_lenders_spare_divided_by_the_cpus() {
        // Four CPUs, a 2 s period: CPU 0 takes (950 − 550) / 4 = 100 ms from CPU 1, 950 / 4
        // from the idle CPU 2 and nothing from CPU 3 (no spare runtime); it stays under 2 s.
        let mut q = rqs(950 * MS, &[960 * MS, 550 * MS, 0, 950 * MS]);
        assert!(do_balance_runtime(&mut q, 0, 2000 * MS, |_| true));
        assert_eq!(q[1].rt_runtime, 850 * MS);
        assert_eq!(q[2].rt_runtime, 950 * MS - 950 * MS / 4);
        assert_eq!(q[3].rt_runtime, 950 * MS, "no spare runtime: nothing taken");
        assert_eq!(q[0].rt_runtime, 950 * MS + 100 * MS + 950 * MS / 4);
        let total: u64 = q.iter().map(|r| r.rt_runtime).sum();
        assert_eq!(total, 4 * 950 * MS, "runtime moves, it is not created");
    }

    #[test]
    fn two_hogs_have_nothing_to_lend_each_other() {
        let mut q = rqs(950 * MS, &[951 * MS, 951 * MS]);
        assert!(!do_balance_runtime(&mut q, 0, 1000 * MS, |_| true));
        assert_eq!(q[0].rt_runtime, 950 * MS);
    }

    #[test]
    fn offline_cpus_neither_lend_nor_count() {
        let mut q = rqs(950 * MS, &[951 * MS, 0, 0]);
        assert!(!do_balance_runtime(&mut q, 0, 1000 * MS, |c| c != 1 && c != 2));
        // With CPU 2 online the domain has two CPUs: a half share of 950 ms, capped at 50.
        assert!(do_balance_runtime(&mut q, 0, 1000 * MS, |c| c != 1));
        assert_eq!(
            (q[0].rt_runtime, q[1].rt_runtime, q[2].rt_runtime),
            (1000 * MS, 950 * MS, 900 * MS)
        );
    }
}
