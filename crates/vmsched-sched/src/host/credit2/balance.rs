//! Credit2 load tracking and balancing: the per-runqueue and per-vCPU load averages
//! (exponentially decaying over `2^load_window_shift` ns), the choice of a CPU for a vCPU
//! by runqueue load (`csched2_res_pick`), migration between runqueues, and the balancer run
//! at the end of an epoch, which pushes and/or pulls one vCPU to even out two runqueues.

use crate::host::xen_core::XenCtx;
use vmsched_core::ids::{CpuId, EntityId};

use super::{Credit2, Unit, LOADAVG_GRANULARITY_SHIFT};

impl Credit2 {
    // ---------------------------------------------------------------------------------------
    // Load tracking
    // ---------------------------------------------------------------------------------------

    /// Xen: update_runq_load
    fn update_runq_load(&mut self, r: usize, change: i64, now: i64) {
        let (w, p) = (self.load_window, self.load_precision);
        let now = now >> LOADAVG_GRANULARITY_SHIFT;
        let rq = &mut self.rqs[r];
        let load = rq.load;
        if rq.load_last_update + (1i64 << w) < now {
            rq.avgload = load << p;
            rq.b_avgload = load << p;
        } else if self.v42 {
            // 4.2.1: one weighted sum over the window (p = w), rounded once.
            let delta = now - rq.load_last_update;
            rq.avgload = (delta * (load << p) + ((1i64 << w) - delta) * rq.avgload) >> w;
            rq.b_avgload = (delta * (load << p) + ((1i64 << w) - delta) * rq.b_avgload) >> w;
        } else {
            let delta = (now - rq.load_last_update).max(0);
            rq.avgload += ((delta * (load << p)) >> w) - ((delta * rq.avgload) >> w);
            rq.b_avgload += ((delta * (load << p)) >> w) - ((delta * rq.b_avgload) >> w);
        }
        rq.load += change;
        rq.load_last_update = now;
    }

    /// Xen: update_svc_load
    fn update_svc_load(&mut self, ctx: &XenCtx, e: EntityId, change: i64, now: i64) {
        let unit_load = match change {
            -1 => 1,
            1 => 0,
            _ => self.runnable(ctx, e) as i64,
        };
        let (w, p) = (self.load_window, self.load_precision);
        let now = now >> LOADAVG_GRANULARITY_SHIFT;
        let u = &mut self.units[e.idx()];
        if u.load_last_update + (1i64 << w) < now {
            u.avgload = unit_load << p;
        } else if self.v42 {
            let delta = now - u.load_last_update;
            u.avgload = (delta * (unit_load << p) + ((1i64 << w) - delta) * u.avgload) >> w;
        } else {
            let delta = (now - u.load_last_update).max(0);
            u.avgload += ((delta * (unit_load << p)) >> w) - ((delta * u.avgload) >> w);
        }
        u.load_last_update = now;
    }

    /// Xen: update_load
    pub(super) fn update_load(
        &mut self,
        ctx: &XenCtx,
        r: usize,
        e: Option<EntityId>,
        change: i64,
        now: i64,
    ) {
        self.update_runq_load(r, change, now);
        if let Some(e) = e {
            self.update_svc_load(ctx, e, change, now);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Placement and load balancing
    // ---------------------------------------------------------------------------------------

    /// Xen: csched2_res_pick (every try-lock succeeds). `own` is the vCPU's runqueue, None at
    /// insertion.
    pub(super) fn csched2_res_pick(&mut self, e: EntityId, own: Option<usize>) -> CpuId {
        let u = &self.units[e.idx()];
        let hard = u.hard.and(&self.online);
        if let Some(t) = self.units[e.idx()].migrate_rq.take() {
            let m = hard.and(&self.rqs[t].active);
            if !m.is_empty() {
                let c = self
                    .cycle(self.rqs[t].pick_bias, &m)
                    .expect("non-empty mask");
                self.rqs[t].pick_bias = c;
                return c;
            }
        }
        let u = &self.units[e.idx()];
        let (mut min, mut min_rq, mut min_s, mut min_s_rq) = (i64::MAX, None, i64::MAX, None);
        for (i, rq) in self.rqs.iter().enumerate() {
            let m = hard.and(&rq.active);
            if m.is_empty() {
                continue;
            }
            let load = if own == Some(i) {
                (rq.b_avgload - u.avgload).max(0)
            } else {
                rq.b_avgload
            };
            if u.has_soft && load < min_s && !m.and(&u.soft).is_empty() {
                min_s = load;
                min_s_rq = Some(i);
            }
            if load < min {
                min = load;
                min_rq = Some(i);
            }
        }
        let min_rq = min_rq.expect("credit2: hard affinity intersects some runqueue");
        let mask = match min_s_rq {
            Some(s) if u.has_soft => hard.and(&u.soft).and(&self.rqs[s].active),
            _ => hard.and(&self.rqs[min_rq].active),
        };
        // As upstream: the cursor is the hard-affinity minimum's, even for a soft pick.
        let c = self
            .cycle(self.rqs[min_rq].pick_bias, &mask)
            .expect("non-empty mask");
        self.rqs[min_rq].pick_bias = c;
        c
    }

    /// Xen 4.2.1: choose_cpu (every try-lock succeeds), no affinity. A pending balancer
    /// request names the runqueue, whose first CPU is taken; otherwise the runqueue of least
    /// `b_avgload` (the vCPU's own counted without the vCPU's load; the first on ties), and
    /// its first CPU.
    pub(super) fn choose_cpu_4_2(&mut self, e: EntityId) -> CpuId {
        if let Some(t) = self.units[e.idx()].migrate_rq.take() {
            return self.rqs[t]
                .active
                .first()
                .expect("a live runqueue has a CPU");
        }
        let u = &self.units[e.idx()];
        let mut best: Option<(i64, usize)> = None;
        for (i, rq) in self.rqs.iter().enumerate() {
            if !self.rq_live(i) {
                continue;
            }
            let load = if i == u.rq {
                rq.b_avgload - u.avgload
            } else {
                rq.b_avgload
            };
            if best.is_none_or(|(m, _)| load < m) {
                best = Some((load, i));
            }
        }
        let (_, r) = best.expect("credit2: a runqueue is live");
        self.rqs[r]
            .active
            .first()
            .expect("a live runqueue has a CPU")
    }

    /// Xen: migrate (credit2.c's, not the hook). A running vCPU gets `_VPF_migrating`; in
    /// 4.20 its CPU is tickled, in 4.2.1 not (ERRATA X12: it moves when its CPU next
    /// reschedules on its own). The core completes the move after its context is saved.
    pub(super) fn migrate_to_rq(&mut self, ctx: &mut XenCtx, e: EntityId, trq: usize, now: i64) {
        if self.units[e.idx()].scheduled {
            ctx.set_migrating(e);
            let u = &mut self.units[e.idx()];
            u.migrate_rq = Some(trq);
            let (cpu, r) = (u.processor, u.rq);
            if !self.v42 {
                self.tickle_cpu(ctx, cpu, r);
            }
            return;
        }
        let on_runq = self.units[e.idx()].on_runq;
        if on_runq {
            self.runq_remove(e);
            let r = self.units[e.idx()].rq;
            // 4.2.1 samples the vCPU's load too.
            self.update_load(ctx, r, self.v42.then_some(e), -1, now);
        }
        self.runq_deassign(e);
        if self.v42 {
            // 4.2.1: the target's first CPU, no affinity, no cursor.
            self.units[e.idx()].processor = self.rqs[trq]
                .active
                .first()
                .expect("a live runqueue has a CPU");
            self.runq_assign(e, trq);
            if on_runq {
                self.update_load(ctx, trq, Some(e), 1, now);
                self.runq_insert(e);
                self.runq_tickle(ctx, e, now);
            }
            return;
        }
        let m = self.units[e.idx()]
            .hard
            .and(&self.online)
            .and(&self.rqs[trq].active);
        let c = self
            .cycle(self.rqs[trq].pick_bias, &m)
            .expect("credit2: migration target fits affinity");
        self.units[e.idx()].processor = c;
        self.rqs[trq].pick_bias = c;
        self.runq_assign(e, trq);
        if on_runq {
            self.update_load(ctx, trq, None, 1, now);
            self.runq_insert(e);
            self.runq_tickle(ctx, e, now);
        }
    }

    /// Xen: unit_is_migrateable
    fn unit_is_migrateable(&self, e: EntityId, r: usize) -> bool {
        let u = &self.units[e.idx()];
        u.migrate_rq.is_none() && !u.hard.and(&self.online).and(&self.rqs[r].active).is_empty()
    }

    /// Xen: balance_load (every try-lock succeeds)
    pub(super) fn balance_load(&mut self, ctx: &mut XenCtx, cpu: CpuId, now: i64) {
        let l = self.cpu_rq[cpu.idx()];
        self.update_runq_load(l, 0, now);
        let (mut load_delta, mut max_delta_rq) = (0i64, None);
        for o in 0..self.rqs.len() {
            if o == l || !self.rq_live(o) {
                continue;
            }
            self.update_runq_load(o, 0, now);
            let delta = (self.rqs[l].b_avgload - self.rqs[o].b_avgload).abs();
            if delta > load_delta {
                load_delta = delta;
                max_delta_rq = Some(o);
            }
        }
        let Some(o) = max_delta_rq else { return };
        // As upstream: the overload test looks at the last runqueue of the list (ERRATA X12).
        let x = (0..self.rqs.len())
            .rev()
            .find(|&r| self.rq_live(r))
            .expect("a runqueue is live");
        let load_max = self.rqs[l].b_avgload.max(self.rqs[x].b_avgload);
        let cpus_max = self.rqs[l].nr_cpus.max(self.rqs[x].nr_cpus) as i64;
        let p = self.load_precision as i32;
        let tol = if load_max < cpus_max << p {
            self.params.balance_under
        } else {
            self.params.balance_over
        };
        if load_delta < 1i64 << (p + tol) {
            return;
        }
        let (lb, ob) = (self.rqs[l].b_avgload, self.rqs[o].b_avgload);
        let mut best: (i64, Option<EntityId>, Option<EntityId>) = (load_delta, None, None);
        let mut consider = |units: &[Unit], push: Option<EntityId>, pull: Option<EntityId>| {
            let (mut l_load, mut o_load) = (lb, ob);
            if let Some(p) = push {
                l_load -= units[p.idx()].avgload;
                o_load += units[p.idx()].avgload;
            }
            if let Some(p) = pull {
                l_load += units[p.idx()].avgload;
                o_load -= units[p.idx()].avgload;
            }
            let delta = (l_load - o_load).abs();
            if delta < best.0 {
                best = (delta, push, pull);
            }
        };
        let mut inner_load_updated = false;
        for i in 0..self.rqs[l].svc.len() {
            let push = self.rqs[l].svc[i];
            self.update_svc_load(ctx, push, 0, now);
            if !self.unit_is_migrateable(push, o) {
                continue;
            }
            for j in 0..self.rqs[o].svc.len() {
                let pull = self.rqs[o].svc[j];
                if !inner_load_updated {
                    self.update_svc_load(ctx, pull, 0, now);
                }
                if self.unit_is_migrateable(pull, l) {
                    consider(&self.units, Some(push), Some(pull));
                }
            }
            inner_load_updated = true;
            consider(&self.units, Some(push), None);
        }
        for j in 0..self.rqs[o].svc.len() {
            let pull = self.rqs[o].svc[j];
            if self.unit_is_migrateable(pull, l) {
                consider(&self.units, None, Some(pull));
            }
        }
        let (_, push, pull) = best;
        if let Some(e) = push {
            self.migrate_to_rq(ctx, e, o, now);
        }
        if let Some(e) = pull {
            self.migrate_to_rq(ctx, e, l, now);
        }
    }
}
