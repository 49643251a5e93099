//! The guest tick (Linux `tick_sched_timer`, `scheduler_tick`): arming each CPU's tick on its
//! grid (the level's phase drawn from the seed, `skew_tick`), delivering it to a running vCPU or
//! holding it in [`PendingIrqs`] while the vCPU is away, and running the scheduler's tick hook.
//! Moved out of sim.rs; docs/design.md, Guest time, "The tick".
//!
//! Also the interrupt jitter of issue 14 (docs/design.md, Variation): with `run.vary` every
//! timer interrupt the engine delivers for a CPU (its tick, its scheduler's slice timer) or for
//! a policy (its own timers) is handled a delay drawn uniformly from `0..=irq_jitter` after its
//! expiry, from a stream built with the CPU (`irq/<level>/<cpu>`) or the level (`irq/<level>`),
//! so that a slice end is not exactly on another CPU's tick. The tick grid itself does not
//! move: the next tick is armed on the grid, with a fresh draw.

use super::*;

/// What the seed varies between runs besides per-call costs (issue 14; `[run] vary`). The
/// default is no variation: what a builder gets unless it is told (`SimBuilder::vary`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Variation {
    /// Each guest's work starts uniformly within this bound after its declared time (stream
    /// `start/<level>`), each workload within a tenth of it after that
    /// (`start/<level>/<workload>`; a workload's tasks start together),
    /// and the warm-up's end (the window's start) within it, at most the warm-up's length
    /// (`window`). 0: no offsets.
    pub start_spread: Nanos,
    /// Bound of the uniform delay of each timer interrupt's delivery. 0: exact timers.
    pub irq_jitter: Nanos,
}

impl Simulation {
    /// The delivery delay of a timer interrupt on CPU `c` (its tick, its slice timer): one draw
    /// from the CPU's stream, no allocation; 0 without jitter.
    #[inline]
    pub(super) fn cpu_irq_delay(&mut self, c: GCpu) -> Nanos {
        match self.irq_jitter {
            0 => 0,
            j => self.cpus[c.idx()].irq_rng.range(0, j),
        }
    }

    /// The delivery delay of a policy timer of level `l`; 0 without jitter.
    #[inline]
    pub(super) fn level_irq_delay(&mut self, l: LevelId) -> Nanos {
        match self.irq_jitter {
            0 => 0,
            j => self.levels[l.idx()].irq_rng.range(0, j),
        }
    }

    /// Arms CPU `c`'s tick if its level ticks periodically (idle or busy) and exists.
    pub(super) fn start_periodic_tick(&mut self, c: GCpu) {
        let lv = &self.levels[self.cpus[c.idx()].level.idx()];
        if lv.alive && lv.opts.tick_periodic && lv.tick_period.is_some() {
            self.arm_tick(c);
        }
    }

    /// Arms CPU `c`'s tick at the next point of its grid after now: the level's phase (drawn
    /// from the seed), plus the CPU's skew under `skew_tick` (Linux: tick_setup_sched_timer),
    /// delivered with the CPU's interrupt jitter. The grid point is computed from the grid, not
    /// from the (late) current tick, so jitter never accumulates.
    pub(super) fn arm_tick(&mut self, c: GCpu) {
        let cs = &self.cpus[c.idx()];
        let lv = &self.levels[cs.level.idx()];
        let p = lv.tick_period.expect("tick period");
        let mut phase = lv.tick_phase;
        if lv.opts.skew_tick {
            let n = lv.cpu_info.len() as u64;
            phase = (phase + cs.local.0 as u64 * (p / 2) / n) % p;
        }
        // A tick handled late (at most the jitter, far below a period) is still past its own
        // grid point, so the next one is the point after it.
        let next = if self.now < phase {
            phase
        } else {
            phase + ((self.now - phase) / p + 1) * p
        };
        let next = next + self.cpu_irq_delay(c);
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
        if self.cpus[c.idx()].curr.is_none() {
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
