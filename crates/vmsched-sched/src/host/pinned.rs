//! `pinned`: a trivial host scheduler for tests and for guests measured without host
//! interference. vCPU k of the machine (in domain order) owns physical CPU k; it runs whenever it
//! is runnable and is never preempted. Not a model of any real hypervisor scheduler, though Xen's
//! `null` scheduler behaves like it when every vCPU has a pCPU of its own.

use serde::{Deserialize, Serialize};
use vmsched_core::{CpuId, EntityId, Pick, SchedCtx, Scheduler, WakeInfo};

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedParams {}

/// The machine must have a pCPU for every vCPU, and no domain may set an affinity (the host
/// places vCPUs itself). Returns the offending field and the message.
pub fn check_layout<H, G>(
    s: &vmsched_core::scenario::Scenario<H, G>,
) -> Result<(), (String, String)> {
    let total: u32 = s.domains.iter().map(|d| d.vcpus).sum();
    if total > s.machine.pcpus {
        return Err((
            "host.scheduler".into(),
            format!(
                "the pinned host gives every vCPU a pCPU of its own: {total} vCPUs need {total} pCPUs, the machine has {}",
                s.machine.pcpus
            ),
        ));
    }
    if let Some((i, _)) = s
        .domains
        .iter()
        .enumerate()
        .find(|(_, d)| d.pcpus.is_some() || d.vcpu_pcpus.is_some())
    {
        return Err((
            format!("domain.{i}.pcpus"),
            "the pinned host places vCPUs itself; remove the affinity".into(),
        ));
    }
    Ok(())
}

pub struct Pinned {
    /// The entity owning each CPU.
    owner: Vec<Option<EntityId>>,
}

impl Pinned {
    pub fn new(ncpus: usize) -> Pinned {
        Pinned {
            owner: vec![None; ncpus],
        }
    }

    fn cpu_of(ctx: &SchedCtx, e: EntityId) -> CpuId {
        ctx.ent(e).params.initial_cpu
    }
}

impl Scheduler for Pinned {
    fn name(&self) -> &'static str {
        "pinned"
    }

    fn insert(&mut self, ctx: &mut SchedCtx, e: EntityId) {
        let c = Self::cpu_of(ctx, e);
        assert!(
            self.owner[c.idx()].is_none(),
            "invariant: pinned host gives CPU {} to two vCPUs",
            c.0
        );
        self.owner[c.idx()] = Some(e);
    }

    fn wake(&mut self, ctx: &mut SchedCtx, e: EntityId, _info: WakeInfo) {
        let c = Self::cpu_of(ctx, e);
        ctx.resched(c);
    }

    fn block(&mut self, _ctx: &mut SchedCtx, _e: EntityId) {}

    fn yield_(&mut self, _ctx: &mut SchedCtx, _e: EntityId) {}

    fn schedule(&mut self, ctx: &mut SchedCtx, cpu: CpuId) -> Pick {
        let next = self.owner[cpu.idx()].filter(|e| ctx.ent(*e).runnable);
        Pick { next, slice: None }
    }
}

#[cfg(test)]
mod tests;
