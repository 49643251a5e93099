//! Credit1's accounting: burning credit (3.3: 100 per tick to whoever runs at the tick; 4.20:
//! exact run time with a residual), the per-CPU tick (`csched_tick`, `csched_unit_acct`), the
//! accounting pass (`csched_acct`), the active sets, parking of capped vCPUs and the runqueue
//! resort after a pass (`csched_runq_sort`). After xen-schedulers.md §2.5–2.7 and §2.14, checked
//! against Xen 3.3.0-rc7 `sched_credit.c` and RELEASE-4.20.0 `sched/credit.c` (facts only).

use crate::host::xen_core::XenCtx;
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::trace::SchedEvent;

use super::{
    Credit1, CREDITS_PER_MSEC, PRI_BOOST, PRI_OVER, PRI_UNDER, V33_CREDITS_PER_TICK,
    V33_TICKS_PER_ACCT,
};

/// `(a + b - 1) / b` on non-negative integers.
#[inline]
fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

impl Credit1 {
    /// Xen: burn_credits [4.20]: `delta × 10 + residual` split into whole credits and a
    /// residual; `start_time` advances by the credits' worth (so the remainder is kept twice,
    /// as upstream, and charging may run slightly ahead; §9 item 8).
    pub(super) fn burn_credits(&mut self, e: EntityId, now: i64) {
        let u = &mut self.units[e.idx()];
        let delta = now - u.start_time;
        if delta <= 0 {
            return;
        }
        let val = delta * CREDITS_PER_MSEC + u.residual;
        u.residual = val % 1_000_000;
        let credits = val / 1_000_000;
        u.credit -= credits;
        u.start_time += credits * 1_000_000 / CREDITS_PER_MSEC;
    }

    /// [seed 001, 3.3 option `exact_debit`] Debits the run time since the last burn (or the
    /// switch-in): 10 credits per ms, the sub-credit remainder carried in `residual` (ns ×
    /// 10 / 10⁶ credits), so nothing is lost or charged twice.
    pub(super) fn burn_exact(&mut self, e: EntityId, now: i64) {
        let u = &mut self.units[e.idx()];
        let delta = now - u.start_time;
        if delta <= 0 {
            return;
        }
        let val = delta * CREDITS_PER_MSEC + u.residual;
        u.residual = val % 1_000_000;
        u.start_time = now;
        self.debit(e, val / 1_000_000);
    }

    /// Debits `amount` credits from `e`: [seed 001] from its boost credit first (a vCPU whose
    /// boost credit runs out while BOOST becomes UNDER), the rest from its credit.
    pub(super) fn debit(&mut self, e: EntityId, mut amount: i64) {
        let u = &mut self.units[e.idx()];
        if u.boost_credit > 0 {
            let b = amount.min(u.boost_credit);
            u.boost_credit -= b;
            amount -= b;
            if u.boost_credit == 0 && u.pri == PRI_BOOST {
                u.pri = PRI_UNDER;
            }
        }
        u.credit -= amount;
    }

    /// Xen: csched_tick of `cpu`: charge the running vCPU (`csched_unit_acct`), [3.3] run the
    /// accounting pass on the master CPU every third tick, resort the runqueue after a pass,
    /// and re-arm `now + tick_period` (the period drifts with the timer latency, as upstream).
    pub(super) fn tick(&mut self, ctx: &mut XenCtx, cpu: CpuId) {
        self.pcpus[cpu.idx()].tick += 1;
        if let Some(e) = ctx.cpu(cpu).curr {
            self.unit_acct(ctx, cpu, e);
        }
        if !self.v.has_master_timer()
            && cpu == self.master
            && self.pcpus[cpu.idx()]
                .tick
                .is_multiple_of(V33_TICKS_PER_ACCT)
        {
            self.acct(ctx);
        }
        self.runq_sort(cpu);
        let next = ctx.now() + self.tick_period as u64;
        ctx.set_timer(1 + cpu.0, Some(next));
    }

    /// Xen: csched_unit_acct (csched_vcpu_acct in 3.3). A BOOST vCPU found running becomes
    /// UNDER — ERRATA X8: no reschedule for that; it is charged (3.3: 100 credits; 4.20: its
    /// run time); an inactive vCPU becomes active; an active one is checked against the CPU pick
    /// and, if another CPU is better, marked for migration (the only reschedule of the tick).
    /// [seed 001] A vCPU holding boost credit stays BOOST; with `exact_debit` the tick debits
    /// the exact run time since the last burn.
    fn unit_acct(&mut self, ctx: &mut XenCtx, cpu: CpuId, e: EntityId) {
        let now = ctx.now() as i64;
        let u = &mut self.units[e.idx()];
        if u.pri == PRI_BOOST && u.boost_credit == 0 {
            u.pri = PRI_UNDER;
            ctx.trace(|| SchedEvent::Unboost { ent: e });
        }
        if self.v.burns_exact_time() {
            self.burn_credits(e, now);
        } else if self.exact_debit {
            self.burn_exact(e, now);
        } else {
            self.debit(e, V33_CREDITS_PER_TICK);
        }
        if !self.units[e.idx()].active {
            self.acct_start(e);
        } else if self.cpu_pick(ctx, e, false) != cpu {
            ctx.set_migrating(e);
            ctx.resched(cpu);
        }
    }

    /// Xen: __csched_unit_acct_start: the vCPU joins the head of its domain's active list, the
    /// domain the head of the active-domain list if it was not on it; the global weight grows by
    /// the domain's weight ([3.3] once per domain, [4.1+] once per vCPU).
    pub(super) fn acct_start(&mut self, e: EntityId) {
        let d = self.units[e.idx()].dom;
        if self.units[e.idx()].active {
            return;
        }
        self.units[e.idx()].active = true;
        let dom = &mut self.doms[d];
        let was_active = !dom.active.is_empty();
        dom.active.insert(0, e);
        if self.v.per_vcpu_weight() {
            self.weight += dom.weight;
        }
        if !was_active {
            if !self.v.per_vcpu_weight() {
                self.weight += dom.weight;
            }
            self.active_doms.insert(0, d);
        }
    }

    /// Xen: __csched_unit_acct_stop_locked: the vCPU leaves its domain's active list, the
    /// domain the active-domain list once it has no active vCPU.
    pub(super) fn acct_stop(&mut self, e: EntityId) {
        let d = self.units[e.idx()].dom;
        debug_assert!(self.units[e.idx()].active);
        self.units[e.idx()].active = false;
        let dom = &mut self.doms[d];
        dom.active.retain(|x| *x != e);
        if self.v.per_vcpu_weight() {
            self.weight -= dom.weight;
        }
        if dom.active.is_empty() {
            if !self.v.per_vcpu_weight() {
                self.weight -= dom.weight;
            }
            self.active_doms.retain(|x| *x != d);
        }
    }

    /// Xen: csched_acct, the accounting pass (§2.7): share the pool's credit among the active
    /// domains by weight, bounded by what their active vCPUs can burn and by their caps, handing
    /// what a domain cannot use to the domains after it (and moving it to the head of the list);
    /// then set every active vCPU's priority from its credit's sign, park a capped vCPU below
    /// −cap/n and unpark one back at ≥ 0, clip at −credits_per_tslice, and deactivate a vCPU
    /// above credits_per_tslice (3.3: credit 0; 4.1+: half). All integer, as upstream.
    pub(super) fn acct(&mut self, ctx: &mut XenCtx) {
        let per_vcpu = self.v.per_vcpu_weight();
        let cpt = self.credits_per_tslice;
        let weight_total = self.weight;
        let mut credit_total = self.credit;
        if self.credit_balance < 0 {
            credit_total -= self.credit_balance;
        }
        if weight_total == 0 {
            self.credit_balance = 0;
            return;
        }
        let mut weight_left = weight_total;
        let mut credit_balance = 0i64;
        let mut credit_xtra = false;
        let mut doms = std::mem::take(&mut self.scratch_doms);
        doms.clear();
        doms.extend_from_slice(&self.active_doms);
        let mut units = std::mem::take(&mut self.scratch_units);
        for &d in &doms {
            let n = self.doms[d].active.len() as i64;
            if n == 0 {
                continue;
            }
            let dom = &self.doms[d];
            let wd = if per_vcpu { dom.weight * n } else { dom.weight };
            assert!(
                wd <= weight_left,
                "credit1: active weights exceed the total"
            );
            weight_left -= wd;
            let mut credit_peak = n * cpt;
            if self.credit_balance < 0 {
                credit_peak += ceil_div(-self.credit_balance * wd, weight_total);
            }
            let mut credit_cap = 0;
            if dom.cap != 0 {
                credit_cap = ceil_div(dom.cap * cpt, 100);
                credit_peak = credit_peak.min(credit_cap);
                credit_cap = ceil_div(credit_cap, n);
            }
            let mut credit_fair = ceil_div(credit_total * wd, weight_total);
            if credit_fair < credit_peak {
                credit_xtra = true;
            } else {
                if weight_left != 0 {
                    credit_total +=
                        ceil_div((credit_fair - credit_peak) * weight_total, weight_left);
                }
                if credit_xtra {
                    self.active_doms.retain(|x| *x != d);
                    self.active_doms.insert(0, d);
                }
                credit_fair = credit_peak;
            }
            // [seed 001] boost ratio: that share of one CPU is handed out as boost credit, in
            // place of the same amount of the weighted credit.
            let (boost_limit, boost_ratio) = (dom.boost_limit, dom.boost_ratio);
            let boost_fair = ceil_div(boost_ratio * cpt, 100);
            let per_unit = ceil_div((credit_fair - boost_fair).max(0), n);
            let boost_per_unit = ceil_div(boost_fair, n);
            let capped = dom.cap != 0;
            units.clear();
            units.extend_from_slice(&self.doms[d].active);
            if self.level_credits {
                self.level(&units);
            }
            for &e in &units {
                let u = &mut self.units[e.idx()];
                u.credit += per_unit;
                if boost_limit > 0 {
                    u.boost_credit = (u.boost_credit + boost_per_unit).min(boost_limit);
                }
                if u.credit < 0 {
                    u.pri = PRI_OVER;
                    if capped && u.credit < -credit_cap && !u.parked {
                        self.park(ctx, e);
                    }
                    let u = &mut self.units[e.idx()];
                    if u.credit < -cpt {
                        u.credit = -cpt;
                    }
                } else {
                    u.pri = PRI_UNDER;
                    if u.parked {
                        self.unpark(ctx, e);
                    }
                    if self.units[e.idx()].credit > cpt {
                        self.acct_stop(e);
                        let keep = self.keep_above_limit || boost_limit > 0;
                        let u = &mut self.units[e.idx()];
                        u.credit = if self.v.halves_on_deactivate() {
                            u.credit / 2
                        } else if keep {
                            // [seed 001] kept at the upper bound; the excess becomes boost
                            // credit where the domain holds boost credit.
                            if boost_limit > 0 {
                                u.boost_credit = (u.boost_credit + u.credit - cpt).min(boost_limit);
                            }
                            cpt
                        } else {
                            0
                        };
                    }
                }
                // [seed 001] while boost credit lasts the vCPU is BOOST.
                let u = &mut self.units[e.idx()];
                if u.boost_credit > 0 && !u.parked {
                    u.pri = PRI_BOOST;
                }
                credit_balance += self.units[e.idx()].credit;
            }
        }
        self.scratch_doms = doms;
        self.scratch_units = units;
        debug_assert!(
            self.active_doms.iter().all(|&d| {
                let dom = &self.doms[d];
                !dom.active.is_empty()
                    && dom.active.iter().all(|e| {
                        let c = self.units[e.idx()].credit;
                        self.units[e.idx()].active && (-cpt..=cpt).contains(&c)
                    })
            }),
            "invariant: after a pass every active vCPU's credit is within ±credits_per_tslice"
        );
        self.credit_balance = credit_balance;
        self.runq_sort = self.runq_sort.wrapping_add(1);
    }

    /// [seed 001, 3.3 option `level_domain_credits`] Levels the credits of a domain's active
    /// vCPUs `units` (head first): each gets the floor of the mean, and the remainder goes one
    /// credit each to the first ones, so the domain's total is unchanged.
    fn level(&mut self, units: &[EntityId]) {
        let n = units.len() as i64;
        if n < 2 {
            return;
        }
        let total: i64 = units.iter().map(|e| self.units[e.idx()].credit).sum();
        let (each, rem) = (total.div_euclid(n), total.rem_euclid(n));
        for (i, e) in units.iter().enumerate() {
            self.units[e.idx()].credit = each + i64::from((i as i64) < rem);
        }
    }

    /// Parks a capped vCPU (`vcpu_pause_nosync` and the flag): the core's `parked` pause flag
    /// makes it not runnable (offline for the engine), then the sleep hook takes it off its CPU
    /// or runqueue.
    fn park(&mut self, ctx: &mut XenCtx, e: EntityId) {
        self.units[e.idx()].parked = true;
        ctx.park(e);
        self.unit_sleep(ctx, e);
    }

    /// Unparks (`vcpu_unpause`, then the flag): the pause lifts through `vcpu_wake`, whose wake
    /// hook sees the flag still set and does not boost.
    fn unpark(&mut self, ctx: &mut XenCtx, e: EntityId) {
        ctx.unpark_wake(e);
        if ctx.unit_runnable(e) {
            self.unit_wake(ctx, e, None);
        }
        self.units[e.idx()].parked = false;
    }

    /// Xen: csched_runq_sort, once per accounting pass at the CPU's next tick: UNDER and BOOST
    /// vCPUs move up, in order, ahead of the OVER ones (BOOST is not moved ahead of UNDER).
    fn runq_sort(&mut self, cpu: CpuId) {
        let pc = &mut self.pcpus[cpu.idx()];
        if pc.runq_sort_last == self.runq_sort {
            return;
        }
        pc.runq_sort_last = self.runq_sort;
        let mut next_under = 0;
        for i in 0..pc.runq.len() {
            let e = pc.runq[i];
            if self.units[e.idx()].pri >= PRI_UNDER {
                if i != next_under {
                    pc.runq.remove(i);
                    pc.runq.insert(next_under, e);
                }
                next_under += 1;
            }
        }
    }
}
