//! Credit2 caps: each capped domain has a budget pool of `cap_pct`% of one CPU per
//! `cap_period_ms`, refilled by the domain's replenishment timer. A capped vCPU grabs a quota
//! from the pool before it runs, is parked while the pool is empty, and returns its leftover
//! at switch-out; an overrun is a debt repaid at the next grab (ERRATA X12).

use crate::host::xen_core::XenCtx;
use vmsched_core::ids::EntityId;

use super::Credit2;

impl Credit2 {
    #[inline]
    pub(super) fn has_cap(&self, e: EntityId) -> bool {
        self.doms[self.units[e.idx()].dom].cap_pct != 0
    }

    /// Xen: park_unit
    fn park_unit(&mut self, ctx: &mut XenCtx, e: EntityId) {
        ctx.park(e);
        if self.units[e.idx()].on_runq {
            self.runq_remove(e);
            let r = self.units[e.idx()].rq;
            self.update_load(ctx, r, Some(e), -1, ctx.now() as i64);
        }
        let d = self.units[e.idx()].dom;
        self.doms[d].parked.push(e);
    }

    /// Xen: unit_grab_budget
    pub(super) fn unit_grab_budget(&mut self, ctx: &mut XenCtx, e: EntityId) -> bool {
        let d = self.units[e.idx()].dom;
        if self.units[e.idx()].budget > 0 {
            return true;
        }
        let dom = &mut self.doms[d];
        dom.budget += self.units[e.idx()].budget;
        if dom.budget > 0 {
            let b = dom.budget.min(dom.budget_quota);
            dom.budget -= b;
            self.units[e.idx()].budget = b;
        } else {
            self.units[e.idx()].budget = 0;
            self.park_unit(ctx, e);
        }
        self.units[e.idx()].budget > 0
    }

    /// Xen: unit_return_budget. Returns whether the domain's parked vCPUs are to be unparked.
    pub(super) fn unit_return_budget(&mut self, e: EntityId) -> bool {
        let u = &mut self.units[e.idx()];
        let dom = &mut self.doms[u.dom];
        dom.budget += u.budget;
        u.budget = 0;
        dom.budget > 0
    }

    /// Xen: unpark_parked_units, for every vCPU parked in domain `d` (newest first).
    pub(super) fn unpark_parked_units(&mut self, ctx: &mut XenCtx, d: usize) {
        let now = ctx.now() as i64;
        let mut list = std::mem::take(&mut self.doms[d].parked);
        for &e in list.iter().rev() {
            ctx.unpark(e);
            if self.units[e.idx()].scheduled {
                self.units[e.idx()].delayed_runq_add = true;
            } else if self.runnable(ctx, e) {
                let r = self.units[e.idx()].rq;
                self.update_load(ctx, r, Some(e), 1, now);
                self.runq_insert(e);
                self.runq_tickle(ctx, e, now);
            }
        }
        list.clear();
        debug_assert!(
            self.doms[d].parked.is_empty(),
            "credit2: nobody parks while unparking"
        );
        self.doms[d].parked = list;
    }

    /// Xen: replenish_domain_budget
    pub(super) fn replenish_domain_budget(&mut self, ctx: &mut XenCtx, d: usize) {
        let now = ctx.now() as i64;
        let period = self.cap_period;
        let dom = &mut self.doms[d];
        loop {
            dom.next_repl += period;
            dom.budget += dom.tot_budget;
            if dom.next_repl > now {
                break;
            }
        }
        let next = dom.next_repl as u64;
        if dom.budget > 0 {
            dom.budget = dom.budget.min(dom.tot_budget);
            self.unpark_parked_units(ctx, d);
        }
        ctx.set_timer(d as u32, Some(next));
    }
}
