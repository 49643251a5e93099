//! Xen Credit (Credit1), the default host scheduler of Xen 3.x and 4.0–4.11, in two eras: as in
//! Xen 3.3 (`xen/common/sched_credit.c`, tag 3.3.0-rc7) and as in Xen 4.18–4.20
//! (`xen/common/sched/credit.c`, tag RELEASE-4.20.0), after xen-schedulers.md §2 and ERRATA X7,
//! X8, X10, X11 (facts read from the sources; the code is our own).
//!
//! # What it models
//!
//! Every vCPU holds *credit* and a priority: BOOST (0), UNDER (−1), OVER (−2); the idle vCPU is
//! IDLE (−64). Each pCPU has its own runqueue ordered by priority, first in first out within a
//! priority (round robin), and runs its head. Credit is earned in an *accounting pass* every 30 ms
//! (the tslice): the pool's credit (300 per CPU per pass) is shared among the *active* domains by
//! weight, capped by each domain's cap and by what its active vCPUs could burn; after the pass a
//! vCPU with credit ≥ 0 is UNDER, one with credit < 0 is OVER. Credit is burnt while running:
//!
//! * **3.3** samples: a pCPU's 10 ms tick charges 100 credits to whoever runs at the tick, and
//!   the master CPU (CPU 0) runs the accounting pass at every third of its ticks. The slice is a
//!   fixed 30 ms, for the idle vCPU too (idle CPUs look for work to steal every 30 ms). Weight is
//!   per domain. A vCPU whose credit passes 300 leaves the active set with credit 0.
//! * **4.20** burns exact run time (10 credits per ms, with a residual), in the tick and in
//!   `schedule()`. The accounting pass has its own timer (every tslice, default 30 ms); the tick
//!   is tslice/3 and stops while a CPU idles. A vCPU keeps its CPU for `ratelimit_us` (default
//!   1000 µs) after a switch-in unless it yields. Weight is per vCPU (domain weight × active
//!   vCPUs). A vCPU whose credit passes a tslice's worth leaves the active set with half its
//!   credit.
//!
//! A waking vCPU whose *stored* priority is UNDER becomes BOOST (ERRATA X7: whatever its credit;
//! never when parked, nor in 4.20 when the wake ends a migration), is queued on its own CPU's
//! runqueue and *tickles*: in 3.3 its CPU if it beats the running vCPU, plus every idle CPU when
//! its CPU is busy; in 4.20 (ERRATA X10) its CPU if that CPU is idle or no CPU is idle and it beats
//! the running vCPU, and otherwise one idle CPU of its affinity (soft first), which must *steal*
//! it. A BOOST vCPU loses BOOST when a tick finds it running (ERRATA X8: without a reschedule), or
//! at the next accounting pass. A CPU whose best local vCPU is OVER or idle steals the first vCPU
//! of higher priority from a busy peer's runqueue. A capped domain earns at most `cap` % of a CPU
//! per pass; a vCPU of it whose credit falls below −cap/n is *parked* (paused: offline) until a
//! pass brings its credit back to ≥ 0.
//!
//! # Options for the seed experiments (ERRATA X6, X13)
//!
//! Off by default (the releases unchanged), each read where its rule lives: seed 002's
//! `boost_on_wake` and `tickle_on_wake` in `unit_wake` (`wake_boosts`), its `deferred_tickle`
//! in `wake` and `wake_batch_end`; seed 001's first
//! improvement (3.3 only) in `credit1/acct.rs` (`burn_exact` at the tick and in `schedule()`,
//! `level`, the deactivation in `acct`) and in `schedule()` (the BOOST slice and the demotion
//! after it); its boost credit in `debit`, `acct`, `unit_acct` and `wake_boosts`. What each does
//! and what is assumed where the talk and slides are silent: docs/credit1.md.
//!
//! # Engine mapping
//!
//! Credit1 implements the Xen ops ([`XenOps`]) and runs on the Xen core (`host/xen_core.rs`):
//! `Credit1::sched` builds the pair. Entity = vCPU; `EntityParams.group` = domain index,
//! `xen.weight` = domain weight, `xen.cap_pct` = domain cap. `insert_unit` is
//! `csched_unit_insert`, `wake` is `csched_unit_wake`, `do_schedule` is `csched_schedule`,
//! `yield_` is `csched_unit_yield`, `sleep` is `csched_unit_sleep`, `pick_resource` is
//! `csched_res_pick`, `adjust` is `csched_dom_cntl`, `adjust_global` is `csched_sys_cntl`. The
//! per-CPU tickers and the 4.20 master accounting timer are the policy's timers (key 0: the
//! accounting timer; key 1 + c: CPU c's ticker), armed at the first insertion as Xen arms them at
//! CPU bring-up. Parking uses the core's pause flags (`XenCtx::park`, and
//! `XenCtx::unpark_wake`, which is `vcpu_unpause`); a tick-time migration uses
//! `XenCtx::set_migrating`, and the core completes it after `context_saved`. CPU hot-plug:
//! `processor`, `remove_cpu` (`csched_deinit_pdata` + `csched_free_pdata`) and `add_cpu`
//! (`csched_alloc_pdata` + `csched_switch_sched`), in `credit1/hotplug.rs`; the core moves the
//! vCPUs.
//!
//! # Simplifications (deliberate)
//!
//! * Two eras: `3.3`, and `4.18`/`4.19`/`4.20` (one `credit.c` but for trace records); the rules
//!   that changed between them are methods of [`Credit1Version`] named after the rule, with the
//!   release that introduced each, so an intermediate release is one more variant whose
//!   thresholds the methods name. One cpupool holding every CPU; no tasklets; affinities
//!   fixed after build but for the engine's widening at a CPU offline.
//! * [3.3] CPU hot-plug did not exist at run time (S3 suspend only): 4.20's removal with 3.3's
//!   fixed pool credit (credit1/hotplug.rs).
//! * Every try-lock succeeds (single-threaded simulation).
//! * The ticker's reschedule requests (the tick-time migration) go through the engine like any
//!   tickle (the engine's IPI latency, 0 by default, applies).
//! * [3.3] a domain-parameter change (`xl sched-credit -d`) pauses and unpauses the domain's
//!   vCPUs (ERRATA X11): modelled as a re-wake of each runnable vCPU (an UNDER one becomes BOOST,
//!   a queued one goes to the tail of its class and tickles); the synchronous deschedule of a
//!   running vCPU is not modelled (it keeps its CPU, now BOOST).
//! * Trace records (TRC_CSCHED_*) are not emitted.
//!
//! # Source layout
//!
//! This file: state, `do_schedule` and the hooks. Beside it in `credit1/`: `wake.rs` (the
//! runqueues, wake-up and tickling), `acct.rs` (burning, the tick, the accounting pass, active
//! sets, parking), `steal.rs` (CPU pick and load balancing by stealing), `lifecycle.rs` (sleep, remove,
//! `xl sched-credit -d` and `-s`), `hotplug.rs` (CPU offline and online) and `params.rs` (the
//! release, the parameters and options, their validation). Unit tests: `credit1/tests.rs` and
//! `credit1/tests/`.

use vmsched_core::cpuset::{CpuSet, MAX_CPUS};
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{CpuTopo, GlobalParam, Pick, WakeInfo};
use vmsched_core::trace::SchedEvent;

use crate::host::xen_core::{
    put_unit, XenCore, XenCtx, XenOps, TIMER_ENTRY_DEFAULT_NS, TIMER_SLOP_DEFAULT_NS,
};

mod acct;
mod hotplug;
mod lifecycle;
mod params;
mod steal;
mod wake;

pub use params::{Credit1BoostDomain, Credit1Params, Credit1Version};

/// Priorities (`CSCHED_PRI_*`).
type Pri = i32;
const PRI_BOOST: Pri = 0;
const PRI_UNDER: Pri = -1;
const PRI_OVER: Pri = -2;
const PRI_IDLE: Pri = -64;

/// [4.x] credits burnt per ms of run time.
const CREDITS_PER_MSEC: i64 = 10;
/// [4.x] ticks per tslice (1 if the tslice is below 3 ms).
const TICKS_PER_TSLICE: u64 = 3;
/// [4.8+] shortest timer after a ratelimited pick (`CSCHED_MIN_TIMER`, 100 µs).
const MIN_TIMER: i64 = 100_000;
/// [3.3] tick period, credits charged per tick, ticks per accounting pass and fixed slice.
const V33_TICK_NS: i64 = 10_000_000;
const V33_CREDITS_PER_TICK: i64 = 100;
const V33_TICKS_PER_ACCT: u64 = 3;
const V33_TSLICE_MS: u64 = 30;

/// Timer key of the 4.x master accounting timer; CPU c's ticker is key `1 + c`.
const ACCT_TIMER: u32 = 0;

/// Per-vCPU state (Xen `struct csched_unit`).
#[derive(Clone, Debug)]
struct Unit {
    credit: i64,
    pri: Pri,
    /// CSCHED_FLAG_UNIT_PARKED (cap).
    parked: bool,
    /// CSCHED_FLAG_UNIT_YIELD [4.1+].
    yield_: bool,
    /// CSCHED_FLAG_UNIT_MIGRATING [4.7+]: set by the CPU pick, cleared by the next wake.
    migrating: bool,
    /// CSCHED_FLAG_UNIT_PINNED: hard affinity of one CPU.
    pinned: bool,
    /// [4.x] burning: switch-in time (an offset while switched out).
    start_time: i64,
    /// [4.20] sub-credit remainder of burning.
    residual: i64,
    /// [3.4+] last `schedule()` that ran it (cache-hot test).
    last_sched_time: i64,
    /// Last real switch-in (the unit's state entry time while running: the ratelimit's runtime).
    switch_in: i64,
    dom: usize,
    /// Xen `processor(v)`.
    processor: CpuId,
    on_runq: bool,
    /// On its domain's active list.
    active: bool,
    removed: bool,
    hard: CpuSet,
    soft: CpuSet,
    /// Xen `has_soft_affinity`.
    has_soft: bool,
    /// [seed 001] boost credit (≥ 0, at most the domain's boost limit).
    boost_credit: i64,
    /// [seed 001] the last time `schedule()` picked it (its BOOST slice's start).
    picked_at: i64,
}

/// Per-domain state (Xen `struct csched_dom`).
#[derive(Clone, Debug)]
struct Domain {
    weight: i64,
    /// Percent of one CPU, 0 = none.
    cap: i64,
    /// Active vCPUs, head first (a newly active one goes to the head).
    active: Vec<EntityId>,
    /// Every vCPU of the domain, in id order.
    units: Vec<EntityId>,
    /// [seed 001] boost limit in credits (0: the domain holds no boost credit).
    boost_limit: i64,
    /// [seed 001] boost ratio, % of one CPU.
    boost_ratio: i64,
}

/// Per-pCPU state (Xen `struct csched_pcpu`).
#[derive(Clone, Debug)]
struct Pcpu {
    /// Queued vCPUs, head first; the idle vCPU's place at the tail is implicit.
    runq: Vec<EntityId>,
    runq_sort_last: u32,
    tick: u64,
    /// [4.1+] `idle_bias`.
    idle_bias: CpuId,
    /// [4.9+] queued plus running guest vCPUs.
    nr_runnable: u32,
    /// [4.18+] last steal attempt.
    last_load_balance: i64,
    /// [4.1+] `last_tickle_cpu` of wakes that run on this CPU.
    last_tickle: CpuId,
}

/// Credit1 as the engine runs it: the policy on the Xen core.
pub type Credit1Sched = XenCore<Credit1>;

/// The Credit1 scheduler of one pool holding every CPU of the level.
pub struct Credit1 {
    params: Credit1Params,
    v: Credit1Version,
    online: CpuSet,
    idlers: CpuSet,
    /// SMT siblings of each CPU (itself included), its socket's CPUs, its node's CPUs.
    sibling: Vec<CpuSet>,
    core_mask: Vec<CpuSet>,
    node_of: Vec<u32>,
    node_mask: Vec<CpuSet>,
    /// [4.20] `balance_bias` per node.
    balance_bias: Vec<CpuId>,
    master: CpuId,
    /// Sum of the active weights (`prv->weight`).
    weight: i64,
    /// Pool credit per pass (`prv->credit`).
    credit: i64,
    credit_balance: i64,
    runq_sort: u32,
    tslice: i64,
    tick_period: i64,
    credits_per_tslice: i64,
    ratelimit: i64,
    lb_ratelimit: i64,
    migr_delay: i64,
    tickle_one: bool,
    /// ERRATA X6 switches (seed 002).
    boost_on_wake: bool,
    tickle_on_wake: bool,
    /// Seed 002's deferred tickle: the vCPUs woken during an upcall, with their waker, whose
    /// tickles wait for the end of that waker's batch (`wake_batch_end`).
    deferred_tickle: bool,
    deferred: Vec<(EntityId, EntityId)>,
    /// ERRATA X13 options (seed 001); `boost_slice` 0 = none.
    exact_debit: bool,
    boost_slice: i64,
    keep_above_limit: bool,
    level_credits: bool,
    /// Active domains, head first.
    active_doms: Vec<usize>,
    pcpus: Vec<Pcpu>,
    units: Vec<Unit>,
    doms: Vec<Domain>,
    /// Scratch lists for the accounting pass (no allocation in hooks).
    scratch_doms: Vec<usize>,
    scratch_units: Vec<EntityId>,
    /// Scratch vCPU counts per CPU for the 3.3 initial placement.
    scratch_cnt: Vec<u32>,
    started: bool,
}

impl Credit1 {
    /// The scheduler for `cpus` (CPU `i` is `cpus[i]`). Panics if `params` do not pass
    /// [`Credit1Params::validate`].
    pub fn new(params: Credit1Params, cpus: &[CpuTopo], nr_domains: u32) -> Credit1 {
        if let Err(e) = params.validate() {
            panic!("Credit1::new: invalid parameters: {e}");
        }
        let n = cpus.len();
        assert!(
            (1..=MAX_CPUS).contains(&n),
            "credit1: needs 1..={MAX_CPUS} CPUs, got {n}"
        );
        let v = params.version;
        let mask = |f: &dyn Fn(&CpuTopo, &CpuTopo) -> bool| -> Vec<CpuSet> {
            (0..n)
                .map(|c| {
                    CpuSet::from_ids((0..n as u32).filter(|&o| f(&cpus[c], &cpus[o as usize])))
                })
                .collect()
        };
        let sibling = mask(&|a, b| a.socket == b.socket && a.core == b.core && a.node == b.node);
        let core_mask = mask(&|a, b| a.socket == b.socket && a.node == b.node);
        let max_node = cpus.iter().map(|t| t.node).max().unwrap_or(0) as usize;
        let node_mask: Vec<CpuSet> = (0..=max_node)
            .map(|nd| {
                CpuSet::from_ids((0..n as u32).filter(|&c| cpus[c as usize].node as usize == nd))
            })
            .collect();
        let balance_bias = node_mask
            .iter()
            .map(|m| m.first().unwrap_or(CpuId(0)))
            .collect();
        let mut s = Credit1 {
            v,
            online: CpuSet::first_n(n),
            idlers: CpuSet::first_n(n),
            sibling,
            core_mask,
            node_of: cpus.iter().map(|t| t.node).collect(),
            node_mask,
            balance_bias,
            master: CpuId(0),
            weight: 0,
            credit: 0,
            credit_balance: 0,
            runq_sort: 0,
            tslice: 0,
            tick_period: 0,
            credits_per_tslice: 0,
            ratelimit: params.ratelimit_us() as i64 * 1000,
            lb_ratelimit: params.load_balance_ratelimit_us.unwrap_or(1000) as i64 * 1000,
            migr_delay: params.vcpu_migration_delay_us.unwrap_or(0) as i64 * 1000,
            tickle_one: params.tickle_one_idle_cpu.unwrap_or(true),
            boost_on_wake: params.boost_on_wake.unwrap_or(true),
            tickle_on_wake: params.tickle_on_wake.unwrap_or(true),
            deferred_tickle: params.deferred_tickle,
            deferred: Vec::new(),
            exact_debit: params.exact_debit,
            boost_slice: params.boost_slice_ms.unwrap_or(0) as i64 * 1_000_000,
            keep_above_limit: params.keep_credit_above_limit,
            level_credits: params.level_domain_credits,
            active_doms: Vec::with_capacity(nr_domains as usize),
            pcpus: (0..n)
                .map(|_| Pcpu {
                    runq: Vec::new(),
                    runq_sort_last: 0,
                    tick: 0,
                    idle_bias: CpuId(n as u32 - 1),
                    nr_runnable: 0,
                    last_load_balance: 0,
                    last_tickle: CpuId(0),
                })
                .collect(),
            units: Vec::new(),
            doms: (0..nr_domains)
                .map(|_| Domain {
                    weight: 256,
                    cap: 0,
                    active: Vec::new(),
                    units: Vec::new(),
                    boost_limit: 0,
                    boost_ratio: 0,
                })
                .collect(),
            scratch_doms: Vec::with_capacity(nr_domains as usize),
            scratch_units: Vec::new(),
            scratch_cnt: Vec::with_capacity(n),
            started: false,
            params,
        };
        if v.has_tslice_and_ratelimit() {
            s.set_tslice(s.params.tslice_ms());
        } else {
            s.tslice = V33_TSLICE_MS as i64 * 1_000_000;
            s.tick_period = V33_TICK_NS;
            s.credits_per_tslice = V33_CREDITS_PER_TICK * V33_TICKS_PER_ACCT as i64;
            s.credit = s.credits_per_tslice * n as i64;
        }
        s
    }

    /// Credit1 on the Xen core, with the timer slop and timer entry latency of `params`.
    pub fn sched(params: Credit1Params, cpus: &[CpuTopo], nr_domains: u32) -> Credit1Sched {
        let slop = params.timer_slop_ns.unwrap_or(TIMER_SLOP_DEFAULT_NS);
        let entry = params.timer_entry_ns.unwrap_or(TIMER_ENTRY_DEFAULT_NS);
        XenCore::with_timers(Credit1::new(params, cpus, nr_domains), slop, entry)
    }

    /// [seed 001] Gives domain `d` boost credit: a boost limit of `limit_ms` and a boost ratio
    /// of `ratio_pct` % of one CPU (`Credit1Params::boost_domains`, resolved to indices).
    pub fn set_boost_domain(&mut self, d: usize, limit_ms: u64, ratio_pct: u64) {
        assert!(
            self.v == Credit1Version::V3_3,
            "credit1: boost credit is a 3.3 option"
        );
        let dom = &mut self.doms[d];
        dom.boost_limit = limit_ms as i64 * V33_CREDITS_PER_TICK * 1_000_000 / V33_TICK_NS;
        dom.boost_ratio = ratio_pct as i64;
    }

    /// The vCPU's boost credit (seed 001; 0 unless its domain holds boost credit).
    pub fn boost_credit(&self, e: EntityId) -> i64 {
        self.units[e.idx()].boost_credit
    }

    /// Xen `processor(v)`: where `e` last ran or is queued.
    pub fn processor(&self, e: EntityId) -> CpuId {
        self.units[e.idx()].processor
    }

    /// The vCPU's credit.
    pub fn credit(&self, e: EntityId) -> i64 {
        self.units[e.idx()].credit
    }

    /// The vCPU's priority: 0 BOOST, −1 UNDER, −2 OVER.
    pub fn priority(&self, e: EntityId) -> i32 {
        self.units[e.idx()].pri
    }

    /// [3.3] Where `XEN_DOMCTL_max_vcpus` puts a new vCPU (`default_vcpu0_location` in
    /// `xen/common/domctl.c`; the scheduler keeps it there): vCPU 0 of a domain on the online CPU
    /// with the fewest vCPUs, never on CPU 0's core, only on second threads of multi-thread
    /// cores, the higher-numbered CPU on a tie; vCPU k on the CPU after vCPU k−1's. A CPU outside
    /// the vCPU's hard affinity gives way to the next one inside it (the pinning that follows).
    fn v33_initial_cpu(&mut self, e: EntityId) -> CpuId {
        let mut cnt = std::mem::take(&mut self.scratch_cnt);
        cnt.clear();
        cnt.resize(self.pcpus.len(), 0);
        let u = &self.units[e.idx()];
        let n = self.pcpus.len() as u32;
        let dom = &self.doms[u.dom];
        let cpu = match dom.units.iter().rev().find(|o| **o != e) {
            Some(prev) => CpuId((self.units[prev.idx()].processor.0 + 1) % n),
            None => {
                for o in self.units.iter().filter(|o| !o.removed) {
                    cnt[o.processor.idx()] += 1;
                }
                // The unit being placed is not counted.
                cnt[u.processor.idx()] -= 1;
                let sib0 = &self.sibling[0];
                let mut cpu = sib0.first().expect("CPU 0");
                if sib0.len() > 1 {
                    cpu = sib0.next_after(cpu).expect("a second thread");
                }
                let mut exclude = *sib0;
                for i in self.online.iter() {
                    let sib = &self.sibling[i.idx()];
                    if exclude.contains(i) || (sib.first() == Some(i) && sib.len() > 1) {
                        continue;
                    }
                    exclude.or_with(sib);
                    if cnt[i.idx()] <= cnt[cpu.idx()] {
                        cpu = i;
                    }
                }
                cpu
            }
        };
        let cpu = u.hard.test_or_cycle(cpu).expect("non-empty hard affinity");
        self.scratch_cnt = cnt;
        cpu
    }

    /// Xen: __csched_set_tslice [4.4+]: slice, tick period, credits per tslice, pool credit.
    fn set_tslice(&mut self, tslice_ms: u64) {
        self.tslice = tslice_ms as i64 * 1_000_000;
        let ticks = if tslice_ms < TICKS_PER_TSLICE {
            1
        } else {
            TICKS_PER_TSLICE
        };
        self.tick_period = (tslice_ms * 1000 / ticks) as i64 * 1000;
        self.credits_per_tslice = CREDITS_PER_MSEC * tslice_ms as i64;
        self.credit = self.credits_per_tslice * self.online.len() as i64;
    }

    #[inline]
    fn pri_of(&self, e: Option<EntityId>) -> Pri {
        e.map_or(PRI_IDLE, |e| self.units[e.idx()].pri)
    }

    // ---------------------------------------------------------------------------------------
    // Scheduling decision
    // ---------------------------------------------------------------------------------------

    /// Xen: csched_schedule.
    fn schedule(&mut self, ctx: &mut XenCtx, cpu: CpuId) -> Pick {
        let now = ctx.now() as i64;
        let scurr = ctx.cpu(cpu).curr;
        ctx.trace(|| SchedEvent::Schedule {
            cpu,
            tickled: false,
            idle: scurr.is_none(),
        });
        let v = self.v;
        let runnable = scurr.is_some_and(|c| ctx.unit_runnable(c));
        if let Some(c) = scurr {
            if v.burns_exact_time() {
                let runtime = (now - self.units[c.idx()].switch_in).max(0);
                self.burn_credits(c, now);
                let u = &mut self.units[c.idx()];
                u.start_time -= now;
                u.last_sched_time = now;
                // Ratelimit (4.20: the remainder, at least MIN_TIMER; not for a yielder).
                if !u.yield_ && self.ratelimit > 0 && runnable && runtime < self.ratelimit {
                    u.start_time += now;
                    ctx.trace(|| SchedEvent::Ratelimit {
                        ent: c,
                        runtime: runtime as u32,
                    });
                    let slice = if runtime < MIN_TIMER {
                        MIN_TIMER
                    } else {
                        self.ratelimit - runtime
                    };
                    return Pick {
                        next: scurr,
                        slice: Some(slice as u64),
                    };
                }
            } else {
                if self.exact_debit {
                    self.burn_exact(c, now);
                }
                let boost_slice = self.boost_slice;
                let u = &mut self.units[c.idx()];
                u.last_sched_time = now;
                // [seed 001] the BOOST slice is over: back to UNDER, unless boost credit lasts.
                if boost_slice > 0
                    && runnable
                    && u.pri == PRI_BOOST
                    && u.boost_credit == 0
                    && now - u.picked_at >= boost_slice
                {
                    u.pri = PRI_UNDER;
                    ctx.trace(|| SchedEvent::Unboost { ent: c });
                }
            }
        }
        if let Some(c) = scurr {
            if runnable {
                self.runq_insert_at(ctx, c);
            } else {
                self.pcpus[cpu.idx()].nr_runnable -= 1;
            }
        }
        let head = self.pcpus[cpu.idx()].runq.first().copied();
        let head_pri = self.pri_of(head);
        let may_balance = !v.has_load_balance_ratelimit()
            || now - self.pcpus[cpu.idx()].last_load_balance > self.lb_ratelimit;
        let snext = if head_pri <= PRI_OVER && may_balance {
            if v.has_load_balance_ratelimit() {
                self.pcpus[cpu.idx()].last_load_balance = now;
            }
            match self.load_balance(ctx, cpu, head_pri, now) {
                Some(s) => Some(s),
                None => {
                    if let Some(h) = head {
                        self.runq_remove_at(h);
                    }
                    head
                }
            }
        } else {
            if let Some(h) = head {
                self.runq_remove_at(h);
            }
            head
        };
        debug_assert!(snext.is_none_or(|s| ctx.unit_runnable(s)));
        if snext.is_none() {
            self.idlers.insert(cpu);
        } else {
            self.idlers.remove(cpu);
        }
        if let Some(n) = snext {
            let u = &mut self.units[n.idx()];
            if v.burns_exact_time() {
                u.start_time += now;
            }
            if snext != scurr {
                u.switch_in = now;
            }
            u.picked_at = now;
            if self.exact_debit {
                u.start_time = now;
            }
        }
        if v.ticker_stops_when_idle() {
            let key = 1 + cpu.0;
            if scurr.is_some() && snext.is_none() {
                ctx.set_timer(key, None);
            } else if scurr.is_none() && snext.is_some() {
                let p = self.tick_period;
                ctx.set_timer(key, Some((now + p - now % p) as u64));
            }
        }
        let slice = if snext.is_none() && v.has_master_timer() {
            None
        } else if self.boost_slice > 0 && self.pri_of(snext) == PRI_BOOST {
            // [seed 001] a vCPU picked in BOOST gets the short BOOST slice.
            Some(self.boost_slice as u64)
        } else {
            Some(self.tslice as u64)
        };
        Pick { next: snext, slice }
    }
}

impl XenOps for Credit1 {
    fn name(&self) -> &'static str {
        "credit"
    }

    /// The master accounting timer (key 0, 4.x) and one ticker per CPU (key 1 + c).
    fn nr_timers(&self) -> u32 {
        1 + self.pcpus.len() as u32
    }

    /// Xen: csched_alloc_udata + csched_unit_insert (4.20: `csched_res_pick`, which sets
    /// MIGRATING, so the first wake is not boosted; 3.3: the vCPU stays where it was created).
    /// The first insertion starts the tickers (and 4.x's master timer) as CPU bring-up does.
    fn insert_unit(&mut self, ctx: &mut XenCtx, e: EntityId) {
        let p = &ctx.ent(e).params;
        let d = p.group as usize;
        assert!(
            d < self.doms.len(),
            "credit1: vCPU {} names domain {d} of {}",
            p.name,
            self.doms.len()
        );
        assert!(
            (1..=65535).contains(&p.xen.weight),
            "credit1: weight of {} must be in 1..=65535",
            p.name
        );
        let hard = p.hard_affinity.and(&self.online);
        assert!(
            !hard.is_empty(),
            "credit1: hard affinity of {} holds no CPU",
            p.name
        );
        let soft = p.soft_affinity;
        let sh = soft.and(&hard);
        let has_soft = self.v.tickles_one_idler()
            && !sh.is_empty()
            && !hard.is_subset(&soft)
            && !self.online.is_subset(&soft);
        let processor = if hard.contains(p.initial_cpu) {
            p.initial_cpu
        } else {
            hard.first().expect("non-empty")
        };
        let (weight, cap) = (p.xen.weight as i64, p.xen.cap_pct as i64);
        put_unit(
            &mut self.units,
            e,
            Unit {
                credit: 0,
                pri: PRI_UNDER,
                parked: false,
                yield_: false,
                migrating: false,
                pinned: hard.len() == 1,
                start_time: 0,
                residual: 0,
                last_sched_time: 0,
                switch_in: 0,
                dom: d,
                processor,
                on_runq: false,
                active: false,
                removed: false,
                hard,
                soft,
                has_soft,
                boost_credit: 0,
                picked_at: 0,
            },
            |u| Unit {
                removed: true,
                dom: usize::MAX,
                ..u.clone()
            },
        );
        let dom = &mut self.doms[d];
        if dom.units.is_empty() {
            dom.weight = weight;
            dom.cap = cap;
        }
        dom.units.push(e);
        let cpu = if self.v.tickles_one_idler() {
            self.res_pick(ctx, e)
        } else {
            self.v33_initial_cpu(e)
        };
        self.units[e.idx()].processor = cpu;
        let n = self.units.len();
        for pc in &mut self.pcpus {
            pc.runq.reserve(n.saturating_sub(pc.runq.len()));
        }
        let dn = self.doms[d].units.len();
        self.doms[d].active.reserve(dn);
        self.scratch_units.reserve(dn);
        self.deferred.reserve(dn);
        if !self.started {
            self.started = true;
            let now = ctx.now();
            for c in self.online.iter() {
                ctx.set_timer(1 + c.0, Some(now + self.tick_period as u64));
            }
            if self.v.has_master_timer() {
                ctx.set_timer(ACCT_TIMER, Some(now + self.tslice as u64));
            }
            if !self.tickle_on_wake {
                // ERRATA X6: with no tickle on wake only slice ends find work, so each CPU's
                // idle vCPU must hold a slice from bring-up, as Xen's have run `schedule()`
                // since boot. (With tickles the first wake does it, and nothing changes.)
                for c in self.online.iter() {
                    ctx.resched(c);
                }
            }
        }
    }

    /// Xen: csched_unit_remove (domain destroyed).
    fn remove_unit(&mut self, ctx: &mut XenCtx, e: EntityId) {
        self.unit_remove(ctx, e);
    }

    /// Xen: csched_unit_wake (BOOST, queue, tickle). With seed 002's `deferred_tickle`, a wake
    /// sent by another vCPU's upcall is queued and its tickle waits for the batch's end.
    fn wake(&mut self, ctx: &mut XenCtx, e: EntityId, info: WakeInfo) {
        match info.waker {
            Some(w) if self.deferred_tickle => {
                let tickle = std::mem::replace(&mut self.tickle_on_wake, false);
                self.unit_wake(ctx, e, info.waker_cpu);
                self.tickle_on_wake = tickle;
                if self.units[e.idx()].on_runq && !self.deferred.contains(&(w, e)) {
                    self.deferred.push((w, e));
                }
            }
            _ => self.unit_wake(ctx, e, info.waker_cpu),
        }
    }

    /// Seed 002's deferred tickle: `waker`'s batch of events is over; the vCPUs it woke that
    /// are still queued are tickled now, each CPU at most once (3.3's rule, against the CPUs'
    /// current vCPUs).
    fn wake_batch_end(&mut self, ctx: &mut XenCtx, waker: EntityId) {
        let mut mask = CpuSet::empty();
        let mut i = 0;
        while i < self.deferred.len() {
            let (w, e) = self.deferred[i];
            if w != waker {
                i += 1;
                continue;
            }
            self.deferred.swap_remove(i);
            if self.units[e.idx()].on_runq {
                mask.or_with(&self.tickle_mask_33(ctx, e));
            }
        }
        for c in mask.iter() {
            ctx.resched(c);
        }
    }

    /// Xen: csched_unit_sleep (domain pause).
    fn sleep(&mut self, ctx: &mut XenCtx, e: EntityId) {
        self.unit_sleep(ctx, e);
    }

    /// Xen: csched_unit_yield [4.1+] sets YIELD: the next `schedule()` queues the vCPU behind
    /// one vCPU of lower priority, ignores the ratelimit, and stealers pass it over. [3.3] No
    /// hook: the reschedule that follows queues it at the tail of its priority.
    fn yield_(&mut self, _ctx: &mut XenCtx, e: EntityId) {
        if self.v.has_yield_flag() {
            self.units[e.idx()].yield_ = true;
        }
    }

    /// Xen: csched_schedule. Burns the current vCPU (4.x), applies the ratelimit (4.x), queues
    /// the current vCPU if still runnable, picks the head or steals (when the head is OVER or
    /// idle), updates the idlers, and returns the tslice (3.3: the idle vCPU too; 4.x: idle gets
    /// no timer). 4.20 stops the ticker when the CPU goes idle and restarts it on the grid.
    fn do_schedule(&mut self, ctx: &mut XenCtx, cpu: CpuId) -> Pick {
        self.schedule(ctx, cpu)
    }

    /// Xen: csched_res_pick (for the core's migration): the CPU pick, committed; [4.7+] sets
    /// MIGRATING so the wake on the new CPU is not boosted.
    fn pick_resource(&mut self, ctx: &mut XenCtx, e: EntityId) -> CpuId {
        let cpu = self.res_pick(ctx, e);
        ctx.trace(|| SchedEvent::PickedCpu { ent: e, cpu });
        cpu
    }

    /// Credit1 has no `migrate` hook: the core sets `processor(v)`.
    fn migrate(&mut self, _ctx: &mut XenCtx, e: EntityId, cpu: CpuId) {
        debug_assert!(!self.units[e.idx()].on_runq);
        self.units[e.idx()].processor = cpu;
    }

    /// Xen: csched_dom_cntl (`xl sched-credit -d -w/-c`).
    fn adjust(&mut self, ctx: &mut XenCtx, domain: u32) {
        self.dom_cntl(ctx, domain as usize);
    }

    /// Xen: csched_sys_cntl (`xl sched-credit -s -t/-r`) [4.2+].
    fn adjust_global(&mut self, _ctx: &mut XenCtx, p: GlobalParam) {
        self.sys_cntl(p);
    }

    /// Key 0: csched_acct (4.x master timer); key 1 + c: csched_tick of CPU c.
    fn on_timer(&mut self, ctx: &mut XenCtx, key: u32) {
        if key == ACCT_TIMER {
            self.acct(ctx);
            let next = ctx.now() + self.tslice as u64;
            ctx.set_timer(ACCT_TIMER, Some(next));
        } else {
            assert!(
                (key as usize) <= self.pcpus.len(),
                "credit1: timer key {key} names no CPU"
            );
            self.tick(ctx, CpuId(key - 1));
        }
    }

    /// The vCPU's credit.
    fn probe(&self, e: EntityId) -> Option<i64> {
        self.units.get(e.idx()).map(|u| u.credit)
    }

    /// Xen `processor(v)`.
    fn processor(&self, e: EntityId) -> CpuId {
        self.units[e.idx()].processor
    }

    /// Xen: csched_deinit_pdata + csched_free_pdata (credit1/hotplug.rs).
    fn remove_cpu(&mut self, ctx: &mut XenCtx, cpu: CpuId) {
        self.cpu_remove(ctx, cpu);
    }

    /// Xen: csched_alloc_pdata + csched_switch_sched (init_pdata) (credit1/hotplug.rs).
    fn add_cpu(&mut self, ctx: &mut XenCtx, cpu: CpuId) {
        self.cpu_add(ctx, cpu);
    }
}

#[cfg(test)]
mod tests;
