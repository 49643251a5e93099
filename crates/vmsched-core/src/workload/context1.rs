//! UnixBench Context1, "Pipe-based Context Switching" (UnixBench 6.0.0, `src/context1.c` as of
//! commit 35efe5e; spec/workloads.md §1).
//!
//! Two processes and two pipes. The parent writes its counter into pipe 1 and reads it back from
//! pipe 2; the child reads pipe 1 and writes pipe 2. Writers never block (the pipe never fills);
//! a write into an empty pipe wakes the sleeping reader with a sync wake-up. The score is the
//! parent's completed round trips per second.
//!
//! Costs per operation are calibration parameters (spec/workloads.md §0), defaulting to the
//! Cortex-A55 column. Sleeps tell the two patterns of seed 000 apart: a "slow" round trip has two
//! (each side blocks in `read`), a "fast" one only one (the reader preempted the writer at its
//! write, so the writer's next read finds the data). The counters record each side's sleeps;
//! the report derives the number of fast and slow round trips from them.
//!
//! **Drivers.** `driver = "window"` (the default) starts the pair at the start of the run and
//! scores the round trips over the measured window. `driver = "unixbench"` runs it as UnixBench's
//! `Run` script does (byte-unixbench `UnixBench/Run` as of commit 986b674: `runBenchmark`,
//! `runOnePass`, `combinePassResults`; context1 is a "long" test): a driver task (the `Run`
//! script) runs `passes` passes (10); before each it idles `gap_ms` (3 s: `sync; sleep 1; sync;
//! sleep 2`), then forks a fresh parent, which forks a fresh child (so the guest scheduler's fork
//! placement and START_DEBIT apply every pass) on fresh pipes. The parent loops until `pass_s`
//! (10 s, the `options` "10") have passed since its fork (its `alarm`), then exits, closing its
//! pipe; the child reads end-of-file and exits; the driver waits for both. The score is `Run`'s:
//! the passes sorted by count, the lowest `passes / 3` dropped, the geometric mean of the others'
//! count / elapsed ([`run_score`]); UnixBench's index is that score / 4000 × 10 (`pgms/index.base`).
//!
//! Simplifications of the driver: the perl and shell processes between `Run` and context1
//! (`commandBuffered`, `sh -c`), `sync`, `exec` and exit costs are not modelled; each pass's
//! elapsed time is the parent's (fork to alarm), averaged over the passes; the alarm is checked
//! once a round trip. The run must cover the passes: `[run] warmup_ms = 0` and `duration_ms` at
//! least `passes × (gap_ms + pass_s)` plus a little; a pass cut off counts 0 (and is dropped
//! first, as `Run` would drop it).

use serde::{Deserialize, Serialize};

use super::{Dist, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::Policy;
use crate::time::{Nanos, NEVER, NS_PER_MS, NS_PER_S};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Context1Config {
    pub name: String,
    /// vCPUs both processes may run on (default: all). One vCPU = the pinned pair.
    #[serde(default)]
    pub affinity: Option<Vec<u32>>,
    #[serde(default)]
    pub nice: i32,
    /// Entry and exit of a trivial system call.
    #[serde(default = "d_syscall")]
    pub c_syscall_ns: u64,
    /// Pipe read or write of one counter (excluding wake and sleep).
    #[serde(default = "d_pipe")]
    pub c_pipe_rw_ns: u64,
    /// try_to_wake_up + enqueue + preemption check, paid by the writer when it wakes the reader.
    #[serde(default = "d_wakeup")]
    pub c_wakeup_ns: u64,
    /// Dequeue and the `schedule()` path when a reader goes to sleep.
    #[serde(default = "d_block")]
    pub c_block_ns: u64,
    /// User-space work per loop (the check and the increment).
    #[serde(default = "d_user")]
    pub c_user_ns: u64,
    /// Spread of every cost: each execution draws uniformly within ± this percentage (cache
    /// misses, interrupts). 0 (the default) makes every round trip cost exactly the same, which
    /// can phase-lock with a host's exactly periodic slices.
    #[serde(default)]
    pub jitter_pct: u32,
    /// How the pair is run: "window" (the default: once, over the whole run) or "unixbench"
    /// (UnixBench's `Run` driver: passes of fresh processes with idle gaps; module doc).
    #[serde(default)]
    pub driver: Driver,
    /// Passes of the "unixbench" driver (`Run`'s `longIterCount`, 10).
    #[serde(default = "d_passes")]
    pub passes: u32,
    /// Length of a pass in seconds (context1's argument, 10).
    #[serde(default = "d_pass_s")]
    pub pass_s: u32,
    /// Idle time before each pass (`sync; sleep 1; sync; sleep 2`: 3 s).
    #[serde(default = "d_gap_ms")]
    pub gap_ms: u64,
}

/// How a Context1 pair is run (module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Driver {
    /// One pair for the whole run, scored over the measured window.
    #[default]
    Window,
    /// UnixBench's `Run` script: fresh pairs in passes with idle gaps, `Run`'s score.
    Unixbench,
}

fn d_passes() -> u32 {
    10
}
fn d_pass_s() -> u32 {
    10
}
fn d_gap_ms() -> u64 {
    3000
}

fn d_syscall() -> u64 {
    400
}
fn d_pipe() -> u64 {
    1000
}
fn d_wakeup() -> u64 {
    2000
}
fn d_block() -> u64 {
    2000
}
fn d_user() -> u64 {
    100
}

/// Counter indices of this workload.
pub const ITERATIONS: u16 = 0;
pub const PARENT_SLEEPS: u16 = 1;
pub const CHILD_SLEEPS: u16 = 2;

/// With the "unixbench" driver, pass k's round trips are counted in counter `PASSES + k`.
pub const PASSES: u16 = 3;
/// The most passes the "unixbench" driver runs.
pub const MAX_PASSES: u32 = 100;
/// Linux's default timer slack of a SCHED_OTHER task (the driver's `sleep`).
const TIMER_SLACK_NS: Nanos = 50_000;

const P1: u16 = 0;
const P2: u16 = 1;

impl Context1Config {
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.jitter_pct > 100 {
            return Err(("jitter_pct".into(), "must be 0..=100".into()));
        }
        for (field, v) in [
            ("c_syscall_ns", self.c_syscall_ns),
            ("c_pipe_rw_ns", self.c_pipe_rw_ns),
            ("c_wakeup_ns", self.c_wakeup_ns),
            ("c_block_ns", self.c_block_ns),
            ("c_user_ns", self.c_user_ns),
        ] {
            crate::scenario::check_ns(field, v)?;
        }
        if self.driver == Driver::Window {
            for (field, set) in [
                ("passes", self.passes != d_passes()),
                ("pass_s", self.pass_s != d_pass_s()),
                ("gap_ms", self.gap_ms != d_gap_ms()),
            ] {
                if set {
                    return Err((field.into(), "only with driver = \"unixbench\"".into()));
                }
            }
        }
        if !(1..=MAX_PASSES).contains(&self.passes) {
            return Err(("passes".into(), format!("must be 1..={MAX_PASSES}")));
        }
        if self.pass_s == 0 {
            return Err(("pass_s".into(), "must be at least 1".into()));
        }
        crate::scenario::check_ns("pass_s", u64::from(self.pass_s) * NS_PER_S)?;
        crate::scenario::check_ns("gap_ms", self.gap_ms.saturating_mul(NS_PER_MS))?;
        if self.c_syscall_ns + self.c_pipe_rw_ns + self.c_user_ns == 0 {
            return Err((
                "c_syscall_ns".into(),
                "a round trip must cost some CPU time (all costs are zero)".into(),
            ));
        }
        Ok(())
    }

    pub fn build(&self) -> WorkloadSpec {
        match self.driver {
            Driver::Window => self.build_window(),
            Driver::Unixbench => self.build_unixbench(),
        }
    }

    /// A cost as this workload draws it (± `jitter_pct`).
    fn dist(&self, ns: u64) -> Dist {
        let j = self.jitter_pct.min(100) as u64;
        if j == 0 {
            Dist::Fixed(ns)
        } else {
            Dist::Uniform(ns - ns * j / 100, ns + ns * j / 100)
        }
    }

    /// Kernel time (inside a system call).
    fn k(&self, ns: u64) -> Step {
        Step::Compute {
            dur: self.dist(ns),
            kernel: true,
        }
    }

    /// The parent's round trip on pipes `p1` (to the child) and `p2` (back), up to its count.
    fn parent_round(&self, p1: u16, p2: u16) -> Vec<Step> {
        vec![
            // write(p1): the copy, then the wake-up of the child (if it sleeps) inside the syscall.
            self.k(self.c_syscall_ns + self.c_pipe_rw_ns),
            Step::Signal {
                chan: p1,
                sync: true,
                wake_cost: self.c_wakeup_ns,
            },
            // read(p2)
            self.k(self.c_syscall_ns),
            Step::Wait {
                chan: p2,
                block_cost: self.c_block_ns,
                slept: Some(PARENT_SLEEPS),
            },
            self.k(self.c_pipe_rw_ns),
            Step::Compute {
                dur: self.dist(self.c_user_ns),
                kernel: false,
            },
            Step::Count {
                counter: ITERATIONS,
            },
        ]
    }

    /// The child's round trip: read `p1` (then `eof`, if given: a step run when the read
    /// returned), write `p2`.
    fn child_round(&self, p1: u16, p2: u16, eof: Option<Step>) -> Vec<Step> {
        let mut v = vec![
            // read(p1)
            self.k(self.c_syscall_ns),
            Step::Wait {
                chan: p1,
                block_cost: self.c_block_ns,
                slept: Some(CHILD_SLEEPS),
            },
        ];
        v.extend(eof);
        v.extend([
            self.k(self.c_pipe_rw_ns),
            Step::Compute {
                dur: self.dist(self.c_user_ns),
                kernel: false,
            },
            // write(p2)
            self.k(self.c_syscall_ns + self.c_pipe_rw_ns),
            Step::Signal {
                chan: p2,
                sync: true,
                wake_cost: self.c_wakeup_ns,
            },
        ]);
        v
    }

    fn task(&self, name: &str, program: Vec<Step>, start: Nanos) -> TaskSpec {
        TaskSpec {
            name: format!("{}.{name}", self.name),
            program,
            nice: self.nice,
            policy: Policy::Normal,
            rt_prio: 0,
            times: Default::default(),
            affinity: self.affinity.clone(),
            start,
        }
    }

    /// The pair started with the run, looping for ever.
    fn build_window(&self) -> WorkloadSpec {
        let mut parent = self.parent_round(P1, P2);
        parent.push(Step::Goto { to: 0, times: None });
        let mut child = self.child_round(P1, P2, None);
        child.push(Step::Goto { to: 0, times: None });
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::Context1,
            tasks: vec![self.task("parent", parent, 0), self.task("child", child, 0)],
            channels: 2,
            counters: vec![
                "iterations".into(),
                "parent_sleeps".into(),
                "child_sleeps".into(),
            ],
            hists: vec![],
            gap_pairs: vec![(0, 1)],
            tokens: vec![],
            hist_buckets: 0,
        }
    }

    /// UnixBench's `Run` driver (module doc). One program for every task, in sections: the
    /// driver's at step 0, then per pass the parent's and the child's, on the pass's own
    /// channels (its two pipes and the end-of-file flag of the first). Task 0 is the driver;
    /// pass k's parent and child are the fork slots 2k+1 and 2k+2 (taken in fork order).
    /// Counter 3 + k counts pass k's round trips; histogram 0 holds each pass's elapsed time.
    fn build_unixbench(&self) -> WorkloadSpec {
        let n = self.passes as u16;
        let done = 3 * n;
        let pass_ns = u64::from(self.pass_s) * NS_PER_S;
        let to = |i: usize| u16::try_from(i).expect("passes <= MAX_PASSES keeps steps in u16");
        // The driver: per pass, idle, fork the parent, wait for parent and child to exit.
        let driver_len = 4 * self.passes as usize + 1;
        let mut prog: Vec<Step> = Vec::new();
        let mut sections = Vec::new();
        for k in 0..n {
            let (p1, p2, eof) = (3 * k, 3 * k + 1, 3 * k + 2);
            let parent_at = driver_len + prog.len();
            let mut body = vec![Step::Fork { child_at: 0 }];
            let round_at = body.len();
            body.extend(self.parent_round(p1, p2));
            body.push(Step::Count {
                counter: PASSES + k,
            });
            body.push(Step::LoopFor {
                to: to(parent_at + round_at),
                dur: pass_ns,
            });
            body.extend([
                // alarm → report(): exit, closing the pipes (end-of-file for the child).
                Step::Ready { hist: 0 },
                Step::Signal {
                    chan: eof,
                    sync: false,
                    wake_cost: 0,
                },
                Step::Signal {
                    chan: p1,
                    sync: true,
                    wake_cost: self.c_wakeup_ns,
                },
                Step::Signal {
                    chan: done,
                    sync: false,
                    wake_cost: self.c_wakeup_ns,
                },
                Step::Exit,
            ]);
            let child_at = parent_at + body.len();
            body[0] = Step::Fork {
                child_at: to(child_at),
            };
            let round = self.child_round(p1, p2, Some(Step::Branch { chan: eof, to: 0 }));
            let exit_at = child_at + round.len() + 1;
            for s in round {
                body.push(match s {
                    Step::Branch { chan, .. } => Step::Branch {
                        chan,
                        to: to(exit_at),
                    },
                    s => s,
                });
            }
            body.push(Step::Goto {
                to: to(child_at),
                times: None,
            });
            body.extend([
                Step::Signal {
                    chan: done,
                    sync: false,
                    wake_cost: self.c_wakeup_ns,
                },
                Step::Exit,
            ]);
            sections.push(parent_at);
            prog.extend(body);
        }
        let mut driver = Vec::with_capacity(driver_len);
        for &parent_at in &sections {
            driver.extend([
                Step::Sleep {
                    dur: Dist::Fixed(self.gap_ms * NS_PER_MS),
                    slack: TIMER_SLACK_NS,
                },
                Step::Fork {
                    child_at: to(parent_at),
                },
                Step::Wait {
                    chan: done,
                    block_cost: self.c_block_ns,
                    slept: None,
                },
                Step::Wait {
                    chan: done,
                    block_cost: self.c_block_ns,
                    slept: None,
                },
            ]);
        }
        driver.push(Step::Exit);
        debug_assert_eq!(driver.len(), driver_len);
        driver.extend(prog);
        let prog = driver;
        let mut tasks = vec![self.task("run", prog.clone(), 0)];
        for k in 1..=self.passes {
            tasks.push(self.task(&format!("parent{k}"), prog.clone(), NEVER));
            tasks.push(self.task(&format!("child{k}"), prog.clone(), NEVER));
        }
        let mut counters = vec![
            "iterations".into(),
            "parent_sleeps".into(),
            "child_sleeps".into(),
        ];
        counters.extend((1..=self.passes).map(|k| format!("pass{k}")));
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::Context1,
            tasks,
            channels: done + 1,
            counters,
            hists: vec!["elapsed".into()],
            gap_pairs: vec![],
            tokens: vec![],
            hist_buckets: 0,
        }
    }
}

/// `Run`'s score of a test from its passes' counts and their mean elapsed time (s): sort the
/// passes by count, drop the lowest third (`int(n / 3)`), take the geometric mean of
/// count / elapsed over the others; a pass that counted 0 counts as a pass but adds nothing to
/// the product, as in `Run`. Byte-unixbench `Run`: `combinePassResults`.
pub fn run_score(counts: &[u64], elapsed_s: f64) -> f64 {
    if elapsed_s <= 0.0 {
        return 0.0;
    }
    let mut sorted = counts.to_vec();
    sorted.sort_unstable();
    let kept = &sorted[counts.len() / 3..];
    if kept.is_empty() {
        return 0.0;
    }
    let product: f64 = kept
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| (c as f64).ln() - elapsed_s.ln())
        .sum();
    (product / kept.len() as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(extra: &str) -> Context1Config {
        toml::from_str(&format!("name = \"c1\"\n{extra}")).unwrap()
    }

    #[test]
    fn the_drivers_defaults_are_runs() {
        let c = cfg("");
        assert_eq!(c.driver, Driver::Window);
        let u = cfg("driver = \"unixbench\"");
        assert_eq!(u.driver, Driver::Unixbench);
        // `repeat => 'long'`: 10 passes; `options => "10"`; `sync; sleep 1; sync; sleep 2`.
        assert_eq!((u.passes, u.pass_s, u.gap_ms), (10, 10, 3000));
        u.validate().unwrap();
    }

    #[test]
    fn the_window_driver_is_one_pair_started_with_the_run() {
        let w = cfg("").build();
        assert_eq!(w.tasks.len(), 2);
        assert!(w.tasks.iter().all(|t| t.start == 0));
        assert_eq!(w.counters.len(), PASSES as usize);
        assert!(w.hists.is_empty());
        assert_eq!(w.gap_pairs, vec![(0, 1)]);
    }

    #[test]
    fn the_unixbench_driver_forks_a_fresh_pair_each_pass() {
        let c = cfg("driver = \"unixbench\"\npasses = 4\npass_s = 2\ngap_ms = 500");
        let w = c.build();
        // The driver starts with the run; every parent and child waits for its fork.
        assert_eq!(w.tasks.len(), 9);
        assert_eq!(w.tasks[0].start, 0);
        assert!(w.tasks[1..].iter().all(|t| t.start == NEVER));
        assert_eq!(w.counters.len(), PASSES as usize + 4);
        assert_eq!(w.hists, vec!["elapsed".to_string()]);
        assert_eq!(w.channels, 13);
        let p = &w.tasks[0].program;
        // The driver: per pass, the idle gap, a fork, two waits (parent and child exit).
        let forks: Vec<usize> = p[..17]
            .iter()
            .filter_map(|s| match s {
                Step::Fork { child_at } => Some(*child_at as usize),
                _ => None,
            })
            .collect();
        assert_eq!(forks.len(), 4);
        assert_eq!(
            p[0],
            Step::Sleep {
                dur: Dist::Fixed(500 * NS_PER_MS),
                slack: TIMER_SLACK_NS
            }
        );
        assert_eq!(p[16], Step::Exit);
        for (k, &at) in forks.iter().enumerate() {
            // Each parent first forks its child, and loops until its alarm on its own pipes.
            let Step::Fork { child_at } = p[at] else {
                panic!("pass {k}: the parent forks first: {:?}", p[at]);
            };
            let parent = &p[at..child_at as usize];
            assert!(parent.contains(&Step::LoopFor {
                to: at as u16 + 1,
                dur: 2 * NS_PER_S
            }));
            assert!(parent.contains(&Step::Count {
                counter: PASSES + k as u16
            }));
            assert!(parent.contains(&Step::Signal {
                chan: 3 * k as u16 + 2,
                sync: false,
                wake_cost: 0
            }));
            // The child leaves its loop at the end-of-file flag of its pass's first pipe.
            let child = &p[child_at as usize..];
            let Some(Step::Branch { chan, to }) =
                child.iter().find(|s| matches!(s, Step::Branch { .. }))
            else {
                panic!("pass {k}: the child checks end-of-file");
            };
            assert_eq!(*chan, 3 * k as u16 + 2);
            assert!(matches!(p[*to as usize], Step::Signal { chan: 12, .. }));
            assert_eq!(p[*to as usize + 1], Step::Exit);
        }
    }

    #[test]
    fn run_score_drops_the_worst_third_and_takes_the_geometric_mean() {
        // 10 passes: the 3 lowest counts go; the other 7 average geometrically.
        let counts = [1, 2, 3, 100, 100, 100, 100, 100, 100, 800];
        let kept = (100f64.ln() * 6.0 + 800f64.ln()) / 7.0;
        let want = (kept - 2f64.ln()).exp();
        assert!((run_score(&counts, 2.0) - want).abs() < 1e-9 * want);
        // Order does not matter; Run sorts by count.
        let mut rev = counts;
        rev.reverse();
        assert_eq!(run_score(&rev, 2.0), run_score(&counts, 2.0));
        // A pass that counted nothing still counts as a pass (Run skips only its log).
        let with_zero = [0, 0, 0, 0, 10, 10];
        let want = (2.0 * 10f64.ln() / 4.0).exp();
        assert!((run_score(&with_zero, 1.0) - want).abs() < 1e-9);
        assert_eq!(run_score(&counts, 0.0), 0.0);
    }

    #[test]
    fn bad_driver_fields_are_named() {
        let bad = |extra: &str| cfg(extra).validate().unwrap_err().0;
        assert_eq!(bad("passes = 5"), "passes");
        assert_eq!(bad("gap_ms = 1"), "gap_ms");
        assert_eq!(bad("driver = \"unixbench\"\npasses = 0"), "passes");
        assert_eq!(bad("driver = \"unixbench\"\npasses = 101"), "passes");
        assert_eq!(bad("driver = \"unixbench\"\npass_s = 0"), "pass_s");
        assert!(toml::from_str::<Context1Config>("name = \"c\"\ndriver = \"run\"").is_err());
    }
}
