//! CPU selection at wake-up and fork (the module doc of `cfs.rs`, "Choosing a CPU"; §1.16,
//! ERRATA L1 and L7): the fast path of `select_task_rq_fair` (`record_wakee`, `wake_wide`,
//! `wake_affine`, `select_idle_sibling` and its scans) and the flattened `find_idlest_cpu` of
//! the fork path.

use vmsched_core::cpuset::CpuSet;
use vmsched_core::ids::CpuId;
use vmsched_core::sched::WakeInfo;

use super::Cfs;
use crate::guest::linux_core::LinuxCtx;

/// One wake-up being placed: the wakee `p`, its previous CPU, the waker's CPU (`this`) and the
/// task running there (`waker`), WF_SYNC.
#[derive(Clone, Copy)]
struct Wakeup {
    p: usize,
    prev: usize,
    this: usize,
    waker: Option<usize>,
    sync: bool,
}

impl Cfs {
    /// Linux v5.10: available_idle_cpu (idle_cpu && !vcpu_is_preempted); `idle_cpu` counts the
    /// RT tasks of the CPU too (`rq->nr_running`).
    fn available_idle_cpu(&self, ctx: &LinuxCtx, c: usize) -> bool {
        let rq = &self.rqs[c];
        let preempted =
            self.params.vcpu_is_preempted && ctx.cpu(CpuId(c as u32)).vcpu_is_preempted();
        rq.nr_running == 0 && rq.curr.is_none() && ctx.rq(c).rt_nr_running == 0 && !preempted
    }

    /// Linux v5.10: sched_idle_cpu (only SCHED_IDLE tasks runnable, no RT task)
    fn sched_idle_cpu(&self, ctx: &LinuxCtx, c: usize) -> bool {
        let rq = &self.rqs[c];
        rq.nr_running > 0 && rq.nr_running == rq.idle_nr_running && ctx.rq(c).rt_nr_running == 0
    }

    fn idle_or_sched_idle(&self, ctx: &LinuxCtx, c: usize) -> bool {
        self.available_idle_cpu(ctx, c) || self.sched_idle_cpu(ctx, c)
    }

    /// Linux v5.10: record_wakee (on the waker `w`)
    fn record_wakee(&mut self, now: u64, w: usize, p: usize) {
        let j = self.jiffies(now);
        let hz = self.tun.hz;
        let se = &mut self.ses[w];
        if j > se.wakee_flip_decay_ts + hz {
            se.wakee_flips >>= 1;
            se.wakee_flip_decay_ts = j;
        }
        if se.last_wakee != Some(p) {
            se.last_wakee = Some(p);
            se.wakee_flips += 1;
        }
    }

    /// Linux v5.10: wake_wide
    fn wake_wide(&self, w: Wakeup) -> bool {
        let mut master = w.waker.map_or(0, |k| self.ses[k].wakee_flips);
        let mut slave = self.ses[w.p].wakee_flips;
        if master < slave {
            std::mem::swap(&mut master, &mut slave);
        }
        let factor = self.llc_size[w.this];
        !(slave < factor || master < slave.saturating_mul(factor))
    }

    /// Linux v5.10: wake_affine_idle
    fn wake_affine_idle(&self, ctx: &LinuxCtx, w: Wakeup) -> Option<usize> {
        if self.available_idle_cpu(ctx, w.this) && self.share_cache(w.this, w.prev) {
            let prev_idle = self.available_idle_cpu(ctx, w.prev);
            return Some(if prev_idle { w.prev } else { w.this });
        }
        (w.sync && self.rqs[w.this].nr_running == 1).then_some(w.this)
    }

    /// Linux v5.10: wake_affine_weight, with runnable weights as loads (see the module doc).
    /// Both capacities are 1024 and cancel out.
    fn wake_affine_weight(&self, w: Wakeup) -> Option<usize> {
        let mut this_eff = self.rqs[w.this].load as i64;
        if w.sync {
            let current = w.waker.map_or(0, |k| self.ses[k].load.weight) as i64;
            if current > this_eff {
                return Some(w.this);
            }
            this_eff -= current;
        }
        this_eff = (this_eff + self.ses[w.p].load.weight as i64) * 100;
        // WA_BIAS: (imbalance_pct − 100) / 2, imbalance_pct = 110 (SMT) or 117.
        let bias = if self.smt_siblings(w.this, w.prev) {
            5
        } else {
            8
        };
        let prev_eff = self.rqs[w.prev].load as i64 * (100 + bias) + w.sync as i64;
        (this_eff < prev_eff).then_some(w.this)
    }

    /// Linux v5.10: wake_affine (WA_IDLE, then WA_WEIGHT)
    fn wake_affine(&self, ctx: &LinuxCtx, w: Wakeup) -> usize {
        self.wake_affine_idle(ctx, w)
            .or_else(|| self.wake_affine_weight(w))
            .unwrap_or(w.prev)
    }

    /// CPUs of `target`'s LLC allowed for `p`, in wrap order starting at `from`.
    fn llc_wrap(&self, p: usize, target: usize, from: usize) -> impl Iterator<Item = usize> + '_ {
        let (n, llc, allowed) = (self.ncpus(), self.topo[target].llc, &self.ses[p].allowed);
        (0..n)
            .map(move |i| (from + i) % n)
            .filter(move |&c| self.topo[c].llc == llc && allowed.contains(CpuId(c as u32)))
    }

    /// Linux v5.10: select_idle_core (the has_idle_cores hint is not modelled: always scans)
    fn select_idle_core(&self, ctx: &LinuxCtx, p: usize, target: usize) -> Option<usize> {
        if !self.smt {
            return None;
        }
        let mut seen = CpuSet::empty();
        for core in self.llc_wrap(p, target, target) {
            if seen.contains(CpuId(core as u32)) {
                continue;
            }
            let mut idle = true;
            for s in (0..self.ncpus()).filter(|&s| self.smt_siblings(core, s)) {
                seen.insert(CpuId(s as u32));
                idle &= self.available_idle_cpu(ctx, s);
            }
            if idle {
                return Some(core);
            }
        }
        None
    }

    /// Linux v5.10: select_idle_cpu with the SIS_PROP budget (ERRATA L7: at most nr − 1 CPUs
    /// from target+1; avg_scan_cost is 0 because scans take no simulated time).
    fn select_idle_cpu(&self, ctx: &LinuxCtx, w: Wakeup, target: usize) -> Option<usize> {
        let avg_cost = 1;
        let span_avg = self.llc_size[target] as u64 * (ctx.rq(w.this).avg_idle / 512);
        let nr = if span_avg > 4 * avg_cost {
            span_avg / avg_cost
        } else {
            4
        };
        // The scan of `llc_wrap(p, target, target + 1)` without `target`, at most nr − 1 CPUs,
        // as a plain loop: the iterator chain's `try_fold` was not always inlined (callgrind).
        let n = self.ncpus();
        let (llc, allowed) = (self.topo[target].llc, &self.ses[w.p].allowed);
        let from = (target + 1) % n;
        let mut budget = nr as usize - 1;
        for i in 0..n {
            if budget == 0 {
                break;
            }
            let c = (from + i) % n;
            if c == target || self.topo[c].llc != llc || !allowed.contains(CpuId(c as u32)) {
                continue;
            }
            budget -= 1;
            if self.idle_or_sched_idle(ctx, c) {
                return Some(c);
            }
        }
        None
    }

    /// Linux v5.10: select_idle_smt
    fn select_idle_smt(&self, ctx: &LinuxCtx, p: usize, target: usize) -> Option<usize> {
        let allowed = &self.ses[p].allowed;
        (0..self.ncpus()).find(|&c| {
            self.smt_siblings(c, target)
                && allowed.contains(CpuId(c as u32))
                && self.idle_or_sched_idle(ctx, c)
        })
    }

    /// Linux v5.10: select_idle_sibling
    fn select_idle_sibling(&mut self, ctx: &LinuxCtx, w: Wakeup, target: usize) -> usize {
        let (p, prev) = (w.p, w.prev);
        if self.idle_or_sched_idle(ctx, target) {
            return target;
        }
        if prev != target && self.share_cache(prev, target) && self.idle_or_sched_idle(ctx, prev) {
            return prev;
        }
        let recent = self.ses[p].recent_used_cpu;
        if recent != prev
            && recent != target
            && self.share_cache(recent, target)
            && self.idle_or_sched_idle(ctx, recent)
            && self.ses[p].allowed.contains(CpuId(recent as u32))
        {
            self.ses[p].recent_used_cpu = prev;
            return recent;
        }
        self.select_idle_core(ctx, p, target)
            .or_else(|| self.select_idle_cpu(ctx, w, target))
            .or_else(|| self.select_idle_smt(ctx, p, target))
            .unwrap_or(target)
    }

    /// Linux v5.10: select_task_rq_fair for SD_BALANCE_WAKE (the fast path).
    pub(super) fn select_task_rq_fair(
        &mut self,
        ctx: &LinuxCtx,
        p: usize,
        info: WakeInfo,
    ) -> usize {
        let prev = self.ses[p].cpu;
        let this = info.waker_cpu.map_or(prev, |c| c.idx());
        let waker = info
            .waker_cpu
            .and_then(|c| self.rqs[c.idx()].curr)
            .filter(|&k| k != p);
        if let Some(k) = waker {
            self.record_wakee(ctx.now(), k, p);
        }
        let w = Wakeup {
            p,
            prev,
            this,
            waker,
            sync: info.sync,
        };
        let allowed = self.ses[p].allowed.contains(CpuId(this as u32));
        let want_affine = !self.wake_wide(w) && allowed;
        let target = if want_affine && this != prev {
            self.wake_affine(ctx, w)
        } else {
            prev
        };
        let cpu = self.select_idle_sibling(ctx, w, target);
        if let Some(k) = waker.filter(|_| want_affine) {
            self.ses[k].recent_used_cpu = this;
        }
        self.allowed_or_fallback(p, cpu)
    }

    /// Linux v5.10: select_fallback_rq, reduced to "the next allowed CPU".
    fn allowed_or_fallback(&self, p: usize, cpu: usize) -> usize {
        let allowed = &self.ses[p].allowed;
        allowed
            .test_or_cycle(CpuId(cpu as u32))
            .expect("a task has at least one allowed vCPU")
            .idx()
    }

    /// Fork placement, flattened (see the module doc). Linux v5.10: find_idlest_cpu
    pub(super) fn find_idlest_cpu(&self, ctx: &LinuxCtx, p: usize, parent: usize) -> usize {
        let allowed = &self.ses[p].allowed;
        let mut idlest: Option<(usize, u64)> = None;
        let mut least: Option<(usize, u64)> = None;
        for c in (0..self.ncpus()).filter(|&c| allowed.contains(CpuId(c as u32))) {
            if self.sched_idle_cpu(ctx, c) {
                return c;
            }
            if self.available_idle_cpu(ctx, c) {
                let stamp = ctx.rq(c).idle_stamp.unwrap_or(0);
                if idlest.is_none_or(|(_, s)| stamp > s) {
                    idlest = Some((c, stamp));
                }
            } else {
                let load = self.rqs[c].load;
                if least.is_none_or(|(_, l)| load < l || (load == l && c == parent)) {
                    least = Some((c, load));
                }
            }
        }
        idlest
            .or(least)
            .map_or(self.allowed_or_fallback(p, parent), |(c, _)| c)
    }
}
