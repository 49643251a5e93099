//! The fair server of Linux 6.12 (`kernel/sched/deadline.c` `dl_server_*`, `fair.c`'s
//! `fair_server`; spec/linux-schedulers.md §3.6), which replaced RT throttling as the default
//! guarantee for fair tasks under RT load (commit 5f6bd380c7bd, without RT_GROUP_SCHED).
//!
//! Per CPU, a deferred deadline server of `fair_server_runtime_ns` (50 ms) every
//! `fair_server_period_ns` (1 s) runs the fair class ahead of RT when fair tasks have been
//! starved:
//!
//! * it starts when the CPU's fair class has tasks (`dl_server_start`) and stops when it has
//!   none (`dl_server_stop`); at a start whose deadline has passed, or whose remaining runtime
//!   would exceed the bandwidth before the deadline, it gets a new period (deadline = now + P,
//!   runtime = Q, `replenish_dl_new_period`, the CBS wake-up rule);
//! * deferred (`dl_defer`): it waits, throttled, until its zero-laxity time, deadline − runtime;
//!   meanwhile the fair class's own run time on the CPU is charged to it
//!   (`dl_server_update` from fair's `update_curr`), and if that uses the runtime up, fair tasks
//!   got their share without help: a new period begins and the wait starts over;
//! * at the zero-laxity time (`dl_server_timer`; re-armed if background run time moved the point
//!   more than `dl_server_min_res` = 1 ms later) it runs (`dl_defer_running`): the CPU runs fair
//!   tasks ahead of RT until the remaining runtime is used, then it is throttled until its
//!   deadline, where it is replenished (deadline += P) and deferred again.
//!
//! Modelled in the RT class's slot: while the server runs, the RT class picks nothing, so the
//! core's chain falls to the fair class, as the server (a deadline entity above RT) would pick
//! it. The server is accounted at each `__schedule` and tick of its CPU (the points where fair's
//! `update_curr` runs, plus context switches), from the fair class's runnable count the core
//! reads into `Rq::cfs_nr_running`; so it starts at the first `__schedule` or tick after fair
//! work arrives (at most a tick late on a CPU busy with RT). SCHED_DEADLINE tasks
//! (`guest/deadline.rs`) always run before it: it is not an entity of the deadline class, so
//! EDF between the server and deadline tasks is not modelled (making it one would change the
//! pick order of every 6.12 run with RT load, so it stays here).

use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::Policy;

use super::{Rt, PERIOD_TIMER};
use crate::guest::linux_core::LinuxCtx;

/// `dl_server_min_res`: the least forward of the deferral timer.
const DL_SERVER_MIN_RES: u64 = 1_000_000;

/// One CPU's fair server (`rq->fair_server`, a `sched_dl_entity`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FairServer {
    /// `dl_server_active`: the fair class has tasks here.
    pub active: bool,
    /// Remaining runtime (ns; may go below 0 by the last charge).
    pub runtime: i64,
    /// Absolute deadline (wall clock).
    pub deadline: u64,
    /// `dl_defer_armed` (with `dl_throttled`): waiting for the zero-laxity time.
    pub deferred: bool,
    /// `dl_defer_running`: the server runs the fair class ahead of RT.
    pub running: bool,
    /// Throttled after using its runtime while running: waits for its deadline.
    pub throttled: bool,
    /// Task clock of the last charge.
    pub stamp: u64,
}

impl Rt {
    /// Whether the fair server of `cpu` currently runs the fair class ahead of RT.
    #[inline]
    pub(super) fn fair_server_runs(&self, ctx: &LinuxCtx, cpu: usize) -> bool {
        self.fair_server.as_ref().is_some_and(|s| {
            let s = &s[cpu];
            s.active && s.running && !s.throttled && ctx.rq(cpu).cfs_nr_running > 0
        })
    }

    fn server_timer(&self, cpu: usize) -> u32 {
        self.timer_base + PERIOD_TIMER + 1 + cpu as u32
    }

    /// Accounting point of `cpu`'s fair server (a `__schedule` or a tick): the run time of
    /// the fair task current since the last point is charged (`dl_server_update`), then the
    /// server starts or stops with the fair class's runnable count.
    pub(super) fn fair_server_update(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        let Some(servers) = self.fair_server.as_mut() else {
            return;
        };
        let (q, p) = (self.fs_runtime as i64, self.fs_period);
        let clock_task = ctx.rq_clock_task(cpu);
        let now = ctx.rq(cpu).clock;
        let timer = self.timer_base + PERIOD_TIMER + 1 + cpu as u32;
        let s = &mut servers[cpu];
        let delta = clock_task.saturating_sub(s.stamp);
        s.stamp = clock_task;
        // A task neither RT nor SCHED_DEADLINE (the deadline class above) is the fair class's.
        let curr_fair = ctx.cpu(CpuId(cpu as u32)).curr.is_some_and(|e: EntityId| {
            !self.tasks[e.idx()].owned && ctx.ent(e).params.linux.policy != Policy::Deadline
        });
        if s.active && curr_fair && delta > 0 {
            s.runtime -= delta as i64;
            if s.runtime <= 0 {
                if s.deferred {
                    // Fair tasks got the runtime in the background: a new period, deferred.
                    s.deadline = now + p;
                    s.runtime = q;
                    ctx.set_timer(timer, Some(s.deadline - q as u64));
                } else if s.running && !s.throttled {
                    // Used up while running: throttled until the deadline; RT may run again.
                    s.throttled = true;
                    s.running = false;
                    ctx.set_timer(timer, Some(s.deadline.max(now)));
                    ctx.resched_curr(cpu);
                }
            }
        }
        let has_tasks = ctx.rq(cpu).cfs_nr_running > 0;
        // Linux 6.12 dl_server_start: a server of no runtime (debugfs runtime 0, "fair server
        // disabled") is never started; replenishing it would find no runtime to give.
        if has_tasks && !s.active && q > 0 {
            // dl_server_start → enqueue_dl_entity(ENQUEUE_WAKEUP) → update_dl_entity.
            s.active = true;
            let left = s.deadline.saturating_sub(now);
            // dl_entity_overflow: runtime / (deadline − now) > Q / P.
            let overflow = s.runtime.max(0) as u128 * p as u128 > q as u128 * left as u128;
            if s.deadline <= now || overflow {
                s.deadline = now + p;
                s.runtime = q;
            }
            if !s.running {
                s.deferred = true;
                let at = s.deadline.saturating_sub(s.runtime.max(0) as u64).max(now);
                ctx.set_timer(timer, Some(at));
            } else {
                ctx.resched_curr(cpu);
            }
        } else if !has_tasks && s.active {
            // dl_server_stop: off the queue, timer cancelled; `running` survives.
            s.active = false;
            s.deferred = false;
            s.throttled = false;
            ctx.set_timer(timer, None);
        }
    }

    /// `dl_server_timer` of `cpu`'s fair server: the zero-laxity time of a deferred server
    /// (run now, or wait on if background run time moved the point), or the deadline of a
    /// throttled one (replenish: a new period, deferred again).
    pub(super) fn fair_server_timer(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        ctx.update_rq_clock(cpu);
        self.fair_server_update(ctx, cpu);
        let timer = self.server_timer(cpu);
        let (q, p) = (self.fs_runtime as i64, self.fs_period);
        let now = ctx.rq(cpu).clock;
        let Some(servers) = self.fair_server.as_mut() else {
            return;
        };
        let s = &mut servers[cpu];
        if !s.active {
            return;
        }
        if s.deferred {
            let zero_laxity = s.deadline.saturating_sub(s.runtime.max(0) as u64);
            if now + DL_SERVER_MIN_RES < zero_laxity {
                ctx.set_timer(timer, Some(zero_laxity));
                return;
            }
            s.deferred = false;
            s.running = true;
            ctx.resched_curr(cpu);
        } else if s.throttled {
            // replenish_dl_entity: whole periods until the runtime is positive again.
            while s.runtime <= 0 {
                s.deadline += p;
                s.runtime += q;
            }
            if s.deadline <= now {
                s.deadline = now + p;
                s.runtime = q;
            }
            s.throttled = false;
            s.deferred = true;
            let at = s.deadline.saturating_sub(s.runtime as u64).max(now);
            ctx.set_timer(timer, Some(at));
        }
    }
}
