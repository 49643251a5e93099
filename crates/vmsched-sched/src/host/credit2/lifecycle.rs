//! Credit2's run-time hooks: `sleep` (a paused vCPU leaves its CPU or its runqueue), `adjust`
//! (`xl sched-credit2 -d`: a domain's weight and cap) and the scheduler-wide rate limit (`xl
//! sched-credit2 -s -r`). After Xen 4.20 `csched2_unit_sleep`, `csched2_dom_cntl` and
//! `csched2_sys_cntl` (facts only; the code is our own).

use crate::host::xen_core::XenCtx;
use vmsched_core::ids::EntityId;
use vmsched_core::sched::GlobalParam;

use super::{Credit2, MIN_TIMER};

impl Credit2 {
    /// Xen: csched2_unit_sleep. A running vCPU's CPU is tickled (its `do_schedule` sees it not
    /// runnable); a queued one leaves the runqueue; one being switched out is not re-queued.
    pub(super) fn unit_sleep(&mut self, ctx: &mut XenCtx, e: EntityId) {
        let u = &self.units[e.idx()];
        let (cpu, r) = (u.processor, u.rq);
        if ctx.cpu(cpu).curr == Some(e) {
            self.tickle_cpu(ctx, cpu, r);
        } else if u.on_runq {
            self.runq_remove(e);
            self.update_load(ctx, r, Some(e), -1, ctx.now() as i64);
        } else if u.delayed_runq_add {
            self.units[e.idx()].delayed_runq_add = false;
        }
    }

    /// Xen: csched2_dom_cntl (putinfo). Weight: every vCPU of the domain takes the new weight
    /// and its runqueue's `max_weight` follows; nothing is burnt or tickled (the new weight
    /// shows at the next burn, which charges the time since the last one at it, as upstream).
    /// Cap: a new cap recomputes the pool and the per-grab quota; turning it on fills the pool, arms the replenishment timer and empties the vCPUs' budgets (they grab
    /// at their next schedule); turning it off stops the timer and unparks parked vCPUs.
    pub(super) fn dom_adjust(&mut self, ctx: &mut XenCtx, d: usize) {
        let now = ctx.now() as i64;
        // The engine wrote the same values into every vCPU of the domain.
        let Some(first) = (0..self.units.len()).find(|&i| self.units[i].dom == d) else {
            return;
        };
        let attr = ctx.ent(EntityId(first as u32)).params.xen;
        let (weight, cap) = (attr.weight as i64, attr.cap_pct);
        for i in 0..self.units.len() {
            if self.units[i].dom != d || self.units[i].weight == weight {
                continue;
            }
            let old = std::mem::replace(&mut self.units[i].weight, weight);
            let r = self.units[i].rq;
            self.update_max_weight(r, weight, old);
        }
        let dom = &mut self.doms[d];
        if cap == dom.cap_pct {
            return;
        }
        let was = dom.cap_pct;
        dom.cap_pct = cap;
        if cap != 0 {
            dom.tot_budget = self.cap_period * cap as i64 / 100;
            dom.budget_quota = (dom.tot_budget / dom.nr_units.max(1) as i64).max(MIN_TIMER);
            if was == 0 {
                dom.budget = dom.tot_budget;
                dom.next_repl = now + self.cap_period;
                let next = dom.next_repl as u64;
                for u in self.units.iter_mut().filter(|u| u.dom == d) {
                    u.budget = 0;
                }
                ctx.set_timer(d as u32, Some(next));
            }
        } else {
            ctx.set_timer(d as u32, None);
            self.unpark_parked_units(ctx, d);
        }
    }

    /// Xen: csched2_unit_remove: the vCPU (paused, off every CPU and runqueue) leaves its
    /// runqueue's list (`runq_deassign`, which updates `max_weight`) and its domain's count; a
    /// parked one leaves the parked list. The budget quota is not recomputed (as upstream).
    pub(super) fn unit_remove(&mut self, ctx: &mut XenCtx, e: EntityId) {
        let u = &self.units[e.idx()];
        assert!(
            !u.on_runq && !u.scheduled && ctx.cpu(u.processor).curr != Some(e),
            "credit2: remove_unit of a queued or running vCPU"
        );
        self.runq_deassign(e);
        let d = self.units[e.idx()].dom;
        self.doms[d].nr_units -= 1;
        self.doms[d].parked.retain(|p| *p != e);
    }

    /// Xen: csched2_sys_cntl (putinfo): the rate limit, read at the next reschedule.
    pub(super) fn sys_adjust(&mut self, p: GlobalParam) {
        match p {
            GlobalParam::RatelimitUs(r) => {
                self.params.ratelimit_us = r;
                self.ratelimit = r as i64 * 1000;
            }
            GlobalParam::TsliceMs(_) => panic!("credit2 has no time slice parameter"),
        }
    }
}
