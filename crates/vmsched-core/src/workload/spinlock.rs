//! A lock-holder-preemption workload (`kind = "spinlock"`): `threads` kernel threads, one per
//! vCPU by default, each looping over non-critical work, taking one shared lock, a critical
//! section and the unlock. Its figure is the lock's acquisitions per second; its histogram is
//! the lock wait (from the attempt to the acquisition, 0 for an uncontended one).
//!
//! The classic experiment of paravirtual locking (Uhlig et al., "Towards scalable
//! multiprocessor virtual machines", 2004; the PV ticketlock and pvqspinlock series of
//! Linux 3.12 and 4.2): when the host preempts the vCPU of the lock holder, every waiter spins
//! for the rest of the holder's wait for a pCPU, and a fair lock also hands the lock to a
//! preempted waiter. PAUSE-loop exits with directed yield (`kvm_vcpu_on_spin`) and PV
//! spinlocks (the waiter halts, the unlocker kicks it) give the spinning time back.
//!
//! Lock kinds (`lock`), the behaviour the engine gives each (sim/pv.rs):
//! - `spinlock` (default): what the guest kernel's `spin_lock` is on this machine, `pv_qspinlock`
//!   when `[domain.pv]` resolves PV spinlocks on, else `qspinlock`.
//! - `ticket`: a ticket lock (Linux before 4.2): FIFO; the unlock hands the lock to the next
//!   ticket even if that waiter's vCPU is preempted, and nobody else can take it meanwhile.
//! - `qspinlock`: Linux's queued spinlock (`kernel/locking/qspinlock.c`) without PV: an MCS
//!   queue whose head takes the lock when it sees it free; for preemption this is the ticket
//!   lock's FIFO hand-off (the head being preempted blocks every later waiter).
//! - `tas`: test-and-set (`virt_spin_lock`, x86 guests whose host lacks PV_UNHALT): the unlock
//!   frees the lock and the first running spinner takes it; a preempted waiter is skipped.
//! - `pv_qspinlock`: `kernel/locking/qspinlock_paravirt.h`: FIFO as `qspinlock`, but a waiter
//!   spins `spin_threshold_ns` (`SPIN_THRESHOLD` iterations) and then halts its vCPU
//!   (`pv_wait`: KVM `kvm_wait`, HLT; Xen `xen_qlock_wait`, a poll on an event channel);
//!   the unlock that hands it the lock kicks it (`pv_kick`: KVM_HC_KICK_CPU, Xen's event).
//! - `mutex`: a sleeping mutex for comparison: a waiter whose owner is running (and, when the
//!   guest reads `vcpu_is_preempted`, whose owner's vCPU is not preempted) spins on the owner
//!   (`mutex_spin_on_owner`); otherwise, or once the owner stops running, it sleeps. The
//!   unlock frees the mutex for a running spinner; with none, it hands it to the first sleeper
//!   and wakes it; with neither, a preempted spinner takes it when it runs again.
//!
//! Simplified (docs/pvops.md): the lock's cache-line transfers cost nothing; a thread's
//! `spin_lock` does not disable guest preemption (pin threads one per vCPU, the default, so
//! that only the host preempts them); PV qspinlock lock stealing
//! (`pv_hybrid_queued_unfair_trylock`) and `pv_wait_early` are not modelled; the mutex has no
//! optimistic-spin queue (OSQ) and no HANDOFF flag (a new arrival may take a free mutex before
//! the woken sleeper).

use serde::{Deserialize, Serialize};

use super::{Dist, Figure, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::Policy;

/// Which lock the threads contend (module doc).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LockKind {
    #[default]
    Spinlock,
    Ticket,
    Qspinlock,
    Tas,
    PvQspinlock,
    Mutex,
}

impl LockKind {
    /// The lock a `spinlock` is with PV spinlocks on or off (`kvm_spinlock_init`,
    /// `xen_init_spinlocks`); other kinds are themselves.
    #[inline]
    pub fn resolve(self, pv_spinlock: bool) -> LockKind {
        match self {
            LockKind::Spinlock if pv_spinlock => LockKind::PvQspinlock,
            LockKind::Spinlock => LockKind::Qspinlock,
            k => k,
        }
    }

    /// The lock goes to the longest waiter at the unlock, running or not.
    #[inline]
    pub fn fifo(self) -> bool {
        matches!(
            self,
            LockKind::Ticket | LockKind::Qspinlock | LockKind::PvQspinlock
        )
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SpinlockConfig {
    pub name: String,
    /// Contending threads; absent: one per vCPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    #[serde(default)]
    pub lock: LockKind,
    /// Critical section (the lock held), fixed.
    #[serde(default = "d_cs")]
    pub cs_ns: u64,
    /// Non-critical work between two acquisitions: exponential with this mean (0: none).
    #[serde(default = "d_think")]
    pub think_ns: u64,
    /// Pin thread k to vCPU k (modulo the vCPU count or the `affinity` list); default on.
    #[serde(default = "d_true")]
    pub pin_each: bool,
    #[serde(default)]
    pub affinity: Option<Vec<u32>>,
    #[serde(default)]
    pub nice: i32,
}

fn d_cs() -> u64 {
    2_000
}
fn d_think() -> u64 {
    20_000
}
fn d_true() -> bool {
    true
}

/// Counter: acquisitions.
pub const ACQUIRED: u16 = 0;
/// Histogram: lock wait.
pub const WAIT: u16 = 0;

impl SpinlockConfig {
    pub fn validate(&self) -> Result<(), (String, String)> {
        if let Some(n) = self.threads {
            super::check_copies("threads", n)?;
        }
        if self.cs_ns == 0 {
            return Err(("cs_ns".into(), "must be above 0".into()));
        }
        for (f, v) in [("cs_ns", self.cs_ns), ("think_ns", self.think_ns)] {
            if v > crate::time::MAX_EXP_MEAN_NS {
                return Err((
                    f.into(),
                    format!(
                        "is too long: the limit is {} ns",
                        crate::time::MAX_EXP_MEAN_NS
                    ),
                ));
            }
        }
        super::check_nice(self.nice)
    }

    pub fn threads(&self, nr_vcpus: u32) -> u32 {
        self.threads.unwrap_or(nr_vcpus.max(1))
    }

    pub fn build(&self, nr_vcpus: u32) -> WorkloadSpec {
        let n = self.threads(nr_vcpus);
        let kind = self.lock;
        let mut program = Vec::with_capacity(6);
        if self.think_ns > 0 {
            program.push(Step::Compute {
                dur: Dist::Exp(self.think_ns),
                kernel: false,
            });
        }
        let top = 0;
        program.extend([
            Step::Lock {
                lock: 0,
                kind,
                hist: WAIT,
            },
            Step::Count { counter: ACQUIRED },
            Step::Compute {
                dur: Dist::Fixed(self.cs_ns),
                kernel: true,
            },
            Step::Unlock { lock: 0, kind },
            Step::Goto {
                to: top,
                times: None,
            },
        ]);
        let mut tasks = super::task_vec("threads", n.into());
        tasks.extend((0..n).map(|k| TaskSpec {
            name: format!("{}.{k}", self.name),
            program: program.clone(),
            nice: self.nice,
            policy: Policy::Normal,
            rt_prio: 0,
            times: Default::default(),
            affinity: if self.pin_each {
                Some(vec![match &self.affinity {
                    Some(a) => a[k as usize % a.len()],
                    None => k % nr_vcpus.max(1),
                }])
            } else {
                self.affinity.clone()
            },
            start: 0,
        }));
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::Spinlock,
            tasks,
            channels: 1,
            counters: vec!["acquired".into()],
            hists: vec!["lock_wait".into()],
            gap_pairs: vec![],
            // The lock starts free.
            tokens: vec![1],
            hist_buckets: 0,
        }
    }
}

/// Acquisitions per second over the measured time.
pub fn figure(counters: &[u64], secs: f64) -> Figure {
    Figure {
        name: "acquisitions".into(),
        value: counters.get(ACQUIRED as usize).copied().unwrap_or(0) as f64 / secs.max(1e-9),
        unit: "acq/s".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinlock_resolves_to_the_kernels_lock() {
        assert_eq!(LockKind::Spinlock.resolve(true), LockKind::PvQspinlock);
        assert_eq!(LockKind::Spinlock.resolve(false), LockKind::Qspinlock);
        assert_eq!(LockKind::Tas.resolve(true), LockKind::Tas);
        assert!(LockKind::Ticket.fifo() && !LockKind::Tas.fifo() && !LockKind::Mutex.fifo());
    }

    #[test]
    fn one_pinned_thread_per_vcpu_by_default() {
        let c: SpinlockConfig = toml::from_str("name = \"l\"").unwrap();
        let w = c.build(3);
        assert_eq!(w.tasks.len(), 3);
        let aff: Vec<_> = w.tasks.iter().map(|t| t.affinity.clone()).collect();
        assert_eq!(aff, vec![Some(vec![0]), Some(vec![1]), Some(vec![2])]);
        assert_eq!(w.tokens, vec![1], "the lock starts free");
        let e = SpinlockConfig { cs_ns: 0, ..c }.validate().unwrap_err();
        assert_eq!(e.0, "cs_ns");
    }
}
