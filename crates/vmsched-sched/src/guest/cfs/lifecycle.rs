//! CFS's run-time change of a task's nice value or fair policy (Linux v5.10 `set_user_nice`,
//! `__sched_setscheduler` within the fair class, `reweight_task`, `prio_changed_fair`; facts
//! only, our own code).

use vmsched_core::ids::EntityId;

use super::weights::LoadWeight;
use super::Cfs;
use crate::guest::linux_core::LinuxCtx;
use vmsched_core::sched::Policy;

impl Cfs {
    /// Takes `e`'s new nice and policy from its parameters. A queued or running task is
    /// reweighted in place: its run queue's load changes by the difference, its vruntime stays
    /// (upstream's DEQUEUE_SAVE / ENQUEUE_RESTORE pair makes it relative and back), time run so
    /// far is charged at the old weight first (`update_curr`). Then `prio_changed_fair`: a
    /// running task whose priority dropped (its weight went down: a higher nice, or
    /// SCHED_IDLE) is rescheduled; a queued one asks the core for a preemption check (returns
    /// true). Upstream compares `prio`, which SCHED_IDLE does not change; comparing weights
    /// differs only there, by one reschedule.
    pub(super) fn change_prio(&mut self, ctx: &mut LinuxCtx, e: EntityId) -> bool {
        let p = ctx.ent(e).params.linux;
        let i = e.idx();
        let cpu = self.ses[i].cpu;
        let queued = self.ses[i].on_rq;
        let running = self.rqs[cpu].curr == Some(i);
        if queued || running {
            self.update_curr(ctx, cpu);
        }
        let new = LoadWeight::of_task(p.nice, p.policy);
        let se = &mut self.ses[i];
        let (old_w, old_policy) = (se.load.weight, se.policy);
        se.load = new;
        se.policy = p.policy;
        if se.avg.last_update_time != 0 {
            // reweight_entity: the task's load average is re-scaled to the new weight.
            let rq = &mut self.rqs[cpu].pelt.avg;
            super::pelt::reweight(rq, &mut se.avg, old_w, new.weight);
        }
        if queued {
            let rq = &mut self.rqs[cpu];
            rq.load = rq.load - old_w + new.weight;
            match (old_policy == Policy::Idle, p.policy == Policy::Idle) {
                (false, true) => rq.idle_nr_running += 1,
                (true, false) => rq.idle_nr_running -= 1,
                _ => {}
            }
        }
        if !queued {
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
