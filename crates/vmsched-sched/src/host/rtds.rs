//! Xen RTDS, the real-time deferrable-server scheduler with global EDF, as in Xen 4.20
//! (`xen/common/sched/rt.c`, tag RELEASE-4.20.0; `docs/features/sched_rtds.pandoc`) and
//! xen-schedulers.md §4. Facts only; the code is our own.
//!
//! # What it models
//!
//! Every vCPU has a *period* and a *budget* (default 10 ms and 4 ms) and an *extratime* flag
//! (default on). Its deadlines lie on the grid of whole periods counted from boot: when a
//! deadline has passed (`rt_update_deadline`) the next one is the first grid point after now,
//! the budget is full again and the priority level drops back to 0. A running vCPU burns its
//! budget by the time it ran (`burn_budget`); a queued or blocked one keeps what it has left
//! until its deadline (a *deferrable server*). A vCPU that has used up its budget either
//! waits in the unsorted *depleted queue* until its next period (no extratime) or, with
//! extratime, takes a fresh budget at the same deadline one *priority level* lower, below every
//! vCPU that still has budget at a lower level.
//!
//! One global runqueue for the pool holds the runnable vCPUs that may run, sorted by (level,
//! deadline), FIFO among equals; `replq` holds the replenishment events of every vCPU that is
//! runnable, sorted the same way, with one timer at its head's deadline
//! (`repl_timer_handler`). A CPU that reschedules (`rt_schedule`) burns its current vCPU,
//! takes the first queued vCPU allowed on it, and keeps its current one instead if that still
//! has budget and strictly beats the pick; the slice is the budget left. A waking vCPU gets a
//! new deadline only if its old one has passed, is queued and *tickles* one CPU
//! (`runq_tickle`): the first idle one in its affinity starting from its own CPU, else the one
//! running the lowest-priority vCPU if the woken one strictly beats it. There is no ratelimit,
//! no migration resistance and no load balancing: the queue is global.
//!
//! # Engine mapping
//!
//! RTDS implements the Xen ops ([`XenOps`]) and runs on the Xen core (`host/xen_core.rs`):
//! `Rtds::sched` builds the pair. `insert_unit` is `rt_unit_insert` (with `rt_alloc_udata`),
//! `wake` is `rt_unit_wake`, `sleep` is `rt_unit_sleep`, `do_schedule` is `rt_schedule`,
//! `context_saved` is `rt_context_saved`, `pick_resource` is `rt_res_pick`, `remove_unit` is
//! `rt_unit_remove`, `adjust` is the putinfo of `rt_dom_cntl`, and the policy's one timer
//! (key 0) is the replenishment timer. A vCPU's budget, period and extratime come from its
//! domain's `budget_us`, `period_us`, `extratime` (`XenAttr`; 0 = Xen's default), as
//! `xl sched-rtds -d D -v all -p P -b B -e E` sets them. RTDS has no `yield` hook: a yield
//! only reschedules.
//!
//! # Simplifications and what follows the source over the spec
//!
//! * One cpupool holding every online CPU; no tasklets. Every try-lock succeeds.
//! * `replq` is ordered by the same comparison as the runqueue (level first, then deadline),
//!   as upstream's `deadline_replq_insert` does, and an entry is not re-sorted when its vCPU's
//!   level rises: a vCPU woken at level ≥ 1 is queued behind level-0 vCPUs with later
//!   deadlines and may be replenished late. Kept as upstream.
//! * The vCPUs replenished by one timer run are tickled in the reverse of the order they were
//!   replenished (upstream collects them with `list_add` at the head of a list).
//! * A domain-level change (`adjust`) takes the vCPUs' budget, period and extratime (upstream's
//!   domain-level putinfo leaves extratime alone; the per-vCPU one sets all three); as
//!   upstream, the current deadline and budget are not recomputed.
//! * Timer slop and the timer entry latency are the Xen core's (as for Credit2): a slice
//!   shorter than the slop overruns the budget by the difference, as on hardware.

use crate::host::xen_core::{
    put_unit, XenCore, XenCtx, XenOps, TIMER_ENTRY_DEFAULT_NS, TIMER_SLOP_DEFAULT_NS,
};
use vmsched_core::cpuset::{CpuSet, MAX_CPUS};
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{CpuTopo, Pick, WakeInfo, XenAttr};
use vmsched_core::time::Nanos;
use vmsched_core::trace::{sat32, SchedEvent, Wide};

/// `RTDS_DEFAULT_PERIOD` (µs).
pub const DEFAULT_PERIOD_US: u64 = 10_000;
/// `RTDS_DEFAULT_BUDGET` (µs).
pub const DEFAULT_BUDGET_US: u64 = 4_000;
/// `RTDS_MIN_PERIOD` and `RTDS_MIN_BUDGET` (µs).
pub const MIN_PERIOD_US: u64 = 10;
/// `RTDS_MIN_BUDGET` (µs).
pub const MIN_BUDGET_US: u64 = 10;
/// The largest period the toolstack can pass: the domctl carries µs in 32 bits.
pub const MAX_PERIOD_US: u64 = u32::MAX as u64;
/// `UPDATE_LIMIT_SHIFT`: beyond 1024 periods `rt_update_deadline` multiplies instead of adding
/// (same result).
const UPDATE_LIMIT_SHIFT: u32 = 10;

/// The replenishment timer's key.
const REPL_TIMER: u32 = 0;

/// RTDS boot parameters: RTDS itself has none (`sched=rtds`); the Xen core's timer settings.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RtdsParams {
    /// Xen's `timer_slop` boot parameter (ns), applied by the Xen core (§1.8).
    pub timer_slop_ns: Nanos,
    /// Timer entry latency (ns), applied by the Xen core (host/xen_core.rs).
    pub timer_entry_ns: Nanos,
}

impl Default for RtdsParams {
    fn default() -> Self {
        RtdsParams {
            timer_slop_ns: TIMER_SLOP_DEFAULT_NS,
            timer_entry_ns: TIMER_ENTRY_DEFAULT_NS,
        }
    }
}

impl RtdsParams {
    /// Checks the core's timer settings.
    pub fn validate(&self) -> Result<(), String> {
        let t = self.timer_entry_ns;
        if t > 1_000_000 {
            return Err(format!("timer_entry_ns: {t} must be in 0..=1000000 (ns)"));
        }
        let s = self.timer_slop_ns;
        if s > 1_000_000_000 {
            return Err(format!("timer_slop_ns: {s} must be in 0..=1000000000 (ns)"));
        }
        Ok(())
    }
}

/// A domain's RTDS parameters as `xl sched-rtds -d D -v all -p P -b B -e E` takes them
/// (`[[domain]]` `period_us`, `budget_us`, `extratime`), checked as the per-vCPU set path of
/// `rt_dom_cntl` checks them: 10 µs ≤ budget ≤ period ≤ 2^32 − 1 µs. Absent values are Xen's
/// defaults (10 ms, 4 ms, on). Err((field, message)).
pub fn validate_domain(
    period_us: Option<u64>,
    budget_us: Option<u64>,
) -> Result<(), (&'static str, String)> {
    let p = period_us.unwrap_or(DEFAULT_PERIOD_US);
    let b = budget_us.unwrap_or(DEFAULT_BUDGET_US);
    if !(MIN_PERIOD_US..=MAX_PERIOD_US).contains(&p) {
        return Err((
            "period_us",
            format!("{p} must be in {MIN_PERIOD_US}..={MAX_PERIOD_US} (µs)"),
        ));
    }
    if b < MIN_BUDGET_US {
        return Err((
            "budget_us",
            format!("{b} must be at least {MIN_BUDGET_US} (µs)"),
        ));
    }
    if b > p {
        return Err((
            "budget_us",
            format!("{b} must not exceed the period of {p} µs"),
        ));
    }
    Ok(())
}

/// Which queue a vCPU is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Q {
    None,
    Run,
    Depleted,
}

/// Per-vCPU state (Xen `struct rt_unit`). Times in ns.
#[derive(Clone, Debug)]
struct Unit {
    period: i64,
    budget: i64,
    cur_budget: i64,
    cur_deadline: i64,
    last_start: i64,
    priority_level: u32,
    extratime: bool,
    /// Running on, or being switched off, a CPU (RTDS_scheduled).
    scheduled: bool,
    delayed_runq_add: bool,
    depleted: bool,
    q: Q,
    on_replq: bool,
    /// Xen `processor(v)`.
    processor: CpuId,
}

/// RTDS as the engine runs it: the policy on the Xen core.
pub type RtdsSched = XenCore<Rtds>;

/// The RTDS scheduler of one pool holding every CPU of the level.
pub struct Rtds {
    online: CpuSet,
    units: Vec<Unit>,
    /// Runnable vCPUs with budget (or extratime), by (level, deadline), FIFO among equals.
    runq: Vec<EntityId>,
    /// Runnable vCPUs without budget, newest first (upstream adds at the head; never scanned
    /// for a pick).
    depletedq: Vec<EntityId>,
    /// Replenishment events, ordered as the runqueue at insertion time.
    replq: Vec<EntityId>,
    /// CPUs tickled and not yet rescheduled.
    tickled: CpuSet,
    /// Scratch list of the replenishment handler (no allocation in hooks).
    repl_scratch: Vec<EntityId>,
}

/// Xen `compare_unit_priority`: > 0 if `a` beats `b` (lower level, or same level and earlier
/// deadline), < 0 if `b` beats `a`, 0 if neither.
#[inline]
fn compare(a: &Unit, b: &Unit) -> i64 {
    if a.priority_level != b.priority_level {
        b.priority_level as i64 - a.priority_level as i64
    } else {
        b.cur_deadline - a.cur_deadline
    }
}

impl Rtds {
    /// RTDS for `cpus.len()` CPUs, all in the pool.
    pub fn new(params: RtdsParams, cpus: &[CpuTopo]) -> Rtds {
        if let Err(e) = params.validate() {
            panic!("Rtds::new: invalid parameters: {e}");
        }
        let n = cpus.len();
        assert!(
            (1..=MAX_CPUS).contains(&n),
            "rtds: needs 1..={MAX_CPUS} CPUs, got {n}"
        );
        Rtds {
            online: CpuSet::first_n(n),
            units: Vec::new(),
            runq: Vec::new(),
            depletedq: Vec::new(),
            replq: Vec::new(),
            tickled: CpuSet::empty(),
            repl_scratch: Vec::new(),
        }
    }

    /// RTDS on the Xen core, with the timer slop and timer entry latency of `params`.
    pub fn sched(params: RtdsParams, cpus: &[CpuTopo]) -> RtdsSched {
        let (slop, entry) = (params.timer_slop_ns, params.timer_entry_ns);
        XenCore::with_timers(Rtds::new(params, cpus), slop, entry)
    }

    /// The vCPU's current deadline (ns).
    pub fn cur_deadline(&self, e: EntityId) -> i64 {
        self.units[e.idx()].cur_deadline
    }

    /// The vCPU's budget left in this period at its last accounting (ns).
    pub fn cur_budget(&self, e: EntityId) -> i64 {
        self.units[e.idx()].cur_budget
    }

    /// The vCPU's priority level (0: within its budget; n: n extratime refills).
    pub fn priority_level(&self, e: EntityId) -> u32 {
        self.units[e.idx()].priority_level
    }

    /// Budget, period (ns) and extratime of a vCPU with attributes `a` (0 = Xen's default).
    fn attr_params(a: &XenAttr) -> (i64, i64, bool) {
        let or = |v: u64, d: u64| if v == 0 { d } else { v } as i64 * 1000;
        (
            or(a.budget_us, DEFAULT_BUDGET_US),
            or(a.period_us, DEFAULT_PERIOD_US),
            a.extratime,
        )
    }

    // ---------------------------------------------------------------------------------------
    // Deadlines and budgets
    // ---------------------------------------------------------------------------------------

    /// Xen: rt_update_deadline. The next deadline on the period grid after `now`, a full
    /// budget, level 0, and burning counted from `now`.
    fn rt_update_deadline(&mut self, e: EntityId, now: i64) {
        let u = &mut self.units[e.idx()];
        debug_assert!(now >= u.cur_deadline, "rtds: deadline update before it");
        if u.cur_deadline + (u.period << UPDATE_LIMIT_SHIFT) > now {
            while u.cur_deadline <= now {
                u.cur_deadline += u.period;
            }
        } else {
            let count = (now - u.cur_deadline) / u.period + 1;
            u.cur_deadline += count * u.period;
        }
        u.last_start = now;
        u.cur_budget = u.budget;
        u.priority_level = 0;
    }

    /// [`Self::rt_update_deadline`] with its trace record (`TRC_RTDS_BUDGET_REPLENISH`).
    fn update_deadline(&mut self, ctx: &mut XenCtx, e: EntityId, now: i64) {
        self.rt_update_deadline(e, now);
        let u = &self.units[e.idx()];
        let (deadline, budget) = (u.cur_deadline, u.cur_budget);
        ctx.trace(|| SchedEvent::Replenish {
            ent: e,
            deadline: Wide::new(deadline),
            budget: sat32(budget),
        });
    }

    /// Xen: burn_budget. Charges the time since `last_start`; an exhausted budget is refilled a
    /// level lower with extratime, else the vCPU is depleted.
    fn burn_budget(&mut self, ctx: &mut XenCtx, e: EntityId, now: i64) {
        let u = &mut self.units[e.idx()];
        let delta = now - u.last_start;
        if delta < 0 {
            u.last_start = now;
            return;
        }
        u.cur_budget -= delta;
        u.last_start = now;
        if u.cur_budget <= 0 {
            if u.extratime {
                u.priority_level = u.priority_level.saturating_add(1);
                u.cur_budget = u.budget;
            } else {
                u.cur_budget = 0;
                u.depleted = true;
            }
        }
        let (budget, level, extratime) = (u.cur_budget, u.priority_level, u.extratime);
        ctx.trace(|| SchedEvent::BudgetBurn {
            ent: e,
            budget: sat32(budget),
            delta: delta as u32,
            level,
            extratime,
        });
    }

    // ---------------------------------------------------------------------------------------
    // Queues
    // ---------------------------------------------------------------------------------------

    /// Xen: deadline_queue_insert. Inserts `e` before the first element it strictly beats;
    /// true if it is now the head.
    fn deadline_insert(units: &[Unit], q: &mut Vec<EntityId>, e: EntityId) -> bool {
        let u = &units[e.idx()];
        let pos = q
            .iter()
            .position(|o| compare(u, &units[o.idx()]) > 0)
            .unwrap_or(q.len());
        q.insert(pos, e);
        pos == 0
    }

    /// Xen: q_remove.
    fn q_remove(&mut self, e: EntityId) {
        let q = match self.units[e.idx()].q {
            Q::Run => &mut self.runq,
            Q::Depleted => &mut self.depletedq,
            Q::None => panic!("rtds: q_remove of a vCPU on no queue"),
        };
        let i = q
            .iter()
            .position(|&o| o == e)
            .expect("rtds: queue holds it");
        q.remove(i);
        self.units[e.idx()].q = Q::None;
    }

    /// Xen: runq_insert. To the sorted runqueue with budget or extratime, else to the head of
    /// the depleted queue.
    fn runq_insert(&mut self, e: EntityId) {
        let u = &self.units[e.idx()];
        debug_assert!(u.q == Q::None, "rtds: runq_insert of a queued vCPU");
        debug_assert!(u.on_replq, "rtds: a queued vCPU has a replenishment event");
        if u.cur_budget > 0 || u.extratime {
            Self::deadline_insert(&self.units, &mut self.runq, e);
            self.units[e.idx()].q = Q::Run;
        } else {
            self.depletedq.insert(0, e);
            self.units[e.idx()].q = Q::Depleted;
        }
    }

    /// The replenishment timer at the head's deadline, or stopped.
    fn arm_repl_timer(&self, ctx: &mut XenCtx) {
        let at = self
            .replq
            .first()
            .map(|h| self.units[h.idx()].cur_deadline.max(0) as u64);
        ctx.set_timer(REPL_TIMER, at);
    }

    /// Xen: replq_insert.
    fn replq_insert(&mut self, ctx: &mut XenCtx, e: EntityId) {
        debug_assert!(!self.units[e.idx()].on_replq);
        self.units[e.idx()].on_replq = true;
        if Self::deadline_insert(&self.units, &mut self.replq, e) {
            self.arm_repl_timer(ctx);
        }
    }

    /// Xen: replq_remove (re-arms the timer if the head left).
    fn replq_remove(&mut self, ctx: &mut XenCtx, e: EntityId) {
        debug_assert!(self.units[e.idx()].on_replq);
        let i = self
            .replq
            .iter()
            .position(|&o| o == e)
            .expect("rtds: replq holds it");
        self.replq.remove(i);
        self.units[e.idx()].on_replq = false;
        if i == 0 {
            self.arm_repl_timer(ctx);
        }
    }

    /// Xen: replq_reinsert (the deadline changed).
    fn replq_reinsert(&mut self, ctx: &mut XenCtx, e: EntityId) {
        let i = self
            .replq
            .iter()
            .position(|&o| o == e)
            .expect("rtds: replq holds it");
        self.replq.remove(i);
        let first = Self::deadline_insert(&self.units, &mut self.replq, e);
        if i == 0 || first {
            self.arm_repl_timer(ctx);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Tickling and picking
    // ---------------------------------------------------------------------------------------

    /// Xen: runq_tickle. Among the pool's CPUs in `new`'s hard affinity not yet tickled,
    /// scanned from its own CPU in cycle order: the first idle one; else the CPU running the
    /// lowest-priority vCPU, if `new` strictly beats it.
    fn runq_tickle(&mut self, ctx: &mut XenCtx, new: EntityId) {
        let mut not_tickled = ctx.ent(new).params.hard_affinity.and(&self.online);
        not_tickled.minus_with(&self.tickled);
        let mut cpu = not_tickled.test_or_cycle(self.units[new.idx()].processor);
        let mut latest: Option<(EntityId, CpuId)> = None;
        while let Some(c) = cpu {
            let Some(cur) = ctx.cpu(c).curr else {
                return self.tickle(ctx, c);
            };
            let lower = match latest {
                None => true,
                Some((l, _)) => compare(&self.units[cur.idx()], &self.units[l.idx()]) < 0,
            };
            if lower {
                latest = Some((cur, c));
            }
            not_tickled.remove(c);
            cpu = not_tickled.cycle(c);
        }
        if let Some((l, c)) = latest {
            if compare(&self.units[l.idx()], &self.units[new.idx()]) < 0 {
                self.tickle(ctx, c);
            }
        }
    }

    fn tickle(&mut self, ctx: &mut XenCtx, cpu: CpuId) {
        ctx.trace(|| SchedEvent::Tickle { cpu });
        self.tickled.insert(cpu);
        ctx.resched(cpu);
    }

    /// Xen: runq_pick. The first queued vCPU allowed on `cpu`.
    fn runq_pick(&self, ctx: &mut XenCtx, cpu: CpuId) -> Option<EntityId> {
        let pick =
            self.runq.iter().copied().find(|&e| {
                self.online.contains(cpu) && ctx.ent(e).params.hard_affinity.contains(cpu)
            });
        if let Some(e) = pick {
            let u = &self.units[e.idx()];
            ctx.trace(|| SchedEvent::RunqPick {
                ent: e,
                deadline: Wide::new(u.cur_deadline),
                budget: sat32(u.cur_budget),
            });
        }
        pick
    }

    /// Xen: rt_res_pick. `processor(e)` if allowed, else the next allowed CPU after it.
    fn res_pick(&self, ctx: &XenCtx, e: EntityId) -> CpuId {
        let allowed = ctx.ent(e).params.hard_affinity.and(&self.online);
        allowed
            .test_or_cycle(self.units[e.idx()].processor)
            .expect("rtds: a vCPU's hard affinity holds an online CPU")
    }

    // ---------------------------------------------------------------------------------------
    // Replenishment
    // ---------------------------------------------------------------------------------------

    /// Xen: repl_timer_handler. Every vCPU whose deadline has passed gets its next one and a
    /// full budget (re-sorted if queued); then, newest first, a running one whose runqueue
    /// head now beats it has the head tickled, and a depleted queued one is tickled; all go
    /// back into `replq` and the timer is re-armed.
    fn repl_timer_handler(&mut self, ctx: &mut XenCtx) {
        let now = ctx.now() as i64;
        let mut done = std::mem::take(&mut self.repl_scratch);
        done.clear();
        while let Some(&e) = self.replq.first() {
            if now < self.units[e.idx()].cur_deadline {
                break;
            }
            self.replq.remove(0);
            self.update_deadline(ctx, e, now);
            done.push(e);
            if self.units[e.idx()].q != Q::None {
                self.q_remove(e);
                self.runq_insert(e);
            }
        }
        for &e in done.iter().rev() {
            let running = ctx.cpu(self.units[e.idx()].processor).curr == Some(e);
            if running && !self.runq.is_empty() {
                let head = self.runq[0];
                if compare(&self.units[e.idx()], &self.units[head.idx()]) < 0 {
                    self.runq_tickle(ctx, head);
                }
            } else if std::mem::take(&mut self.units[e.idx()].depleted)
                && self.units[e.idx()].q != Q::None
            {
                self.runq_tickle(ctx, e);
            }
            Self::deadline_insert(&self.units, &mut self.replq, e);
        }
        self.repl_scratch = done;
        if !self.replq.is_empty() {
            self.arm_repl_timer(ctx);
        }
    }
}

impl XenOps for Rtds {
    fn name(&self) -> &'static str {
        "rtds"
    }

    /// The replenishment timer.
    fn nr_timers(&self) -> u32 {
        1
    }

    /// Xen: rt_alloc_udata + rt_unit_insert. The vCPU takes its parameters, its CPU
    /// (`rt_res_pick`: its initial CPU if allowed) and, the deadline 0 having passed, its first
    /// deadline one period after boot (or after now for a domain created later); it starts
    /// blocked, so it joins no queue.
    fn insert_unit(&mut self, ctx: &mut XenCtx, e: EntityId) {
        let p = &ctx.ent(e).params;
        let (budget, period, extratime) = Self::attr_params(&p.xen);
        assert!(
            budget > 0 && budget <= period,
            "rtds: budget of {} must be in 1..=period",
            p.name
        );
        assert!(
            p.hard_affinity.intersects(&self.online),
            "rtds: hard affinity of {} holds no CPU",
            p.name
        );
        let processor = p.initial_cpu;
        put_unit(
            &mut self.units,
            e,
            Unit {
                period,
                budget,
                cur_budget: 0,
                cur_deadline: 0,
                last_start: 0,
                priority_level: 0,
                extratime,
                scheduled: false,
                delayed_runq_add: false,
                depleted: false,
                q: Q::None,
                on_replq: false,
                processor,
            },
            Unit::clone,
        );
        let cpu = self.res_pick(ctx, e);
        self.units[e.idx()].processor = cpu;
        let now = ctx.now() as i64;
        if now >= self.units[e.idx()].cur_deadline {
            self.update_deadline(ctx, e, now);
        }
        let n = self.units.len();
        for q in [
            &mut self.runq,
            &mut self.depletedq,
            &mut self.replq,
            &mut self.repl_scratch,
        ] {
            q.reserve(n.saturating_sub(q.len()));
        }
    }

    /// Xen: rt_unit_remove (domain destroyed): off its queue and `replq`.
    fn remove_unit(&mut self, ctx: &mut XenCtx, e: EntityId) {
        if self.units[e.idx()].q != Q::None {
            self.q_remove(e);
        }
        if self.units[e.idx()].on_replq {
            self.replq_remove(ctx, e);
        }
        self.units[e.idx()].delayed_runq_add = false;
    }

    /// Xen: rt_unit_wake. Nothing if it runs or is queued. A passed deadline gives a new one and
    /// a full budget (else it keeps both: deferrable server). If it is still being switched
    /// out it is queued at `context_saved`; otherwise it gets its replenishment event, is
    /// queued and tickles.
    fn wake(&mut self, ctx: &mut XenCtx, e: EntityId, _info: WakeInfo) {
        let u = &self.units[e.idx()];
        if ctx.cpu(u.processor).curr == Some(e) || u.q != Q::None {
            return;
        }
        let now = ctx.now() as i64;
        let missed = now >= u.cur_deadline;
        if missed {
            self.update_deadline(ctx, e, now);
        }
        if self.units[e.idx()].scheduled {
            self.units[e.idx()].delayed_runq_add = true;
            if missed && self.units[e.idx()].on_replq {
                self.replq_reinsert(ctx, e);
            }
            return;
        }
        self.replq_insert(ctx, e);
        self.runq_insert(e);
        self.runq_tickle(ctx, e);
    }

    /// Xen: rt_unit_sleep (domain pause, vCPU down, CPU removal). A running vCPU's CPU
    /// reschedules; a queued one leaves its queue and `replq`; one being switched out is not
    /// re-queued.
    fn sleep(&mut self, ctx: &mut XenCtx, e: EntityId) {
        let cpu = self.units[e.idx()].processor;
        if ctx.cpu(cpu).curr == Some(e) {
            ctx.resched(cpu);
        } else if self.units[e.idx()].q != Q::None {
            self.q_remove(e);
            self.replq_remove(ctx, e);
        } else {
            self.units[e.idx()].delayed_runq_add = false;
        }
    }

    /// RTDS has no yield hook: SCHEDOP_yield only reschedules.
    fn yield_(&mut self, _ctx: &mut XenCtx, _e: EntityId) {}

    /// Xen: rt_schedule. Burns the current vCPU; picks the first queued vCPU allowed here,
    /// dropping queued vCPUs that are not runnable (with their replenishment); keeps the
    /// current one if it is runnable, has budget and strictly beats the pick. A runnable
    /// current switched out is re-queued at `context_saved`. The slice is the budget left;
    /// idle gets no timer.
    fn do_schedule(&mut self, ctx: &mut XenCtx, cpu: CpuId) -> Pick {
        let now = ctx.now() as i64;
        let scurr = ctx.cpu(cpu).curr;
        let tickled = self.tickled.contains(cpu);
        ctx.trace(|| SchedEvent::Schedule {
            cpu,
            tickled,
            idle: scurr.is_none(),
        });
        self.tickled.remove(cpu);
        if let Some(c) = scurr {
            self.burn_budget(ctx, c, now);
        }
        let mut snext = loop {
            match self.runq_pick(ctx, cpu) {
                None => break None,
                Some(w) if ctx.unit_runnable(w) => break Some(w),
                Some(w) => {
                    self.q_remove(w);
                    self.replq_remove(ctx, w);
                }
            }
        };
        if let Some(c) = scurr {
            let u = &self.units[c.idx()];
            let beats = match snext {
                None => true,
                Some(n) => compare(u, &self.units[n.idx()]) > 0,
            };
            if ctx.unit_runnable(c) && u.cur_budget > 0 && beats {
                snext = scurr;
            }
            if snext != scurr && ctx.unit_runnable(c) {
                self.units[c.idx()].delayed_runq_add = true;
            }
        }
        let Some(n) = snext else {
            return Pick {
                next: None,
                slice: None,
            };
        };
        if snext != scurr {
            self.q_remove(n);
            self.units[n.idx()].scheduled = true;
        }
        let u = &mut self.units[n.idx()];
        u.last_start = now;
        u.processor = cpu;
        Pick {
            next: snext,
            slice: Some(u.cur_budget as u64),
        }
    }

    /// Xen: rt_context_saved. A vCPU switched out while runnable goes back to its queue and
    /// tickles; one that blocked loses its replenishment event.
    fn context_saved(&mut self, ctx: &mut XenCtx, e: EntityId) {
        let u = &mut self.units[e.idx()];
        u.scheduled = false;
        if std::mem::take(&mut u.delayed_runq_add) && ctx.unit_runnable(e) {
            self.runq_insert(e);
            self.runq_tickle(ctx, e);
        } else if self.units[e.idx()].on_replq {
            self.replq_remove(ctx, e);
        }
    }

    /// Xen: rt_res_pick.
    fn pick_resource(&mut self, ctx: &mut XenCtx, e: EntityId) -> CpuId {
        self.res_pick(ctx, e)
    }

    /// RTDS has no migrate hook: the core's `sched_set_res` moves `processor(v)`.
    fn migrate(&mut self, _ctx: &mut XenCtx, e: EntityId, cpu: CpuId) {
        self.units[e.idx()].processor = cpu;
    }

    /// Xen: rt_dom_cntl (putinfo): every vCPU of the domain takes its new budget, period and
    /// extratime; its current deadline and budget stay until its next replenishment.
    fn adjust(&mut self, ctx: &mut XenCtx, domain: u32) {
        for i in 0..self.units.len() {
            let p = &ctx.ent(EntityId(i as u32)).params;
            if p.group != domain {
                continue;
            }
            let (budget, period, extratime) = Self::attr_params(&p.xen);
            let u = &mut self.units[i];
            u.budget = budget;
            u.period = period;
            u.extratime = extratime;
        }
    }

    /// Xen: repl_timer_handler.
    fn on_timer(&mut self, ctx: &mut XenCtx, key: u32) {
        assert_eq!(key, REPL_TIMER, "rtds: one timer");
        self.repl_timer_handler(ctx);
    }

    /// The vCPU's budget left (ns) at its last accounting.
    fn probe(&self, e: EntityId) -> Option<i64> {
        self.units.get(e.idx()).map(|u| u.cur_budget)
    }

    /// Xen `processor(v)`.
    fn processor(&self, e: EntityId) -> CpuId {
        self.units[e.idx()].processor
    }

    /// Xen: rt_deinit_pdata (the pCPU left the pool; the replenishment timer, one for the
    /// pool, needs no move here).
    fn remove_cpu(&mut self, _ctx: &mut XenCtx, cpu: CpuId) {
        self.online.remove(cpu);
        self.tickled.remove(cpu);
    }

    /// Xen: rt_switch_sched (the pCPU joined the pool).
    fn add_cpu(&mut self, _ctx: &mut XenCtx, cpu: CpuId) {
        self.online.insert(cpu);
    }
}

#[cfg(test)]
mod tests;
