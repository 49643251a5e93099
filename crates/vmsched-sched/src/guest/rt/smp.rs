//! The RT class on several CPUs (Linux v5.10 `kernel/sched/rt.c` and `kernel/sched/cpupri.c`;
//! spec/linux-schedulers.md §3.2 SMP, ERRATA L7): the cpupri levels, the wake-up CPU choice
//! (`select_task_rq_rt`, `find_lowest_rq`), push and pull (`push_rt_tasks`, `pull_rt_task`) and
//! the equal-priority preemption check. The rules are in the module doc of `rt.rs`, "CPUs:
//! placement, push and pull"; this file holds their code, moved out of `rt.rs` unchanged.

use vmsched_core::ids::{CpuId, EntityId};

use super::{Rt, NIL, NORMAL_LEVEL};
use crate::guest::linux_core::LinuxCtx;

impl Rt {
    #[inline]
    pub(super) fn nr_cpus_allowed(ctx: &LinuxCtx, e: EntityId) -> usize {
        ctx.ent(e).params.hard_affinity.count()
    }

    /// The cpupri level of `cpu` (lower number = busier with higher priorities).
    #[inline]
    pub(super) fn level(&self, cpu: usize) -> u8 {
        self.rqs[cpu].highest_prio()
    }

    /// Linux v5.10: cpupri_find: the lowest level below `e`'s priority that an online CPU of
    /// `e`'s affinity is at, or None.
    pub(super) fn cpupri_find(&self, ctx: &LinuxCtx, e: EntityId) -> Option<u8> {
        let prio = self.tasks[e.idx()].prio;
        let mut best: Option<u8> = None;
        for c in ctx.ent(e).params.hard_affinity.iter() {
            if c.idx() >= self.rqs.len() || !ctx.cpu(c).online {
                continue;
            }
            let l = self.level(c.idx());
            if l > prio && best.is_none_or(|b| l > b) {
                best = Some(l);
            }
        }
        best
    }

    /// Linux v5.10: find_lowest_rq: among the CPUs at the lowest level below `e`, its own CPU,
    /// else the CPU running this code (`this`) or the first one, searched through `e`'s CPU's
    /// SMT core, its LLC and the whole machine.
    pub(super) fn find_lowest_rq(
        &self,
        ctx: &LinuxCtx,
        e: EntityId,
        this: Option<CpuId>,
    ) -> Option<CpuId> {
        let level = self.cpupri_find(ctx, e)?;
        let aff = &ctx.ent(e).params.hard_affinity;
        let in_mask = |c: CpuId| {
            c.idx() < self.rqs.len()
                && aff.contains(c)
                && ctx.cpu(c).online
                && self.level(c.idx()) == level
        };
        let cpu = self.tasks[e.idx()].cpu;
        if in_mask(cpu) {
            return Some(cpu);
        }
        let this = this.filter(|&t| in_mask(t));
        let t0 = ctx.cpu(cpu).topo;
        let spans: [&dyn Fn(CpuId) -> bool; 3] = [
            &|c| {
                let t = ctx.cpu(c).topo;
                t.socket == t0.socket && t.core == t0.core
            },
            &|c| ctx.cpu(c).topo.llc == t0.llc,
            &|_| true,
        ];
        for span in spans {
            if let Some(t) = this.filter(|&t| span(t)) {
                return Some(t);
            }
            if let Some(c) = aff.iter().find(|&c| in_mask(c) && span(c)) {
                return Some(c);
            }
        }
        None
    }

    /// The task running `cpu`'s current RT task, if the current task is RT.
    #[inline]
    pub(super) fn curr_prio(&self, cpu: usize) -> u8 {
        self.rqs[cpu]
            .curr
            .map_or(NORMAL_LEVEL, |c| self.tasks[c.idx()].prio)
    }

    /// The highest-priority queued, not running, migratable RT task of `cpu` that may run on
    /// `dst` (`pick_next_pushable_task`, `pick_highest_pushable_task`).
    pub(super) fn pushable(
        &self,
        ctx: &LinuxCtx,
        cpu: usize,
        dst: Option<CpuId>,
    ) -> Option<EntityId> {
        let rq = &self.rqs[cpu];
        for w in 0..2 {
            let mut bits = rq.bitmap[w];
            while bits != 0 {
                let p = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let mut id = rq.head[p];
                while id != NIL {
                    let e = EntityId(id);
                    let aff = &ctx.ent(e).params.hard_affinity;
                    if rq.curr != Some(e) && aff.count() > 1 && dst.is_none_or(|d| aff.contains(d))
                    {
                        return Some(e);
                    }
                    id = self.tasks[e.idx()].next;
                }
            }
        }
        None
    }

    /// Moves queued (not running) `e` from `src` to `dst`, to the tail (Linux
    /// `deactivate_task`, `set_task_cpu`, `activate_task`).
    pub(super) fn move_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, src: usize, dst: usize) {
        self.dequeue(ctx, src, e);
        ctx.update_rq_clock(dst);
        self.enqueue(ctx, dst, e, false);
    }

    /// Linux v5.10: push_rt_task. Returns whether a task moved.
    pub(super) fn push_rt_task(&mut self, ctx: &mut LinuxCtx, cpu: usize) -> bool {
        if self.rqs[cpu].nr_running < 2 {
            return false;
        }
        let Some(next) = self.pushable(ctx, cpu, None) else {
            return false;
        };
        if self.tasks[next.idx()].prio < self.curr_prio(cpu) {
            // It should preempt here: the CPU reschedules instead.
            ctx.resched_curr(cpu);
            return false;
        }
        let Some(dst) = self.find_lowest_rq(ctx, next, Some(CpuId(cpu as u32))) else {
            return false;
        };
        if dst.idx() == cpu || self.level(dst.idx()) <= self.tasks[next.idx()].prio {
            return false;
        }
        self.move_task(ctx, next, cpu, dst.idx());
        ctx.resched_curr(dst.idx());
        true
    }

    /// Linux v5.10: push_rt_tasks.
    pub(super) fn push_rt_tasks(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        while self.push_rt_task(ctx, cpu) {}
    }

    /// Linux v5.10: pull_rt_task: from the CPUs with more than one RT task (the root domain's
    /// `rto_mask`, in index order), the highest queued task allowed here that outranks what
    /// this CPU has left and would not preempt its own CPU's current task.
    pub(super) fn pull_rt_task(&mut self, ctx: &mut LinuxCtx, this: usize) {
        let mut best: Option<(EntityId, usize)> = None;
        let mut bar = self.level(this);
        for src in 0..self.rqs.len() {
            if src == this || self.rqs[src].nr_running < 2 || !ctx.cpu(CpuId(src as u32)).online {
                continue;
            }
            let Some(p) = self.pushable(ctx, src, Some(CpuId(this as u32))) else {
                continue;
            };
            let prio = self.tasks[p.idx()].prio;
            if prio < bar && prio >= self.curr_prio(src) {
                bar = prio;
                best = Some((p, src));
            }
        }
        if let Some((p, src)) = best {
            ctx.update_rq_clock(src);
            self.move_task(ctx, p, src, this);
        }
    }

    /// Linux v5.10: check_preempt_equal_prio: `p` of `curr`'s priority preempts only if
    /// `curr` can run elsewhere and `p` cannot; it then goes to the head of the list.
    pub(super) fn check_preempt_equal_prio(
        &mut self,
        ctx: &mut LinuxCtx,
        cpu: usize,
        curr: EntityId,
        p: EntityId,
    ) {
        if Self::nr_cpus_allowed(ctx, curr) == 1 || self.cpupri_find(ctx, curr).is_none() {
            return;
        }
        if Self::nr_cpus_allowed(ctx, p) != 1 && self.cpupri_find(ctx, p).is_some() {
            return;
        }
        self.requeue(cpu, p, true);
        ctx.resched_curr(cpu);
    }

    /// Linux v5.10: select_task_rq_rt: stay on the previous CPU unless its current RT task
    /// outranks (or ties) the wakee or is pinned; then the lowest CPU, if it ranks below the
    /// wakee.
    pub(super) fn select_task_rq_rt(
        &mut self,
        ctx: &mut LinuxCtx,
        e: EntityId,
        this: Option<CpuId>,
    ) -> CpuId {
        let cpu = self.select_task_rq_rt_raw(ctx, e, this);
        Self::is_cpu_allowed_or_fallback(ctx, e, cpu)
    }

    /// Linux v5.10: the `is_cpu_allowed` check of `select_task_rq` and `select_fallback_rq`:
    /// a CPU outside `e`'s affinity (a child starts on its parent's CPU) or offline is replaced
    /// by an allowed online CPU on its node, else anywhere.
    pub(super) fn is_cpu_allowed_or_fallback(ctx: &LinuxCtx, e: EntityId, cpu: CpuId) -> CpuId {
        let aff = &ctx.ent(e).params.hard_affinity;
        let ok = |c: &CpuId| c.idx() < ctx.nr_cpus() && ctx.cpu(*c).online;
        if aff.contains(cpu) && ok(&cpu) {
            return cpu;
        }
        let node = ctx.cpu(cpu).topo.node;
        aff.iter()
            .filter(ok)
            .find(|c| ctx.cpu(*c).topo.node == node)
            .or_else(|| aff.iter().find(ok))
            .unwrap_or_else(|| {
                panic!(
                    "invariant: task {} has an online CPU in its affinity",
                    ctx.ent(e).params.name
                )
            })
    }

    pub(super) fn select_task_rq_rt_raw(
        &mut self,
        ctx: &mut LinuxCtx,
        e: EntityId,
        this: Option<CpuId>,
    ) -> CpuId {
        let cpu = self.tasks[e.idx()].cpu;
        let prio = self.tasks[e.idx()].prio;
        let Some(curr) = self.rqs[cpu.idx()].curr else {
            return cpu;
        };
        let test = Self::nr_cpus_allowed(ctx, curr) < 2 || self.tasks[curr.idx()].prio <= prio;
        if !test {
            return cpu;
        }
        match self.find_lowest_rq(ctx, e, this) {
            Some(t) if prio < self.level(t.idx()) => t,
            _ => cpu,
        }
    }
}
