//! Credit1's run-time hooks: `sleep` (a paused or parked vCPU leaves its CPU or runqueue),
//! `remove_unit` (domain destroyed), `adjust` (`xl sched-credit -d -w/-c`) and `adjust_global`
//! (`xl sched-credit -s -t/-r`, 4.2+). After Xen 3.3.0-rc7 and RELEASE-4.20.0
//! `csched_unit_sleep`, `csched_unit_remove`, `csched_dom_cntl` and `csched_sys_cntl`, and
//! xen-schedulers.md §2.19 (facts only).

use crate::host::xen_core::XenCtx;
use vmsched_core::ids::EntityId;
use vmsched_core::sched::GlobalParam;

use super::Credit1;

impl Credit1 {
    /// Xen: csched_unit_sleep: a running vCPU's CPU reschedules; a queued one is dequeued.
    pub(super) fn unit_sleep(&mut self, ctx: &mut XenCtx, e: EntityId) {
        let u = &self.units[e.idx()];
        let cpu = u.processor;
        if ctx.cpu(cpu).curr == Some(e) {
            ctx.resched(cpu);
        } else if u.on_runq {
            self.runq_remove(e);
        }
    }

    /// Xen: csched_unit_remove: a parked vCPU is unparked (its domain's pause still holds it),
    /// an active one leaves the active set.
    pub(super) fn unit_remove(&mut self, ctx: &mut XenCtx, e: EntityId) {
        let u = &self.units[e.idx()];
        assert!(
            !u.on_runq && ctx.cpu(u.processor).curr != Some(e),
            "credit1: remove_unit of a queued or running vCPU"
        );
        if u.parked {
            self.units[e.idx()].parked = false;
            ctx.unpark_wake(e);
        }
        if self.units[e.idx()].active {
            self.acct_stop(e);
        }
        self.units[e.idx()].removed = true;
    }

    /// Xen: csched_dom_cntl (putinfo). A weight change adjusts the global weight at once if the
    /// domain is active ([3.3] by the difference; [4.1+] times its active vCPUs) and shows at
    /// the next accounting pass; a cap is stored and enforced from the next pass. [3.3] the
    /// domctl pauses and unpauses the domain's vCPUs (ERRATA X11): each runnable vCPU is woken
    /// again, so an UNDER one becomes BOOST (a queued one re-queued at the tail of BOOST).
    pub(super) fn dom_cntl(&mut self, ctx: &mut XenCtx, d: usize) {
        let Some(&first) = self.doms[d]
            .units
            .iter()
            .find(|e| !self.units[e.idx()].removed)
        else {
            return;
        };
        let attr = ctx.ent(first).params.xen;
        let (weight, cap) = (attr.weight as i64, attr.cap_pct as i64);
        let dom = &mut self.doms[d];
        if weight != 0 {
            if !dom.active.is_empty() {
                let n = if self.v.per_vcpu_weight() {
                    dom.active.len() as i64
                } else {
                    1
                };
                self.weight += (weight - dom.weight) * n;
            }
            dom.weight = weight;
        }
        dom.cap = cap;
        if self.v.adjust_pauses_domain() {
            for i in 0..self.doms[d].units.len() {
                let e = self.doms[d].units[i];
                let u = &self.units[e.idx()];
                if u.removed || !ctx.unit_runnable(e) {
                    continue;
                }
                if u.on_runq {
                    self.runq_remove(e);
                    self.unit_wake(ctx, e, None);
                } else if self.wake_boosts(e, false) {
                    // Running: it would be descheduled and woken at once; it comes back BOOST.
                    self.units[e.idx()].pri = super::PRI_BOOST;
                }
            }
        }
    }

    /// Xen: csched_sys_cntl (putinfo) [4.2+]: the slice (with the tick period, credits per
    /// tslice and pool credit, [4.4+]) and the ratelimit; a combination Xen refuses (ratelimit
    /// above the slice) changes nothing. Running tickers keep their current expiry once.
    pub(super) fn sys_cntl(&mut self, p: GlobalParam) {
        assert!(
            self.v.has_tslice_and_ratelimit(),
            "credit1: Xen 3.3 takes no xl sched-credit -s"
        );
        match p {
            GlobalParam::TsliceMs(t) => {
                if !(1..=1000).contains(&t) || self.ratelimit > t as i64 * 1_000_000 {
                    return;
                }
                self.params.tslice_ms = Some(t);
                self.set_tslice(t);
            }
            GlobalParam::RatelimitUs(r) => {
                let ok = r == 0 || (100..=500_000).contains(&r);
                if !ok || r as i64 * 1000 > self.tslice {
                    return;
                }
                self.params.ratelimit_us = Some(r);
                self.ratelimit = r as i64 * 1000;
            }
        }
    }
}
