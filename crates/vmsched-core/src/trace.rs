//! The trace channel: typed records of what the engine did, for a schedule trace (DESIGN.md §6).
//!
//! **What is recorded.** Every context switch (level, CPU, the entity switched out and in), each
//! entity's runstate changes (Xen's runstates, at every level), wake-ups (with the waker's CPU),
//! blocks, the delivery of reschedule requests (an IPI, a local request or the slice timer
//! reaching a CPU), ticks and task sleep timers firing, event-channel notifications and port
//! handlers of the I/O path (docs/io.md), and the policy's own figure for the entities of a
//! switch ([`crate::sched::Scheduler::probe`]: credit for Credit2, vruntime for CFS). Every record
//! carries the time, the level and global ids ([`GCpu`], [`GEnt`]), so a vCPU's track at its
//! guest level can be tied to the host entity that runs it ([`TraceMeta`]).
//!
//! **Cost when off.** The engine holds an `Option<Box<TraceBuf>>`; each emit point is one
//! `emit!` line, which is a test of that option and nothing else: the record's fields are only
//! computed, and the (out-of-line, cold) recording method only called, when tracing is on. No
//! dynamic dispatch, no allocation. docs/trace.md gives the measured instruction counts.
//!
//! **Bounded.** When on, records go to a buffer of at most `max_records`; past it the trace is
//! truncated: later records are counted, not kept, and the time of the first dropped one is kept
//! so a sink can end the trace there ([`Trace::truncated_at`]).
//!
//! **Policy events.** A policy reports its own decisions (a tickle, a boost, a credit burn: the
//! events Xen's schedulers trace in their `TRC_SCHED_CLASS` records) as a typed [`SchedEvent`]
//! through [`crate::sched::SchedCtx::trace`], one line at the decision point; the closure that
//! builds it runs only while tracing is on. The engine turns them into [`Record::Sched`].
//!
//! Sinks: [`perfetto`] writes a Perfetto trace, [`xentrace`] the host level as Xen's binary
//! trace; [`explain`] splits a task's wake-up latencies into their causes; [`gantt`] cuts the
//! switches into what each CPU ran in a window (the HTML report's Gantt chart); [`perf_sched`]
//! makes the figures of `perf sched latency` and `perf sched timehist`.

use crate::ids::{CpuId, EntityId, GCpu, GEnt, LevelId};
use crate::sched::{RunState, WakeCause};
use crate::time::{Nanos, SimTime};

pub mod explain;
pub mod gantt;
pub mod perf_sched;
pub mod perfetto;
pub mod xentrace;

/// `emit!(self.trace_x(args))` calls the engine's recording method `trace_x` (cold, out of
/// line: `sim/trace_io.rs`) only if tracing is on. When off this is one test of an `Option`; the
/// arguments are not even evaluated.
macro_rules! emit {
    ($sim:ident . $method:ident ( $($arg:expr),* $(,)? )) => {
        if $sim.trace.is_some() {
            $sim.$method($($arg),*);
        }
    };
}
pub(crate) use emit;

/// One thing the engine did, at time `t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// CPU `cpu` of `level` switches from `prev` to `next` (None: idle). Recorded before the
    /// runstate changes of the two entities at the same instant.
    Switch {
        t: SimTime,
        level: LevelId,
        cpu: GCpu,
        prev: Option<GEnt>,
        next: Option<GEnt>,
        /// The timer the policy set for `next` (its `Pick::slice`), None for none.
        slice: Option<Nanos>,
    },
    /// CPU `cpu` of `level` ran its scheduler and keeps `ent` (Xen's "continue running"); the
    /// policy set a timer of `slice`.
    Continue {
        t: SimTime,
        level: LevelId,
        cpu: GCpu,
        ent: GEnt,
        slice: Option<Nanos>,
    },
    /// A policy's own event (a tickle, a boost, a credit burn...), reported by the policy of
    /// `level` from code running on `cpu` (None: outside any CPU's code, e.g. a timer event).
    Sched {
        t: SimTime,
        level: LevelId,
        cpu: Option<GCpu>,
        ev: SchedEvent<GEnt, GCpu>,
    },
    /// The policy's figure for `ent` (its `probe`), sampled at a switch it takes part in.
    Probe {
        t: SimTime,
        level: LevelId,
        ent: GEnt,
        value: i64,
    },
    /// `ent` changes runstate.
    Runstate {
        t: SimTime,
        level: LevelId,
        ent: GEnt,
        from: RunState,
        to: RunState,
    },
    /// `ent` is woken for `cause`; `waker_cpu` is the CPU of its level the waker runs on, if
    /// any.
    Wake {
        t: SimTime,
        level: LevelId,
        ent: GEnt,
        waker_cpu: Option<GCpu>,
        cause: WakeCause,
    },
    /// `ent`, current on its CPU, stops being runnable (sleeps, waits, halts, exits).
    Block {
        t: SimTime,
        level: LevelId,
        ent: GEnt,
    },
    /// A reschedule request reaches `cpu` (an IPI, a local request or its slice timer).
    /// `held`: the CPU is a vCPU that is not executing, so the request waits for it.
    Resched {
        t: SimTime,
        level: LevelId,
        cpu: GCpu,
        held: bool,
    },
    /// The periodic tick of `cpu` fires. `held` as for [`Record::Resched`].
    Tick {
        t: SimTime,
        level: LevelId,
        cpu: GCpu,
        held: bool,
    },
    /// The sleep timer of task `ent`, armed on `cpu`, fires. `held` as for [`Record::Resched`].
    Timer {
        t: SimTime,
        level: LevelId,
        ent: GEnt,
        cpu: GCpu,
        held: bool,
    },
    /// Event-channel port `port` of `level`, bound to vCPU `cpu`, is notified (docs/io.md);
    /// `already`: it was pending already (the notification adds nothing).
    Notify {
        t: SimTime,
        level: LevelId,
        cpu: GCpu,
        port: u32,
        already: bool,
    },
    /// The upcall on `cpu` takes `port` and runs its handler (`end` false), or the handler ends
    /// (`end` true): kernel work on the vCPU, the interrupted task makes no progress meanwhile.
    Handler {
        t: SimTime,
        level: LevelId,
        cpu: GCpu,
        port: u32,
        end: bool,
    },
    /// A domain is created (`created`) or destroyed at run time (`xl create`, `xl destroy`;
    /// Xen `sched_init_domain`, `sched_destroy_domain`): recorded before its vCPUs are
    /// inserted, after they are removed. `ent` is its first vCPU, at `level` (the host).
    Domain {
        t: SimTime,
        level: LevelId,
        ent: GEnt,
        created: bool,
    },
    /// Task `ent` runs its first step after a timed wake-up and its workload records the
    /// latency `t - expiry` in a histogram (cyclictest, a video frame's wake): the metric's own
    /// start and end, for [`explain`].
    Latency {
        t: SimTime,
        level: LevelId,
        ent: GEnt,
        expiry: SimTime,
    },
}

impl Record {
    pub fn t(&self) -> SimTime {
        match *self {
            Record::Switch { t, .. }
            | Record::Continue { t, .. }
            | Record::Sched { t, .. }
            | Record::Probe { t, .. }
            | Record::Runstate { t, .. }
            | Record::Wake { t, .. }
            | Record::Block { t, .. }
            | Record::Resched { t, .. }
            | Record::Tick { t, .. }
            | Record::Timer { t, .. }
            | Record::Notify { t, .. }
            | Record::Handler { t, .. }
            | Record::Domain { t, .. }
            | Record::Latency { t, .. } => t,
        }
    }
}

/// A policy's own decision, with the ids of its level (`E`, `C`: local [`EntityId`] and
/// [`CpuId`] when the policy reports it, global [`GEnt`] and [`GCpu`] in a [`Record::Sched`]).
/// Named after what the policies decide, not after one scheduler: Credit1's and Credit2's
/// tickle are both [`SchedEvent::Tickle`]. A scheduler with events of its own adds variants
/// here, reports them with [`crate::sched::SchedCtx::trace`], and says how each is written in
/// the sinks that show it (docs/trace.md, "Adding a scheduler"). Figures are 32-bit, as
/// Xen's trace fields are ([`sat32`]), which keeps the event, and the engine's request that
/// carries it, small.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedEvent<E = EntityId, C = CpuId> {
    /// CPU `cpu` is asked to reschedule for a woken or preempting entity (Xen `tickle`).
    Tickle { cpu: C },
    /// `ent` gets BOOST priority on a wake-up (Credit1).
    Boost { ent: E },
    /// `ent` loses BOOST priority (Credit1).
    Unboost { ent: E },
    /// `ent` is charged `delta` ns of run time; `credit` is what it has left (Credit2
    /// `burn_credits`).
    CreditBurn { ent: E, credit: i32, delta: i32 },
    /// `ent`'s credit is reset from `start` to `end` (Credit2 `reset_credit`).
    CreditReset { ent: E, start: i32, end: i32 },
    /// The rate limit keeps `ent` running: it ran `runtime` ns since it was switched in.
    Ratelimit { ent: E, runtime: u32 },
    /// Placement chose CPU `cpu` for `ent` (Xen `pick_resource`).
    PickedCpu { ent: E, cpu: C },
    /// A woken `ent` was checked against `curr`, the entity current on its CPU (Linux
    /// `check_preempt_wakeup`): `rule` names what decided, `a` and `b` are the figures it
    /// compared (ns; see [`WakeRule`]). Read by [`explain`] to say why a wake-up waited.
    WakeCheck {
        ent: E,
        curr: E,
        rule: WakeRule,
        a: i32,
        b: i32,
    },
    /// The RT class of CPU `cpu` is throttled (`on`: its RT tasks stay queued, the fair class
    /// runs) or unthrottled (Linux `sched_rt_runtime_exceeded`, `do_sched_rt_period_timer`).
    Throttle { cpu: C, on: bool },
    /// CPU `cpu` enters its scheduler; `tickled`: it had been tickled, `idle`: it was running
    /// nothing (RTDS `rt_schedule`).
    Schedule { cpu: C, tickled: bool, idle: bool },
    /// The runqueue pick found `ent`, with its deadline (ns) and budget left (ns, [`sat32`];
    /// RTDS `runq_pick`).
    RunqPick { ent: E, deadline: Wide, budget: i32 },
    /// `ent` was charged `delta` ns; `budget` is what it has left ([`sat32`]), `level` its
    /// priority level after the charge, `extratime` its flag (RTDS `burn_budget`).
    BudgetBurn {
        ent: E,
        budget: i32,
        delta: u32,
        level: u32,
        extratime: bool,
    },
    /// `ent`'s deadline passed: its new deadline and full budget (ns, the budget [`sat32`]),
    /// at level 0 (RTDS `rt_update_deadline`).
    Replenish { ent: E, deadline: Wide, budget: i32 },
    /// `ent` is given CPU `cpu` for its own (null `unit_assign`).
    Assign { ent: E, cpu: C },
    /// `ent` leaves CPU `cpu`, which becomes free (null `unit_deassign`).
    Deassign { ent: E, cpu: C },
    /// `ent` is moved from CPU `from` to CPU `to` (null `null_unit_migrate`; a Linux level:
    /// a wake-up placed on another CPU, or a move by the fair balancer).
    Migrate { ent: E, from: C, to: C },
    /// CPU `cpu` enters its scheduler with `assigned` its vCPU, if any (null `null_schedule`).
    NullSchedule { cpu: C, assigned: Option<E> },
    /// CPU `cpu` enters its scheduler, which serves runqueue `runq`; `tickled`: it had been
    /// tickled, `idle`: it was running nothing, `smt_idle`: its core is idle after the
    /// tickled mask is cleared (Credit2 `csched2_schedule`).
    RunqSchedule {
        cpu: C,
        runq: u32,
        tickled: bool,
        idle: bool,
        smt_idle: bool,
    },
    /// Xen's core puts `ent` to sleep (`vcpu_sleep_nosync`: a pause, `VCPUOP_down`, a
    /// migration off a pCPU leaving its pool). A generic record, not a policy's.
    Sleep { ent: E },
    /// Xen's core wakes `ent` outside the engine's wake-ups (`vcpu_wake` at an unpause,
    /// `VCPUOP_up`, the end of a migration). A generic record, not a policy's.
    CoreWake { ent: E },
    /// `ent` yields (`vcpu_yield`, after the policy's yield hook). A generic record.
    Yield { ent: E },
    /// The events that follow, up to the next `Pool`, come from the scheduler of cpupool
    /// `pool` (added by [`crate::cpupool::PoolSched`] before the events of each hook it routes,
    /// so a sink knows whose they are: Xen's `TRC_SCHED_CLASS` records carry the id of the
    /// scheduler that writes them). Not a decision; no sink shows it.
    Pool { pool: u32 },
}

/// What decided a [`SchedEvent::WakeCheck`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeRule {
    /// CFS: `a` is how far `curr`'s vruntime is ahead of the woken entity's, `b` the wakeup
    /// granularity scaled to its weight; it preempts only if `a > b` (Linux v5.10
    /// `wakeup_preempt_entity`).
    Granularity,
    /// EEVDF: the woken entity's lag is negative, it is not eligible (`a`: its vruntime minus
    /// the queue's average, `b` 0).
    NotEligible,
    /// EEVDF: `curr` is protected until it reaches its deadline or parity (RUN_TO_PARITY);
    /// `a`: `curr`'s deadline minus its vruntime.
    RunToParity,
    /// EEVDF: the pick keeps `curr` (its deadline is earlier); `a`, `b`: the woken entity's
    /// and `curr`'s deadline minus `curr`'s vruntime.
    EarlierDeadline,
    /// The woken entity wins: `curr` is asked to reschedule.
    Preempt,
}

impl WakeRule {
    pub fn name(self) -> &'static str {
        match self {
            WakeRule::Granularity => "wakeup granularity",
            WakeRule::NotEligible => "not eligible",
            WakeRule::RunToParity => "RUN_TO_PARITY",
            WakeRule::EarlierDeadline => "earlier deadline",
            WakeRule::Preempt => "preempt",
        }
    }
}

/// A 64-bit figure of a [`SchedEvent`] (an absolute deadline) kept as two 32-bit halves, so
/// that the event stays 4-byte aligned and as small as its 32-bit figures make it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wide {
    lo: u32,
    hi: u32,
}

impl Wide {
    #[inline]
    pub fn new(v: i64) -> Wide {
        Wide {
            lo: v as u32,
            hi: ((v as u64) >> 32) as u32,
        }
    }

    #[inline]
    pub fn get(self) -> i64 {
        ((self.hi as u64) << 32 | self.lo as u64) as i64
    }

    /// The low and the high 32-bit word.
    #[inline]
    pub fn words(self) -> (u32, u32) {
        (self.lo, self.hi)
    }
}

/// `v` saturated to 32 bits, for a [`SchedEvent`] figure.
#[inline]
pub fn sat32(v: i64) -> i32 {
    v.clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

impl<E: Copy, C: Copy> SchedEvent<E, C> {
    /// The same event with its ids mapped.
    pub fn map<E2, C2>(self, e: impl Fn(E) -> E2, c: impl Fn(C) -> C2) -> SchedEvent<E2, C2> {
        use SchedEvent::*;
        match self {
            Tickle { cpu } => Tickle { cpu: c(cpu) },
            Boost { ent } => Boost { ent: e(ent) },
            Unboost { ent } => Unboost { ent: e(ent) },
            CreditBurn { ent, credit, delta } => CreditBurn {
                ent: e(ent),
                credit,
                delta,
            },
            CreditReset { ent, start, end } => CreditReset {
                ent: e(ent),
                start,
                end,
            },
            Ratelimit { ent, runtime } => Ratelimit {
                ent: e(ent),
                runtime,
            },
            PickedCpu { ent, cpu } => PickedCpu {
                ent: e(ent),
                cpu: c(cpu),
            },
            WakeCheck {
                ent,
                curr,
                rule,
                a,
                b,
            } => WakeCheck {
                ent: e(ent),
                curr: e(curr),
                rule,
                a,
                b,
            },
            Throttle { cpu, on } => Throttle { cpu: c(cpu), on },
            Schedule { cpu, tickled, idle } => Schedule {
                cpu: c(cpu),
                tickled,
                idle,
            },
            RunqPick {
                ent,
                deadline,
                budget,
            } => RunqPick {
                ent: e(ent),
                deadline,
                budget,
            },
            BudgetBurn {
                ent,
                budget,
                delta,
                level,
                extratime,
            } => BudgetBurn {
                ent: e(ent),
                budget,
                delta,
                level,
                extratime,
            },
            Replenish {
                ent,
                deadline,
                budget,
            } => Replenish {
                ent: e(ent),
                deadline,
                budget,
            },
            Assign { ent, cpu } => Assign {
                ent: e(ent),
                cpu: c(cpu),
            },
            Deassign { ent, cpu } => Deassign {
                ent: e(ent),
                cpu: c(cpu),
            },
            Migrate { ent, from, to } => Migrate {
                ent: e(ent),
                from: c(from),
                to: c(to),
            },
            NullSchedule { cpu, assigned } => NullSchedule {
                cpu: c(cpu),
                assigned: assigned.map(e),
            },
            RunqSchedule {
                cpu,
                runq,
                tickled,
                idle,
                smt_idle,
            } => RunqSchedule {
                cpu: c(cpu),
                runq,
                tickled,
                idle,
                smt_idle,
            },
            Sleep { ent } => Sleep { ent: e(ent) },
            CoreWake { ent } => CoreWake { ent: e(ent) },
            Yield { ent } => Yield { ent: e(ent) },
            Pool { pool } => Pool { pool },
        }
    }

    /// Short name, for sinks that show events by name.
    pub fn name(&self) -> &'static str {
        match self {
            SchedEvent::Tickle { .. } => "tickle",
            SchedEvent::Boost { .. } => "boost",
            SchedEvent::Unboost { .. } => "unboost",
            SchedEvent::CreditBurn { .. } => "credit burn",
            SchedEvent::CreditReset { .. } => "credit reset",
            SchedEvent::Ratelimit { .. } => "ratelimit",
            SchedEvent::PickedCpu { .. } => "picked cpu",
            SchedEvent::WakeCheck { .. } => "wake check",
            SchedEvent::Throttle { .. } => "rt throttle",
            SchedEvent::Schedule { .. }
            | SchedEvent::NullSchedule { .. }
            | SchedEvent::RunqSchedule { .. } => "schedule",
            SchedEvent::Sleep { .. } => "sleep",
            SchedEvent::CoreWake { .. } => "wake",
            SchedEvent::Yield { .. } => "yield",
            SchedEvent::RunqPick { .. } => "runq pick",
            SchedEvent::BudgetBurn { .. } => "budget burn",
            SchedEvent::Replenish { .. } => "replenish",
            SchedEvent::Assign { .. } => "assign",
            SchedEvent::Deassign { .. } => "deassign",
            SchedEvent::Migrate { .. } => "migrate",
            SchedEvent::Pool { .. } => "pool",
        }
    }
}

/// The bounded record buffer the engine writes into while tracing is on.
#[derive(Debug)]
pub struct TraceBuf {
    records: Vec<Record>,
    max_records: usize,
    dropped: u64,
    truncated_at: Option<SimTime>,
}

/// Default bound of a trace: 4 M records (about 160 MB).
pub const DEFAULT_MAX_RECORDS: usize = 4_000_000;

impl TraceBuf {
    pub fn new(max_records: usize) -> TraceBuf {
        TraceBuf {
            records: Vec::with_capacity(max_records.min(1 << 16)),
            max_records,
            dropped: 0,
            truncated_at: None,
        }
    }

    /// Keeps `r`, or counts it as dropped if the buffer is full.
    #[inline]
    pub fn push(&mut self, r: Record) {
        if self.records.len() < self.max_records {
            self.records.push(r);
        } else {
            self.truncated_at.get_or_insert(r.t());
            self.dropped += 1;
        }
    }

    /// Finishes the buffer into a trace ending at `end`, with the run's names.
    pub fn finish(self, end: SimTime, meta: TraceMeta) -> Trace {
        Trace {
            records: self.records,
            max_records: self.max_records,
            dropped: self.dropped,
            truncated_at: self.truncated_at,
            end,
            meta,
        }
    }
}

/// What a sink needs to name and group the records' ids.
#[derive(Clone, Debug, Default)]
pub struct TraceMeta {
    /// Per level: its name (`host`, a domain's name) and its scheduler's name.
    pub levels: Vec<LevelMeta>,
    /// Per global CPU.
    pub cpus: Vec<CpuMeta>,
    /// Per global entity.
    pub ents: Vec<EntMeta>,
}

#[derive(Clone, Debug)]
pub struct LevelMeta {
    pub name: String,
    pub sched: &'static str,
    /// Its scheduler's [`crate::sched::Scheduler::trace_class`] (the layout of its records).
    pub class: &'static str,
    /// A host level with cpupools (docs/cpupools.md): each pool's name, its scheduler's
    /// name and trace class, Pool-0 first (the numbers of [`SchedEvent::Pool`]); empty
    /// without pools.
    pub pools: Vec<(String, &'static str, &'static str)>,
}

#[derive(Clone, Debug)]
pub struct CpuMeta {
    pub level: LevelId,
    /// Its id within its level.
    pub local: u32,
    /// The entity of the parent level that is this CPU (a vCPU), or None for a physical CPU.
    pub backing: Option<GEnt>,
}

#[derive(Clone, Debug)]
pub struct EntMeta {
    pub level: LevelId,
    pub name: String,
    /// The CPU of the child level this entity is (a vCPU), or None for a task.
    pub vcpu_of: Option<GCpu>,
}

/// A finished trace: the records in time order, the names, and whether it was truncated.
#[derive(Clone, Debug)]
pub struct Trace {
    pub records: Vec<Record>,
    pub max_records: usize,
    /// Records not kept because the buffer was full.
    pub dropped: u64,
    /// Time of the first record not kept: the trace is complete only up to here.
    pub truncated_at: Option<SimTime>,
    /// The time the run ended.
    pub end: SimTime,
    pub meta: TraceMeta,
}

impl Trace {
    /// Where the trace is complete up to: the run's end, or the truncation.
    pub fn complete_until(&self) -> SimTime {
        self.truncated_at.unwrap_or(self.end)
    }

    /// A one-line account for users: records kept, dropped, limit.
    pub fn summary(&self) -> TraceSummary {
        TraceSummary {
            records: self.records.len() as u64,
            dropped: self.dropped,
            max_records: self.max_records as u64,
            truncated_at_ns: self.truncated_at,
        }
    }
}

/// Counts of a finished trace, for the run's results.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct TraceSummary {
    pub records: u64,
    pub dropped: u64,
    pub max_records: u64,
    /// Set when the buffer filled: the trace covers the run only up to this time.
    pub truncated_at_ns: Option<SimTime>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_keeps_up_to_its_bound_then_counts_and_marks_the_truncation() {
        let mut b = TraceBuf::new(2);
        let (level, ent) = (LevelId(0), GEnt(0));
        for t in [10, 20, 30, 40] {
            b.push(Record::Block { t, level, ent });
        }
        let t = b.finish(50, TraceMeta::default());
        assert_eq!(t.records.len(), 2);
        assert_eq!(t.dropped, 2);
        assert_eq!(t.truncated_at, Some(30));
        assert_eq!(t.complete_until(), 30);
        assert_eq!(t.records[1].t(), 20);
    }
}
/// The policies' events travel in the engine's requests: a new variant must not make the
/// event, or the request, larger (64-bit figures are [`Wide`], the rest 32-bit).
#[test]
fn sched_event_and_request_stay_small() {
    assert!(std::mem::size_of::<SchedEvent>() <= 20);
    assert!(std::mem::size_of::<crate::sched::Request>() <= 24);
    assert_eq!(Wide::new(-5).get(), -5);
    assert_eq!(Wide::new(0x1_0000_0002).words(), (2, 1));
}
