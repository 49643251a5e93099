//! Load balancing, the simulator-level model of §1.17 (the module doc of `cfs.rs`, "Load
//! balancing"): newidle balancing when `schedule` finds the queue empty, periodic balancing from
//! the tick, and the NOHZ idle balance that the tick of a busy vCPU runs for idle ones.
//!
//! Written once for every fair class of the Linux core: [`BalanceFair`] asks its class for the
//! queued tasks, their last run and the move itself (CFS 5.10 and EEVDF 6.x implement it).

use vmsched_core::ids::CpuId;
use vmsched_core::sched::Policy;

use super::select::SelectFair;
use super::{vdiff, Cfs};
use crate::guest::linux_core::LinuxCtx;

/// Load-balancing constants of the one modelled domain (Linux v5.10: sd_init, sysctl_sched_nr_migrate).
const LB_IMBALANCE_PCT: i64 = 117;
const LB_BUSY_FACTOR: u64 = 16;
const CACHE_NICE_TRIES: u32 = 1;
const SCHED_NR_MIGRATE: u32 = 32;

/// A destination CPU's balancing state (Linux: the domain's `last_balance`,
/// `balance_interval`, `nr_balance_failed`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LbState {
    pub(crate) last_balance: u64,
    pub(crate) balance_interval_ms: u64,
    pub(crate) nr_balance_failed: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Balance {
    NewIdle,
    Periodic,
}

/// Load balancing for a fair class: the fields it reads and the move (required), the rules
/// (provided).
pub(crate) trait BalanceFair: SelectFair {
    /// `sysctl_sched_migration_cost`.
    fn migration_cost(&self) -> u64;
    fn se_policy(&self, e: usize) -> Policy;
    /// `p->se.exec_start`.
    fn se_exec_start(&self, e: usize) -> u64;
    /// Whether `e` is a buddy of `src`'s queue that CACHE_HOT_BUDDY keeps there.
    fn is_hot_buddy(&self, src: usize, e: usize) -> bool;
    /// The tasks queued on `c`, not running.
    fn queued(&self, c: usize) -> &[usize];
    /// Whether the balancer may move queued task `e` at all (beyond affinity and cache heat).
    fn may_migrate(&self, _e: usize) -> bool {
        true
    }
    fn lb(&self, c: usize) -> &LbState;
    fn lb_mut(&mut self, c: usize) -> &mut LbState;
    /// Linux: detach_task + attach_task of queued task `e` from `src` to `dst`, then the
    /// wake-up preemption check on `dst`.
    fn lb_move_task(&mut self, ctx: &mut LinuxCtx, e: usize, src: usize, dst: usize);

    /// Linux v5.10: task_hot
    fn task_hot(&self, ctx: &LinuxCtx, e: usize, src: usize, dst: usize) -> bool {
        if self.se_policy(e) == Policy::Idle {
            return false;
        }
        if self.rq_nr_running(dst) > 0 && self.is_hot_buddy(src, e) {
            return true;
        }
        let cost = self.migration_cost();
        if cost == 0 {
            return false;
        }
        vdiff(ctx.rq_clock_task(src), self.se_exec_start(e)) < cost as i64
    }

    /// The busiest CPU for `dst` (see the module doc); `llc`: restrict to `dst`'s LLC.
    fn find_busiest(&self, dst: usize, llc: bool) -> Option<usize> {
        let dst_idle = self.rq_nr_running(dst) == 0;
        let mut best: Option<(usize, (u64, u64))> = None;
        for c in 0..self.nr_cpus() {
            let nr = self.rq_nr_running(c);
            if c == dst || nr < 2 || (llc && !self.share_cache(c, dst)) {
                continue;
            }
            let movable = |&e: &usize| self.se_allowed(e).contains(CpuId(dst as u32));
            if !self.queued(c).iter().any(movable) {
                continue; // all pinned
            }
            let (nr, load) = (nr as u64, self.rq_load(c));
            let key = if dst_idle { (nr, load) } else { (load, nr) };
            if best.is_none_or(|(_, k)| key > k) {
                best = Some((c, key));
            }
        }
        best.map(|(c, _)| c)
    }

    /// Moves queued tasks from the busiest CPU to `dst`; returns how many moved.
    /// Linux v5.10: load_balance / detach_tasks / attach_tasks (simplified)
    fn load_balance(&mut self, ctx: &mut LinuxCtx, dst: usize, kind: Balance, llc: bool) -> u32 {
        let Some(src) = self.find_busiest(dst, llc) else {
            if kind == Balance::Periodic {
                self.balanced(dst);
            }
            return 0;
        };
        let dst_idle = self.rq_nr_running(dst) == 0;
        let (src_load, dst_load) = (self.rq_load(src) as i64, self.rq_load(dst) as i64);
        // Imbalance in tasks for an idle destination, in load (against the domain's average)
        // otherwise. Linux v5.10: calculate_imbalance (simplified)
        let mut imbalance = if dst_idle {
            (self.rq_nr_running(src) as i64 / 2).max(1)
        } else {
            let n = self.nr_cpus();
            let avg = (0..n).map(|c| self.rq_load(c) as i64).sum::<i64>() / n as i64;
            if src_load * 100 <= dst_load * LB_IMBALANCE_PCT || dst_load >= avg {
                if kind == Balance::Periodic {
                    self.balanced(dst);
                }
                return 0;
            }
            (src_load - avg).min(avg - dst_load)
        };
        ctx.update_rq_clock(src);
        ctx.update_rq_clock(dst);
        let failed = self.lb(dst).nr_balance_failed;
        let mut moved = 0;
        while moved < SCHED_NR_MIGRATE && !self.queued(src).is_empty() {
            if dst_idle && self.rq_nr_running(src) <= 1 {
                break;
            }
            let cand = self
                .queued(src)
                .iter()
                .copied()
                .filter(|&e| {
                    self.se_allowed(e).contains(CpuId(dst as u32))
                        && self.may_migrate(e)
                        && (!self.task_hot(ctx, e, src, dst) || failed > CACHE_NICE_TRIES)
                        && (dst_idle || (self.se_weight(e) >> failed.min(63)) as i64 <= imbalance)
                })
                .min_by_key(|&e| (self.se_exec_start(e), e));
            let Some(e) = cand else { break };
            self.lb_move_task(ctx, e, src, dst);
            moved += 1;
            imbalance -= if dst_idle {
                1
            } else {
                self.se_weight(e) as i64
            };
            if kind == Balance::NewIdle || imbalance <= 0 {
                break;
            }
        }
        if kind == Balance::Periodic {
            // Unbalanced: back to the minimal interval; count the failure.
            let min_interval = self.nr_cpus() as u64;
            let rq = self.lb_mut(dst);
            rq.balance_interval_ms = min_interval;
            rq.nr_balance_failed = if moved > 0 {
                0
            } else {
                rq.nr_balance_failed + 1
            };
        }
        moved
    }

    fn balanced(&mut self, dst: usize) {
        let max = 2 * self.nr_cpus() as u64;
        let rq = self.lb_mut(dst);
        rq.nr_balance_failed = 0;
        if rq.balance_interval_ms < max {
            rq.balance_interval_ms *= 2;
        }
    }

    /// Linux v5.10: newidle_balance
    fn newidle_balance(&mut self, ctx: &mut LinuxCtx, cpu: usize) -> bool {
        let rq = ctx.rq_mut(cpu);
        rq.idle_stamp = Some(rq.clock);
        let overload = (0..self.nr_cpus()).any(|c| self.rq_nr_running(c) >= 2);
        if ctx.rq(cpu).avg_idle < self.migration_cost() || !overload {
            return false;
        }
        let pulled = self.load_balance(ctx, cpu, Balance::NewIdle, true) > 0
            || self.load_balance(ctx, cpu, Balance::NewIdle, false) > 0;
        if pulled {
            ctx.rq_mut(cpu).idle_stamp = None;
        }
        pulled
    }

    /// Linux v5.10: get_sd_balance_interval, in ns.
    fn balance_interval_ns(&self, cpu: usize, busy: bool) -> u64 {
        let mut ms = self.lb(cpu).balance_interval_ms;
        if busy {
            ms *= LB_BUSY_FACTOR;
        }
        let hz = self.hz();
        let mut j = (ms * hz).div_ceil(1000);
        if busy {
            j = j.saturating_sub(1);
        }
        let max = (hz * self.nr_cpus() as u64 / 10).max(1);
        j.clamp(1, max) * self.tick_ns()
    }

    /// Periodic balancing of `cpu` and the NOHZ idle balance it kicks.
    /// Linux v5.10: trigger_load_balance → rebalance_domains, nohz_balancer_kick
    fn trigger_load_balance(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        let now = ctx.rq(cpu).clock;
        if now >= self.lb(cpu).last_balance + self.balance_interval_ns(cpu, true) {
            self.lb_mut(cpu).last_balance = now;
            self.load_balance(ctx, cpu, Balance::Periodic, false);
        }
        if self.rq_nr_running(cpu) < 2 {
            return;
        }
        for d in 0..self.nr_cpus() {
            if d == cpu || self.rq_nr_running(d) > 0 || self.rq_curr(d).is_some() {
                continue;
            }
            if now >= self.lb(d).last_balance + self.balance_interval_ns(d, false) {
                self.lb_mut(d).last_balance = now;
                self.load_balance(ctx, d, Balance::Periodic, false);
            }
        }
    }
}

impl BalanceFair for Cfs {
    #[inline]
    fn migration_cost(&self) -> u64 {
        self.tun.migration_cost
    }
    #[inline]
    fn se_policy(&self, e: usize) -> Policy {
        self.ses[e].policy
    }
    #[inline]
    fn se_exec_start(&self, e: usize) -> u64 {
        self.ses[e].exec_start
    }
    #[inline]
    fn is_hot_buddy(&self, src: usize, e: usize) -> bool {
        let rq = &self.rqs[src];
        rq.next == Some(e) || rq.last == Some(e)
    }
    #[inline]
    fn queued(&self, c: usize) -> &[usize] {
        &self.rqs[c].timeline
    }
    #[inline]
    fn lb(&self, c: usize) -> &LbState {
        &self.rqs[c].lb
    }
    #[inline]
    fn lb_mut(&mut self, c: usize) -> &mut LbState {
        &mut self.rqs[c].lb
    }

    /// Linux v5.10: detach_task + attach_task (migrate_task_rq_fair clears exec_start).
    fn lb_move_task(&mut self, ctx: &mut LinuxCtx, e: usize, src: usize, dst: usize) {
        self.dequeue_entity(ctx, src, e, false);
        self.ses[e].cpu = dst;
        self.ses[e].exec_start = 0;
        self.enqueue_entity(ctx, dst, e, false, false);
        self.check_preempt_curr(ctx, dst, e, false);
    }
}
