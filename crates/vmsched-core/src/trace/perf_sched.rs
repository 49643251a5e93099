//! The figures of Linux's `perf sched latency` and `perf sched timehist` (issue 13 item 6,
//! docs/report.md), read from a trace: the formats scheduler people already read, for every
//! level (the host's vCPUs, as `perf sched` on a KVM host sees them; each guest's tasks, as it
//! sees them inside the guest, on the guest's clock: a task "runs" while its vCPU is
//! descheduled, as in the guest's own trace).
//!
//! What perf's documentation and its output (Debian's linux-perf 6.1) say the columns are, and
//! how they are made here from the [`Record::Switch`] and [`Record::Runstate`] records:
//! - **latency** (one row per task): `Runtime` the time it ran; `Switches` how many times it
//!   was switched in; `Avg delay` / `Max delay` the time from becoming runnable (a wake-up, or
//!   a preemption: perf counts both) to being switched in, with the start and end of the
//!   longest. Counted from `from` (the warm-up's end, as the run's own figures): a delay or a
//!   run that spans it counts from there.
//! - **timehist** (one line per run that ends, at the switch that ends it): the `time` of that
//!   switch, the `cpu`, the task; `wait time` from its previous switch-out to this run's
//!   switch-in (asleep or preempted), `sch delay` from its wake-up to the switch-in (0 when it
//!   was preempted rather than woken), `run time` from the switch-in to the switch-out.
//!
//! Not modelled: perf's idle task lines (an idle CPU has no run here), migrations and the pid
//! columns (vmsched entities have names, not pids).

use super::{Record, Trace};
use crate::ids::{GCpu, GEnt};
use crate::sched::RunState;
use crate::time::{Nanos, SimTime};

/// One task's `perf sched latency` row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyRow {
    pub ent: GEnt,
    pub runtime: Nanos,
    pub switches: u64,
    pub delays: u64,
    pub delay_sum: Nanos,
    pub delay_max: Nanos,
    /// When the longest delay started (the task became runnable) and ended (switched in).
    pub max_start: SimTime,
    pub max_end: SimTime,
}

/// One `perf sched timehist` line: a run of `ent` on `cpu` that ended at `time`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimehistRow {
    pub time: SimTime,
    pub cpu: GCpu,
    pub ent: GEnt,
    pub wait: Nanos,
    pub sch_delay: Nanos,
    pub run: Nanos,
}

#[derive(Clone, Copy, Default)]
struct State {
    /// Switched in at, on.
    running: Option<(SimTime, GCpu)>,
    /// Became runnable at (a wake-up or a preemption), for the latency's delay.
    runnable_at: Option<SimTime>,
    /// Woken at (blocked or offline to runnable), for timehist's sch delay.
    woken_at: Option<SimTime>,
    /// Last switched out at.
    last_out: Option<SimTime>,
}

/// Every task's (and vCPU's) `perf sched latency` figures from `from` to the trace's end, in
/// entity order; entities that never ran nor waited after `from` are left out.
pub fn latency(trace: &Trace, from: SimTime) -> Vec<LatencyRow> {
    let n = trace.meta.ents.len();
    let mut st = vec![State::default(); n];
    let mut rows: Vec<LatencyRow> = (0..n)
        .map(|i| LatencyRow {
            ent: GEnt(i as u32),
            runtime: 0,
            switches: 0,
            delays: 0,
            delay_sum: 0,
            delay_max: 0,
            max_start: 0,
            max_end: 0,
        })
        .collect();
    let end = trace.complete_until();
    for r in &trace.records {
        if r.t() > end {
            break;
        }
        match *r {
            Record::Switch {
                t, cpu, prev, next, ..
            } if prev != next => {
                if let Some(p) = prev {
                    let s = &mut st[p.idx()];
                    if let Some((since, _)) = s.running.take() {
                        rows[p.idx()].runtime += t.saturating_sub(since.max(from));
                    }
                }
                if let Some(e) = next {
                    let s = &mut st[e.idx()];
                    s.running = Some((t, cpu));
                    let row = &mut rows[e.idx()];
                    if t >= from {
                        row.switches += 1;
                    }
                    if let Some(at) = s.runnable_at.take() {
                        if t >= from {
                            let start = at.max(from);
                            let d = t - start;
                            row.delays += 1;
                            row.delay_sum += d;
                            if d > row.delay_max || row.delays == 1 {
                                row.delay_max = d;
                                row.max_start = start;
                                row.max_end = t;
                            }
                        }
                    }
                }
            }
            Record::Runstate { t, ent, to, .. } => {
                let s = &mut st[ent.idx()];
                if to == RunState::Runnable {
                    s.runnable_at = Some(t);
                } else if to != RunState::Running {
                    s.runnable_at = None;
                }
            }
            _ => {}
        }
    }
    for (i, s) in st.iter().enumerate() {
        if let Some((since, _)) = s.running {
            rows[i].runtime += end.saturating_sub(since.max(from));
        }
    }
    rows.retain(|r| r.switches > 0 || r.runtime > 0 || r.delays > 0);
    rows
}

/// The `perf sched timehist` lines of the runs that end within `[start, end)`, in time order
/// (the order of the switches that end them).
pub fn timehist(trace: &Trace, start: SimTime, end: SimTime) -> Vec<TimehistRow> {
    let mut st = vec![State::default(); trace.meta.ents.len()];
    let mut out = Vec::new();
    let end = end.min(trace.complete_until());
    for r in &trace.records {
        if r.t() >= end {
            break;
        }
        match *r {
            Record::Switch {
                t, cpu, prev, next, ..
            } if prev != next => {
                if let Some(p) = prev {
                    let s = &mut st[p.idx()];
                    if let Some((since, on)) = s.running.take() {
                        if t >= start {
                            out.push(TimehistRow {
                                time: t,
                                cpu: on,
                                ent: p,
                                wait: s.last_out.map_or(0, |o| since - o),
                                sch_delay: s.woken_at.map_or(0, |w| since - w),
                                run: t - since,
                            });
                        }
                        s.woken_at = None;
                        s.last_out = Some(t);
                    }
                }
                if let Some(e) = next {
                    st[e.idx()].running = Some((t, cpu));
                }
            }
            Record::Runstate {
                t, ent, from, to, ..
            } => {
                let s = &mut st[ent.idx()];
                if to == RunState::Runnable && matches!(from, RunState::Blocked | RunState::Offline)
                {
                    s.woken_at = Some(t);
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::LevelId;
    use crate::trace::{CpuMeta, EntMeta, TraceBuf, TraceMeta};

    fn sw(t: SimTime, prev: Option<u32>, next: Option<u32>) -> Record {
        Record::Switch {
            t,
            level: LevelId(0),
            cpu: GCpu(0),
            prev: prev.map(GEnt),
            next: next.map(GEnt),
            slice: None,
        }
    }

    fn rs(t: SimTime, ent: u32, from: RunState, to: RunState) -> Record {
        Record::Runstate {
            t,
            level: LevelId(0),
            ent: GEnt(ent),
            from,
            to,
        }
    }

    /// Task 0 runs 0..10, is preempted by task 1 (woken at 8) 10..30, runs again 30..40,
    /// sleeps, is woken at 50 and runs 55..60 (the trace ends at 60).
    fn trace() -> Trace {
        use RunState::*;
        let recs = [
            rs(0, 0, Blocked, Runnable),
            sw(0, None, Some(0)),
            rs(0, 0, Runnable, Running),
            rs(8, 1, Blocked, Runnable),
            sw(10, Some(0), Some(1)),
            rs(10, 0, Running, Runnable),
            rs(10, 1, Runnable, Running),
            sw(30, Some(1), Some(0)),
            rs(30, 1, Running, Blocked),
            rs(30, 0, Runnable, Running),
            sw(40, Some(0), None),
            rs(40, 0, Running, Blocked),
            rs(50, 0, Blocked, Runnable),
            sw(55, None, Some(0)),
            rs(55, 0, Runnable, Running),
        ];
        let mut b = TraceBuf::new(100);
        for r in recs {
            b.push(r);
        }
        let ent = |name: &str| EntMeta {
            level: LevelId(0),
            name: name.into(),
            vcpu_of: None,
        };
        let meta = TraceMeta {
            cpus: vec![CpuMeta {
                level: LevelId(0),
                local: 0,
                backing: None,
            }],
            ents: vec![ent("a"), ent("b")],
            ..TraceMeta::default()
        };
        b.finish(60, meta)
    }

    #[test]
    fn latency_counts_wakeups_and_preemptions_as_delays() {
        let rows = latency(&trace(), 0);
        let a = rows[0];
        assert_eq!((a.runtime, a.switches, a.delays), (10 + 10 + 5, 3, 3));
        // Delays: 0 (woken at 0, in at 0), 20 (preempted at 10, back at 30), 5 (50 to 55).
        assert_eq!(
            (a.delay_sum, a.delay_max, a.max_start, a.max_end),
            (25, 20, 10, 30)
        );
        let b = rows[1];
        assert_eq!(
            (b.runtime, b.switches, b.delay_sum, b.delay_max),
            (20, 1, 2, 2)
        );
    }

    #[test]
    fn latency_from_the_warmup_clips_what_spans_it() {
        let a = latency(&trace(), 20)[0];
        // Runs from 20: 30..40 and 55..60; the preemption's delay counts from 20.
        assert_eq!(
            (a.runtime, a.switches, a.delay_max, a.max_start),
            (15, 2, 10, 20)
        );
    }

    #[test]
    fn timehist_has_one_line_per_ended_run_with_wait_and_delay() {
        let lines = timehist(&trace(), 0, 100);
        let got: Vec<_> = lines
            .iter()
            .map(|l| (l.time, l.ent.0, l.wait, l.sch_delay, l.run))
            .collect();
        // a's first run (no earlier switch-out), b's run (woken at 8, in at 10), a back
        // after its preemption (waited 20, not woken: no sch delay); a's run at 55 has not
        // ended by the trace's end.
        assert_eq!(
            got,
            vec![(10, 0, 0, 0, 10), (30, 1, 0, 2, 20), (40, 0, 20, 0, 10)]
        );
        assert_eq!(timehist(&trace(), 35, 100).len(), 1);
    }
}
