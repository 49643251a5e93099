//! The hypervisor seam: what a vCPU's guest-visible events and its traps to the hypervisor do,
//! as plain data the engine reads, so that Xen on x86 (PV or HVM), Xen on Arm and KVM differ by
//! configuration and not by branches in the event loop.
//!
//! Two pieces:
//!
//! - [`PendingIrqs`]: the virtual interrupts pending on one guest CPU while its vCPU is away
//!   (descheduled or halted): a small bit set of interrupt kinds plus the per-CPU list of guest
//!   timers that expired meanwhile. Xen keeps the same thing as `evtchn_upcall_pending` and the
//!   vGIC/vLAPIC pending registers; KVM as `vcpu->requests` and the LAPIC IRR. The engine raises
//!   kinds while the vCPU does not execute, delivers them all when it runs again, and asks one
//!   question when the guest goes idle: is anything pending that ends a halt?
//! - [`ExitModel`]: what the hypervisor does when the guest idles ([`Halt`]) or spin-waits with a
//!   trappable instruction ([`Spin`]), what waking a halted vCPU costs (`kick_ns`) and what one
//!   trap into the hypervisor costs (`hypercall_ns`). [`ExitModel::for_guest`] picks the preset
//!   of the scenario's `[machine] hypervisor`, `arch`, `vwfi` and the domain's `guest_type`.
//!
//! Sources of the rules (read for facts; see docs/design.md, Hypervisor seam):
//! - Xen 4.20, Arm `xen/arch/arm/traps.c` (`do_trap_wfi_wfe`): a trapped WFI blocks the vCPU
//!   unless an event is pending (`vcpu_block_unless_event_pending`), a trapped WFE yields it
//!   (`vcpu_yield`); with the `vwfi=native` boot option neither traps (ERRATA X4).
//! - Xen 4.20, x86 HVM `xen/arch/x86/hvm/hvm.c` (`hvm_hlt`: HLT blocks the vCPU) and
//!   `vmx/vmx.c`, `svm/svm.c` (a PAUSE-loop exit, or SVM's pause filter, yields with
//!   SCHEDOP_yield). x86 PV: the idle loop blocks with SCHEDOP_block; PAUSE is not intercepted.
//!   `xl.cfg(5)`: `type = "pv"` is the default on x86.
//! - Linux KVM `virt/kvm/kvm_main.c` (`kvm_vcpu_halt`: poll for up to `halt_poll_ns` before
//!   blocking; `kvm_vcpu_on_spin`: a PAUSE-loop exit on x86 or a trapped WFE on arm64 does a
//!   directed yield to a preempted vCPU of the same VM); `KVM_HALT_POLL_NS_DEFAULT` is 200000 on
//!   x86 and 500000 on arm64 (`arch/*/include/asm/kvm_host.h`). arm64's
//!   `kvm-arm.wfi_trap_policy=notrap` / `wfe_trap_policy=notrap` are `vwfi = "native"` here.
//!
//! Simplified (docs/simplifications.md): the poll window is fixed (no `halt_poll_ns_grow` /
//! `shrink`); a directed yield goes through the host's `Scheduler::yield_to` under the Linux KVM
//! host (docs/kvm.md) and is a plain yield under a host without one (Xen's); the costs default
//! to 0; PV and HVM differ only in their spin rule today.

use crate::scenario::{Arch, GuestType, Hypervisor, Vwfi};
use crate::time::Nanos;

/// What an idle vCPU does when its guest has nothing to run and nothing is pending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Halt {
    /// The vCPU blocks at the host at once: Xen's SCHEDOP_block (PV), a trapped HLT (x86 HVM)
    /// or a trapped WFI (Arm, `vwfi=trap`).
    #[default]
    Block,
    /// KVM halt-polling: the vCPU stays on its pCPU for up to `ns` (the pCPU is busy), and
    /// blocks only if no guest event arrived meanwhile. Linux: `kvm_vcpu_halt`.
    Poll { ns: Nanos },
    /// WFI is not trapped (Xen `vwfi=native`, KVM `wfi_trap_policy=notrap`): the vCPU keeps its
    /// pCPU while idle and is never blocked by its guest.
    Stay,
}

/// What a spin-wait with a trappable instruction (a `spin` step with `wfe = true`: WFE on Arm,
/// a PAUSE loop on x86) does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Spin {
    /// Not intercepted: the spinner burns its vCPU's time until the token arrives.
    #[default]
    Run,
    /// After every `trap_ns` of spinning the vCPU exits and yields to the host scheduler (Xen:
    /// a trapped WFE, a PAUSE-loop exit; both SCHEDOP_yield).
    Yield { trap_ns: Nanos },
    /// KVM's `kvm_vcpu_on_spin`: after every `trap_ns` of spinning, a directed yield to a
    /// preempted vCPU of the same VM through the host's `Scheduler::yield_to` (the Linux KVM
    /// host; `sim/tasks.rs`); a host without one makes it a plain yield.
    DirectedYield { trap_ns: Nanos },
}

impl Spin {
    /// A trapping spin after `trap_ns`; a zero round trip means the instruction is not trapped.
    fn trapped(trap_ns: Nanos, directed: bool) -> Spin {
        match (trap_ns, directed) {
            (0, _) => Spin::Run,
            (_, false) => Spin::Yield { trap_ns },
            (_, true) => Spin::DirectedYield { trap_ns },
        }
    }

    /// How long a trappable spin runs before it traps; None: it never traps.
    #[inline]
    pub fn trap_ns(self) -> Option<Nanos> {
        match self {
            Spin::Run => None,
            Spin::Yield { trap_ns } | Spin::DirectedYield { trap_ns } => Some(trap_ns),
        }
    }
}

/// When an idle vCPU leaves its pCPU, the engine's reading of [`Halt`] plus the trap cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HaltWindow {
    /// Block at once.
    Now,
    /// Stay on the pCPU this long, then block unless an event arrived.
    After(Nanos),
    /// Never block.
    Never,
}

/// The exit model of one guest level (plain data; the engine only reads it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExitModel {
    pub halt: Halt,
    pub spin: Spin,
    /// Latency of the interrupt that wakes a halted vCPU for a guest event (Xen's event-channel
    /// or vGIC kick, KVM's `kvm_vcpu_kick`): the host wake happens this long after the event.
    pub kick_ns: Nanos,
    /// Cost of one trap into the hypervisor on the halt path (the SCHEDOP_block hypercall, a
    /// HLT or WFI exit): the vCPU stays on its pCPU this long before it is blocked, and an event
    /// arriving meanwhile cancels the block (Xen's `vcpu_block` rechecks pending events).
    pub hypercall_ns: Nanos,
}

impl ExitModel {
    /// How an idle vCPU leaves its pCPU.
    #[inline]
    pub fn halt_window(&self) -> HaltWindow {
        match self.halt {
            Halt::Stay => HaltWindow::Never,
            Halt::Block if self.hypercall_ns == 0 => HaltWindow::Now,
            Halt::Block => HaltWindow::After(self.hypercall_ns),
            Halt::Poll { ns } => HaltWindow::After(ns.saturating_add(self.hypercall_ns)),
        }
    }

    /// Xen on x86, PV guest: SCHEDOP_block, PAUSE not intercepted.
    pub fn xen_x86_pv() -> Self {
        ExitModel::default()
    }

    /// Xen on x86, HVM guest: HLT blocks (`hvm_hlt`), a PAUSE-loop exit yields after `trap_ns`.
    pub fn xen_x86_hvm(trap_ns: Nanos) -> Self {
        ExitModel {
            spin: Spin::trapped(trap_ns, false),
            ..Default::default()
        }
    }

    /// Xen on Arm: `vwfi=trap` blocks on WFI and yields on WFE (after `trap_ns`, the WFE
    /// round trip); `vwfi=native` traps neither.
    pub fn xen_arm(vwfi: Vwfi, trap_ns: Nanos) -> Self {
        match vwfi {
            Vwfi::Trap => ExitModel {
                spin: Spin::trapped(trap_ns, false),
                ..Default::default()
            },
            Vwfi::Native => ExitModel {
                halt: Halt::Stay,
                ..Default::default()
            },
        }
    }

    /// KVM: halt-polling for `poll_ns` (0: block at once), directed yield on a PAUSE-loop exit
    /// or a trapped WFE; on arm64 `vwfi = "native"` stands for `wfi_trap_policy=notrap` and
    /// `wfe_trap_policy=notrap`.
    pub fn kvm(vwfi: Vwfi, poll_ns: Nanos, trap_ns: Nanos) -> Self {
        match vwfi {
            Vwfi::Native => ExitModel {
                halt: Halt::Stay,
                ..Default::default()
            },
            Vwfi::Trap => ExitModel {
                halt: if poll_ns == 0 {
                    Halt::Block
                } else {
                    Halt::Poll { ns: poll_ns }
                },
                spin: Spin::trapped(trap_ns, true),
                ..Default::default()
            },
        }
    }

    /// `halt_poll_ns`'s default of KVM on `arch` (`KVM_HALT_POLL_NS_DEFAULT`).
    pub fn kvm_halt_poll_default(arch: Arch) -> Nanos {
        match arch {
            Arch::X86 => 200_000,
            Arch::Arm64 => 500_000,
        }
    }

    /// The preset of a guest: `hv` on `arch` with `vwfi`, a guest of type `guest` (validation
    /// has refused the combinations that do not exist), `trap_ns` the spin trap's round trip,
    /// `poll_ns` KVM's halt-polling window (None: its default), then the two costs.
    pub fn for_guest(
        hv: Hypervisor,
        arch: Arch,
        vwfi: Vwfi,
        guest: GuestType,
        trap_ns: Nanos,
        poll_ns: Option<Nanos>,
        kick_ns: Nanos,
        hypercall_ns: Nanos,
    ) -> Self {
        let base = match (hv, arch, guest) {
            (Hypervisor::Xen, Arch::X86, GuestType::Pv) => Self::xen_x86_pv(),
            (Hypervisor::Xen, Arch::X86, GuestType::Hvm) => Self::xen_x86_hvm(trap_ns),
            (Hypervisor::Xen, Arch::Arm64, _) => Self::xen_arm(vwfi, trap_ns),
            (Hypervisor::Kvm, _, _) => Self::kvm(
                vwfi,
                poll_ns.unwrap_or_else(|| Self::kvm_halt_poll_default(arch)),
                trap_ns,
            ),
        };
        ExitModel {
            kick_ns,
            hypercall_ns,
            ..base
        }
    }
}

/// Virtual interrupts pending on one guest CPU while its vCPU does not execute: a bit set of
/// kinds, and the guest timers (task indices) that expired meanwhile, in expiry order. Raising
/// allocates nothing after build (the timer list has its capacity from the start and holds
/// each task once).
#[derive(Clone, Debug, Default)]
pub struct PendingIrqs {
    bits: u8,
    timers: Vec<usize>,
}

impl PendingIrqs {
    /// The reschedule IPI (Linux `scheduler_ipi`; Xen's and KVM's kick of a vCPU).
    pub const RESCHED: u8 = 1 << 0;
    /// The periodic tick (the virtual timer's interrupt programmed by the guest's tick).
    pub const TICK: u8 = 1 << 1;
    /// A guest timer (hrtimer) expired: set while `timers` is not empty.
    pub const TIMER: u8 = 1 << 2;
    /// An event-channel upcall (Xen `evtchn_upcall_pending`); raised by the I/O path (issue 11).
    pub const EVTCHN: u8 = 1 << 3;
    /// A call-function IPI (Linux `smp_call_function_many`; `call_func` steps, sim/pv.rs).
    pub const CALL_FUNC: u8 = 1 << 4;
    /// Kinds that end a halt: everything but the tick (a tick on an idle CPU has nothing to do,
    /// and under NO_HZ idle it is stopped).
    const WAKES: u8 = Self::RESCHED | Self::TIMER | Self::EVTCHN | Self::CALL_FUNC;

    pub fn with_capacity(timers: usize) -> Self {
        PendingIrqs {
            bits: 0,
            timers: Vec::with_capacity(timers),
        }
    }

    #[inline]
    pub fn raise(&mut self, kind: u8) {
        debug_assert!(kind != Self::TIMER, "a timer is raised with its task");
        self.bits |= kind;
    }

    #[inline]
    pub fn clear(&mut self, kind: u8) {
        debug_assert!(kind != Self::TIMER, "a timer is cleared with its task");
        self.bits &= !kind;
    }

    #[inline]
    pub fn is_raised(&self, kind: u8) -> bool {
        self.bits & kind != 0
    }

    /// Guest timer of task `t` expired while the vCPU was away (once per task).
    pub fn raise_timer(&mut self, t: usize) {
        if !self.timers.contains(&t) {
            self.timers.push(t);
        }
        self.bits |= Self::TIMER;
    }

    /// Task `t`'s timer was handled (expired with another interrupt, or cancelled).
    #[inline]
    pub fn clear_timer(&mut self, t: usize) {
        if self.bits & Self::TIMER != 0 {
            self.timers.retain(|x| *x != t);
            if self.timers.is_empty() {
                self.bits &= !Self::TIMER;
            }
        }
    }

    /// Is anything pending that makes a halt return at once (Xen's `local_events_need_delivery`,
    /// KVM's `kvm_vcpu_check_block`)?
    #[inline]
    pub fn wakes_halt(&self) -> bool {
        self.bits & Self::WAKES != 0
    }

    /// Anything at all pending.
    #[inline]
    pub fn any(&self) -> bool {
        self.bits != 0
    }

    /// Takes every pending kind for delivery; the timers stay for [`Self::drain_timers`].
    #[inline]
    pub fn take(&mut self) -> u8 {
        std::mem::take(&mut self.bits)
    }

    /// Every pending timer, taken away with its kind (the CPU goes offline: they are delivered
    /// on another CPU). Keeps the list's capacity.
    pub fn take_timers(&mut self) -> Vec<usize> {
        self.bits &= !Self::TIMER;
        self.timers.drain(..).collect()
    }

    /// The pending timers, emptied (after [`Self::take`] returned [`Self::TIMER`]).
    #[inline]
    pub fn drain_timers(&mut self) -> std::vec::Drain<'_, usize> {
        self.timers.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_alone_does_not_end_a_halt() {
        let mut p = PendingIrqs::with_capacity(4);
        assert!(!p.any() && !p.wakes_halt());
        p.raise(PendingIrqs::TICK);
        assert!(p.any() && !p.wakes_halt());
        for k in [
            PendingIrqs::RESCHED,
            PendingIrqs::EVTCHN,
            PendingIrqs::CALL_FUNC,
        ] {
            let mut q = PendingIrqs::default();
            q.raise(k);
            assert!(q.wakes_halt(), "kind {k:#x} ends a halt");
        }
    }

    #[test]
    fn timers_are_held_once_and_in_order() {
        let mut p = PendingIrqs::with_capacity(4);
        p.raise_timer(7);
        p.raise_timer(3);
        p.raise_timer(7);
        assert!(p.wakes_halt());
        p.clear_timer(7);
        assert!(p.is_raised(PendingIrqs::TIMER));
        p.raise_timer(5);
        assert_eq!(p.take(), PendingIrqs::TIMER);
        assert_eq!(p.drain_timers().collect::<Vec<_>>(), vec![3, 5]);
        assert!(!p.any());
        p.raise_timer(1);
        p.clear_timer(1);
        assert!(!p.any(), "the last timer handled clears the kind");
    }

    #[test]
    fn halt_windows() {
        let m = |halt, hypercall_ns| ExitModel {
            halt,
            hypercall_ns,
            ..Default::default()
        };
        assert_eq!(m(Halt::Block, 0).halt_window(), HaltWindow::Now);
        assert_eq!(m(Halt::Block, 500).halt_window(), HaltWindow::After(500));
        assert_eq!(
            m(Halt::Poll { ns: 1000 }, 500).halt_window(),
            HaltWindow::After(1500)
        );
        assert_eq!(m(Halt::Stay, 500).halt_window(), HaltWindow::Never);
    }
}
