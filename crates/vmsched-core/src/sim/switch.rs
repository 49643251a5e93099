//! A CPU's switch from one entity to another: the outgoing entity's switch-out, the incoming
//! one's switch-in (its context-switch cost; for a vCPU on a physical CPU, the vCPU switch slot
//! `Switched` that ends it), the executing flag carried down the levels (`start_executing`,
//! `stop_executing`), the entity run states, and the switch to idle with its halt window.
//! Moved out of sim.rs unchanged; docs/design.md describes the model.

use super::*;

impl Simulation {
    #[inline]
    pub(super) fn set_runstate(&mut self, g: GEnt, new: RunState) {
        emit!(self.trace_runstate(g, new));
        let now = self.now;
        let e = &mut self.ents[g.idx()];
        let d = now - e.since;
        self.ent_stats[g.idx()].time[e.state as usize] += d;
        if matches!(e.state, RunState::Runnable | RunState::Offline) {
            e.steal += d;
        }
        if new == RunState::Runnable && e.state != new {
            e.wait_from = e.state;
        }
        e.state = new;
        e.since = now;
        if let EntKind::Vcpu(vc) = e.kind {
            let steal = e.steal;
            let cs = &self.cpus[vc.idx()];
            let ci = &mut self.levels[cs.level.idx()].cpu_info[cs.local.idx()];
            ci.steal_ns = steal;
            ci.backing = new;
        }
    }

    pub(super) fn switch_out(&mut self, l: LevelId, e: EntityId, c: GCpu) {
        let lv = &mut self.levels[l.idx()];
        let g = lv.ent_g[e.idx()];
        lv.ent_info[e.idx()].on_cpu = None;
        self.ents[g.idx()].cpu = None;
        lv.cpu_info[self.cpus[c.idx()].local.idx()].curr = None;
        self.cpus[c.idx()].curr = None;
        let runnable = lv.ent_info[e.idx()].runnable;
        self.set_runstate(
            g,
            match (runnable, self.ents[g.idx()].paused) {
                (false, _) if self.ents[g.idx()].in_xen => RunState::Offline,
                (false, _) => RunState::Blocked,
                (true, false) => RunState::Runnable,
                (true, true) => RunState::Offline,
            },
        );
        if runnable {
            self.ent_stats[g.idx()].preemptions += 1;
        }
        match self.ents[g.idx()].kind {
            EntKind::Vcpu(vc) => {
                // Switched out before its switch was over: it never executed.
                self.q.cancel(self.cpus[c.idx()].switch_slot);
                self.stop_executing(vc)
            }
            EntKind::Task(t) => self.stop_progress(t),
        }
    }

    /// `slice`: what the pick granted (xenmon's "allocated").
    pub(super) fn switch_in(&mut self, l: LevelId, e: EntityId, c: GCpu, slice: Option<Nanos>) {
        let lc = self.cpus[c.idx()].local;
        let lv = &mut self.levels[l.idx()];
        let g = lv.ent_g[e.idx()];
        lv.ent_info[e.idx()].on_cpu = Some(lc);
        lv.cpu_info[lc.idx()].curr = Some(e);
        self.ents[g.idx()].cpu = Some(c);
        self.cpus[c.idx()].curr = Some(g);
        let ctxsw = lv.opts.ctxsw_cost;
        let refill = lv.opts.vcpu_refill;
        let has_tick = lv.tick_period.is_some();
        let es = &mut self.ents[g.idx()];
        let st = &mut self.ent_stats[g.idx()];
        if es.state == RunState::Runnable && self.now >= self.warmup {
            let w = self.now - es.since;
            st.wait.record(w);
            st.xm.waited(es.wait_from, w);
        }
        st.runs += 1;
        st.xm.dispatched(slice);
        if es.last_cpu.is_some_and(|p| p != c) {
            st.migrations += 1;
        }
        es.last_cpu = Some(c);
        // A vCPU chaos mode holds off reads as preempted (sim/chaos.rs).
        let stalled =
            matches!(self.ents[g.idx()].kind, EntKind::Vcpu(vc) if self.cpus[vc.idx()].stalled);
        self.set_runstate(
            g,
            if stalled {
                RunState::Runnable
            } else {
                RunState::Running
            },
        );
        if has_tick && !self.q.is_armed(self.cpus[c.idx()].tick_slot) {
            self.arm_tick(c);
        }
        match self.ents[g.idx()].kind {
            EntKind::Vcpu(vc) => {
                self.ple_shrink(vc);
                let cs = &mut self.cpus[c.idx()];
                // Only a physical CPU pays (it always executes and has no kernel work); a guest
                // CPU running a nested vCPU switches at no cost.
                let cost = if cs.backing.is_none() && cs.last_ent != Some(g) {
                    ctxsw + refill
                } else {
                    0
                };
                cs.last_ent = Some(g);
                if cost > 0 {
                    self.q.arm(cs.switch_slot, self.now + cost);
                } else if cs.executing && !cs.kwork {
                    self.start_executing(vc);
                }
            }
            EntKind::Task(t) => {
                self.cpus[c.idx()].last_ent = Some(g);
                self.tasks[t].overhead += ctxsw;
                if self.cpus[c.idx()].executing && !self.cpus[c.idx()].kwork {
                    self.start_progress(t);
                }
            }
        }
    }

    /// The switch of physical CPU `c` to its vCPU is over (slot `Switched`): the vCPU executes.
    /// Xen: `context_switch` (its cost, and the cache refill after it, as a delay).
    #[inline]
    pub(super) fn switched(&mut self, c: GCpu) {
        if let Some(g) = self.curr_of(c) {
            if let EntKind::Vcpu(vc) = self.ents[g.idx()].kind {
                self.start_executing(vc);
            }
        }
    }

    pub(super) fn start_executing(&mut self, vc: GCpu) {
        if self.cpus[vc.idx()].stalled {
            self.chaos_hold(vc);
            return;
        }
        if self.cpus[vc.idx()].halted_at.is_some() {
            self.haltpoll_reflect(vc);
        }
        let (l, lc) = (self.cpus[vc.idx()].level, self.cpus[vc.idx()].local);
        self.cpus[vc.idx()].executing = true;
        // Guest entry (KVM/ARM 3.x kvm_timer_flush_hwstate): the soft timer is disarmed; the
        // next exit arms a new one.
        self.cpus[vc.idx()].backup_timer_fired = false;
        // Back from the directed yield it made in `kvm_vcpu_on_spin`: that call ends.
        if self.cpus[vc.idx()].kvm.spin_loop.in_spin_loop {
            self.cpus[vc.idx()].kvm.spin_loop.leave();
        }
        self.levels[l.idx()].cpu_info[lc.idx()].executing = true;
        if self.coord.is_some() {
            self.coord_executing(vc);
        }
        // Deliver what was held: the tick, then the guest timers in expiry order, then the
        // event-channel upcall, then the reschedule. A call-function IPI's function runs at
        // once (its senders stop waiting).
        let cs = &mut self.cpus[vc.idx()];
        let held = cs.pending.take();
        if held != 0 {
            if held & PendingIrqs::TICK != 0 {
                self.actions.push_back(Action::Tick(vc));
            }
            if held & PendingIrqs::TIMER != 0 {
                for t in cs.pending.drain_timers() {
                    self.actions.push_back(Action::TaskTimer(t));
                }
            }
            if held & PendingIrqs::EVTCHN != 0 {
                self.actions.push_back(Action::Upcall(vc));
            }
            if held & PendingIrqs::RESCHED != 0 {
                self.actions.push_back(Action::Resched(vc));
            }
            if held & PendingIrqs::CALL_FUNC != 0 {
                self.call_function_done(vc);
            }
        }
        if self.cpus[vc.idx()].kwork {
            // Back in the middle of an upcall handler: it goes on first (sim/io.rs).
            self.kwork_resume(vc);
            return;
        }
        match self.curr_of(vc) {
            Some(g) => match self.ents[g.idx()].kind {
                EntKind::Task(t) => self.start_progress(t),
                EntKind::Vcpu(x) => self.start_executing(x),
            },
            None => self.actions.push_back(Action::IdleCheck(vc)),
        }
    }

    pub(super) fn stop_executing(&mut self, vc: GCpu) {
        let (l, lc) = (self.cpus[vc.idx()].level, self.cpus[vc.idx()].local);
        self.cpus[vc.idx()].executing = false;
        self.levels[l.idx()].cpu_info[lc.idx()].executing = false;
        if self.q.is_armed(self.cpus[vc.idx()].halt_slot) {
            // Preempted in its halt window: the window is over.
            self.q.cancel(self.cpus[vc.idx()].halt_slot);
            self.cpus[vc.idx()].halt_due = true;
        }
        if self.cpus[vc.idx()].kwork {
            self.kwork_pause(vc);
        }
        if let Some(g) = self.curr_of(vc) {
            match self.ents[g.idx()].kind {
                EntKind::Task(t) => self.stop_progress(t),
                EntKind::Vcpu(x) => self.stop_executing(x),
            }
        }
    }

    /// The CPU picked nothing: stop its tick (NO_HZ idle; a periodic tick keeps running), and
    /// halt the vCPU behind it unless a guest event is pending (Xen's block returns at once
    /// then), as the level's exit model says: block now, stay for a window first, or stay.
    pub(super) fn cpu_idle(&mut self, c: GCpu) {
        let s = self.cpus[c.idx()].tick_slot;
        let lv = &self.levels[self.cpus[c.idx()].level.idx()];
        if lv.opts.tick_periodic && lv.tick_period.is_some() {
            if !self.q.is_armed(s) {
                self.arm_tick(c);
            }
        } else {
            self.q.cancel(s);
            self.cpus[c.idx()].pending.clear(PendingIrqs::TICK);
        }
        let cs = &self.cpus[c.idx()];
        if let Some(b) = cs.backing {
            if cs.pending.wakes_halt() || cs.kwork {
                return;
            }
            if cs.executing && !cs.halt_due && !self.q.is_armed(cs.halt_slot) {
                self.kvm_halt_begins(c);
            }
            let (window, guest_poll) = self.idle_window(c);
            match window {
                HaltWindow::Now => {}
                HaltWindow::Never => return,
                HaltWindow::After(w) => {
                    let cs = &mut self.cpus[c.idx()];
                    if !cs.executing {
                        // A vCPU that is not running cannot halt (e.g. a paused domain's CPU
                        // emptied by an offline): it idles when it runs again and finds nothing
                        // (`start_executing` asks for that check).
                        return;
                    }
                    // The guest's own poll (cpuidle-haltpoll) does not look at the host.
                    if !std::mem::take(&mut cs.halt_due) && (guest_poll || !self.host_busy(b)) {
                        let cs = &mut self.cpus[c.idx()];
                        cs.guest_poll = guest_poll;
                        if !self.q.is_armed(cs.halt_slot) {
                            self.q.arm(cs.halt_slot, self.now + w);
                        }
                        return;
                    }
                }
            }
            if self.ents[b.idx()].state == RunState::Running {
                self.haltpoll_halting(c);
                self.block_entity(b);
            }
        }
    }

    /// CPU `c` picked an entity after being idle: a halt window in progress is cancelled.
    #[inline]
    pub(super) fn end_halt_window(&mut self, c: GCpu) {
        let cs = &mut self.cpus[c.idx()];
        cs.halt_due = false;
        cs.guest_poll = false;
        self.q.cancel(cs.halt_slot);
        if cs.kvm.halt_start.is_some() {
            self.kvm_halt_ends(c);
        }
    }

    /// The halt window of the idle vCPU behind `c` ends with nothing to run: it blocks.
    #[cold]
    pub(super) fn halt_window_over(&mut self, c: GCpu) {
        let cs = &self.cpus[c.idx()];
        debug_assert!(
            cs.executing,
            "invariant: a halt window ends while the vCPU runs"
        );
        let idle = self.levels[cs.level.idx()].cpu_info[cs.local.idx()]
            .curr
            .is_none();
        if let (Some(b), true, false) = (cs.backing, idle, cs.pending.wakes_halt() || cs.kwork) {
            if self.ents[b.idx()].state == RunState::Running {
                self.haltpoll_halting(c);
                self.block_entity(b);
            }
        }
    }
}
