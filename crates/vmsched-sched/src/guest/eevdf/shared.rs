//! EEVDF's side of what it shares with CFS: the fields CFS's CPU selection and load balancing
//! read (`SelectFair`, `BalanceFair`), CPU hot-plug (Linux 6.x `rq_offline_fair` /
//! `rq_online_fair` with the sched domains rebuilt, `move_queued_task`) and a run-time nice or
//! policy change (`set_user_nice`, `reweight_entity` / `reweight_eevdf`, `prio_changed_fair`).
//! Facts only, our own code.

use vmsched_core::cpuset::CpuSet;
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{CpuTopo, Policy};

use super::{Eevdf, LoadWeight};
use crate::guest::cfs::balance::{BalanceFair, LbState};
use crate::guest::cfs::pelt::{RqLoad, SeLoad};
use crate::guest::cfs::select::{select_fair_fields, SelectFair, WakeeMut};
use crate::guest::linux_core::LinuxCtx;

impl SelectFair for Eevdf {
    #[inline]
    fn nr_cpus(&self) -> usize {
        self.rqs.len()
    }
    #[inline]
    fn cpu_topo(&self, c: usize) -> &CpuTopo {
        &self.topo[c]
    }
    #[inline]
    fn llc_size(&self, c: usize) -> u32 {
        self.llc_size[c]
    }
    #[inline]
    fn has_smt(&self) -> bool {
        self.smt
    }
    #[inline]
    fn sees_vcpu_preempted(&self) -> bool {
        self.params.vcpu_is_preempted
    }
    #[inline]
    fn hz(&self) -> u64 {
        self.hz
    }
    #[inline]
    fn tick_ns(&self) -> u64 {
        self.tick_ns
    }
    // Delayed tasks count in `rq_nr_running`, as in 6.12's `rq->nr_running`.
    select_fair_fields!();
}

impl BalanceFair for Eevdf {
    #[inline]
    fn migration_cost(&self) -> u64 {
        self.params.sched_migration_cost_ns
    }
    #[inline]
    fn se_policy(&self, e: usize) -> Policy {
        self.ses[e].policy
    }
    #[inline]
    fn se_exec_start(&self, e: usize) -> u64 {
        self.ses[e].exec_start
    }
    /// CACHE_HOT_BUDDY: the next buddy (EEVDF has no `last`).
    #[inline]
    fn is_hot_buddy(&self, src: usize, e: usize) -> bool {
        self.feat.cache_hot_buddy && self.rqs[src].next == Some(e)
    }
    #[inline]
    fn queued(&self, c: usize) -> &[usize] {
        &self.rqs[c].queue
    }
    /// Linux 6.12: can_migrate_task leaves delayed tasks where they are.
    #[inline]
    fn may_migrate(&self, e: usize) -> bool {
        !self.ses[e].sched_delayed
    }
    #[inline]
    fn lb(&self, c: usize) -> &LbState {
        &self.rqs[c].lb
    }
    #[inline]
    fn lb_mut(&mut self, c: usize) -> &mut LbState {
        &mut self.rqs[c].lb
    }
    #[inline]
    fn update_blocked_averages(&mut self, ctx: &LinuxCtx, c: usize) {
        let now = ctx.rq_clock_task(c);
        let load = self.rq_pelt_load(c);
        self.rqs[c].pelt.update_blocked(now, load);
    }

    /// Linux 6.x: detach_task (dequeue without DEQUEUE_SLEEP: the lag is saved, the deadline
    /// kept relative), set_task_cpu, attach_task (placed on `dst` with that lag), then the
    /// wake-up preemption check on `dst`.
    fn lb_move_task(&mut self, ctx: &mut LinuxCtx, e: usize, src: usize, dst: usize) {
        self.move_queued(ctx, e, src, dst);
        self.check_preempt_wakeup(ctx, dst, e, false);
    }
}

impl Eevdf {
    /// What `cpu`'s queue signal accumulates now (delayed entities still count, as in 6.12).
    #[inline]
    fn rq_pelt_load(&self, cpu: usize) -> RqLoad {
        let rq = &self.rqs[cpu];
        RqLoad {
            weight: rq.load,
            nr: rq.nr_running,
            curr: rq.curr.is_some(),
        }
    }

    /// Linux 6.x: update_load_avg (as 5.10's, cfs/pelt.rs); `attach`: DO_ATTACH.
    #[inline]
    pub(super) fn update_load_avg(&mut self, ctx: &LinuxCtx, cpu: usize, e: usize, attach: bool) {
        let now = ctx.rq_clock_task(cpu);
        let load = self.rq_pelt_load(cpu);
        let rq = &mut self.rqs[cpu];
        let se = &mut self.ses[e];
        let s = SeLoad {
            on_rq: se.on_rq,
            running: rq.curr == Some(e),
            weight: se.load.weight,
        };
        rq.pelt
            .update_load_avg(now, load, &mut se.avg, s, attach, &mut se.pelt_fresh);
    }

    /// `cpu` went offline or came online: every task's `allowed` from its (possibly widened)
    /// affinity and the CPUs online now; an offline CPU's delayed tasks are dequeued for good
    /// (upstream's `migrate_tasks` picks them, and the pick completes their dequeue).
    pub(super) fn hotplug(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        let mut online = CpuSet::empty();
        for c in 0..self.rqs.len() {
            if ctx.cpu(CpuId(c as u32)).online {
                online.insert(CpuId(c as u32));
            }
        }
        for (i, se) in self.ses.iter_mut().enumerate() {
            se.allowed = ctx
                .ent(EntityId(i as u32))
                .params
                .hard_affinity
                .and(&online);
        }
        if !ctx.cpu(CpuId(cpu as u32)).online {
            while let Some(&e) = self.rqs[cpu]
                .queue
                .iter()
                .find(|&&e| self.ses[e].sched_delayed)
            {
                self.dequeue_entity(ctx, cpu, e, true, true);
            }
        }
    }

    /// Moves queued (not running, not delayed) `e` from `src` to `dst` (Linux
    /// `move_queued_task`: `deactivate_task`, `set_task_cpu`, `activate_task`).
    pub(super) fn move_queued(&mut self, ctx: &mut LinuxCtx, e: usize, src: usize, dst: usize) {
        debug_assert!(self.ses[e].on_rq && self.rqs[src].curr != Some(e));
        debug_assert!(!self.ses[e].sched_delayed);
        self.dequeue_entity(ctx, src, e, false, false);
        let se = &mut self.ses[e];
        self.rqs[src]
            .pelt
            .detach_entity(&mut se.avg, se.load.weight);
        se.cpu = dst;
        se.exec_start = 0;
        self.enqueue_entity(ctx, dst, e, false);
    }

    /// Takes `e`'s new nice and policy. A queued or running task is reweighted in place around
    /// `V` (6.12 `reweight_eevdf`: its lag and its deadline's distance from `V` scale by
    /// old/new weight); a blocked one has its saved lag scaled. Then `prio_changed_fair`: a
    /// running task whose weight went down is rescheduled; a queued one asks the core for a
    /// preemption check (returns true).
    pub(super) fn change_prio(&mut self, ctx: &mut LinuxCtx, e: EntityId) -> bool {
        let p = ctx.ent(e).params.linux;
        let i = e.idx();
        let cpu = self.ses[i].cpu;
        let queued = self.ses[i].on_rq;
        let running = self.rqs[cpu].curr == Some(i);
        let new = LoadWeight::of_task(p.nice, p.policy);
        let (old_w, old_policy) = (self.ses[i].load.weight, self.ses[i].policy);
        if queued {
            self.update_curr(ctx, cpu, true);
            let v_avg = self.avg_vruntime(cpu);
            if !running {
                self.queue_remove(cpu, i);
            }
            let rq = &mut self.rqs[cpu];
            rq.load = rq.load - old_w + new.weight;
            match (old_policy == Policy::Idle, p.policy == Policy::Idle) {
                (false, true) => rq.idle_nr_running += 1,
                (true, false) => rq.idle_nr_running -= 1,
                _ => {}
            }
            let (ow, nw) = (old_w as i64, new.weight as i64);
            if v_avg != self.ses[i].vruntime {
                let vlag = self.entity_lag(v_avg, i) * ow / nw;
                self.ses[i].vruntime = v_avg.wrapping_sub(vlag as u64);
            }
            let se = &mut self.ses[i];
            let vslice = super::vdiff(se.deadline, v_avg) * ow / nw;
            se.deadline = v_avg.wrapping_add(vslice as u64);
            if se.avg.last_update_time != 0 {
                crate::guest::cfs::pelt::reweight(
                    &mut self.rqs[cpu].pelt.avg,
                    &mut se.avg,
                    old_w,
                    new.weight,
                );
            }
            se.load = new;
            se.policy = p.policy;
            if !running {
                self.queue_insert(cpu, i);
            }
            self.update_min_vruntime(cpu);
        } else {
            let se = &mut self.ses[i];
            if se.avg.last_update_time != 0 {
                crate::guest::cfs::pelt::reweight(
                    &mut self.rqs[cpu].pelt.avg,
                    &mut se.avg,
                    old_w,
                    new.weight,
                );
            }
            se.vlag = se.vlag * old_w as i64 / new.weight as i64;
            se.load = new;
            se.policy = p.policy;
        }
        if !queued || self.ses[i].sched_delayed {
            return false;
        }
        if running {
            if new.weight < old_w {
                ctx.resched_curr(cpu);
            }
            return false;
        }
        true
    }
}
