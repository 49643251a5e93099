//! CPU selection at wake-up and fork (the module doc of `cfs.rs`, "Choosing a CPU"; §1.16,
//! ERRATA L1 and L7): the fast path of `select_task_rq_fair` (`record_wakee`, `wake_wide`,
//! `wake_affine`, `select_idle_sibling` and its scans) and the flattened `find_idlest_cpu` of
//! the fork path.
//!
//! Written once for every fair class of the Linux core: [`SelectFair`] asks its class only for
//! the few run-queue and task fields these rules read (CFS 5.10 and EEVDF 6.x implement it;
//! `guest/eevdf.rs` says what 6.x changes and what the model keeps).

use vmsched_core::cpuset::CpuSet;
use vmsched_core::ids::CpuId;
use vmsched_core::sched::WakeInfo;

use vmsched_core::sched::CpuTopo;

use super::Cfs;
use crate::guest::linux_core::LinuxCtx;

/// The wake-up statistics of a task (Linux `wakee_flips`, `wakee_flip_decay_ts`, `last_wakee`),
/// borrowed from its class for `record_wakee`.
pub(crate) struct WakeeMut<'a> {
    pub(crate) flips: &'a mut u32,
    /// In jiffies.
    pub(crate) decay_ts: &'a mut u64,
    pub(crate) last: &'a mut Option<usize>,
}

/// One wake-up being placed: the wakee `p`, its previous CPU, the waker's CPU (`this`) and the
/// task running there (`waker`), WF_SYNC.
#[derive(Clone, Copy)]
pub(crate) struct Wakeup {
    p: usize,
    prev: usize,
    this: usize,
    waker: Option<usize>,
    sync: bool,
}

/// The [`SelectFair`] accessors every fair class writes the same way, over fields of the same
/// names (`rqs[c].nr_running`, `idle_nr_running`, `load`, `curr`; `ses[p].cpu`, `allowed`,
/// `load.weight`, `wakee_flips`, `wakee_flip_decay_ts`, `last_wakee`, `recent_used_cpu`): used
/// inside `impl SelectFair for ...` of CFS and EEVDF.
macro_rules! select_fair_fields {
    () => {
        #[inline]
        fn rq_nr_running(&self, c: usize) -> u32 {
            self.rqs[c].nr_running
        }
        #[inline]
        fn rq_idle_nr_running(&self, c: usize) -> u32 {
            self.rqs[c].idle_nr_running
        }
        #[inline]
        fn rq_load(&self, c: usize) -> u64 {
            self.rqs[c].load
        }
        #[inline]
        fn rq_curr(&self, c: usize) -> Option<usize> {
            self.rqs[c].curr
        }
        #[inline]
        fn cpu_load(&self, c: usize) -> u64 {
            self.rqs[c].pelt.avg.load_avg
        }
        #[inline]
        fn cpu_runnable(&self, c: usize) -> u64 {
            self.rqs[c].pelt.avg.runnable_avg
        }
        #[inline]
        fn cpu_util(&self, c: usize) -> u64 {
            let a = &self.rqs[c].pelt.avg;
            a.util_avg
                .max(a.util_est.enqueued as u64)
                .min($crate::guest::cfs::pelt::SCHED_CAPACITY_SCALE)
        }
        #[inline]
        fn task_load(&self, p: usize) -> u64 {
            self.ses[p].avg.load_avg
        }
        #[inline]
        fn task_util_est(&self, p: usize) -> u64 {
            $crate::guest::cfs::pelt::task_util_est(&self.ses[p].avg)
        }
        #[inline]
        fn se_cpu(&self, p: usize) -> usize {
            self.ses[p].cpu
        }
        #[inline]
        fn se_allowed(&self, p: usize) -> &CpuSet {
            &self.ses[p].allowed
        }
        #[inline]
        fn se_weight(&self, p: usize) -> u64 {
            self.ses[p].load.weight
        }
        #[inline]
        fn wakee_flips(&self, p: usize) -> u32 {
            self.ses[p].wakee_flips
        }
        #[inline]
        fn wakee_mut(&mut self, p: usize) -> WakeeMut<'_> {
            let se = &mut self.ses[p];
            WakeeMut {
                flips: &mut se.wakee_flips,
                decay_ts: &mut se.wakee_flip_decay_ts,
                last: &mut se.last_wakee,
            }
        }
        #[inline]
        fn recent_used_cpu(&self, p: usize) -> usize {
            self.ses[p].recent_used_cpu
        }
        #[inline]
        fn set_recent_used_cpu(&mut self, p: usize, c: usize) {
            self.ses[p].recent_used_cpu = c;
        }
    };
}
pub(crate) use select_fair_fields;

/// CPU selection for a fair class: the fields it reads (required) and the rules (provided).
/// CPUs and tasks are the level's local indices.
pub(crate) trait SelectFair {
    fn nr_cpus(&self) -> usize;
    fn cpu_topo(&self, c: usize) -> &CpuTopo;
    /// CPUs in the LLC of `c` (the LLC domain's span).
    fn llc_size(&self, c: usize) -> u32;
    /// Whether the guest has SMT siblings at all.
    fn has_smt(&self) -> bool;
    /// The `vcpu_is_preempted` option of the guest.
    fn sees_vcpu_preempted(&self) -> bool;
    /// CONFIG_HZ.
    fn hz(&self) -> u64;
    /// TICK_NSEC.
    fn tick_ns(&self) -> u64;
    /// `rq->nr_running` as the placement rules read it (queued and running fair tasks).
    fn rq_nr_running(&self, c: usize) -> u32;
    /// `cfs_rq->idle_nr_running`: SCHED_IDLE tasks among them.
    fn rq_idle_nr_running(&self, c: usize) -> u32;
    /// The runnable weight of the CPU's fair tasks (`cfs_rq->load.weight`; Linux 3.17's
    /// placement reads it).
    fn rq_load(&self, c: usize) -> u64;
    /// Linux v5.10: cpu_load (the queue's PELT `load_avg` as of its last update).
    fn cpu_load(&self, c: usize) -> u64;
    /// Linux v5.10: cpu_runnable (`runnable_avg`).
    fn cpu_runnable(&self, c: usize) -> u64;
    /// Linux v5.10: cpu_util (`util_avg`, at least `util_est.enqueued`, at most the capacity).
    fn cpu_util(&self, c: usize) -> u64;
    /// Linux v5.10: task_h_load (no groups: the task's own PELT `load_avg`).
    fn task_load(&self, p: usize) -> u64;
    /// Linux v5.10: task_util_est.
    fn task_util_est(&self, p: usize) -> u64;
    /// The fair task running on `c`.
    fn rq_curr(&self, c: usize) -> Option<usize>;
    /// `task_cpu(p)`.
    fn se_cpu(&self, p: usize) -> usize;
    /// `p`'s affinity within the online CPUs.
    fn se_allowed(&self, p: usize) -> &CpuSet;
    /// `p`'s load weight.
    fn se_weight(&self, p: usize) -> u64;
    fn wakee_flips(&self, p: usize) -> u32;
    fn wakee_mut(&mut self, p: usize) -> WakeeMut<'_>;
    fn recent_used_cpu(&self, p: usize) -> usize;
    fn set_recent_used_cpu(&mut self, p: usize, c: usize);

    fn share_cache(&self, a: usize, b: usize) -> bool {
        self.cpu_topo(a).llc == self.cpu_topo(b).llc
    }

    fn smt_siblings(&self, a: usize, b: usize) -> bool {
        let (x, y) = (self.cpu_topo(a), self.cpu_topo(b));
        x.node == y.node && x.socket == y.socket && x.core == y.core
    }

    fn jiffies(&self, now: u64) -> u64 {
        now / self.tick_ns()
    }

    /// Linux v5.10: available_idle_cpu (idle_cpu && !vcpu_is_preempted); `idle_cpu` counts the
    /// RT tasks of the CPU too (`rq->nr_running`).
    fn available_idle_cpu(&self, ctx: &LinuxCtx, c: usize) -> bool {
        let preempted = self.sees_vcpu_preempted() && ctx.cpu(CpuId(c as u32)).vcpu_is_preempted();
        self.rq_nr_running(c) == 0
            && self.rq_curr(c).is_none()
            && ctx.rq(c).rt_nr_running == 0
            && !preempted
    }

    /// Linux v5.10: sched_idle_cpu (only SCHED_IDLE tasks runnable, no RT task)
    fn sched_idle_cpu(&self, ctx: &LinuxCtx, c: usize) -> bool {
        let nr = self.rq_nr_running(c);
        nr > 0 && nr == self.rq_idle_nr_running(c) && ctx.rq(c).rt_nr_running == 0
    }

    fn idle_or_sched_idle(&self, ctx: &LinuxCtx, c: usize) -> bool {
        self.available_idle_cpu(ctx, c) || self.sched_idle_cpu(ctx, c)
    }

    /// Linux v5.10: record_wakee (on the waker `w`)
    fn record_wakee(&mut self, now: u64, w: usize, p: usize) {
        let j = self.jiffies(now);
        let hz = self.hz();
        let se = self.wakee_mut(w);
        if j > *se.decay_ts + hz {
            *se.flips >>= 1;
            *se.decay_ts = j;
        }
        if *se.last != Some(p) {
            *se.last = Some(p);
            *se.flips += 1;
        }
    }

    /// Linux v5.10: wake_wide
    fn wake_wide(&self, w: Wakeup) -> bool {
        let mut master = w.waker.map_or(0, |k| self.wakee_flips(k));
        let mut slave = self.wakee_flips(w.p);
        if master < slave {
            std::mem::swap(&mut master, &mut slave);
        }
        let factor = self.llc_size(w.this);
        !(slave < factor || master < slave.saturating_mul(factor))
    }

    /// Linux v5.10: wake_affine_idle
    fn wake_affine_idle(&self, ctx: &LinuxCtx, w: Wakeup) -> Option<usize> {
        if self.available_idle_cpu(ctx, w.this) && self.share_cache(w.this, w.prev) {
            let prev_idle = self.available_idle_cpu(ctx, w.prev);
            return Some(if prev_idle { w.prev } else { w.this });
        }
        (w.sync && self.rq_nr_running(w.this) == 1).then_some(w.this)
    }

    /// Linux v5.10: wake_affine_weight, with PELT loads: the waker's load comes off its CPU
    /// for a sync wake-up, and the wakee's (not decayed since it slept) off its previous CPU,
    /// whose load still carries it. Both capacities are 1024 and cancel out.
    fn wake_affine_weight(&self, w: Wakeup) -> Option<usize> {
        let mut this_eff = self.cpu_load(w.this) as i64;
        if w.sync {
            let current = w.waker.map_or(0, |k| self.task_load(k)) as i64;
            if current > this_eff {
                return Some(w.this);
            }
            this_eff -= current;
        }
        let task_load = self.task_load(w.p) as i64;
        this_eff = (this_eff + task_load) * 100;
        // WA_BIAS: (imbalance_pct − 100) / 2, imbalance_pct = 110 (SMT) or 117.
        let bias = if self.smt_siblings(w.this, w.prev) {
            5
        } else {
            8
        };
        let prev_eff = (self.cpu_load(w.prev) as i64 - task_load) * (100 + bias) + w.sync as i64;
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
        let (n, llc, allowed) = (
            self.nr_cpus(),
            self.cpu_topo(target).llc,
            self.se_allowed(p),
        );
        (0..n)
            .map(move |i| (from + i) % n)
            .filter(move |&c| self.cpu_topo(c).llc == llc && allowed.contains(CpuId(c as u32)))
    }

    /// Linux v5.10: select_idle_core (the has_idle_cores hint is not modelled: always scans)
    fn select_idle_core(&self, ctx: &LinuxCtx, p: usize, target: usize) -> Option<usize> {
        if !self.has_smt() {
            return None;
        }
        let mut seen = CpuSet::empty();
        for core in self.llc_wrap(p, target, target) {
            if seen.contains(CpuId(core as u32)) {
                continue;
            }
            let mut idle = true;
            for s in (0..self.nr_cpus()).filter(|&s| self.smt_siblings(core, s)) {
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
        let span_avg = self.llc_size(target) as u64 * (ctx.rq(w.this).avg_idle / 512);
        let nr = if span_avg > 4 * avg_cost {
            span_avg / avg_cost
        } else {
            4
        };
        // The scan of `llc_wrap(p, target, target + 1)` without `target`, at most nr − 1 CPUs,
        // as a plain loop: the iterator chain's `try_fold` was not always inlined (callgrind).
        let n = self.nr_cpus();
        let (llc, allowed) = (self.cpu_topo(target).llc, self.se_allowed(w.p));
        let from = (target + 1) % n;
        let mut budget = nr as usize - 1;
        for i in 0..n {
            if budget == 0 {
                break;
            }
            let c = (from + i) % n;
            if c == target || self.cpu_topo(c).llc != llc || !allowed.contains(CpuId(c as u32)) {
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
        let allowed = self.se_allowed(p);
        (0..self.nr_cpus()).find(|&c| {
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
        let recent = self.recent_used_cpu(p);
        if recent != prev
            && recent != target
            && self.share_cache(recent, target)
            && self.idle_or_sched_idle(ctx, recent)
            && self.se_allowed(p).contains(CpuId(recent as u32))
        {
            self.set_recent_used_cpu(p, prev);
            return recent;
        }
        self.select_idle_core(ctx, p, target)
            .or_else(|| self.select_idle_cpu(ctx, w, target))
            .or_else(|| self.select_idle_smt(ctx, p, target))
            .unwrap_or(target)
    }

    /// Linux v5.10: select_task_rq_fair for SD_BALANCE_WAKE (the fast path).
    fn select_task_rq_fair(&mut self, ctx: &LinuxCtx, p: usize, info: WakeInfo) -> usize {
        let prev = self.se_cpu(p);
        let this = info.waker_cpu.map_or(prev, |c| c.idx());
        let waker = info
            .waker_cpu
            .and_then(|c| self.rq_curr(c.idx()))
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
        let allowed = self.se_allowed(p).contains(CpuId(this as u32));
        let want_affine = !self.wake_wide(w) && allowed;
        let target = if want_affine && this != prev {
            self.wake_affine(ctx, w)
        } else {
            prev
        };
        let cpu = self.select_idle_sibling(ctx, w, target);
        if let Some(k) = waker.filter(|_| want_affine) {
            self.set_recent_used_cpu(k, this);
        }
        self.allowed_or_fallback(p, cpu)
    }

    /// Linux v5.10: select_fallback_rq, reduced to "the next allowed CPU".
    fn allowed_or_fallback(&self, p: usize, cpu: usize) -> usize {
        self.se_allowed(p)
            .test_or_cycle(CpuId(cpu as u32))
            .expect("a task has at least one allowed vCPU")
            .idx()
    }

    /// Fork placement, flattened (see the module doc). Linux v5.10: find_idlest_cpu
    fn find_idlest_cpu(&self, ctx: &LinuxCtx, p: usize, parent: usize) -> usize {
        let allowed = self.se_allowed(p);
        let mut idlest: Option<(usize, u64)> = None;
        let mut least: Option<(usize, u64)> = None;
        for c in (0..self.nr_cpus()).filter(|&c| allowed.contains(CpuId(c as u32))) {
            if self.sched_idle_cpu(ctx, c) {
                return c;
            }
            if self.available_idle_cpu(ctx, c) {
                let stamp = ctx.rq(c).idle_stamp.unwrap_or(0);
                if idlest.is_none_or(|(_, s)| stamp > s) {
                    idlest = Some((c, stamp));
                }
            } else {
                let load = self.cpu_load(c);
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

impl SelectFair for Cfs {
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
        self.tun.hz
    }
    #[inline]
    fn tick_ns(&self) -> u64 {
        self.tun.tick_ns
    }
    select_fair_fields!();
}
