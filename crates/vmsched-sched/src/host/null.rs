//! Xen's null scheduler, as in Xen 4.20 (`xen/common/sched/null.c`, tag RELEASE-4.20.0) and
//! xen-schedulers.md §6. Facts only; the code is our own.
//!
//! # What it models
//!
//! Each vCPU is assigned to one pCPU and each pCPU holds at most one vCPU, for good: the pCPU
//! runs its vCPU whenever that is runnable and idles otherwise. Nothing is time-sliced, nothing
//! is preempted, and there is no timer. A vCPU that finds no free pCPU in its affinity waits in
//! a global FIFO *waitqueue* and does not run at all until a pCPU is freed (its vCPU removed,
//! taken down by the guest, or moved away) or joins the pool; the freed pCPU takes the first
//! waiting vCPU whose soft affinity holds it, else the first whose hard affinity does.
//!
//! Placement (`pick_res`): the vCPU's current CPU if it is free (or already its own) and in its
//! affinity, soft affinity first then hard; else the first free CPU of that affinity; else (no
//! free CPU at all) some CPU of its hard affinity, and the vCPU waits.
//!
//! # Engine mapping
//!
//! null implements the Xen ops ([`XenOps`]) and runs on the Xen core (`host/xen_core.rs`):
//! `Null::sched` builds the pair. `insert_unit` is `null_unit_insert`, `remove_unit` is
//! `null_unit_remove`, `wake` is `null_unit_wake`, `sleep` is `null_unit_sleep`, `do_schedule`
//! is `null_schedule`, `pick_resource` is `null_res_pick` (`pick_res`), `migrate` is
//! `null_unit_migrate`; `remove_cpu` and `add_cpu` are `null_deinit_pdata` and
//! `null_switch_sched` (`init_pdata`). A vCPU the guest takes down (`VCPUOP_down`, the core's
//! `_VPF_down`) is "offline" for null and gives its pCPU up; a paused vCPU (domain pause) keeps
//! its pCPU, which idles. null reads no domain parameter and has no yield hook.
//!
//! # Simplifications and what follows the source over the spec
//!
//! * One cpupool holding every online CPU; no tasklets. Every try-lock succeeds, so
//!   `null_schedule` never has to retry a waiting vCPU later.
//! * With no free CPU in its hard affinity, upstream records a random CPU of it
//!   (`cpumask_any`) as the waiting vCPU's `processor`; here the next one in cycle order from its
//!   current CPU. It only names the CPU a waiting vCPU is recorded on.
//! * A pCPU leaving the pool forgets its vCPU (`null_deinit_pdata`); the Xen core then moves
//!   that vCPU (`pick_resource`, `migrate`, `wake`): to a free CPU, or into the waitqueue.
//!   Upstream migrates the vCPUs before the CPU leaves, so its `unit_deassign` may first hand
//!   the leaving CPU to a waiting vCPU; here the CPU leaves first and no waiting vCPU is handed
//!   a CPU that is going away.

use crate::host::xen_core::{put_unit, XenCore, XenCtx, XenOps};
use vmsched_core::cpuset::{CpuSet, MAX_CPUS};
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{Pick, WakeInfo};
use vmsched_core::trace::SchedEvent;

/// null has no parameters (`sched=null`); its configuration is an empty table.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct NullParams {}

/// Affinity balancing steps (`for_each_affinity_balance_step`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Soft,
    Hard,
}
const STEPS: [Step; 2] = [Step::Soft, Step::Hard];

/// Per-vCPU state (Xen `struct null_unit` and `processor(v)`).
#[derive(Clone, Debug)]
struct Unit {
    processor: CpuId,
    in_waitq: bool,
}

/// null as the engine runs it: the policy on the Xen core.
pub type NullSched = XenCore<Null>;

/// The null scheduler of one pool holding every CPU of the level.
pub struct Null {
    online: CpuSet,
    /// CPUs with no vCPU assigned (`cpus_free`).
    cpus_free: CpuSet,
    /// The vCPU assigned to each CPU (`npc->unit`).
    assigned: Vec<Option<EntityId>>,
    units: Vec<Unit>,
    /// vCPUs without a CPU, FIFO.
    waitq: Vec<EntityId>,
}

impl Null {
    /// null for `ncpus` CPUs, all in the pool and free.
    pub fn new(ncpus: usize) -> Null {
        assert!(
            (1..=MAX_CPUS).contains(&ncpus),
            "null: needs 1..={MAX_CPUS} CPUs, got {ncpus}"
        );
        Null {
            online: CpuSet::first_n(ncpus),
            cpus_free: CpuSet::first_n(ncpus),
            assigned: vec![None; ncpus],
            units: Vec::new(),
            waitq: Vec::new(),
        }
    }

    /// null on the Xen core (Xen's default timer slop; null arms no timer but the core's).
    pub fn sched(ncpus: usize) -> NullSched {
        XenCore::new(Null::new(ncpus))
    }

    /// The vCPU assigned to `cpu`, if any.
    pub fn assigned(&self, cpu: CpuId) -> Option<EntityId> {
        self.assigned[cpu.idx()]
    }

    /// The waitqueue, in order.
    pub fn waitq(&self) -> &[EntityId] {
        &self.waitq
    }

    // ---------------------------------------------------------------------------------------
    // Affinity
    // ---------------------------------------------------------------------------------------

    /// Xen `has_soft_affinity`: the soft affinity is effective (it meets the hard one without
    /// holding all of it) and does not hold the whole pool.
    fn has_soft(&self, x: &XenCtx, e: EntityId) -> bool {
        let p = &x.ent(e).params;
        let (hard, soft) = (&p.hard_affinity, &p.soft_affinity);
        !hard.is_subset(soft) && soft.intersects(hard) && !self.online.is_subset(soft)
    }

    /// Xen `affinity_balance_cpumask` ∩ the pool: soft ∩ hard (hard if that is empty), or hard.
    fn balance_mask(&self, x: &XenCtx, e: EntityId, step: Step) -> CpuSet {
        let p = &x.ent(e).params;
        let mut m = match step {
            Step::Soft => {
                let m = p.soft_affinity.and(&p.hard_affinity);
                if m.is_empty() {
                    p.hard_affinity
                } else {
                    m
                }
            }
            Step::Hard => p.hard_affinity,
        };
        m.and_with(&self.online);
        m
    }

    /// Xen: unit_check_affinity.
    fn check_affinity(&self, x: &XenCtx, e: EntityId, cpu: CpuId, step: Step) -> bool {
        self.balance_mask(x, e, step).contains(cpu)
    }

    /// Xen: pick_res, with its trace record.
    fn pick_res(&self, x: &mut XenCtx, e: EntityId) -> CpuId {
        let cpu = self.pick_cpu(x, e);
        x.trace(|| SchedEvent::PickedCpu { ent: e, cpu });
        cpu
    }

    /// Xen: pick_res, the choice.
    fn pick_cpu(&self, x: &XenCtx, e: EntityId) -> CpuId {
        let cpu = self.units[e.idx()].processor;
        for step in STEPS {
            if step == Step::Soft && !self.has_soft(x, e) {
                continue;
            }
            let mut m = self.balance_mask(x, e, step);
            let mine = matches!(self.assigned.get(cpu.idx()), Some(None))
                || self.assigned.get(cpu.idx()) == Some(&Some(e));
            if mine && m.contains(cpu) {
                return cpu;
            }
            m.and_with(&self.cpus_free);
            if let Some(c) = m.first() {
                return c;
            }
        }
        // Upstream: cpumask_any (random); here the next in cycle order (module doc).
        x.ent(e)
            .params
            .hard_affinity
            .and(&self.online)
            .test_or_cycle(cpu)
            .expect("null: a vCPU's hard affinity holds an online CPU")
    }

    // ---------------------------------------------------------------------------------------
    // Assignment
    // ---------------------------------------------------------------------------------------

    /// Xen: unit_assign.
    fn unit_assign(&mut self, x: &mut XenCtx, e: EntityId, cpu: CpuId) {
        self.assigned[cpu.idx()] = Some(e);
        self.units[e.idx()].processor = cpu;
        self.cpus_free.remove(cpu);
        x.trace(|| SchedEvent::Assign { ent: e, cpu });
    }

    /// Xen: unit_deassign. The CPU is free; the first waiting vCPU that may run there (soft
    /// affinity first, then hard) is assigned to it and the CPU reschedules. True if one was.
    fn unit_deassign(&mut self, x: &mut XenCtx, e: EntityId) -> bool {
        let cpu = self.units[e.idx()].processor;
        debug_assert_eq!(
            self.assigned[cpu.idx()],
            Some(e),
            "null: deassign of another"
        );
        self.assigned[cpu.idx()] = None;
        self.cpus_free.insert(cpu);
        x.trace(|| SchedEvent::Deassign { ent: e, cpu });
        if let Some(i) = self.waitq_match(x, cpu) {
            let w = self.waitq.remove(i);
            self.units[w.idx()].in_waitq = false;
            self.unit_assign(x, w, cpu);
            x.resched(cpu);
            return true;
        }
        false
    }

    /// The first waiting vCPU whose soft affinity (if effective), then hard affinity, holds
    /// `cpu`: its index in the waitqueue.
    fn waitq_match(&self, x: &XenCtx, cpu: CpuId) -> Option<usize> {
        for step in STEPS {
            for (i, &w) in self.waitq.iter().enumerate() {
                if step == Step::Soft && !self.has_soft(x, w) {
                    continue;
                }
                if self.check_affinity(x, w, cpu, step) {
                    return Some(i);
                }
            }
        }
        None
    }

    fn waitq_remove(&mut self, e: EntityId) {
        if let Some(i) = self.waitq.iter().position(|&w| w == e) {
            self.waitq.remove(i);
        }
        self.units[e.idx()].in_waitq = false;
    }

    fn waitq_push(&mut self, e: EntityId) {
        if !self.units[e.idx()].in_waitq {
            self.units[e.idx()].in_waitq = true;
            self.waitq.push(e);
        }
    }
}

impl XenOps for Null {
    fn name(&self) -> &'static str {
        "null"
    }

    /// Xen: null_unit_insert. Picks a CPU; a free one takes the vCPU; if none was picked free
    /// while one of its affinity is, picks again; else the vCPU waits.
    fn insert_unit(&mut self, x: &mut XenCtx, e: EntityId) {
        let p = &x.ent(e).params;
        assert!(
            p.hard_affinity.intersects(&self.online),
            "null: hard affinity of {} holds no CPU",
            p.name
        );
        put_unit(
            &mut self.units,
            e,
            Unit {
                processor: p.initial_cpu,
                in_waitq: false,
            },
            Unit::clone,
        );
        self.waitq
            .reserve(self.units.len().saturating_sub(self.waitq.len()));
        if x.is_down(e) {
            return;
        }
        loop {
            let cpu = self.pick_res(x, e);
            self.units[e.idx()].processor = cpu;
            if self.assigned[cpu.idx()].is_none() {
                return self.unit_assign(x, e, cpu);
            }
            let allowed = x.ent(e).params.hard_affinity.and(&self.online);
            if !allowed.intersects(&self.cpus_free) {
                return self.waitq_push(e);
            }
        }
    }

    /// Xen: null_unit_remove (domain destroyed): out of the waitqueue, or its CPU is freed
    /// (and handed to a waiting vCPU).
    fn remove_unit(&mut self, x: &mut XenCtx, e: EntityId) {
        if x.is_down(e) {
            return;
        }
        if self.units[e.idx()].in_waitq {
            return self.waitq_remove(e);
        }
        let cpu = self.units[e.idx()].processor;
        if self.assigned[cpu.idx()] == Some(e) {
            self.unit_deassign(x, e);
        }
    }

    /// Xen: null_unit_wake. An assigned vCPU has its CPU reschedule; a waiting one stays
    /// waiting; one coming online takes its CPU if that is free and in its affinity, or waits
    /// and has every free CPU of its affinity reschedule.
    fn wake(&mut self, x: &mut XenCtx, e: EntityId, _info: WakeInfo) {
        let cpu = self.units[e.idx()].processor;
        if x.cpu(cpu).curr == Some(e) || self.units[e.idx()].in_waitq {
            return;
        }
        if self.assigned[cpu.idx()] == Some(e) {
            return x.resched(cpu);
        }
        if self.assigned[cpu.idx()].is_none()
            && self.check_affinity(x, e, cpu, Step::Hard)
            && (!self.has_soft(x, e) || self.check_affinity(x, e, cpu, Step::Soft))
        {
            self.unit_assign(x, e, cpu);
            return x.resched(cpu);
        }
        self.waitq_push(e);
        let mut free = x.ent(e).params.hard_affinity.and(&self.online);
        free.and_with(&self.cpus_free);
        for c in free.iter() {
            x.resched(c);
        }
    }

    /// Xen: null_unit_sleep. A vCPU going offline (`VCPUOP_down`) leaves the waitqueue or
    /// frees its CPU (which may go to a waiting vCPU); a running one has its CPU reschedule.
    fn sleep(&mut self, x: &mut XenCtx, e: EntityId) {
        let cpu = self.units[e.idx()].processor;
        let mut tickled = false;
        if x.is_down(e) {
            if self.units[e.idx()].in_waitq {
                self.waitq_remove(e);
            } else if self.assigned[cpu.idx()] == Some(e) {
                tickled = self.unit_deassign(x, e);
            }
        }
        if !tickled && x.cpu(cpu).curr == Some(e) {
            x.resched(cpu);
        }
    }

    /// null has no yield hook: SCHEDOP_yield only reschedules.
    fn yield_(&mut self, _x: &mut XenCtx, _e: EntityId) {}

    /// Xen: null_schedule. The CPU's vCPU if it is runnable, else idle, with no timer. A free
    /// CPU first takes the first waiting vCPU that may run on it (soft affinity first).
    fn do_schedule(&mut self, x: &mut XenCtx, cpu: CpuId) -> Pick {
        let mut next = self.assigned[cpu.idx()];
        x.trace(|| SchedEvent::NullSchedule {
            cpu,
            assigned: next,
        });
        if next.is_none() {
            if let Some(i) = self.waitq_match(x, cpu) {
                let w = self.waitq.remove(i);
                self.units[w.idx()].in_waitq = false;
                self.unit_assign(x, w, cpu);
                next = Some(w);
            } else {
                self.cpus_free.insert(cpu);
            }
        }
        Pick {
            next: next.filter(|&n| x.unit_runnable(n)),
            slice: None,
        }
    }

    /// Xen: null_res_pick.
    fn pick_resource(&mut self, x: &mut XenCtx, e: EntityId) -> CpuId {
        self.pick_res(x, e)
    }

    /// Xen: null_unit_migrate. Off its old CPU (handed to a waiting vCPU) or out of the
    /// waitqueue; then the new CPU takes it if free and allowed, else it waits.
    fn migrate(&mut self, x: &mut XenCtx, e: EntityId, new_cpu: CpuId) {
        let old = self.units[e.idx()].processor;
        if old == new_cpu {
            return;
        }
        x.trace(|| SchedEvent::Migrate {
            ent: e,
            from: old,
            to: new_cpu,
        });
        if self.assigned[old.idx()] == Some(e) {
            self.unit_deassign(x, e);
        }
        if x.is_down(e) {
            self.waitq_remove(e);
        } else if self.assigned[new_cpu.idx()].is_none()
            && self.check_affinity(x, e, new_cpu, Step::Hard)
        {
            self.waitq_remove(e);
            self.unit_assign(x, e, new_cpu);
        } else {
            self.waitq_push(e);
        }
        self.units[e.idx()].processor = new_cpu;
    }

    /// Xen `processor(v)`.
    fn processor(&self, e: EntityId) -> CpuId {
        self.units[e.idx()].processor
    }

    /// Xen: null_deinit_pdata. The CPU leaves the pool and forgets its vCPU (the core moves
    /// it next).
    fn remove_cpu(&mut self, _x: &mut XenCtx, cpu: CpuId) {
        self.online.remove(cpu);
        self.cpus_free.remove(cpu);
        self.assigned[cpu.idx()] = None;
    }

    /// Xen: null_switch_sched (init_pdata). The CPU joins the pool free; its reschedule (the
    /// core's) takes a waiting vCPU.
    fn add_cpu(&mut self, _x: &mut XenCtx, cpu: CpuId) {
        self.online.insert(cpu);
        self.cpus_free.insert(cpu);
        self.assigned[cpu.idx()] = None;
    }
}

#[cfg(test)]
mod tests;
