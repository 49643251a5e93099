//! CFS as in **Linux 3.17** (`version = "3.17"`, seed 003's guest and host kernel): the rules
//! where 3.17's `kernel/sched/fair.c` and `core.c` differ from the 5.10 model, selected by
//! [`CfsVersion::V3_17`]; everything else (tunables and their scaling, vruntime, place_entity,
//! the tick and wake-up preemption, buddies, yield, balancing) is the 5.10 code path, as spec
//! §1.19 says (its 3.17 equivalence "from general knowledge; unverified line-by-line").
//!
//! * **Steal rounded to ticks** (§1.14 [3.x]): `update_rq_clock_task` subtracts steal only in
//!   whole ticks (`steal_ticks`), the rest staying pending for a later update. Set through
//!   [`Rq::steal_tick_ns`] at `init_rq`; it matters only with PARAVIRT_TIME_ACCOUNTING (32-bit
//!   ARM, seed 003's, has no steal clock at all).
//! * **No `vcpu_is_preempted`** (introduced in 4.10): `idle_cpu` is `rq->nr_running == 0` and
//!   the idle task current; the option is refused with 3.17 (`CfsParams::validate`), as is the
//!   6.12 fair server.
//! * **Wake-up placement** (`select_task_rq_fair`, 3.17): no WA_IDLE (`wake_affine_idle`
//!   arrived in 4.14): the affine test is the weight test alone; `select_idle_sibling` returns
//!   the target if idle, the previous CPU if it shares the target's cache and is idle, else the
//!   first **fully idle group** of the target's LLC domain (a core: all its SMT siblings idle,
//!   none being the target), walking the groups from the target's in CPU order, then an idle SMT
//!   sibling of the target; the group's first allowed CPU is returned. No `recent_used_cpu`,
//!   no SIS_PROP scan budget, no SCHED_IDLE-CPU preference (`sched_idle_cpu` is 5.4).
//! * **Fork placement** (`find_idlest_cpu`, 3.17): the least loaded allowed CPU, ties to the
//!   parent's CPU, else the first in CPU order (the idle-state preference is 3.18/4.0; no
//!   `sched_idle_cpu`).
//!
//! Not modelled as different (kept from 5.10, each unverified for 3.17): `wake_wide` (3.17 has
//! the older `p->wakee_flips > llc_size && current->wakee_flips > llc_size × p->wakee_flips`
//! form), the details of 3.17's weight test (`<=`, source/target_load indices), `record_wakee`'s
//! decay, and per-entity load tracking (the model uses runnable weights for both releases).

use vmsched_core::ids::CpuId;
use vmsched_core::sched::WakeInfo;

use super::select::SelectFair;
use super::{Cfs, CfsVersion};
use crate::guest::linux_core::{LinuxCtx, Rq};

impl Cfs {
    /// The 3.17 rules apply.
    #[inline]
    pub(crate) fn is_3_17(&self) -> bool {
        self.params.version == CfsVersion::V3_17
    }

    /// Linux 3.17: sched_init's part of `update_rq_clock_task`: steal in whole ticks.
    pub(crate) fn init_rq_3_17(&self, rq: &mut Rq) {
        rq.steal_tick_ns = self.tun.tick_ns;
    }

    /// Linux 3.17: idle_cpu (no `vcpu_is_preempted`, no SCHED_IDLE shortcut).
    fn idle_cpu_3_17(&self, ctx: &LinuxCtx, c: usize) -> bool {
        self.rq_nr_running(c) == 0 && self.rq_curr(c).is_none() && ctx.rq(c).rt_nr_running == 0
    }

    /// Linux 3.17: wake_affine's weight test with the model's runnable weights (5.10's form,
    /// see the module doc), without 4.14's WA_IDLE.
    fn wake_affine_3_17(
        &self,
        p: usize,
        prev: usize,
        this: usize,
        waker: Option<usize>,
        sync: bool,
    ) -> bool {
        let mut this_eff = self.rq_load(this) as i64;
        if sync {
            let current = waker.map_or(0, |k| self.se_weight(k)) as i64;
            if current > this_eff {
                return true;
            }
            this_eff -= current;
        }
        this_eff = (this_eff + self.se_weight(p) as i64) * 100;
        let bias = if self.smt_siblings(this, prev) { 5 } else { 8 };
        let prev_eff = self.rq_load(prev) as i64 * (100 + bias) + sync as i64;
        this_eff < prev_eff
    }

    /// Linux 3.17: select_idle_sibling (see the module doc).
    fn select_idle_sibling_3_17(&self, ctx: &LinuxCtx, p: usize, target: usize) -> usize {
        let prev = self.se_cpu(p);
        if self.idle_cpu_3_17(ctx, target) {
            return target;
        }
        if prev != target && self.share_cache(prev, target) && self.idle_cpu_3_17(ctx, prev) {
            return prev;
        }
        let n = self.nr_cpus();
        let allowed = self.se_allowed(p);
        let llc = self.cpu_topo(target).llc;
        // The LLC domain's groups (cores), from the target's, in CPU order; then, below it, the
        // SMT domain's groups (the target's threads).
        let levels: [&dyn Fn(usize) -> bool; 2] = [&|c| self.cpu_topo(c).llc == llc, &|c| {
            self.smt_siblings(c, target)
        }];
        for (level, in_span) in levels.iter().enumerate() {
            if level == 1 && !self.has_smt() {
                break;
            }
            for i in 0..n {
                let first = (target + i) % n;
                if !in_span(first) {
                    continue;
                }
                let group = |c: usize| {
                    in_span(c)
                        && if level == 0 {
                            self.smt_siblings(c, first)
                        } else {
                            c == first
                        }
                };
                // Each group once: from the lowest CPU of the group met in this walk.
                if (0..i).any(|j| group((target + j) % n)) {
                    continue;
                }
                if !(0..n).any(|c| group(c) && allowed.contains(CpuId(c as u32))) {
                    continue;
                }
                if (0..n)
                    .filter(|&c| group(c))
                    .all(|c| c != target && self.idle_cpu_3_17(ctx, c))
                {
                    let c = (0..n)
                        .find(|&c| group(c) && allowed.contains(CpuId(c as u32)))
                        .expect("the group has an allowed CPU");
                    return c;
                }
            }
        }
        target
    }

    /// Linux 3.17: select_task_rq_fair for SD_BALANCE_WAKE.
    pub(crate) fn select_task_rq_fair_3_17(
        &mut self,
        ctx: &LinuxCtx,
        p: usize,
        info: WakeInfo,
    ) -> usize {
        let prev = self.se_cpu(p);
        let this = info.waker_cpu.map_or(prev, |c| c.idx());
        let waker = info
            .waker_cpu
            .and_then(|c| self.rq_curr(c.idx()))
            .filter(|&k| k != p);
        if let Some(k) = waker {
            self.record_wakee(ctx.now(), k, p);
        }
        let want_affine = self.se_allowed(p).contains(CpuId(this as u32));
        let mut target = prev;
        if want_affine && this != prev {
            let wide = self.wake_wide_3_17(p, this, waker);
            if !wide && self.wake_affine_3_17(p, prev, this, waker, info.sync) {
                target = this;
            }
        }
        let cpu = self.select_idle_sibling_3_17(ctx, p, target);
        self.allowed_or_fallback(p, cpu)
    }

    /// `wake_wide` as the 5.10 model has it (see the module doc).
    fn wake_wide_3_17(&self, p: usize, this: usize, waker: Option<usize>) -> bool {
        let mut master = waker.map_or(0, |k| self.wakee_flips(k));
        let mut slave = self.wakee_flips(p);
        if master < slave {
            std::mem::swap(&mut master, &mut slave);
        }
        let factor = self.llc_size(this);
        !(slave < factor || master < slave.saturating_mul(factor))
    }

    /// Linux 3.17: find_idlest_cpu (flattened over one group): the least loaded allowed CPU,
    /// ties to the parent's CPU, else the first.
    pub(crate) fn find_idlest_cpu_3_17(&self, p: usize, parent: usize) -> usize {
        let allowed = self.se_allowed(p);
        let mut best: Option<(usize, u64)> = None;
        for c in (0..self.nr_cpus()).filter(|&c| allowed.contains(CpuId(c as u32))) {
            let load = self.rq_load(c);
            if best.is_none_or(|(_, l)| load < l || (load == l && c == parent)) {
                best = Some((c, load));
            }
        }
        best.map_or_else(|| self.allowed_or_fallback(p, parent), |(c, _)| c)
    }
}
