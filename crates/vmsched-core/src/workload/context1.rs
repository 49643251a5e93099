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
//! With `copies = N` (`./Run -c N`; `Run` without `-c` runs 1 copy and then one per CPU) each
//! pass starts N parents at once (`executeBenchmark`), each forking its own child on its own
//! pipes; the pass's count is the sum of the copies' (`runOnePass`), its elapsed time their mean.
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
    /// Parallel copies of the "unixbench" driver (`./Run -c N`; `Run` runs 1 and then as many
    /// as the machine has CPUs): each pass starts this many parents at once, each with its own
    /// child and pipes, and counts the sum of their round trips.
    #[serde(default = "super::one")]
    pub copies: u32,
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
/// The most parallel copies of the "unixbench" driver, and of passes × copies (every copy of
/// every pass is a section of one program that each of its tasks holds).
pub const MAX_COPIES: u32 = 64;
pub const MAX_PASS_COPIES: u32 = 256;
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
                ("copies", self.copies != 1),
            ] {
                if set {
                    return Err((field.into(), "only with driver = \"unixbench\"".into()));
                }
            }
        }
        if !(1..=MAX_PASSES).contains(&self.passes) {
            return Err(("passes".into(), format!("must be 1..={MAX_PASSES}")));
        }
        if !(1..=MAX_COPIES).contains(&self.copies) {
            return Err(("copies".into(), format!("must be 1..={MAX_COPIES}")));
        }
        if self.passes * self.copies > MAX_PASS_COPIES {
            return Err((
                "copies".into(),
                format!(
                    "passes × copies must be at most {MAX_PASS_COPIES}, got {} × {}",
                    self.passes, self.copies
                ),
            ));
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
    /// driver's at step 0, then per pass and copy the parent's and the child's, on the copy's
    /// own channels (its two pipes and the end-of-file flag of the first). Task 0 is the
    /// driver; the fork slots are taken in fork order: per pass first the `copies` parents
    /// (the driver forks them one after the other, as `executeBenchmark` does), then their
    /// children. Counter 3 + k sums pass k's round trips over its copies (`runOnePass`);
    /// histogram 0 holds each parent's elapsed time.
    fn build_unixbench(&self) -> WorkloadSpec {
        let (n, copies) = (self.passes as u16, self.copies as u16);
        let sections = n * copies;
        let done = 3 * sections;
        let pass_ns = u64::from(self.pass_s) * NS_PER_S;
        let to = |i: usize| u16::try_from(i).expect("MAX_PASS_COPIES keeps steps in u16");
        // The driver: per pass, idle, fork the copies' parents, wait for every parent and child
        // to exit.
        let per_pass = 1 + 3 * copies as usize;
        let driver_len = per_pass * n as usize + 1;
        let mut prog: Vec<Step> = Vec::new();
        let mut parents = Vec::new();
        for k in 0..n {
            for c in 0..copies {
                let i = k * copies + c;
                let (p1, p2, eof) = (3 * i, 3 * i + 1, 3 * i + 2);
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
                parents.push(parent_at);
                prog.extend(body);
            }
        }
        let mut driver = Vec::with_capacity(driver_len);
        for pass in parents.chunks(copies as usize) {
            driver.push(Step::Sleep {
                dur: Dist::Fixed(self.gap_ms * NS_PER_MS),
                slack: TIMER_SLACK_NS,
            });
            driver.extend(pass.iter().map(|&at| Step::Fork { child_at: to(at) }));
            driver.extend((0..2 * copies).map(|_| Step::Wait {
                chan: done,
                block_cost: self.c_block_ns,
                slept: None,
            }));
        }
        driver.push(Step::Exit);
        debug_assert_eq!(driver.len(), driver_len);
        driver.extend(prog);
        let prog = driver;
        let mut tasks = vec![self.task("run", prog.clone(), 0)];
        // Names by fork slot: pass k's parents, then its children (numbered in fork order).
        for k in 1..=self.passes {
            if self.copies == 1 {
                tasks.push(self.task(&format!("parent{k}"), prog.clone(), NEVER));
                tasks.push(self.task(&format!("child{k}"), prog.clone(), NEVER));
                continue;
            }
            for c in 1..=self.copies {
                tasks.push(self.task(&format!("parent{k}.{c}"), prog.clone(), NEVER));
            }
            for c in 1..=self.copies {
                tasks.push(self.task(&format!("child{k}.{c}"), prog.clone(), NEVER));
            }
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
    fn n_copies_start_together_each_on_its_own_pipes() {
        // `./Run -c 3`, 2 passes: per pass the driver forks 3 parents in a row, then waits for
        // 6 exits; every copy has its own three channels; a pass's copies count together.
        let c = cfg("driver = \"unixbench\"\npasses = 2\npass_s = 1\ngap_ms = 100\ncopies = 3");
        c.validate().unwrap();
        let w = c.build();
        assert_eq!(w.tasks.len(), 1 + 2 * 2 * 3);
        assert_eq!(w.channels, 3 * 6 + 1);
        let done = 18;
        let p = &w.tasks[0].program;
        let per_pass = 1 + 3 * 3;
        assert_eq!(p[2 * per_pass], Step::Exit);
        let mut sections = Vec::new();
        for k in 0..2 {
            let pass = &p[k * per_pass..(k + 1) * per_pass];
            assert!(matches!(pass[0], Step::Sleep { .. }));
            for s in &pass[1..4] {
                let Step::Fork { child_at } = *s else {
                    panic!("pass {k}: the copies are forked one after the other: {s:?}");
                };
                sections.push((k, child_at as usize));
            }
            assert!(pass[4..].iter().all(|s| matches!(
                s,
                Step::Wait { chan, .. } if *chan == done
            )));
        }
        let mut pipes = std::collections::BTreeSet::new();
        for &(k, at) in &sections {
            let Step::Fork { child_at } = p[at] else {
                panic!("a parent forks its child first");
            };
            let parent = &p[at..child_at as usize];
            assert!(parent.contains(&Step::Count {
                counter: PASSES + k as u16
            }));
            let Some(Step::Signal { chan, .. }) =
                parent.iter().find(|s| matches!(s, Step::Signal { .. }))
            else {
                panic!("the parent writes its first pipe");
            };
            assert!(pipes.insert(*chan), "pipe {chan} shared between copies");
        }
        assert_eq!(pipes.len(), 6);
        // Names by fork slot: a pass's parents, then its children.
        let names: Vec<&str> = w.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names[1..4],
            ["c1.parent1.1", "c1.parent1.2", "c1.parent1.3"]
        );
        assert_eq!(names[4], "c1.child1.1");
        // One copy keeps the one-copy program and names.
        let one = cfg("driver = \"unixbench\"\npasses = 2").build();
        assert_eq!(one.tasks[1].name, "c1.parent1");
        assert_eq!(one.tasks[2].name, "c1.child1");
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
        assert_eq!(bad("copies = 2"), "copies");
        assert_eq!(bad("driver = \"unixbench\"\ncopies = 0"), "copies");
        assert_eq!(bad("driver = \"unixbench\"\ncopies = 65"), "copies");
        assert_eq!(
            bad("driver = \"unixbench\"\npasses = 30\ncopies = 9"),
            "copies"
        );
        assert!(toml::from_str::<Context1Config>("name = \"c\"\ndriver = \"run\"").is_err());
    }
}
