//! Xen's SEDF scheduler (Simple Earliest Deadline First), historic: present in Xen 3.x to 4.5,
//! removed in 4.6. Modelled as in Xen 4.2.1 (`xen/common/sched_sedf.c`, tag RELEASE-4.2.1) and
//! xen-schedulers.md §7. Facts only; the code is our own.
//!
//! # What it models
//!
//! Each vCPU has a *period* and a *slice*: it is guaranteed `slice` of CPU time in every period,
//! and the CPU runs, among the vCPUs whose period has begun, the one with the earliest deadline
//! (the end of its current period; EDF). Every CPU has its own queues, and a vCPU stays on the
//! CPU it was placed on (`sedf_pick_cpu`: the first online CPU of its affinity, only when it is
//! moved; there is no load balancing):
//!
//! * the *runqueue*, sorted by deadline (FIFO among equals), holds vCPUs whose period has begun
//!   and whose slice is not used up; the running vCPU stays at its place on it;
//! * the *waitqueue*, sorted by the beginning of the next period, holds vCPUs that used up their
//!   slice; when their period begins they move to the runqueue;
//! * two *extra queues* hold vCPUs that may run beyond their slice (`extratime`) when the
//!   runqueue is empty: the *penalty* queue (vCPUs that lost time to a short block, by
//!   `(period << 10) / lost`) before the *utilisation* queue (by `(1 << 17) / extraweight`, or
//!   `(period << 10) / slice` without an extra weight), lowest score first. Extra time is handed
//!   out in quanta of 500 µs, and only when at least a quantum is left before the next period
//!   begins; when a vCPU's quantum ends, every vCPU queued with it has its score lowered by the
//!   runner's old score and the runner is re-queued with its fresh one (a weighted round robin).
//!
//! A slice overrun is carried into the next period; a vCPU found past its deadline with its
//! slice unfinished is given its next period (deadline moved to the first one after now,
//! `cputime` reset). Running extra time resets `cputime` too.
//!
//! Wake-up (`sedf_wake`): a vCPU waking before its period begins just goes back to the
//! waitqueue (and the extra queues); one waking inside its period ("short block") takes the
//! next period (deadline += period), and the part of its slice it did not use is recorded as a
//! penalty that earns it a place on the penalty queue; one waking after its deadline ("long
//! block") starts a fresh period at the wake time. Its CPU is rescheduled if the vCPU's period
//! begins before the CPU's current slice ends, or the CPU runs idle, or (running extra time)
//! the woken vCPU is on the penalty queue with a better score.
//!
//! # Domain parameters (`xl sched-sedf -d D -p -s -l -e -w`)
//!
//! `[[domain]]` `period_us` and `budget_us` are the period and slice (the slice alone keeps
//! Xen's 100 ms period; a period needs a slice: Xen refuses a slice below 5 µs, and a period
//! alone leaves it 0), 10 µs ≤ period ≤ 10 s, 5 µs ≤ slice ≤ period; `extratime` (default on)
//! is the extra flag. Without a period or slice the domain is weighted: with `extratime` its
//! `weight` is the extra weight of a best-effort vCPU (slice 0: it runs in extra time only, as
//! a new domain does with extra weight 1), without it the weight is a share of every CPU's
//! 100 ms period (`sedf_adjust_weights`: slice = weight × (100 ms − 5 ms − the time reserved
//! by the vCPUs with a period on that CPU) / the weights' sum there), at most 32767 (Xen keeps
//! it in a `short`). `xl`'s latency (`-l`) is not a field: 4.2.1 only stores it (the latency
//! scaling of earlier releases is gone; the doubling of a shortened period in
//! `desched_edf_dom` never triggers, since nothing shortens it any more).
//!
//! # Engine mapping
//!
//! SEDF implements the Xen ops ([`XenOps`]) on the Xen core (`host/xen_core.rs`): `insert_unit`
//! is `sedf_insert_vcpu` followed by `sedf_adjust` with the domain's parameters, `do_schedule`
//! is `sedf_do_schedule`, `wake` is `sedf_wake`, `sleep` is `sedf_sleep`, `pick_resource` is
//! `sedf_pick_cpu`. Xen calls no hook when a vCPU blocks: the next `do_schedule` sees it not
//! runnable and marks it asleep. SEDF has no yield hook.
//!
//! # Simplifications
//!
//! * One cpupool; no tasklets; no CPU hot-plug (refused at validation); no run-time parameter
//!   change (refused); no trace records of its own.
//! * Scores are 64-bit (Xen's are `int`, which stay far from overflow with these ranges).

use crate::host::xen_core::{
    XenCore, XenCtx, XenOps, TIMER_ENTRY_DEFAULT_NS, TIMER_SLOP_DEFAULT_NS,
};
use vmsched_core::cpuset::{CpuSet, MAX_CPUS};
use vmsched_core::ids::{CpuId, EntityId};
use vmsched_core::sched::{Pick, WakeInfo};
use vmsched_core::time::Nanos;

/// Length of an extra-time quantum.
pub const EXTRA_QUANTUM: i64 = 500_000;
/// The period of weighted and best-effort vCPUs.
pub const WEIGHT_PERIOD: i64 = 100_000_000;
/// Part of the weight period no weight can claim.
const WEIGHT_SAFETY: i64 = 5_000_000;
/// Period range (ns).
const PERIOD_MIN: i64 = 10_000;
const PERIOD_MAX: i64 = 10_000_000_000;
/// Shortest slice (ns).
const SLICE_MIN: i64 = 5_000;
/// The idle vCPU's slice when nothing is queued at all.
const IDLE_SLICE: i64 = 1_000_000_000;
/// Extra queues: penalty, utilisation.
const PEN_Q: usize = 0;
const UTIL_Q: usize = 1;

/// `[host] scheduler = "sedf"`: Xen's timer slop and the core's timer entry latency only (SEDF
/// has no scheduler-wide parameter).
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SedfParams {
    /// Xen's `timer_slop` (ns).
    pub timer_slop_ns: Nanos,
    /// Timer entry latency of the Xen core (ns); 0 = exact timers.
    pub timer_entry_ns: Nanos,
}

impl Default for SedfParams {
    fn default() -> Self {
        SedfParams {
            timer_slop_ns: TIMER_SLOP_DEFAULT_NS,
            timer_entry_ns: TIMER_ENTRY_DEFAULT_NS,
        }
    }
}

impl SedfParams {
    /// Checks the fields, naming the one at fault.
    pub fn validate(&self) -> Result<(), String> {
        let t = self.timer_entry_ns;
        if t > 1_000_000 {
            return Err(format!("timer_entry_ns: {t} must be in 0..=1000000 (ns)"));
        }
        Ok(())
    }
}

/// Checks a domain's SEDF fields as `xl sched-sedf` and `sedf_adjust` do; returns (field,
/// message). `period_us`/`budget_us` as given, `weight` the domain's.
pub fn validate_domain(
    period_us: Option<u64>,
    budget_us: Option<u64>,
    weight: u32,
    cap: u32,
) -> Result<(), (String, String)> {
    if cap != 0 {
        return Err((
            "cap".into(),
            "SEDF has no caps (xl sched-sedf takes -p -s -l -e -w)".into(),
        ));
    }
    match (period_us, budget_us) {
        (Some(_), None) => Err((
            "budget_us".into(),
            "SEDF needs a slice with a period (xl sched-sedf -p alone leaves the slice 0, which \
             Xen refuses)"
                .into(),
        )),
        (p, Some(s)) => {
            let p = p.unwrap_or((WEIGHT_PERIOD / 1000) as u64);
            if !(PERIOD_MIN / 1000..=PERIOD_MAX / 1000).contains(&(p as i64)) {
                return Err((
                    "period_us".into(),
                    format!("SEDF's period must be in 10..=10000000 µs, got {p}"),
                ));
            }
            if (s as i64) < SLICE_MIN / 1000 || s > p {
                return Err((
                    "budget_us".into(),
                    format!("SEDF's slice must be in 5..=period ({p}) µs, got {s}"),
                ));
            }
            Ok(())
        }
        (None, None) if weight > i16::MAX as u32 => Err((
            "weight".into(),
            format!("SEDF keeps a weight in a short: at most 32767, got {weight}"),
        )),
        (None, None) => Ok(()),
    }
}

/// Which ordered list a vCPU is on (`list`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    None,
    Run,
    Wait,
}

/// Per-vCPU state (Xen `struct sedf_vcpu_info`).
#[derive(Clone, Debug)]
struct Unit {
    processor: CpuId,
    period: i64,
    slice: i64,
    period_orig: i64,
    slice_orig: i64,
    /// Weight of a weighted vCPU (0: none).
    weight: i64,
    /// Extra weight of a best-effort vCPU (0: none).
    extraweight: i64,
    extra_aware: bool,
    asleep: bool,
    run_pen: bool,
    run_util: bool,
    want_pen_q: bool,
    deadl_abs: i64,
    sched_start_abs: i64,
    cputime: i64,
    block_abs: i64,
    score: [i64; 2],
    short_block_lost_tot: i64,
    queue: Queue,
    on_extra: [bool; 2],
}

impl Unit {
    #[inline]
    fn period_begin(&self) -> i64 {
        self.deadl_abs - self.period
    }
    #[inline]
    fn extra_runs(&self) -> bool {
        self.run_pen || self.run_util
    }
}

/// Per-CPU state (Xen `struct sedf_cpu_info`).
#[derive(Clone, Debug, Default)]
struct Pcpu {
    runq: Vec<EntityId>,
    waitq: Vec<EntityId>,
    extraq: [Vec<EntityId>; 2],
    current_slice_expires: i64,
}

/// SEDF as the engine runs it: the policy on the Xen core.
pub type SedfSched = XenCore<Sedf>;

/// The SEDF scheduler of one pool holding every CPU of the level.
pub struct Sedf {
    online: CpuSet,
    pcpus: Vec<Pcpu>,
    units: Vec<Unit>,
}

impl Sedf {
    /// SEDF over `ncpus` CPUs.
    pub fn new(ncpus: usize) -> Sedf {
        assert!(
            (1..=MAX_CPUS).contains(&ncpus),
            "sedf: needs 1..={MAX_CPUS} CPUs, got {ncpus}"
        );
        Sedf {
            online: CpuSet::first_n(ncpus),
            pcpus: vec![Pcpu::default(); ncpus],
            units: Vec::new(),
        }
    }

    /// SEDF on the Xen core.
    pub fn sched(params: &SedfParams, ncpus: usize) -> SedfSched {
        XenCore::with_timers(
            Sedf::new(ncpus),
            params.timer_slop_ns,
            params.timer_entry_ns,
        )
    }

    /// The vCPU's (deadline, period, slice, cputime), for tests and traces.
    pub fn state(&self, e: EntityId) -> (i64, i64, i64, i64) {
        let u = &self.units[e.idx()];
        (u.deadl_abs, u.period, u.slice, u.cputime)
    }

    // ---------------------------------------------------------------------------------------
    // Queues
    // ---------------------------------------------------------------------------------------

    fn pc(&mut self, e: EntityId) -> &mut Pcpu {
        let c = self.units[e.idx()].processor.idx();
        &mut self.pcpus[c]
    }

    /// Xen: __del_from_queue
    fn del_from_queue(&mut self, e: EntityId) {
        let q = self.units[e.idx()].queue;
        let pc = self.pc(e);
        let list = match q {
            Queue::Run => &mut pc.runq,
            Queue::Wait => &mut pc.waitq,
            Queue::None => panic!("sedf: vCPU {} is on no queue", e.0),
        };
        let i = list.iter().position(|x| *x == e).expect("on its queue");
        list.remove(i);
        self.units[e.idx()].queue = Queue::None;
    }

    /// Xen: __add_to_waitqueue_sort (by period begin; after equals)
    fn add_to_waitq(&mut self, e: EntityId) {
        let key = self.units[e.idx()].period_begin();
        let c = self.units[e.idx()].processor.idx();
        let units = &self.units;
        let q = &self.pcpus[c].waitq;
        let i = q
            .iter()
            .position(|x| key < units[x.idx()].period_begin())
            .unwrap_or(q.len());
        self.pcpus[c].waitq.insert(i, e);
        self.units[e.idx()].queue = Queue::Wait;
    }

    /// Xen: __add_to_runqueue_sort (by deadline; after equals)
    fn add_to_runq(&mut self, e: EntityId) {
        let key = self.units[e.idx()].deadl_abs;
        let c = self.units[e.idx()].processor.idx();
        let units = &self.units;
        let q = &self.pcpus[c].runq;
        let i = q
            .iter()
            .position(|x| key < units[x.idx()].deadl_abs)
            .unwrap_or(q.len());
        self.pcpus[c].runq.insert(i, e);
        self.units[e.idx()].queue = Queue::Run;
    }

    /// Xen: extraq_del
    fn extraq_del(&mut self, e: EntityId, i: usize) {
        let q = &mut self.pc(e).extraq[i];
        let k = q.iter().position(|x| *x == e).expect("on its extra queue");
        q.remove(k);
        self.units[e.idx()].on_extra[i] = false;
    }

    /// Xen: extraq_add_sort_update. Every vCPU already queued loses `sub` from its score; `e`
    /// goes before the first one whose (lowered) score is above its own.
    fn extraq_add_sort_update(&mut self, e: EntityId, i: usize, sub: i64) {
        debug_assert!(!self.units[e.idx()].on_extra[i]);
        let c = self.units[e.idx()].processor.idx();
        let mine = self.units[e.idx()].score[i];
        let n = self.pcpus[c].extraq[i].len();
        let mut at = n;
        for k in 0..n {
            let x = self.pcpus[c].extraq[i][k];
            self.units[x.idx()].score[i] -= sub;
            if at == n && mine < self.units[x.idx()].score[i] {
                at = k;
                if sub == 0 {
                    break;
                }
            }
        }
        self.pcpus[c].extraq[i].insert(at, e);
        self.units[e.idx()].on_extra[i] = true;
    }

    /// Xen: extraq_check
    fn extraq_check(&mut self, e: EntityId) {
        let u = &self.units[e.idx()];
        if u.on_extra[UTIL_Q] {
            if !u.extra_aware && !u.extra_runs() {
                self.extraq_del(e, UTIL_Q);
            }
        } else if u.extra_aware && !u.asleep {
            self.extraq_add_sort_update(e, UTIL_Q, 0);
        }
    }

    /// Off the extra queues (asleep).
    fn extraq_del_all(&mut self, e: EntityId) {
        for i in [PEN_Q, UTIL_Q] {
            if self.units[e.idx()].on_extra[i] {
                self.extraq_del(e, i);
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Descheduling and queue maintenance
    // ---------------------------------------------------------------------------------------

    /// Xen: desched_edf_dom
    fn desched_edf_dom(&mut self, now: i64, e: EntityId) {
        let u = &mut self.units[e.idx()];
        u.cputime += now - u.sched_start_abs;
        if u.cputime < u.slice && !u.asleep {
            return;
        }
        self.del_from_queue(e);
        let u = &mut self.units[e.idx()];
        if u.cputime >= u.slice {
            u.cputime -= u.slice;
            if u.period < u.period_orig {
                u.period *= 2;
                u.slice *= 2;
                if u.period > u.period_orig || u.slice > u.slice_orig {
                    u.period = u.period_orig;
                    u.slice = u.slice_orig;
                }
            }
            u.deadl_abs += u.period;
        }
        if !self.units[e.idx()].asleep {
            self.add_to_waitq(e);
        } else {
            self.extraq_del_all(e);
        }
    }

    /// Xen: desched_extra_dom
    fn desched_extra_dom(&mut self, e: EntityId) {
        let u = &mut self.units[e.idx()];
        let i = if u.run_pen { PEN_Q } else { UTIL_Q };
        u.run_pen = false;
        u.run_util = false;
        u.cputime = 0;
        self.extraq_del(e, i);
        let u = &mut self.units[e.idx()];
        let mut oldscore = u.score[i];
        if i == PEN_Q {
            // The lost time is considered made up after one quantum (upstream's conditional
            // on the remainder is compiled out).
            u.short_block_lost_tot = 0;
            u.want_pen_q = false;
            oldscore = u.score[i];
        } else if u.extraweight == 0 {
            u.score[UTIL_Q] = (u.period << 10) / u.slice.max(1);
        } else {
            u.score[UTIL_Q] = (1 << 17) / u.extraweight;
        }
        let u = &self.units[e.idx()];
        if !u.asleep {
            if (u.extra_aware && i == UTIL_Q) || (u.want_pen_q && i == PEN_Q) {
                self.extraq_add_sort_update(e, i, oldscore);
            }
        } else {
            self.del_from_queue(e);
            let other = 1 - i;
            if self.units[e.idx()].on_extra[other] {
                self.extraq_del(e, other);
            }
        }
    }

    /// Xen: update_queues. Moves vCPUs whose period began to the runqueue, sends best-effort
    /// vCPUs (slice 0) on to their next period, and gives vCPUs past their deadline (or over
    /// their slice) a fresh period.
    fn update_queues(&mut self, now: i64, c: usize) {
        while let Some(&e) = self.pcpus[c].waitq.first() {
            if self.units[e.idx()].period_begin() > now {
                break;
            }
            self.del_from_queue(e);
            self.add_to_runq(e);
        }
        // list_for_each_safe: the successor is taken before the element is moved.
        let mut cur = self.pcpus[c].runq.first().copied();
        while let Some(e) = cur {
            let pos = self.pcpus[c]
                .runq
                .iter()
                .position(|x| *x == e)
                .expect("on runq");
            let next = self.pcpus[c].runq.get(pos + 1).copied();
            let u = &self.units[e.idx()];
            if u.slice == 0 {
                self.del_from_queue(e);
                let u = &mut self.units[e.idx()];
                u.deadl_abs += u.period;
                if u.period_begin() < now {
                    u.deadl_abs += div_up(now - u.period_begin(), u.period) * u.period;
                }
                self.add_to_waitq(e);
            } else if u.deadl_abs < now || u.cputime > u.slice {
                self.del_from_queue(e);
                let u = &mut self.units[e.idx()];
                u.deadl_abs += u.period;
                if u.deadl_abs < now {
                    u.deadl_abs += div_up(now - u.deadl_abs, u.period) * u.period;
                }
                u.cputime = 0;
                if u.period_begin() > now {
                    self.add_to_waitq(e);
                } else {
                    self.add_to_runq(e);
                }
            } else {
                break;
            }
            cur = next;
        }
    }

    /// Xen: sedf_do_extra_schedule. (vCPU or idle, time).
    fn do_extra_schedule(&mut self, now: i64, end_xt: i64, c: usize) -> (Option<EntityId>, i64) {
        if end_xt - now < EXTRA_QUANTUM {
            return (None, end_xt - now);
        }
        let pc = &self.pcpus[c];
        if let Some(&e) = pc.extraq[PEN_Q].first() {
            self.units[e.idx()].run_pen = true;
            return (Some(e), EXTRA_QUANTUM);
        }
        if let Some(&e) = pc.extraq[UTIL_Q].first() {
            self.units[e.idx()].run_util = true;
            return (Some(e), EXTRA_QUANTUM);
        }
        (None, end_xt - now)
    }

    // ---------------------------------------------------------------------------------------
    // Parameters
    // ---------------------------------------------------------------------------------------

    /// Xen: sedf_adjust (putinfo) for vCPU `e` with its domain's attributes, then
    /// sedf_adjust_weights over every vCPU.
    fn apply_params(&mut self, x: &XenCtx, e: EntityId) {
        let a = x.ent(e).params.xen;
        let u = &mut self.units[e.idx()];
        if a.period_us != 0 {
            let (p, s) = (a.period_us as i64 * 1000, a.budget_us as i64 * 1000);
            u.weight = 0;
            u.extraweight = 0;
            (u.period, u.period_orig, u.slice, u.slice_orig) = (p, p, s, s);
        } else if a.extratime {
            u.extraweight = a.weight as i64;
            u.weight = 0;
            u.slice = 0;
            u.period = WEIGHT_PERIOD;
        } else {
            u.weight = a.weight as i64;
        }
        u.extra_aware = a.extratime;
        self.adjust_weights();
        self.extraq_check(e);
    }

    /// Xen: sedf_adjust_weights. Per CPU: the time the vCPUs with a period reserve in 100 ms,
    /// and the weights' sum; each weighted vCPU gets its share of what is left.
    fn adjust_weights(&mut self) {
        let n = self.pcpus.len();
        let (mut sumw, mut sumt) = (vec![0i64; n], vec![0i64; n]);
        for u in &self.units {
            let c = u.processor.idx();
            if u.weight != 0 {
                sumw[c] += u.weight;
            } else {
                sumt[c] += WEIGHT_PERIOD * u.slice_orig / u.period_orig;
            }
        }
        for u in &mut self.units {
            let c = u.processor.idx();
            if u.weight != 0 {
                u.period = WEIGHT_PERIOD;
                u.period_orig = WEIGHT_PERIOD;
                u.slice = u.weight * (WEIGHT_PERIOD - WEIGHT_SAFETY - sumt[c]) / sumw[c];
                u.slice_orig = u.slice;
            }
        }
    }

    /// Xen: should_switch (whether waking `e` reschedules its CPU, whose current is `cur`).
    fn should_switch(&self, cur: Option<EntityId>, e: EntityId) -> bool {
        let o = &self.units[e.idx()];
        if o.period_begin() < self.pcpus[o.processor.idx()].current_slice_expires {
            return true;
        }
        let Some(cur) = cur else { return true };
        let c = &self.units[cur.idx()];
        if c.run_pen {
            o.want_pen_q && o.score[PEN_Q] < c.score[PEN_Q]
        } else if c.run_util {
            o.want_pen_q
        } else {
            false
        }
    }
}

/// `DIV_UP`
#[inline]
fn div_up(x: i64, y: i64) -> i64 {
    (x + y - 1) / y
}

impl XenOps for Sedf {
    fn name(&self) -> &'static str {
        "sedf"
    }

    /// Xen: sedf_alloc_vdata + sedf_insert_vcpu, then sedf_adjust with the domain's
    /// parameters. The vCPU starts asleep on its initial CPU (upstream's `processor`).
    fn insert_unit(&mut self, x: &mut XenCtx, e: EntityId) {
        assert_eq!(e.idx(), self.units.len(), "sedf: vCPUs come in id order");
        let p = &x.ent(e).params;
        assert!(
            p.hard_affinity.intersects(&self.online) && self.online.contains(p.initial_cpu),
            "sedf: {} has no online CPU",
            p.name
        );
        self.units.push(Unit {
            processor: p.initial_cpu,
            period: WEIGHT_PERIOD,
            slice: 0,
            period_orig: WEIGHT_PERIOD,
            slice_orig: 0,
            weight: 0,
            extraweight: 1,
            extra_aware: true,
            asleep: true,
            run_pen: false,
            run_util: false,
            want_pen_q: false,
            deadl_abs: 0,
            sched_start_abs: 0,
            cputime: 0,
            block_abs: 0,
            score: [0; 2],
            short_block_lost_tot: 0,
            queue: Queue::None,
            on_extra: [false; 2],
        });
        self.extraq_check(e);
        self.apply_params(x, e);
        // Preallocate so that the hooks never grow a queue.
        let n = self.units.len();
        for pc in &mut self.pcpus {
            let [pen, util] = &mut pc.extraq;
            for q in [&mut pc.runq, &mut pc.waitq, pen, util] {
                q.reserve(n.saturating_sub(q.len()));
            }
        }
    }

    /// The vCPU is off every queue (its domain was paused first); nothing to do.
    fn remove_unit(&mut self, _x: &mut XenCtx, e: EntityId) {
        debug_assert!(self.units[e.idx()].queue == Queue::None);
    }

    /// Xen: sedf_wake
    fn wake(&mut self, x: &mut XenCtx, e: EntityId, _info: WakeInfo) {
        let now = x.now() as i64;
        if self.units[e.idx()].queue != Queue::None {
            return;
        }
        let u = &mut self.units[e.idx()];
        u.asleep = false;
        if u.deadl_abs == 0 {
            u.deadl_abs = now + u.slice;
        }
        if now < u.period_begin() {
            if u.want_pen_q {
                self.extraq_add_sort_update(e, PEN_Q, 0);
            }
        } else if now < u.deadl_abs {
            // Xen: unblock_short_extra_support
            u.deadl_abs += u.period;
            if u.block_abs != 0 {
                let pen = (u.slice - u.cputime).max(0);
                u.short_block_lost_tot = pen;
                if pen != 0 {
                    u.score[PEN_Q] = (u.period << 10) / pen;
                    if u.on_extra[PEN_Q] {
                        self.extraq_del(e, PEN_Q);
                    } else {
                        self.units[e.idx()].want_pen_q = true;
                    }
                    self.extraq_add_sort_update(e, PEN_Q, 0);
                }
            }
            self.units[e.idx()].cputime = 0;
        } else {
            // Xen: unblock_long_cons_b
            u.deadl_abs = now + u.period;
            u.cputime = 0;
        }
        if self.units[e.idx()].extra_aware {
            self.extraq_add_sort_update(e, UTIL_Q, 0);
        }
        if self.units[e.idx()].period_begin() > now {
            self.add_to_waitq(e);
        } else {
            self.add_to_runq(e);
        }
        let cpu = self.units[e.idx()].processor;
        if self.should_switch(x.cpu(cpu).curr, e) {
            x.resched(cpu);
        }
    }

    /// Xen: sedf_sleep (domain pause)
    fn sleep(&mut self, x: &mut XenCtx, e: EntityId) {
        self.units[e.idx()].asleep = true;
        let cpu = self.units[e.idx()].processor;
        if x.cpu(cpu).curr == Some(e) {
            x.resched(cpu);
        } else {
            if self.units[e.idx()].queue != Queue::None {
                self.del_from_queue(e);
            }
            self.extraq_del_all(e);
        }
    }

    /// SEDF has no yield hook: the core reschedules, and the vCPU is charged and re-picked.
    fn yield_(&mut self, _x: &mut XenCtx, _e: EntityId) {}

    /// Xen: sedf_do_schedule
    fn do_schedule(&mut self, x: &mut XenCtx, cpu: CpuId) -> Pick {
        let now = x.now() as i64;
        let c = cpu.idx();
        if let Some(cur) = x.cpu(cpu).curr {
            if !x.unit_runnable(cur) {
                self.units[cur.idx()].asleep = true;
            }
            if self.units[cur.idx()].asleep {
                self.units[cur.idx()].block_abs = now;
            }
            if self.units[cur.idx()].extra_runs() {
                self.desched_extra_dom(cur);
            } else {
                self.desched_edf_dom(now, cur);
            }
        }
        self.update_queues(now, c);
        let pc = &self.pcpus[c];
        let (next, mut time) = if pc.runq.is_empty() && pc.waitq.is_empty() {
            (None, IDLE_SLICE)
        } else if let Some(&r) = pc.runq.first() {
            let u = &self.units[r.idx()];
            let t = match pc.waitq.first() {
                Some(w) => {
                    (now + u.slice - u.cputime).min(self.units[w.idx()].period_begin()) - now
                }
                None => u.slice - u.cputime,
            };
            (Some(r), t)
        } else {
            let w = pc.waitq[0];
            let end = self.units[w.idx()].period_begin();
            self.do_extra_schedule(now, end, c)
        };
        if time < 0 {
            time = EXTRA_QUANTUM;
        }
        if let Some(n) = next {
            self.units[n.idx()].sched_start_abs = now;
        }
        self.pcpus[c].current_slice_expires = now + time;
        Pick {
            next,
            slice: Some(time.max(1) as u64),
        }
    }

    /// Xen: sedf_pick_cpu: the first online CPU of the vCPU's affinity.
    fn pick_resource(&mut self, x: &mut XenCtx, e: EntityId) -> CpuId {
        let p = &x.ent(e).params;
        p.hard_affinity
            .and(&self.online)
            .first()
            .expect("sedf: affinity holds an online CPU")
    }

    /// The vCPU (asleep, on no queue) now belongs to `cpu`'s queues.
    fn migrate(&mut self, _x: &mut XenCtx, e: EntityId, cpu: CpuId) {
        self.extraq_del_all(e);
        if self.units[e.idx()].queue != Queue::None {
            self.del_from_queue(e);
        }
        self.units[e.idx()].processor = cpu;
    }

    /// The vCPU's deadline.
    fn probe(&self, e: EntityId) -> Option<i64> {
        self.units.get(e.idx()).map(|u| u.deadl_abs)
    }

    fn processor(&self, e: EntityId) -> CpuId {
        self.units[e.idx()].processor
    }
}

#[cfg(test)]
mod tests;
