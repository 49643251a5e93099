//! Linux CFS, the Completely Fair Scheduler, as of **Linux v5.10** (`kernel/sched/fair.c`, the
//! feature defaults of `kernel/sched/features.h`, the weight tables of `kernel/sched/core.c`),
//! used as a guest scheduler: it places the tasks of one guest kernel on that guest's vCPUs.
//! Behavioural reference: `shared/spec/linux-schedulers.md` §1 with `ERRATA.md` L1, L5 and L7.
//!
//! # The fairness core
//!
//! Every task carries a `vruntime`: the CPU time it received, scaled by `1024 / weight` (nice 0
//! weighs 1024, each nice step about ×1.25). Every vCPU has one run queue holding its runnable
//! tasks ordered by vruntime; the running task (`curr`) is taken out of that order while it runs
//! but still counts in `nr_running` and in the queue's load. The queue's `min_vruntime` follows
//! the smallest vruntime present and never decreases; it is the reference point for tasks that
//! arrive: a waking sleeper is placed at no less than `min_vruntime − sched_latency/2` (sleeper
//! credit, `place_entity`), a new task one virtual slice after it (`START_DEBIT`). The running task
//! is charged at each accounting point (`update_curr`) from the queue's `clock_task`; the tick
//! preempts it once it has run its slice of the period (`check_preempt_tick`); a waking task
//! preempts it if it is more than one wakeup granularity behind in vruntime, the granularity being
//! converted with the *wakee's* weight (`wakeup_preempt_entity`). Buddies (`next`, `last`, `skip`)
//! bend the leftmost pick when that is not unfair by more than one granularity.
//!
//! **vruntime arithmetic.** As in the kernel, vruntimes are `u64` that may wrap, and every
//! comparison is on the signed difference (`(a − b) as i64`). `min_vruntime` starts at −2^20 ns.
//! [`SchedClass::probe`] returns the raw value reinterpreted as `i64` (so the initial
//! `min_vruntime` reads −1048576), which keeps differences between tasks exact.
//!
//! **Clocks and steal time.** The Linux core (`linux_core.rs`) keeps each run queue's `clock`,
//! `clock_task` and `prev_steal_time_rq`; it and CFS advance them at every point where Linux
//! calls `update_rq_clock` (wake-up on the target queue, block, schedule, tick, yield, both
//! queues of a migration, the parent's queue at fork). The steal reading is
//! `now − ctx.clock_task(cpu)`, i.e. the engine's steal clock when the guest has
//! PARAVIRT_TIME_ACCOUNTING and 0 otherwise. As in 5.10.y (ERRATA L5) steal is capped at the clock
//! delta and the excess is carried over to later updates. Without steal accounting a vCPU's
//! absence is charged to whatever task was current: this is seed 000's mechanism (§1.15).
//!
//! # Choosing a CPU (`select_task_rq_fair`, §1.16, L1, L7)
//!
//! Wake-ups take the fast path: `record_wakee`/`wake_wide`, then, if the waker's CPU may be used,
//! `wake_affine` (WA_IDLE, then WA_WEIGHT with the sync adjustments of L7), then
//! `select_idle_sibling` (target, prev, `recent_used_cpu`, an idle core if the guest has SMT
//! siblings, an idle CPU of the LLC, an idle SMT sibling). A CPU is idle when no CFS task runs or
//! is queued there; with `vcpu_is_preempted` on, a vCPU the host has preempted (runnable, not
//! running) counts as busy.
//! Co-location of pipe partners is therefore not assumed: it emerges (L1). New tasks take the fork
//! path: `task_fork_fair` on the parent's queue, then the idlest allowed CPU. Hard affinity is
//! honoured everywhere.
//!
//! # Load tracking (PELT, `cfs/pelt.rs`)
//!
//! Every task and every run queue carries 5.10's PELT signal (`load_avg`, `runnable_avg`,
//! `util_avg`, 1024-µs periods, y^32 = 1/2, the kernel's integer arithmetic), brought up to date
//! where `fair.c` calls `update_load_avg`: enqueue (attaching a new or migrated task), dequeue,
//! `put_prev_entity`, `set_next_entity` and the tick; a task that wakes on another vCPU leaves
//! its decayed load behind as removed load; a moved queued task is detached and attached. Idle
//! vCPUs' blocked load decays when balancing looks at them (`update_blocked_averages`, the NOHZ
//! stats refresh every 32 ms). util_est (5.10.13: updated at the sleeping dequeue) feeds
//! `cpu_util`. The PELT clock is `clock_task`.
//!
//! # Load balancing (§1.17, `cfs/balance.rs`, Linux v5.10's rules)
//!
//! One balancing domain spans all vCPUs, each vCPU a group of its own (imbalance_pct 117,
//! cache_nice_tries 1, at most 32 tasks a pass). Each vCPU is classified from its PELT signals
//! (`group_overloaded`: more than one task and util or runnable over capacity × 117 %;
//! `group_fully_busy`; `group_has_spare`), the busiest picked as `update_sd_pick_busiest` does,
//! and `calculate_imbalance` chooses the kind: a destination with spare capacity takes
//! `migrate_task` (half the difference in tasks), a busy one `migrate_load` (PELT load, against
//! the domain's average; a task fits if `load >> nr_balance_failed` does); across LLCs an
//! overloaded source gives `migrate_util`. A busy destination balances only against an overloaded
//! source. When nothing could be moved, `nr_balance_failed` grows, and past
//! `cache_nice_tries + 2` the source vCPU's stopper pushes a task (its current one included) to
//! the destination at its next `schedule` (active balance).
//! * **Newidle**, when `schedule` finds the queue empty: skipped if `avg_idle < migration_cost` or
//!   no vCPU has ≥ 2 runnable; pulls one task, trying the destination's LLC first.
//! * **Periodic**, from the tick of a busy vCPU every `span_weight` ms × 16 (the interval doubles
//!   up to 2 × span while balanced).
//! * **NOHZ idle balance**: the tick of a vCPU with ≥ 2 runnable balances, for each idle vCPU whose
//!   own (unscaled) interval expired, as CPU_IDLE.
//!
//! Tasks are tried coldest first (oldest `exec_start`; a migration clears it). Cache-hot: ran on
//! the source less than `migration_cost` ago, or a next/last buddy while the destination is busy.
//! Moves re-run the wakeup-preemption check on the destination.
//!
//! # Other simplifications
//!
//! * Tasks only: no group scheduling or bandwidth control. CFS is the fair class of the Linux
//!   core, under the RT class (`guest/rt.rs`); in a core without one, CFS accepts FIFO/RR tasks
//!   and treats them as SCHED_NORMAL at their nice value; nice is clamped to −20..19. The idle
//!   test of wake placement counts a vCPU's RT tasks (`Rq::rt_nr_running`); load balancing does
//!   not see them (no RT capacity scaling).
//! * `wake_affine_weight` and fork placement read PELT loads; Linux 3.17's rules
//!   (`cfs/v3_17.rs`) still compare runnable weights. PELT's `lost_idle_time` and capacity
//!   scaling are not modelled (every vCPU has capacity 1024: RT and IRQ pressure are not
//!   subtracted); `rd->overload` is read as "some vCPU has ≥ 2 runnable now" rather than the
//!   flag the balancer last left; one set of balancing state per vCPU serves both newidle
//!   passes (LLC, then all) of a guest with several LLCs.
//! * SIS_PROP: the budget `nr = max(4, span·(avg_idle/512)/(avg_scan_cost+1))` is as in 5.10, and at
//!   most `nr − 1` CPUs are tested from target+1 (L7; 5.10.13 starts the wrap at target). Scans take
//!   no simulated time, so `avg_scan_cost` is 0 and the scan is in practice full (always for ≤ 8
//!   vCPUs unless `avg_idle` < 4 µs). `select_idle_core` ignores the `has_idle_cores` hint.
//! * Fork placement (`find_idlest_cpu`) is flat: a SCHED_IDLE-only vCPU, else the idle allowed vCPU
//!   that went idle last (else the first idle one), else the least loaded, ties to the parent's.
//!   `sched_child_runs_first` is 0. Without a waker vCPU, `initial_cpu` is the parent's vCPU.
//! * `sched_nr_latency` is used as given; Linux recomputes it as ⌈latency / min_granularity⌉ when
//!   `sched_latency_ns` or `sched_min_granularity_ns` is written.
//! * `vcpu_is_preempted = true` reads the backing vCPU's runstate as x86 Xen (`xen_vcpu_stolen`)
//!   and KVM report it: preempted only when runnable and not running; a halted (blocked) or
//!   parked (offline) vCPU is not.
//! * Resched requests are deduplicated by a per-queue `need_resched` flag that `schedule` clears,
//!   as TIF_NEED_RESCHED is; a pull by newidle needs none (the running `schedule` serves it).

pub(crate) mod balance; // load balancing: newidle, periodic, NOHZ idle (§1.17)
mod hotplug; // CPU offline and online in the guest
mod lifecycle; // run-time nice and policy changes
pub(crate) mod pelt; // per-entity load tracking (PELT)
pub(crate) mod select; // CPU selection at wake-up and fork (§1.16)
pub mod sysctl;
mod v3_17; // the Linux 3.17 differences (seed 003)
pub(crate) mod weights; // weight tables, struct load_weight, calc_delta // a sysctl / sched_features dump as CfsParams

use vmsched_core::cpuset::CpuSet;
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{CpuTopo, Policy, WakeInfo};
use vmsched_core::time::NS_PER_S;

use balance::{BalanceFair, LbState};
use pelt::{RqAvg, RqLoad, SchedAvg, SeLoad};
use select::SelectFair;
use weights::{calc_delta, calc_delta_fair, LoadWeight};

use crate::guest::deadline::{Dl, DlParams};
use crate::guest::linux_core::{
    DequeueFlags, EnqueueFlags, LinuxCore, LinuxCtx, Rq, SchedClass, WakeFlags,
};
use crate::guest::rt::{Rt, RtParams};

// ------------------------------------------------------------------------------------------------
// Parameters
// ------------------------------------------------------------------------------------------------

/// The kernel release whose CFS is modelled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub enum CfsVersion {
    #[default]
    #[serde(rename = "5.10")]
    V5_10,
    /// Linux 3.17, seed 003's kernel: the differences are in `cfs/v3_17.rs`.
    #[serde(rename = "3.17")]
    V3_17,
}

/// CFS tunables, named after their sysctls (`/proc/sys/kernel/sched_*`) and feature flags.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CfsParams {
    /// The kernel release (`version` or `kernel`: "5.10", the default, or "3.17").
    #[serde(alias = "kernel")]
    pub version: CfsVersion,
    /// CONFIG_HZ: the tick frequency of the guest kernel.
    pub hz: u32,
    /// 0 = none, 1 = log (default), 2 = linear: how the three latency tunables scale with the
    /// number of vCPUs.
    pub sched_tunable_scaling: u32,
    /// None: 6 ms × factor. Some: the effective value (as written to the sysctl).
    pub sched_latency_ns: Option<u64>,
    /// None: 0.75 ms × factor.
    pub sched_min_granularity_ns: Option<u64>,
    /// None: 1 ms × factor.
    pub sched_wakeup_granularity_ns: Option<u64>,
    pub sched_nr_latency: u64,
    pub sched_migration_cost_ns: u64,
    pub gentle_fair_sleepers: bool,
    pub start_debit: bool,
    pub next_buddy: bool,
    pub last_buddy: bool,
    pub wakeup_preemption: bool,
    /// Whether the guest can see that a vCPU is preempted by the host (x86 Xen/KVM); arm64 5.10
    /// guests always report false (ERRATA L1).
    pub vcpu_is_preempted: bool,
    /// The RT class's sysctls (`[domain.sched.rt]`: `sched_rr_timeslice_ms`,
    /// `sched_rt_period_us`, `sched_rt_runtime_us`); the RT class sits above CFS in the chain.
    pub rt: RtParams,
    /// The deadline class's sysctls (`[domain.sched.deadline]`, docs/deadline.md); it sits
    /// above the RT class.
    #[serde(skip_serializing_if = "DlParams::is_default")]
    pub deadline: DlParams,
}

impl Default for CfsParams {
    fn default() -> Self {
        CfsParams {
            version: CfsVersion::V5_10,
            hz: 250,
            sched_tunable_scaling: 1,
            sched_latency_ns: None,
            sched_min_granularity_ns: None,
            sched_wakeup_granularity_ns: None,
            sched_nr_latency: 8,
            sched_migration_cost_ns: 500_000,
            gentle_fair_sleepers: true,
            start_debit: true,
            next_buddy: false,
            last_buddy: true,
            wakeup_preemption: true,
            vcpu_is_preempted: false,
            rt: RtParams::default(),
            deadline: DlParams::default(),
        }
    }
}

/// The CONFIG_HZ values Linux's Kconfig offers: 100, 250, 300 and 1000 everywhere
/// (kernel/Kconfig.hz), and 24, 48 and 1024 on some other architectures (MIPS).
pub const LINUX_HZ: [u32; 7] = [24, 48, 100, 250, 300, 1000, 1024];

impl CfsParams {
    /// Checks the ranges Linux v5.10 accepts for each sysctl; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        let range = |field: &str, v: u64, lo: u64, hi: u64| match (lo..=hi).contains(&v) {
            true => Ok(()),
            false => Err(format!("{field}: {v} is outside {lo}..={hi}")),
        };
        // 32-bit ARM's own Kconfig choice (arch/arm/Kconfig: 100, 200, 250, 300, 500, 1000)
        // exists in 3.17 (seed 003's Exynos: HZ_FIXED 200 until v4.10) and still in 5.10; arm64
        // and x86 use kernel/Kconfig.hz (100, 250, 300, 1000).
        if !crate::guest::bfs::LINUX_3X_HZ.contains(&self.hz) {
            return Err(format!(
                "hz: {} is not a CONFIG_HZ Linux {} offers (100, 250, 300 or 1000; 200 or 500 \
                 on 32-bit ARM; 24, 48 or 1024 on some MIPS)",
                self.hz,
                if self.version == CfsVersion::V3_17 {
                    "3.17"
                } else {
                    "5.10"
                }
            ));
        }
        range(
            "sched_tunable_scaling",
            self.sched_tunable_scaling.into(),
            0,
            2,
        )?;
        range(
            "sched_nr_latency",
            self.sched_nr_latency,
            1,
            u32::MAX.into(),
        )?;
        // An unsigned int sysctl in 5.10 (`avg_idle` arithmetic on twice it is signed 64-bit).
        range(
            "sched_migration_cost_ns",
            self.sched_migration_cost_ns,
            0,
            u32::MAX.into(),
        )?;
        for (field, v, lo) in [
            ("sched_latency_ns", self.sched_latency_ns, 100_000),
            (
                "sched_min_granularity_ns",
                self.sched_min_granularity_ns,
                100_000,
            ),
            (
                "sched_wakeup_granularity_ns",
                self.sched_wakeup_granularity_ns,
                0,
            ),
        ] {
            v.map_or(Ok(()), |v| range(field, v, lo, NS_PER_S))?;
        }
        if self.version == CfsVersion::V3_17 {
            if self.vcpu_is_preempted {
                return Err(
                    "vcpu_is_preempted: Linux 3.17 has no vcpu_is_preempted (4.10 \
                            introduced it); leave it false"
                        .into(),
                );
            }
            if self.rt.fair_server == Some(true) {
                return Err(
                    "rt.fair_server: the fair server is Linux 6.12's; 3.17 throttles \
                            RT tasks instead"
                        .into(),
                );
            }
        }
        self.rt.validate().map_err(|m| format!("rt.{m}"))?;
        self.deadline
            .validate()
            .map_err(|m| format!("deadline.{m}"))
    }
}

/// The effective tunables of one guest kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tunables {
    latency: u64,
    min_gran: u64,
    wakeup_gran: u64,
    nr_latency: u64,
    migration_cost: u64,
    hz: u64,
    tick_ns: u64,
}

/// Linux v5.10: get_update_sysctl_factor
pub(crate) fn tunable_factor(scaling: u32, ncpus: usize) -> u64 {
    let n = ncpus.clamp(1, 8) as u64;
    match scaling {
        0 => 1,
        2 => n,
        _ => 1 + n.ilog2() as u64,
    }
}

// ------------------------------------------------------------------------------------------------
// vruntime arithmetic: u64 that may wrap, compared by signed difference
// ------------------------------------------------------------------------------------------------

const MIN_VRUNTIME_INIT: u64 = (1u64 << 20).wrapping_neg();

#[inline]
fn vdiff(a: u64, b: u64) -> i64 {
    a.wrapping_sub(b) as i64
}

/// Linux v5.10: entity_before
#[inline]
fn entity_before(a: u64, b: u64) -> bool {
    vdiff(a, b) < 0
}

/// Linux v5.10: max_vruntime
#[inline]
fn max_vruntime(a: u64, b: u64) -> u64 {
    a.wrapping_add(vdiff(b, a).max(0) as u64)
}

/// Linux v5.10: min_vruntime
#[inline]
fn min_vruntime(a: u64, b: u64) -> u64 {
    a.wrapping_add(vdiff(b, a).min(0) as u64)
}

// ------------------------------------------------------------------------------------------------
// State
// ------------------------------------------------------------------------------------------------

/// A task's scheduling entity. Linux v5.10: struct sched_entity (plus the few task_struct fields
/// CFS reads).
#[derive(Clone, Debug, Default)]
struct Se {
    vruntime: u64,
    exec_start: u64,
    sum_exec_runtime: u64,
    prev_sum_exec_runtime: u64,
    load: LoadWeight,
    on_rq: bool,
    /// task_cpu(p): where it is queued, runs, or last ran.
    cpu: usize,
    policy: Policy,
    allowed: CpuSet,
    wakee_flips: u32,
    /// In jiffies.
    wakee_flip_decay_ts: u64,
    last_wakee: Option<usize>,
    recent_used_cpu: usize,
    /// PELT signal (`se->avg`).
    avg: SchedAvg,
    /// A new task not yet attached: `post_init_entity_util_avg` runs at its first enqueue.
    pelt_fresh: bool,
}

/// One vCPU's run queue: the `cfs_rq` and the few `rq` fields CFS uses.
#[derive(Clone, Debug, Default)]
struct CfsRq {
    min_vruntime: u64,
    /// The timeline, sorted by *descending* vruntime so that the leftmost entity is the last
    /// element; among equal vruntimes the earliest inserted is nearer the end (FIFO).
    timeline: Vec<usize>,
    curr: Option<usize>,
    next: Option<usize>,
    last: Option<usize>,
    skip: Option<usize>,
    nr_running: u32,
    idle_nr_running: u32,
    load: u64,
    /// PELT signal (`cfs_rq->avg`, `cfs_rq->removed`).
    pelt: RqAvg,
    lb: LbState,
}

/// Linux CFS v5.10 over the vCPUs of one guest.
pub struct Cfs {
    params: CfsParams,
    tun: Tunables,
    topo: Vec<CpuTopo>,
    llc_size: Vec<u32>,
    smt: bool,
    rqs: Vec<CfsRq>,
    ses: Vec<Se>,
}

impl Cfs {
    /// `cpus`: the topology of the guest's vCPUs; their number scales the latency tunables.
    /// Panics if `params` does not pass [`CfsParams::validate`].
    pub fn new(params: CfsParams, cpus: &[CpuTopo]) -> Cfs {
        if let Err(e) = params.validate() {
            panic!("Cfs::new needs validated parameters: {e}");
        }
        let factor = tunable_factor(params.sched_tunable_scaling, cpus.len());
        let hz = params.hz as u64;
        let tun = Tunables {
            latency: params.sched_latency_ns.unwrap_or(6_000_000 * factor),
            min_gran: params.sched_min_granularity_ns.unwrap_or(750_000 * factor),
            wakeup_gran: params
                .sched_wakeup_granularity_ns
                .unwrap_or(1_000_000 * factor),
            nr_latency: params.sched_nr_latency,
            migration_cost: params.sched_migration_cost_ns,
            hz,
            tick_ns: (NS_PER_S + hz / 2) / hz,
        };
        let n = cpus.len();
        let llc_size = cpus
            .iter()
            .map(|t| cpus.iter().filter(|u| u.llc == t.llc).count() as u32)
            .collect();
        let siblings =
            |a: &CpuTopo, b: &CpuTopo| a.node == b.node && a.socket == b.socket && a.core == b.core;
        let smt = (0..n).any(|i| (i + 1..n).any(|j| siblings(&cpus[i], &cpus[j])));
        let rq = CfsRq {
            min_vruntime: MIN_VRUNTIME_INIT,
            lb: LbState {
                balance_interval_ms: n.max(1) as u64,
                ..Default::default()
            },
            ..Default::default()
        };
        Cfs {
            params,
            tun,
            topo: cpus.to_vec(),
            llc_size,
            smt,
            rqs: vec![rq; n],
            ses: Vec::new(),
        }
    }

    fn ncpus(&self) -> usize {
        self.rqs.len()
    }

    // --- time ------------------------------------------------------------------------------------

    /// Linux v5.10: update_curr
    #[inline]
    fn update_curr(&mut self, ctx: &LinuxCtx, cpu: usize) {
        let rq = &self.rqs[cpu];
        let Some(c) = rq.curr else { return };
        let now = ctx.rq_clock_task(cpu);
        let se = &mut self.ses[c];
        let delta = vdiff(now, se.exec_start);
        if delta <= 0 {
            return;
        }
        se.exec_start = now;
        se.sum_exec_runtime += delta as u64;
        se.vruntime = se
            .vruntime
            .wrapping_add(calc_delta_fair(delta as u64, se.load));
        self.update_min_vruntime(cpu);
    }

    /// Linux v5.10: update_min_vruntime
    #[inline]
    fn update_min_vruntime(&mut self, cpu: usize) {
        let rq = &self.rqs[cpu];
        let curr = rq.curr.filter(|&c| self.ses[c].on_rq);
        let mut v = rq.min_vruntime;
        if let Some(c) = curr {
            v = self.ses[c].vruntime;
        }
        if let Some(&l) = rq.timeline.last() {
            let lv = self.ses[l].vruntime;
            v = if curr.is_none() {
                lv
            } else {
                min_vruntime(v, lv)
            };
        }
        let rq = &mut self.rqs[cpu];
        rq.min_vruntime = max_vruntime(rq.min_vruntime, v);
    }

    // --- load tracking (cfs/pelt.rs) ----------------------------------------------------------

    /// What `cpu`'s queue signal accumulates now.
    #[inline]
    fn rq_pelt_load(&self, cpu: usize) -> RqLoad {
        let rq = &self.rqs[cpu];
        RqLoad {
            weight: rq.load,
            nr: rq.nr_running,
            curr: rq.curr.is_some(),
        }
    }

    /// Linux v5.10: update_load_avg(cfs_rq, se, flags) at the rq's `clock_task` (the PELT
    /// clock); `attach`: DO_ATTACH.
    #[inline]
    fn update_load_avg(&mut self, ctx: &LinuxCtx, cpu: usize, e: usize, attach: bool) {
        let now = ctx.rq_clock_task(cpu);
        let load = self.rq_pelt_load(cpu);
        let rq = &mut self.rqs[cpu];
        let se = &mut self.ses[e];
        let s = SeLoad {
            on_rq: se.on_rq,
            running: rq.curr == Some(e),
            weight: se.load.weight,
        };
        rq.pelt
            .update_load_avg(now, load, &mut se.avg, s, attach, &mut se.pelt_fresh);
    }

    /// Linux v5.10: update_blocked_averages (no groups: the root queue's signal).
    #[inline]
    pub(super) fn update_blocked_averages(&mut self, ctx: &LinuxCtx, cpu: usize) {
        let now = ctx.rq_clock_task(cpu);
        let load = self.rq_pelt_load(cpu);
        self.rqs[cpu].pelt.update_blocked(now, load);
    }

    /// A queued task leaves `cpu` (after its dequeue). Linux v5.10: detach_entity_cfs_rq
    fn detach_entity_cfs_rq(&mut self, cpu: usize, e: usize) {
        let se = &mut self.ses[e];
        self.rqs[cpu]
            .pelt
            .detach_entity(&mut se.avg, se.load.weight);
    }

    // --- the timeline --------------------------------------------------------------------------

    /// Linux v5.10: __enqueue_entity
    fn timeline_insert(&mut self, cpu: usize, e: usize) {
        let v = self.ses[e].vruntime;
        let ses = &self.ses;
        let tl = &mut self.rqs[cpu].timeline;
        let at = tl.partition_point(|&x| entity_before(v, ses[x].vruntime));
        tl.insert(at, e);
    }

    /// Linux v5.10: __dequeue_entity
    fn timeline_remove(&mut self, cpu: usize, e: usize) {
        let tl = &mut self.rqs[cpu].timeline;
        let at = tl
            .iter()
            .rposition(|&x| x == e)
            .expect("timeline_remove: entity is queued");
        tl.remove(at);
    }

    /// Linux v5.10: __pick_first_entity
    fn first(&self, cpu: usize) -> Option<usize> {
        self.rqs[cpu].timeline.last().copied()
    }

    // --- period, slice, placement ----------------------------------------------------------------

    /// Linux v5.10: __sched_period
    fn sched_period(&self, nr_running: u64) -> u64 {
        if nr_running > self.tun.nr_latency {
            nr_running * self.tun.min_gran
        } else {
            self.tun.latency
        }
    }

    /// Linux v5.10: sched_slice
    fn sched_slice(&self, cpu: usize, e: usize) -> u64 {
        let se = &self.ses[e];
        let rq = &self.rqs[cpu];
        let extra = if se.on_rq { 0 } else { 1 };
        let slice = self.sched_period(rq.nr_running as u64 + extra);
        let w = rq.load + if se.on_rq { 0 } else { se.load.weight };
        calc_delta(slice, se.load.weight, LoadWeight::of_queue(w))
    }

    /// Linux v5.10: sched_vslice
    fn sched_vslice(&self, cpu: usize, e: usize) -> u64 {
        calc_delta_fair(self.sched_slice(cpu, e), self.ses[e].load)
    }

    /// Linux v5.10: place_entity
    fn place_entity(&mut self, cpu: usize, e: usize, initial: bool) {
        let mut v = self.rqs[cpu].min_vruntime;
        if initial && self.params.start_debit {
            v = v.wrapping_add(self.sched_vslice(cpu, e));
        }
        if !initial {
            let mut thresh = self.tun.latency;
            if self.params.gentle_fair_sleepers {
                thresh >>= 1;
            }
            v = v.wrapping_sub(thresh);
        }
        let se = &mut self.ses[e];
        se.vruntime = max_vruntime(se.vruntime, v);
    }

    // --- enqueue / dequeue -----------------------------------------------------------------------

    /// Linux v5.10: enqueue_entity (+ the task-level counters of enqueue_task_fair)
    fn enqueue_entity(
        &mut self,
        ctx: &LinuxCtx,
        cpu: usize,
        e: usize,
        wakeup: bool,
        migrated: bool,
    ) {
        let renorm = !wakeup || migrated;
        let is_curr = self.rqs[cpu].curr == Some(e);
        // enqueue_task_fair: util_est_enqueue comes first.
        pelt::util_est_enqueue(&mut self.rqs[cpu].pelt.avg, &self.ses[e].avg);
        if renorm && is_curr {
            self.ses[e].vruntime = self.ses[e]
                .vruntime
                .wrapping_add(self.rqs[cpu].min_vruntime);
        }
        self.update_curr(ctx, cpu);
        if renorm && !is_curr {
            self.ses[e].vruntime = self.ses[e]
                .vruntime
                .wrapping_add(self.rqs[cpu].min_vruntime);
        }
        self.update_load_avg(ctx, cpu, e, true);
        let rq = &mut self.rqs[cpu];
        rq.load += self.ses[e].load.weight;
        rq.nr_running += 1;
        if self.ses[e].policy == Policy::Idle {
            rq.idle_nr_running += 1;
        }
        if wakeup {
            self.place_entity(cpu, e, false);
        }
        if !is_curr {
            self.timeline_insert(cpu, e);
        }
        self.ses[e].on_rq = true;
    }

    /// Linux v5.10: dequeue_entity (+ dequeue_task_fair counters). `sleep`: DEQUEUE_SLEEP, the
    /// vruntime stays absolute; otherwise it is made relative to this queue's min_vruntime.
    fn dequeue_entity(&mut self, ctx: &LinuxCtx, cpu: usize, e: usize, sleep: bool) {
        // dequeue_task_fair (5.10.13): util_est_dequeue comes first.
        pelt::util_est_dequeue(&mut self.rqs[cpu].pelt.avg, &mut self.ses[e].avg, sleep);
        self.update_curr(ctx, cpu);
        self.update_load_avg(ctx, cpu, e, false);
        self.clear_buddies(cpu, e);
        if self.rqs[cpu].curr != Some(e) {
            self.timeline_remove(cpu, e);
        }
        let se = &mut self.ses[e];
        se.on_rq = false;
        let rq = &mut self.rqs[cpu];
        rq.load -= se.load.weight;
        rq.nr_running -= 1;
        if se.policy == Policy::Idle {
            rq.idle_nr_running -= 1;
        }
        if !sleep {
            se.vruntime = se.vruntime.wrapping_sub(rq.min_vruntime);
        }
        self.update_min_vruntime(cpu);
    }

    /// Linux v5.10: clear_buddies
    fn clear_buddies(&mut self, cpu: usize, e: usize) {
        let rq = &mut self.rqs[cpu];
        for b in [&mut rq.next, &mut rq.last, &mut rq.skip] {
            if *b == Some(e) {
                *b = None;
            }
        }
    }

    /// Linux v5.10: set_next_buddy / set_last_buddy refuse SCHED_IDLE tasks.
    fn buddy_ok(&self, e: usize) -> bool {
        self.ses[e].policy != Policy::Idle
    }

    // --- preemption ------------------------------------------------------------------------------

    /// Linux v5.10: check_preempt_tick
    fn check_preempt_tick(&mut self, ctx: &mut LinuxCtx, cpu: usize, curr: usize) {
        let ideal = self.sched_slice(cpu, curr);
        let se = &self.ses[curr];
        let ran = se.sum_exec_runtime - se.prev_sum_exec_runtime;
        if ran > ideal {
            ctx.resched_curr(cpu);
            self.clear_buddies(cpu, curr);
            return;
        }
        if ran < self.tun.min_gran {
            return;
        }
        let Some(first) = self.first(cpu) else { return };
        let d = vdiff(se.vruntime, self.ses[first].vruntime);
        if d < 0 {
            return;
        }
        if d as u64 > ideal {
            ctx.resched_curr(cpu);
        }
    }

    /// Linux v5.10: wakeup_gran (converted with the weight of `e`, the entity that would preempt)
    fn wakeup_gran(&self, e: usize) -> u64 {
        calc_delta_fair(self.tun.wakeup_gran, self.ses[e].load)
    }

    /// Should `se` preempt `curr`: −1 (no, it is not behind), 0 (behind by at most a
    /// granularity), 1 (yes). Linux v5.10: wakeup_preempt_entity
    fn wakeup_preempt_entity(&self, curr: usize, se: usize) -> i32 {
        let d = vdiff(self.ses[curr].vruntime, self.ses[se].vruntime);
        if d <= 0 {
            return -1;
        }
        if d > self.wakeup_gran(se) as i64 {
            1
        } else {
            0
        }
    }

    /// `p` was just queued on `cpu`. Linux v5.10: check_preempt_curr → check_preempt_wakeup
    pub(super) fn check_preempt_curr(
        &mut self,
        ctx: &mut LinuxCtx,
        cpu: usize,
        p: usize,
        fork: bool,
    ) {
        let Some(curr) = self.rqs[cpu].curr else {
            // The idle class is always preempted.
            ctx.resched_curr(cpu);
            return;
        };
        if curr == p {
            return;
        }
        let scale = self.rqs[cpu].nr_running as u64 >= self.tun.nr_latency;
        let mut next_marked = false;
        if self.params.next_buddy && scale && !fork && self.buddy_ok(p) {
            self.rqs[cpu].next = Some(p);
            next_marked = true;
        }
        if ctx.rq(cpu).need_resched {
            return;
        }
        let curr_idle = self.ses[curr].policy == Policy::Idle;
        let p_policy = self.ses[p].policy;
        if !(curr_idle && p_policy != Policy::Idle) {
            if p_policy == Policy::Batch
                || p_policy == Policy::Idle
                || !self.params.wakeup_preemption
            {
                return;
            }
            self.update_curr(ctx, cpu);
            ctx.trace(|| vmsched_core::trace::SchedEvent::WakeCheck {
                ent: EntityId(p as u32),
                curr: EntityId(curr as u32),
                rule: vmsched_core::trace::WakeRule::Granularity,
                a: vmsched_core::trace::sat32(vdiff(self.ses[curr].vruntime, self.ses[p].vruntime)),
                b: vmsched_core::trace::sat32(self.wakeup_gran(p) as i64),
            });
            if self.wakeup_preempt_entity(curr, p) != 1 {
                return;
            }
            if !next_marked && self.buddy_ok(p) {
                self.rqs[cpu].next = Some(p);
            }
        }
        ctx.resched_curr(cpu);
        if !self.ses[curr].on_rq {
            return;
        }
        if self.params.last_buddy && scale && self.buddy_ok(curr) {
            self.rqs[cpu].last = Some(curr);
        }
    }

    // --- picking ---------------------------------------------------------------------------------

    /// Linux v5.10: put_prev_entity
    #[inline]
    fn put_prev_entity(&mut self, ctx: &LinuxCtx, cpu: usize) {
        let Some(prev) = self.rqs[cpu].curr else {
            return;
        };
        if self.ses[prev].on_rq {
            self.update_curr(ctx, cpu);
            self.timeline_insert(cpu, prev);
            self.update_load_avg(ctx, cpu, prev, false);
        }
        self.rqs[cpu].curr = None;
    }

    /// Linux v5.10: pick_next_entity (the `curr == NULL` form used after put_prev)
    fn pick_next_entity(&mut self, cpu: usize) -> Option<usize> {
        let left = self.first(cpu)?;
        let mut se = left;
        let rq = &self.rqs[cpu];
        if rq.skip == Some(se) {
            let tl = &rq.timeline;
            if tl.len() >= 2 {
                let second = tl[tl.len() - 2];
                if self.wakeup_preempt_entity(second, left) < 1 {
                    se = second;
                }
            }
        }
        if let Some(last) = rq.last {
            if self.wakeup_preempt_entity(last, left) < 1 {
                se = last;
            }
        }
        if let Some(next) = rq.next {
            if self.wakeup_preempt_entity(next, left) < 1 {
                se = next;
            }
        }
        self.clear_buddies(cpu, se);
        Some(se)
    }

    /// Linux v5.10: set_next_entity
    #[inline]
    fn set_next_entity(&mut self, ctx: &LinuxCtx, cpu: usize, e: usize) {
        self.timeline_remove(cpu, e);
        self.update_load_avg(ctx, cpu, e, false);
        let now = ctx.rq_clock_task(cpu);
        let se = &mut self.ses[e];
        se.exec_start = now;
        se.prev_sum_exec_runtime = se.sum_exec_runtime;
        self.rqs[cpu].curr = Some(e);
    }

    // --- fork ------------------------------------------------------------------------------------

    /// Leaves the child's vruntime relative to the parent queue's min_vruntime.
    /// Linux v5.10: task_fork_fair
    fn task_fork_fair(&mut self, ctx: &mut LinuxCtx, parent_cpu: usize, e: usize) {
        ctx.update_rq_clock(parent_cpu);
        self.ses[e].vruntime = 0;
        if let Some(curr) = self.rqs[parent_cpu].curr {
            self.update_curr(ctx, parent_cpu);
            self.ses[e].vruntime = self.ses[curr].vruntime;
        }
        self.place_entity(parent_cpu, e, true);
        let min_v = self.rqs[parent_cpu].min_vruntime;
        self.ses[e].vruntime = self.ses[e].vruntime.wrapping_sub(min_v);
    }
}

impl Cfs {
    /// CFS as the fair class of a Linux 5.10 core, below the RT class (SCHED_FIFO, SCHED_RR,
    /// with the sysctls of `params.rt`), with a tick every 1/HZ (TICK_NSEC, rounded).
    pub fn sched(params: CfsParams, cpus: &[CpuTopo]) -> CfsSched {
        // RT_RUNTIME_SHARE: on by default up to 5.9, so in 3.17.
        let rt_params =
            (params.rt.clone()).with_runtime_share_default(params.version == CfsVersion::V3_17);
        let rt = Rt::new(rt_params, params.hz, cpus.len());
        let dl = Dl::new(params.deadline.clone(), cpus.len());
        let cfs = Cfs::new(params, cpus);
        LinuxCore::with_classes("cfs", cpus.len(), cfs.tun.tick_ns, cfs, rt, dl)
    }
}

/// A Linux 5.10 kernel: CFS as the fair class under the RT and the deadline class.
pub type CfsSched = LinuxCore<Cfs, Rt, Dl>;

impl SchedClass for Cfs {
    /// SCHED_NORMAL, SCHED_BATCH and SCHED_IDLE. It takes every policy, so that a core with no
    /// RT class above it (`LinuxCore<Cfs>`) still runs SCHED_FIFO and SCHED_RR tasks, as
    /// normal tasks at their nice value; in [`CfsSched`] the RT class takes them first.
    fn accepts(&self, _policy: Policy) -> bool {
        true
    }

    /// Linux v5.10: sched_init (`rq->avg_idle = 2 * sysctl_sched_migration_cost`).
    fn init_rq(&self, rq: &mut Rq) {
        rq.avg_idle = 2 * self.tun.migration_cost;
        rq.max_idle_balance_cost = 2 * self.tun.migration_cost;
        if self.is_3_17() {
            self.init_rq_3_17(rq);
        }
    }

    /// Build time: a blocked task with vruntime 0 on its initial vCPU (or the first allowed one).
    fn init_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, _owned: bool) {
        assert_eq!(e.idx(), self.ses.len(), "insert: entities come in id order");
        let p = &ctx.ent(e).params;
        let allowed = p.hard_affinity.and(&CpuSet::first_n(self.ncpus()));
        let cpu = allowed
            .test_or_cycle(p.initial_cpu)
            .unwrap_or_else(|| panic!("task {} has no allowed vCPU", p.name))
            .idx();
        self.ses.push(Se {
            load: LoadWeight::of_task(p.linux.nice, p.linux.policy),
            cpu,
            policy: p.linux.policy,
            allowed,
            recent_used_cpu: cpu,
            // init_entity_runnable_average: a new task starts at its full load.
            avg: SchedAvg {
                load_avg: LoadWeight::of_task(p.linux.nice, p.linux.policy).weight,
                ..Default::default()
            },
            pelt_fresh: true,
            ..Default::default()
        });
        let n = self.ses.len();
        for rq in &mut self.rqs {
            rq.timeline.reserve(n - rq.timeline.len());
        }
    }

    #[inline]
    fn task_cpu(&self, e: EntityId) -> CpuId {
        CpuId(self.ses[e.idx()].cpu as u32)
    }

    /// Linux v5.10: select_task_rq_fair for SD_BALANCE_WAKE (the fast path).
    #[inline]
    fn select_task_rq(&mut self, ctx: &mut LinuxCtx, e: EntityId, info: WakeInfo) -> CpuId {
        debug_assert!(!self.ses[e.idx()].on_rq, "wake of a queued task");
        if self.is_3_17() {
            return CpuId(self.select_task_rq_fair_3_17(ctx, e.idx(), info) as u32);
        }
        CpuId(self.select_task_rq_fair(ctx, e.idx(), info) as u32)
    }

    /// Fork placement (`find_idlest_cpu`, flattened), then `__set_task_cpu` with a fresh
    /// `exec_start`.
    #[inline]
    fn select_task_rq_fork(&mut self, ctx: &mut LinuxCtx, e: EntityId, parent: CpuId) -> CpuId {
        let cpu = if self.is_3_17() {
            self.find_idlest_cpu_3_17(e.idx(), parent.idx())
        } else {
            self.find_idlest_cpu(ctx, e.idx(), parent.idx())
        };
        let se = &mut self.ses[e.idx()];
        se.cpu = cpu;
        se.exec_start = 0;
        CpuId(cpu as u32)
    }

    /// Linux v5.10: migrate_task_rq_fair (the vruntime made relative to the old queue, the
    /// sleeper's load left behind as removed load, `remove_entity_load_avg`) and set_task_cpu.
    #[inline]
    fn migrate_task_rq(&mut self, _ctx: &mut LinuxCtx, e: EntityId, new_cpu: CpuId) {
        let se = &mut self.ses[e.idx()];
        let old = &mut self.rqs[se.cpu];
        se.vruntime = se.vruntime.wrapping_sub(old.min_vruntime);
        if se.avg.last_update_time != 0 {
            old.pelt.remove_entity(&mut se.avg, se.load.weight);
        }
        se.exec_start = 0;
        se.cpu = new_cpu.idx();
    }

    /// A task joining the class from another one: its vruntime was left relative by the
    /// `dequeue_task(DEQUEUE_SAVE)` it left with, so only its CPU changes (Linux
    /// `set_task_rq`; `attach_task_cfs_rq` makes it absolute at the enqueue that follows).
    fn attach_task_cpu(&mut self, _ctx: &mut LinuxCtx, e: EntityId, cpu: CpuId) {
        let se = &mut self.ses[e.idx()];
        se.exec_start = 0;
        se.cpu = cpu.idx();
    }

    /// Linux v5.10: task_fork_fair on the parent's queue (the child's vruntime is left relative
    /// to it) and the child's `recent_used_cpu`.
    #[inline]
    fn task_fork(&mut self, ctx: &mut LinuxCtx, e: EntityId, parent: CpuId) {
        self.task_fork_fair(ctx, parent.idx(), e.idx());
        self.ses[e.idx()].recent_used_cpu = parent.idx();
    }

    /// Linux v5.10: enqueue_task_fair → enqueue_entity (place_entity for a wake-up).
    #[inline]
    fn enqueue_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId, f: EnqueueFlags) {
        self.enqueue_entity(ctx, cpu.idx(), e.idx(), f.wakeup, f.migrated);
    }

    /// Linux v5.10: dequeue_task_fair; with DEQUEUE_SLEEP the vruntime stays absolute.
    #[inline]
    fn dequeue_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId, f: DequeueFlags) {
        let (cpu, e) = (cpu.idx(), e.idx());
        debug_assert!(
            !f.sleep || self.rqs[cpu].curr == Some(e),
            "block of a task that is not current"
        );
        self.dequeue_entity(ctx, cpu, e, f.sleep);
    }

    /// Linux v5.10: yield_task_fair (the early exit tests the whole queue, ERRATA L7): sets the
    /// skip buddy for the `schedule` that follows.
    fn yield_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId) {
        let (cpu, e) = (cpu.idx(), e.idx());
        if self.rqs[cpu].nr_running == 1 {
            return;
        }
        self.clear_buddies(cpu, e);
        if self.ses[e].policy != Policy::Batch {
            ctx.update_rq_clock(cpu);
            self.update_curr(ctx, cpu);
        }
        self.rqs[cpu].skip = Some(e);
    }

    /// Linux v5.10: yield_to_task_fair: `target` becomes the next buddy of its queue, then the
    /// current task yields.
    fn yield_to_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, target: EntityId) -> bool {
        let t = target.idx();
        if !self.ses[t].on_rq {
            return false;
        }
        if self.buddy_ok(t) {
            let tcpu = self.ses[t].cpu;
            self.rqs[tcpu].next = Some(t);
        }
        if let Some(curr) = ctx.cpu(cpu).curr {
            if self.ses[curr.idx()].cpu == cpu.idx() {
                self.yield_task(ctx, cpu, curr);
            }
        }
        true
    }

    /// Linux v5.10: check_preempt_wakeup.
    #[inline]
    fn wakeup_preempt(
        &mut self,
        ctx: &mut LinuxCtx,
        cpu: CpuId,
        _curr: EntityId,
        p: EntityId,
        f: WakeFlags,
    ) {
        self.check_preempt_curr(ctx, cpu.idx(), p.idx(), f.fork);
    }

    /// Linux v5.10: pick_next_task_fair (the "simple" path: pick_next_entity; set_next_entity
    /// follows in `set_next_task`), with newidle_balance when the queue is empty. Requests
    /// nothing: a task pulled by newidle is picked by this very call.
    #[inline]
    fn pick_next_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId) -> Option<EntityId> {
        let cpu = cpu.idx();
        if self.rqs[cpu].lb.push_cpu.is_some() {
            BalanceFair::active_load_balance(self, ctx, cpu);
        }
        if self.rqs[cpu].nr_running == 0 {
            // A task pulled here needs no resched request: this very pick serves it.
            ctx.rq_mut(cpu).need_resched = true;
            BalanceFair::newidle_balance(self, ctx, cpu);
            ctx.rq_mut(cpu).need_resched = false;
        }
        self.pick_next_entity(cpu).map(|n| EntityId(n as u32))
    }

    /// Linux v5.10: put_prev_task_fair → put_prev_entity.
    #[inline]
    fn put_prev_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, prev: EntityId) {
        debug_assert_eq!(Some(prev.idx()), self.rqs[cpu.idx()].curr);
        self.put_prev_entity(ctx, cpu.idx());
    }

    /// Linux v5.10: set_next_entity.
    #[inline]
    fn set_next_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId) {
        self.set_next_entity(ctx, cpu.idx(), e.idx());
    }

    /// Linux v5.10: task_tick_fair → entity_tick (update_curr, check_preempt_tick when
    /// nr_running > 1). Requests a resched of this vCPU when its slice is over.
    #[inline]
    fn task_tick(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, _curr: EntityId) {
        let cpu = cpu.idx();
        if let Some(curr) = self.rqs[cpu].curr.filter(|&c| self.ses[c].on_rq) {
            self.update_curr(ctx, cpu);
            self.update_load_avg(ctx, cpu, curr, false);
            if self.rqs[cpu].nr_running > 1 {
                self.check_preempt_tick(ctx, cpu, curr);
            }
        }
    }

    /// `rq->cfs.h_nr_running` (no groups: `nr_running`).
    #[inline]
    fn nr_running(&self, cpu: CpuId) -> u32 {
        self.rqs[cpu.idx()].nr_running
    }

    /// Linux v5.10: trigger_load_balance (periodic and NOHZ idle balancing, see the module
    /// doc); requests a resched of any vCPU that balancing gave a task to preempt.
    fn trigger_load_balance(&mut self, ctx: &mut LinuxCtx, cpu: CpuId) {
        BalanceFair::trigger_load_balance(self, ctx, cpu.idx());
    }

    /// Linux v5.10: task_dead_fair: the task's decayed PELT load leaves its last queue
    /// (`remove_entity_load_avg`); the run queue lost the task at its dequeue (DEQUEUE_SLEEP
    /// from `block`) and its buddies were cleared there. A waker's `last_wakee` may still name
    /// it, as upstream's pointer does, and ids are never reused, so it never matches again.
    fn task_dead(&mut self, _ctx: &mut LinuxCtx, e: EntityId) {
        let se = &mut self.ses[e.idx()];
        if se.avg.last_update_time != 0 {
            self.rqs[se.cpu]
                .pelt
                .remove_entity(&mut se.avg, se.load.weight);
        }
    }

    /// Linux v5.10: set_user_nice / sched_setattr within the fair class (`reweight_task`,
    /// `prio_changed_fair`).
    fn prio_changed(&mut self, ctx: &mut LinuxCtx, e: EntityId) -> bool {
        self.change_prio(ctx, e)
    }

    /// The task's vruntime as of its last accounting (absolute; the raw u64 read as i64).
    fn probe(&self, e: EntityId) -> Option<i64> {
        self.ses.get(e.idx()).map(|se| se.vruntime as i64)
    }

    /// Linux v5.10: rq_offline_fair / rq_online_fair with the sched domains rebuilt: every
    /// task's `allowed` becomes its affinity within the online CPUs (cfs/hotplug.rs).
    fn rq_hotplug(&mut self, ctx: &mut LinuxCtx, _cpu: CpuId) {
        self.refresh_allowed(ctx);
    }

    /// The leftmost queued task (what pick_next_entity takes with no buddy set).
    fn next_queued(&self, cpu: CpuId) -> Option<EntityId> {
        self.first(cpu.idx()).map(|e| EntityId(e as u32))
    }

    /// Linux v5.10: move_queued_task (cfs/hotplug.rs).
    fn move_queued_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, src: CpuId, dst: CpuId) {
        self.move_queued(ctx, e.idx(), src.idx(), dst.idx());
    }
}

#[cfg(test)]
mod tests;
