//! Load balancing as Linux v5.10 `fair.c` does it with PELT loads (the module doc of `cfs.rs`,
//! "Load balancing"): newidle balancing when `schedule` finds the queue empty, periodic
//! balancing from the tick, the NOHZ idle balance that the tick of a busy vCPU runs for idle
//! ones, and active balancing when nothing queued can move.
//!
//! The guest's sched domain is modelled as one level whose groups are single vCPUs (the MC
//! level of a guest without SMT siblings: `SD_SHARE_PKG_RESOURCES` when it is one LLC,
//! imbalance_pct 117, cache_nice_tries 1). Each vCPU is classified from its PELT signals
//! (`group_classify`: `group_overloaded`, `group_fully_busy`, `group_has_spare`; misfit,
//! asym-packing and imbalanced groups need asymmetric capacities, SD_ASYM_PACKING or affinity
//! across groups, which a flat guest does not have), the busiest is chosen
//! (`update_sd_pick_busiest`), and `calculate_imbalance` decides what to move and how much:
//! `migrate_task` (a count), `migrate_util` (utilisation) or `migrate_load` (PELT load).
//!
//! Written once for every fair class of the Linux core: [`BalanceFair`] asks its class for the
//! queued tasks, their last run and the move itself (CFS 5.10 and EEVDF 6.x implement it).

use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::Policy;
use vmsched_core::trace::SchedEvent;

use super::pelt::SCHED_CAPACITY_SCALE;
use super::select::SelectFair;
use super::{vdiff, Cfs};
use crate::guest::linux_core::LinuxCtx;

/// Load-balancing constants of the one modelled domain (Linux v5.10: sd_init, sysctl_sched_nr_migrate).
const LB_IMBALANCE_PCT: u64 = 117;
const LB_BUSY_FACTOR: u64 = 16;
const CACHE_NICE_TRIES: u32 = 1;
const SCHED_NR_MIGRATE: u32 = 32;
/// Every vCPU's capacity (`capacity_of`: no RT, IRQ or thermal pressure is modelled).
const CAPACITY: u64 = SCHED_CAPACITY_SCALE;
/// How often a busy vCPU's tick refreshes the blocked load of idle ones (Linux v5.10:
/// `nohz.next_blocked`, `LOAD_AVG_PERIOD` = 32 ms later).
const BLOCKED_UPDATE_NS: u64 = 32_000_000;

/// A destination CPU's balancing state (Linux: the domain's `last_balance`,
/// `balance_interval`, `nr_balance_failed`; the run queue's `active_balance` and `push_cpu`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LbState {
    pub(crate) last_balance: u64,
    pub(crate) balance_interval_ms: u64,
    pub(crate) nr_balance_failed: u32,
    /// Set on a busiest CPU: its stopper is to push one task to this CPU
    /// (`rq->active_balance`, `rq->push_cpu`).
    pub(crate) push_cpu: Option<usize>,
    /// When a busy CPU's tick last refreshed the idle CPUs' blocked load (`nohz.next_blocked`,
    /// one for the level: read in vCPU 0's state).
    pub(crate) last_blocked: u64,
}

/// Linux v5.10: enum cpu_idle_type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Balance {
    /// CPU_NEWLY_IDLE
    NewIdle,
    /// CPU_NOT_IDLE: the periodic balance of a busy CPU.
    Periodic,
    /// CPU_IDLE: an idle CPU balanced (by itself or by the NOHZ idle balance).
    Idle,
}

/// Linux v5.10: enum group_type (the kinds a flat, symmetric guest can have), in order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum GroupType {
    HasSpare,
    FullyBusy,
    Overloaded,
}

/// Linux v5.10: enum migration_type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MigrationType {
    Load,
    Util,
    Task,
}

/// Linux v5.10: struct sg_lb_stats, of a group of one CPU.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SgStats {
    pub(crate) load: u64,
    pub(crate) util: u64,
    pub(crate) runnable: u64,
    /// `sum_h_nr_running`: fair tasks.
    pub(crate) h_nr: u32,
    /// `sum_nr_running`: every class's tasks.
    pub(crate) nr: u32,
    pub(crate) idle_cpus: u32,
    pub(crate) group_type: GroupType,
    pub(crate) avg_load: u64,
}

/// A balancer's move of task `e`, on the trace channel (one flag test when tracing is off).
#[inline]
fn trace_move(ctx: &mut LinuxCtx, e: usize, src: usize, dst: usize) {
    ctx.trace(|| SchedEvent::Migrate {
        ent: EntityId(e as u32),
        from: CpuId(src as u32),
        to: CpuId(dst as u32),
    });
}

/// Linux v5.10: group_has_capacity (a group of one CPU of capacity 1024).
fn group_has_capacity(s: &SgStats) -> bool {
    if s.nr < 1 {
        return true;
    }
    if CAPACITY * LB_IMBALANCE_PCT < s.runnable * 100 {
        return false;
    }
    CAPACITY * 100 > s.util * LB_IMBALANCE_PCT
}

/// Linux v5.10: group_is_overloaded
fn group_is_overloaded(s: &SgStats) -> bool {
    if s.nr <= 1 {
        return false;
    }
    CAPACITY * 100 < s.util * LB_IMBALANCE_PCT || CAPACITY * LB_IMBALANCE_PCT < s.runnable * 100
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
    /// Linux v5.10: update_blocked_averages (the queue's PELT signal brought to now).
    fn update_blocked_averages(&mut self, ctx: &LinuxCtx, c: usize);

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

    /// Linux v5.10: can_migrate_task (affinity, not running, not cache hot unless the domain
    /// failed more than cache_nice_tries times).
    fn can_migrate_task(&self, ctx: &LinuxCtx, e: usize, src: usize, dst: usize) -> bool {
        self.se_allowed(e).contains(CpuId(dst as u32))
            && self.may_migrate(e)
            && (!self.task_hot(ctx, e, src, dst)
                || self.lb(dst).nr_balance_failed > CACHE_NICE_TRIES)
    }

    /// Linux v5.10: update_sg_lb_stats for the group of CPU `c`.
    fn sg_stats(&self, ctx: &LinuxCtx, c: usize) -> SgStats {
        let h_nr = self.rq_nr_running(c);
        let nr = h_nr + ctx.rq(c).rt_nr_running;
        let mut s = SgStats {
            load: self.cpu_load(c),
            util: self.cpu_util(c),
            runnable: self.cpu_runnable(c),
            h_nr,
            nr,
            idle_cpus: (nr == 0 && self.rq_curr(c).is_none()) as u32,
            group_type: GroupType::HasSpare,
            avg_load: 0,
        };
        s.group_type = if group_is_overloaded(&s) {
            GroupType::Overloaded
        } else if !group_has_capacity(&s) {
            GroupType::FullyBusy
        } else {
            GroupType::HasSpare
        };
        if s.group_type == GroupType::Overloaded {
            s.avg_load = s.load * SCHED_CAPACITY_SCALE / CAPACITY;
        }
        s
    }

    /// Linux v5.10: update_sd_pick_busiest (whether `s` is busier than `busiest`).
    fn pick_busiest(s: &SgStats, busiest: Option<&SgStats>) -> bool {
        if s.h_nr == 0 {
            return false;
        }
        let Some(b) = busiest else { return true };
        if s.group_type != b.group_type {
            return s.group_type > b.group_type;
        }
        match s.group_type {
            GroupType::Overloaded | GroupType::FullyBusy => s.avg_load > b.avg_load,
            GroupType::HasSpare => {
                s.idle_cpus < b.idle_cpus || (s.idle_cpus == b.idle_cpus && s.nr > b.nr)
            }
        }
    }

    /// The busiest group of the domain seen from `dst`, and what to move: `(busiest CPU, kind,
    /// imbalance)`, or None when balanced. `llc`: the domain is `dst`'s LLC.
    /// Linux v5.10: find_busiest_group → update_sd_lb_stats, calculate_imbalance
    fn find_busiest_group(
        &self,
        ctx: &LinuxCtx,
        dst: usize,
        idle: Balance,
        llc: bool,
    ) -> Option<(usize, MigrationType, u64)> {
        let local = self.sg_stats(ctx, dst);
        let (mut total_load, mut total_cap) = (local.load, CAPACITY);
        let mut busiest: Option<(usize, SgStats)> = None;
        for c in 0..self.nr_cpus() {
            if c == dst || (llc && !self.share_cache(c, dst)) || !ctx.cpu(CpuId(c as u32)).online {
                continue;
            }
            let s = self.sg_stats(ctx, c);
            total_load += s.load;
            total_cap += CAPACITY;
            if Self::pick_busiest(&s, busiest.as_ref().map(|(_, b)| b)) {
                busiest = Some((c, s));
            }
        }
        let (src, b) = busiest?;
        let mut local = local;
        if local.group_type > b.group_type {
            return None;
        }
        if local.group_type == GroupType::Overloaded {
            if local.avg_load >= b.avg_load {
                return None;
            }
            let avg = total_load * SCHED_CAPACITY_SCALE / total_cap;
            if local.avg_load >= avg || 100 * b.avg_load <= LB_IMBALANCE_PCT * local.avg_load {
                return None;
            }
        }
        if b.group_type != GroupType::Overloaded && (idle == Balance::Periodic || b.h_nr == 1) {
            return None;
        }
        // calculate_imbalance
        if local.group_type == GroupType::HasSpare {
            // A domain that is one LLC shares package resources: no migrate_util there.
            let share_pkg = llc || (0..self.nr_cpus()).all(|c| self.share_cache(c, dst));
            if b.group_type > GroupType::FullyBusy && !share_pkg {
                let imb = CAPACITY.max(local.util) - local.util;
                if idle != Balance::Periodic && imb == 0 {
                    return Some((src, MigrationType::Task, 1));
                }
                return Some((src, MigrationType::Util, imb)).filter(|x| x.2 > 0);
            }
            // busiest->group_weight == 1
            let imb = (b.nr.saturating_sub(local.nr) >> 1) as u64;
            return (imb > 0).then_some((src, MigrationType::Task, imb));
        }
        let avg = total_load * SCHED_CAPACITY_SCALE / total_cap;
        if local.group_type < GroupType::Overloaded {
            local.avg_load = local.load * SCHED_CAPACITY_SCALE / CAPACITY;
            if local.avg_load >= b.avg_load {
                return None;
            }
        }
        let imb = (b.avg_load.saturating_sub(avg) * CAPACITY)
            .min(avg.saturating_sub(local.avg_load) * CAPACITY)
            / SCHED_CAPACITY_SCALE;
        (imb > 0).then_some((src, MigrationType::Load, imb))
    }

    /// Linux v5.10: find_busiest_queue for a group of one CPU (its checks of the one queue).
    fn busiest_queue_ok(&self, src: usize, kind: MigrationType, imbalance: u64) -> bool {
        let nr = self.rq_nr_running(src);
        match kind {
            // A lone task heavier than the imbalance stays (check_cpu_capacity is false at
            // full capacity).
            MigrationType::Load => !(nr == 1 && self.cpu_load(src) > imbalance),
            MigrationType::Util => nr > 1,
            MigrationType::Task => nr > 0,
        }
    }

    /// Moves queued tasks from the busiest CPU to `dst`; returns how many moved.
    /// Linux v5.10: load_balance (find_busiest_group, find_busiest_queue, detach_tasks,
    /// attach_tasks, the failure count and active balance, the interval)
    fn load_balance(&mut self, ctx: &mut LinuxCtx, dst: usize, idle: Balance, llc: bool) -> u32 {
        let found = self
            .find_busiest_group(ctx, dst, idle, llc)
            .filter(|&(src, kind, imb)| self.busiest_queue_ok(src, kind, imb));
        let Some((src, kind, mut imbalance)) = found else {
            self.out_balanced(dst, idle);
            return 0;
        };
        let mut moved = 0;
        let mut all_pinned = true;
        if self.rq_nr_running(src) + ctx.rq(src).rt_nr_running > 1 {
            ctx.update_rq_clock(src);
            ctx.update_rq_clock(dst);
            // detach_tasks: the coldest queued task first (the tail of `cfs_tasks`).
            while moved < SCHED_NR_MIGRATE {
                if idle != Balance::Periodic && self.rq_nr_running(src) <= 1 {
                    break;
                }
                let failed = self.lb(dst).nr_balance_failed;
                let fits = |e: usize| match kind {
                    MigrationType::Load => {
                        (self.task_load(e).max(1) >> failed.min(63)) <= imbalance
                    }
                    MigrationType::Util => self.task_util_est(e) <= imbalance,
                    MigrationType::Task => true,
                };
                let mut cand = None;
                for &e in self.queued(src) {
                    if self.se_allowed(e).contains(CpuId(dst as u32)) {
                        all_pinned = false;
                    }
                    if !self.can_migrate_task(ctx, e, src, dst) || !fits(e) {
                        continue;
                    }
                    let key = (self.se_exec_start(e), e);
                    if cand.is_none_or(|(k, _)| key < k) {
                        cand = Some((key, e));
                    }
                }
                let Some((_, e)) = cand else { break };
                let used = match kind {
                    MigrationType::Load => self.task_load(e).max(1),
                    MigrationType::Util => self.task_util_est(e),
                    MigrationType::Task => 1,
                };
                self.lb_move_task(ctx, e, src, dst);
                trace_move(ctx, e, src, dst);
                moved += 1;
                imbalance = imbalance.saturating_sub(used);
                if idle == Balance::NewIdle || imbalance == 0 {
                    break;
                }
            }
            // The running task is on `cfs_tasks` too: its affinity alone clears LBF_ALL_PINNED.
            if self
                .rq_curr(src)
                .is_some_and(|c| self.se_allowed(c).contains(CpuId(dst as u32)))
            {
                all_pinned = false;
            }
            if moved == 0 && all_pinned && !self.queued(src).is_empty() {
                // LBF_ALL_PINNED (the one busiest of a flat domain): out_all_pinned.
                self.out_one_pinned(dst, idle);
                return 0;
            }
        }
        let mut active = false;
        if moved == 0 {
            if idle != Balance::NewIdle {
                self.lb_mut(dst).nr_balance_failed += 1;
            }
            // need_active_balance: no voluntary case at equal capacities.
            if self.lb(dst).nr_balance_failed > CACHE_NICE_TRIES + 2 {
                let curr_allowed = self
                    .rq_curr(src)
                    .is_some_and(|c| self.se_allowed(c).contains(CpuId(dst as u32)));
                if !curr_allowed {
                    self.out_one_pinned(dst, idle);
                    return 0;
                }
                if self.lb(src).push_cpu.is_none() {
                    self.lb_mut(src).push_cpu = Some(dst);
                    ctx.resched_curr(src);
                    active = true;
                }
                self.lb_mut(dst).nr_balance_failed = CACHE_NICE_TRIES + 1;
            }
        } else {
            self.lb_mut(dst).nr_balance_failed = 0;
        }
        let (min, max) = (self.nr_cpus() as u64, 2 * self.nr_cpus() as u64);
        let lb = self.lb_mut(dst);
        if !active {
            lb.balance_interval_ms = min;
        } else if lb.balance_interval_ms < max {
            lb.balance_interval_ms *= 2;
        }
        moved
    }

    /// Linux v5.10: load_balance's out_balanced
    fn out_balanced(&mut self, dst: usize, idle: Balance) {
        self.lb_mut(dst).nr_balance_failed = 0;
        self.out_one_pinned(dst, idle);
    }

    /// Linux v5.10: load_balance's out_one_pinned (the interval backs off)
    fn out_one_pinned(&mut self, dst: usize, idle: Balance) {
        if idle == Balance::NewIdle {
            return;
        }
        let max = 2 * self.nr_cpus() as u64;
        let lb = self.lb_mut(dst);
        if lb.balance_interval_ms < max {
            lb.balance_interval_ms *= 2;
        }
    }

    /// The stopper of a CPU asked to push a task (`push_cpu`), run from its `schedule` once its
    /// current task went back to the queue: the coldest movable task goes to the CPU that
    /// asked. Returns whether one moved. Linux v5.10: active_load_balance_cpu_stop,
    /// detach_one_task, attach_one_task
    fn active_load_balance(&mut self, ctx: &mut LinuxCtx, busiest: usize) -> bool {
        let Some(dst) = self.lb_mut(busiest).push_cpu.take() else {
            return false;
        };
        // The stopper itself counts in nr_running: one fair task is enough.
        if self.queued(busiest).is_empty()
            || !ctx.cpu(CpuId(dst as u32)).online
            || !ctx.cpu(CpuId(busiest as u32)).online
        {
            return false;
        }
        ctx.update_rq_clock(dst);
        let cand = self
            .queued(busiest)
            .iter()
            .copied()
            .filter(|&e| self.can_migrate_task(ctx, e, busiest, dst))
            .min_by_key(|&e| (self.se_exec_start(e), e));
        let Some(e) = cand else { return false };
        self.lb_move_task(ctx, e, busiest, dst);
        trace_move(ctx, e, busiest, dst);
        self.lb_mut(dst).nr_balance_failed = 0;
        true
    }

    /// Linux v5.10: newidle_balance
    fn newidle_balance(&mut self, ctx: &mut LinuxCtx, cpu: usize) -> bool {
        let rq = ctx.rq_mut(cpu);
        rq.idle_stamp = Some(rq.clock);
        let overload = (0..self.nr_cpus()).any(|c| self.rq_nr_running(c) >= 2);
        if ctx.rq(cpu).avg_idle < self.migration_cost() || !overload {
            return false;
        }
        self.update_blocked_averages(ctx, cpu);
        let pulled = self.load_balance(ctx, cpu, Balance::NewIdle, true) > 0
            || (!(0..self.nr_cpus()).all(|c| self.share_cache(c, cpu))
                && self.load_balance(ctx, cpu, Balance::NewIdle, false) > 0);
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
    /// Linux v5.10: trigger_load_balance → run_rebalance_domains (update_blocked_averages,
    /// rebalance_domains), nohz_balancer_kick → nohz_idle_balance
    fn trigger_load_balance(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        let now = ctx.rq(cpu).clock;
        let idle = if self.rq_curr(cpu).is_none() && self.rq_nr_running(cpu) == 0 {
            Balance::Idle
        } else {
            Balance::Periodic
        };
        if now
            >= self.lb(cpu).last_balance + self.balance_interval_ns(cpu, idle == Balance::Periodic)
        {
            self.lb_mut(cpu).last_balance = now;
            self.update_blocked_averages(ctx, cpu);
            self.load_balance(ctx, cpu, idle, false);
        }
        // `nohz.next_blocked` is one for the whole system: kept in vCPU 0's state.
        let stats_due = now >= self.lb(0).last_blocked + BLOCKED_UPDATE_NS;
        if self.rq_nr_running(cpu) < 2 && !stats_due {
            return;
        }
        if stats_due {
            self.lb_mut(0).last_blocked = now;
        }
        for d in 0..self.nr_cpus() {
            if d == cpu
                || self.rq_nr_running(d) > 0
                || self.rq_curr(d).is_some()
                || !ctx.cpu(CpuId(d as u32)).online
            {
                continue;
            }
            // update_nohz_stats: the idle CPU's blocked load decays.
            ctx.update_rq_clock(d);
            self.update_blocked_averages(ctx, d);
            if self.rq_nr_running(cpu) >= 2
                && now >= self.lb(d).last_balance + self.balance_interval_ns(d, false)
            {
                self.lb_mut(d).last_balance = now;
                self.load_balance(ctx, d, Balance::Idle, false);
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

    #[inline]
    fn update_blocked_averages(&mut self, ctx: &LinuxCtx, c: usize) {
        Cfs::update_blocked_averages(self, ctx, c);
    }

    /// Linux v5.10: detach_task + attach_task (migrate_task_rq_fair clears exec_start).
    fn lb_move_task(&mut self, ctx: &mut LinuxCtx, e: usize, src: usize, dst: usize) {
        self.dequeue_entity(ctx, src, e, false);
        self.detach_entity_cfs_rq(src, e);
        self.ses[e].cpu = dst;
        self.ses[e].exec_start = 0;
        self.enqueue_entity(ctx, dst, e, false, false);
        self.check_preempt_curr(ctx, dst, e, false);
    }
}
