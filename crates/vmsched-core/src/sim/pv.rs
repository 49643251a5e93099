//! Locks in guests and the paravirtual interfaces around them: the `Lock`/`Unlock` steps of
//! the spinlock workload (workload/spinlock.rs), the PV qspinlock's wait (the waiter halts its
//! vCPU) and kick (the unlocker wakes it), the PAUSE-loop exits of a spinning waiter, a
//! sleeping mutex whose owner spinning reads `vcpu_is_preempted`, call-function IPIs with PV
//! sched yield (`CallFunc` steps), and the guest's cpuidle-haltpoll governor.
//!
//! Sources (read for facts; docs/pvops.md): Linux `kernel/locking/qspinlock.c` and
//! `qspinlock_paravirt.h` (`pv_wait_node`, `pv_wait_head_or_lock`: spin `SPIN_THRESHOLD`
//! iterations, then `pv_wait`; `__pv_queued_spin_unlock_slowpath`: `pv_kick` of the halted
//! head), `arch/x86/kernel/kvm.c` (`kvm_wait`: halt unless the lock byte changed;
//! `kvm_kick_cpu`: the KVM_HC_KICK_CPU hypercall), `arch/x86/kvm/x86.c`
//! (`kvm_pv_kick_cpu_op`: mark the target unhalted and `kvm_vcpu_kick` it),
//! `arch/x86/xen/spinlock.c` (`xen_qlock_wait`: poll the CPU's lock event channel, a
//! SCHEDOP_poll that blocks the vCPU; `xen_qlock_kick`: send it), `kernel/locking/mutex.c`
//! (`mutex_spin_on_owner`: spin while the owner is on a CPU and that CPU's vCPU is not
//! preempted) and `include/asm-generic/qspinlock.h` / `arch/x86/include/asm/qspinlock.h`
//! (`virt_spin_lock`: test-and-set), `kernel/smp.c` (`smp_call_function_many`: one target
//! takes `send_call_function_single_ipi`, several `send_call_func_ipi`) with
//! `arch/x86/kernel/kvm.c` (`kvm_smp_send_call_func_ipi`: KVM_HC_SCHED_YIELD for the first
//! busy preempted target) and `arch/x86/kvm/x86.c` (`kvm_sched_yield`: `kvm_vcpu_yield_to` a
//! `ready` target), and `drivers/cpuidle/governors/haltpoll.c` (crate::pv::Haltpoll).
//!
//! State: a lock is a workload channel (one token while free, `Channel::owner` the holder);
//! its `waiters` are the waiting tasks in arrival order (the ticket order, the MCS queue).
//! A waiting task carries a [`LockWait`]. Everything here runs only for tasks of a spinlock
//! workload: the engine's other paths test one `Option` (`Task::lock_wait`) at most.

use super::*;
use crate::workload::spinlock::LockKind;

/// How often a mutex waiter spinning on its owner looks at the owner again (the real loop
/// looks at every iteration; the model at this granularity, and at every PAUSE-loop exit).
const OWNER_CHECK_NS: Nanos = 1_000;

/// A task waiting for a lock, spinning or halted (a sleeping mutex waiter has none).
#[derive(Clone, Copy, Debug)]
pub(super) struct LockWait {
    chan: Chan,
    /// The kind as resolved for the task's guest (`spinlock` is gone).
    kind: LockKind,
    /// Spinning left before a PV waiter halts ([`NEVER`] for the other kinds).
    spin_left: Nanos,
    /// The spin the current compute covers (a PAUSE-loop window, the rest of the threshold).
    chunk: Nanos,
    /// Spinning since the last PAUSE-loop exit (the trap window counts spin time).
    since_exit: Nanos,
    /// The chunk ends with a PAUSE-loop exit (the trap window is its binding limit).
    exits: bool,
    /// Halted in `pv_wait` (its vCPU is blocked at the host).
    halted: bool,
    /// The unlock handed it the lock; it goes on as soon as it runs.
    granted: bool,
}

impl Simulation {
    /// Step `Lock`: task `t`, on CPU `c`, tries lock `chan` of workload `wl`. Returns true if it
    /// took the lock at once (its program goes on), false if it waits (spinning, or asleep).
    pub(super) fn lock_acquire(
        &mut self,
        t: usize,
        c: GCpu,
        wl: usize,
        (chan, kind, hist): (Chan, LockKind, u16),
        measuring: bool,
    ) -> bool {
        let pv = self.levels[self.cpus[c.idx()].level.idx()].opts.pv;
        let kind = kind.resolve(pv.pv_spinlock);
        self.tasks[t].pc += 1;
        let ch = &mut self.wls[wl].chans[chan as usize];
        if ch.tokens > 0 && (!kind.fifo() || ch.waiters.is_empty()) {
            ch.tokens -= 1;
            ch.owner = Some(t);
            if measuring {
                self.wls[wl].hists[hist as usize].record(0);
            }
            return true;
        }
        ch.waiters.push_back(t);
        // The wait is recorded when the task next interprets its program: with the lock.
        self.tasks[t].latency_pending = Some((hist, self.now));
        if kind == LockKind::Mutex && !self.owner_spinnable(wl, chan) {
            self.mutex_sleep(t);
            return false;
        }
        let spin_left = if kind == LockKind::PvQspinlock && self.cpus[c.idx()].backing.is_some() {
            pv.spin_threshold_ns
        } else {
            NEVER
        };
        self.tasks[t].lock_wait = Some(LockWait {
            chan,
            kind,
            spin_left,
            chunk: 0,
            since_exit: 0,
            exits: false,
            halted: false,
            granted: false,
        });
        let chunk = self.lock_chunk(t, c);
        self.begin_compute(t, chunk, true);
        false
    }

    /// The next stretch of spinning of waiter `t` on CPU `c`: up to its PAUSE-loop exit (if
    /// its guest's spins trap), its PV threshold, or a mutex's next look at its owner.
    fn lock_chunk(&mut self, t: usize, c: GCpu) -> Nanos {
        let trap = self.spin_trap_ns(c).unwrap_or(NEVER);
        let lw = self.tasks[t]
            .lock_wait
            .as_mut()
            .expect("invariant: a spinning waiter waits");
        let look = if lw.kind == LockKind::Mutex {
            OWNER_CHECK_NS
        } else {
            NEVER
        };
        let to_exit = trap.saturating_sub(lw.since_exit);
        lw.chunk = to_exit.min(lw.spin_left).min(look);
        lw.exits = trap != NEVER && lw.chunk == to_exit;
        lw.chunk
    }

    /// Waiter `t` spun its chunk without getting the lock (slot `TaskDone`): a PV waiter out
    /// of threshold halts; a mutex waiter whose owner stopped running sleeps; otherwise the
    /// spin traps (a PAUSE-loop exit: the host's yield or directed yield) and goes on.
    pub(super) fn lock_spin_done(&mut self, t: usize) {
        let c = self
            .task_cpu(t)
            .expect("invariant: a spinning waiter is on a CPU");
        let now = self.now;
        let task = &mut self.tasks[t];
        task.executed += now - task.run_since.expect("a spinning waiter was progressing");
        task.run_since = Some(now);
        task.remaining = 0;
        let lw = task
            .lock_wait
            .as_mut()
            .expect("invariant: a spinning waiter waits");
        lw.spin_left = lw.spin_left.saturating_sub(lw.chunk);
        lw.since_exit = if lw.exits {
            0
        } else {
            lw.since_exit + lw.chunk
        };
        let (kind, chan, wl, exits) = (lw.kind, lw.chan, task.wl, lw.exits);
        if exits {
            self.ple_grow(c);
        }
        if kind == LockKind::PvQspinlock
            && self.tasks[t].lock_wait.is_some_and(|w| w.spin_left == 0)
        {
            self.pv_wait(t, c);
            return;
        }
        if kind == LockKind::Mutex {
            if self.wls[wl].chans[chan as usize].tokens > 0 {
                // Free (its owner unlocked while no waiter ran): this spinner takes it.
                self.take_free_lock(t, wl, chan);
                return;
            }
            if !self.owner_spinnable(wl, chan) {
                self.tasks[t].lock_wait = None;
                self.mutex_sleep(t);
                return;
            }
        }
        let chunk = self.lock_chunk(t, c);
        self.tasks[t].remaining = chunk;
        if exits {
            self.pause_loop_exit(c);
        }
        if self.tasks[t].run_since.is_some() {
            let at = self.now + self.tasks[t].overhead + chunk;
            self.q.arm(self.tasks[t].done_slot, at);
        }
    }

    /// `pv_wait` of waiter `t` on CPU `c`: its vCPU halts with the waiter current (KVM's
    /// `kvm_wait` executes HLT; Xen's `xen_qlock_wait` blocks in SCHEDOP_poll). Only the
    /// unlock's kick or another guest interrupt wakes it.
    fn pv_wait(&mut self, t: usize, c: GCpu) {
        let b = self.cpus[c.idx()]
            .backing
            .expect("invariant: only a vCPU's waiter halts");
        self.tasks[t]
            .lock_wait
            .as_mut()
            .expect("invariant: a halting waiter waits")
            .halted = true;
        if self.cpus[c.idx()].pending.wakes_halt() {
            // An interrupt is pending: the halt returns at once and the waiter spins again.
            self.lock_resume(t);
            return;
        }
        if self.ents[b.idx()].state == RunState::Running {
            self.block_entity(b);
        }
    }

    /// Task `t` resumes progress (its CPU chain runs again) while waiting for a lock, from
    /// `start_progress`. Returns true if it handled the resumption: a granted waiter goes on
    /// with the lock, a halted one woken by anything but its kick spins its threshold again
    /// (`pv_wait_node`'s loop), a test-and-set spinner finding the lock free takes it.
    pub(super) fn lock_resume(&mut self, t: usize) -> bool {
        let lw = self.tasks[t]
            .lock_wait
            .expect("invariant: lock_resume of a waiter");
        if lw.granted {
            self.lock_proceed(t);
            return true;
        }
        if lw.halted {
            let c = self
                .task_cpu(t)
                .expect("invariant: a halted waiter is current on its CPU");
            let threshold = self.levels[self.cpus[c.idx()].level.idx()]
                .opts
                .pv
                .spin_threshold_ns;
            let w = self.tasks[t].lock_wait.as_mut().expect("checked");
            w.halted = false;
            w.spin_left = threshold;
            let chunk = self.lock_chunk(t, c);
            self.begin_compute(t, chunk, true);
            return true;
        }
        if !lw.kind.fifo() {
            let wl = self.tasks[t].wl;
            if self.wls[wl].chans[lw.chan as usize].tokens > 0 {
                self.take_free_lock(t, wl, lw.chan);
                return true;
            }
        }
        false
    }

    /// Spinner `t` (among the waiters) finds lock `chan` of `wl` free and takes it.
    fn take_free_lock(&mut self, t: usize, wl: usize, chan: Chan) {
        let ch = &mut self.wls[wl].chans[chan as usize];
        ch.tokens -= 1;
        ch.owner = Some(t);
        let i = ch
            .waiters
            .iter()
            .position(|&w| w == t)
            .expect("invariant: a spinner is among its lock's waiters");
        ch.waiters.remove(i);
        self.lock_proceed(t);
    }

    /// Step `Unlock` by task `t` on CPU `c`: the lock goes to the next waiter (a fair lock, a
    /// mutex), to the first running spinner (test-and-set), or becomes free.
    pub(super) fn lock_release(
        &mut self,
        t: usize,
        c: GCpu,
        wl: usize,
        chan: Chan,
        kind: LockKind,
    ) {
        let pv = self.levels[self.cpus[c.idx()].level.idx()].opts.pv;
        let kind = kind.resolve(pv.pv_spinlock);
        self.tasks[t].pc += 1;
        let ch = &mut self.wls[wl].chans[chan as usize];
        debug_assert_eq!(ch.owner, Some(t), "invariant: the owner unlocks");
        ch.owner = None;
        if !kind.fifo() {
            // The lock word is free: a running spinner sees it first (test-and-set; a mutex's
            // spinners on the owner); a preempted one only when it runs again.
            let tasks = &self.tasks;
            if let Some(i) = ch
                .waiters
                .iter()
                .position(|&w| tasks[w].lock_wait.is_some() && tasks[w].run_since.is_some())
            {
                let w = ch.waiters.remove(i).expect("found");
                ch.owner = Some(w);
                self.lock_proceed(w);
                return;
            }
        }
        // A fair lock's next waiter, or a mutex's first sleeper (`__mutex_unlock_slowpath`
        // wakes it; handed the mutex here).
        let next = match kind {
            LockKind::Tas => None,
            LockKind::Mutex => {
                let tasks = &self.tasks;
                ch.waiters
                    .iter()
                    .position(|&w| tasks[w].lock_wait.is_none())
                    .and_then(|i| ch.waiters.remove(i))
            }
            _ => ch.waiters.pop_front(),
        };
        let Some(w) = next else {
            ch.tokens += 1;
            return;
        };
        ch.owner = Some(w);
        if self.tasks[w].lock_wait.is_none() {
            // A sleeping mutex waiter: handed the mutex and woken.
            self.tasks[w].phase = Phase::Ready;
            let waker_cpu = Some(self.cpus[c.idx()].local);
            let waker = Some(self.ents[self.tasks[t].ent.idx()].local);
            self.wake_entity(
                self.tasks[w].ent,
                WakeInfo {
                    cause: WakeCause::Unblock,
                    waker_cpu,
                    waker,
                    parent: None,
                    sync: false,
                },
            );
            return;
        }
        let lw = self.tasks[w].lock_wait.as_mut().expect("checked");
        lw.granted = true;
        let halted = lw.halted;
        if self.tasks[w].run_since.is_some() {
            self.lock_proceed(w);
        } else if halted {
            // pv_kick: KVM_HC_KICK_CPU (`kvm_pv_kick_cpu_op` → `kvm_vcpu_kick`), or Xen's
            // event on the waiter's lock channel: its halted vCPU is woken. A waiter that a
            // guest CPU's offline moved off its halted vCPU is queued elsewhere: granted, it
            // goes on when it runs (`lock_resume`).
            if let Some(cw) = self.task_cpu(w) {
                self.kick_backing(cw, WakeCause::Ipi);
            }
        }
        // Otherwise the waiter is preempted: the lock is its own (a fair lock cannot skip
        // it) and it goes on when it runs again (`lock_resume`).
    }

    /// Waiter `t` has the lock: its spin ends now and its program goes on (at once if it is
    /// running, else when it runs).
    fn lock_proceed(&mut self, t: usize) {
        let running = self.tasks[t].run_since.is_some();
        self.stop_progress(t);
        let task = &mut self.tasks[t];
        task.lock_wait = None;
        task.phase = Phase::Ready;
        task.remaining = 0;
        if running {
            task.run_since = Some(self.now);
            self.actions.push_back(Action::Advance(t));
        }
    }

    /// `mutex_spin_on_owner`'s condition for mutex `chan` of `wl`: its owner is current on a
    /// CPU and, when the guest reads `vcpu_is_preempted`, that CPU's vCPU is not preempted.
    /// Without the flag (arm64) a waiter spins on an owner whose vCPU the host preempted.
    fn owner_spinnable(&self, wl: usize, chan: Chan) -> bool {
        let Some(o) = self.wls[wl].chans[chan as usize].owner else {
            return false;
        };
        let Some(oc) = self.task_cpu(o) else {
            return false;
        };
        let cs = &self.cpus[oc.idx()];
        let lv = &self.levels[cs.level.idx()];
        !(lv.opts.pv.vcpu_is_preempted && lv.cpu_info[cs.local.idx()].vcpu_is_preempted())
    }

    /// Mutex waiter `t` (already among the waiters) goes to sleep until the unlock hands it
    /// the mutex.
    fn mutex_sleep(&mut self, t: usize) {
        let task = &mut self.tasks[t];
        task.phase = Phase::Blocked;
        task.remaining = 0;
        let g = task.ent;
        self.block_entity(g);
    }

    /// How the idle vCPU behind `c` leaves its pCPU, and whether the window is the guest's own
    /// poll: with cpuidle-haltpoll the guest polls for its CPU's poll limit before HLT
    /// (`haltpoll_select`: no poll while the limit is 0), and the host does not poll (the
    /// guest turned it off through MSR_KVM_POLL_CONTROL, `arch_haltpoll_enable`; the build
    /// gives such a guest the `Block` halt). Otherwise the exit model's window.
    #[inline]
    pub(super) fn idle_window(&self, c: GCpu) -> (HaltWindow, bool) {
        let cs = &self.cpus[c.idx()];
        let opts = &self.levels[cs.level.idx()].opts;
        match opts.pv.haltpoll {
            Some(_) if cs.poll_limit > 0 => (
                HaltWindow::After(cs.poll_limit.saturating_add(opts.exit.hypercall_ns)),
                true,
            ),
            _ => (opts.exit.halt_window(cs.kvm.halt_poll_ns), false),
        }
    }

    /// The idle vCPU behind `c` starts a halt (it runs, has nothing pending and no halt in
    /// progress): under KVM halt-polling the halt's start is recorded for the window's
    /// adjustment, and a halt still open (the vCPU ran again after a wake and found nothing to
    /// do: `kvm_vcpu_halt` returned) ends first.
    #[inline]
    pub(super) fn kvm_halt_begins(&mut self, c: GCpu) {
        if !matches!(
            self.levels[self.cpus[c.idx()].level.idx()].opts.exit.halt,
            crate::hv::Halt::Poll(_)
        ) {
            return;
        }
        if self.cpus[c.idx()].kvm.halt_start.is_some() {
            self.kvm_halt_ends(c);
        }
        self.cpus[c.idx()].kvm.halt_start = Some(self.now);
    }

    /// The halt of the vCPU behind `c` is over (its guest runs something again): the halt's
    /// length from its start (after the exit's `hypercall_ns`) to now, the vCPU thread running
    /// again, adjusts the vCPU's poll window. Linux: the tail of `kvm_vcpu_halt`.
    #[cold]
    pub(super) fn kvm_halt_ends(&mut self, c: GCpu) {
        let exit = self.levels[self.cpus[c.idx()].level.idx()].opts.exit;
        let cs = &mut self.cpus[c.idx()];
        let t0 = cs.kvm.halt_start.take().expect("invariant: a halt is open");
        if let crate::hv::Halt::Poll(p) = exit.halt {
            let halt_ns = (self.now - t0).saturating_sub(exit.hypercall_ns);
            cs.kvm.halt_poll_ns = p.adjust(cs.kvm.halt_poll_ns, halt_ns);
        }
    }

    /// Guest CPU `c`'s KVM halt-poll window (`vcpu->halt_poll_ns`), for tests.
    pub fn kvm_halt_poll_ns(&self, level: LevelId, cpu: CpuId) -> Nanos {
        self.cpus[self.levels[level.idx()].cpu_g[cpu.idx()].idx()]
            .kvm
            .halt_poll_ns
    }

    /// Guest CPU `c`'s KVM PAUSE-loop window (VMX `ple_window`, SVM `pause_filter_count`), for
    /// tests.
    pub fn kvm_ple_window(&self, level: LevelId, cpu: CpuId) -> u64 {
        self.cpus[self.levels[level.idx()].cpu_g[cpu.idx()].idx()]
            .kvm
            .ple_window
    }

    /// How long a trappable spin on guest CPU `c` runs before it exits: its vCPU's PAUSE-loop
    /// window under x86 KVM, the exit model's fixed trap otherwise; None: it never traps (not
    /// trapped, or `c` is a physical CPU).
    #[inline]
    pub(super) fn spin_trap_ns(&self, c: GCpu) -> Option<Nanos> {
        let cs = &self.cpus[c.idx()];
        cs.backing?;
        self.levels[cs.level.idx()]
            .opts
            .exit
            .spin_trap_ns(cs.kvm.ple_window)
    }

    /// The spin on guest CPU `c` made a PAUSE-loop exit: its vCPU's window grows (VMX
    /// `grow_ple_window` from `handle_pause`, before `kvm_vcpu_on_spin`).
    #[inline]
    pub(super) fn ple_grow(&mut self, c: GCpu) {
        if let Some(p) = self.levels[self.cpus[c.idx()].level.idx()].opts.exit.ple {
            let cs = &mut self.cpus[c.idx()];
            cs.kvm.ple_window = p.grow(cs.kvm.ple_window);
        }
    }

    /// The vCPU behind guest CPU `vc` is scheduled in at the host: its PAUSE-loop window
    /// shrinks (5.10 `kvm_sched_in` → `vmx_sched_in`; 6.12 `vmx_vcpu_load` after a
    /// schedule-out; `shrink_ple_window`).
    #[inline]
    pub(super) fn ple_shrink(&mut self, vc: GCpu) {
        if let Some(p) = self.levels[self.cpus[vc.idx()].level.idx()].opts.exit.ple {
            let cs = &mut self.cpus[vc.idx()];
            cs.kvm.ple_window = p.shrink(cs.kvm.ple_window);
        }
    }

    /// The idle vCPU behind `c` halts: with cpuidle-haltpoll its HLT state begins now.
    #[inline]
    pub(super) fn haltpoll_halting(&mut self, c: GCpu) {
        if self.levels[self.cpus[c.idx()].level.idx()]
            .opts
            .pv
            .haltpoll
            .is_some()
        {
            self.cpus[c.idx()].halted_at = Some(self.now);
        }
    }

    /// The vCPU behind `c` runs again after an idle halt: the HLT state's residency adjusts
    /// the CPU's poll limit (`haltpoll_reflect` → `adjust_poll_limit`; a poll that ended with
    /// an event leaves it).
    #[cold]
    pub(super) fn haltpoll_reflect(&mut self, c: GCpu) {
        let t0 = self.cpus[c.idx()]
            .halted_at
            .take()
            .expect("invariant: reflect after a halt");
        let h = self.levels[self.cpus[c.idx()].level.idx()]
            .opts
            .pv
            .haltpoll
            .expect("invariant: only a haltpoll guest records its halts");
        let cs = &mut self.cpus[c.idx()];
        cs.poll_limit = h.adjust(cs.poll_limit, self.now - t0);
    }

    /// Guest CPU `c`'s current poll limit (cpuidle-haltpoll), for tests.
    pub fn poll_limit_ns(&self, level: LevelId, cpu: CpuId) -> Nanos {
        self.cpus[self.levels[level.idx()].cpu_g[cpu.idx()].idx()].poll_limit
    }

    /// Step `CallFunc` of task `t` on CPU `c`: a call-function IPI to every CPU of `mask` but
    /// `c` (`smp_call_function_many`). A target that executes runs the function at once; the
    /// others get it pending (a halted vCPU is kicked) and the sender spins until they have
    /// run it (`csd_lock_wait`, with PAUSE: PAUSE-loop exits where they trap). Returns true
    /// if nothing is left to wait for. With more than one target and PV sched yield, the
    /// first target that is busy and whose vCPU is preempted gets a directed yield from the
    /// sender's vCPU (`kvm_smp_send_call_func_ipi` → KVM_HC_SCHED_YIELD → `kvm_sched_yield`).
    pub(super) fn call_function(&mut self, t: usize, c: GCpu, mask: u64) -> bool {
        let l = self.cpus[c.idx()].level;
        let me = self.cpus[c.idx()].local.0;
        let targets = mask & !(1u64 << me.min(63));
        let mut waiting = 0u64;
        let mut k = targets;
        while k != 0 {
            let i = k.trailing_zeros();
            k &= k - 1;
            let tc = self.levels[l.idx()].cpu_g[i as usize];
            if !self.cpus[tc.idx()].executing {
                waiting |= 1 << i;
                self.cpus[tc.idx()].pending.raise(PendingIrqs::CALL_FUNC);
                self.kick_backing(tc, WakeCause::Ipi);
            }
        }
        if waiting == 0 {
            return true;
        }
        self.tasks[t].csd_wait = Some(waiting);
        let chunk = self.csd_chunk(c);
        self.begin_compute(t, chunk, true);
        if targets.count_ones() > 1 && self.levels[l.idx()].opts.pv.pv_sched_yield {
            self.pv_sched_yield(c, targets);
        }
        false
    }

    /// The sender's spin until its next PAUSE-loop exit ([`NEVER`] if its spins do not trap).
    fn csd_chunk(&self, c: GCpu) -> Nanos {
        self.spin_trap_ns(c).unwrap_or(NEVER)
    }

    /// A sender's spin reached a PAUSE-loop exit (slot `TaskDone`): the vCPU exits and yields
    /// (directed, under KVM), and the spin goes on.
    pub(super) fn csd_spin_done(&mut self, t: usize) {
        let c = self
            .task_cpu(t)
            .expect("invariant: a spinning sender is on a CPU");
        self.ple_grow(c);
        let chunk = self.csd_chunk(c);
        let task = &mut self.tasks[t];
        task.executed += self.now - task.run_since.expect("a spinning sender was progressing");
        task.run_since = Some(self.now);
        task.remaining = chunk;
        self.pause_loop_exit(c);
        if self.tasks[t].run_since.is_some() {
            let at = self.now + self.tasks[t].overhead + chunk;
            self.q.arm(self.tasks[t].done_slot, at);
        }
    }

    /// KVM_HC_SCHED_YIELD from the vCPU behind `c` for the first CPU of `targets` that is
    /// busy (a current task) and whose vCPU is preempted (the guest's check, with
    /// `vcpu_is_preempted`); the host (`kvm_sched_yield`) yields to that vCPU if it is
    /// `ready`, through its `yield_to`; a host without one does nothing.
    fn pv_sched_yield(&mut self, c: GCpu, targets: u64) {
        let l = self.cpus[c.idx()].level;
        let Some(me) = self.cpus[c.idx()].backing else {
            return;
        };
        let mut k = targets;
        while k != 0 {
            let i = k.trailing_zeros();
            k &= k - 1;
            let lv = &self.levels[l.idx()];
            let ci = &lv.cpu_info[i as usize];
            if ci.curr.is_none() || !(lv.opts.pv.vcpu_is_preempted && ci.vcpu_is_preempted()) {
                continue;
            }
            let tc = lv.cpu_g[i as usize];
            let b = self.cpus[tc.idx()]
                .backing
                .expect("invariant: a preempted CPU is a vCPU");
            let (hl, he, target) = (
                self.ents[me.idx()].level,
                self.ents[me.idx()].local,
                self.ents[b.idx()].local,
            );
            let pc = self
                .cpu_of_ent(me)
                .expect("invariant: the sending vCPU runs");
            if self.with_sched(hl, |s, ctx| s.yield_to(ctx, he, target)) == Some(true) {
                self.do_schedule(pc);
            }
            return;
        }
    }

    /// The vCPU behind `vc` runs again with a call-function IPI pending: its function runs
    /// now, and every sender waiting for this CPU stops waiting for it (cold: only programs
    /// with `call_func` steps raise the IPI).
    #[cold]
    pub(super) fn call_function_done(&mut self, vc: GCpu) {
        let (l, bit) = (
            self.cpus[vc.idx()].level,
            1u64 << self.cpus[vc.idx()].local.0.min(63),
        );
        for t in 0..self.tasks.len() {
            let Some(w) = self.tasks[t].csd_wait else {
                continue;
            };
            if w & bit == 0 || self.ents[self.tasks[t].ent.idx()].level != l {
                continue;
            }
            if w == bit {
                self.tasks[t].csd_wait = None;
                let running = self.tasks[t].run_since.is_some();
                self.stop_progress(t);
                let task = &mut self.tasks[t];
                task.phase = Phase::Ready;
                task.remaining = 0;
                if running {
                    task.run_since = Some(self.now);
                    self.actions.push_back(Action::Advance(t));
                }
            } else {
                self.tasks[t].csd_wait = Some(w & !bit);
            }
        }
    }
}
