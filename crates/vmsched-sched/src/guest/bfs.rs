//! BFS, Con Kolivas's Brain Fuck Scheduler, as shipped for **Linux 3.17** (BFS 0.458), used as
//! a guest scheduler. Behavioural reference: `shared/spec/linux-schedulers.md` §4 (read from BFS
//! 0.442; the 0.44x–0.46x releases keep its constants and policy) with `ERRATA.md` L8, and the
//! BFS 0.440 source for the details the spec leaves open (named per function below). Seed 003
//! (Fanguède et al.) runs it in a 1-vCPU KVM/ARM guest beside CFS.
//!
//! # How BFS sits in the Linux core
//!
//! BFS replaces the whole of `kernel/sched/`: one scheduler takes SCHED_FIFO/RR, SCHED_NORMAL,
//! SCHED_BATCH and SCHED_IDLEPRIO tasks, ordered by one priority array (RT levels above NORMAL
//! above IDLEPRIO) in **one global run queue**. It is therefore one class that accepts every
//! policy, in the fair slot of a [`LinuxCore`] whose RT and deadline slots are empty
//! ([`BfsSched`] = `LinuxCore<Bfs>`): the core keeps what BFS shares with mainline (the run-queue
//! clock, `need_resched`, the skeletons of wake-up, fork, `schedule` and the tick), and nothing
//! of the RT class (`guest/rt.rs`) applies: BFS has no RT throttling and no push/pull, an RT
//! task simply sits at a higher level of the same queue. A separate RT class would be wrong:
//! BFS's wake-up preemption compares an RT wakee with every CPU's current task in one scan.
//!
//! The core's per-CPU hooks map onto BFS as follows: `select_task_rq` is `try_preempt`'s choice
//! of a CPU (the best idle one, else the one running the lowest priority, latest deadline),
//! `wakeup_preempt` its test on that CPU (`can_preempt`); `enqueue_task` appends to the global
//! list of the task's level; `put_prev_task` + `pick_next_task` are BFS's `schedule`
//! (`check_deadline`, the re-run of a lone previous task, `swap_sticky`,
//! `earliest_deadline_task`, `take_task`). A queued task keeps `task_cpu` = where it last ran,
//! which is what the sticky rule reads.
//!
//! # The rules (spec §4)
//!
//! * Deadline: `niffies + prio_ratio[nice+20] × rr_interval × 2^20/128` ns, renewed with a fresh
//!   slice of `rr_interval << 10` units **only** when the slice is used up (below RESCHED_US),
//!   or at every deschedule of a SCHED_BATCH task. A sleeper keeps its deadline and remaining
//!   slice (L8). `niffies` is the level's clock (the guest's `sched_clock`).
//! * Units (L8): a slice unit is 1.024 µs (`ns >> 10`); 6144 units = 6.291 ms of run time,
//!   RESCHED_US = 100 units = 102.4 µs. Each charge truncates (`update_cpu_clock`).
//! * Selection: the lowest occupied level; RT levels FIFO order; NORMAL/IDLEPRIO the smallest
//!   effective deadline among tasks allowed here, a sticky task of another CPU having its
//!   deadline shifted left by the cache distance. Ties: the first in list order.
//! * Tick: charge; SCHED_FIFO is never charged; "dither" (scheduled in the first half of a tick)
//!   expires a slice of at most half a jiffy, else a slice below RESCHED_US expires.
//! * Wake-up: appended at the tail; unless WF_SYNC with no idle CPU, `try_preempt`.
//! * Fork: the child inherits the forker's deadline and half its slice (≥ 2 × RESCHED_US), and
//!   the forker is rescheduled when no idle CPU suits the child; with less, the forker's slice is
//!   zeroed and the child gets a fresh slice and deadline.
//!
//! # Simplifications
//!
//! * SCHED_ISO is not modelled (the engine's policies have no SCHED_ISO; BFS's `iso_ticks`
//!   accounting only ever acts on ISO tasks). CPU frequency scaling (`scaling_rq`) is off.
//! * `niffy_diff`'s clamp of `sched_clock` against jiffies never fires: the clock is exact.
//! * `sched_yield` only reschedules (BFS 0.440's `requeue_task` is empty): the yielder keeps its
//!   deadline and goes to the tail if anything else is queued.
//! * A run-time nice or policy change re-queues a queued task at its new level and tests
//!   preemption on its CPU only (BFS's `set_user_nice` runs `try_preempt` over all CPUs).
//! * A fork with no parent task at this level (the workload's boot-time tasks) takes the task
//!   running on the parent CPU as the forker, as BFS's `current`; on an idle CPU the child gets a
//!   fresh slice and deadline.

use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{CpuTopo, Policy, WakeInfo};

use crate::guest::linux_core::{
    DequeueFlags, EnqueueFlags, LinuxCore, LinuxCtx, SchedClass, WakeFlags,
};

#[cfg(test)]
mod tests;

// ------------------------------------------------------------------------------------------------
// Parameters
// ------------------------------------------------------------------------------------------------

/// The BFS release modelled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub enum BfsVersion {
    /// BFS 0.458, the release for Linux 3.17 (seed 003's kernel). The release number is from
    /// ck's patch naming and is not checked against the paper, which does not state it; the
    /// policy and constants are those of the 0.44x series the spec was read from.
    #[default]
    #[serde(rename = "0.458")]
    V0_458,
}

/// BFS's tunables (`/proc/sys/kernel/rr_interval`) and the kernel's CONFIG_HZ.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BfsParams {
    pub version: BfsVersion,
    /// CONFIG_HZ of the guest kernel (seed 003's Exynos ARM kernels: 200).
    pub hz: u32,
    /// `kernel.rr_interval` in ms (default 6, not scaled by the CPU count; sysctl range 1..=1000).
    pub rr_interval: u32,
}

impl Default for BfsParams {
    fn default() -> Self {
        BfsParams {
            version: BfsVersion::V0_458,
            hz: 250,
            rr_interval: 6,
        }
    }
}

/// The CONFIG_HZ values of a 3.x kernel: kernel/Kconfig.hz's 100, 250, 300 and 1000, 24, 48 and
/// 1024 on some MIPS, and 32-bit ARM's own choice, which adds 200 (the fixed rate of Samsung's
/// Exynos platforms, seed 003's; spec §5.8) and 500.
pub const LINUX_3X_HZ: [u32; 9] = [24, 48, 100, 200, 250, 300, 500, 1000, 1024];

impl BfsParams {
    /// Checks the ranges BFS accepts; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !LINUX_3X_HZ.contains(&self.hz) {
            return Err(format!(
                "hz: {} is not a CONFIG_HZ Linux 3.x offers (100, 250, 300 or 1000; 200 or 500 \
                 on 32-bit ARM; 24, 48 or 1024 on some MIPS)",
                self.hz
            ));
        }
        if !(1..=1000).contains(&self.rr_interval) {
            return Err(format!(
                "rr_interval: {} ms is outside 1..=1000 (the sysctl's range)",
                self.rr_interval
            ));
        }
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------------
// Constants (spec §4.1, ERRATA L8)
// ------------------------------------------------------------------------------------------------

/// `MAX_RT_PRIO`: RT tasks take levels `MAX_RT_PRIO − 1 − rt_priority`.
pub const MAX_RT_PRIO: u8 = 101;
/// `ISO_PRIO` (no SCHED_ISO task is ever queued there in this model).
pub const ISO_PRIO: u8 = MAX_RT_PRIO;
pub const NORMAL_PRIO: u8 = MAX_RT_PRIO + 1;
pub const IDLE_PRIO: u8 = MAX_RT_PRIO + 2;
/// `PRIO_LIMIT`: the level an idle CPU scores in `try_preempt`.
pub const PRIO_LIMIT: u8 = MAX_RT_PRIO + 3;
/// `RESCHED_US`: a slice below this many 1.024 µs units counts as used up.
pub const RESCHED_US: i64 = 100;

/// `prio_ratios`: 128 for nice −20, each nice level ×11/10 (integer), index nice + 20.
pub fn prio_ratios() -> [u64; 40] {
    let mut r = [0u64; 40];
    r[0] = 128;
    for i in 1..40 {
        r[i] = r[i - 1] * 11 / 10;
    }
    r
}

/// `NS_TO_US`: BFS's "µs" are 1024 ns.
#[inline]
fn ns_to_us(ns: u64) -> i64 {
    (ns >> 10) as i64
}

// ------------------------------------------------------------------------------------------------
// State
// ------------------------------------------------------------------------------------------------

/// One task's BFS fields (`struct task_struct`'s BFS part).
#[derive(Clone, Copy, Debug)]
struct Task {
    policy: Policy,
    /// Index into `prio_ratios` (nice + 20, clamped).
    user_prio: usize,
    /// `normal_prio`: its level when queued (RT by priority, IDLEPRIO, else NORMAL).
    normal_prio: u8,
    /// `prio`: the level it is queued at or runs at.
    prio: u8,
    /// Absolute virtual deadline (niffies ns).
    deadline: u64,
    /// Remaining slice in 1.024 µs units (may go negative between charges).
    time_slice: i64,
    /// `task_cpu`: where it runs or last ran.
    cpu: CpuId,
    /// On the global queue (queued, not running).
    queued: bool,
    /// Runnable: queued or running (cleared at a block).
    on_rq: bool,
    /// `p->sticky`.
    sticky: bool,
}

/// One CPU's BFS fields (the BFS part of `struct rq`).
#[derive(Clone, Copy, Debug)]
struct Cpu {
    /// The task BFS put on it (`rq->curr`, None: idle).
    curr: Option<EntityId>,
    /// `rq->rq_prio` (PRIO_LIMIT when idle) and `rq->rq_deadline` of the running task.
    rq_prio: u8,
    rq_deadline: u64,
    /// `rq->sticky_task`.
    sticky_task: Option<EntityId>,
    /// `rq->last_tick`: the clock at this CPU's last tick.
    last_tick: u64,
    /// `rq->dither`: the running task was scheduled within half a jiffy of the last tick.
    dither: bool,
    /// `rq->timekeep_clock`: up to where the running task's slice is charged.
    timekeep: u64,
    /// The previous task of the `schedule` in progress (between `put_prev_task` and
    /// `pick_next_task`), and whether it simply runs on (nothing else queued).
    prev: Option<EntityId>,
    rerun: bool,
}

impl Default for Cpu {
    fn default() -> Self {
        Cpu {
            curr: None,
            rq_prio: PRIO_LIMIT,
            rq_deadline: 0,
            sticky_task: None,
            last_tick: 0,
            dither: false,
            timekeep: 0,
            prev: None,
            rerun: false,
        }
    }
}

/// What the fork in progress asks of the wake-up preemption check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ForkPreempt {
    /// `try_preempt` (an idle CPU suits the child, or the forker is not running).
    Try,
    /// The forker was rescheduled instead (child runs first, or the forker's slice ran out).
    None,
}

/// The BFS scheduler of one guest kernel (the single class of its [`LinuxCore`]).
pub struct Bfs {
    rr_interval: u64,
    pub(crate) tick_ns: u64,
    half_jiffy_ns: u64,
    half_jiffy_us: i64,
    ratios: [u64; 40],
    topo: Vec<CpuTopo>,
    t: Vec<Task>,
    /// `grq.queue`: one list per level, appended at the tail.
    queue: Vec<Vec<EntityId>>,
    /// `grq.prio_bitmap`: bit `l` set while `queue[l]` is not empty.
    bitmap: u128,
    /// `grq.qnr`: queued, not running.
    qnr: u32,
    cpus: Vec<Cpu>,
    fork: ForkPreempt,
}

/// A Linux 3.17 kernel with BFS: the one class of the core, RT included.
pub type BfsSched = LinuxCore<Bfs>;

impl Bfs {
    pub fn new(params: BfsParams, cpus: &[CpuTopo]) -> Self {
        let hz = params.hz as u64;
        Bfs {
            rr_interval: params.rr_interval as u64,
            tick_ns: 1_000_000_000 / hz,
            half_jiffy_ns: 1_000_000_000 / hz / 2,
            half_jiffy_us: (1_000_000 / hz / 2) as i64,
            ratios: prio_ratios(),
            topo: cpus.to_vec(),
            t: Vec::new(),
            queue: vec![Vec::new(); PRIO_LIMIT as usize],
            bitmap: 0,
            qnr: 0,
            cpus: vec![Cpu::default(); cpus.len()],
            fork: ForkPreempt::Try,
        }
    }

    /// The guest kernel: BFS alone in the core, ticking at HZ.
    pub fn sched(params: BfsParams, cpus: &[CpuTopo]) -> BfsSched {
        let bfs = Bfs::new(params, cpus);
        LinuxCore::new("bfs", cpus.len(), bfs.tick_ns, bfs)
    }

    /// `timeslice()`: `rr_interval` ms as 1.024 µs units.
    #[inline]
    fn timeslice(&self) -> i64 {
        (self.rr_interval << 10) as i64
    }

    /// `prio_deadline_diff`: the deadline offset of nice level `user_prio` (ns).
    #[inline]
    pub fn deadline_diff(&self, user_prio: usize) -> u64 {
        self.ratios[user_prio] * self.rr_interval * ((1 << 20) / 128)
    }

    /// `normal_prio` of a policy.
    fn normal_prio(policy: Policy, rt_priority: u32) -> u8 {
        match policy {
            Policy::Fifo | Policy::Rr => MAX_RT_PRIO - 1 - rt_priority.clamp(1, 99) as u8,
            Policy::Idle => IDLE_PRIO,
            // Refused at validation (BFS has no SCHED_DEADLINE); queued as normal if it came.
            Policy::Normal | Policy::Batch | Policy::Deadline => NORMAL_PRIO,
        }
    }

    /// `time_slice_expired`: a fresh slice and a deadline one offset from now.
    fn time_slice_expired(&mut self, now: u64, e: EntityId) {
        let ts = self.timeslice();
        let diff = self.deadline_diff(self.t[e.idx()].user_prio);
        let t = &mut self.t[e.idx()];
        t.time_slice = ts;
        t.deadline = now + diff;
    }

    /// `check_deadline`: a used-up slice (or any SCHED_BATCH task's) is refilled at deschedule.
    fn check_deadline(&mut self, now: u64, e: EntityId) {
        let t = &self.t[e.idx()];
        if t.time_slice < RESCHED_US || t.policy == Policy::Batch {
            self.time_slice_expired(now, e);
        }
    }

    /// `update_cpu_clock_tick` / `_switch`: charge the running task's slice up to now (never a
    /// SCHED_FIFO task's), truncating to 1.024 µs units. `niffy_diff(.., 1)` sanity-clamps the
    /// interval: one longer than two jiffies (a vCPU the host kept away that long) counts as
    /// 1 ns, i.e. nothing.
    fn charge(&mut self, now: u64, cpu: usize, e: EntityId) {
        let c = &mut self.cpus[cpu];
        let mut delta = now.saturating_sub(c.timekeep);
        if delta > 2 * self.tick_ns {
            delta = 1;
        }
        c.timekeep = now;
        let t = &mut self.t[e.idx()];
        if t.policy != Policy::Fifo {
            t.time_slice -= ns_to_us(delta);
        }
    }

    /// `enqueue_task`: the task's level (RT keep theirs, IDLEPRIO its own, the rest NORMAL),
    /// appended at the tail of its list.
    fn enqueue(&mut self, e: EntityId) {
        let t = &mut self.t[e.idx()];
        debug_assert!(!t.queued, "task {} queued twice", e.0);
        t.prio = t.normal_prio;
        t.queued = true;
        let l = t.prio as usize;
        self.queue[l].push(e);
        self.bitmap |= 1 << l;
        self.qnr += 1;
    }

    /// `dequeue_task`.
    fn dequeue(&mut self, e: EntityId) {
        let t = &mut self.t[e.idx()];
        if !t.queued {
            return;
        }
        t.queued = false;
        let l = t.prio as usize;
        let q = &mut self.queue[l];
        let i = q
            .iter()
            .position(|&x| x == e)
            .expect("a queued task is on its list");
        q.remove(i);
        if q.is_empty() {
            self.bitmap &= !(1 << l);
        }
        self.qnr -= 1;
    }

    /// `cpu_locality[a][b]`: 0 same CPU, 1 SMT sibling, 2 shares a cache, 3 same node, 4 other.
    fn locality(&self, a: usize, b: usize) -> u32 {
        let (x, y) = (&self.topo[a], &self.topo[b]);
        if a == b {
            0
        } else if x.node == y.node && x.socket == y.socket && x.core == y.core {
            1
        } else if x.llc == y.llc {
            2
        } else if x.node == y.node {
            3
        } else {
            4
        }
    }

    /// `cpu_idle_map` ∩ the task's affinity: online CPUs running nothing.
    fn idle_allowed(ctx: &LinuxCtx, e: EntityId, c: CpuId) -> bool {
        let ci = ctx.cpu(c);
        ci.online && ci.curr.is_none() && ctx.ent(e).params.hard_affinity.contains(c)
    }

    /// `suitable_idle_cpus`.
    fn suitable_idle(&self, ctx: &LinuxCtx, e: EntityId) -> bool {
        (0..self.cpus.len()).any(|c| Self::idle_allowed(ctx, e, CpuId(c as u32)))
    }

    /// `resched_best_mask`'s ranking of an idle CPU `c` for a task last on `from`:
    /// different thread 1, different core 2, busy cache 4, different CPU 8, busy SMT sibling
    /// 16, different node 32; the lowest wins.
    fn idle_rank(&self, ctx: &LinuxCtx, from: usize, c: usize) -> u32 {
        let loc = self.locality(from, c);
        let mut r = 0;
        if loc > 3 {
            r |= 32;
        } else if loc > 2 {
            r |= 8;
        }
        if loc == 2 {
            r |= 2;
        }
        if loc == 1 {
            r |= 1;
        }
        let busy = |o: usize| o != c && ctx.cpu(CpuId(o as u32)).curr.is_some();
        let me = &self.topo[c];
        if (0..self.topo.len()).any(|o| self.topo[o].llc == me.llc && busy(o)) {
            r |= 4;
        }
        if (0..self.topo.len()).any(|o| self.locality(c, o) == 1 && busy(o)) {
            r |= 16;
        }
        r
    }

    /// `resched_best_mask` over the idle CPUs allowed for `e` (except `skip`): `from` itself if
    /// it is one, else the best-ranked, ties to the lowest number.
    fn best_idle(
        &self,
        ctx: &LinuxCtx,
        e: EntityId,
        from: usize,
        skip: Option<usize>,
    ) -> Option<usize> {
        let ok = |c: usize| Some(c) != skip && Self::idle_allowed(ctx, e, CpuId(c as u32));
        if ok(from) {
            return Some(from);
        }
        let mut best: Option<(u32, usize)> = None;
        for c in (0..self.cpus.len()).filter(|&c| ok(c)) {
            let r = self.idle_rank(ctx, from, c);
            if best.is_none_or(|(b, _)| r < b) {
                best = Some((r, c));
            }
        }
        best.map(|(_, c)| c)
    }

    /// `resched_suitable_idle` / `resched_closest_idle`: wake the best idle CPU for `e`, not
    /// `this` (which is in `schedule` already).
    fn resched_idle_for(&self, ctx: &mut LinuxCtx, e: EntityId, from: usize, this: usize) {
        if let Some(c) = self.best_idle(ctx, e, from, Some(this)) {
            ctx.resched_curr(c);
        }
    }

    /// `try_preempt`'s scan: among the online CPUs allowed for `e`, the one running the lowest
    /// priority (largest level), among equals the latest deadline; the first found on ties.
    fn preempt_target(&self, ctx: &LinuxCtx, e: EntityId) -> Option<usize> {
        let hard = &ctx.ent(e).params.hard_affinity;
        let mut best: Option<(u8, u64, usize)> = None;
        for c in hard.iter().filter(|&c| ctx.cpu(c).online) {
            let rq = &self.cpus[c.idx()];
            let take = match best {
                None => true,
                Some((p, dl, _)) => rq.rq_prio > p || (rq.rq_prio == p && rq.rq_deadline > dl),
            };
            if take {
                best = Some((rq.rq_prio, rq.rq_deadline, c.idx()));
            }
        }
        best.map(|(_, _, c)| c)
    }

    /// `can_preempt`: a better level, or the same level and an earlier deadline.
    #[inline]
    fn can_preempt(&self, e: EntityId, prio: u8, deadline: u64) -> bool {
        let t = &self.t[e.idx()];
        t.prio < prio || (t.prio == prio && t.deadline < deadline)
    }

    /// `try_preempt`'s choice of CPU for a queued task: the best idle one if any suits it, else
    /// the preemption candidate (its own CPU for an IDLEPRIO task, which never preempts).
    fn preempt_cpu(&mut self, ctx: &LinuxCtx, e: EntityId) -> CpuId {
        self.t[e.idx()].sticky = false;
        let from = self.t[e.idx()].cpu.idx();
        if let Some(c) = self.best_idle(ctx, e, from, None) {
            return CpuId(c as u32);
        }
        let hard = &ctx.ent(e).params.hard_affinity;
        let own = CpuId(from as u32);
        if self.t[e.idx()].policy == Policy::Idle && hard.contains(own) {
            return own;
        }
        match self.preempt_target(ctx, e) {
            Some(c) => CpuId(c as u32),
            None => hard
                .iter()
                .next()
                .expect("a task has a CPU in its affinity"),
        }
    }

    /// `earliest_deadline_task`: the next task for `cpu`, or None (idle).
    fn earliest_deadline_task(&self, ctx: &LinuxCtx, cpu: usize) -> Option<EntityId> {
        let c = CpuId(cpu as u32);
        let mut bits = self.bitmap;
        while bits != 0 {
            let l = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let allowed = |e: &EntityId| ctx.ent(*e).params.hard_affinity.contains(c);
            if l < ISO_PRIO as usize {
                if let Some(&e) = self.queue[l].iter().find(|e| allowed(e)) {
                    return Some(e);
                }
                continue;
            }
            let mut best: Option<(u64, EntityId)> = None;
            for &e in self.queue[l].iter().filter(|e| allowed(e)) {
                let t = &self.t[e.idx()];
                let mut dl = t.deadline;
                if t.sticky && t.cpu.idx() != cpu {
                    dl = dl.wrapping_shl(self.locality(cpu, t.cpu.idx()));
                }
                if best.is_none_or(|(b, _)| dl < b) {
                    best = Some((dl, e));
                }
            }
            if let Some((_, e)) = best {
                return Some(e);
            }
        }
        None
    }

    /// `swap_sticky`: `prev`, descheduled while runnable, becomes `cpu`'s sticky task unless it
    /// is RT; the sticky task it replaces is unstuck and offered an idle CPU.
    fn swap_sticky(&mut self, ctx: &mut LinuxCtx, cpu: usize, prev: EntityId) {
        if let Some(s) = self.cpus[cpu].sticky_task {
            if s == prev {
                self.t[prev.idx()].sticky = true;
                return;
            }
            if self.t[s.idx()].sticky {
                self.t[s.idx()].sticky = false;
                self.resched_idle_for(ctx, s, cpu, cpu);
            }
        }
        if self.t[prev.idx()].prio >= MAX_RT_PRIO {
            self.t[prev.idx()].sticky = true;
            self.cpus[cpu].sticky_task = Some(prev);
        } else {
            self.resched_idle_for(ctx, prev, cpu, cpu);
            self.cpus[cpu].sticky_task = None;
        }
    }

    /// The BFS view of a task, for tests: (deadline, remaining slice in units, sticky).
    pub fn task_state(&self, e: EntityId) -> (u64, i64, bool) {
        let t = &self.t[e.idx()];
        (t.deadline, t.time_slice, t.sticky)
    }
}

impl SchedClass for Bfs {
    /// Every policy: BFS is the whole scheduler.
    fn accepts(&self, _policy: Policy) -> bool {
        true
    }

    /// BFS 0.440: sched_fork / the initial task state: a full slice, deadline 0 until the first
    /// refill or fork.
    fn init_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, _owned: bool) {
        let p = &ctx.ent(e).params;
        let normal_prio = Self::normal_prio(p.linux.policy, p.linux.rt_priority);
        self.t.push(Task {
            policy: p.linux.policy,
            user_prio: (p.linux.nice.clamp(-20, 19) + 20) as usize,
            normal_prio,
            prio: normal_prio,
            deadline: 0,
            time_slice: self.timeslice(),
            cpu: p.initial_cpu,
            queued: false,
            on_rq: false,
            sticky: false,
        });
        // Room for every task at any level, so that the event loop never allocates.
        for q in &mut self.queue {
            q.reserve(self.t.len());
        }
    }

    fn task_cpu(&self, e: EntityId) -> CpuId {
        self.t[e.idx()].cpu
    }

    /// BFS 0.440: try_to_wake_up → ttwu_activate → try_preempt: the CPU whose current task the
    /// wakee is tested against (or the idle CPU to wake). `task_cpu` does not change until the
    /// task is taken to run.
    fn select_task_rq(&mut self, ctx: &mut LinuxCtx, e: EntityId, _info: WakeInfo) -> CpuId {
        self.preempt_cpu(ctx, e)
    }

    /// BFS 0.440: wake_up_new_task's choice (see `task_fork`).
    fn select_task_rq_fork(&mut self, ctx: &mut LinuxCtx, e: EntityId, parent_cpu: CpuId) -> CpuId {
        let allowed = ctx.ent(e).params.hard_affinity.contains(parent_cpu);
        if self.fork == ForkPreempt::None && allowed {
            return parent_cpu;
        }
        self.fork = ForkPreempt::Try;
        self.preempt_cpu(ctx, e)
    }

    /// Nothing moves: a queued BFS task is on no CPU's queue.
    fn migrate_task_rq(&mut self, _ctx: &mut LinuxCtx, _e: EntityId, _new_cpu: CpuId) {}

    /// BFS 0.440: wake_up_new_task's slice split. The forker is the task running on
    /// `parent_cpu` (BFS's `current`).
    fn task_fork(&mut self, ctx: &mut LinuxCtx, e: EntityId, parent_cpu: CpuId) {
        let now = ctx.now();
        let pc = parent_cpu.idx();
        {
            let t = &mut self.t[e.idx()];
            t.cpu = parent_cpu;
            t.sticky = false;
        }
        self.fork = ForkPreempt::Try;
        let Some(parent) = self.cpus[pc].curr else {
            self.time_slice_expired(now, e);
            return;
        };
        self.t[e.idx()].deadline = self.cpus[pc].rq_deadline;
        let ps = self.t[parent.idx()].time_slice;
        if self.t[e.idx()].policy == Policy::Fifo {
            self.t[e.idx()].time_slice = ps;
            if !self.suitable_idle(ctx, e) {
                ctx.resched_curr(pc);
                self.fork = ForkPreempt::None;
            }
        } else if ps >= RESCHED_US * 2 {
            self.t[parent.idx()].time_slice = ps / 2;
            self.t[e.idx()].time_slice = ps / 2;
            if !self.suitable_idle(ctx, e) {
                ctx.resched_curr(pc);
                self.fork = ForkPreempt::None;
            }
        } else {
            self.t[parent.idx()].time_slice = 0;
            ctx.resched_curr(pc);
            self.fork = ForkPreempt::None;
            self.time_slice_expired(now, e);
        }
    }

    /// BFS 0.440: activate_task → enqueue_task (tail of its level's list).
    fn enqueue_task(&mut self, _ctx: &mut LinuxCtx, _cpu: CpuId, e: EntityId, _f: EnqueueFlags) {
        self.t[e.idx()].on_rq = true;
        self.enqueue(e);
    }

    /// BFS 0.440: deactivate_task (from `schedule` of a sleeping task): no longer runnable,
    /// unstuck.
    fn dequeue_task(&mut self, _ctx: &mut LinuxCtx, _cpu: CpuId, e: EntityId, _f: DequeueFlags) {
        self.dequeue(e);
        let t = &mut self.t[e.idx()];
        t.on_rq = false;
        t.sticky = false;
    }

    /// `sched_yield`: only the reschedule (see the module doc).
    fn yield_task(&mut self, _ctx: &mut LinuxCtx, _cpu: CpuId, _e: EntityId) {}

    /// BFS 0.440: ttwu_activate / wake_up_new_task → try_preempt → can_preempt on the CPU
    /// `select_task_rq` chose. A WF_SYNC wake-up with no idle CPU preempts nothing; IDLEPRIO
    /// tasks preempt only idle CPUs.
    fn wakeup_preempt(
        &mut self,
        ctx: &mut LinuxCtx,
        cpu: CpuId,
        _curr: EntityId,
        p: EntityId,
        f: WakeFlags,
    ) {
        if f.fork && self.fork == ForkPreempt::None {
            self.fork = ForkPreempt::Try;
            return;
        }
        if (f.sync && !f.fork) || self.t[p.idx()].policy == Policy::Idle {
            return;
        }
        let rq = &self.cpus[cpu.idx()];
        if self.can_preempt(p, rq.rq_prio, rq.rq_deadline) {
            ctx.resched_curr(cpu.idx());
        }
    }

    /// BFS 0.440: schedule, up to the pick: charge prev, `check_deadline`, then prev re-runs if
    /// nothing else is queued, else (still runnable) it becomes the sticky task and goes to the
    /// tail of its list.
    fn put_prev_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, prev: EntityId) {
        let now = ctx.now();
        let c = cpu.idx();
        self.charge(now, c, prev);
        self.check_deadline(now, prev);
        self.cpus[c].prev = Some(prev);
        self.cpus[c].curr = None;
        if !self.t[prev.idx()].on_rq {
            return;
        }
        let here = ctx.cpu(cpu).online && ctx.ent(prev).params.hard_affinity.contains(cpu);
        if !here {
            self.resched_idle_for(ctx, prev, c, c);
        } else if self.qnr == 0 {
            self.cpus[c].rerun = true;
            return;
        } else {
            self.swap_sticky(ctx, c, prev);
        }
        self.enqueue(prev);
    }

    /// BFS 0.440: schedule, the pick: the dither flag, prev again or `earliest_deadline_task` →
    /// `take_task`; a switch offers prev an idle CPU (`resched_suitable_idle`) and an RT next
    /// unsticks prev.
    fn pick_next_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId) -> Option<EntityId> {
        let now = ctx.now();
        let c = cpu.idx();
        self.cpus[c].dither = now.saturating_sub(self.cpus[c].last_tick) <= self.half_jiffy_ns;
        let prev = self.cpus[c].prev.take();
        if std::mem::take(&mut self.cpus[c].rerun) {
            return prev;
        }
        let next = self.earliest_deadline_task(ctx, c);
        if let Some(n) = next {
            self.dequeue(n);
            let t = &mut self.t[n.idx()];
            t.cpu = cpu;
            t.sticky = false;
        }
        if let Some(p) = prev.filter(|&p| Some(p) != next) {
            // This CPU, going idle, is the best idle CPU for a task that last ran here.
            let self_best = next.is_none() && ctx.ent(p).params.hard_affinity.contains(cpu);
            if !self_best {
                self.resched_idle_for(ctx, p, c, c);
            }
            if next.is_some_and(|n| self.t[n.idx()].prio < MAX_RT_PRIO) {
                self.cpus[c].sticky_task = None;
                self.t[p.idx()].sticky = false;
            }
        }
        if next.is_none() {
            self.cpus[c].curr = None;
            self.cpus[c].rq_prio = PRIO_LIMIT;
        }
        next
    }

    /// BFS 0.440: set_rq_task: the running task's level and deadline, charging from now.
    fn set_next_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId) {
        let now = ctx.now();
        let t = self.t[e.idx()];
        let rq = &mut self.cpus[cpu.idx()];
        rq.curr = Some(e);
        rq.rq_prio = t.prio;
        rq.rq_deadline = t.deadline;
        rq.timekeep = now;
    }

    /// BFS 0.440: scheduler_tick → update_cpu_clock_tick + task_running_tick.
    fn task_tick(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, curr: EntityId) {
        let now = ctx.now();
        let c = cpu.idx();
        self.cpus[c].last_tick = now;
        self.charge(now, c, curr);
        let t = &mut self.t[curr.idx()];
        if t.policy == Policy::Fifo {
            return;
        }
        if self.cpus[c].dither {
            if t.time_slice > self.half_jiffy_us {
                return;
            }
            t.time_slice = 0;
        } else if t.time_slice >= RESCHED_US {
            return;
        }
        ctx.resched_curr(c);
    }

    /// `set_user_nice` / `sched_setscheduler`: the new nice and level; a queued task moves to
    /// the tail of its new level, a running one is rescheduled if its level got worse. The
    /// deadline stays until the next refill.
    fn prio_changed(&mut self, ctx: &mut LinuxCtx, e: EntityId) -> bool {
        let p = ctx.ent(e).params.linux;
        let queued = self.t[e.idx()].queued;
        if queued {
            self.dequeue(e);
        }
        let old = self.t[e.idx()].prio;
        {
            let t = &mut self.t[e.idx()];
            t.policy = p.policy;
            t.user_prio = (p.nice.clamp(-20, 19) + 20) as usize;
            t.normal_prio = Self::normal_prio(p.policy, p.rt_priority);
            t.prio = t.normal_prio;
        }
        if queued {
            self.enqueue(e);
            return true;
        }
        let c = self.t[e.idx()].cpu.idx();
        if self.cpus[c].curr == Some(e) {
            let new = self.t[e.idx()].prio;
            self.cpus[c].rq_prio = new;
            if new > old {
                ctx.resched_curr(c);
            }
        }
        false
    }

    fn task_dead(&mut self, _ctx: &mut LinuxCtx, e: EntityId) {
        self.dequeue(e);
        for c in &mut self.cpus {
            if c.sticky_task == Some(e) {
                c.sticky_task = None;
            }
        }
        self.t[e.idx()].on_rq = false;
        self.t[e.idx()].sticky = false;
    }

    /// The task's virtual deadline (niffies ns).
    fn probe(&self, e: EntityId) -> Option<i64> {
        self.t.get(e.idx()).map(|t| t.deadline as i64)
    }

    /// An offline CPU keeps no sticky task; nothing else is per CPU.
    fn rq_hotplug(&mut self, ctx: &mut LinuxCtx, cpu: CpuId) {
        if !ctx.cpu(cpu).online {
            if let Some(s) = self.cpus[cpu.idx()].sticky_task.take() {
                self.t[s.idx()].sticky = false;
            }
        }
    }

    /// The queued tasks that last ran on `cpu`, in list order (moved off a CPU going offline so
    /// that a CPU is told about them).
    fn next_queued(&self, cpu: CpuId) -> Option<EntityId> {
        let mut bits = self.bitmap;
        while bits != 0 {
            let l = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let Some(&e) = self.queue[l].iter().find(|e| self.t[e.idx()].cpu == cpu) {
                return Some(e);
            }
        }
        None
    }

    fn move_queued_task(&mut self, _ctx: &mut LinuxCtx, e: EntityId, _src: CpuId, dst: CpuId) {
        let t = &mut self.t[e.idx()];
        t.cpu = dst;
        t.sticky = false;
    }
}
