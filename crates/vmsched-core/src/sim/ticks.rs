//! The guest tick (Linux `tick_sched_timer`, `scheduler_tick`): arming each CPU's tick on its
//! grid (the level's phase drawn from the seed, `skew_tick`), delivering it to a running vCPU or
//! holding it in [`PendingIrqs`] while the vCPU is away, and running the scheduler's tick hook.
//! Moved out of sim.rs unchanged; docs/design.md, Guest time, "The tick".

use super::*;

impl Simulation {
    /// Arms CPU `c`'s tick if its level ticks periodically (idle or busy) and exists.
    pub(super) fn start_periodic_tick(&mut self, c: GCpu) {
        let lv = &self.levels[self.cpus[c.idx()].level.idx()];
        if lv.alive && lv.opts.tick_periodic && lv.tick_period.is_some() {
            self.arm_tick(c);
        }
    }

    /// Arms CPU `c`'s tick at the next point of its grid after now: the level's phase (drawn
    /// from the seed), plus the CPU's skew under `skew_tick` (Linux: tick_setup_sched_timer).
    pub(super) fn arm_tick(&mut self, c: GCpu) {
        let cs = &self.cpus[c.idx()];
        let lv = &self.levels[cs.level.idx()];
        let p = lv.tick_period.expect("tick period");
        let mut phase = lv.tick_phase;
        if lv.opts.skew_tick {
            let n = lv.cpu_info.len() as u64;
            phase = (phase + cs.local.0 as u64 * (p / 2) / n) % p;
        }
        let next = if self.now < phase {
            phase
        } else {
            phase + ((self.now - phase) / p + 1) * p
        };
        self.q.arm(self.cpus[c.idx()].tick_slot, next);
    }

    /// The tick interrupt reaches CPU `c`: handled now, or kept pending until the vCPU runs. A
    /// periodic tick on a halted vCPU wakes it (the virtual timer's interrupt, ERRATA X4); under
    /// NO_HZ idle a halted vCPU has no tick armed.
    pub(super) fn deliver_tick(&mut self, c: GCpu) {
        emit!(self.trace_tick(c));
        if self.cpus[c.idx()].executing {
            self.do_tick(c);
        } else {
            self.cpus[c.idx()].pending.raise(PendingIrqs::TICK);
            if self.levels[self.cpus[c.idx()].level.idx()]
                .opts
                .tick_periodic
            {
                self.timer_kick(c);
            }
        }
    }

    pub(super) fn do_tick(&mut self, c: GCpu) {
        let (l, lc) = (self.cpus[c.idx()].level, self.cpus[c.idx()].local);
        if self.levels[l.idx()].cpu_info[lc.idx()].curr.is_none() {
            // An idle CPU's periodic tick: nothing to account; the next one is armed.
            if self.levels[l.idx()].opts.tick_periodic {
                self.arm_tick(c);
            }
            return;
        }
        self.on_cpu(c, |sim| {
            sim.with_sched(l, |s, ctx| s.tick(ctx, lc));
            sim.arm_tick(c);
            if !sim.cpus[c.idx()].armed_timers.is_empty() {
                sim.timer_interrupt(c);
            }
        });
    }
}
