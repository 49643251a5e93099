//! Unit tests of Credit2, one per rule of the spec (§3) and the errata (X1–X4, X12, X14).
//!
//! Shared helpers and the small event loop `Sim` are here; the tests are grouped by topic in
//! the submodules, each test named after the rule it checks.

use super::*;
use vmsched_core::sched::{EntityParams, Request, SchedCtx, Scheduler};
use vmsched_core::testkit::{flat, params, pinned, Harness};
use vmsched_core::time::{ms, us, Nanos, SimTime};

const MS: i64 = 1_000_000;
const US: i64 = 1_000;

mod balance;
mod candidate;
mod caps;
mod credit_accounting;
mod hotplug;
mod long_run;
mod parameters;
mod runqueue;
mod runtime;
mod tickle;
mod v4_2;

// ------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------

/// Credit2 on the Xen core with timers entered exactly (`timer_entry_ns = 0`): the harness's
/// `Sim` models the entry latency itself, and the hook-level tests want exact slices.
fn harness(p: Credit2Params, topo: Vec<CpuTopo>, ents: Vec<EntityParams>) -> Harness<Credit2Sched> {
    let p = Credit2Params {
        timer_entry_ns: 0,
        ..p
    };
    let s = Credit2::sched(p, &topo, ents.len() as u32);
    Harness::with_topology(s, topo, ents)
}

fn flat_harness(p: Credit2Params, ncpus: usize, nents: usize) -> Harness<Credit2Sched> {
    harness(
        p,
        flat(ncpus),
        (0..nents).map(|i| params(i, ncpus)).collect(),
    )
}

fn rl(ratelimit_us: u64) -> Credit2Params {
    Credit2Params {
        ratelimit_us,
        ..Default::default()
    }
}

fn wake(h: &mut Harness<Credit2Sched>, e: u32) {
    h.wake(e, WakeInfo::default());
}

fn credit(h: &Harness<Credit2Sched>, e: u32) -> i64 {
    h.sched.ops.units[e as usize].credit
}

fn set_credit(h: &mut Harness<Credit2Sched>, e: u32, c: i64) {
    h.sched.ops.units[e as usize].credit = c;
}

fn set_processor(h: &mut Harness<Credit2Sched>, e: u32, cpu: u32) {
    h.sched.ops.units[e as usize].processor = CpuId(cpu);
}

fn runq(h: &Harness<Credit2Sched>, r: usize) -> Vec<u32> {
    h.sched.ops.rqs[r].runq.iter().map(|e| e.0).collect()
}

fn capped(cap: u32, n: usize) -> Harness<Credit2Sched> {
    let mut ents: Vec<EntityParams> = (0..n).map(|i| pinned(i, 1, 0)).collect();
    ents[0].xen.cap_pct = cap;
    harness(Credit2Params::default(), flat(1), ents)
}

/// A small event loop over the harness: CPU timers (optionally entered `latency` late, as a
/// real timer interrupt is), reschedule requests (delivered `latency` after they are raised),
/// and the scheduler's own timers. Records every run interval.
struct Sim {
    h: Harness<Credit2Sched>,
    latency: Nanos,
    sched_timers: Vec<Option<SimTime>>,
    pending: Vec<(SimTime, u32)>,
    since: Vec<SimTime>,
    /// (entity, cpu, start, end)
    runs: Vec<(u32, u32, SimTime, SimTime)>,
}

impl Sim {
    fn new(h: Harness<Credit2Sched>, latency: Nanos) -> Sim {
        let nt = h.sched.nr_timers() as usize;
        let ne = h.ents.len();
        let mut s = Sim {
            h,
            latency,
            sched_timers: vec![None; nt],
            pending: vec![],
            since: vec![0; ne],
            runs: vec![],
        };
        s.collect();
        s
    }

    fn collect(&mut self) {
        for (k, at) in self.h.take_timers() {
            self.sched_timers[k as usize] = at;
        }
        self.h.take_pauses();
        let now = self.h.now;
        for c in self.h.take_resched() {
            if !self.pending.iter().any(|p| p.1 == c) {
                self.pending.push((now + self.latency, c));
            }
        }
    }

    fn schedule(&mut self, c: u32) {
        let now = self.h.now;
        self.pending.retain(|p| !(p.1 == c && p.0 <= now));
        let before = self.h.curr(c);
        self.h.schedule(c);
        let after = self.h.curr(c);
        if before != after {
            if let Some(b) = before {
                self.runs.push((b, c, self.since[b as usize], now));
            }
            if let Some(a) = after {
                self.since[a as usize] = now;
            }
        }
        self.collect();
    }

    fn wake(&mut self, e: u32) {
        self.h.wake(e, WakeInfo::default());
        self.collect();
    }

    fn block(&mut self, e: u32) {
        let c = self.h.ents[e as usize].on_cpu.unwrap().0;
        let now = self.h.now;
        self.pending.retain(|p| !(p.1 == c && p.0 <= now));
        self.h.block(e);
        self.runs.push((e, c, self.since[e as usize], now));
        if let Some(a) = self.h.curr(c) {
            self.since[a as usize] = now;
        }
        self.collect();
    }

    /// The next event: (time, kind, index); kind 0 = CPU timer, 1 = resched, 2 = sched timer.
    fn next_event(&self) -> Option<(SimTime, u8, usize)> {
        let mut best: Option<(SimTime, u8, usize)> = None;
        let mut offer = |t: SimTime, k: u8, i: usize| {
            if best.is_none_or(|b| (t, k, i) < b) {
                best = Some((t, k, i));
            }
        };
        for (c, t) in self.h.timer.iter().enumerate() {
            if let Some(t) = t {
                offer(t + self.latency, 0, c);
            }
        }
        for (i, p) in self.pending.iter().enumerate() {
            offer(p.0, 1, i);
        }
        for (k, t) in self.sched_timers.iter().enumerate() {
            if let Some(t) = t {
                offer(*t, 2, k);
            }
        }
        best
    }

    /// Runs events until `e` is on a CPU; returns the time it got there.
    fn run_until_running(&mut self, e: u32) -> SimTime {
        while self.h.ents[e as usize].on_cpu.is_none() {
            let (t, _, _) = self.next_event().expect("an event is pending");
            self.run_until(t);
        }
        self.h.now
    }

    fn run_until(&mut self, end: SimTime) {
        while let Some((t, kind, i)) = self.next_event() {
            if t > end {
                break;
            }
            self.h.now = t.max(self.h.now);
            match kind {
                0 => self.schedule(i as u32),
                1 => {
                    let c = self.pending[i].1;
                    self.schedule(c);
                }
                _ => {
                    self.sched_timers[i] = None;
                    self.h.fire_timer(i as u32);
                    self.collect();
                }
            }
        }
        self.h.now = end;
    }

    /// Closes the open runs at the current time.
    fn finish(&mut self) {
        for c in 0..self.h.cpus.len() {
            if let Some(e) = self.h.curr(c as u32) {
                self.runs
                    .push((e, c as u32, self.since[e as usize], self.h.now));
                self.since[e as usize] = self.h.now;
            }
        }
    }

    fn busy(&self, e: u32, from: SimTime, to: SimTime) -> u64 {
        self.runs
            .iter()
            .filter(|r| r.0 == e)
            .map(|r| r.3.min(to).saturating_sub(r.2.max(from)))
            .sum()
    }
}
