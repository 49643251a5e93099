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
//! - KVM's per-vCPU windows ([`HaltPoll`], [`PleWindow`], state in [`KvmVcpu`]): the halt-poll
//!   window grows and shrinks after each halt (`grow_halt_poll_ns`, `shrink_halt_poll_ns` and
//!   the tail of `kvm_vcpu_halt`, 5.10's `kvm_vcpu_block`); on x86 the PAUSE-loop window grows
//!   at every PAUSE-loop exit and shrinks when the vCPU thread is scheduled in again
//!   (`arch/x86/kvm/x86.h` `__grow_ple_window` / `__shrink_ple_window`, called by VMX's
//!   `grow_ple_window` from `handle_pause` and `shrink_ple_window` from `vmx_sched_in` (5.10) /
//!   `vmx_vcpu_load` after a schedule-out (6.12); SVM's `pause_filter_count` likewise). arm64
//!   traps every WFE: no window.
//!
//! Simplified (docs/simplifications.md): a directed yield goes through the host's
//! `Scheduler::yield_to` under the Linux KVM host (docs/kvm.md) and is a plain yield under a
//! host without one (Xen's); the costs default to 0; PV and HVM differ only in their spin rule
//! today; a PAUSE-loop window of `w` cycles traps after `w / base` times the trap round trip
//! (`machine.wfe_trap_ns` is the base window's).

use crate::scenario::{Arch, GuestType, Hypervisor, Vwfi};
use crate::time::Nanos;

/// What an idle vCPU does when its guest has nothing to run and nothing is pending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Halt {
    /// The vCPU blocks at the host at once: Xen's SCHEDOP_block (PV), a trapped HLT (x86 HVM)
    /// or a trapped WFI (Arm, `vwfi=trap`).
    #[default]
    Block,
    /// KVM halt-polling: the vCPU stays on its pCPU for up to its own current window (the
    /// pCPU is busy), and blocks only if no guest event arrived meanwhile; the window adapts
    /// after every halt ([`HaltPoll::adjust`]). Linux: `kvm_vcpu_halt`.
    Poll(HaltPoll),
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

/// KVM's halt-polling module parameters (`virt/kvm/kvm_main.c`); the window itself is per
/// vCPU ([`KvmVcpu::halt_poll_ns`], 0 when the vCPU is created).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HaltPoll {
    /// The cap of a vCPU's window: `halt_poll_ns` (from about 5.8 the per-VM
    /// `max_halt_poll_ns`, which is `halt_poll_ns` unless KVM_CAP_HALT_POLL overrides it).
    pub max_ns: Nanos,
    /// `halt_poll_ns_grow`: the factor of a grow (0: the window never grows).
    pub grow: u32,
    /// `halt_poll_ns_grow_start`: the first window a grow from below gives.
    pub grow_start: Nanos,
    /// `halt_poll_ns_shrink`: the divisor of a shrink (0: a shrink resets the window to 0).
    pub shrink: u32,
}

impl HaltPoll {
    /// The window after a grow. Linux: `grow_halt_poll_ns` (the cap is applied there in
    /// 5.10 and at the next halt's start from 5.16: the same window).
    pub fn grow(&self, cur: Nanos) -> Nanos {
        if self.grow == 0 {
            return cur;
        }
        cur.saturating_mul(self.grow as u64)
            .max(self.grow_start)
            .min(self.max_ns)
    }

    /// The window after a shrink: divided by `shrink` (0: reset), and 0 once below
    /// `grow_start`. Linux: `shrink_halt_poll_ns` (the `grow_start` floor is the 2021 change
    /// backported to later 5.10.y, ERRATA L10).
    pub fn shrink(&self, cur: Nanos) -> Nanos {
        let v = match self.shrink {
            0 => 0,
            s => cur / s as u64,
        };
        if v < self.grow_start {
            0
        } else {
            v
        }
    }

    /// The window after a halt of `halt_ns` (from the halt's start, poll included, to the vCPU
    /// thread running again) with window `cur`: a halt within the window changes nothing; a
    /// halt longer than the cap shrinks a window; a halt shorter than the cap that outlasted
    /// the window grows it. Linux: the tail of `kvm_vcpu_halt` (5.10: `kvm_vcpu_block`).
    pub fn adjust(&self, cur: Nanos, halt_ns: Nanos) -> Nanos {
        if self.max_ns == 0 {
            0
        } else if halt_ns <= cur {
            cur
        } else if cur > 0 && halt_ns > self.max_ns {
            self.shrink(cur)
        } else if cur < self.max_ns && halt_ns < self.max_ns {
            self.grow(cur)
        } else {
            cur
        }
    }
}

/// x86 KVM's per-vCPU PAUSE-loop window: VMX's `ple_window` (cycles) with `ple_window_grow`,
/// `ple_window_shrink`, `ple_window_max`, or SVM's `pause_filter_count` (PAUSE instructions)
/// with `pause_filter_count_grow`, `_shrink`, `_max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PleWindow {
    /// `ple_window` / `pause_filter_count`: a new vCPU's window, and the floor of a shrink.
    pub base: u64,
    /// `ple_window_grow` / `pause_filter_count_grow`.
    pub grow: u64,
    /// `ple_window_shrink` / `pause_filter_count_shrink` (0: a shrink resets to `base`).
    pub shrink: u64,
    /// `ple_window_max` / `pause_filter_count_max`.
    pub max: u64,
}

impl PleWindow {
    /// The window after a PAUSE-loop exit: times `grow` while `grow` is below the base, plus
    /// `grow` otherwise, at most `max`; a `grow` of 0 resets it to the base. Linux:
    /// `__grow_ple_window` (via VMX `grow_ple_window`, SVM `grow_ple_window`).
    pub fn grow(&self, cur: u64) -> u64 {
        if self.grow < 1 {
            return self.base;
        }
        let v = if self.grow < self.base {
            cur.saturating_mul(self.grow)
        } else {
            cur.saturating_add(self.grow)
        };
        v.min(self.max)
    }

    /// The window when the vCPU thread is scheduled in again: divided by `shrink` while it is
    /// below the base, minus `shrink` otherwise, at least the base; a `shrink` of 0 resets it
    /// to the base. Linux: `__shrink_ple_window`.
    pub fn shrink(&self, cur: u64) -> u64 {
        if self.shrink < 1 {
            return self.base;
        }
        let v = if self.shrink < self.base {
            cur / self.shrink
        } else {
            cur.saturating_sub(self.shrink)
        };
        v.max(self.base)
    }

    /// How long a spin runs before a window of `w` exits, the base window taking `base_ns`.
    #[inline]
    pub fn trap_ns(&self, w: u64, base_ns: Nanos) -> Nanos {
        let ns = (w as u128 * base_ns as u128) / self.base.max(1) as u128;
        ns.min(crate::time::MAX_TIME_NS as u128) as Nanos
    }
}

/// KVM's state of one vCPU that the exit model reads: its halt-poll window
/// (`vcpu->halt_poll_ns`), its PAUSE-loop window (VMX `vmx->ple_window`, SVM
/// `control->pause_filter_count`) and the start of the halt in progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvmVcpu {
    pub halt_poll_ns: Nanos,
    pub ple_window: u64,
    pub halt_start: Option<Nanos>,
    /// Its directed-yield eligibility (`vcpu->spin_loop`).
    pub spin_loop: SpinLoop,
}

/// KVM's `vcpu->spin_loop` (`virt/kvm/kvm_main.c`, the same in 5.10, 6.6, 6.12 and 6.18):
/// `in_spin_loop` while the vCPU is inside `kvm_vcpu_on_spin` (including while it is switched
/// out by the directed yield it made there), `dy_eligible` toggled each time another spinning
/// vCPU considers it, so a candidate that is itself spinning is eligible only every other time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpinLoop {
    pub in_spin_loop: bool,
    pub dy_eligible: bool,
}

impl SpinLoop {
    /// Entering `kvm_vcpu_on_spin` (`kvm_vcpu_set_in_spin_loop(me, true)`).
    pub fn enter(&mut self) {
        self.in_spin_loop = true;
    }

    /// Leaving `kvm_vcpu_on_spin`: out of the spin loop and, until it is next considered while
    /// spinning, not eligible (`kvm_vcpu_set_in_spin_loop(me, false)`,
    /// `kvm_vcpu_set_dy_eligible(me, false)`).
    pub fn leave(&mut self) {
        self.in_spin_loop = false;
        self.dy_eligible = false;
    }

    /// A spinning vCPU considers this one as its directed yield's target: eligible if it is not
    /// in a spin loop itself, or if it is and was passed over last time; a spinning candidate's
    /// `dy_eligible` flips at each look. Linux: kvm_vcpu_eligible_for_directed_yield
    pub fn eligible_for_directed_yield(&mut self) -> bool {
        let eligible = !self.in_spin_loop || self.dy_eligible;
        if self.in_spin_loop {
            self.dy_eligible = !self.dy_eligible;
        }
        eligible
    }
}

impl KvmVcpu {
    /// A new vCPU under `exit`: no poll window yet, the base PAUSE-loop window.
    pub fn new(exit: &ExitModel) -> Self {
        KvmVcpu {
            halt_poll_ns: 0,
            ple_window: exit.ple.map_or(0, |p| p.base),
            halt_start: None,
            spin_loop: SpinLoop::default(),
        }
    }
}

/// KVM's module parameters that shape the exits: halt polling and the x86 PAUSE-loop window
/// (None: arm64's WFE traps, or PLE off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvmKnobs {
    pub halt_poll: HaltPoll,
    pub ple: Option<PleWindow>,
}

impl KvmKnobs {
    /// The defaults of Linux 6.12 on `arch` (the KVM host's default kernel; the host's
    /// `[host.kvm]` table resolves them by version).
    pub fn defaults(arch: Arch) -> Self {
        KvmKnobs {
            halt_poll: HaltPoll {
                max_ns: ExitModel::kvm_halt_poll_default(arch),
                grow: 2,
                grow_start: 10_000,
                shrink: 2,
            },
            ple: match arch {
                Arch::X86 => Some(PleWindow {
                    base: 4096,
                    grow: 2,
                    shrink: 0,
                    max: u32::MAX as u64,
                }),
                Arch::Arm64 => None,
            },
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
    /// x86 KVM's growing PAUSE-loop window: a trapping spin exits after the vCPU's current
    /// window ([`KvmVcpu::ple_window`]) rather than after a fixed `trap_ns`.
    pub ple: Option<PleWindow>,
}

impl ExitModel {
    /// How an idle vCPU whose KVM poll window is `poll_ns` leaves its pCPU (a window of 0
    /// does not poll).
    #[inline]
    pub fn halt_window(&self, poll_ns: Nanos) -> HaltWindow {
        match self.halt {
            Halt::Stay => HaltWindow::Never,
            Halt::Poll(_) if poll_ns > 0 => {
                HaltWindow::After(poll_ns.saturating_add(self.hypercall_ns))
            }
            Halt::Block | Halt::Poll(_) if self.hypercall_ns == 0 => HaltWindow::Now,
            Halt::Block | Halt::Poll(_) => HaltWindow::After(self.hypercall_ns),
        }
    }

    /// How long a trapping spin runs before it exits with PAUSE-loop window `w` (the
    /// vCPU's); None: it never traps.
    #[inline]
    pub fn spin_trap_ns(&self, w: u64) -> Option<Nanos> {
        let t = self.spin.trap_ns()?;
        Some(match self.ple {
            Some(p) => p.trap_ns(w, t),
            None => t,
        })
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

    /// KVM: halt-polling with `knobs.halt_poll` (a cap of 0: block at once), directed yield on
    /// a PAUSE-loop exit (x86, with the growing window of `knobs.ple`) or a trapped WFE
    /// (arm64); on arm64 `vwfi = "native"` stands for `wfi_trap_policy=notrap` and
    /// `wfe_trap_policy=notrap`.
    pub fn kvm(vwfi: Vwfi, knobs: KvmKnobs, trap_ns: Nanos) -> Self {
        match vwfi {
            Vwfi::Native => ExitModel {
                halt: Halt::Stay,
                ..Default::default()
            },
            Vwfi::Trap => {
                let spin = Spin::trapped(trap_ns, true);
                ExitModel {
                    halt: if knobs.halt_poll.max_ns == 0 {
                        Halt::Block
                    } else {
                        Halt::Poll(knobs.halt_poll)
                    },
                    spin,
                    ple: knobs.ple.filter(|_| spin != Spin::Run),
                    ..Default::default()
                }
            }
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
    /// `kvm` KVM's module parameters (None: [`KvmKnobs::defaults`]), then the two costs.
    pub fn for_guest(
        hv: Hypervisor,
        arch: Arch,
        vwfi: Vwfi,
        guest: GuestType,
        trap_ns: Nanos,
        kvm: Option<KvmKnobs>,
        kick_ns: Nanos,
        hypercall_ns: Nanos,
    ) -> Self {
        let base = match (hv, arch, guest) {
            (Hypervisor::Xen, Arch::X86, GuestType::Pv) => Self::xen_x86_pv(),
            (Hypervisor::Xen, Arch::X86, GuestType::Hvm) => Self::xen_x86_hvm(trap_ns),
            (Hypervisor::Xen, Arch::Arm64, _) => Self::xen_arm(vwfi, trap_ns),
            (Hypervisor::Kvm, _, _) => Self::kvm(
                vwfi,
                kvm.unwrap_or_else(|| KvmKnobs::defaults(arch)),
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

    /// kvm_vcpu_eligible_for_directed_yield: a vCPU not in a spin loop is always eligible and
    /// its flag does not move; one in a spin loop is eligible every other look, starting with
    /// a refusal (it enters with `dy_eligible` false, as every call leaves it).
    #[test]
    fn a_spinning_candidate_is_eligible_every_other_time() {
        let mut idle = SpinLoop::default();
        for _ in 0..3 {
            assert!(idle.eligible_for_directed_yield());
        }
        assert!(!idle.dy_eligible);
        let mut v = SpinLoop::default();
        v.enter();
        let looks: Vec<bool> = (0..5).map(|_| v.eligible_for_directed_yield()).collect();
        assert_eq!(looks, [false, true, false, true, false]);
        // Leaving the spin loop clears both: eligible again, and refused first next time.
        v.leave();
        assert!(!v.in_spin_loop && !v.dy_eligible);
        assert!(v.eligible_for_directed_yield());
        v.enter();
        assert!(!v.eligible_for_directed_yield());
    }

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
        let poll = Halt::Poll(KvmKnobs::defaults(Arch::X86).halt_poll);
        assert_eq!(m(Halt::Block, 0).halt_window(0), HaltWindow::Now);
        assert_eq!(m(Halt::Block, 500).halt_window(0), HaltWindow::After(500));
        assert_eq!(m(poll, 500).halt_window(1000), HaltWindow::After(1500));
        assert_eq!(m(poll, 0).halt_window(0), HaltWindow::Now, "no window yet");
        assert_eq!(m(poll, 500).halt_window(0), HaltWindow::After(500));
        assert_eq!(m(Halt::Stay, 500).halt_window(0), HaltWindow::Never);
    }

    fn hp(grow: u32, grow_start: Nanos, shrink: u32) -> HaltPoll {
        HaltPoll {
            max_ns: 200_000,
            grow,
            grow_start,
            shrink,
        }
    }

    #[test]
    fn halt_poll_grows_from_grow_start_and_doubles_up_to_the_cap() {
        let p = hp(2, 10_000, 0);
        // A halt shorter than the cap that outlasted the window (here none yet) grows it.
        let mut w = p.adjust(0, 50_000);
        assert_eq!(w, 10_000, "from 0 to halt_poll_ns_grow_start");
        let mut seen = vec![w];
        for _ in 0..6 {
            w = p.adjust(w, 199_000);
            seen.push(w);
        }
        assert_eq!(
            seen,
            [10_000, 20_000, 40_000, 80_000, 160_000, 200_000, 200_000],
            "doubles, capped at halt_poll_ns"
        );
        assert_eq!(hp(0, 10_000, 0).adjust(0, 50_000), 0, "grow 0: never grows");
        assert_eq!(
            hp(3, 10_000, 0).adjust(20_000, 50_000),
            60_000,
            "grow 3 triples"
        );
    }

    #[test]
    fn halt_poll_keeps_its_window_when_the_wake_comes_within_it() {
        let p = hp(2, 10_000, 0);
        assert_eq!(p.adjust(40_000, 40_000), 40_000);
        assert_eq!(
            p.adjust(40_000, 3_000),
            40_000,
            "a short poll does not shrink"
        );
        // A halt as long as the cap neither grows nor shrinks.
        assert_eq!(p.adjust(40_000, 200_000), 40_000);
        // A halt longer than the cap does not start a window from 0.
        assert_eq!(p.adjust(0, 1_000_000), 0);
    }

    #[test]
    fn halt_poll_shrink_0_resets_and_shrink_2_halves_down_to_grow_start() {
        // A halt longer than the cap shrinks the window.
        assert_eq!(
            hp(2, 10_000, 0).adjust(160_000, 1_000_000),
            0,
            "shrink 0 resets"
        );
        let p = hp(2, 10_000, 2);
        assert_eq!(p.adjust(160_000, 1_000_000), 80_000, "shrink 2 halves");
        assert_eq!(p.adjust(20_000, 1_000_000), 10_000);
        assert_eq!(p.adjust(10_000, 1_000_000), 0, "below grow_start: 0");
        // The cap 0 turns polling off whatever the window was.
        let off = HaltPoll { max_ns: 0, ..p };
        assert_eq!(off.adjust(80_000, 10), 0);
    }

    fn vmx() -> PleWindow {
        KvmKnobs::defaults(Arch::X86).ple.unwrap()
    }

    #[test]
    fn ple_window_doubles_at_each_exit_and_resets_when_scheduled_in() {
        let p = vmx();
        assert_eq!(
            (p.base, p.grow, p.shrink),
            (4096, 2, 0),
            "kvm_intel defaults"
        );
        let mut w = p.base;
        for k in 1..=4 {
            w = p.grow(w);
            assert_eq!(w, 4096 << k);
        }
        assert_eq!(
            p.shrink(w),
            4096,
            "ple_window_shrink 0 resets to ple_window"
        );
        assert_eq!(
            p.trap_ns(4096 << 4, 2000),
            32_000,
            "16 base windows of 2 µs"
        );
        assert_eq!(
            p.grow(u32::MAX as u64),
            u32::MAX as u64,
            "capped at ple_window_max"
        );
    }

    #[test]
    fn ple_window_grow_and_shrink_above_the_base_add_and_subtract() {
        let p = PleWindow {
            base: 4096,
            grow: 5000,
            shrink: 5000,
            max: 20_000,
        };
        assert_eq!(p.grow(4096), 9096, "a modifier at least the base is added");
        assert_eq!(p.grow(19_000), 20_000, "at most max");
        assert_eq!(p.shrink(12_000), 7000, "and subtracted");
        assert_eq!(p.shrink(6000), 4096, "never below the base");
        let q = PleWindow { shrink: 2, ..p };
        assert_eq!(q.shrink(16_000), 8000, "a small modifier divides");
        let r = PleWindow { grow: 0, ..p };
        assert_eq!(r.grow(16_000), 4096, "grow 0 resets to the base");
    }
}
