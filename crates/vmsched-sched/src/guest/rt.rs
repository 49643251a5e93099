//! The Linux real-time class, SCHED_FIFO and SCHED_RR, as of **Linux v5.10**
//! (`kernel/sched/rt.c`, `kernel/sched/cpupri.c`), in the RT slot of the Linux core
//! (`LinuxCore<Fair, Rt>`: it works with any fair class). Behavioural reference:
//! `shared/spec/linux-schedulers.md` §3.1–§3.3 and §3.6 with `ERRATA.md` L7.
//!
//! # Priorities and the run queue (§3.1, §3.2)
//!
//! A task's user priority `rt_priority` 1..=99 becomes the kernel priority
//! `prio = 99 − rt_priority` (0 is the highest). Every CPU has one list per priority and a
//! 100-bit bitmap of the non-empty ones; the pick is the head of the first non-empty list. As
//! upstream, the running task stays on its list while it runs, so a task preempted by a higher
//! priority keeps its place at the head. A waking task goes to the tail and preempts the
//! current task only if its priority is strictly higher (a lower class's current task is
//! preempted by the core). SCHED_FIFO has no slice: it runs until it blocks, yields or is
//! preempted. SCHED_RR's slice is `sched_rr_timeslice_ms` (100 ms) in ticks, decremented by the
//! tick; at zero it is refilled and, if another task shares the priority, the task goes to the
//! tail and the CPU reschedules. `sched_yield` moves the task to the tail. An equal-priority
//! wake-up preempts only when the current task could run elsewhere and the wakee could not
//! (`check_preempt_equal_prio`, ERRATA L7).
//!
//! # CPUs: placement, push and pull (§3.2 SMP)
//!
//! `cpupri` is read directly: a CPU's level is the priority of the highest RT task queued there,
//! or "normal" if none (5.10 does not rank idle CPUs below busy normal ones). A waking task
//! stays on its previous CPU unless that CPU runs an RT task of higher or equal priority (or one
//! pinned there); it then moves to the lowest-level CPU of its affinity (`find_lowest_rq`:
//! the previous CPU if it is among them, else the waker's CPU, else the first one, searched
//! through the SMT core, the LLC and the whole machine) if that CPU ranks below it. After a
//! wake-up that does not preempt, and after every pick, a CPU pushes its queued, migratable RT
//! tasks one by one to the lowest-level CPU that ranks below them (`push_rt_tasks`); a CPU
//! whose RT task blocked pulls the highest queued task from a CPU with more than one RT task
//! if it outranks what the puller has left (`pull_rt_task`).
//!
//! # Bandwidth: RT throttling (§3.3) and the fair server (§3.6)
//!
//! With `sched_rt_runtime_us` ≥ 0 (950 000 of every `sched_rt_period_us` = 1 000 000 by
//! default), RT run time is added to the CPU's `rt_time` at each accounting point
//! (`update_curr_rt`: tick, preemption, block); once it exceeds the runtime the CPU's RT queue is
//! throttled: its tasks stay queued but are not picked, so the fair class runs (or the CPU
//! idles). One period timer for all CPUs, started at the first RT enqueue and stopped when a
//! period finds no RT activity anywhere, takes one runtime per elapsed period off every CPU's
//! `rt_time` and unthrottles the queues that are below the runtime again. With
//! RT_RUNTIME_SHARE (`rt_runtime_share`: on in Linux 3.17, off from 5.10) a queue about to be
//! throttled, and a throttled one at the period timer, first borrows unused runtime from the
//! other CPUs (`rt/runtime_share.rs`); without it there is no borrowing between CPUs.
//!
//! With `fair_server = true` (Linux 6.12 and later) there is no throttling; instead each CPU's
//! fair server (`rt/fair_server.rs`) runs the fair class ahead of RT for 50 ms once fair tasks
//! have waited out 950 ms of a 1 s period, and never when no fair task waits.
//!
//! # Simplifications
//!
//! * One root task group (no RT_GROUP_SCHED); `rt_priority` out of 1..=99 is refused before
//!   build.
//! * Pull takes the single highest candidate from the overloaded CPUs in index order (upstream
//!   may pull several in a row, leaving the lesser ones to be pushed back); with RT_PUSH_IPI the
//!   upstream pull is an IPI asking those CPUs to push, which comes to the same move here. A
//!   move costs no time; pushing and pulling read `cpupri` exactly (no races).
//! * `cpupri` and the push conditions see only RT tasks, not the deadline class's
//!   (`guest/deadline.rs`); deadline run time counts in `rt_time` (5.10's `update_curr_dl`),
//!   taken from `Rq::dl_rt_time` at this class's accounting points (`take_dl_time`).
//! * A change of class at run time (FIFO to NORMAL and back) is refused by validation.
//! * Throttling is accounted at the tick and at context switches (as upstream without HRTICK);
//!   the period timer's phase is the first RT enqueue of the run.
//! * The fair class below does not see RT load when it balances (upstream scales a CPU's
//!   capacity by its RT utilisation), so a fair task sharing a CPU with an RT hog is not moved
//!   away by that.

use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{Policy, WakeInfo};
use vmsched_core::time::{SimTime, NS_PER_US};

use crate::guest::linux_core::{DequeueFlags, EnqueueFlags, LinuxCtx, SchedClass, WakeFlags};

mod fair_server; // the 6.12 fair server (§3.6)
mod runtime_share; // RT_RUNTIME_SHARE (3.17's default)
mod smp; // cpupri, wake-up placement, push and pull (§3.2 SMP)

/// MAX_RT_PRIO: the RT kernel priorities are 0..100 (user 99..1, and 99 is unused).
pub const MAX_RT_PRIO: usize = 100;
/// The level of a CPU with no RT task (cpupri's CPUPRI_NORMAL), below every RT priority.
const NORMAL_LEVEL: u8 = MAX_RT_PRIO as u8;
const NIL: u32 = u32::MAX;

// ------------------------------------------------------------------------------------------------
// Parameters
// ------------------------------------------------------------------------------------------------

/// The RT class's sysctls (`/proc/sys/kernel/sched_*`), with the 5.10 defaults.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RtParams {
    /// `sched_rr_timeslice_ms`: SCHED_RR's slice (100 ms, RR_TIMESLICE), kept in ticks
    /// (`msecs_to_jiffies`, rounded up).
    pub sched_rr_timeslice_ms: u64,
    /// `sched_rt_period_us`: the throttling period (1 s).
    pub sched_rt_period_us: u64,
    /// `sched_rt_runtime_us`: RT run time allowed per period and CPU (0.95 s); −1 disables
    /// throttling.
    pub sched_rt_runtime_us: i64,
    /// The 6.12 fair server (§3.6) instead of RT throttling. None: the kernel's own, off for
    /// CFS (5.10) and EEVDF 6.6, on for EEVDF 6.12 and later (which take the sysctls above but
    /// do not throttle); see [`RtParams::with_fair_server_default`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_server: Option<bool>,
    /// `/sys/kernel/debug/sched/fair_server/cpuN/runtime` (50 ms).
    pub fair_server_runtime_ns: u64,
    /// The RT_RUNTIME_SHARE feature: a throttling CPU borrows RT runtime from the others. None:
    /// the kernel's own, on for CFS 3.17, off for 5.10 and later (commit 2586af1ac187); see
    /// [`RtParams::with_runtime_share_default`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rt_runtime_share: Option<bool>,
    /// `/sys/kernel/debug/sched/fair_server/cpuN/period` (1 s).
    pub fair_server_period_ns: u64,
}

impl Default for RtParams {
    fn default() -> Self {
        RtParams {
            sched_rr_timeslice_ms: 100,
            sched_rt_period_us: 1_000_000,
            sched_rt_runtime_us: 950_000,
            fair_server: None,
            fair_server_runtime_ns: 50_000_000,
            fair_server_period_ns: 1_000_000_000,
            rt_runtime_share: None,
        }
    }
}

impl RtParams {
    /// These parameters with the fair server decided: as given, else `on` (the kernel's
    /// default: true from Linux 6.12).
    pub fn with_fair_server_default(mut self, on: bool) -> RtParams {
        self.fair_server.get_or_insert(on);
        self
    }

    /// These parameters with RT_RUNTIME_SHARE decided: as given, else `on` (the kernel's
    /// default: true up to Linux 5.9).
    pub fn with_runtime_share_default(mut self, on: bool) -> RtParams {
        self.rt_runtime_share.get_or_insert(on);
        self
    }

    /// Whether RT_RUNTIME_SHARE is on (None: off, the 5.10 default).
    pub fn runtime_share_on(&self) -> bool {
        self.rt_runtime_share == Some(true)
    }

    /// Whether the fair server runs (None: off, the 5.10 default).
    pub fn fair_server_on(&self) -> bool {
        self.fair_server == Some(true)
    }

    /// The ranges Linux v5.10's `sched_rt_handler` and `sched_rr_handler` accept (a period of
    /// at least 1 µs, a runtime of −1 or at most the period); the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.sched_rr_timeslice_ms == 0 || self.sched_rr_timeslice_ms > i32::MAX as u64 {
            return Err(format!(
                "sched_rr_timeslice_ms: {} is outside 1..={} (Linux resets 0 to the default)",
                self.sched_rr_timeslice_ms,
                i32::MAX
            ));
        }
        if self.sched_rt_period_us == 0 || self.sched_rt_period_us > i32::MAX as u64 {
            return Err(format!(
                "sched_rt_period_us: {} is outside 1..={}",
                self.sched_rt_period_us,
                i32::MAX
            ));
        }
        let r = self.sched_rt_runtime_us;
        if r != -1 && !(0..=self.sched_rt_period_us as i64).contains(&r) {
            return Err(format!(
                "sched_rt_runtime_us: {r} must be -1 (no throttling) or 0..={} (at most \
                 sched_rt_period_us)",
                self.sched_rt_period_us
            ));
        }
        // The debugfs writer's limits: 100 µs ≤ period ≤ 2^22 µs, runtime ≤ period.
        let (lo, hi) = (100 * NS_PER_US, (1 << 22) * NS_PER_US);
        if !(lo..=hi).contains(&self.fair_server_period_ns) {
            return Err(format!(
                "fair_server_period_ns: {} is outside {lo}..={hi}",
                self.fair_server_period_ns
            ));
        }
        if self.fair_server_runtime_ns > self.fair_server_period_ns {
            return Err(format!(
                "fair_server_runtime_ns: {} is above fair_server_period_ns ({})",
                self.fair_server_runtime_ns, self.fair_server_period_ns
            ));
        }
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------------
// State
// ------------------------------------------------------------------------------------------------

/// Per task (`struct sched_rt_entity` and the task fields the class reads).
#[derive(Clone, Copy, Debug)]
struct RtTask {
    /// Whether the task is of this class (else the entry only keeps ids dense).
    owned: bool,
    /// `task_cpu(p)`.
    cpu: CpuId,
    /// Kernel priority 0..=98.
    prio: u8,
    rr: bool,
    /// RR ticks left.
    time_slice: u32,
    on_rq: bool,
    /// The run list of its priority (intrusive, ids).
    next: u32,
    prev: u32,
    /// `se.exec_start`: the task clock when it last started running or was last charged.
    exec_start: u64,
}

/// Per CPU (`struct rt_rq` of the root group, with its `rt_prio_array`).
#[derive(Clone, Debug)]
struct RtRq {
    bitmap: [u64; 2],
    head: [u32; MAX_RT_PRIO],
    tail: [u32; MAX_RT_PRIO],
    /// Tasks on each list (to see whether a task shares its priority).
    count: [u32; MAX_RT_PRIO],
    nr_running: u32,
    /// The RT task running here.
    curr: Option<EntityId>,
    /// RT run time charged in the current period (ns).
    rt_time: u64,
    /// This queue's runtime per period (ns): the global runtime, plus what it borrowed and
    /// minus what it lent under RT_RUNTIME_SHARE.
    rt_runtime: u64,
    throttled: bool,
}

impl Default for RtRq {
    fn default() -> Self {
        RtRq {
            bitmap: [0; 2],
            head: [NIL; MAX_RT_PRIO],
            tail: [NIL; MAX_RT_PRIO],
            count: [0; MAX_RT_PRIO],
            nr_running: 0,
            curr: None,
            rt_time: 0,
            rt_runtime: 0,
            throttled: false,
        }
    }
}

impl RtRq {
    /// `rt_rq->highest_prio.curr`: the highest queued priority, or NORMAL_LEVEL.
    #[inline]
    fn highest_prio(&self) -> u8 {
        if self.bitmap[0] != 0 {
            self.bitmap[0].trailing_zeros() as u8
        } else if self.bitmap[1] != 0 {
            64 + self.bitmap[1].trailing_zeros() as u8
        } else {
            NORMAL_LEVEL
        }
    }
}

/// The RT class (SCHED_FIFO, SCHED_RR) of a Linux kernel.
pub struct Rt {
    pub params: RtParams,
    /// The RR slice in ticks.
    rr_ticks: u32,
    /// Bandwidth in ns; None: throttling disabled (`sched_rt_runtime_us = -1`, or the runtime
    /// covers the whole period).
    runtime_ns: Option<u64>,
    period_ns: u64,
    timer_base: u32,
    /// `rt_period_active` and the period timer's expiry.
    period_active: bool,
    period_expires: SimTime,
    tasks: Vec<RtTask>,
    rqs: Vec<RtRq>,
    /// The per-CPU fair servers (6.12), when on; their timers follow the period timer.
    fair_server: Option<Vec<fair_server::FairServer>>,
    fs_runtime: u64,
    fs_period: u64,
}

/// Timer 0: the RT bandwidth period timer (`def_rt_bandwidth.rt_period_timer`).
const PERIOD_TIMER: u32 = 0;

impl Rt {
    /// The class for a kernel of `ncpus` CPUs at CONFIG_HZ `hz`.
    pub fn new(params: RtParams, hz: u32, ncpus: usize) -> Rt {
        let rr_ticks = (params.sched_rr_timeslice_ms * hz as u64)
            .div_ceil(1000)
            .max(1) as u32;
        let period_ns = params.sched_rt_period_us * NS_PER_US;
        let runtime_ns = u64::try_from(params.sched_rt_runtime_us)
            .ok()
            .map(|r| r * NS_PER_US)
            .filter(|&r| r < period_ns && !params.fair_server_on());
        let fair_server = params
            .fair_server_on()
            .then(|| vec![fair_server::FairServer::default(); ncpus]);
        let (fs_runtime, fs_period) = (params.fair_server_runtime_ns, params.fair_server_period_ns);
        Rt {
            params,
            rr_ticks,
            runtime_ns,
            period_ns,
            timer_base: 0,
            period_active: false,
            period_expires: 0,
            tasks: Vec::new(),
            rqs: vec![
                RtRq {
                    rt_runtime: runtime_ns.unwrap_or(0),
                    ..RtRq::default()
                };
                ncpus
            ],
            fair_server,
            fs_runtime,
            fs_period,
        }
    }

    /// The RR slice in ticks (`sched_rr_timeslice`).
    pub fn rr_timeslice_ticks(&self) -> u32 {
        self.rr_ticks
    }

    /// Whether `cpu`'s RT queue is throttled.
    pub fn throttled(&self, cpu: CpuId) -> bool {
        self.rqs[cpu.idx()].throttled
    }

    /// The RT run time charged to `cpu` in the current period (ns).
    pub fn rt_time(&self, cpu: CpuId) -> u64 {
        self.rqs[cpu.idx()].rt_time
    }

    /// The kernel priority of RT task `e` (0 is the highest).
    pub fn prio(&self, e: EntityId) -> u8 {
        self.tasks[e.idx()].prio
    }

    fn prio_of(rt_priority: u32) -> u8 {
        assert!(
            (1..=99).contains(&rt_priority),
            "invariant: an RT task's rt_priority is 1..=99 (validated), got {rt_priority}"
        );
        (MAX_RT_PRIO as u32 - 1 - rt_priority) as u8
    }

    // --- the priority lists ---

    fn list_add(&mut self, cpu: usize, e: EntityId, head: bool) {
        let p = self.tasks[e.idx()].prio as usize;
        let rq = &mut self.rqs[cpu];
        let id = e.0;
        if rq.head[p] == NIL {
            rq.head[p] = id;
            rq.tail[p] = id;
            self.tasks[e.idx()].next = NIL;
            self.tasks[e.idx()].prev = NIL;
            rq.bitmap[p / 64] |= 1 << (p % 64);
        } else if head {
            let old = rq.head[p];
            self.tasks[old as usize].prev = id;
            self.tasks[e.idx()].next = old;
            self.tasks[e.idx()].prev = NIL;
            rq.head[p] = id;
        } else {
            let old = rq.tail[p];
            self.tasks[old as usize].next = id;
            self.tasks[e.idx()].prev = old;
            self.tasks[e.idx()].next = NIL;
            rq.tail[p] = id;
        }
        rq.count[p] += 1;
    }

    fn list_del(&mut self, cpu: usize, e: EntityId) {
        let t = self.tasks[e.idx()];
        let p = t.prio as usize;
        let rq = &mut self.rqs[cpu];
        if t.prev == NIL {
            rq.head[p] = t.next;
        } else {
            self.tasks[t.prev as usize].next = t.next;
        }
        if t.next == NIL {
            rq.tail[p] = t.prev;
        } else {
            self.tasks[t.next as usize].prev = t.prev;
        }
        rq.count[p] -= 1;
        if rq.head[p] == NIL {
            rq.bitmap[p / 64] &= !(1 << (p % 64));
        }
    }

    /// Linux v5.10: enqueue_rt_entity (the task joins `cpu`'s queue, at the tail unless
    /// ENQUEUE_HEAD), with `inc_rt_tasks` and `start_rt_bandwidth`.
    fn enqueue(&mut self, ctx: &mut LinuxCtx, cpu: usize, e: EntityId, head: bool) {
        debug_assert!(!self.tasks[e.idx()].on_rq, "enqueue of a queued RT task");
        self.tasks[e.idx()].on_rq = true;
        self.tasks[e.idx()].cpu = CpuId(cpu as u32);
        self.list_add(cpu, e, head);
        self.rqs[cpu].nr_running += 1;
        ctx.rq_mut(cpu).rt_nr_running += 1;
        self.start_rt_bandwidth(ctx);
    }

    /// Linux v5.10: dequeue_rt_entity with `dec_rt_tasks`.
    fn dequeue(&mut self, ctx: &mut LinuxCtx, cpu: usize, e: EntityId) {
        debug_assert!(
            self.tasks[e.idx()].on_rq,
            "dequeue of an RT task not queued"
        );
        self.list_del(cpu, e);
        self.tasks[e.idx()].on_rq = false;
        self.rqs[cpu].nr_running -= 1;
        ctx.rq_mut(cpu).rt_nr_running -= 1;
    }

    /// Linux v5.10: requeue_task_rt (to the head or the tail of its list).
    fn requeue(&mut self, cpu: usize, e: EntityId, head: bool) {
        if self.tasks[e.idx()].on_rq {
            self.list_del(cpu, e);
            self.list_add(cpu, e, head);
        }
    }

    /// Linux v5.10: update_curr_rt: charge the running RT task of `cpu` up to its task clock
    /// and, with bandwidth control, add the run time to `rt_time` and throttle the queue once
    /// it exceeds the runtime (`sched_rt_runtime_exceeded`), rescheduling the CPU.
    fn update_curr_rt(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        self.take_dl_time(ctx, cpu);
        let Some(curr) = self.rqs[cpu].curr else {
            return;
        };
        let now = ctx.rq_clock_task(cpu);
        let t = &mut self.tasks[curr.idx()];
        if now <= t.exec_start {
            return;
        }
        let delta = now - t.exec_start;
        t.exec_start = now;
        let Some(runtime) = self.runtime_ns else {
            return;
        };
        self.rqs[cpu].rt_time += delta;
        // sched_rt_runtime_exceeded → balance_runtime: borrow before throttling.
        if !self.rqs[cpu].throttled
            && self.rqs[cpu].rt_time > self.rqs[cpu].rt_runtime
            && self.params.runtime_share_on()
        {
            self.balance_runtime(ctx, cpu);
        }
        let rq = &mut self.rqs[cpu];
        if !rq.throttled && rq.rt_time > rq.rt_runtime {
            if runtime > 0 {
                rq.throttled = true;
                ctx.trace(|| vmsched_core::trace::SchedEvent::Throttle {
                    cpu: CpuId(cpu as u32),
                    on: true,
                });
            } else {
                // A zero runtime does not throttle (upstream clears `rt_time` instead).
                rq.rt_time = 0;
            }
        }
        if rq.throttled {
            ctx.resched_curr(cpu);
        }
    }

    /// Linux v3.17: balance_runtime (RT_RUNTIME_SHARE): `cpu`'s queue borrows unused runtime
    /// from the other online CPUs (`runtime_share::do_balance_runtime`).
    fn balance_runtime(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        let period = self.period_ns;
        runtime_share::do_balance_runtime(&mut self.rqs, cpu, period, |c| {
            ctx.cpu(CpuId(c as u32)).online
        });
    }

    /// Linux v5.10: start_rt_bandwidth. The period timer is started at the first RT enqueue
    /// (forwarded to now: it fires at once, then every period).
    fn start_rt_bandwidth(&mut self, ctx: &mut LinuxCtx) {
        if self.runtime_ns.is_none() || self.period_active {
            return;
        }
        self.period_active = true;
        self.period_expires = ctx.now();
        ctx.set_timer(self.timer_base + PERIOD_TIMER, Some(self.period_expires));
    }

    /// Linux v5.10: sched_rt_period_timer → do_sched_rt_period_timer for every online CPU:
    /// `rt_time` loses one runtime per elapsed period; a throttled queue below the runtime
    /// again is unthrottled and its CPU rescheduled. The timer stops when no CPU has RT run
    /// time, RT tasks or a throttled queue.
    /// Linux v5.10: the RT bandwidth's share of `update_curr_dl`: deadline run time counts in
    /// `rt_time` while the period timer runs, or up to the runtime
    /// (`sched_rt_bandwidth_account`), taken here at RT's own accounting points (the deadline
    /// class leaves it in `Rq::dl_rt_time`). The throttle itself is RT's next
    /// `update_curr_rt`, as upstream.
    #[inline]
    fn take_dl_time(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        let d = std::mem::take(&mut ctx.rq_mut(cpu).dl_rt_time);
        let Some(runtime) = self.runtime_ns else {
            return;
        };
        let rq = &mut self.rqs[cpu];
        rq.rt_time += if self.period_active {
            d
        } else {
            d.min(runtime.saturating_sub(rq.rt_time))
        };
    }

    fn sched_rt_period_timer(&mut self, ctx: &mut LinuxCtx) {
        if self.runtime_ns.is_none() {
            self.period_active = false;
            return;
        }
        let now = ctx.now();
        // hrtimer_forward_now: whole periods until the expiry is in the future.
        let overrun = if now >= self.period_expires {
            (now - self.period_expires) / self.period_ns + 1
        } else {
            0
        };
        self.period_expires += overrun * self.period_ns;
        let mut idle = true;
        if overrun > 0 {
            for c in 0..self.rqs.len() {
                self.take_dl_time(ctx, c);
                if !ctx.cpu(CpuId(c as u32)).online {
                    continue;
                }
                if self.rqs[c].throttled && self.params.runtime_share_on() {
                    self.balance_runtime(ctx, c);
                }
                let rq = &mut self.rqs[c];
                let runtime = rq.rt_runtime;
                let mut unthrottle = false;
                if rq.rt_time > 0 {
                    rq.rt_time -= rq.rt_time.min(overrun.saturating_mul(runtime));
                    if rq.throttled && rq.rt_time < runtime {
                        rq.throttled = false;
                        ctx.trace(|| vmsched_core::trace::SchedEvent::Throttle {
                            cpu: CpuId(c as u32),
                            on: false,
                        });
                        unthrottle = true;
                    }
                    if rq.rt_time > 0 || rq.nr_running > 0 {
                        idle = false;
                    }
                } else if rq.nr_running > 0 {
                    idle = false;
                }
                if rq.throttled {
                    idle = false;
                }
                if unthrottle && rq.nr_running > 0 {
                    ctx.update_rq_clock(c);
                    ctx.resched_curr(c);
                }
            }
        }
        if idle {
            self.period_active = false;
        } else {
            ctx.set_timer(self.timer_base + PERIOD_TIMER, Some(self.period_expires));
        }
    }
}

impl SchedClass for Rt {
    /// SCHED_FIFO and SCHED_RR.
    fn accepts(&self, policy: Policy) -> bool {
        matches!(policy, Policy::Fifo | Policy::Rr)
    }

    /// Build time: every task gets an entry; an RT task its priority, policy and a full RR
    /// slice (`__sched_fork`), on its initial CPU (or the first allowed one).
    fn init_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, owned: bool) {
        assert_eq!(e.idx(), self.tasks.len(), "insert: tasks come in id order");
        let p = &ctx.ent(e).params;
        let cpu = p
            .hard_affinity
            .test_or_cycle(p.initial_cpu)
            .filter(|c| c.idx() < self.rqs.len())
            .or_else(|| p.hard_affinity.iter().find(|c| c.idx() < self.rqs.len()))
            .unwrap_or(CpuId(0));
        let prio = if owned {
            Self::prio_of(p.linux.rt_priority)
        } else {
            NORMAL_LEVEL
        };
        self.tasks.push(RtTask {
            owned,
            cpu,
            prio,
            rr: p.linux.policy == Policy::Rr,
            time_slice: self.rr_ticks,
            on_rq: false,
            next: NIL,
            prev: NIL,
            exec_start: 0,
        });
    }

    #[inline]
    fn task_cpu(&self, e: EntityId) -> CpuId {
        self.tasks[e.idx()].cpu
    }

    /// Linux v5.10: select_task_rq_rt for SD_BALANCE_WAKE.
    fn select_task_rq(&mut self, ctx: &mut LinuxCtx, e: EntityId, info: WakeInfo) -> CpuId {
        self.select_task_rq_rt(ctx, e, info.waker_cpu)
    }

    /// Linux v5.10: select_task_rq_rt for SD_BALANCE_FORK (from the parent's CPU).
    fn select_task_rq_fork(&mut self, ctx: &mut LinuxCtx, e: EntityId, parent: CpuId) -> CpuId {
        self.select_task_rq_rt(ctx, e, Some(parent))
    }

    fn migrate_task_rq(&mut self, _ctx: &mut LinuxCtx, e: EntityId, new_cpu: CpuId) {
        self.tasks[e.idx()].cpu = new_cpu;
    }

    /// `sched_fork`: the child starts on its parent's CPU.
    fn task_fork(&mut self, _ctx: &mut LinuxCtx, e: EntityId, parent: CpuId) {
        if parent.idx() < self.rqs.len() {
            self.tasks[e.idx()].cpu = parent;
        }
    }

    /// Linux v5.10: enqueue_task_rt (to the tail).
    fn enqueue_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId, _f: EnqueueFlags) {
        self.enqueue(ctx, cpu.idx(), e, false);
    }

    /// Linux v5.10: dequeue_task_rt (update_curr_rt, then off the list).
    fn dequeue_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId, _f: DequeueFlags) {
        let cpu = cpu.idx();
        if self.rqs[cpu].curr == Some(e) {
            self.update_curr_rt(ctx, cpu);
        }
        self.dequeue(ctx, cpu, e);
    }

    /// Linux v5.10: yield_task_rt: to the tail of its list.
    fn yield_task(&mut self, _ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId) {
        self.requeue(cpu.idx(), e, false);
    }

    /// Linux v5.10: check_preempt_curr_rt: a strictly higher priority preempts; an equal one
    /// only as `check_preempt_equal_prio` says, and not when a reschedule is already due.
    fn wakeup_preempt(
        &mut self,
        ctx: &mut LinuxCtx,
        cpu: CpuId,
        curr: EntityId,
        p: EntityId,
        _f: WakeFlags,
    ) {
        let (pp, pc) = (self.tasks[p.idx()].prio, self.tasks[curr.idx()].prio);
        if pp < pc {
            ctx.resched_curr(cpu.idx());
        } else if pp == pc && !ctx.rq(cpu.idx()).need_resched {
            self.check_preempt_equal_prio(ctx, cpu.idx(), curr, p);
        }
    }

    /// Linux v5.10: task_woken_rt: a wakee that does not run here, while the current RT task
    /// outranks it or is pinned, is pushed away.
    fn task_woken(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId) {
        let c = cpu.idx();
        let Some(curr) = self.rqs[c].curr else {
            return;
        };
        if curr != e
            && !ctx.rq(c).need_resched
            && Self::nr_cpus_allowed(ctx, e) > 1
            && (Self::nr_cpus_allowed(ctx, curr) < 2
                || self.tasks[curr.idx()].prio <= self.tasks[e.idx()].prio)
        {
            self.push_rt_tasks(ctx, c);
        }
    }

    /// Linux v5.10: pick_next_task_rt: the head of the highest non-empty list, unless the
    /// queue is throttled. With the 6.12 fair server, its accounting point, and nothing
    /// while it runs the fair class (`guest/rt/fair_server.rs`).
    fn pick_next_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId) -> Option<EntityId> {
        if self.fair_server.is_some() {
            self.fair_server_update(ctx, cpu.idx());
            if self.fair_server_runs(ctx, cpu.idx()) {
                return None;
            }
        }
        let rq = &self.rqs[cpu.idx()];
        if rq.throttled || rq.nr_running == 0 {
            return None;
        }
        let p = rq.highest_prio() as usize;
        Some(EntityId(rq.head[p]))
    }

    /// Linux v5.10: put_prev_task_rt (update_curr_rt), and `balance_rt` for the pick that
    /// follows: a CPU whose RT task left its queue with a lower priority behind pulls.
    fn put_prev_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, prev: EntityId) {
        let c = cpu.idx();
        self.update_curr_rt(ctx, c);
        self.rqs[c].curr = None;
        let t = &self.tasks[prev.idx()];
        if !t.on_rq && self.level(c) > t.prio && ctx.cpu(cpu).online {
            self.pull_rt_task(ctx, c);
        }
    }

    /// Linux v5.10: set_next_task_rt (a fresh `exec_start`), then the push of the tasks left
    /// queued (`rt_queue_push_tasks`, run after the switch).
    fn set_next_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId) {
        let c = cpu.idx();
        self.tasks[e.idx()].exec_start = ctx.rq_clock_task(c);
        self.rqs[c].curr = Some(e);
        self.push_rt_tasks(ctx, c);
    }

    /// Linux v5.10: task_tick_rt: charge, then the RR slice.
    fn task_tick(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, curr: EntityId) {
        let c = cpu.idx();
        self.update_curr_rt(ctx, c);
        let t = &mut self.tasks[curr.idx()];
        if !t.rr {
            return;
        }
        t.time_slice = t.time_slice.saturating_sub(1);
        if t.time_slice > 0 {
            return;
        }
        t.time_slice = self.rr_ticks;
        let p = t.prio as usize;
        if self.rqs[c].count[p] > 1 {
            self.requeue(c, curr, false);
            ctx.resched_curr(c);
        }
    }

    /// Linux v5.10: `__sched_setscheduler` within the class (a new `rt_priority`, or FIFO ↔ RR):
    /// a queued task is requeued at its new priority (at the head when its priority dropped,
    /// ENQUEUE_HEAD), then `prio_changed_rt`: a running task whose priority dropped below a
    /// queued one reschedules (and its CPU pulls); a queued one is checked against the
    /// current task by the core.
    fn prio_changed(&mut self, ctx: &mut LinuxCtx, e: EntityId) -> bool {
        let p = ctx.ent(e).params.linux;
        let new = Self::prio_of(p.rt_priority);
        let t = self.tasks[e.idx()];
        let cpu = t.cpu.idx();
        let running = self.rqs[cpu].curr == Some(e);
        if running {
            self.update_curr_rt(ctx, cpu);
        }
        self.tasks[e.idx()].rr = p.policy == Policy::Rr;
        if t.on_rq {
            self.list_del(cpu, e);
            self.tasks[e.idx()].prio = new;
            self.list_add(cpu, e, t.prio < new);
        } else {
            self.tasks[e.idx()].prio = new;
        }
        if running {
            if t.prio < new {
                self.pull_rt_task(ctx, cpu);
            }
            if new > self.level(cpu) {
                ctx.resched_curr(cpu);
            }
            false
        } else {
            t.on_rq
        }
    }

    /// The next queued, not running task of `cpu` in pick order.
    fn next_queued(&self, cpu: CpuId) -> Option<EntityId> {
        let rq = &self.rqs[cpu.idx()];
        for p in 0..MAX_RT_PRIO {
            let mut id = rq.head[p];
            while id != NIL {
                if rq.curr != Some(EntityId(id)) {
                    return Some(EntityId(id));
                }
                id = self.tasks[id as usize].next;
            }
        }
        None
    }

    /// Linux v5.10: move_queued_task for an RT task.
    fn move_queued_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, src: CpuId, dst: CpuId) {
        self.move_task(ctx, e, src.idx(), dst.idx());
    }

    /// The fair server's accounting point at every tick (fair's `update_curr` from
    /// `task_tick_fair`).
    fn trigger_load_balance(&mut self, ctx: &mut LinuxCtx, cpu: CpuId) {
        if self.fair_server.is_some() {
            self.fair_server_update(ctx, cpu.idx());
        }
    }

    /// The period timer, then one fair-server timer per CPU when the fair server is on.
    fn nr_timers(&self) -> u32 {
        1 + self.fair_server.as_ref().map_or(0, |s| s.len() as u32)
    }

    fn set_timer_base(&mut self, base: u32) {
        self.timer_base = base;
    }

    fn on_timer(&mut self, ctx: &mut LinuxCtx, k: u32) {
        if k == PERIOD_TIMER {
            self.sched_rt_period_timer(ctx);
        } else {
            self.fair_server_timer(ctx, (k - PERIOD_TIMER - 1) as usize);
        }
    }
}

impl Rt {
    /// Whether `e` is a task of this class.
    pub fn owns(&self, e: EntityId) -> bool {
        self.tasks.get(e.idx()).is_some_and(|t| t.owned)
    }
}

#[cfg(test)]
mod tests;
