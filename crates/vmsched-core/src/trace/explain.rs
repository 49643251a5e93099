//! Latency explained (issue 13, item 2): a task's wake-ups, each split into the causes of its
//! latency in time order, with who ran instead at each step. Read from a run's trace ([`Trace`]).
//!
//! **What is split**, exactly as the metrics measure it:
//! - [`Measure::Wait`]: from the task becoming runnable after a sleep (blocked → runnable) to its
//!   switch-in, the wait its entity's wait histogram and xenmon's worst wait after a wake record
//!   (`sim.rs`, `switch_in`). Recorded when the switch-in is at or after the warm-up; a wait
//!   that spans the warm-up's end counts from there (the metrics' intervals restart at it).
//! - [`Measure::Latency`]: for a timed wake-up whose workload keeps a latency histogram
//!   (cyclictest, a video player's frame wake), from the timer's expiry (its soft deadline) to
//!   the task's first step, as the workload records it ([`Record::Latency`]).
//!
//! **How.** The segments tile the measured interval, so they add up to the latency exactly: each
//! instant is classified by the state the trace gives at that instant (the runstates, what each
//! CPU runs, the timers the schedulers set, their own events). In order of precedence, for the
//! guest CPU the task waits on (the one it is switched in on; for the part before a timer's
//! delivery, the CPU the timer was armed on):
//! 1. before the timer fires: [`Cause::TimerSlack`] (soft to hard deadline, or to the next
//!    timer interrupt on that CPU, spec/ERRATA.md W1);
//! 2. the vCPU behind the CPU does not run at the host: halted ([`Cause::VcpuHalted`]: the wake
//!    or IPI is on its way to it), paused or offline ([`Cause::VcpuOffline`]), or runnable and
//!    waiting for the pCPU it next runs on ([`Cause::HostWait`], with the entity that holds that
//!    pCPU and the rule in force: the timer its scheduler set when it switched it in or kept it,
//!    a ratelimit, halt polling, the policy's figures of both; [`Cause::HostIdle`]: the pCPU is
//!    idle, the host's tickle is on its way);
//! 3. the vCPU runs: an event-channel handler runs on the CPU ([`Cause::KernelWork`]), another
//!    task runs ([`Cause::GuestRunqueue`], with the guest policy's wake-up check when it made one:
//!    [`SchedEvent::WakeCheck`]), or the CPU is idle while the reschedule request travels
//!    ([`Cause::Resched`]: an IPI's latency);
//! 4. after the switch-in, until the first step ([`Cause::Dispatch`]).
//!
//! The task is taken to wait on the CPU it is finally switched in on: a task a load balancer
//! moves while it waits has its wait attributed to that CPU. The context-switch cost
//! (`ctxsw_cost_ns`) is paid after the switch-in, so neither measure contains it; it shows
//! inside [`Cause::GuestRunqueue`] when the task that ran instead was paying it.

use super::{Record, SchedEvent, Trace, WakeRule};
use crate::ids::{GCpu, GEnt};
use crate::sched::{RunState, WakeCause};
use crate::time::{Nanos, SimTime};

/// Which latency of a wake-up is split (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    Wait,
    Latency,
}

impl Measure {
    pub fn name(self) -> &'static str {
        match self {
            Measure::Wait => "wait",
            Measure::Latency => "timer latency",
        }
    }
}

/// Which wake-ups to explain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    /// The `n` longest measured ones (at or after the warm-up), longest first.
    Worst(usize),
    /// The one whose measured interval contains time `t` (or the first starting after it).
    At(SimTime),
    /// Every one, in time order.
    All,
}

/// One part of a wake-up's latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    TimerSlack,
    VcpuHalted,
    VcpuOffline,
    HostWait,
    HostIdle,
    KernelWork,
    GuestRunqueue,
    Resched,
    Dispatch,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::TimerSlack => "timer slack",
            Cause::VcpuHalted => "vcpu halted",
            Cause::VcpuOffline => "vcpu offline",
            Cause::HostWait => "host wait",
            Cause::HostIdle => "host tickle",
            Cause::KernelWork => "kernel work",
            Cause::GuestRunqueue => "guest runqueue",
            Cause::Resched => "resched ipi",
            Cause::Dispatch => "dispatch",
        }
    }
}

/// What was in force during a segment, as far as the trace tells.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// The scheduler of the CPU (`cpu` of the segment) switched `who` in at this time with
    /// this timer (None: no timer)...
    pub slice: Option<(SimTime, Option<Nanos>)>,
    /// ... and last kept it running (Xen's "continue running") at this time with this timer.
    pub kept: Option<(SimTime, Option<Nanos>)>,
    /// The host's rate limit kept `who` running (it had run this long then).
    pub ratelimit: Option<u32>,
    /// `who` is a vCPU whose guest CPU is idle: it holds its pCPU halt-polling.
    pub polling: bool,
    /// The policy's figures (`Scheduler::probe`: Credit2's credit, CFS's vruntime) of `who`
    /// and of the waiting entity at their last switches.
    pub probes: (Option<i64>, Option<i64>),
    /// The guest policy's wake-up check of the task against `who`.
    pub check: Option<(WakeRule, i32, i32)>,
    /// A reschedule reached the CPU but `who` is inside a system call (`preempt = "none"`): it
    /// happens at the syscall exit.
    pub deferred: bool,
    /// The vCPU that waits at the host (for [`Cause::HostWait`]).
    pub waiting: Option<GEnt>,
    /// The RT class of the CPU is throttled ([`SchedEvent::Throttle`]): RT tasks wait while
    /// the fair class runs.
    pub throttled: bool,
}

/// One segment: `[start, end)` spent for `cause`, on `cpu`, while `who` ran there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub start: SimTime,
    pub end: SimTime,
    pub cause: Cause,
    pub cpu: Option<GCpu>,
    pub who: Option<GEnt>,
    pub rule: Rule,
}

/// One explained wake-up of a task.
#[derive(Clone, Debug)]
pub struct Wakeup {
    pub task: GEnt,
    pub measure: Measure,
    pub cause: WakeCause,
    pub waker_cpu: Option<GCpu>,
    /// The measure's start (the wake-up, or the timer's expiry) and end.
    pub start: SimTime,
    pub end: SimTime,
    /// The wake-up (runnable) and the switch-in.
    pub wake: SimTime,
    pub run: SimTime,
    /// The CPU it was switched in on.
    pub cpu: GCpu,
    /// Counted by the metrics (ends at or after the warm-up).
    pub measured: bool,
    pub segments: Vec<Segment>,
    /// For [`Measure::Latency`]: when the sleep timer fired (its hard deadline) and on which
    /// CPU, if it did (a timer expired early by another interrupt has no record).
    timer: Option<(SimTime, GCpu)>,
}

impl Wakeup {
    pub fn latency(&self) -> Nanos {
        self.end - self.start
    }
}

/// What `explain` found: the chosen wake-ups and how many there were.
#[derive(Clone, Debug)]
pub struct Explained {
    pub task: GEnt,
    pub wakeups: Vec<Wakeup>,
    /// Wake-ups of the task in the trace, and those the metrics counted.
    pub total: usize,
    pub measured: usize,
}

/// Explains the wake-ups of the task called `task` (a name of [`super::TraceMeta::ents`]; a
/// name used at several levels must be given as `level/name`). `warmup`: the run's warm-up (the
/// metrics count only what ends after it). Wake-ups after a truncation of the trace are not
/// seen.
pub fn explain(
    trace: &Trace,
    task: &str,
    sel: Select,
    warmup: SimTime,
) -> Result<Explained, String> {
    Ok(explain_task(trace, find_task(trace, task)?, sel, warmup))
}

/// [`explain`] for the task entity `t`.
pub fn explain_task(trace: &Trace, t: GEnt, sel: Select, warmup: SimTime) -> Explained {
    let mut all = find_wakeups(trace, t, warmup);
    let total = all.len();
    let measured = all.iter().filter(|w| w.measured).count();
    let mut chosen: Vec<Wakeup> = match sel {
        Select::All => all,
        Select::Worst(n) => {
            all.retain(|w| w.measured);
            // Longest first; ties by time (stable sort keeps time order).
            all.sort_by_key(|w| std::cmp::Reverse(w.latency()));
            all.truncate(n);
            all
        }
        Select::At(at) => {
            let i = all.iter().position(|w| w.end > at);
            i.map(|i| vec![all.swap_remove(i)]).unwrap_or_default()
        }
    };
    split(trace, &mut chosen);
    Explained {
        task: t,
        wakeups: chosen,
        total,
        measured,
    }
}

/// One row of a run's attribution (issue 13 item 3): of a task's measured latencies (one
/// measure), the time spent for one cause under one rule behind one entity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    pub task: GEnt,
    pub measure: Measure,
    pub cause: Cause,
    pub rule: &'static str,
    /// Who ran instead (None: nobody in particular, e.g. a halted vCPU, an IPI in flight).
    pub who: Option<GEnt>,
    pub ns: u64,
    /// Segments it was made of.
    pub segments: u64,
    /// The task's measured wake-ups of this measure and their summed latency.
    pub wakeups: u64,
    pub total_ns: u64,
}

/// For every task of the trace: where its measured wake-up latencies went, by measure, cause,
/// rule and who ran instead; per task and measure the largest share first (ties in the order of
/// causes, then of entity ids).
pub fn attribution(trace: &Trace, warmup: SimTime) -> Vec<Share> {
    use std::collections::BTreeMap;
    let mut out = Vec::new();
    for (i, e) in trace.meta.ents.iter().enumerate() {
        if e.vcpu_of.is_some() {
            continue;
        }
        let t = GEnt(i as u32);
        let ex = explain_task(trace, t, Select::All, warmup);
        for measure in [Measure::Wait, Measure::Latency] {
            let mut acc: BTreeMap<(u8, &'static str, Option<u32>), (u64, u64)> = BTreeMap::new();
            let (mut n, mut total) = (0u64, 0u64);
            for w in ex
                .wakeups
                .iter()
                .filter(|w| w.measured && w.measure == measure)
            {
                n += 1;
                total += w.latency();
                for s in &w.segments {
                    let a = acc
                        .entry((s.cause as u8, s.rule_name(), s.who.map(|g| g.0)))
                        .or_default();
                    a.0 += s.end - s.start;
                    a.1 += 1;
                }
            }
            let mut rows: Vec<Share> = acc
                .into_iter()
                .map(|((c, rule, who), (ns, segments))| Share {
                    task: t,
                    measure,
                    cause: CAUSES[c as usize],
                    rule,
                    who: who.map(GEnt),
                    ns,
                    segments,
                    wakeups: n,
                    total_ns: total,
                })
                .collect();
            rows.sort_by_key(|r| std::cmp::Reverse(r.ns));
            out.extend(rows);
        }
    }
    out
}

/// Every measured wake-up latency of every task, without splitting them (the first pass of
/// [`explain`] alone): per task and measure that has any, the latencies in time order. The HTML
/// report's histograms and CDFs are made of them.
pub fn latencies(trace: &Trace, warmup: SimTime) -> Vec<(GEnt, Measure, Vec<Nanos>)> {
    let mut out = Vec::new();
    for (i, e) in trace.meta.ents.iter().enumerate() {
        if e.vcpu_of.is_some() {
            continue;
        }
        let t = GEnt(i as u32);
        let all = find_wakeups(trace, t, warmup);
        for measure in [Measure::Wait, Measure::Latency] {
            let v: Vec<Nanos> = all
                .iter()
                .filter(|w| w.measured && w.measure == measure)
                .map(Wakeup::latency)
                .collect();
            if !v.is_empty() {
                out.push((t, measure, v));
            }
        }
    }
    out
}

/// Every [`Cause`], in declaration order (`cause as usize` indexes it).
const CAUSES: [Cause; 9] = [
    Cause::TimerSlack,
    Cause::VcpuHalted,
    Cause::VcpuOffline,
    Cause::HostWait,
    Cause::HostIdle,
    Cause::KernelWork,
    Cause::GuestRunqueue,
    Cause::Resched,
    Cause::Dispatch,
];

fn find_task(trace: &Trace, task: &str) -> Result<GEnt, String> {
    let m = &trace.meta;
    let hits: Vec<usize> = (0..m.ents.len())
        .filter(|&i| {
            let e = &m.ents[i];
            e.vcpu_of.is_none()
                && (e.name == task
                    || format!("{}/{}", m.levels[e.level.idx()].name, e.name) == task)
        })
        .collect();
    match hits[..] {
        [i] => Ok(GEnt(i as u32)),
        [] => {
            let mut names: Vec<&str> = m
                .ents
                .iter()
                .filter(|e| e.vcpu_of.is_none())
                .map(|e| e.name.as_str())
                .collect();
            names.dedup();
            Err(format!(
                "task: no task '{task}' (tasks: {})",
                names.join(", ")
            ))
        }
        _ => Err(format!(
            "task: '{task}' names a task in several domains; give it as DOMAIN/{task}"
        )),
    }
}

/// Pass 1: every wake-up of `task` with its measure's bounds.
fn find_wakeups(trace: &Trace, task: GEnt, warmup: SimTime) -> Vec<Wakeup> {
    let mut out: Vec<Wakeup> = Vec::new();
    let mut open: Option<Wakeup> = None;
    let mut timer: Option<(SimTime, GCpu)> = None;
    let mut last_wake: (WakeCause, Option<GCpu>) = (WakeCause::Unblock, None);
    for r in &trace.records {
        match *r {
            Record::Wake {
                ent,
                cause,
                waker_cpu,
                ..
            } if ent == task => last_wake = (cause, waker_cpu),
            Record::Timer { t, ent, cpu, .. } if ent == task => timer = Some((t, cpu)),
            Record::Block { ent, .. } if ent == task => timer = None,
            Record::Runstate {
                t,
                ent,
                from: RunState::Blocked,
                to: RunState::Runnable,
                ..
            } if ent == task => {
                open = Some(Wakeup {
                    task,
                    measure: Measure::Wait,
                    cause: last_wake.0,
                    waker_cpu: last_wake.1,
                    start: t,
                    end: t,
                    wake: t,
                    run: t,
                    cpu: GCpu(0),
                    measured: false,
                    segments: Vec::new(),
                    timer: timer.take(),
                });
            }
            // Paused, or back to runnable from offline: the metrics start a new wait that is
            // not a wake-up's.
            Record::Runstate { ent, to, .. } if ent == task && to != RunState::Running => {
                open = None
            }
            Record::Switch {
                t,
                cpu,
                next: Some(n),
                ..
            } if n == task => {
                if let Some(mut w) = open.take() {
                    w.run = t;
                    w.end = t;
                    w.cpu = cpu;
                    w.measured = t >= warmup;
                    if w.measured && w.wake < warmup {
                        // The warm-up's end closes every open interval: the metrics count the
                        // part of this wait after it.
                        w.start = warmup;
                    }
                    out.push(w);
                }
            }
            Record::Latency { t, ent, expiry, .. } if ent == task => {
                // The first step after the last switch-in of a wake-up.
                if let Some(w) = out.last_mut() {
                    if w.measure == Measure::Wait && w.run <= t && expiry <= w.wake {
                        w.measure = Measure::Latency;
                        w.start = expiry;
                        w.end = t;
                        w.measured = t >= warmup;
                    }
                }
            }
            _ => {}
        }
    }
    // A wait measure's wake-ups whose first step never came stay Wait: the switch-in ends them.
    out
}

/// The state the trace gives at an instant, replayed record by record.
struct State {
    curr: Vec<Option<GEnt>>,
    rs: Vec<RunState>,
    slice: Vec<(SimTime, Option<Nanos>)>,
    kept: Vec<Option<(SimTime, Option<Nanos>)>>,
    ratelimit: Vec<Option<u32>>,
    kwork: Vec<bool>,
    resched: Vec<bool>,
    throttled: Vec<bool>,
    probe: Vec<Option<i64>>,
    /// The last wake-up check of the task being explained.
    check: Option<(GEnt, WakeRule, i32, i32)>,
}

impl State {
    fn new(trace: &Trace) -> State {
        let (nc, ne) = (trace.meta.cpus.len(), trace.meta.ents.len());
        State {
            curr: vec![None; nc],
            rs: vec![RunState::Blocked; ne],
            slice: vec![(0, None); nc],
            kept: vec![None; nc],
            ratelimit: vec![None; nc],
            kwork: vec![false; nc],
            resched: vec![false; nc],
            throttled: vec![false; nc],
            probe: vec![None; ne],
            check: None,
        }
    }

    fn apply(&mut self, r: &Record, task: GEnt) {
        match *r {
            Record::Switch {
                t,
                cpu,
                next,
                slice,
                ..
            } => {
                let c = cpu.idx();
                self.curr[c] = next;
                self.slice[c] = (t, slice);
                self.kept[c] = None;
                self.ratelimit[c] = None;
                self.resched[c] = false;
            }
            Record::Continue { t, cpu, slice, .. } => self.kept[cpu.idx()] = Some((t, slice)),
            Record::Runstate { ent, to, .. } => self.rs[ent.idx()] = to,
            Record::Probe { ent, value, .. } => self.probe[ent.idx()] = Some(value),
            Record::Handler { cpu, end, .. } => self.kwork[cpu.idx()] = !end,
            Record::Resched { cpu, held, .. } if !held => self.resched[cpu.idx()] = true,
            Record::Sched {
                cpu: Some(cpu),
                ev: SchedEvent::Ratelimit { runtime, .. },
                ..
            } => self.ratelimit[cpu.idx()] = Some(runtime),
            Record::Sched {
                ev: SchedEvent::Throttle { cpu, on },
                ..
            } => self.throttled[cpu.idx()] = on,
            Record::Sched {
                ev:
                    SchedEvent::WakeCheck {
                        ent,
                        curr,
                        rule,
                        a,
                        b,
                    },
                ..
            } if ent == task => self.check = Some((curr, rule, a, b)),
            _ => {}
        }
    }
}

/// Pass 2: replays the trace once and splits each chosen wake-up.
fn split(trace: &Trace, chosen: &mut [Wakeup]) {
    let recs = &trace.records;
    // Work in time order; the caller's order is restored by index.
    let mut order: Vec<usize> = (0..chosen.len()).collect();
    order.sort_by_key(|&i| (chosen[i].start, i));
    let mut st = State::new(trace);
    let mut i = 0; // records before `i` are applied
    for &k in &order {
        let w = &chosen[k];
        let (task, cpu) = (w.task, w.cpu);
        let timer_cpu = w.timer.map_or(cpu, |(_, c)| c);
        // The phases: [start, fire) slack, [fire, wake) the timer waits for its vCPU,
        // [wake, run) the task waits, [run, end) dispatch. Clamped to keep them in order.
        let p0 = w.start;
        let fire = match (w.measure, w.timer) {
            (Measure::Latency, Some((t, _))) => t,
            (Measure::Latency, None) => w.wake,
            (Measure::Wait, _) => p0,
        };
        let p1 = fire.clamp(p0, w.end);
        let p2 = w.wake.clamp(p1, w.end);
        let p3 = w.run.clamp(p2, w.end);
        let phases = [
            (p0, p1, Phase::Slack, timer_cpu),
            (p1, p2, Phase::Wait, timer_cpu),
            (p2, p3, Phase::Wait, cpu),
            (p3, w.end, Phase::Dispatch, cpu),
        ];
        let mut segs: Vec<Segment> = Vec::new();
        // Records up to and including the start instant (a wake-up check made at the wake-up
        // is at that instant).
        while i < recs.len() && recs[i].t() < p0 {
            st.apply(&recs[i], task);
            i += 1;
        }
        st.check = None;
        while i < recs.len() && recs[i].t() <= p0 {
            st.apply(&recs[i], task);
            i += 1;
        }
        for (a, b, phase, c) in phases {
            let mut now = a;
            while now < b {
                let next = recs.get(i).map_or(b, |r| r.t().min(b)).max(now);
                let next = if next == now { b } else { next };
                let seg = classify(trace, &st, recs, i, task, c, phase, now, next);
                push(&mut segs, seg);
                now = next;
                while i < recs.len() && recs[i].t() <= now {
                    st.apply(&recs[i], task);
                    i += 1;
                }
            }
        }
        chosen[k].segments = segs;
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Slack,
    Wait,
    Dispatch,
}

/// Appends `s`, merging it into the last segment when it continues the same cause on the same
/// CPU behind the same entity (the rule then keeps what was in force at its end).
fn push(segs: &mut Vec<Segment>, s: Segment) {
    if let Some(l) = segs.last_mut() {
        if l.end == s.start && l.cause == s.cause && l.cpu == s.cpu && l.who == s.who {
            l.end = s.end;
            let ratelimit = l.rule.ratelimit.or(s.rule.ratelimit);
            let check = s.rule.check.or(l.rule.check);
            let deferred = l.rule.deferred || s.rule.deferred;
            let throttled = l.rule.throttled || s.rule.throttled;
            l.rule = Rule {
                ratelimit,
                check,
                deferred,
                throttled,
                ..s.rule
            };
            return;
        }
    }
    segs.push(s);
}

#[allow(clippy::too_many_arguments)]
fn classify(
    trace: &Trace,
    st: &State,
    recs: &[Record],
    i: usize,
    task: GEnt,
    c: GCpu,
    phase: Phase,
    start: SimTime,
    end: SimTime,
) -> Segment {
    let seg = |cause, cpu, who, rule| Segment {
        start,
        end,
        cause,
        cpu,
        who,
        rule,
    };
    if phase == Phase::Slack {
        return seg(Cause::TimerSlack, Some(c), None, Rule::default());
    }
    if let Some(v) = trace.meta.cpus[c.idx()].backing {
        match st.rs[v.idx()] {
            RunState::Running => {}
            RunState::Blocked => return seg(Cause::VcpuHalted, Some(c), None, Rule::default()),
            RunState::Offline => return seg(Cause::VcpuOffline, Some(c), None, Rule::default()),
            RunState::Runnable => {
                // The pCPU (or parent CPU) it is next switched in on.
                let p = recs[i..].iter().find_map(|r| match *r {
                    Record::Switch { cpu, next, .. } if next == Some(v) => Some(cpu),
                    _ => None,
                });
                let Some(p) = p else {
                    return seg(Cause::HostWait, None, None, Rule::default());
                };
                let Some(h) = st.curr[p.idx()] else {
                    return seg(Cause::HostIdle, Some(p), None, Rule::default());
                };
                let polling = trace.meta.ents[h.idx()]
                    .vcpu_of
                    .is_some_and(|g| st.curr[g.idx()].is_none() && !st.kwork[g.idx()]);
                let rule = Rule {
                    slice: Some(st.slice[p.idx()]),
                    kept: st.kept[p.idx()],
                    ratelimit: st.ratelimit[p.idx()],
                    polling,
                    probes: (st.probe[h.idx()], st.probe[v.idx()]),
                    waiting: Some(v),
                    ..Rule::default()
                };
                return seg(Cause::HostWait, Some(p), Some(h), rule);
            }
        }
    }
    if st.kwork[c.idx()] {
        return seg(Cause::KernelWork, Some(c), None, Rule::default());
    }
    match st.curr[c.idx()] {
        Some(x) if x == task || phase == Phase::Dispatch => {
            seg(Cause::Dispatch, Some(c), None, Rule::default())
        }
        Some(x) => {
            let rule = Rule {
                slice: Some(st.slice[c.idx()]),
                kept: st.kept[c.idx()],
                probes: (st.probe[x.idx()], st.probe[task.idx()]),
                check: st
                    .check
                    .filter(|(curr, ..)| *curr == x)
                    .map(|(_, r, a, b)| (r, a, b)),
                deferred: st.resched[c.idx()],
                throttled: st.throttled[c.idx()],
                ..Rule::default()
            };
            seg(Cause::GuestRunqueue, Some(c), Some(x), rule)
        }
        None => seg(Cause::Resched, Some(c), None, Rule::default()),
    }
}

// ---- words ------------------------------------------------------------------------------------

/// `ns` as a short duration: "850 ns", "12.3 µs", "1.001 ms", "2.500 s".
pub fn dur(ns: i64) -> String {
    let a = ns.unsigned_abs();
    let s = if a < 1_000 {
        format!("{a} ns")
    } else if a < 1_000_000 {
        format!("{:.1} µs", a as f64 / 1e3)
    } else if a < 1_000_000_000 {
        format!("{:.3} ms", a as f64 / 1e6)
    } else {
        format!("{:.3} s", a as f64 / 1e9)
    };
    if ns < 0 {
        format!("-{s}")
    } else {
        s
    }
}

/// A simulated instant: "1234.567890 ms".
pub fn at(t: SimTime) -> String {
    format!("{:.6} ms", t as f64 / 1e6)
}

/// The name of a CPU: a vCPU's entity name and its CPU number in its guest ("domU1.v0 (cpu0)"),
/// or "pCPU n".
pub fn cpu_name(trace: &Trace, c: GCpu) -> String {
    let m = &trace.meta.cpus[c.idx()];
    match m.backing {
        Some(v) => format!("{} (cpu{})", trace.meta.ents[v.idx()].name, m.local),
        None => format!("pCPU {}", m.local),
    }
}

pub fn ent_name(trace: &Trace, e: GEnt) -> &str {
    &trace.meta.ents[e.idx()].name
}

impl Segment {
    /// The scheduler's name at the level of this segment's CPU.
    pub fn sched<'a>(&self, trace: &'a Trace) -> Option<&'a str> {
        self.cpu
            .map(|c| trace.meta.levels[trace.meta.cpus[c.idx()].level.idx()].sched)
    }

    /// The rule in force, in a few words ("slice", "ratelimit", "wakeup granularity", ...).
    pub fn rule_name(&self) -> &'static str {
        let r = &self.rule;
        match self.cause {
            Cause::HostWait if r.polling => "halt polling",
            Cause::HostWait if r.ratelimit.is_some() => "ratelimit",
            Cause::HostWait if r.slice.is_some_and(|s| s.1.is_some()) => "slice",
            Cause::HostWait => "no timer",
            Cause::GuestRunqueue if r.throttled => "RT throttled",
            Cause::GuestRunqueue if r.deferred => "syscall exit",
            Cause::GuestRunqueue => match r.check {
                Some((WakeRule::Granularity, a, b)) if a > b => "preempt pending",
                Some((rule, ..)) => rule.name(),
                None => "no wake check",
            },
            Cause::TimerSlack => "hrtimer slack",
            Cause::VcpuHalted => "halted",
            Cause::VcpuOffline => "paused",
            Cause::HostIdle => "tickle",
            Cause::KernelWork => "evtchn handler",
            Cause::Resched => "ipi latency",
            Cause::Dispatch => "first step",
        }
    }

    /// The segment in a sentence, with the names of the run.
    pub fn describe(&self, trace: &Trace, task: GEnt) -> String {
        let cpu = self.cpu.map(|c| cpu_name(trace, c)).unwrap_or_default();
        let who = self.who.map(|e| ent_name(trace, e)).unwrap_or("");
        let sched = self.sched(trace).unwrap_or("");
        let r = &self.rule;
        let tname = ent_name(trace, task);
        match self.cause {
            Cause::TimerSlack => format!(
                "timer slack: the sleep expired at its soft deadline; the timer fired at its hard deadline or the next timer interrupt on {cpu}"
            ),
            Cause::VcpuHalted => format!(
                "{cpu}'s vCPU is halted (blocked at the host): the wake-up, IPI or timer waits for it to be woken"
            ),
            Cause::VcpuOffline => format!("{cpu}'s vCPU is paused or offline at the host"),
            Cause::HostIdle => format!(
                "{sched}: {cpu} is idle; its reschedule (tickle) is on its way"
            ),
            Cause::HostWait => {
                let mut s = format!("{sched}: {who} held {cpu}");
                if r.polling {
                    s += " halt-polling (its guest CPU is idle)";
                }
                match r.slice {
                    Some((t0, Some(d))) => {
                        s += &format!(
                            "; switched in at {} with a slice of {} (to {})",
                            at(t0),
                            dur(d as i64),
                            at(t0 + d)
                        )
                    }
                    Some((t0, None)) => s += &format!("; switched in at {} with no timer", at(t0)),
                    None => {}
                }
                match r.kept {
                    Some((t1, Some(d))) => {
                        s += &format!(
                            ", kept at {} for {} more (to {})",
                            at(t1),
                            dur(d as i64),
                            at(t1 + d)
                        )
                    }
                    Some((t1, None)) => s += &format!(", kept at {} with no timer", at(t1)),
                    None => {}
                }
                if let Some(rt) = r.ratelimit {
                    s += &format!(
                        "; the ratelimit kept it (it had run {})",
                        dur(rt as i64)
                    );
                }
                if let (Some(a), Some(b)) = r.probes {
                    let figure = match sched {
                        "credit2" => "credit",
                        "cfs" | "eevdf" => "vruntime",
                        _ => "figure",
                    };
                    s += &format!("; {figure} at their last switches: {who} {}, {} {}", dur(a), r.waiting.map_or("", |v| ent_name(trace, v)), dur(b));
                }
                s
            }
            Cause::KernelWork => format!("an event-channel handler runs on {cpu}"),
            Cause::Resched => format!(
                "{cpu} is idle in the guest: the reschedule IPI is on its way"
            ),
            Cause::GuestRunqueue => {
                let mut s = format!("{sched}: {who} ran on {cpu}");
                match r.check {
                    Some((WakeRule::Granularity, a, b)) if a > b => {
                        s += &format!(
                            "; the wake-up check preempts it ({who} is {} ahead in vruntime > wakeup granularity {}): reschedule pending",
                            dur(a as i64),
                            dur(b as i64)
                        )
                    }
                    Some((WakeRule::Granularity, a, b)) if a <= 0 => {
                        s += &format!(
                            "; not preempted at the wake-up: its vruntime is {} behind {tname}'s (a wake-up preempts only a task more than the wakeup granularity {} ahead)",
                            dur(-(a as i64)),
                            dur(b as i64)
                        )
                    }
                    Some((WakeRule::Granularity, a, b)) => {
                        s += &format!(
                            "; not preempted at the wake-up: {who} is {} ahead of {tname} in vruntime, within the wakeup granularity {}",
                            dur(a as i64),
                            dur(b as i64)
                        )
                    }
                    Some((WakeRule::Preempt, ..)) => {
                        s += "; the wake-up check preempts it: reschedule pending"
                    }
                    Some((rule, ..)) => {
                        s += &format!("; not preempted at the wake-up: {}", rule.name())
                    }
                    None if r.throttled => {}
                    None => s += "; no wake-up check against it (another class, or a reschedule was already pending)",
                }
                if r.throttled {
                    s += &format!("; the RT class of {cpu} is throttled (its sched_rt_runtime_us is used up for this period): RT tasks wait while fair ones run");
                }
                if r.deferred {
                    s += &format!("; a reschedule reached {cpu} inside a system call of {who} (preempt = \"none\"): it waits for the syscall exit");
                }
                s
            }
            Cause::Dispatch => format!("{tname} is switched in on {cpu}; until its first step"),
        }
    }
}
