//! Tasks: interpreting their step programs, their progress while their CPU executes, sleep
//! timers with slack, channels, spinning and trapped spin-waits (WFE, PAUSE loops).

use super::*;
use crate::workload::video;

impl Simulation {
    // ---- tasks ---------------------------------------------------------------------------

    pub(super) fn task_cpu(&self, t: usize) -> Option<GCpu> {
        self.cpu_of_ent(self.tasks[t].ent)
    }

    pub(super) fn start_progress(&mut self, t: usize) {
        let now = self.now;
        let task = &mut self.tasks[t];
        task.run_since = Some(now);
        if task.lock_wait.is_some() && self.lock_resume(t) {
            return;
        }
        let task = &mut self.tasks[t];
        match task.phase {
            Phase::Computing => {
                let at = now
                    .saturating_add(task.overhead)
                    .saturating_add(task.remaining)
                    .min(NEVER);
                self.q.arm(task.done_slot, at);
            }
            Phase::Ready => self.actions.push_back(Action::Advance(t)),
            _ => {}
        }
    }

    pub(super) fn stop_progress(&mut self, t: usize) {
        let now = self.now;
        let task = &mut self.tasks[t];
        if let Some(s) = task.run_since.take() {
            let mut el = now - s;
            task.executed += el;
            let o = el.min(task.overhead);
            task.overhead -= o;
            el -= o;
            if task.phase == Phase::Computing {
                task.remaining = task.remaining.saturating_sub(el);
            }
            self.q.cancel(task.done_slot);
        }
    }

    pub(super) fn begin_compute(&mut self, t: usize, d: Nanos, kernel: bool) {
        let now = self.now;
        let task = &mut self.tasks[t];
        task.phase = Phase::Computing;
        task.remaining = d;
        task.kernel = kernel;
        if let Some(s) = task.run_since {
            task.executed += now - s;
            task.run_since = Some(now);
            let at = now
                .saturating_add(task.overhead)
                .saturating_add(d)
                .min(NEVER);
            self.q.arm(task.done_slot, at);
        }
    }

    pub(super) fn compute_done(&mut self, t: usize) {
        if self.tasks[t].lock_wait.is_some() {
            self.lock_spin_done(t);
            return;
        }
        if self.tasks[t].csd_wait.is_some() {
            self.csd_spin_done(t);
            return;
        }
        if self.tasks[t].spin_block {
            self.spin_bound_out(t);
            return;
        }
        if self.tasks[t].spinning.is_some() {
            self.spin_trap(t);
            return;
        }
        let task = &mut self.tasks[t];
        task.overhead = 0;
        task.remaining = 0;
        task.executed += self.now - task.run_since.expect("a finishing task was progressing");
        task.run_since = Some(self.now);
        task.phase = Phase::Ready;
        let kernel = std::mem::replace(&mut task.kernel, false);
        let c = self
            .task_cpu(t)
            .expect("invariant: a computing task is on a CPU");
        if kernel && self.cpus[c.idx()].need_resched {
            // The syscall exits: the deferred reschedule happens now.
            self.do_schedule(c);
            if self.task_cpu(t) != Some(c) {
                return;
            }
        }
        self.advance(t);
    }

    /// A trappable spin-wait (WFE, a PAUSE loop) traps to the host: its vCPU yields, then spins
    /// on. KVM's directed yield ([`Spin::DirectedYield`](crate::hv::Spin)) goes to another vCPU
    /// of the guest through the host's `yield_to` ([`Self::vcpu_on_spin`]); a host without one
    /// makes it a plain yield.
    pub(super) fn spin_trap(&mut self, t: usize) {
        let c = self
            .task_cpu(t)
            .expect("invariant: a spinning task is on a CPU");
        self.ple_grow(c);
        let chunk = self
            .spin_trap_ns(c)
            .expect("invariant: only a trapping spin ends its chunk");
        let task = &mut self.tasks[t];
        task.remaining = chunk;
        task.executed += self.now - task.run_since.expect("a spinning task was progressing");
        task.run_since = Some(self.now);
        self.pause_loop_exit(c);
        if self.tasks[t].run_since.is_some() {
            let at = self.now + self.tasks[t].overhead + chunk;
            self.q.arm(self.tasks[t].done_slot, at);
        }
    }

    /// The spin on guest CPU `c` traps (a PAUSE-loop exit, a trapped WFE): its vCPU yields at
    /// the host, by KVM's directed yield where the exit model says so.
    pub(super) fn pause_loop_exit(&mut self, c: GCpu) {
        if let Some(b) = self.cpus[c.idx()].backing {
            let (l, e) = (self.ents[b.idx()].level, self.ents[b.idx()].local);
            let pc = self
                .cpu_of_ent(b)
                .expect("invariant: an executing vCPU runs");
            let directed = matches!(
                self.levels[self.cpus[c.idx()].level.idx()].opts.exit.spin,
                crate::hv::Spin::DirectedYield { .. }
            );
            match directed.then(|| self.vcpu_on_spin(c, b)).flatten() {
                Some(false) => {}
                Some(true) => {
                    self.do_schedule(pc);
                    // Not switched out after all: `kvm_vcpu_on_spin` ends now (else when the
                    // vCPU executes again, `start_executing`).
                    if self.cpus[c.idx()].executing {
                        self.cpus[c.idx()].kvm.spin_loop.leave();
                    }
                }
                None => {
                    self.with_sched(l, |s, ctx| s.yield_(ctx, e));
                    self.do_schedule(pc);
                }
            }
        }
    }

    /// A `SpinBlock`'s spin used up its bound without a token: the task stops spinning and
    /// sleeps on the channel, as a `Wait` (its program counter is already past the step).
    fn spin_bound_out(&mut self, t: usize) {
        let task = &mut self.tasks[t];
        let chan = task
            .spinning
            .take()
            .expect("invariant: a spin-then-block task spins");
        task.spin_block = false;
        task.remaining = 0;
        task.executed += self.now - task.run_since.expect("a spinning task was progressing");
        task.run_since = Some(self.now);
        task.phase = Phase::Blocked;
        let (wl, g) = (task.wl, task.ent);
        let ch = &mut self.wls[wl].chans[chan as usize];
        let i = ch
            .spinners
            .iter()
            .position(|&s| s == t)
            .expect("invariant: a spinning task is among its channel's spinners");
        ch.spinners.remove(i);
        ch.waiters.push_back(t);
        self.block_entity(g);
    }

    /// KVM's `kvm_vcpu_on_spin` for the spinning guest CPU `c`, whose vCPU is `me` (running
    /// at the host): the other vCPUs of the guest, in order from the one after the guest's
    /// `last_boosted_vcpu` and wrapping, are candidates if they are preempted at the host
    /// (runnable and not running: KVM's `vcpu->ready`; a halted vCPU is not runnable). Each gets
    /// the host's `yield_to(candidate, preempt = true)` until one succeeds (recorded as the new
    /// `last_boosted_vcpu`) or three have failed. Returns None if the host has no directed yield,
    /// else whether `me` yielded. A candidate that is itself in `kvm_vcpu_on_spin` (switched out
    /// by its own directed yield) is eligible only every other time it is considered
    /// ([`SpinLoop`](crate::hv::SpinLoop)); `me` is in its spin loop from here until it executes
    /// again. Not modelled: the yield-to-kernel-mode rule (docs/kvm.md).
    #[cold]
    fn vcpu_on_spin(&mut self, c: GCpu, me: GEnt) -> Option<bool> {
        let gl = self.cpus[c.idx()].level;
        let n = self.levels[gl.idx()].cpu_g.len() as u32;
        let start = self.levels[gl.idx()].last_boosted;
        let (hl, he) = (self.ents[me.idx()].level, self.ents[me.idx()].local);
        // Does the host have a directed yield at all? (A running target is always refused.)
        self.with_sched(hl, |s, ctx| s.yield_to(ctx, he, he))?;
        self.cpus[c.idx()].kvm.spin_loop.enter();
        let yielded = self.vcpu_on_spin_candidates(gl, n, start, me, hl, he);
        if !yielded {
            self.cpus[c.idx()].kvm.spin_loop.leave();
        }
        Some(yielded)
    }

    /// `kvm_vcpu_on_spin`'s walk over the candidates: whether `me` yielded to one.
    fn vcpu_on_spin_candidates(
        &mut self,
        gl: crate::ids::LevelId,
        n: u32,
        start: u32,
        me: GEnt,
        hl: crate::ids::LevelId,
        he: EntityId,
    ) -> bool {
        let mut tries = 3;
        for k in 1..=n {
            let i = (start + k) % n;
            let gc = self.levels[gl.idx()].cpu_g[i as usize];
            let Some(b) = self.cpus[gc.idx()].backing else {
                continue;
            };
            if b == me || self.ents[b.idx()].state != RunState::Runnable {
                continue;
            }
            if !self.cpus[gc.idx()]
                .kvm
                .spin_loop
                .eligible_for_directed_yield()
            {
                continue;
            }
            let target = self.ents[b.idx()].local;
            let r = self
                .with_sched(hl, |s, ctx| s.yield_to(ctx, he, target))
                .unwrap_or(false);
            if r {
                self.levels[gl.idx()].last_boosted = i;
                return true;
            }
            tries -= 1;
            if tries == 0 {
                break;
            }
        }
        false
    }

    pub(super) fn draw(&mut self, t: usize, d: Dist) -> Nanos {
        match d {
            Dist::Fixed(v) => v,
            Dist::Uniform(a, b) => self.tasks[t].rng.range(a, b),
            Dist::Exp(m) => self.tasks[t].rng.exp(m as f64),
        }
    }

    /// Interprets task `t`'s program from its `pc` until a step takes time or blocks.
    pub(super) fn advance(&mut self, t: usize) {
        let Some(c) = self.task_cpu(t) else { return };
        let cs = &self.cpus[c.idx()];
        if !cs.executing || cs.kwork || self.tasks[t].phase != Phase::Ready {
            return;
        }
        self.on_cpu(c, |sim| sim.interpret(t, c));
    }

    fn interpret(&mut self, t: usize, c: GCpu) {
        let measuring = self.now >= self.warmup;
        if let Some((h, expiry)) = self.tasks[t].latency_pending.take() {
            emit!(self.trace_latency(t, expiry));
            if measuring {
                let wl = self.tasks[t].wl;
                self.wls[wl].hists[h as usize].record(self.now - expiry);
            }
        }
        if self.tasks[t].overhead > 0 {
            // Pay the context switch before the step (kernel time).
            self.begin_compute(t, 0, true);
            return;
        }
        let wl = self.tasks[t].wl;
        for _ in 0..100_000 {
            let pc = self.tasks[t].pc;
            let step = self.tasks[t].program[pc];
            match step {
                Step::Compute { dur, kernel } => {
                    self.tasks[t].pc += 1;
                    let d = self.draw(t, dur);
                    if !kernel && self.cpus[c.idx()].need_resched {
                        // Return to user space with a reschedule pending.
                        self.tasks[t].phase = Phase::Computing;
                        self.tasks[t].remaining = d;
                        self.tasks[t].kernel = false;
                        self.do_schedule(c);
                        if self.task_cpu(t) == Some(c) && self.cpus[c.idx()].executing {
                            self.start_progress(t);
                        }
                        return;
                    }
                    self.begin_compute(t, d, kernel);
                    return;
                }
                Step::Wait {
                    chan,
                    block_cost,
                    slept,
                } => {
                    let ch = &mut self.wls[wl].chans[chan as usize];
                    if ch.tokens > 0 {
                        ch.tokens -= 1;
                        self.tasks[t].block_paid = false;
                        self.tasks[t].pc += 1;
                        continue;
                    }
                    if block_cost > 0 && !self.tasks[t].block_paid {
                        self.tasks[t].block_paid = true;
                        self.begin_compute(t, block_cost, true);
                        return;
                    }
                    self.tasks[t].block_paid = false;
                    self.tasks[t].pc += 1;
                    if let (Some(k), true) = (slept, measuring) {
                        self.wls[wl].counters[k as usize] += 1;
                    }
                    self.wls[wl].chans[chan as usize].waiters.push_back(t);
                    self.tasks[t].phase = Phase::Blocked;
                    let g = self.tasks[t].ent;
                    self.block_entity(g);
                    return;
                }
                Step::Signal {
                    chan,
                    sync,
                    wake_cost,
                } => {
                    self.tasks[t].pc += 1;
                    let woke = self.signal(wl, chan, Some(t), c, sync);
                    if woke && wake_cost > 0 {
                        self.begin_compute(t, wake_cost, true);
                        return;
                    }
                }
                Step::Spin { chan, wfe } => {
                    let ch = &mut self.wls[wl].chans[chan as usize];
                    self.tasks[t].pc += 1;
                    if ch.tokens > 0 {
                        ch.tokens -= 1;
                        continue;
                    }
                    ch.spinners.push(t);
                    // The exit model says whether a trappable spin traps, and after how long.
                    let trap = self.spin_trap_ns(c).filter(|_| wfe);
                    self.tasks[t].spinning = Some(chan);
                    self.begin_compute(t, trap.unwrap_or(NEVER), false);
                    return;
                }
                Step::Lock { lock, kind, hist } => {
                    if !self.lock_acquire(t, c, wl, (lock, kind, hist), measuring) {
                        return;
                    }
                }
                Step::Unlock { lock, kind } => {
                    self.lock_release(t, c, wl, lock, kind);
                    if self.task_cpu(t) != Some(c) {
                        return;
                    }
                }
                Step::SpinBlock { chan, bound } => {
                    let ch = &mut self.wls[wl].chans[chan as usize];
                    self.tasks[t].pc += 1;
                    if ch.tokens > 0 {
                        ch.tokens -= 1;
                        continue;
                    }
                    ch.spinners.push(t);
                    self.tasks[t].spinning = Some(chan);
                    self.tasks[t].spin_block = true;
                    self.begin_compute(t, bound, false);
                    return;
                }
                Step::NetSend {
                    part,
                    chan,
                    copy_ns,
                    rx_ns,
                } => {
                    self.tasks[t].pc += 1;
                    self.net_send(wl, part, chan, copy_ns.into(), rx_ns.into());
                }
                Step::JobMark { mark } => {
                    self.tasks[t].pc += 1;
                    self.job_mark(t, wl, mark);
                }
                Step::Sleep { dur, slack } => {
                    self.tasks[t].pc += 1;
                    let d = self.draw(t, dur);
                    self.sleep_until(t, c, self.now + d, slack);
                    return;
                }
                Step::Periodic {
                    interval,
                    slack,
                    hist,
                } => {
                    self.tasks[t].pc += 1;
                    let next = match self.tasks[t].periodic_next {
                        None => self.now + interval,
                        Some(mut n) => {
                            n += interval;
                            while n <= self.now {
                                n += interval;
                            }
                            n
                        }
                    };
                    self.tasks[t].periodic_next = Some(next);
                    self.tasks[t].latency_pending = Some((hist, next));
                    self.sleep_until(t, c, next, slack);
                    return;
                }
                Step::Frame {
                    period,
                    max_lateness,
                    drop_late,
                    counters,
                    hists,
                } => {
                    self.tasks[t].pc += 1;
                    let (c0, h0) = (counters as usize, hists as usize);
                    if self.frame(t, wl, period, max_lateness, drop_late, (c0, h0), measuring) {
                        let next = self.tasks[t].periodic_next.expect("set by frame");
                        self.tasks[t].latency_pending = Some((hists + video::WAKE, next));
                        self.sleep_until(t, c, next, 0);
                        return;
                    }
                }
                Step::Yield => {
                    self.tasks[t].pc += 1;
                    let (l, e) = (
                        self.ents[self.tasks[t].ent.idx()].level,
                        self.ents[self.tasks[t].ent.idx()].local,
                    );
                    self.with_sched(l, |s, ctx| s.yield_(ctx, e));
                    self.do_schedule(c);
                    if self.task_cpu(t) != Some(c) {
                        return;
                    }
                }
                Step::CallFunc { mask } => {
                    self.tasks[t].pc += 1;
                    if !self.call_function(t, c, mask) {
                        return;
                    }
                }
                Step::Ioreq => {
                    self.tasks[t].pc += 1;
                    // The vCPU is blocked in Xen; the task goes on when it runs again.
                    self.ioreq_send(c);
                    return;
                }
                Step::KickTimers => {
                    self.tasks[t].pc += 1;
                    self.kick_timer_queue();
                    if self.task_cpu(t) != Some(c) {
                        return;
                    }
                }
                Step::Ready { hist } => {
                    self.tasks[t].pc += 1;
                    if measuring {
                        let d = self.now - self.tasks[t].born;
                        self.wls[wl].hists[hist as usize].record(d);
                    }
                }
                Step::Count { counter } => {
                    self.tasks[t].pc += 1;
                    if measuring {
                        self.wls[wl].counters[counter as usize] += 1;
                    }
                }
                Step::Goto { to, times } => match times {
                    None => self.tasks[t].pc = to as usize,
                    Some(n) => {
                        let k = &mut self.tasks[t].loops[pc];
                        if *k < n {
                            *k += 1;
                            self.tasks[t].pc = to as usize;
                        } else {
                            *k = 0;
                            self.tasks[t].pc += 1;
                        }
                    }
                },
                Step::LoopFor { to, dur } => {
                    if self.now < self.tasks[t].born.saturating_add(dur) {
                        self.tasks[t].pc = to as usize;
                    } else {
                        self.tasks[t].pc += 1;
                    }
                }
                Step::Branch { chan, to } => {
                    if self.wls[wl].chans[chan as usize].tokens > 0 {
                        self.tasks[t].pc = to as usize;
                    } else {
                        self.tasks[t].pc += 1;
                    }
                }
                Step::Fork { child_at } => {
                    self.tasks[t].pc += 1;
                    self.fork_task(t, child_at as usize, c);
                }
                Step::Exit => {
                    self.exit_task(t);
                    return;
                }
            }
            if self.tasks[t].pc >= self.tasks[t].program.len() {
                self.exit_task(t);
                return;
            }
        }
        panic!(
            "invariant: task {} ran 100000 steps without time passing",
            self.levels[self.ents[self.tasks[t].ent.idx()].level.idx()].ent_info
                [self.ents[self.tasks[t].ent.idx()].local.idx()]
            .params
            .name
        );
    }

    /// A video player's frame boundary (workload/video.rs): judges the frame just decoded
    /// (if any) and sets the next boundary; returns whether the player sleeps until it.
    /// `(c0, h0)`: the first of its counters and histograms in the workload.
    #[allow(clippy::too_many_arguments)]
    fn frame(
        &mut self,
        t: usize,
        wl: usize,
        period: Nanos,
        max_lateness: Nanos,
        drop_late: bool,
        (c0, h0): (usize, usize),
        measuring: bool,
    ) -> bool {
        let (next, skipped) = match self.tasks[t].periodic_next {
            None => (self.now + period, 0),
            Some(b) => {
                let v = video::verdict(b + period, self.now, max_lateness, drop_late);
                let w = &mut self.wls[wl];
                if measuring {
                    w.counters[c0 + video::FRAMES as usize] += 1;
                    match v {
                        video::Verdict::Shown => w.counters[c0 + video::SHOWN as usize] += 1,
                        video::Verdict::Late(l) => {
                            w.counters[c0 + video::LATE as usize] += 1;
                            w.hists[h0 + video::LATENESS as usize].record(l);
                        }
                        video::Verdict::Dropped(l) => {
                            w.counters[c0 + video::DROPPED as usize] += 1;
                            w.hists[h0 + video::LATENESS as usize].record(l);
                        }
                    }
                }
                video::next_boundary(b, period, self.now, drop_late)
            }
        };
        if measuring && skipped > 0 {
            let c = &mut self.wls[wl].counters;
            c[c0 + video::FRAMES as usize] += skipped;
            c[c0 + video::DROPPED as usize] += skipped;
            c[c0 + video::SKIPPED as usize] += skipped;
        }
        self.tasks[t].periodic_next = Some(next);
        next > self.now
    }

    /// Arms task `t`'s sleep timer on CPU `c`: soft deadline `expiry`, hard deadline
    /// `expiry + slack` (Linux hrtimer slack, ERRATA W1), handled the level's timer-expiry
    /// cost after that (a host level's `machine.timer_expiry_ns`), then blocks the task.
    pub(super) fn sleep_until(&mut self, t: usize, c: GCpu, expiry: SimTime, slack: Nanos) {
        let cost = self.levels[self.cpus[c.idx()].level.idx()]
            .opts
            .timer_expiry;
        let task = &mut self.tasks[t];
        task.timer_cpu = c;
        task.timer_soft = expiry;
        task.phase = Phase::Sleeping;
        self.q.arm(task.timer_slot, expiry + slack + cost);
        self.cpus[c.idx()].armed_timers.push(t);
        let g = task.ent;
        self.block_entity(g);
    }

    /// Task `t`'s sleep timer reached its hard deadline. Delivered on the CPU it was armed on;
    /// waits for that vCPU.
    pub(super) fn task_timer(&mut self, t: usize) {
        let c = self.tasks[t].timer_cpu;
        if self.tasks[t].phase != Phase::Sleeping {
            return;
        }
        emit!(self.trace_timer(t));
        if !self.cpus[c.idx()].executing {
            self.cpus[c.idx()].pending.raise_timer(t);
            self.timer_kick(c);
            return;
        }
        self.on_cpu(c, |sim| sim.timer_interrupt(c));
    }

    /// A timer interrupt is handled on CPU `c` now: every sleep timer armed there whose soft
    /// deadline has passed expires, in the order they were armed (hrtimer slack coalescing).
    pub(super) fn timer_interrupt(&mut self, c: GCpu) {
        let mut i = 0;
        while i < self.cpus[c.idx()].armed_timers.len() {
            let t = self.cpus[c.idx()].armed_timers[i];
            if self.tasks[t].timer_soft > self.now {
                i += 1;
                continue;
            }
            self.cpus[c.idx()].armed_timers.remove(i);
            self.cpus[c.idx()].pending.clear_timer(t);
            self.q.cancel(self.tasks[t].timer_slot);
            if self.tasks[t].phase != Phase::Sleeping {
                continue;
            }
            self.tasks[t].phase = Phase::Ready;
            let waker = self.cpus[c.idx()].local;
            let g = self.tasks[t].ent;
            self.wake_entity(
                g,
                WakeInfo {
                    cause: WakeCause::Timer,
                    waker_cpu: Some(waker),
                    ..Default::default()
                },
            );
        }
    }

    /// Task `from` (None: the kernel, a parallel job's netfront handler), running on CPU `c`,
    /// puts a token into a channel; returns whether a sleeping waiter was woken.
    pub(super) fn signal(
        &mut self,
        wl: usize,
        chan: Chan,
        from: Option<usize>,
        c: GCpu,
        sync: bool,
    ) -> bool {
        let ch = &mut self.wls[wl].chans[chan as usize];
        if let Some(w) = ch.waiters.pop_front() {
            self.tasks[w].phase = Phase::Ready;
            // The signaller is current on `c`, at the wakee's level (one workload lives at one
            // level).
            let waker_cpu = Some(self.cpus[c.idx()].local);
            let waker = from.map(|f| self.ents[self.tasks[f].ent.idx()].local);
            let g = self.tasks[w].ent;
            self.wake_entity(
                g,
                WakeInfo {
                    cause: WakeCause::Unblock,
                    waker_cpu,
                    waker,
                    parent: None,
                    sync,
                },
            );
            return true;
        }
        if let Some(s) = ch.spinners.pop() {
            // The spinner sees the token: its spin ends (now, if it is running).
            let running = self.tasks[s].run_since.is_some();
            self.stop_progress(s);
            let task = &mut self.tasks[s];
            task.spinning = None;
            task.spin_block = false;
            task.phase = Phase::Ready;
            task.remaining = 0;
            if running {
                task.run_since = Some(self.now);
                self.actions.push_back(Action::Advance(s));
            }
            return false;
        }
        ch.tokens += 1;
        false
    }
}
