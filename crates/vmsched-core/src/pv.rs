//! The guest's paravirtual interfaces (`[domain.pv]`): which of them a guest kernel uses, with
//! the defaults its boot code picks, and the guest halt-polling governor's rules.
//!
//! Each interface is one named option; absent, it takes the value the guest kernel chooses
//! at boot on the modelled machine ([`PvConfig::resolve`]). Sources (read for facts):
//! - Linux `arch/x86/kernel/kvm.c` (5.10 to 6.12): `kvm_spinlock_init` (PV qspinlock with
//!   `kvm_wait`/`kvm_kick_cpu` unless the host lacks KVM_FEATURE_PV_UNHALT, advertises
//!   KVM_HINTS_REALTIME, the guest has one CPU or boots with `nopvspin`),
//!   `pv_sched_yield_supported` (KVM_FEATURE_PV_SCHED_YIELD, no KVM_HINTS_REALTIME, steal
//!   time, more than one CPU) and `__kvm_vcpu_is_preempted` (the steal-time area's
//!   KVM_VCPU_PREEMPTED bit, installed only with KVM_FEATURE_STEAL_TIME).
//! - Linux `arch/x86/xen/spinlock.c` (`xen_init_spinlocks`: PV qspinlock whose wait polls a
//!   per-CPU event channel, `xen_qlock_wait`, and whose kick sends it, `xen_qlock_kick`;
//!   off with one CPU or `xen_nopvspin`/`nopvspin`).
//! - arm64 guests of 5.10 to 6.12 have none of them: `vcpu_is_preempted` is `false`
//!   (`arch/arm64/include/asm/spinlock.h`; PV versions reading the PV_TIME area were posted in
//!   2019 and 2022 but, as far as checked, not merged), spinlocks are plain qspinlocks, no
//!   sched-yield hypercall (ERRATA L1).
//! - Linux `drivers/cpuidle/cpuidle-haltpoll.c` (`haltpoll_want`: loaded only with
//!   KVM_HINTS_REALTIME or `force`; x86 KVM guests only) and
//!   `drivers/cpuidle/governors/haltpoll.c` (`adjust_poll_limit`, `haltpoll_select`,
//!   `haltpoll_reflect`): [`Haltpoll`].
//!
//! The engine reads the resolved [`PvModel`] (plain data in `sim::LevelOpts`); what it does with
//! it is `sim/pv.rs`. The host side of each interface (`kvm_vcpu_on_spin`, KVM's
//! `kvm_pv_kick_cpu_op`, `kvm_sched_yield`) is the engine's, through `Scheduler::yield_to`.

use serde::{Deserialize, Serialize};

use crate::scenario::{Arch, Hypervisor};
use crate::time::Nanos;

/// `[domain.pv]`: the paravirtual interfaces of one guest. Every field absent takes the guest
/// kernel's boot-time choice on this machine.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PvConfig {
    /// The guest reads whether a vCPU is preempted (x86 KVM: the steal-time area's preempted
    /// bit; Xen: the runstate area). Absent: on for an x86 KVM guest with steal time, off on
    /// arm64. Under a Xen host the guest scheduler's own `vcpu_is_preempted` switch stays in
    /// charge (`[domain.sched]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpu_is_preempted: Option<bool>,
    /// PV qspinlocks (a waiter halts after `SPIN_THRESHOLD` spins and is kicked by the
    /// unlocker). Absent: on for x86 guests (KVM, Xen) with more than one vCPU unless
    /// `nopvspin` or `realtime_hint`; off on arm64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pv_spinlock: Option<bool>,
    /// The `nopvspin` boot option (5.9+): no PV spinlocks.
    #[serde(default)]
    pub nopvspin: bool,
    /// The host advertises KVM_HINTS_REALTIME (dedicated pCPUs): no PV spinlocks, no PV sched
    /// yield, and cpuidle-haltpoll loads.
    #[serde(default)]
    pub realtime_hint: bool,
    /// KVM_FEATURE_PV_SCHED_YIELD (x86 KVM, 5.2+): a call-function IPI to a preempted vCPU
    /// yields to it. Absent: on for x86 KVM guests with steal time and more than one vCPU,
    /// unless `realtime_hint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pv_sched_yield: Option<bool>,
    /// The cpuidle-haltpoll driver is loaded (x86 KVM guests, 5.4+): the guest polls before
    /// HLT and turns host polling off (MSR_KVM_POLL_CONTROL). Absent: only with
    /// `realtime_hint` (the driver's `force` parameter is `haltpoll = true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub haltpoll: Option<bool>,
    /// The haltpoll governor's module parameters.
    #[serde(default)]
    pub guest_halt_poll: Haltpoll,
    /// Spin time of a PV qspinlock waiter before it halts: `SPIN_THRESHOLD` (1 << 15)
    /// iterations of the wait loop (`cpu_relax` and a load). Absent: 32768 × 10 ns (an
    /// assumption: the PAUSE latency differs several-fold across CPUs; not calibrated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spin_threshold_ns: Option<u64>,
}

/// `SPIN_THRESHOLD` of `arch/x86/include/asm/qspinlock.h`: wait-loop iterations before a PV
/// qspinlock waiter halts.
pub const SPIN_THRESHOLD: u64 = 1 << 15;
/// The assumed time of one wait-loop iteration (a PAUSE and a load), for the default threshold.
pub const SPIN_ITER_NS: u64 = 10;

/// The haltpoll governor's parameters (Linux `drivers/cpuidle/governors/haltpoll.c`, module
/// parameters of the same names, with their defaults).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Haltpoll {
    /// `guest_halt_poll_ns`: the cap of a CPU's poll limit (200000).
    pub guest_halt_poll_ns: u64,
    /// `guest_halt_poll_grow` (2).
    pub guest_halt_poll_grow: u64,
    /// `guest_halt_poll_grow_start` (50000).
    pub guest_halt_poll_grow_start: u64,
    /// `guest_halt_poll_shrink` (2; 0 resets to 0).
    pub guest_halt_poll_shrink: u64,
    /// `guest_halt_poll_allow_shrink` (true).
    pub guest_halt_poll_allow_shrink: bool,
}

impl Default for Haltpoll {
    fn default() -> Self {
        Haltpoll {
            guest_halt_poll_ns: 200_000,
            guest_halt_poll_grow: 2,
            guest_halt_poll_grow_start: 50_000,
            guest_halt_poll_shrink: 2,
            guest_halt_poll_allow_shrink: true,
        }
    }
}

impl Haltpoll {
    /// A CPU's poll limit after a halt of `block_ns` (the HLT state's residency; polls that
    /// ended with an event do not adjust it). Linux: `adjust_poll_limit` via `haltpoll_reflect`.
    pub fn adjust(&self, limit: Nanos, block_ns: Nanos) -> Nanos {
        if block_ns > limit && block_ns <= self.guest_halt_poll_ns {
            limit
                .saturating_mul(self.guest_halt_poll_grow)
                .max(self.guest_halt_poll_grow_start)
                .min(self.guest_halt_poll_ns)
        } else if block_ns > self.guest_halt_poll_ns && self.guest_halt_poll_allow_shrink {
            limit.checked_div(self.guest_halt_poll_shrink).unwrap_or(0)
        } else {
            limit
        }
    }
}

/// What the guest kernel uses, resolved from [`PvConfig`] and the machine (plain data the
/// engine reads; all off is the engine's behaviour before these interfaces).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PvModel {
    /// The guest can read `vcpu_is_preempted` (its scheduler's `available_idle_cpu` and its
    /// sleeping locks' owner spinning read it).
    pub vcpu_is_preempted: bool,
    /// PV qspinlocks: the wait and the kick; `spin_threshold_ns` of spinning first.
    pub pv_spinlock: bool,
    pub spin_threshold_ns: Nanos,
    /// PV sched yield on a call-function IPI to a preempted vCPU.
    pub pv_sched_yield: bool,
    /// cpuidle-haltpoll with these parameters (and host polling off).
    pub haltpoll: Option<Haltpoll>,
}

impl PvConfig {
    /// The guest's choices on `hv`/`arch` with `vcpus` vCPUs and the host's steal time
    /// (`steal_time`: KVM_FEATURE_STEAL_TIME; Xen always has the runstate area). An explicit
    /// `true` for an interface the platform lacks is an error naming the field.
    pub fn resolve(
        &self,
        hv: Hypervisor,
        arch: Arch,
        vcpus: u32,
        steal_time: bool,
    ) -> Result<PvModel, (String, String)> {
        let lacks = |field: &str, why: &str| Err((field.to_string(), why.to_string()));
        let x86 = arch == Arch::X86;
        let kvm = hv == Hypervisor::Kvm;
        let smp = vcpus > 1;
        let hint = self.realtime_hint;
        if hint && !kvm {
            return lacks("realtime_hint", "KVM_HINTS_REALTIME is a KVM hint");
        }
        let preempted_default = x86 && kvm && steal_time;
        let vcpu_is_preempted = match self.vcpu_is_preempted {
            Some(true) if !x86 => {
                return lacks(
                    "vcpu_is_preempted",
                    "arm64 guests have no vcpu_is_preempted (it is always false, ERRATA L1)",
                )
            }
            Some(true) if kvm && !steal_time => {
                return lacks(
                    "vcpu_is_preempted",
                    "the preempted flag lives in the steal-time area: needs host.steal_time",
                )
            }
            Some(v) => v,
            None => preempted_default,
        };
        let pv_spinlock = match self.pv_spinlock {
            Some(true) if !x86 => {
                return lacks(
                    "pv_spinlock",
                    "arm64 guests have no PV spinlocks (plain qspinlock)",
                )
            }
            Some(v) => v,
            None => x86 && smp && !self.nopvspin && !hint,
        };
        let pv_sched_yield = match self.pv_sched_yield {
            Some(true) if !(x86 && kvm) => {
                return lacks(
                    "pv_sched_yield",
                    "KVM_FEATURE_PV_SCHED_YIELD exists only for x86 KVM guests",
                )
            }
            Some(true) if !steal_time => {
                return lacks(
                    "pv_sched_yield",
                    "the guest uses it only with steal time (host.steal_time)",
                )
            }
            Some(v) => v,
            None => x86 && kvm && steal_time && smp && !hint,
        };
        let haltpoll = match self.haltpoll {
            Some(true) if !(x86 && kvm) => {
                return lacks("haltpoll", "cpuidle-haltpoll loads only in x86 KVM guests")
            }
            Some(v) => v,
            None => x86 && kvm && hint,
        };
        let h = &self.guest_halt_poll;
        if h.guest_halt_poll_grow_start == 0 {
            return lacks(
                "guest_halt_poll.guest_halt_poll_grow_start",
                "must be above 0",
            );
        }
        if h.guest_halt_poll_ns > crate::time::MAX_TIME_NS {
            return lacks("guest_halt_poll.guest_halt_poll_ns", "too long");
        }
        let spin_threshold_ns = self
            .spin_threshold_ns
            .unwrap_or(SPIN_THRESHOLD * SPIN_ITER_NS);
        if spin_threshold_ns == 0 || spin_threshold_ns > crate::time::MAX_TIME_NS {
            return lacks("spin_threshold_ns", "must be in 1..=2^56 ns");
        }
        Ok(PvModel {
            vcpu_is_preempted,
            pv_spinlock,
            spin_threshold_ns,
            pv_sched_yield,
            haltpoll: haltpoll.then_some(*h),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kvm_x86(vcpus: u32, steal: bool) -> PvModel {
        PvConfig::default()
            .resolve(Hypervisor::Kvm, Arch::X86, vcpus, steal)
            .unwrap()
    }

    #[test]
    fn x86_kvm_defaults_follow_the_guest_boot_code() {
        let m = kvm_x86(4, true);
        assert!(m.vcpu_is_preempted && m.pv_spinlock && m.pv_sched_yield);
        assert_eq!(
            m.haltpoll, None,
            "cpuidle-haltpoll needs KVM_HINTS_REALTIME"
        );
        assert_eq!(m.spin_threshold_ns, 32768 * 10);
        // kvm_spinlock_init: one CPU, no PV spinlock; pv_sched_yield_supported likewise.
        let one = kvm_x86(1, true);
        assert!(!one.pv_spinlock && !one.pv_sched_yield && one.vcpu_is_preempted);
        // No steal time: no preempted flag and no PV sched yield; PV spinlocks stay.
        let ns = kvm_x86(4, false);
        assert!(!ns.vcpu_is_preempted && !ns.pv_sched_yield && ns.pv_spinlock);
    }

    #[test]
    fn nopvspin_and_the_realtime_hint() {
        let c = PvConfig {
            nopvspin: true,
            ..Default::default()
        };
        assert!(
            !c.resolve(Hypervisor::Kvm, Arch::X86, 4, true)
                .unwrap()
                .pv_spinlock
        );
        let c = PvConfig {
            realtime_hint: true,
            ..Default::default()
        };
        let m = c.resolve(Hypervisor::Kvm, Arch::X86, 4, true).unwrap();
        assert!(!m.pv_spinlock && !m.pv_sched_yield);
        assert_eq!(m.haltpoll, Some(Haltpoll::default()));
        assert!(c.resolve(Hypervisor::Xen, Arch::X86, 4, true).is_err());
    }

    #[test]
    fn arm64_has_no_preempted_flag_nor_pv_locks() {
        for hv in [Hypervisor::Kvm, Hypervisor::Xen] {
            let m = PvConfig::default()
                .resolve(hv, Arch::Arm64, 4, true)
                .unwrap();
            assert_eq!(
                m,
                PvModel {
                    spin_threshold_ns: m.spin_threshold_ns,
                    ..Default::default()
                }
            );
        }
        let c = PvConfig {
            vcpu_is_preempted: Some(true),
            ..Default::default()
        };
        let e = c
            .resolve(Hypervisor::Kvm, Arch::Arm64, 4, true)
            .unwrap_err();
        assert_eq!(e.0, "vcpu_is_preempted");
        let c = PvConfig {
            pv_spinlock: Some(true),
            ..Default::default()
        };
        assert_eq!(
            c.resolve(Hypervisor::Kvm, Arch::Arm64, 4, true)
                .unwrap_err()
                .0,
            "pv_spinlock"
        );
    }

    #[test]
    fn xen_x86_guests_have_pv_spinlocks_but_no_kvm_features() {
        let m = PvConfig::default()
            .resolve(Hypervisor::Xen, Arch::X86, 2, true)
            .unwrap();
        assert!(m.pv_spinlock && !m.pv_sched_yield && m.haltpoll.is_none());
        let c = PvConfig {
            pv_sched_yield: Some(true),
            ..Default::default()
        };
        assert_eq!(
            c.resolve(Hypervisor::Xen, Arch::X86, 2, true)
                .unwrap_err()
                .0,
            "pv_sched_yield"
        );
    }

    #[test]
    fn haltpoll_grows_from_grow_start_and_caps_at_guest_halt_poll_ns() {
        let h = Haltpoll::default();
        // A halt shorter than the cap grows the limit: 0 → grow_start, then doubling.
        assert_eq!(h.adjust(0, 30_000), 50_000);
        assert_eq!(h.adjust(50_000, 80_000), 100_000);
        assert_eq!(h.adjust(100_000, 150_000), 200_000);
        assert_eq!(h.adjust(150_000, 190_000), 200_000, "capped");
        // A halt within the limit leaves it alone.
        assert_eq!(h.adjust(100_000, 90_000), 100_000);
    }

    #[test]
    fn haltpoll_shrinks_after_a_long_halt() {
        let h = Haltpoll::default();
        assert_eq!(h.adjust(200_000, 5_000_000), 100_000);
        assert_eq!(h.adjust(100_000, 300_000), 50_000);
        let reset = Haltpoll {
            guest_halt_poll_shrink: 0,
            ..h
        };
        assert_eq!(reset.adjust(200_000, 5_000_000), 0);
        let keep = Haltpoll {
            guest_halt_poll_allow_shrink: false,
            ..h
        };
        assert_eq!(keep.adjust(200_000, 5_000_000), 200_000);
    }
}
