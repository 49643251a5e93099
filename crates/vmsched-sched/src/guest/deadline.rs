//! The Linux deadline class, SCHED_DEADLINE, as of **Linux v5.10** (`kernel/sched/deadline.c`,
//! `kernel/sched/cpudeadline.c`, `__checkparam_dl` and `sched_dl_overflow` in `core.c` and
//! `deadline.c`), in the deadline slot of the Linux core (`LinuxCore<Fair, Rt, Dl>`), above the
//! RT class. Behavioural reference: `shared/spec/linux-schedulers.md` §3.1 and §3.4, checked
//! against the upstream functions named on each item; docs/deadline.md has the user's view.
//!
//! # Parameters and admission (§3.4.1)
//!
//! A task has `sched_runtime_ns` Q, `sched_deadline_ns` D and `sched_period_ns` P (0: D), as
//! `struct sched_attr`. The scenario checks them as `__checkparam_dl` does (D > 0,
//! Q ≥ 1 << DL_SCALE = 1024 ns, Q ≤ D ≤ P, P within `sched_deadline_period_min_us` ..
//! `sched_deadline_period_max_us`) and runs `sched_dl_overflow` over the domain's deadline
//! tasks in declaration order: the sum of their bandwidths `to_ratio(P, Q)` (Q/P in 1/2^20)
//! must not exceed `to_ratio(sched_rt_period_us, sched_rt_runtime_us)` (95 %) × the guest's
//! CPUs (one root domain); the first task that overflows is named ([`admit`]).
//!
//! # Scheduling (§3.4.2–§3.4.4)
//!
//! * EDF per CPU: the pick is the queued task of the earliest absolute deadline (equal
//!   deadlines in queueing order, as the rbtree inserts equal keys to the right).
//! * CBS: the running task's remaining runtime is charged with task-clock time
//!   (`update_curr_dl`, GRUB off: no reclaiming, no frequency scaling) at the tick, at every
//!   context switch and at a block. At ≤ 0 (`dl_runtime_exceeded`) the task is throttled: off
//!   the queue until the replenishment timer at the start of its next period,
//!   deadline − D + P (`start_dl_timer`), which adds whole periods (deadline += P,
//!   runtime += Q) until the runtime is positive again (`replenish_dl_entity`; a deadline left
//!   in the past gets a new period instead). Without HRTICK (upstream default: the
//!   `HRTICK_DL`/`HRTICK` features are off) the runtime is enforced at the tick, so a task
//!   overruns by up to a tick and pays it back from the next periods; with
//!   `[domain.sched.deadline] hrtick = true` a per-CPU timer stops it when its runtime is used.
//! * Wake-up (`update_dl_entity`): if the deadline has passed, or the remaining runtime over
//!   the time left to the deadline exceeds Q/D (`dl_entity_overflow`, computed in µs units as
//!   upstream), a new period: deadline = now + D, runtime = Q. A constrained task (D < P) whose
//!   deadline has not passed keeps its deadline with runtime = (Q/D) × (deadline − now) instead
//!   (the revised wake-up rule, `update_dl_revised_wakeup`). A throttled task that wakes stays
//!   throttled until its timer.
//! * `sched_yield`: the task gives up the rest of its runtime and sleeps until its next period.
//! * The RT bandwidth is shared: deadline run time also counts in RT throttling's `rt_time`
//!   (5.10's `update_curr_dl`), handed to the RT class through `Rq::dl_rt_time`.
//! * Above RT and fair: the core preempts a lower class at once; a wakee of an earlier deadline
//!   preempts a deadline task (`check_preempt_curr_dl`).
//!
//! # CPUs: global EDF by push and pull (simplified)
//!
//! As upstream, each CPU has its own EDF queue and tasks move so that the earliest deadlines
//! run: `cpudl` is read directly (a CPU's key is the earliest deadline queued there, or "free"
//! without deadline tasks). `find_later_rq`: a free CPU of the task's affinity (its own, else
//! the waker's, else the lowest-numbered), else the CPU whose key is the latest, if later than
//! the task's deadline. A waking task whose CPU runs a deadline task it cannot preempt goes
//! there (`select_task_rq_dl`); after a pick, and after a wake-up that does not preempt, a CPU
//! with more than one deadline task pushes its earliest queued one (`push_dl_tasks`); a CPU
//! whose deadline task blocked or was throttled pulls the earliest queued task of an
//! overloaded CPU that is earlier than its own and would not preempt there (`pull_dl_task`).
//!
//! # Simplifications
//!
//! * Admission is checked once, over every deadline task of the scenario (a task that exits
//!   keeps its bandwidth); tasks never change to or from SCHED_DEADLINE at run time; no
//!   `sched_setattr` at run time; a deadline program cannot fork (Linux: EAGAIN).
//! * No GRUB (SCHED_FLAG_RECLAIM), no inactive timer (the 0-lag bandwidth bookkeeping only
//!   feeds GRUB and admission of parameter changes), no `dl_overrun` signal, no priority
//!   inheritance (no `pi_se` boosting), no frequency/capacity scaling.
//! * Equal-deadline wake-ups do not preempt (`check_preempt_equal_dl` is left out); push and
//!   pull move one task at a time and read `cpudl` exactly, at no cost.
//! * The fair server (`guest/rt/fair_server.rs`) stays in the RT slot: it is not an entity of
//!   this class and does not compete in EDF with deadline tasks (a deadline task always runs
//!   before it). RT's `cpupri` and placement do not see deadline tasks.
//! * The replenishment timer is one per CPU, armed at the earliest replenishment of the
//!   CPU's throttled tasks (upstream: one hrtimer per task, same expiry).

use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{Policy, SchedTimes, WakeInfo};
use vmsched_core::time::NS_PER_US;

use crate::guest::linux_core::{DequeueFlags, EnqueueFlags, LinuxCtx, SchedClass, WakeFlags};
use crate::guest::rt::RtParams;

/// `DL_SCALE`: deadline arithmetic's µs-ish unit (2^10 ns), also the least runtime.
pub const DL_SCALE: u32 = 10;
/// `BW_SHIFT`: bandwidths are fractions of 2^20.
pub const BW_SHIFT: u32 = 20;

// ------------------------------------------------------------------------------------------------
// Parameters and admission
// ------------------------------------------------------------------------------------------------

/// The deadline class's sysctls (`/proc/sys/kernel/sched_deadline_*`) and the HRTICK feature,
/// with the Linux v5.10 defaults (`[domain.sched.deadline]`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DlParams {
    /// `sched_deadline_period_max_us`: the longest period (2^22 µs, about 4 s).
    pub sched_deadline_period_max_us: u64,
    /// `sched_deadline_period_min_us`: the shortest period (100 µs).
    pub sched_deadline_period_min_us: u64,
    /// The `HRTICK_DL` scheduler feature (`HRTICK` in 5.10), off upstream: a high-resolution
    /// timer ends a deadline task's runtime exactly, instead of the next tick.
    pub hrtick: bool,
}

impl Default for DlParams {
    fn default() -> Self {
        DlParams {
            sched_deadline_period_max_us: 1 << 22,
            sched_deadline_period_min_us: 100,
            hrtick: false,
        }
    }
}

impl DlParams {
    /// Whether these are the defaults (the table is then left out when written back).
    pub fn is_default(&self) -> bool {
        *self == DlParams::default()
    }

    /// The ranges of `sched_dl_sysctl` handlers (min ≤ max, max ≤ 2^31 − 1); the error names
    /// the field.
    pub fn validate(&self) -> Result<(), String> {
        let (lo, hi) = (
            self.sched_deadline_period_min_us,
            self.sched_deadline_period_max_us,
        );
        if hi == 0 || hi > i32::MAX as u64 {
            return Err(format!(
                "sched_deadline_period_max_us: {hi} is outside 1..={}",
                i32::MAX
            ));
        }
        if lo > hi {
            return Err(format!(
                "sched_deadline_period_min_us: {lo} is above sched_deadline_period_max_us ({hi})"
            ));
        }
        Ok(())
    }
}

/// `to_ratio(period, runtime)`: runtime / period in 1/2^20.
#[inline]
pub fn to_ratio(period: u64, runtime: u64) -> u64 {
    if period == 0 {
        return 0;
    }
    ((runtime as u128) << BW_SHIFT).div_euclid(period as u128) as u64
}

/// A task's effective period (`sched_period_ns`, or the deadline when 0).
#[inline]
pub fn period_of(t: SchedTimes) -> u64 {
    if t.sched_period_ns == 0 {
        t.sched_deadline_ns
    } else {
        t.sched_period_ns
    }
}

/// Linux v5.10: the period bounds of `__checkparam_dl` and the admission test of
/// `sched_dl_overflow` for the deadline tasks of a guest of `vcpus` CPUs, in order (their
/// other parameters are checked already). Err((index of the task, field, message)).
pub fn admit(
    rt: &RtParams,
    dl: &DlParams,
    vcpus: u32,
    tasks: &[(String, SchedTimes)],
) -> Result<(), (usize, String, String)> {
    let (min, max) = (
        dl.sched_deadline_period_min_us * NS_PER_US,
        dl.sched_deadline_period_max_us * NS_PER_US,
    );
    // The root domain's limit (`dl_b->bw`): −1 (no RT runtime limit) disables the test.
    let limit = u64::try_from(rt.sched_rt_runtime_us)
        .ok()
        .map(|r| to_ratio(rt.sched_rt_period_us * NS_PER_US, r * NS_PER_US) * vcpus as u64);
    let mut total: u64 = 0;
    for (i, (name, t)) in tasks.iter().enumerate() {
        let p = period_of(*t);
        if !(min..=max).contains(&p) {
            let f = if t.sched_period_ns == 0 {
                "sched_deadline_ns"
            } else {
                "sched_period_ns"
            };
            return Err((
                i,
                f.into(),
                format!(
                    "task '{name}': the period {p} ns is outside the guest's \
                     sched_deadline_period_min_us..=sched_deadline_period_max_us ({min}..={max} ns)"
                ),
            ));
        }
        total += to_ratio(p, t.sched_runtime_ns);
        if let Some(l) = limit {
            if total > l {
                return Err((
                    i,
                    "sched_runtime_ns".into(),
                    format!(
                        "task '{name}' overflows the guest's SCHED_DEADLINE bandwidth \
                         (sched_dl_overflow: the deadline tasks up to it need {:.4} CPUs, the \
                         limit is sched_rt_runtime_us/sched_rt_period_us × {vcpus} CPUs = {:.4})",
                        total as f64 / (1u64 << BW_SHIFT) as f64,
                        l as f64 / (1u64 << BW_SHIFT) as f64
                    ),
                ));
            }
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// State
// ------------------------------------------------------------------------------------------------

/// Per task (`struct sched_dl_entity` and the task fields the class reads).
#[derive(Clone, Copy, Debug, Default)]
struct DlTask {
    owned: bool,
    /// `task_cpu(p)`.
    cpu: CpuId,
    /// `dl_runtime`, `dl_deadline`, `dl_period` (ns) and `dl_density` (Q/D in 1/2^20).
    dl_runtime: u64,
    dl_deadline: u64,
    dl_period: u64,
    dl_density: u64,
    /// Remaining runtime (ns; below 0 after an overrun).
    runtime: i64,
    /// Absolute deadline (wall clock, `rq_clock`).
    deadline: u64,
    /// `dl_throttled`: waits for its replenishment.
    throttled: bool,
    /// `dl_yielded`.
    yielded: bool,
    /// The task is runnable (woken and not blocked; throttled or not).
    on_rq: bool,
    /// On its CPU's EDF queue (runnable and not throttled; running included).
    queued: bool,
    /// Queueing order among equal deadlines.
    seq: u64,
    /// `se.exec_start` (task clock).
    exec_start: u64,
    /// When a throttled task is replenished (`dl_next_period`).
    replenish_at: u64,
    /// Never activated yet: its first enqueue starts a period (`setup_new_dl_entity`).
    new: bool,
}

/// Per CPU (`struct dl_rq`).
#[derive(Clone, Debug, Default)]
struct DlRq {
    /// The queued tasks (running included), unordered; capacity reserved at build.
    queue: Vec<EntityId>,
    /// The deadline task running here.
    curr: Option<EntityId>,
    /// The replenishment timer's expiry, if armed.
    timer: Option<u64>,
}

/// The deadline class (SCHED_DEADLINE) of a Linux kernel.
pub struct Dl {
    pub params: DlParams,
    tasks: Vec<DlTask>,
    rqs: Vec<DlRq>,
    /// The deadline tasks, in id order (for the timers' scans).
    owned: Vec<EntityId>,
    timer_base: u32,
    seq: u64,
}

/// Timer `2c` of CPU `c`: replenishment; `2c + 1`: HRTICK.
const TIMERS_PER_CPU: u32 = 2;

impl Dl {
    /// The class for a kernel of `ncpus` CPUs.
    pub fn new(params: DlParams, ncpus: usize) -> Dl {
        Dl {
            params,
            tasks: Vec::new(),
            rqs: vec![DlRq::default(); ncpus],
            owned: Vec::new(),
            timer_base: 0,
            seq: 0,
        }
    }

    /// Whether `e` is a deadline task.
    pub fn owns(&self, e: EntityId) -> bool {
        self.tasks.get(e.idx()).is_some_and(|t| t.owned)
    }

    /// `e`'s remaining runtime (ns) as of its last charge.
    pub fn runtime(&self, e: EntityId) -> i64 {
        self.tasks[e.idx()].runtime
    }

    /// `e`'s absolute deadline (ns).
    pub fn deadline(&self, e: EntityId) -> u64 {
        self.tasks[e.idx()].deadline
    }

    /// Whether `e` is throttled (waits for its replenishment).
    pub fn throttled(&self, e: EntityId) -> bool {
        self.tasks[e.idx()].throttled
    }

    fn key(&self, e: EntityId) -> (u64, u64) {
        let t = &self.tasks[e.idx()];
        (t.deadline, t.seq)
    }

    /// The earliest queued task of `cpu` (`rq->dl.earliest_dl`), running included.
    fn earliest(&self, cpu: usize) -> Option<EntityId> {
        self.rqs[cpu]
            .queue
            .iter()
            .copied()
            .min_by_key(|&e| self.key(e))
    }

    /// The earliest queued, not running task of `cpu` allowed on `dst` (if given) and on more
    /// than one CPU (`pick_earliest_pushable_dl_task`).
    fn pushable(&self, ctx: &LinuxCtx, cpu: usize, dst: Option<usize>) -> Option<EntityId> {
        let rq = &self.rqs[cpu];
        rq.queue
            .iter()
            .copied()
            .filter(|&e| {
                let aff = &ctx.ent(e).params.hard_affinity;
                rq.curr != Some(e)
                    && aff.count() > 1
                    && dst.is_none_or(|d| aff.contains(CpuId(d as u32)))
            })
            .min_by_key(|&e| self.key(e))
    }

    fn queue_add(&mut self, ctx: &mut LinuxCtx, cpu: usize, e: EntityId) {
        self.seq += 1;
        let t = &mut self.tasks[e.idx()];
        t.seq = self.seq;
        t.queued = true;
        t.cpu = CpuId(cpu as u32);
        self.rqs[cpu].queue.push(e);
        ctx.rq_mut(cpu).rt_nr_running += 1;
    }

    fn queue_del(&mut self, ctx: &mut LinuxCtx, cpu: usize, e: EntityId) {
        let t = &mut self.tasks[e.idx()];
        if !t.queued {
            return;
        }
        t.queued = false;
        let q = &mut self.rqs[cpu].queue;
        let i = q
            .iter()
            .position(|&x| x == e)
            .expect("invariant: a queued deadline task is on its CPU's queue");
        q.swap_remove(i);
        ctx.rq_mut(cpu).rt_nr_running -= 1;
    }

    fn timer_key(&self, cpu: usize, hrtick: bool) -> u32 {
        self.timer_base + TIMERS_PER_CPU * cpu as u32 + hrtick as u32
    }

    /// Arms `cpu`'s replenishment timer at the earliest replenishment of its throttled tasks.
    fn arm_replenish(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        let at = self
            .owned
            .iter()
            .map(|e| &self.tasks[e.idx()])
            .filter(|t| t.throttled && t.cpu.idx() == cpu)
            .map(|t| t.replenish_at)
            .min();
        if at != self.rqs[cpu].timer {
            self.rqs[cpu].timer = at;
            let key = self.timer_key(cpu, false);
            ctx.set_timer(key, at);
        }
    }

    /// Linux v5.10: replenish_dl_entity.
    fn replenish(t: &mut DlTask, now: u64) {
        if t.yielded && t.runtime > 0 {
            t.runtime = 0;
        }
        while t.runtime <= 0 {
            t.deadline += t.dl_period;
            t.runtime += t.dl_runtime as i64;
        }
        if t.deadline < now {
            t.deadline = now + t.dl_deadline;
            t.runtime = t.dl_runtime as i64;
        }
        t.yielded = false;
        t.throttled = false;
    }

    /// Linux v5.10: dl_entity_overflow: runtime / (deadline − t) > dl_runtime / dl_deadline,
    /// in 2^10 ns units.
    fn overflow(t: &DlTask, now: u64) -> bool {
        let left =
            (t.dl_deadline >> DL_SCALE) as u128 * (t.runtime.max(0) as u64 >> DL_SCALE) as u128;
        let right = (t.deadline.saturating_sub(now) >> DL_SCALE) as u128
            * (t.dl_runtime >> DL_SCALE) as u128;
        right < left
    }

    /// Linux v5.10: update_dl_entity (the CBS wake-up rule, with the revised rule for
    /// constrained tasks).
    fn update_dl_entity(t: &mut DlTask, now: u64) {
        if t.deadline < now || Self::overflow(t, now) {
            if t.dl_deadline != t.dl_period && t.deadline >= now {
                // update_dl_revised_wakeup: runtime = density × laxity.
                let laxity = t.deadline - now;
                t.runtime = ((t.dl_density as u128 * laxity as u128) >> BW_SHIFT) as i64;
            } else {
                t.deadline = now + t.dl_deadline;
                t.runtime = t.dl_runtime as i64;
            }
        }
    }

    /// Linux v5.10: update_curr_dl: charge `cpu`'s current deadline task; throttle it at the
    /// end of its runtime (or when it yielded).
    fn update_curr_dl(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        let Some(e) = self.rqs[cpu].curr else {
            return;
        };
        let clock_task = ctx.rq_clock_task(cpu);
        let now = ctx.rq(cpu).clock;
        let t = &mut self.tasks[e.idx()];
        let delta = clock_task.saturating_sub(t.exec_start);
        t.exec_start = clock_task;
        t.runtime -= delta as i64;
        // The RT bandwidth is shared: the RT class adds this to its `rt_time`.
        ctx.rq_mut(cpu).dl_rt_time += delta;
        if t.throttled || (t.runtime > 0 && !t.yielded) {
            return;
        }
        t.throttled = true;
        // start_dl_timer: at the next period's start, unless that has passed already.
        let at = (t.deadline + t.dl_period).saturating_sub(t.dl_deadline);
        let queued = t.queued;
        if queued {
            self.queue_del(ctx, cpu, e);
        }
        let t = &mut self.tasks[e.idx()];
        if at <= now {
            Self::replenish(t, now);
            if t.on_rq {
                self.queue_add(ctx, cpu, e);
            }
            if self.earliest(cpu) != Some(e) {
                ctx.resched_curr(cpu);
            }
        } else {
            t.replenish_at = at;
            self.arm_replenish(ctx, cpu);
            ctx.resched_curr(cpu);
        }
    }

    /// Arms the HRTICK of `cpu` for its current task's remaining runtime (`start_hrtick_dl`).
    fn start_hrtick(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        if !self.params.hrtick {
            return;
        }
        let key = self.timer_key(cpu, true);
        let at = self.rqs[cpu]
            .curr
            .map(|e| &self.tasks[e.idx()])
            .filter(|t| !t.throttled)
            .map(|t| ctx.now() + t.runtime.max(1) as u64);
        ctx.set_timer(key, at);
    }

    /// Linux v5.10: the `cpudl` level of `cpu`: None when it has no deadline task (free),
    /// else its earliest deadline.
    fn level(&self, cpu: usize) -> Option<u64> {
        self.earliest(cpu).map(|e| self.tasks[e.idx()].deadline)
    }

    fn allowed_online(ctx: &LinuxCtx, e: EntityId, c: usize) -> bool {
        c < ctx.nr_cpus()
            && ctx.cpu(CpuId(c as u32)).online
            && ctx.ent(e).params.hard_affinity.contains(CpuId(c as u32))
    }

    /// Linux v5.10: find_later_rq (with `cpudl_find`): a free CPU (the task's own, the
    /// waker's, else the first), else the CPU whose earliest deadline is the latest, if later
    /// than the task's.
    fn find_later_rq(&self, ctx: &LinuxCtx, e: EntityId, this: Option<usize>) -> Option<usize> {
        let n = self.rqs.len();
        let own = self.tasks[e.idx()].cpu.idx();
        let free = |c: usize| Self::allowed_online(ctx, e, c) && self.rqs[c].queue.is_empty();
        if free(own) {
            return Some(own);
        }
        if let Some(w) = this.filter(|&w| w < n && free(w)) {
            return Some(w);
        }
        if let Some(c) = (0..n).find(|&c| free(c)) {
            return Some(c);
        }
        let dl = self.tasks[e.idx()].deadline;
        let mut best: Option<(u64, usize)> = None;
        for c in 0..n {
            if !Self::allowed_online(ctx, e, c) {
                continue;
            }
            if let Some(l) = self.level(c) {
                if best.is_none_or(|(b, _)| l > b) {
                    best = Some((l, c));
                }
            }
        }
        best.filter(|&(l, _)| dl < l).map(|(_, c)| c)
    }

    fn nr_cpus_allowed(ctx: &LinuxCtx, e: EntityId) -> usize {
        ctx.ent(e).params.hard_affinity.count()
    }

    /// Moves queued (not running) `e` from `src` to `dst`.
    fn move_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, src: usize, dst: usize) {
        self.queue_del(ctx, src, e);
        ctx.update_rq_clock(dst);
        self.queue_add(ctx, dst, e);
    }

    /// Linux v5.10: push_dl_task. Returns whether a task moved.
    fn push_dl_task(&mut self, ctx: &mut LinuxCtx, cpu: usize) -> bool {
        if self.rqs[cpu].queue.len() < 2 {
            return false;
        }
        let Some(next) = self.pushable(ctx, cpu, None) else {
            return false;
        };
        if let Some(curr) = self.rqs[cpu].curr {
            if self.tasks[next.idx()].deadline < self.tasks[curr.idx()].deadline {
                ctx.resched_curr(cpu);
                return false;
            }
        }
        let Some(dst) = self.find_later_rq(ctx, next, Some(cpu)) else {
            return false;
        };
        let later = self
            .level(dst)
            .is_none_or(|l| self.tasks[next.idx()].deadline < l);
        if dst == cpu || !later {
            return false;
        }
        self.move_task(ctx, next, cpu, dst);
        ctx.resched_curr(dst);
        true
    }

    fn push_dl_tasks(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        while self.push_dl_task(ctx, cpu) {}
    }

    /// Linux v5.10: pull_dl_task: from the CPUs with more than one deadline task (in index
    /// order), the earliest queued task allowed here that is earlier than what this CPU has
    /// and would not preempt its own CPU's current task.
    fn pull_dl_task(&mut self, ctx: &mut LinuxCtx, this: usize) {
        let mut bar = self.level(this);
        let mut best: Option<(EntityId, usize)> = None;
        for src in 0..self.rqs.len() {
            if src == this || self.rqs[src].queue.len() < 2 || !ctx.cpu(CpuId(src as u32)).online {
                continue;
            }
            let Some(p) = self.pushable(ctx, src, Some(this)) else {
                continue;
            };
            let dl = self.tasks[p.idx()].deadline;
            let preempts_src = self.rqs[src]
                .curr
                .is_some_and(|c| dl < self.tasks[c.idx()].deadline);
            if bar.is_none_or(|b| dl < b) && !preempts_src {
                bar = Some(dl);
                best = Some((p, src));
            }
        }
        if let Some((p, src)) = best {
            ctx.update_rq_clock(src);
            self.move_task(ctx, p, src, this);
        }
    }

    /// Whether `e`, queued on `cpu`, should preempt what runs there (the core's
    /// `check_preempt_curr` for a task the class queued on its own, from a timer).
    fn check_preempt(&mut self, ctx: &mut LinuxCtx, cpu: usize, e: EntityId) {
        match (ctx.cpu(CpuId(cpu as u32)).curr, self.rqs[cpu].curr) {
            (Some(_), Some(c)) => {
                if self.tasks[e.idx()].deadline < self.tasks[c.idx()].deadline {
                    ctx.resched_curr(cpu);
                }
            }
            // Idle, or a task of a lower class.
            _ => ctx.resched_curr(cpu),
        }
    }

    /// Linux v5.10: dl_task_timer of every task of `cpu` whose replenishment is due.
    fn replenish_timer(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        ctx.update_rq_clock(cpu);
        self.rqs[cpu].timer = None;
        let now = ctx.rq(cpu).clock;
        for i in 0..self.owned.len() {
            let e = self.owned[i];
            let t = &self.tasks[e.idx()];
            if !t.throttled || t.cpu.idx() != cpu || t.replenish_at > now {
                continue;
            }
            if self.rqs[cpu].curr == Some(e) {
                // Still current (its CPU has not rescheduled yet): charge it first.
                self.update_curr_dl(ctx, cpu);
            }
            let t = &mut self.tasks[e.idx()];
            Self::replenish(t, now);
            if !t.on_rq {
                continue;
            }
            // A CPU gone offline hands the task to an allowed online one.
            let dst = if ctx.cpu(CpuId(cpu as u32)).online {
                cpu
            } else {
                let Some(d) = (0..self.rqs.len()).find(|&c| Self::allowed_online(ctx, e, c)) else {
                    continue;
                };
                ctx.update_rq_clock(d);
                d
            };
            self.queue_add(ctx, dst, e);
            self.check_preempt(ctx, dst, e);
            self.push_dl_tasks(ctx, dst);
        }
        self.arm_replenish(ctx, cpu);
    }

    /// Linux v5.10: select_task_rq_dl.
    fn select_task_rq_dl(&mut self, ctx: &mut LinuxCtx, e: EntityId, this: Option<CpuId>) -> CpuId {
        let mut cpu = self.tasks[e.idx()].cpu.idx();
        if let Some(curr) = self.rqs.get(cpu).and_then(|r| r.curr) {
            let dl = self.tasks[e.idx()].deadline;
            let cannot_preempt =
                Self::nr_cpus_allowed(ctx, curr) < 2 || dl >= self.tasks[curr.idx()].deadline;
            if cannot_preempt && Self::nr_cpus_allowed(ctx, e) > 1 {
                if let Some(t) = self.find_later_rq(ctx, e, this.map(|c| c.idx())) {
                    if self.level(t).is_none_or(|l| dl < l) {
                        cpu = t;
                    }
                }
            }
        }
        if Self::allowed_online(ctx, e, cpu) {
            return CpuId(cpu as u32);
        }
        (0..self.rqs.len())
            .find(|&c| Self::allowed_online(ctx, e, c))
            .map(|c| CpuId(c as u32))
            .unwrap_or_else(|| {
                panic!(
                    "invariant: task {} has an online CPU in its affinity",
                    ctx.ent(e).params.name
                )
            })
    }
}

impl SchedClass for Dl {
    /// SCHED_DEADLINE.
    fn accepts(&self, policy: Policy) -> bool {
        policy == Policy::Deadline
    }

    /// Build time: every task gets an entry; a deadline task its parameters (checked by the
    /// scenario), on its initial CPU; its first wake-up starts its first period.
    fn init_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, owned: bool) {
        assert_eq!(e.idx(), self.tasks.len(), "insert: tasks come in id order");
        let p = &ctx.ent(e).params;
        let cpu = p
            .hard_affinity
            .test_or_cycle(p.initial_cpu)
            .filter(|c| c.idx() < self.rqs.len())
            .or_else(|| p.hard_affinity.iter().find(|c| c.idx() < self.rqs.len()))
            .unwrap_or(CpuId(0));
        let mut t = DlTask {
            owned,
            cpu,
            ..DlTask::default()
        };
        if owned {
            let times = p.linux.times;
            t.dl_runtime = times.sched_runtime_ns;
            t.dl_deadline = times.sched_deadline_ns;
            t.dl_period = period_of(times);
            assert!(
                t.dl_runtime > 0 && t.dl_runtime <= t.dl_deadline && t.dl_deadline <= t.dl_period,
                "invariant: deadline task {} has 0 < runtime ≤ deadline ≤ period (validated)",
                p.name
            );
            t.dl_density = to_ratio(t.dl_deadline, t.dl_runtime);
            t.new = true;
            self.owned.push(e);
            // Room for every deadline task on every queue: no allocation while running.
            let n = self.owned.len();
            for rq in &mut self.rqs {
                rq.queue.reserve(n);
            }
        }
        self.tasks.push(t);
    }

    #[inline]
    fn task_cpu(&self, e: EntityId) -> CpuId {
        self.tasks[e.idx()].cpu
    }

    fn select_task_rq(&mut self, ctx: &mut LinuxCtx, e: EntityId, info: WakeInfo) -> CpuId {
        self.select_task_rq_dl(ctx, e, info.waker_cpu)
    }

    fn select_task_rq_fork(&mut self, ctx: &mut LinuxCtx, e: EntityId, parent: CpuId) -> CpuId {
        self.select_task_rq_dl(ctx, e, Some(parent))
    }

    fn migrate_task_rq(&mut self, _ctx: &mut LinuxCtx, e: EntityId, new_cpu: CpuId) {
        self.tasks[e.idx()].cpu = new_cpu;
    }

    fn task_fork(&mut self, _ctx: &mut LinuxCtx, e: EntityId, parent: CpuId) {
        if parent.idx() < self.rqs.len() {
            self.tasks[e.idx()].cpu = parent;
        }
    }

    /// Linux v5.10: enqueue_task_dl for a wake-up: a throttled task waits for its timer;
    /// else `update_dl_entity`, then onto the queue.
    fn enqueue_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId, _f: EnqueueFlags) {
        let c = cpu.idx();
        let now = ctx.rq(c).clock;
        let t = &mut self.tasks[e.idx()];
        t.on_rq = true;
        t.cpu = cpu;
        if t.throttled {
            return;
        }
        if t.new {
            // setup_new_dl_entity → replenish_dl_new_period.
            t.new = false;
            t.deadline = now + t.dl_deadline;
            t.runtime = t.dl_runtime as i64;
        } else {
            Self::update_dl_entity(t, now);
        }
        self.queue_add(ctx, c, e);
    }

    /// Linux v5.10: dequeue_task_dl (update_curr_dl, then off the queue).
    fn dequeue_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId, _f: DequeueFlags) {
        let c = cpu.idx();
        if self.rqs[c].curr == Some(e) {
            self.update_curr_dl(ctx, c);
        }
        self.queue_del(ctx, c, e);
        self.tasks[e.idx()].on_rq = false;
    }

    /// Linux v5.10: yield_task_dl: the rest of the runtime is given up.
    fn yield_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId) {
        self.tasks[e.idx()].yielded = true;
        if self.rqs[cpu.idx()].curr == Some(e) {
            self.update_curr_dl(ctx, cpu.idx());
        }
    }

    /// Linux v5.10: check_preempt_curr_dl: an earlier deadline preempts.
    fn wakeup_preempt(
        &mut self,
        ctx: &mut LinuxCtx,
        cpu: CpuId,
        curr: EntityId,
        p: EntityId,
        _f: WakeFlags,
    ) {
        if self.tasks[p.idx()].deadline < self.tasks[curr.idx()].deadline {
            ctx.resched_curr(cpu.idx());
        }
    }

    /// Linux v5.10: task_woken_dl: a wakee that does not preempt the current deadline task
    /// (or finds it pinned) is pushed away.
    fn task_woken(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId) {
        let c = cpu.idx();
        let Some(curr) = self.rqs[c].curr else {
            return;
        };
        if curr != e
            && self.tasks[e.idx()].queued
            && !ctx.rq(c).need_resched
            && Self::nr_cpus_allowed(ctx, e) > 1
            && (Self::nr_cpus_allowed(ctx, curr) < 2
                || self.tasks[e.idx()].deadline >= self.tasks[curr.idx()].deadline)
        {
            self.push_dl_tasks(ctx, c);
        }
    }

    /// Linux v5.10: pick_next_task_dl: the earliest deadline.
    #[inline]
    fn pick_next_task(&mut self, _ctx: &mut LinuxCtx, cpu: CpuId) -> Option<EntityId> {
        if self.owned.is_empty() {
            return None;
        }
        self.earliest(cpu.idx())
    }

    /// Linux v5.10: put_prev_task_dl (update_curr_dl), and `balance_dl`: a CPU whose deadline
    /// task left the queue pulls.
    fn put_prev_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, prev: EntityId) {
        let c = cpu.idx();
        self.update_curr_dl(ctx, c);
        self.rqs[c].curr = None;
        if self.params.hrtick {
            let key = self.timer_key(c, true);
            ctx.set_timer(key, None);
        }
        if !self.tasks[prev.idx()].queued && ctx.cpu(cpu).online {
            self.pull_dl_task(ctx, c);
        }
    }

    /// Linux v5.10: set_next_task_dl (a fresh `exec_start`, the HRTICK), then the push of the
    /// tasks left queued (`deadline_queue_push_tasks`).
    fn set_next_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId) {
        let c = cpu.idx();
        self.tasks[e.idx()].exec_start = ctx.rq_clock_task(c);
        self.rqs[c].curr = Some(e);
        self.start_hrtick(ctx, c);
        self.push_dl_tasks(ctx, c);
    }

    /// Linux v5.10: task_tick_dl (update_curr_dl).
    fn task_tick(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, _curr: EntityId) {
        self.update_curr_dl(ctx, cpu.idx());
        self.start_hrtick(ctx, cpu.idx());
    }

    fn task_dead(&mut self, ctx: &mut LinuxCtx, e: EntityId) {
        let t = self.tasks[e.idx()];
        if t.queued {
            self.queue_del(ctx, t.cpu.idx(), e);
        }
        let t = &mut self.tasks[e.idx()];
        t.on_rq = false;
        if t.throttled {
            t.throttled = false;
            let cpu = t.cpu.idx();
            self.arm_replenish(ctx, cpu);
        }
    }

    fn probe(&self, e: EntityId) -> Option<i64> {
        self.tasks
            .get(e.idx())
            .filter(|t| t.owned)
            .map(|t| t.deadline as i64)
    }

    fn next_queued(&self, cpu: CpuId) -> Option<EntityId> {
        let rq = &self.rqs[cpu.idx()];
        rq.queue
            .iter()
            .copied()
            .filter(|&e| rq.curr != Some(e))
            .min_by_key(|&e| self.key(e))
    }

    fn move_queued_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, src: CpuId, dst: CpuId) {
        self.move_task(ctx, e, src.idx(), dst.idx());
    }

    fn nr_timers(&self) -> u32 {
        TIMERS_PER_CPU * self.rqs.len() as u32
    }

    fn set_timer_base(&mut self, base: u32) {
        self.timer_base = base;
    }

    fn on_timer(&mut self, ctx: &mut LinuxCtx, k: u32) {
        let cpu = (k / TIMERS_PER_CPU) as usize;
        if k.is_multiple_of(TIMERS_PER_CPU) {
            self.replenish_timer(ctx, cpu);
        } else {
            // HRTICK: charge the current task; the charge throttles it at the end of its
            // runtime (early under steal time: re-armed).
            ctx.update_rq_clock(cpu);
            self.update_curr_dl(ctx, cpu);
            self.start_hrtick(ctx, cpu);
        }
    }
}

#[cfg(test)]
mod tests;
