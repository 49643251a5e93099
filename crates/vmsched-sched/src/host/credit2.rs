//! Xen Credit2, the default host scheduler of Xen 4.12 and later, as in Xen 4.20
//! (`xen/common/sched/credit2.c`, tags RELEASE-4.20.0 to 4.20.4 and 4.21.0).
//!
//! # What it models
//!
//! Every vCPU holds *credit*, in nanoseconds of run time at the top weight. A running vCPU burns
//! credit at `max_weight / weight` credits per ns, where `max_weight` is the largest weight among
//! the vCPUs assigned to its runqueue, so the heaviest vCPU burns 1 credit/ns and one with half
//! its weight burns 2. Burning is lazy: it happens whenever the scheduler looks at a running vCPU
//! (its CPU reschedules, a wake scores it as a preemption victim, a reset); there is no tick.
//! The quotient's remainder is carried in `residual`, and credit never sinks below `CREDIT_MIN`.
//!
//! CPUs are grouped into *runqueues* by topology (per socket by default, at most 16 CPUs each; on
//! Arm, where every CPU claims socket 0 core 0, all CPUs share one runqueue). A runqueue is a
//! list of queued vCPUs sorted by credit, descending, FIFO among equals. A running vCPU is never
//! on it: a preempted vCPU is re-queued only once its context is saved (delayed insertion), which
//! is why, in 4.20.0 and 4.20.1, two busy vCPUs sharing a CPU alternate every 10 ms: when the
//! slice of the incoming one is computed nobody seems to wait. From 4.20.2 (and in 4.21) the
//! outgoing vCPU's credit is counted as waiting too (ERRATA X3, Xen commit ae648e9f80).
//!
//! A CPU that reschedules keeps its vCPU if it has run less than the ratelimit `R` since its
//! last real switch-in (unless it yields), and otherwise picks the first queued vCPU with more
//! credit, skipping vCPUs it may not run, vCPUs tickled for another CPU, and vCPUs of another CPU
//! whose lead is below MIGRATE_RESIST. If the picked vCPU (or the head of the queue) has run out
//! of credit, every vCPU assigned to the runqueue gets `CREDIT_INIT` more (twice that if the
//! picked one sits at the floor), clipped at `CREDIT_INIT + CARRYOVER_MAX`: an *epoch* ends, and
//! the load balancer may move vCPUs between runqueues. The slice (`csched2_runtime`) lets the
//! picked vCPU run until its credit falls to that of the best waiter, floored at
//! max(MIN_TIMER, R) and, only otherwise, capped at 10 ms (ERRATA X1: if / else-if).
//!
//! A waking vCPU goes to the runqueue of the CPU it last ran on and *tickles* one CPU of that
//! runqueue: its own CPU if exclusively pinned and idle; else an idle CPU of a fully idle core,
//! else any idle untickled CPU (soft affinity first, then hard); else the busy CPU whose vCPU it
//! beats by the largest margin, where a vCPU that ran less than `R − 50 µs` since its switch-in
//! is not preemptable at all. If nothing qualifies nothing is tickled, and nothing re-examines
//! the waiter when the ratelimit window ends (ERRATA X2, X14): it waits for the next reschedule
//! of some CPU of its runqueue, typically the end of a running vCPU's slice.
//!
//! Caps (percent of one CPU per domain) are enforced with a per-domain budget pool refilled
//! every `cap_period_ms` by a per-domain timer. A capped vCPU grabs a quota from the pool before
//! it runs, is *parked* when the pool is empty, and returns its leftover at switch-out. The
//! min_time floor beats the budget, so a vCPU may overrun; the debt is repaid from the pool at
//! its next grab (ERRATA X12).
//!
//! # Xen 4.2.1
//!
//! `version = "4.2.1"` (the `v42` flag) selects the experimental Credit2 of Xen 4.2.1
//! (`xen/common/sched_credit2.c`): 2 ms maximum slice and a 2 ms idle timer, one runqueue per
//! socket (id = socket id, CPU 0 in runqueue 0, no size cap), insertion on the initial CPU's
//! runqueue, `choose_cpu` by `b_avgload` and first CPU, no ratelimit, caps, yield hook or
//! affinity, burning without remainder or floor, a reset on the picked vCPU's credit alone that
//! burns nobody, the 4.2 tickle and candidate rules, an unkicked balancer migration of a running
//! vCPU (ERRATA X12) and the 4.2 load average. The functions carrying a 4.2.1 form are named
//! `*_4_2` or branch on `v42`; docs/credit2.md lists every rule with its test.
//!
//! # Engine mapping
//!
//! Credit2 implements the Xen ops ([`XenOps`]) and runs on the Xen core
//! (`host/xen_core.rs`, `xen/common/sched/core.c`): `Credit2::sched` builds the pair. Entity =
//! vCPU; `EntityParams.group` = domain index, `xen.weight` = domain weight, `xen.cap_pct` = domain cap,
//! `initial_cpu` = `processor(v)` at creation. `insert_unit` is `csched2_unit_insert`,
//! `do_schedule` is `csched2_schedule`, `context_saved` is `csched2_context_saved`, `wake` is
//! `csched2_unit_wake`, `yield_` is `csched2_unit_yield`, `pick_resource` is `csched2_res_pick`
//! and `migrate` is `csched2_unit_migrate`; the policy's timers are the domains' replenishment
//! timers (key = domain index). The core owns the pause flags: parking (`park_unit`) and a
//! balancer's migration of a running vCPU set them through the context, so the core calls
//! `wake` only for runnable vCPUs, completes migrations after `context_saved`, and has the
//! engine account a parked vCPU `offline`. Xen calls no hook when a vCPU blocks: the next
//! `do_schedule` sees it not runnable.
//!
//! # Simplifications (deliberate)
//!
//! * One cpupool holding every online CPU; no tasklets (the idle vCPU is chosen only when
//!   nothing else is runnable); affinities change only when a CPU going offline breaks them.
//!   CPU hot-plug (`remove_cpu`, `add_cpu`: credit2/hotplug.rs) keeps the runqueue masks. Weight, cap and
//!   ratelimit change at run time (`adjust`, `adjust_global`: credit2/lifecycle.rs), and
//!   domain pause goes through `sleep`; vCPUs of a destroyed domain leave through `remove_unit`.
//! * Every try-lock succeeds (single-threaded simulation): `csched2_res_pick` never uses its
//!   fallback CPU and `balance_load` never gives up or retries.
//! * A cap is applied as if set right after the domain's vCPUs were created (pool full, first
//!   replenishment one period after build, every vCPU starting with budget 0). A cap above
//!   100 × nr_vcpus, which `xl` rejects, is applied as given.
//! * SMT siblings are CPUs with the same socket and core but different `thread` ids; CPUs that
//!   share socket, core *and* thread id (Arm reports core 0 for every CPU) are not siblings.
//! * Timer slop (`timer_slop_ns`) and the timer entry latency (`timer_entry_ns`) are the Xen
//!   core's concern; runstates and the idle loop are the core's and the engine's.
//! * Trace records (TRC_CSCHED2_*) are not emitted.
//! * `initial_cpu` is only where the vCPU starts: at insertion `csched2_res_pick` chooses its
//!   CPU by runqueue load, as upstream's `csched2_unit_insert` does (the fallback that would
//!   keep `initial_cpu` is taken only when a try-lock fails, which never happens here).
//!
//! # Where the source is followed over the spec's wording
//!
//! * A queued capped vCPU that fails to grab budget is parked *and ends the candidate scan*
//!   (upstream breaks after the first vCPU that passes the skip tests), so the CPU may pick
//!   idle this time even with an uncapped vCPU queued behind it.
//! * Continuing to run the current vCPU does not sample the load (`update_load(0)` is called
//!   on the idle path only).
//! * Equal credit never preempts (`runq_candidate` wants strictly more). With timers entered
//!   exactly at their deadline (`timer_entry_ns = 0`), two equal spinners under 4.20.2+ and
//!   R = 0 tie and run 1 ms each; with the Xen core's timer entry latency (default 1 µs) the
//!   vCPU preempted by its slice timer has burned a little more than its slice, the tie breaks
//!   as on hardware, and the slices are ERRATA X3's 0.5 ms.
//!
//! # Source layout
//!
//! This file holds the state, the hooks and the scheduling decision (credit, tickling,
//! candidate, slice). Beside it, in `credit2/`: `params.rs` (the release, the runqueue
//! arrangement and the boot and `xl sched-credit2 -s` parameters, with their validation),
//! `runqueue.rs` (arrangement by topology, SMT idleness, assignment and the sorted runqueue),
//! `balance.rs` (load tracking, placement, migration, balancing), `caps.rs` (budgets, parking,
//! replenishment), `lifecycle.rs` and `hotplug.rs`. The unit tests are in `credit2/tests.rs`
//! (shared helpers) and `credit2/tests/`, one file per topic.

use crate::host::xen_core::{put_unit, XenCore, XenCtx, XenOps};
use vmsched_core::cpuset::{CpuSet, MAX_CPUS};
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{CpuTopo, GlobalParam, Pick, WakeInfo};
use vmsched_core::trace::{sat32, SchedEvent};

mod balance;
mod caps;
mod hotplug;
mod lifecycle;
mod params;
mod runqueue;

pub use params::{check_scenario_4_2, Credit2Params, Credit2Version, RunqueueArrangement};

/// Credit a vCPU starts with and receives at each reset: 10 ms at the top weight.
const CREDIT_INIT: i64 = 10_000_000;
/// Floor of burning.
const CREDIT_MIN: i64 = -CREDIT_INIT;
/// The idle vCPU's constant credit, below any real vCPU's.
const IDLE_CREDIT: i64 = CREDIT_MIN - 1;
/// Shortest slice.
const MIN_TIMER: i64 = 500_000;
/// Longest slice (4.8+).
const MAX_TIMER: i64 = CREDIT_INIT;
/// Longest slice in 4.2.1, also the idle vCPU's timer there.
const MAX_TIMER_4_2: i64 = 2_000_000;
/// The idle vCPU's credit in 4.2.1.
const IDLE_CREDIT_4_2: i64 = -(1 << 30);
/// 4.2.1's load window (`credit2_load_window_shift`, on `now >> 10` samples), which is also
/// its load precision.
const LOAD_SHIFT_4_2: u32 = 18;
/// Credit a vCPU may keep above `CREDIT_INIT` across a reset.
const CARRYOVER_MAX: i64 = MIN_TIMER;
/// Credit bonus of a vCPU pulled onto another CPU of its runqueue.
const MIGRATE_COMPENSATION: i64 = 50_000;
/// Slack of the preemptability test at wake time (4.10+).
const RATELIMIT_TICKLE_TOLERANCE: i64 = 50_000;
/// An epoch ends when the best credit is at or below this.
const CREDIT_RESET: i64 = 0;
/// Load samples are taken on `now >> 10` (about microseconds).
const LOADAVG_GRANULARITY_SHIFT: u32 = 10;

/// Per-vCPU state (Xen `struct csched2_unit`).
#[derive(Clone, Debug)]
struct Unit {
    credit: i64,
    weight: i64,
    /// Remainder of the last credit division.
    residual: i64,
    /// Budget in ns; meaningful only when the domain is capped.
    budget: i64,
    /// When burning was last accounted.
    start_time: i64,
    /// Last real switch-in (the unit's runstate entry time while running).
    switch_in: i64,
    avgload: i64,
    load_last_update: i64,
    /// Assigned runqueue.
    rq: usize,
    /// Xen `processor(v)`.
    processor: CpuId,
    tickled_cpu: Option<CpuId>,
    /// Target runqueue of a pending balancer migration (CSFLAG_runq_migrate_request).
    migrate_rq: Option<usize>,
    dom: usize,
    on_runq: bool,
    /// Running on, or being switched off, a CPU (CSFLAG_scheduled).
    scheduled: bool,
    delayed_runq_add: bool,
    yield_: bool,
    /// Hard affinity of a single CPU (CSFLAG_pinned).
    pinned: bool,
    hard: CpuSet,
    soft: CpuSet,
    soft_and_hard: CpuSet,
    /// Xen `has_soft_affinity`.
    has_soft: bool,
}

/// Per-runqueue state (Xen `struct csched2_runqueue_data`).
#[derive(Clone, Debug)]
struct Runqueue {
    /// Queued vCPUs, credit-descending.
    runq: Vec<EntityId>,
    /// Every vCPU assigned here, runnable or not, in assignment order.
    svc: Vec<EntityId>,
    refcnt: u32,
    nr_cpus: u32,
    active: CpuSet,
    idle: CpuSet,
    tickled: CpuSet,
    smt_idle: CpuSet,
    /// Runnable vCPUs, including running ones.
    load: i64,
    load_last_update: i64,
    avgload: i64,
    b_avgload: i64,
    max_weight: i64,
    pick_bias: CpuId,
}

/// Per-domain state (Xen `struct csched2_dom`).
#[derive(Clone, Debug, Default)]
struct Domain {
    cap_pct: u32,
    nr_units: u32,
    tot_budget: i64,
    /// The pool.
    budget: i64,
    /// Each vCPU's quota per grab.
    budget_quota: i64,
    next_repl: i64,
    /// Parked vCPUs in parking order (Xen walks them newest first).
    parked: Vec<EntityId>,
}

/// Credit2 as the engine runs it: the policy on the Xen core.
pub type Credit2Sched = XenCore<Credit2>;

/// The Credit2 scheduler of one pool holding every CPU of the level.
pub struct Credit2 {
    params: Credit2Params,
    /// Xen 4.2.1 rather than 4.20 (`params.version.is_4_2()`).
    v42: bool,
    ratelimit: i64,
    migrate_resist: i64,
    cap_period: i64,
    /// Window shift on `now >> 10` samples.
    load_window: u32,
    load_precision: u32,
    online: CpuSet,
    /// For each CPU, its SMT siblings within its runqueue (itself included).
    sibling_mask: Vec<CpuSet>,
    cpu_rq: Vec<usize>,
    rqs: Vec<Runqueue>,
    units: Vec<Unit>,
    doms: Vec<Domain>,
    /// Masks `runq_tickle` refills in place (no state between calls).
    scratch: [CpuSet; 2],
}

impl Credit2 {
    /// Builds the runqueues for `cpus` (CPU `i` is `cpus[i]`, brought up in id order).
    /// Panics if `params` do not pass [`Credit2Params::validate`].
    pub fn new(params: Credit2Params, cpus: &[CpuTopo], nr_domains: u32) -> Credit2 {
        if let Err(e) = params.validate() {
            panic!("Credit2::new: invalid parameters: {e}");
        }
        let n = cpus.len();
        assert!(
            (1..=MAX_CPUS).contains(&n),
            "credit2: needs 1..={MAX_CPUS} CPUs, got {n}"
        );
        let v42 = params.version.is_4_2();
        let mut s = Credit2 {
            v42,
            // 4.2.1 has no ratelimit.
            ratelimit: if v42 {
                0
            } else {
                params.ratelimit_us as i64 * 1000
            },
            migrate_resist: params.migrate_resist_us as i64 * 1000,
            cap_period: params.cap_period_ms as i64 * 1_000_000,
            load_window: if v42 {
                LOAD_SHIFT_4_2
            } else {
                params.load_window_shift - LOADAVG_GRANULARITY_SHIFT
            },
            load_precision: if v42 {
                LOAD_SHIFT_4_2
            } else {
                params.load_precision_shift
            },
            params,
            online: CpuSet::first_n(n),
            sibling_mask: vec![CpuSet::empty(); n],
            cpu_rq: vec![0; n],
            rqs: Vec::new(),
            units: Vec::new(),
            doms: vec![Domain::default(); nr_domains as usize],
            scratch: [CpuSet::empty(); 2],
        };
        let max_per_rq = {
            let min_rqs = (n - 1) / s.params.max_cpus_runqueue as usize + 1;
            (n / min_rqs) as u32
        };
        for c in 0..n {
            let r = s.cpu_add_to_runqueue(cpus, c, max_per_rq);
            s.init_cpu_runqueue(cpus, c, r);
        }
        s
    }

    /// Credit2 on the Xen core, with the timer slop and timer entry latency of `params`.
    pub fn sched(params: Credit2Params, cpus: &[CpuTopo], nr_domains: u32) -> Credit2Sched {
        let (slop, entry) = (params.timer_slop_ns, params.timer_entry_ns);
        XenCore::with_timers(Credit2::new(params, cpus, nr_domains), slop, entry)
    }

    /// Number of runqueues.
    pub fn nr_runqueues(&self) -> usize {
        self.rqs.len()
    }

    /// The runqueue of `cpu`.
    pub fn runqueue_of(&self, cpu: CpuId) -> usize {
        self.cpu_rq[cpu.idx()]
    }

    /// Xen `processor(v)`: where `e` last ran or is queued.
    pub fn processor(&self, e: EntityId) -> CpuId {
        self.units[e.idx()].processor
    }

    // ---------------------------------------------------------------------------------------
    // Small helpers
    // ---------------------------------------------------------------------------------------

    #[inline]
    fn credit_of(&self, e: Option<EntityId>) -> i64 {
        let idle = if self.v42 {
            IDLE_CREDIT_4_2
        } else {
            IDLE_CREDIT
        };
        e.map_or(idle, |e| self.units[e.idx()].credit)
    }

    /// Xen `unit_runnable`: wants a CPU and no pause flag (`parked`, `migrating`) is set.
    #[inline]
    fn runnable(&self, ctx: &XenCtx, e: EntityId) -> bool {
        ctx.unit_runnable(e)
    }

    /// Xen: tickle_cpu
    fn tickle_cpu(&mut self, ctx: &mut XenCtx, cpu: CpuId, r: usize) {
        self.rqs[r].tickled.insert(cpu);
        self.smt_idle_mask_clear(r, cpu);
        ctx.trace(|| SchedEvent::Tickle { cpu });
        ctx.resched(cpu);
    }

    // ---------------------------------------------------------------------------------------
    // Credit
    // ---------------------------------------------------------------------------------------

    /// Xen: burn_credits (with t2c_update). Returns the time charged (≤ 0: nothing), for the
    /// trace.
    fn burn_credits(&mut self, e: EntityId, now: i64) -> i64 {
        let capped = self.has_cap(e);
        let u = &mut self.units[e.idx()];
        let delta = now - u.start_time;
        if delta <= 0 {
            return delta;
        }
        if self.v42 {
            // 4.2.1: t2c rounds down, keeps no remainder and has no floor.
            u.credit -= delta * self.rqs[u.rq].max_weight / u.weight;
            u.start_time = now;
            return delta;
        }
        let val = delta * self.rqs[u.rq].max_weight + u.residual;
        u.residual = val % u.weight;
        u.credit = (u.credit - val / u.weight).max(CREDIT_MIN);
        if capped {
            u.budget -= delta;
        }
        u.start_time = now;
        delta
    }

    /// The trace event of a burn of `delta` ns (Xen traces every `burn_credits` call).
    fn burn_event(&self, e: EntityId, delta: i64) -> SchedEvent {
        let credit = sat32(self.units[e.idx()].credit);
        SchedEvent::CreditBurn {
            ent: e,
            credit,
            delta: sat32(delta),
        }
    }

    /// Xen: c2t
    #[inline]
    fn c2t(&self, r: usize, credit: i64, e: EntityId) -> i64 {
        credit * self.units[e.idx()].weight / self.rqs[r].max_weight
    }

    /// Xen: reset_credit
    fn reset_credit(&mut self, ctx: &mut XenCtx, cpu: CpuId, now: i64, snext: EntityId) {
        let r = self.cpu_rq[cpu.idx()];
        let mut reset = CREDIT_INIT;
        if !self.v42 && self.units[snext.idx()].credit == CREDIT_MIN {
            reset += CREDIT_INIT;
        }
        for i in 0..self.rqs[r].svc.len() {
            let e = self.rqs[r].svc[i];
            let svc_cpu = self.units[e.idx()].processor;
            // ERRATA X12: 4.2.1 burns nobody here; a running vCPU's unburned time is forgiven
            // (its start_time moves to now below).
            if !self.v42 && ctx.cpu(svc_cpu).curr == Some(e) {
                let delta = self.burn_credits(e, now);
                ctx.trace(|| self.burn_event(e, delta));
                if self.has_cap(e) && self.units[e.idx()].budget <= 0 {
                    self.tickle_cpu(ctx, svc_cpu, r);
                }
            }
            let u = &mut self.units[e.idx()];
            let start = sat32(u.credit);
            u.credit = (u.credit + reset).min(CREDIT_INIT + CARRYOVER_MAX);
            u.start_time = now;
            let end = sat32(u.credit);
            ctx.trace(|| SchedEvent::CreditReset { ent: e, start, end });
        }
    }

    // ---------------------------------------------------------------------------------------
    // Wake-up: tickling
    // ---------------------------------------------------------------------------------------

    /// Xen: is_preemptable
    #[inline]
    fn is_preemptable(&self, e: EntityId, now: i64) -> bool {
        self.ratelimit <= RATELIMIT_TICKLE_TOLERANCE
            || now - self.units[e.idx()].switch_in > self.ratelimit - RATELIMIT_TICKLE_TOLERANCE
    }

    /// Xen: tickle_score
    fn tickle_score(&mut self, ctx: &XenCtx, now: i64, new: EntityId, cpu: CpuId) -> i64 {
        let Some(cur) = ctx.cpu(cpu).curr else {
            return -1;
        };
        if !self.is_preemptable(cur, now) {
            return -1;
        }
        self.burn_credits(cur, now);
        let (n, c) = (&self.units[new.idx()], &self.units[cur.idx()]);
        let mut score = n.credit - c.credit;
        if n.processor != cpu {
            score -= self.migrate_resist;
        }
        if score > 0 {
            if n.soft.contains(cpu) {
                score += CREDIT_INIT;
            }
            if !c.soft.contains(cpu) {
                score += CREDIT_INIT;
            }
        }
        score
    }

    /// Xen 4.2.1: runq_tickle. No affinity, no SMT, no ratelimit: the woken vCPU's own CPU if
    /// its current vCPU (after burning; the idle vCPU counts at its constant credit) has less
    /// credit; else the first idle untickled CPU of the runqueue; else the busy untickled CPU
    /// other than its own whose vCPU has the least credit, if the woken one leads it by at
    /// least MIGRATE_RESIST.
    fn runq_tickle_4_2(&mut self, ctx: &mut XenCtx, new: EntityId, now: i64) {
        let u = &self.units[new.idx()];
        let (cpu, r, credit) = (u.processor, u.rq, u.credit);
        let cur = ctx.cpu(cpu).curr;
        if let Some(c) = cur {
            let delta = self.burn_credits(c, now);
            ctx.trace(|| self.burn_event(c, delta));
        }
        if self.credit_of(cur) < credit {
            return self.tickle_cpu(ctx, cpu, r);
        }
        let rq = &self.rqs[r];
        if let Some(i) = rq.idle.minus(&rq.tickled).first() {
            return self.tickle_cpu(ctx, i, r);
        }
        let mut busy = rq.active.minus(&rq.idle);
        busy.minus_with(&rq.tickled);
        busy.remove(cpu);
        let (mut lowest, mut ipid) = (1i64 << 30, None);
        while let Some(i) = busy.first() {
            busy.remove(i);
            let cur = ctx.cpu(i).curr;
            if let Some(c) = cur {
                let delta = self.burn_credits(c, now);
                ctx.trace(|| self.burn_event(c, delta));
            }
            let c = self.credit_of(cur);
            if c < lowest {
                lowest = c;
                ipid = Some(i);
            }
        }
        if let Some(i) = ipid {
            if lowest + self.migrate_resist <= credit {
                self.tickle_cpu(ctx, i, r);
            }
        }
    }

    /// Xen: runq_tickle
    fn runq_tickle(&mut self, ctx: &mut XenCtx, new: EntityId, now: i64) {
        if self.v42 {
            return self.runq_tickle_4_2(ctx, new, now);
        }
        let u = &self.units[new.idx()];
        let (cpu, r) = (u.processor, u.rq);
        let rq = &self.rqs[r];
        let tickle = |s: &mut Self, ctx: &mut XenCtx, ipid: CpuId| {
            s.tickle_cpu(ctx, ipid, r);
            s.units[new.idx()].tickled_cpu = Some(ipid);
        };
        if u.pinned && rq.idle.contains(cpu) && !rq.tickled.contains(cpu) {
            return tickle(self, ctx, cpu);
        }
        // The masks are built in `self.scratch`, refilled word by word: a fresh set would zero
        // its whole 512-byte array first (a `memset` per mask, every wake-up).
        let [balance, m] = &mut self.scratch;
        for soft_step in [true, false] {
            if soft_step && !u.has_soft {
                continue;
            }
            balance.assign_and(
                if soft_step { &u.soft_and_hard } else { &u.hard },
                &self.online,
            );
            // The fully idle CPUs.
            if self.params.smt_power_savings {
                m.assign_minus(&rq.idle, &rq.smt_idle);
                m.and_with(balance);
            } else {
                m.assign_and(&rq.smt_idle, balance);
            }
            if let Some(i) = m.test_or_cycle(cpu) {
                return tickle(self, ctx, i);
            }
            // The idlers.
            m.assign_and(&rq.idle, balance);
            m.minus_with(&rq.tickled);
            if let Some(i) = m.test_or_cycle(cpu) {
                return tickle(self, ctx, i);
            }
        }
        // The busy CPUs, visited in place (`tickle_score` does not touch the masks).
        let busy = &mut self.scratch[1];
        busy.assign_minus(&rq.active, &rq.idle);
        busy.minus_with(&rq.tickled);
        busy.and_with(&u.hard);
        busy.and_with(&self.online);
        let (mut max, mut ipid) = (0i64, None);
        if busy.contains(cpu) {
            let score = self.tickle_score(ctx, now, new, cpu);
            if score > max {
                max = score;
                ipid = Some(cpu);
                if self.units[new.idx()].soft.contains(cpu) {
                    return tickle(self, ctx, cpu);
                }
            }
        }
        let mut next = self.scratch[1].first();
        while let Some(i) = next {
            if i != cpu {
                let score = self.tickle_score(ctx, now, new, i);
                if score > max {
                    max = score;
                    ipid = Some(i);
                }
            }
            next = self.scratch[1].next_after(i);
        }
        if let Some(i) = ipid {
            tickle(self, ctx, i);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Scheduling decision
    // ---------------------------------------------------------------------------------------

    /// Xen 4.2.1: runq_candidate. Default = the current vCPU if runnable, else idle; queued
    /// vCPUs of another CPU are skipped while their credit is below default + MIGRATE_RESIST
    /// (strictly: equal is not skipped, ERRATA X12); the first vCPU not skipped is taken if it
    /// has more credit than the default, and the scan stops there either way. No ratelimit,
    /// yield, affinity, tickled-for-another-CPU or budget test.
    fn runq_candidate_4_2(
        &self,
        ctx: &XenCtx,
        r: usize,
        scurr: Option<EntityId>,
        cpu: CpuId,
    ) -> Option<EntityId> {
        let mut snext = scurr.filter(|&c| self.runnable(ctx, c));
        for &w in &self.rqs[r].runq {
            let u = &self.units[w.idx()];
            if u.processor != cpu && u.credit < self.credit_of(snext) + self.migrate_resist {
                continue;
            }
            if u.credit > self.credit_of(snext) {
                snext = Some(w);
            }
            break;
        }
        snext
    }

    /// Xen: runq_candidate
    fn runq_candidate(
        &mut self,
        ctx: &mut XenCtx,
        r: usize,
        scurr: Option<EntityId>,
        cpu: CpuId,
        now: i64,
    ) -> Option<EntityId> {
        let mut yield_ = false;
        let mut snext = None;
        if let Some(c) = scurr {
            yield_ = std::mem::take(&mut self.units[c.idx()].yield_);
            let runnable = self.runnable(ctx, c);
            let u = &self.units[c.idx()];
            if !yield_ && self.ratelimit > 0 && runnable && now - u.switch_in < self.ratelimit {
                let runtime = (now - u.switch_in) as u32;
                ctx.trace(|| SchedEvent::Ratelimit { ent: c, runtime });
                return scurr;
            }
            let mut soft_aff_preempt = false;
            if u.has_soft && !u.soft_and_hard.contains(cpu) {
                let rq = &self.rqs[r];
                let m = u
                    .soft_and_hard
                    .and(&rq.idle)
                    .minus(&rq.tickled)
                    .and(&self.online);
                soft_aff_preempt = !m.is_empty();
            }
            if runnable && !soft_aff_preempt {
                snext = scurr;
            }
        }
        let mut i = 0;
        while i < self.rqs[r].runq.len() {
            let w = self.rqs[r].runq[i];
            i += 1;
            let u = &self.units[w.idx()];
            if !self.runnable(ctx, w) || !u.hard.contains(cpu) {
                continue;
            }
            if matches!(u.tickled_cpu, Some(t) if t != cpu && self.rqs[r].tickled.contains(t)) {
                continue;
            }
            if u.processor != cpu && self.credit_of(snext) + self.migrate_resist > u.credit {
                continue;
            }
            if (yield_ || u.credit > self.credit_of(snext))
                && (!self.has_cap(w) || self.unit_grab_budget(ctx, w))
            {
                snext = Some(w);
            }
            break;
        }
        snext
    }

    /// Xen 4.2.1: csched_runtime. The slice lets `snext` run until its credit falls to the
    /// head's (or to 0 if that comes first), clamped to [MIN_TIMER, 2 ms].
    fn csched2_runtime_4_2(&self, cpu: CpuId, snext: EntityId) -> i64 {
        let r = self.cpu_rq[cpu.idx()];
        let credit = self.units[snext.idx()].credit;
        let mut time = self.c2t(r, credit, snext);
        if let Some(h) = self.rqs[r].runq.first() {
            let ntime = self.c2t(r, credit - self.units[h.idx()].credit, snext);
            time = time.min(ntime);
        }
        time.clamp(MIN_TIMER, MAX_TIMER_4_2)
    }

    /// Xen: csched2_runtime. `inflight` is the outgoing vCPU's credit when it counts (X3).
    fn csched2_runtime(
        &self,
        cpu: CpuId,
        scurr: Option<EntityId>,
        snext: EntityId,
        now: i64,
        inflight: i64,
    ) -> i64 {
        let r = self.cpu_rq[cpu.idx()];
        let u = &self.units[snext.idx()];
        let mut min_time = MIN_TIMER;
        if self.ratelimit > 0 {
            let rl = if scurr == Some(snext) {
                u.switch_in + self.ratelimit - now
            } else {
                self.ratelimit
            };
            min_time = min_time.max(rl);
        }
        let mut rt_credit = u.credit;
        let mut waiting = match self.rqs[r].runq.first() {
            Some(h) if self.units[h.idx()].credit > 0 => self.units[h.idx()].credit,
            _ => 0,
        };
        waiting = waiting.max(inflight);
        if waiting > 0 {
            rt_credit = u.credit - waiting;
        }
        let mut time = if rt_credit > 0 {
            self.c2t(r, rt_credit, snext)
        } else {
            0
        };
        if self.has_cap(snext) {
            time = time.min(u.budget);
        }
        // ERRATA X1: the floor first, and the 10 ms cap only otherwise.
        if time < min_time {
            min_time
        } else if time > MAX_TIMER {
            MAX_TIMER
        } else {
            time
        }
    }
}

impl XenOps for Credit2 {
    fn name(&self) -> &'static str {
        "credit2"
    }

    /// 4.2.1's records have other ids and payloads (docs/trace.md).
    fn trace_class(&self) -> &'static str {
        if self.v42 {
            "credit2-4.2.1"
        } else {
            "credit2"
        }
    }

    /// One budget-replenishment timer per domain (key = domain index).
    fn nr_timers(&self) -> u32 {
        self.doms.len() as u32
    }

    /// Xen: csched2_alloc_udata + csched2_unit_insert (+ csched2_aff_cntl, and the cap of the
    /// domain applied through csched2_dom_cntl). Picks the vCPU's CPU by load and assigns it to
    /// that CPU's runqueue; the vCPU starts blocked.
    fn insert_unit(&mut self, ctx: &mut XenCtx, e: EntityId) {
        let p = &ctx.ent(e).params;
        let now = ctx.now() as i64;
        let d = p.group as usize;
        assert!(
            d < self.doms.len(),
            "credit2: vCPU {} names domain {d} of {}",
            p.name,
            self.doms.len()
        );
        assert!(
            (1..=65535).contains(&p.xen.weight),
            "credit2: weight of {} must be in 1..=65535",
            p.name
        );
        // 4.2.1 has no affinity in Credit2: every vCPU may run anywhere (build.rs refuses
        // pinning under it).
        let hard = if self.v42 {
            self.online
        } else {
            p.hard_affinity.and(&self.online)
        };
        assert!(
            !hard.is_empty(),
            "credit2: hard affinity of {} holds no CPU",
            p.name
        );
        let soft = if self.v42 {
            self.online
        } else {
            p.soft_affinity
        };
        let soft_and_hard = soft.and(&hard);
        let has_soft =
            !soft_and_hard.is_empty() && !hard.is_subset(&soft) && !self.online.is_subset(&soft);
        put_unit(
            &mut self.units,
            e,
            Unit {
                credit: CREDIT_INIT,
                weight: p.xen.weight as i64,
                residual: 0,
                budget: 0,
                start_time: now,
                switch_in: now,
                avgload: 1i64 << (self.load_precision - 1),
                load_last_update: now >> LOADAVG_GRANULARITY_SHIFT,
                rq: 0,
                processor: p.initial_cpu,
                tickled_cpu: None,
                migrate_rq: None,
                dom: d,
                on_runq: false,
                scheduled: false,
                delayed_runq_add: false,
                yield_: false,
                pinned: hard.len() == 1,
                hard,
                soft,
                soft_and_hard,
                has_soft,
            },
            |u| Unit {
                dom: usize::MAX,
                ..u.clone()
            },
        );
        // 4.2.1's csched_vcpu_insert assigns the vCPU to the runqueue of its initial CPU;
        // 4.20's picks a CPU by runqueue load first.
        let cpu = if self.v42 {
            p.initial_cpu
        } else {
            self.csched2_res_pick(e, None)
        };
        self.units[e.idx()].processor = cpu;
        self.runq_assign(e, self.cpu_rq[cpu.idx()]);

        let cap = p.xen.cap_pct;
        assert!(
            !(self.v42 && cap != 0),
            "credit2: Xen 4.2.1 has no caps (vCPU {})",
            p.name
        );
        let dom = &mut self.doms[d];
        dom.nr_units += 1;
        assert!(
            dom.nr_units == 1 || dom.cap_pct == cap,
            "credit2: every vCPU of domain {d} must carry the same cap"
        );
        dom.cap_pct = cap;
        if cap != 0 {
            dom.tot_budget = self.cap_period * cap as i64 / 100;
            dom.budget_quota = (dom.tot_budget / dom.nr_units as i64).max(MIN_TIMER);
            dom.budget = dom.tot_budget;
            dom.next_repl = now + self.cap_period;
            ctx.set_timer(d as u32, Some(dom.next_repl as u64));
        }
        // Preallocate so that hooks never grow a vector.
        let n = self.units.len();
        for rq in &mut self.rqs {
            rq.runq.reserve(n.saturating_sub(rq.runq.len()));
            rq.svc.reserve(n.saturating_sub(rq.svc.len()));
        }
        let dn = self.doms[d].nr_units as usize;
        self.doms[d].parked.reserve(dn);
    }

    /// Xen: csched2_unit_wake. Queues `e` on the runqueue of `processor(e)` and tickles.
    /// A parked vCPU is not runnable for Xen, which calls no hook; it is queued when unparked.
    fn wake(&mut self, ctx: &mut XenCtx, e: EntityId, _info: WakeInfo) {
        // The core calls this only for a runnable unit (no pause flag: XenOps::wake).
        let u = &self.units[e.idx()];
        if ctx.cpu(u.processor).curr == Some(e) || u.on_runq {
            return;
        }
        if u.scheduled {
            self.units[e.idx()].delayed_runq_add = true;
            return;
        }
        let now = ctx.now() as i64;
        let r = u.rq;
        self.update_load(ctx, r, Some(e), 1, now);
        self.runq_insert(e);
        self.runq_tickle(ctx, e, now);
    }

    /// Xen: csched2_unit_yield. The flag is consumed by the next `runq_candidate`, where it
    /// bypasses the ratelimit and the credit comparison (not migration resistance).
    /// 4.2.1 has no yield hook: the core only reschedules.
    fn yield_(&mut self, _ctx: &mut XenCtx, e: EntityId) {
        if self.v42 {
            return;
        }
        self.units[e.idx()].yield_ = true;
    }

    /// Xen: csched2_schedule (with runq_candidate and csched2_runtime). Called whenever `cpu`
    /// reschedules (its slice timer, a tickle, or its vCPU blocked or yielded). Burns the current
    /// vCPU, picks the next one, may end the epoch (credit reset, then load balancing, which may
    /// tickle other CPUs), and returns the slice; idle gets no timer. A preempted vCPU is not
    /// queued here but in `context_saved`.
    fn do_schedule(&mut self, ctx: &mut XenCtx, cpu: CpuId) -> Pick {
        let now = ctx.now() as i64;
        let r = self.cpu_rq[cpu.idx()];
        let scurr = ctx.cpu(cpu).curr;

        let tickled = self.rqs[r].tickled.contains(cpu);
        if tickled {
            self.rqs[r].tickled.remove(cpu);
            self.smt_idle_mask_set(r, cpu);
        }
        ctx.trace(|| SchedEvent::RunqSchedule {
            cpu,
            runq: r as u32,
            tickled,
            idle: scurr.is_none(),
            smt_idle: self.rqs[r].smt_idle.contains(cpu),
        });
        if let Some(c) = scurr {
            let delta = self.burn_credits(c, now);
            ctx.trace(|| self.burn_event(c, delta));
            if self.has_cap(c) && self.units[c.idx()].budget <= 0 {
                self.unit_grab_budget(ctx, c);
            }
        }

        let snext = if self.v42 {
            self.runq_candidate_4_2(ctx, r, scurr, cpu)
        } else {
            self.runq_candidate(ctx, r, scurr, cpu, now)
        };

        if let Some(c) = scurr {
            if snext != scurr && self.runnable(ctx, c) {
                self.units[c.idx()].delayed_runq_add = true;
            }
        }

        let Some(n) = snext else {
            if !self.rqs[r].idle.contains(cpu) {
                self.rqs[r].idle.insert(cpu);
                self.smt_idle_mask_set(r, cpu);
            }
            self.update_load(ctx, r, None, 0, now);
            // 4.2.1 gives the idle vCPU a 2 ms timer; 4.20 none.
            return Pick {
                next: None,
                slice: self.v42.then_some(MAX_TIMER_4_2 as u64),
            };
        };

        if snext != scurr {
            self.runq_remove(n);
            self.units[n.idx()].scheduled = true;
        }
        if self.rqs[r].idle.contains(cpu) {
            self.rqs[r].idle.remove(cpu);
            self.smt_idle_mask_clear(r, cpu);
        }
        let head = self.rqs[r].runq.first().copied();
        let mut top = self.units[n.idx()].credit;
        // 4.2.1 looks at the picked vCPU's credit only.
        if !self.v42 {
            top = top.max(head.map_or(i64::MIN, |h| self.units[h.idx()].credit));
        }
        if top <= CREDIT_RESET {
            self.reset_credit(ctx, cpu, now, n);
            self.balance_load(ctx, cpu, now);
        }
        // ERRATA X3, sampled after a possible reset as upstream does.
        let mut inflight = 0;
        if let Some(c) = scurr {
            if self.params.version.counts_outgoing_credit() && self.units[c.idx()].delayed_runq_add
            {
                inflight = self.units[c.idx()].credit;
            }
        }
        let u = &mut self.units[n.idx()];
        u.start_time = now;
        u.tickled_cpu = None;
        if u.processor != cpu {
            u.credit += MIGRATE_COMPENSATION;
            u.processor = cpu;
        }
        if snext != scurr {
            u.switch_in = now;
        }
        let slice = if self.v42 {
            self.csched2_runtime_4_2(cpu, n)
        } else {
            self.csched2_runtime(cpu, scurr, n, now, inflight)
        };
        Pick {
            next: snext,
            slice: Some(slice as u64),
        }
    }

    /// Xen: csched2_context_saved, then the core's sched_unit_migrate_finish for a balancer
    /// migration (csched2_res_pick, csched2_unit_migrate, and the wake on the new CPU). Called
    /// right after `schedule` switched `e` out (the CPU's `curr` is already the new pick):
    /// returns leftover budget (maybe unparking), re-queues a still runnable `e` and tickles.
    fn context_saved(&mut self, ctx: &mut XenCtx, e: EntityId) {
        let now = ctx.now() as i64;
        self.units[e.idx()].scheduled = false;
        let mut unpark = false;
        if self.has_cap(e) && self.units[e.idx()].budget > 0 {
            unpark = self.unit_return_budget(e);
        }
        let r = self.units[e.idx()].rq;
        if std::mem::take(&mut self.units[e.idx()].delayed_runq_add) && self.runnable(ctx, e) {
            self.runq_insert(e);
            self.runq_tickle(ctx, e, now);
        } else {
            self.update_load(ctx, r, Some(e), -1, now);
        }
        if unpark {
            self.unpark_parked_units(ctx, self.units[e.idx()].dom);
        }
    }

    /// Xen: csched2_res_pick, from the core's sched_unit_migrate_finish (a balancer migration
    /// of a vCPU that was running) with the vCPU's own runqueue.
    fn pick_resource(&mut self, ctx: &mut XenCtx, e: EntityId) -> CpuId {
        let r = self.units[e.idx()].rq;
        let cpu = if self.v42 {
            self.choose_cpu_4_2(e)
        } else {
            self.csched2_res_pick(e, Some(r))
        };
        ctx.trace(|| SchedEvent::PickedCpu { ent: e, cpu });
        cpu
    }

    /// Xen: csched2_unit_migrate: another runqueue takes the vCPU (`migrate`), or it only
    /// changes CPU within its runqueue.
    fn migrate(&mut self, ctx: &mut XenCtx, e: EntityId, cpu: CpuId) {
        let trq = self.cpu_rq[cpu.idx()];
        if trq != self.units[e.idx()].rq {
            let now = ctx.now() as i64;
            self.migrate_to_rq(ctx, e, trq, now);
        } else {
            self.units[e.idx()].processor = cpu;
        }
    }

    /// Xen: replenish_domain_budget, the timer of domain `key`, armed at build for capped
    /// domains and re-armed every `cap_period_ms`. May unpark vCPUs and tickle CPUs.
    fn on_timer(&mut self, ctx: &mut XenCtx, key: u32) {
        let d = key as usize;
        assert!(
            d < self.doms.len(),
            "credit2: timer key {key} names no domain"
        );
        if self.doms[d].cap_pct != 0 {
            self.replenish_domain_budget(ctx, d);
        }
    }

    /// Xen: csched2_unit_remove (domain destroyed).
    fn remove_unit(&mut self, ctx: &mut XenCtx, e: EntityId) {
        self.unit_remove(ctx, e);
    }

    /// Xen: csched2_unit_sleep (domain pause).
    fn sleep(&mut self, ctx: &mut XenCtx, e: EntityId) {
        self.unit_sleep(ctx, e);
    }

    /// Xen: csched2_dom_cntl (`xl sched-credit2 -d -w/-c`).
    fn adjust(&mut self, ctx: &mut XenCtx, domain: u32) {
        self.dom_adjust(ctx, domain as usize);
    }

    /// Xen: csched2_sys_cntl (`xl sched-credit2 -s -r`).
    fn adjust_global(&mut self, _ctx: &mut XenCtx, p: GlobalParam) {
        self.sys_adjust(p);
    }

    /// The vCPU's credit.
    fn probe(&self, e: EntityId) -> Option<i64> {
        self.units.get(e.idx()).map(|u| u.credit)
    }

    /// Xen `processor(v)`.
    fn processor(&self, e: EntityId) -> CpuId {
        self.units[e.idx()].processor
    }

    /// Xen: csched2_deinit_pdata + csched2_free_pdata (the pCPU left the pool).
    fn remove_cpu(&mut self, ctx: &mut XenCtx, cpu: CpuId) {
        self.cpu_remove(ctx, cpu);
    }

    /// Xen: csched2_alloc_pdata + csched2_switch_sched (the pCPU joined the pool).
    fn add_cpu(&mut self, ctx: &mut XenCtx, cpu: CpuId) {
        self.cpu_add(ctx, cpu);
    }
}

#[cfg(test)]
mod tests;
