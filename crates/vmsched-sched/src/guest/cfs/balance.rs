//! Load balancing, the simulator-level model of §1.17 (the module doc of `cfs.rs`, "Load
//! balancing"): newidle balancing when `schedule` finds the queue empty, periodic balancing from
//! the tick, and the NOHZ idle balance that the tick of a busy vCPU runs for idle ones.

use vmsched_core::ids::CpuId;
use vmsched_core::sched::Policy;

use super::{vdiff, Cfs};
use crate::guest::linux_core::LinuxCtx;

/// Load-balancing constants of the one modelled domain (Linux v5.10: sd_init, sysctl_sched_nr_migrate).
const LB_IMBALANCE_PCT: i64 = 117;
const LB_BUSY_FACTOR: u64 = 16;
const CACHE_NICE_TRIES: u32 = 1;
const SCHED_NR_MIGRATE: u32 = 32;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Balance {
    NewIdle,
    Periodic,
}

impl Cfs {
    /// Linux v5.10: task_hot
    fn task_hot(&self, ctx: &LinuxCtx, e: usize, src: usize, dst: usize) -> bool {
        let se = &self.ses[e];
        if se.policy == Policy::Idle {
            return false;
        }
        let src_rq = &self.rqs[src];
        if self.rqs[dst].nr_running > 0 && (src_rq.next == Some(e) || src_rq.last == Some(e)) {
            return true;
        }
        if self.tun.migration_cost == 0 {
            return false;
        }
        vdiff(ctx.rq_clock_task(src), se.exec_start) < self.tun.migration_cost as i64
    }

    /// The busiest CPU for `dst` (see the module doc); `llc`: restrict to `dst`'s LLC.
    fn find_busiest(&self, dst: usize, llc: bool) -> Option<usize> {
        let dst_idle = self.rqs[dst].nr_running == 0;
        let mut best: Option<(usize, (u64, u64))> = None;
        for c in 0..self.ncpus() {
            let rq = &self.rqs[c];
            if c == dst || rq.nr_running < 2 || (llc && !self.share_cache(c, dst)) {
                continue;
            }
            let movable = |&e: &usize| self.ses[e].allowed.contains(CpuId(dst as u32));
            if !rq.timeline.iter().any(movable) {
                continue; // all pinned
            }
            let (nr, load) = (rq.nr_running as u64, rq.load);
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
        let dst_idle = self.rqs[dst].nr_running == 0;
        let (src_load, dst_load) = (self.rqs[src].load as i64, self.rqs[dst].load as i64);
        // Imbalance in tasks for an idle destination, in load (against the domain's average)
        // otherwise. Linux v5.10: calculate_imbalance (simplified)
        let mut imbalance = if dst_idle {
            (self.rqs[src].nr_running as i64 / 2).max(1)
        } else {
            let avg = self.rqs.iter().map(|rq| rq.load as i64).sum::<i64>() / self.ncpus() as i64;
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
        let failed = self.rqs[dst].nr_balance_failed;
        let mut moved = 0;
        while moved < SCHED_NR_MIGRATE && !self.rqs[src].timeline.is_empty() {
            if dst_idle && self.rqs[src].nr_running <= 1 {
                break;
            }
            let cand = self.rqs[src]
                .timeline
                .iter()
                .copied()
                .filter(|&e| {
                    let se = &self.ses[e];
                    se.allowed.contains(CpuId(dst as u32))
                        && (!self.task_hot(ctx, e, src, dst) || failed > CACHE_NICE_TRIES)
                        && (dst_idle || (se.load.weight >> failed.min(63)) as i64 <= imbalance)
                })
                .min_by_key(|&e| (self.ses[e].exec_start, e));
            let Some(e) = cand else { break };
            self.move_queued_task(ctx, e, src, dst);
            moved += 1;
            imbalance -= if dst_idle {
                1
            } else {
                self.ses[e].load.weight as i64
            };
            if kind == Balance::NewIdle || imbalance <= 0 {
                break;
            }
        }
        if kind == Balance::Periodic {
            // Unbalanced: back to the minimal interval; count the failure.
            let min_interval = self.ncpus() as u64;
            let rq = &mut self.rqs[dst];
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
        let max = 2 * self.ncpus() as u64;
        let rq = &mut self.rqs[dst];
        rq.nr_balance_failed = 0;
        if rq.balance_interval_ms < max {
            rq.balance_interval_ms *= 2;
        }
    }

    /// Linux v5.10: detach_task + attach_task (migrate_task_rq_fair clears exec_start).
    fn move_queued_task(&mut self, ctx: &mut LinuxCtx, e: usize, src: usize, dst: usize) {
        self.dequeue_entity(ctx, src, e, false);
        self.ses[e].cpu = dst;
        self.ses[e].exec_start = 0;
        self.enqueue_entity(ctx, dst, e, false, false);
        self.check_preempt_curr(ctx, dst, e, false);
    }

    /// Linux v5.10: newidle_balance
    pub(super) fn newidle_balance(&mut self, ctx: &mut LinuxCtx, cpu: usize) -> bool {
        let rq = ctx.rq_mut(cpu);
        rq.idle_stamp = Some(rq.clock);
        let overload = self.rqs.iter().any(|rq| rq.nr_running >= 2);
        if ctx.rq(cpu).avg_idle < self.tun.migration_cost || !overload {
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
        let mut ms = self.rqs[cpu].balance_interval_ms;
        if busy {
            ms *= LB_BUSY_FACTOR;
        }
        let mut j = (ms * self.tun.hz).div_ceil(1000);
        if busy {
            j = j.saturating_sub(1);
        }
        let max = (self.tun.hz * self.ncpus() as u64 / 10).max(1);
        j.clamp(1, max) * self.tun.tick_ns
    }

    /// Periodic balancing of `cpu` and the NOHZ idle balance it kicks.
    /// Linux v5.10: trigger_load_balance → rebalance_domains, nohz_balancer_kick
    pub(super) fn trigger_load_balance(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        let now = ctx.rq(cpu).clock;
        if now >= self.rqs[cpu].last_balance + self.balance_interval_ns(cpu, true) {
            self.rqs[cpu].last_balance = now;
            self.load_balance(ctx, cpu, Balance::Periodic, false);
        }
        if self.rqs[cpu].nr_running < 2 {
            return;
        }
        for d in 0..self.ncpus() {
            let rq = &self.rqs[d];
            if d == cpu || rq.nr_running > 0 || rq.curr.is_some() {
                continue;
            }
            if now >= rq.last_balance + self.balance_interval_ns(d, false) {
                self.rqs[d].last_balance = now;
                self.load_balance(ctx, d, Balance::Periodic, false);
            }
        }
    }
}
