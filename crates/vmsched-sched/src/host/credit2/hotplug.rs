//! Credit2 and CPU hot-plug: a pCPU leaving the pool (`xen-hptool cpu-offline`) and joining it
//! again, after Xen 4.20 `csched2_deinit_pdata` + `csched2_free_pdata` and `csched2_alloc_pdata`
//! (`cpu_add_to_runqueue`) + `csched2_switch_sched` (`init_cpu_runqueue`). Facts only; the code
//! is our own. The Xen core moves the vCPUs (host/xen_core.rs, `cpu_offline`); this file keeps
//! the runqueues' CPU masks, their CPU counts and the cached affinities right.

use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::CpuTopo;

use super::Credit2;
use crate::host::xen_core::XenCtx;

impl Credit2 {
    /// Xen: csched2_deinit_pdata + csched2_free_pdata. `cpu` leaves its runqueue's `active`,
    /// `idle`, `smt_idle` and `tickled` masks and its siblings' masks; the runqueue's CPU
    /// count and reference count drop, and a runqueue left without CPUs is gone (it keeps its
    /// slot, skipped by placement and balancing, and its index is the first reused by a new
    /// runqueue, as upstream reuses the first unused id). The vCPU running on `cpu` is charged
    /// its credit up to now (upstream the stop_machine that precedes the removal switched it
    /// out through `csched2_schedule`). Every vCPU re-reads its hard and soft affinity.
    pub(super) fn cpu_remove(&mut self, ctx: &mut XenCtx, cpu: CpuId) {
        let now = ctx.now() as i64;
        if let Some(c) = ctx.cpu(cpu).curr {
            self.burn_credits(c, now);
        }
        self.online.remove(cpu);
        let r = self.cpu_rq[cpu.idx()];
        let rq = &mut self.rqs[r];
        rq.idle.remove(cpu);
        rq.smt_idle.remove(cpu);
        rq.active.remove(cpu);
        rq.tickled.remove(cpu);
        let active = rq.active;
        for rc in active.iter() {
            self.sibling_mask[rc.idx()].remove(cpu);
        }
        let rq = &mut self.rqs[r];
        rq.nr_cpus -= 1;
        rq.refcnt -= 1;
        if rq.nr_cpus > 0 && rq.pick_bias == cpu {
            rq.pick_bias = active
                .first()
                .expect("a runqueue with CPUs has an active one");
        }
        self.refresh_affinities(ctx);
    }

    /// Xen: csched2_alloc_pdata (cpu_add_to_runqueue, its spread computed from the CPUs
    /// online now) and csched2_switch_sched (init_cpu_runqueue): `cpu` joins the runqueue its
    /// topology matches, or a new one, idle.
    pub(super) fn cpu_add(&mut self, ctx: &mut XenCtx, cpu: CpuId) {
        let topo: Vec<CpuTopo> = (0..ctx.nr_cpus())
            .map(|c| ctx.cpu(CpuId(c as u32)).topo)
            .collect();
        let n = (0..ctx.nr_cpus())
            .filter(|&c| ctx.cpu(CpuId(c as u32)).online)
            .count();
        let max_per_rq = {
            let min_rqs = (n - 1) / self.params.max_cpus_runqueue as usize + 1;
            (n / min_rqs) as u32
        };
        self.online.insert(cpu);
        let r = self.cpu_add_to_runqueue(&topo, cpu.idx(), max_per_rq);
        self.init_cpu_runqueue(&topo, cpu.idx(), r);
        self.refresh_affinities(ctx);
    }

    /// Every vCPU's cached hard and soft affinity, from its (possibly widened) parameters and
    /// the CPUs online now (Xen keeps the masks and ANDs them with the pool's CPUs where it
    /// reads them; `CSFLAG_pinned` follows the hard affinity as set, `csched2_aff_cntl`).
    fn refresh_affinities(&mut self, ctx: &XenCtx) {
        for i in 0..self.units.len() {
            let p = &ctx.ent(EntityId(i as u32)).params;
            let hard = p.hard_affinity.and(&self.online);
            let soft = p.soft_affinity;
            let soft_and_hard = soft.and(&hard);
            let has_soft = !soft_and_hard.is_empty()
                && !hard.is_subset(&soft)
                && !self.online.is_subset(&soft);
            let pinned = p.hard_affinity.len() == 1;
            let u = &mut self.units[i];
            u.hard = hard;
            u.soft = soft;
            u.soft_and_hard = soft_and_hard;
            u.has_soft = has_soft;
            u.pinned = pinned;
        }
    }

    /// Whether runqueue `r` has CPUs (is on Xen's runqueue list).
    #[inline]
    pub(super) fn rq_live(&self, r: usize) -> bool {
        self.rqs[r].refcnt > 0
    }
}
