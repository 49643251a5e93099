//! Chaos mode's engine side (`[domain.chaos]`, scenario/chaos.rs; docs/chaos.md): seeded
//! stalls of a guest's vCPUs. During a stall the vCPU does not execute even when its host
//! scheduler has it on a pCPU, and the hypervisor reports it as preempted (its backing
//! entity's runstate is `runnable`), so the guest sees exactly what a real preemption shows it:
//! its vCPU vanishes, steal time grows in the runstate area (Xen) or the steal-time record
//! (KVM), `vcpu_is_preempted` is true, and its interrupts are held until it runs again. The
//! host scheduler is not told: to it the pCPU is busy with the vCPU (the time goes to work the
//! model does not have, as a noisy neighbour's or an SMI's would).
//!
//! Each vCPU alternates gaps (exponential, so stalls arrive as a Poisson process) and stalls
//! (drawn from the configured distribution) on its own stream `<stream>/<k>`; the mean gap is
//! set so that stalls take `rate` of the wall time ([`ChaosSpec::mean_gap_ns`]). A stall that
//! finds its vCPU halted still runs out: a wake-up meanwhile waits for its end. With
//! `correlated` every vCPU of the domain draws from one stream `<stream>`, hence the same
//! gaps and stalls: the whole domain stalls at once.

use serde::Serialize;

use super::*;
use crate::scenario::chaos::{ChaosDist, ChaosSpec};

/// One stalled-or-not vCPU.
pub(super) struct ChaosCpu {
    vc: GCpu,
    slot: SlotId,
    rng: Stream,
    dist: ChaosDist,
    mean_ns: f64,
    gap_ns: f64,
    /// Start of the stall in progress.
    since: SimTime,
    /// Stalls begun, and the time of those ended (a stall in progress at the end is closed by
    /// [`Simulation::chaos_injected`]).
    stalls: u64,
    stolen: Nanos,
    /// The configured rate, and the counts when the warm-up ended (the results' window).
    rate: f64,
    base_stalls: u64,
    base_stolen: Nanos,
}

/// What chaos mode injected into one vCPU over the measured window: one row of the results'
/// `chaos` table (docs/chaos.md, "In the results").
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChaosResult {
    /// The guest (the domain's level) and the vCPU: its index in the guest and its entity's
    /// name at the host level (the `entities` row with its steal as `runnable_ns`).
    pub domain: String,
    pub vcpu: u32,
    pub name: String,
    /// Stalls begun in the window.
    pub stalls: u64,
    /// Stalled time inside the window, ns (a stall open at either edge counts its part inside).
    pub stalled_ns: Nanos,
    /// The configured `rate` and `mean_us` (what `stalled_ns` and `stalls` should approach:
    /// `rate × measured_ns` and `rate × measured_ns / mean`).
    pub rate: f64,
    pub mean_us: f64,
}

/// One stalled vCPU as its guest sees it at this instant ([`Simulation::chaos_view`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChaosView {
    /// The vCPU's index in its guest.
    pub cpu: u32,
    /// A stall is in progress.
    pub stalled: bool,
    /// `vcpu_is_preempted` as the guest's scheduler reads it now (`CpuInfo`).
    pub preempted: bool,
    /// The vCPU is halted (its entity at the host is blocked).
    pub halted: bool,
}

/// What was injected into one guest CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChaosCount {
    /// Name of the vCPU's level (the guest) and its index there.
    pub cpu: u32,
    pub stalls: u64,
    /// Total stalled time up to now, ns.
    pub stolen_ns: Nanos,
}

impl ChaosCpu {
    fn draw_stall(&mut self) -> Nanos {
        let d = match self.dist {
            ChaosDist::Exponential => self.rng.exp(self.mean_ns),
            ChaosDist::Uniform => self.rng.range(0, (2.0 * self.mean_ns).round() as u64),
            ChaosDist::Fixed => self.mean_ns.round() as u64,
        };
        d.max(1)
    }

    fn draw_gap(&mut self) -> Nanos {
        self.rng.exp(self.gap_ns).max(1)
    }
}

impl SimBuilder {
    /// Injects stalls into every vCPU of guest level `guest` ([`ChaosSpec`]). Call after the
    /// guest's vCPUs are added.
    pub fn add_chaos(&mut self, guest: LevelId, spec: &ChaosSpec) {
        let cpus: Vec<GCpu> = self.sim.levels[guest.idx()].cpu_g.clone();
        for (k, vc) in cpus.into_iter().enumerate() {
            let i = self.sim.chaos.len() as u32;
            let slot = self.slot(SlotKind::Chaos(i));
            let mut c = ChaosCpu {
                vc,
                slot,
                // Correlated: one stream for all, so every vCPU draws the same gaps and
                // stalls (they depend on nothing else) and stalls at the same instants.
                rng: if spec.correlated {
                    Stream::new(self.seed, &spec.stream)
                } else {
                    Stream::new(self.seed, &format!("{}/{k}", spec.stream))
                },
                dist: spec.dist,
                mean_ns: spec.mean_ns,
                gap_ns: spec.mean_gap_ns(),
                since: 0,
                stalls: 0,
                stolen: 0,
                rate: spec.rate,
                base_stalls: 0,
                base_stolen: 0,
            };
            let first = c.draw_gap();
            self.sim.q.arm(slot, first);
            self.sim.chaos.push(c);
        }
    }
}

impl Simulation {
    /// Chaos slot `i` fires: vCPU `i`'s gap or stall is over.
    pub(super) fn chaos_event(&mut self, i: u32) {
        let c = &mut self.chaos[i as usize];
        let vc = c.vc;
        if !self.cpus[vc.idx()].stalled {
            c.stalls += 1;
            c.since = self.now;
            let d = c.draw_stall();
            let slot = c.slot;
            self.q.arm(slot, self.now + d);
            self.cpus[vc.idx()].stalled = true;
            if self.cpus[vc.idx()].executing {
                self.stop_executing(vc);
            }
            self.chaos_hold(vc);
        } else {
            c.stolen += self.now - c.since;
            let gap = c.draw_gap();
            let slot = c.slot;
            self.q.arm(slot, self.now + gap);
            self.cpus[vc.idx()].stalled = false;
            let Some(b) = self.cpus[vc.idx()].backing else {
                return;
            };
            let Some(p) = self.cpu_of_ent(b) else {
                return;
            };
            if self.ents[b.idx()].state == RunState::Runnable {
                self.set_runstate(b, RunState::Running);
            }
            let ps = &self.cpus[p.idx()];
            if ps.executing && !ps.kwork && !self.q.is_armed(ps.switch_slot) {
                self.start_executing(vc);
            }
        }
    }

    /// Stalled vCPU `vc` is on a pCPU: the hypervisor reports it preempted.
    #[cold]
    pub(super) fn chaos_hold(&mut self, vc: GCpu) {
        if let Some(b) = self.cpus[vc.idx()].backing {
            if self.ents[b.idx()].state == RunState::Running {
                self.set_runstate(b, RunState::Runnable);
            }
        }
    }

    /// What chaos mode injected so far, per stalled guest CPU (in declaration order; empty
    /// without `[domain.chaos]`). A stall in progress counts up to now.
    pub fn chaos_injected(&self) -> Vec<ChaosCount> {
        self.chaos
            .iter()
            .map(|c| ChaosCount {
                cpu: c.vc.0,
                stalls: c.stalls,
                stolen_ns: self.chaos_stolen(c),
            })
            .collect()
    }

    /// Stalled time of `c` since the start, a stall in progress up to now.
    fn chaos_stolen(&self, c: &ChaosCpu) -> Nanos {
        c.stolen
            + if self.cpus[c.vc.idx()].stalled {
                self.now - c.since
            } else {
                0
            }
    }

    /// Every stalled vCPU as its guest sees it now: whether a stall is in progress, and what
    /// `vcpu_is_preempted` tells the guest (to check from outside, between `run_until` calls,
    /// that the flag follows the stalls).
    pub fn chaos_view(&self) -> Vec<ChaosView> {
        self.chaos
            .iter()
            .map(|c| {
                let cpu = &self.cpus[c.vc.idx()];
                let info = &self.levels[cpu.level.idx()].cpu_info[cpu.local.idx()];
                ChaosView {
                    cpu: cpu.local.0,
                    stalled: cpu.stalled,
                    preempted: info.vcpu_is_preempted(),
                    halted: cpu
                        .backing
                        .is_some_and(|b| self.ents[b.idx()].state == RunState::Blocked),
                }
            })
            .collect()
    }

    /// The warm-up ends: the results count stalls from here.
    pub(super) fn chaos_reset_metrics(&mut self) {
        for i in 0..self.chaos.len() {
            let stolen = self.chaos_stolen(&self.chaos[i]);
            let c = &mut self.chaos[i];
            c.base_stalls = c.stalls;
            c.base_stolen = stolen;
        }
    }

    /// The results' `chaos` rows: per stalled vCPU, what was injected over the measured window.
    pub(crate) fn chaos_rows(&self) -> Vec<ChaosResult> {
        self.chaos
            .iter()
            .map(|c| {
                let cpu = &self.cpus[c.vc.idx()];
                let name = cpu.backing.map_or_else(String::new, |b| {
                    let e = &self.ents[b.idx()];
                    self.levels[e.level.idx()].ent_info[e.local.idx()]
                        .params
                        .name
                        .clone()
                });
                ChaosResult {
                    domain: self.levels[cpu.level.idx()].name.clone(),
                    vcpu: cpu.local.0,
                    name,
                    stalls: c.stalls - c.base_stalls,
                    stalled_ns: self.chaos_stolen(c) - c.base_stolen,
                    rate: c.rate,
                    mean_us: c.mean_ns / 1e3,
                }
            })
            .collect()
    }
}
