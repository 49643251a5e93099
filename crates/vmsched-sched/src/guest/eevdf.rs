//! Linux EEVDF, the Earliest Eligible Virtual Deadline First fair class, as in **Linux 6.6,
//! 6.12 and 6.18** (`kernel/sched/fair.c` and `kernel/sched/features.h` of each release; facts
//! only, our own code), used as the fair class of the Linux core under the RT class:
//! `LinuxCore<Eevdf, Rt>`.
//! Behavioural reference: `shared/spec/linux-schedulers.md` §2 with `ERRATA.md` L2, L3, L4, L5
//! and L6 (the errata win).
//!
//! # The fairness core
//!
//! Accounting is CFS's: a task's `vruntime` grows by its CPU time × 1024 / weight
//! (`calc_delta_fair`, the weight tables of `guest/cfs/weights.rs`). What EEVDF adds:
//! * the queue's **average vruntime** `V`, kept as upstream keeps it: the weighted sum
//!   `avg_vruntime = Σ w_i·(v_i − min_vruntime)` and `avg_load = Σ w_i` over the queued
//!   entities (the running one is added on the fly), `V = min_vruntime + ⌊sum / load⌋`;
//! * **lag** `V − v_i` and **eligibility** `v_i ≤ V`, tested without division
//!   (`vruntime_eligible`: `sum ≥ (v_i − min_vruntime)·load`);
//! * a **virtual deadline** `v_i + slice·1024/w_i`, renewed from the current vruntime each time
//!   the task reaches it (`update_deadline`); the slice is `base_slice_ns` (0.75 ms, 0.70 ms in
//!   6.18, × 1 + ilog2(min(ncpus, 8))) or, from 6.12, a task's own `sched_runtime`
//!   (`custom_slice`, clamped to 0.1..100 ms, not scaled);
//! * the **pick**: the eligible entity with the earliest deadline (`pick_eevdf`). Upstream keeps
//!   an rbtree by deadline augmented with each subtree's minimum vruntime and descends it; here
//!   each queue is a vector sorted by deadline (equal deadlines in insertion order, as the tree
//!   inserts an equal key to the right) scanned from the front for the first eligible entity:
//!   the same entity, found without allocation (the vectors have their capacity from build).
//!   `min_vruntime` follows the smallest vruntime present and never decreases; moving it shifts
//!   `avg_vruntime` as upstream does.
//!
//! # Releases
//!
//! | rule | 6.6 | 6.12 | 6.18 |
//! |---|---|---|---|
//! | base slice (normalised) | 0.75 ms | 0.75 ms | 0.70 ms |
//! | slice protection (RUN_TO_PARITY) | `vlag == deadline` marker set at pick | same, cancelled by PREEMPT_SHORT | `vprot`: protected up to min(deadline, vruntime + smallest queued slice) |
//! | update_curr reschedules | at the deadline | at the deadline, or when a cancelled protection leaves curr ineligible | at the deadline or at `vprot` |
//! | PREEMPT_SHORT | – | a shorter-slice eligible wakee with an earlier deadline (or an ineligible curr) cancels protection, then the pick decides | the pick is evaluated without protection: a win cancels it, a loss shortens it to the smallest queued slice |
//! | DELAY_DEQUEUE / DELAY_ZERO | – | on | on |
//! | next buddy picked | with NEXT_BUDDY | with PICK_BUDDY (on) if eligible | same |
//! | yield | deadline += one slice | same | eligible: vruntime := deadline, deadline one slice later; ineligible: nothing (L3) |
//! | fork | placed on the target at V, lag 0, full slice (L4) | placed once with ENQUEUE_INITIAL: half a slice | same |
//! | PLACE_REL_DEADLINE | – | on (6.12.y backport) | on |
//! | steal beyond the clock delta | dropped (6.6.87; 6.6.57 carried it: `steal_carry_over`) | dropped | dropped |
//!
//! **Wake-up preemption** (ERRATA L2): after the wakee is queued and curr charged, the wakee
//! preempts iff the pick would take it: an ineligible curr drops out of the pick, a protected
//! eligible curr is kept, and curr's deadline is compared only when it is eligible but
//! unprotected. BATCH and IDLE wakees never preempt; a non-idle wakee always preempts a
//! SCHED_IDLE curr (6.18 cancels curr's protection then).
//!
//! **DELAY_DEQUEUE** (§2.8): a task that blocks while not eligible stays queued, `sched_delayed`,
//! counting in the queue's load, `nr_running` and `V`, until the pick selects it (then it is
//! dequeued for real, its lag saved, a positive one zeroed with DELAY_ZERO) or it wakes (then it
//! is requeued in place on the same CPU without CPU selection; with DELAY_ZERO a positive lag
//! re-places it at V with a fresh deadline) and the wake-up preemption check runs. The balancer
//! never moves a delayed task; a CPU going offline dequeues its delayed tasks.
//!
//! # Reused from CFS, and what differs
//!
//! The Linux core (`linux_core.rs`: clocks, need_resched, the class skeletons), the weight
//! tables and `calc_delta`, CPU selection (`select_task_rq_fair`: wake_wide, wake_affine,
//! select_idle_sibling; the fork path's `find_idlest_cpu`) and load balancing (newidle, periodic,
//! NOHZ idle) are CFS's code (`cfs/select.rs`, `cfs/balance.rs`, through the `SelectFair` and
//! `BalanceFair` traits), as 6.x keeps those rules in spirit (§2.10). Differences left out: 6.x
//! limits the idle-CPU scan with SIS_UTIL instead of SIS_PROP (the model's scans are full for
//! ≤ 8 vCPUs either way); delayed tasks count in `nr_running` and load as in 6.12 (6.13 adds
//! `h_nr_runnable`); no PELT. A waking task keeps its lag across CPUs (no vruntime
//! renormalisation on migration); a balancer move keeps its lag and (PLACE_REL_DEADLINE) its
//! relative deadline.
//!
//! # Simplifications (docs/simplifications.md)
//!
//! * Reschedules are immediate: 6.13+'s lazy reschedule (`resched_curr_lazy`) differs only
//!   under a PREEMPT_LAZY kernel; the model's `preempt = "none"` already defers in-kernel
//!   preemption to the syscall exit.
//! * `reweight_entity` (a nice change of a queued task) follows 6.12's `reweight_eevdf` in every
//!   release (lag and relative deadline scaled by old/new weight around `V`).
//! * The core calls `put_prev_task` before `pick_next_task`; upstream 6.x picks with the previous
//!   task still current. The pick is the same: the previous task, put back in the queue, is
//!   found by the scan as upstream's `curr` is, and its slice protection is honoured by
//!   recognising it as the CPU's outgoing task.
//! * No group scheduling, bandwidth control, fair server (issue 12 item 2 adds it with the RT
//!   classes), PELT or util_est.

mod params;
mod preempt; // slices, deadlines, slice protection, wake-up preemption
mod shared; // SelectFair / BalanceFair for EEVDF, hot-plug, run-time nice changes
mod vtime; // V, lag, eligibility, the deadline-ordered queue

use params::Features;
pub use params::{EevdfFeatures, EevdfKernel, EevdfParams};

use vmsched_core::cpuset::CpuSet;
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{CpuTopo, Policy, WakeInfo};
use vmsched_core::time::NS_PER_S;

use crate::guest::cfs::balance::{BalanceFair, LbState};
use crate::guest::cfs::pelt::{self, RqAvg, SchedAvg};
use crate::guest::cfs::select::SelectFair;
use crate::guest::cfs::tunable_factor;
use crate::guest::cfs::weights::{calc_delta_fair, LoadWeight};
use crate::guest::deadline::Dl;
use crate::guest::linux_core::{
    DequeueFlags, EnqueueFlags, LinuxCore, LinuxCtx, Rq, SchedClass, WakeFlags,
};
use crate::guest::rt::Rt;

/// `cfs_rq->min_vruntime`'s initial value (−2^20 ns, as u64).
const MIN_VRUNTIME_INIT: u64 = (1u64 << 20).wrapping_neg();
/// The bounds of a custom slice (`sched_setattr` with `sched_runtime`, 6.12+).
const SLICE_MIN_NS: u64 = 100_000;
const SLICE_MAX_NS: u64 = 100_000_000;

#[inline]
fn vdiff(a: u64, b: u64) -> i64 {
    a.wrapping_sub(b) as i64
}

/// `a` before `b` (deadline or vruntime order). Linux 6.x: entity_before (on deadlines)
#[inline]
fn before(a: u64, b: u64) -> bool {
    vdiff(a, b) < 0
}

/// Linux: min_vruntime (the helper)
#[inline]
fn min_v(a: u64, b: u64) -> u64 {
    if before(b, a) {
        b
    } else {
        a
    }
}

// ------------------------------------------------------------------------------------------------
// State
// ------------------------------------------------------------------------------------------------

/// A task's scheduling entity (Linux 6.x `struct sched_entity` plus the task fields read).
#[derive(Clone, Debug, Default)]
struct Se {
    vruntime: u64,
    /// Virtual deadline; relative to `vruntime` while `rel_deadline`.
    deadline: u64,
    /// Saved lag (`V − vruntime` at the last dequeue). 6.6–6.16 also use it, while the task is
    /// current, as the protection marker: `vlag == deadline` means "protected".
    vlag: i64,
    /// The request, in wall ns.
    slice: u64,
    custom_slice: bool,
    /// 6.17+: the vruntime up to which the current task is protected.
    vprot: u64,
    rel_deadline: bool,
    sched_delayed: bool,
    /// The next enqueue is a fork's (ENQUEUE_INITIAL).
    initial: bool,
    exec_start: u64,
    sum_exec_runtime: u64,
    prev_sum_exec_runtime: u64,
    load: LoadWeight,
    on_rq: bool,
    cpu: usize,
    policy: Policy,
    allowed: CpuSet,
    wakee_flips: u32,
    wakee_flip_decay_ts: u64,
    last_wakee: Option<usize>,
    recent_used_cpu: usize,
    /// PELT signal (`se->avg`, cfs/pelt.rs).
    avg: SchedAvg,
    /// A new task not yet attached (`post_init_entity_util_avg` at its first enqueue).
    pelt_fresh: bool,
}

/// One vCPU's `cfs_rq` (and the `rq` fields the class uses).
#[derive(Clone, Debug, Default)]
struct EevdfRq {
    min_vruntime: u64,
    /// Σ w_i·(v_i − min_vruntime) over the queued entities (not curr).
    avg_vruntime: i64,
    /// Σ w_i over the queued entities (not curr).
    avg_load: i64,
    /// The queued entities (not curr) by deadline, equal deadlines in insertion order.
    queue: Vec<usize>,
    curr: Option<usize>,
    next: Option<usize>,
    /// The last pick took the outgoing task again: its `set_next_task` keeps the slice
    /// protection it had (upstream puts and sets nothing when `prev == next`).
    repick: bool,
    /// Entities on the queue, curr and delayed ones included (`cfs_rq->nr_running`).
    nr_running: u32,
    idle_nr_running: u32,
    /// Σ weights of those entities (`cfs_rq->load.weight`).
    load: u64,
    /// PELT signal (`cfs_rq->avg`, `cfs_rq->removed`).
    pelt: RqAvg,
    lb: LbState,
}

/// Linux EEVDF (6.6, 6.12 or 6.18) over the vCPUs of one guest.
pub struct Eevdf {
    params: EevdfParams,
    feat: Features,
    kernel: EevdfKernel,
    /// `sysctl_sched_base_slice` (scaled).
    base_slice: u64,
    hz: u64,
    tick_ns: u64,
    topo: Vec<CpuTopo>,
    llc_size: Vec<u32>,
    smt: bool,
    rqs: Vec<EevdfRq>,
    ses: Vec<Se>,
}

/// A Linux 6.x kernel whose fair class is EEVDF.
/// A Linux 6.x kernel: EEVDF as the fair class under the RT class (no deadline class yet).
pub type EevdfSched = LinuxCore<Eevdf, Rt, Dl>;

impl Eevdf {
    /// `cpus`: the topology of the guest's vCPUs; their number scales the base slice. Panics
    /// if `params` does not pass [`EevdfParams::validate`].
    pub fn new(params: EevdfParams, cpus: &[CpuTopo]) -> Eevdf {
        if let Err(e) = params.validate() {
            panic!("Eevdf::new needs validated parameters: {e}");
        }
        let feat = params.features.resolve(params.kernel).expect("validated");
        let factor = tunable_factor(params.sched_tunable_scaling, cpus.len());
        let base_slice = params
            .base_slice_ns
            .unwrap_or(params.kernel.normalized_base_slice_ns() * factor);
        let hz = params.hz as u64;
        let n = cpus.len();
        let llc_size = cpus
            .iter()
            .map(|t| cpus.iter().filter(|u| u.llc == t.llc).count() as u32)
            .collect();
        let siblings =
            |a: &CpuTopo, b: &CpuTopo| a.node == b.node && a.socket == b.socket && a.core == b.core;
        let smt = (0..n).any(|i| (i + 1..n).any(|j| siblings(&cpus[i], &cpus[j])));
        let rq = EevdfRq {
            min_vruntime: MIN_VRUNTIME_INIT,
            lb: LbState {
                balance_interval_ms: n.max(1) as u64,
                ..Default::default()
            },
            ..Default::default()
        };
        Eevdf {
            kernel: params.kernel,
            params,
            feat,
            base_slice,
            hz,
            tick_ns: (NS_PER_S + hz / 2) / hz,
            topo: cpus.to_vec(),
            llc_size,
            smt,
            rqs: vec![rq; n],
            ses: Vec::new(),
        }
    }

    /// EEVDF as the fair class of a Linux 6.x core, with a tick every 1/HZ.
    pub fn sched(params: EevdfParams, cpus: &[CpuTopo]) -> EevdfSched {
        // The fair server (dl_server) is 6.12's; 6.6 throttles RT as 5.10 does.
        let rt_params = params
            .rt
            .clone()
            .with_fair_server_default(params.kernel >= EevdfKernel::V6_12);
        let rt = Rt::new(rt_params, params.hz, cpus.len());
        let dl = Dl::new(params.deadline.clone(), cpus.len());
        let e = Eevdf::new(params, cpus);
        LinuxCore::with_classes("eevdf", cpus.len(), e.tick_ns, e, rt, dl)
    }

    fn v6_12(&self) -> bool {
        self.kernel >= EevdfKernel::V6_12
    }

    fn v6_18(&self) -> bool {
        self.kernel >= EevdfKernel::V6_18
    }

    // --- time ----------------------------------------------------------------------------------

    /// Charges the running entity; with `may_resched`, requests a reschedule when its request is
    /// used up (or, 6.12, a cancelled protection left it ineligible; 6.18, its protection
    /// ended) and another entity is queued. Linux 6.x: update_curr
    fn update_curr(&mut self, ctx: &mut LinuxCtx, cpu: usize, may_resched: bool) {
        let Some(c) = self.rqs[cpu].curr else { return };
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
        let resched = self.update_deadline(c);
        self.update_min_vruntime(cpu);
        if self.rqs[cpu].nr_running == 1 {
            return;
        }
        let preempt = match self.kernel {
            EevdfKernel::V6_6 => false,
            EevdfKernel::V6_12 => self.did_preempt_short(cpu, c),
            EevdfKernel::V6_18 => !self.protect_slice(c),
        };
        if resched || preempt {
            if may_resched {
                ctx.resched_curr(cpu);
            }
            self.clear_buddies(cpu, c);
        }
    }

    // --- placement -----------------------------------------------------------------------------

    /// Places `e` on `cpu`'s queue (not yet in it): `vruntime = V − lag` with the saved lag
    /// inflated by (W + w)/W (PLACE_LAG, when the queue has entities), then the deadline: the
    /// kept relative one (PLACE_REL_DEADLINE), else a slice (half of one for a new task with
    /// PLACE_DEADLINE_INITIAL) after the vruntime. Linux 6.x: place_entity
    fn place_entity(&mut self, cpu: usize, e: usize, initial: bool) {
        let v_avg = self.avg_vruntime(cpu);
        let slice = self.request(e);
        self.ses[e].slice = slice;
        let mut vslice = calc_delta_fair(slice, self.ses[e].load) as i64;
        let mut lag = 0i64;
        let rq = &self.rqs[cpu];
        if self.feat.place_lag && rq.nr_running > 0 && self.ses[e].vlag != 0 {
            lag = self.ses[e].vlag;
            let mut load = rq.avg_load;
            if let Some(c) = rq.curr.filter(|&c| self.ses[c].on_rq) {
                load += self.ses[c].load.weight as i64;
            }
            let w = self.ses[e].load.weight as i64;
            lag = lag.wrapping_mul(load + w);
            if load == 0 {
                load = 1;
            }
            lag /= load;
        }
        let se = &mut self.ses[e];
        se.vruntime = v_avg.wrapping_sub(lag as u64);
        if se.rel_deadline {
            se.deadline = se.deadline.wrapping_add(se.vruntime);
            se.rel_deadline = false;
            return;
        }
        if self.feat.place_deadline_initial && initial {
            vslice /= 2;
        }
        se.deadline = se.vruntime.wrapping_add(vslice as u64);
    }

    // --- enqueue / dequeue ---------------------------------------------------------------------

    /// Linux 6.x: enqueue_entity (+ enqueue_task_fair's counters)
    fn enqueue_entity(&mut self, ctx: &mut LinuxCtx, cpu: usize, e: usize, initial: bool) {
        let is_curr = self.rqs[cpu].curr == Some(e);
        if is_curr {
            self.place_entity(cpu, e, initial);
        }
        pelt::util_est_enqueue(&mut self.rqs[cpu].pelt.avg, &self.ses[e].avg);
        self.update_curr(ctx, cpu, true);
        self.update_load_avg(ctx, cpu, e, true);
        if !is_curr {
            self.place_entity(cpu, e, initial);
        }
        let rq = &mut self.rqs[cpu];
        rq.load += self.ses[e].load.weight;
        rq.nr_running += 1;
        if self.ses[e].policy == Policy::Idle {
            rq.idle_nr_running += 1;
        }
        if !is_curr {
            self.queue_insert(cpu, e);
        }
        self.ses[e].on_rq = true;
    }

    /// A delayed task wakes where it is still queued. Linux 6.12+: requeue_delayed_entity
    fn requeue_delayed_entity(&mut self, cpu: usize, e: usize) {
        debug_assert!(self.ses[e].sched_delayed && self.ses[e].on_rq);
        if self.feat.delay_zero {
            self.update_entity_lag(cpu, e);
            if self.ses[e].vlag > 0 {
                let is_curr = self.rqs[cpu].curr == Some(e);
                self.rqs[cpu].nr_running -= 1;
                if !is_curr {
                    self.queue_remove(cpu, e);
                }
                self.ses[e].vlag = 0;
                self.place_entity(cpu, e, false);
                if !is_curr {
                    self.queue_insert(cpu, e);
                }
                self.rqs[cpu].nr_running += 1;
            }
        }
        self.ses[e].sched_delayed = false;
    }

    /// Takes `e` off `cpu`'s queue: saves its lag; a migration (not `sleep`) keeps its deadline
    /// relative (PLACE_REL_DEADLINE); with DELAY_DEQUEUE a sleeping entity that is not eligible
    /// stays queued, `sched_delayed` (returns false). `delayed`: the dequeue that completes a
    /// delayed one (DEQUEUE_DELAYED). Linux 6.x: dequeue_entity
    fn dequeue_entity(
        &mut self,
        ctx: &mut LinuxCtx,
        cpu: usize,
        e: usize,
        sleep: bool,
        delayed: bool,
    ) -> bool {
        self.update_curr(ctx, cpu, true);
        self.update_load_avg(ctx, cpu, e, false);
        if !delayed && sleep && self.feat.delay_dequeue && !self.entity_eligible(cpu, e) {
            if self.rqs[cpu].next == Some(e) {
                self.rqs[cpu].next = None;
            }
            self.ses[e].sched_delayed = true;
            return false;
        }
        self.clear_buddies(cpu, e);
        pelt::util_est_dequeue(&mut self.rqs[cpu].pelt.avg, &mut self.ses[e].avg, sleep);
        self.update_entity_lag(cpu, e);
        if self.feat.place_rel_deadline && !sleep {
            let se = &mut self.ses[e];
            se.deadline = se.deadline.wrapping_sub(se.vruntime);
            se.rel_deadline = true;
        }
        if self.rqs[cpu].curr != Some(e) {
            self.queue_remove(cpu, e);
        }
        let se = &mut self.ses[e];
        se.on_rq = false;
        let rq = &mut self.rqs[cpu];
        rq.load -= se.load.weight;
        rq.nr_running -= 1;
        if se.policy == Policy::Idle {
            rq.idle_nr_running -= 1;
        }
        self.update_min_vruntime(cpu);
        if delayed {
            // finish_delayed_dequeue_entity
            let se = &mut self.ses[e];
            se.sched_delayed = false;
            if self.feat.delay_zero && se.vlag > 0 {
                se.vlag = 0;
            }
        }
        true
    }

    /// Linux 6.x: clear_buddies (only `next` is left in EEVDF)
    #[inline]
    fn clear_buddies(&mut self, cpu: usize, e: usize) {
        if self.rqs[cpu].next == Some(e) {
            self.rqs[cpu].next = None;
        }
    }

    /// Linux 6.x: set_next_buddy refuses SCHED_IDLE entities.
    fn set_next_buddy(&mut self, cpu: usize, e: usize) {
        if self.ses[e].policy != Policy::Idle {
            self.rqs[cpu].next = Some(e);
        }
    }

    // --- picking -------------------------------------------------------------------------------

    /// The eligible entity with the earliest deadline, `curr` included; a protected eligible
    /// `curr` is kept when `protect`. `curr`: the running (or, at `schedule`, outgoing) entity,
    /// which may itself be on the queue. Linux 6.x: pick_eevdf / __pick_eevdf
    fn pick_eevdf(&self, cpu: usize, curr: Option<usize>, protect: bool) -> Option<usize> {
        let rq = &self.rqs[cpu];
        let first = rq.queue.first().copied();
        if rq.nr_running == 1 {
            return curr.filter(|&c| self.ses[c].on_rq).or(first);
        }
        let curr = curr.filter(|&c| self.ses[c].on_rq && self.entity_eligible(cpu, c));
        if let Some(c) = curr {
            let protected = if self.v6_18() {
                protect && self.protect_slice(c)
            } else {
                self.feat.run_to_parity && protect && self.protect_slice(c)
            };
            if protected {
                return Some(c);
            }
        }
        let best = rq
            .queue
            .iter()
            .copied()
            .find(|&x| self.entity_eligible(cpu, x));
        match (best, curr) {
            (None, Some(c)) => Some(c),
            (Some(b), Some(c)) if before(self.ses[c].deadline, self.ses[b].deadline) => Some(c),
            (Some(b), _) => Some(b),
            // 6.6 logged "EEVDF scheduling fail" and took the leftmost; the exact eligibility
            // test always finds the smallest vruntime eligible, so this is not reached.
            (None, None) => first,
        }
    }

    /// Linux 6.x: pick_next_entity (PICK_BUDDY / NEXT_BUDDY, then pick_eevdf) with
    /// pick_task_fair's loop over delayed entities, which are dequeued when picked.
    fn pick_next_entity(&mut self, ctx: &mut LinuxCtx, cpu: usize) -> Option<usize> {
        // The outgoing task, put back by `put_prev_task`, is upstream's `curr` of this pick.
        let outgoing = ctx
            .cpu(CpuId(cpu as u32))
            .curr
            .map(|p| p.idx())
            .filter(|&p| self.ses[p].on_rq && self.ses[p].cpu == cpu && !self.ses[p].sched_delayed);
        loop {
            if self.rqs[cpu].nr_running == 0 {
                return None;
            }
            let buddy_ok = if self.v6_12() {
                self.feat.pick_buddy
            } else {
                self.feat.next_buddy
            };
            if buddy_ok {
                if let Some(n) = self.rqs[cpu].next {
                    if self.entity_eligible(cpu, n) {
                        return Some(n);
                    }
                }
            }
            let se = self.pick_eevdf(cpu, outgoing, true)?;
            if self.ses[se].sched_delayed {
                self.dequeue_entity(ctx, cpu, se, true, true);
                continue;
            }
            return Some(se);
        }
    }

    /// Linux 6.x: set_next_entity. `repick`: the pick took the outgoing task again, which
    /// upstream never puts nor sets (6.6 `pick_next_task_fair`'s `prev != p` test under
    /// FAIR_GROUP_SCHED, 6.12+ `put_prev_set_next_task`'s `next == prev` exit): the model has put
    /// it back in the queue and takes it out again, but its slice protection is left as it was,
    /// not re-armed (a yield's later deadline must not become a fresh protected slice).
    fn set_next_entity(&mut self, ctx: &LinuxCtx, cpu: usize, e: usize, repick: bool) {
        self.clear_buddies(cpu, e);
        if self.ses[e].on_rq {
            self.queue_remove(cpu, e);
            self.update_load_avg(ctx, cpu, e, false);
            if !repick {
                self.set_protect_slice(cpu, e);
            }
        }
        let now = ctx.rq_clock_task(cpu);
        let se = &mut self.ses[e];
        se.exec_start = now;
        se.prev_sum_exec_runtime = se.sum_exec_runtime;
        self.rqs[cpu].curr = Some(e);
    }

    /// Linux 6.x: put_prev_entity. The charge here requests no reschedule: upstream's
    /// `__schedule` clears need_resched after its pick.
    fn put_prev_entity(&mut self, ctx: &mut LinuxCtx, cpu: usize) {
        let Some(prev) = self.rqs[cpu].curr else {
            return;
        };
        if self.ses[prev].on_rq {
            self.update_curr(ctx, cpu, false);
            self.queue_insert(cpu, prev);
            self.update_load_avg(ctx, cpu, prev, false);
        }
        self.rqs[cpu].curr = None;
    }

    // --- fork ----------------------------------------------------------------------------------

    /// Linux 6.x: task_fork_fair with sched_fork's `vlag = 0`. 6.6 charges the parent's queue
    /// and places the child there with ENQUEUE_INITIAL, which the enqueue on its CPU overwrites
    /// (L4): only the parent's charge remains of it. 6.12+ do neither.
    fn task_fork_fair(&mut self, ctx: &mut LinuxCtx, parent_cpu: usize, e: usize) {
        if self.kernel == EevdfKernel::V6_6 {
            ctx.update_rq_clock(parent_cpu);
            self.update_curr(ctx, parent_cpu, true);
        }
        let se = &mut self.ses[e];
        se.vlag = 0;
        se.rel_deadline = false;
        se.sched_delayed = false;
        // 6.12+: wake_up_new_task enqueues with ENQUEUE_INITIAL; 6.6 without.
        se.initial = self.kernel >= EevdfKernel::V6_12;
    }
}

impl SchedClass for Eevdf {
    /// SCHED_NORMAL, SCHED_BATCH and SCHED_IDLE. It takes every policy, so that a core with no
    /// RT class above it (`LinuxCore<Eevdf>`) still runs SCHED_FIFO and SCHED_RR tasks as
    /// normal tasks; in [`EevdfSched`] the RT class takes them first.
    fn accepts(&self, _policy: Policy) -> bool {
        true
    }

    /// `rq->cfs.h_nr_running` (no groups): the queue's entities, delayed ones included as
    /// 6.12.0 counts them; read by the fair server (`dl_server_start`).
    #[inline]
    fn nr_running(&self, cpu: CpuId) -> u32 {
        self.rqs[cpu.idx()].nr_running
    }

    fn init_rq(&self, rq: &mut Rq) {
        rq.avg_idle = 2 * self.params.sched_migration_cost_ns;
        rq.max_idle_balance_cost = 2 * self.params.sched_migration_cost_ns;
        rq.drop_excess_steal = !self.params.steal_carry_over;
    }

    /// Build time: a blocked task on its initial vCPU (or the first allowed one), with the base
    /// slice, or from 6.12 its own (`sched_runtime`, read from `sched_runtime_ns` of a
    /// fair policy: `sched_setattr` uses the one field for both).
    fn init_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, _owned: bool) {
        assert_eq!(e.idx(), self.ses.len(), "insert: entities come in id order");
        let p = &ctx.ent(e).params;
        let allowed = p.hard_affinity.and(&CpuSet::first_n(self.rqs.len()));
        let cpu = allowed
            .test_or_cycle(p.initial_cpu)
            .unwrap_or_else(|| panic!("task {} has no allowed vCPU", p.name))
            .idx();
        let fair = matches!(
            p.linux.policy,
            Policy::Normal | Policy::Batch | Policy::Idle
        );
        let custom = self.v6_12() && fair && p.linux.times.sched_runtime_ns > 0;
        let slice = if custom {
            p.linux
                .times
                .sched_runtime_ns
                .clamp(SLICE_MIN_NS, SLICE_MAX_NS)
        } else {
            self.base_slice
        };
        self.ses.push(Se {
            load: LoadWeight::of_task(p.linux.nice, p.linux.policy),
            slice,
            custom_slice: custom,
            cpu,
            policy: p.linux.policy,
            allowed,
            recent_used_cpu: cpu,
            avg: SchedAvg {
                load_avg: LoadWeight::of_task(p.linux.nice, p.linux.policy).weight,
                ..Default::default()
            },
            pelt_fresh: true,
            ..Default::default()
        });
        let n = self.ses.len();
        for rq in &mut self.rqs {
            rq.queue.reserve(n - rq.queue.len());
        }
    }

    #[inline]
    fn task_cpu(&self, e: EntityId) -> CpuId {
        CpuId(self.ses[e.idx()].cpu as u32)
    }

    /// `select_task_rq_fair` (CFS's, see the module doc); a delayed task is still queued and
    /// wakes where it is (upstream's `ttwu_runnable` takes it before any CPU selection).
    #[inline]
    fn select_task_rq(&mut self, ctx: &mut LinuxCtx, e: EntityId, info: WakeInfo) -> CpuId {
        let se = &self.ses[e.idx()];
        if se.sched_delayed {
            return CpuId(se.cpu as u32);
        }
        debug_assert!(!se.on_rq, "wake of a queued task");
        CpuId(SelectFair::select_task_rq_fair(self, ctx, e.idx(), info) as u32)
    }

    /// Fork placement (CFS's flattened `find_idlest_cpu`), then `__set_task_cpu`.
    #[inline]
    fn select_task_rq_fork(&mut self, ctx: &mut LinuxCtx, e: EntityId, parent: CpuId) -> CpuId {
        let cpu = SelectFair::find_idlest_cpu(self, ctx, e.idx(), parent.idx());
        let se = &mut self.ses[e.idx()];
        se.cpu = cpu;
        se.exec_start = 0;
        CpuId(cpu as u32)
    }

    /// Linux 6.x: migrate_task_rq_fair + set_task_cpu. The lag travels as is: no vruntime
    /// renormalisation (§2.1).
    #[inline]
    fn migrate_task_rq(&mut self, _ctx: &mut LinuxCtx, e: EntityId, new_cpu: CpuId) {
        let se = &mut self.ses[e.idx()];
        if se.avg.last_update_time != 0 {
            self.rqs[se.cpu]
                .pelt
                .remove_entity(&mut se.avg, se.load.weight);
        }
        se.exec_start = 0;
        se.cpu = new_cpu.idx();
    }

    #[inline]
    fn task_fork(&mut self, ctx: &mut LinuxCtx, e: EntityId, parent: CpuId) {
        self.task_fork_fair(ctx, parent.idx(), e.idx());
        self.ses[e.idx()].recent_used_cpu = parent.idx();
    }

    /// Linux 6.x: enqueue_task_fair: a delayed task is requeued in place (ENQUEUE_DELAYED),
    /// any other placed by `place_entity`.
    #[inline]
    fn enqueue_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId, _f: EnqueueFlags) {
        let (cpu, e) = (cpu.idx(), e.idx());
        if self.ses[e].sched_delayed {
            self.requeue_delayed_entity(cpu, e);
            return;
        }
        let initial = std::mem::take(&mut self.ses[e].initial);
        self.enqueue_entity(ctx, cpu, e, initial);
    }

    /// Linux 6.x: dequeue_task_fair (with DELAY_DEQUEUE a sleeping ineligible task stays).
    #[inline]
    fn dequeue_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId, f: DequeueFlags) {
        self.dequeue_entity(ctx, cpu.idx(), e.idx(), f.sleep, false);
    }

    /// Linux 6.6–6.17: yield_task_fair pushes the deadline one slice later; 6.18 moves an
    /// eligible yielder's vruntime to its deadline and gives it a fresh one (ERRATA L3). The
    /// early exit tests the whole run queue (L7).
    fn yield_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId) {
        let (cpu, e) = (cpu.idx(), e.idx());
        if self.rqs[cpu].nr_running == 1 {
            return;
        }
        self.clear_buddies(cpu, e);
        ctx.update_rq_clock(cpu);
        self.update_curr(ctx, cpu, true);
        let vslice = calc_delta_fair(self.ses[e].slice, self.ses[e].load);
        if self.v6_18() {
            if self.entity_eligible(cpu, e) {
                let se = &mut self.ses[e];
                se.vruntime = se.deadline;
                se.deadline = se.deadline.wrapping_add(vslice);
            }
        } else {
            let se = &mut self.ses[e];
            se.deadline = se.deadline.wrapping_add(vslice);
        }
    }

    /// Linux 6.x: yield_to_task_fair: `target` becomes the next buddy (picked first only with
    /// NEXT_BUDDY in 6.6, PICK_BUDDY from 6.12; L3), then the current task yields.
    fn yield_to_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, target: EntityId) -> bool {
        let t = target.idx();
        if !self.ses[t].on_rq || self.ses[t].sched_delayed {
            return false;
        }
        self.set_next_buddy(self.ses[t].cpu, t);
        if let Some(curr) = ctx.cpu(cpu).curr {
            if self.ses[curr.idx()].cpu == cpu.idx() {
                self.yield_task(ctx, cpu, curr);
            }
        }
        true
    }

    #[inline]
    fn wakeup_preempt(
        &mut self,
        ctx: &mut LinuxCtx,
        cpu: CpuId,
        _curr: EntityId,
        p: EntityId,
        f: WakeFlags,
    ) {
        self.check_preempt_wakeup(ctx, cpu.idx(), p.idx(), f.fork);
    }

    /// Linux 6.x: pick_next_task_fair (with newidle balance when nothing is queued). Delayed
    /// entities the pick meets are dequeued on the way.
    fn pick_next_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId) -> Option<EntityId> {
        let cpu = cpu.idx();
        if self.rqs[cpu].lb.push_cpu.is_some() {
            BalanceFair::active_load_balance(self, ctx, cpu);
        }
        if self.rqs[cpu].nr_running > 0 {
            if let Some(n) = self.pick_next_entity(ctx, cpu) {
                let n = EntityId(n as u32);
                self.rqs[cpu].repick = ctx.cpu(CpuId(cpu as u32)).curr == Some(n);
                return Some(n);
            }
        }
        // Nothing (or only delayed entities, now dequeued): newidle balance, then pick what it
        // pulled. A pull needs no resched request: this very pick serves it.
        ctx.rq_mut(cpu).need_resched = true;
        BalanceFair::newidle_balance(self, ctx, cpu);
        ctx.rq_mut(cpu).need_resched = false;
        self.pick_next_entity(ctx, cpu).map(|n| EntityId(n as u32))
    }

    #[inline]
    fn put_prev_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, prev: EntityId) {
        debug_assert_eq!(Some(prev.idx()), self.rqs[cpu.idx()].curr);
        self.put_prev_entity(ctx, cpu.idx());
    }

    #[inline]
    fn set_next_task(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, e: EntityId) {
        let repick = std::mem::take(&mut self.rqs[cpu.idx()].repick);
        self.set_next_entity(ctx, cpu.idx(), e.idx(), repick);
    }

    /// Linux 6.x: task_tick_fair → entity_tick: `update_curr`, which reschedules at the end of
    /// the request (no separate tick rule; HRTICK off).
    #[inline]
    fn task_tick(&mut self, ctx: &mut LinuxCtx, cpu: CpuId, _curr: EntityId) {
        let cpu = cpu.idx();
        if let Some(c) = self.rqs[cpu].curr.filter(|&c| self.ses[c].on_rq) {
            self.update_curr(ctx, cpu, true);
            self.update_load_avg(ctx, cpu, c, false);
        }
    }

    /// CFS's periodic and NOHZ idle balancing (see the module doc).
    fn trigger_load_balance(&mut self, ctx: &mut LinuxCtx, cpu: CpuId) {
        BalanceFair::trigger_load_balance(self, ctx, cpu.idx());
    }

    /// Nothing is kept for a dead task beyond its entity (dequeued by the `block` before; a
    /// delayed one is dequeued here, as upstream's exit path completes it).
    fn task_dead(&mut self, ctx: &mut LinuxCtx, e: EntityId) {
        let e = e.idx();
        if self.ses[e].sched_delayed {
            let cpu = self.ses[e].cpu;
            ctx.update_rq_clock(cpu);
            self.dequeue_entity(ctx, cpu, e, true, true);
        }
        let se = &mut self.ses[e];
        if se.avg.last_update_time != 0 {
            self.rqs[se.cpu]
                .pelt
                .remove_entity(&mut se.avg, se.load.weight);
        }
    }

    /// set_user_nice / sched_setattr within the fair class (eevdf/shared.rs).
    fn prio_changed(&mut self, ctx: &mut LinuxCtx, e: EntityId) -> bool {
        self.change_prio(ctx, e)
    }

    /// The task's vruntime (absolute; the raw u64 read as i64).
    fn probe(&self, e: EntityId) -> Option<i64> {
        self.ses.get(e.idx()).map(|se| se.vruntime as i64)
    }

    fn rq_hotplug(&mut self, ctx: &mut LinuxCtx, cpu: CpuId) {
        self.hotplug(ctx, cpu.idx());
    }

    /// The first queued, not delayed task in deadline order.
    fn next_queued(&self, cpu: CpuId) -> Option<EntityId> {
        self.rqs[cpu.idx()]
            .queue
            .iter()
            .find(|&&e| !self.ses[e].sched_delayed)
            .map(|&e| EntityId(e as u32))
    }

    fn move_queued_task(&mut self, ctx: &mut LinuxCtx, e: EntityId, src: CpuId, dst: CpuId) {
        self.move_queued(ctx, e.idx(), src.idx(), dst.idx());
    }
}

#[cfg(test)]
mod tests;
