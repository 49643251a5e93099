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
//! Simplification: the Run driver's passes (10 runs of 10 s with 3 s idle gaps, worst third
//! dropped, geometric mean) are not modelled; the score is the count over the measured window.

use serde::{Deserialize, Serialize};

use super::{Dist, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::Policy;

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
        if self.c_syscall_ns + self.c_pipe_rw_ns + self.c_user_ns == 0 {
            return Err((
                "c_syscall_ns".into(),
                "a round trip must cost some CPU time (all costs are zero)".into(),
            ));
        }
        Ok(())
    }

    pub fn build(&self) -> WorkloadSpec {
        let j = self.jitter_pct.min(100) as u64;
        let dist = move |ns: u64| {
            if j == 0 {
                Dist::Fixed(ns)
            } else {
                Dist::Uniform(ns - ns * j / 100, ns + ns * j / 100)
            }
        };
        let k = |ns| Step::Compute {
            dur: dist(ns),
            kernel: true,
        };
        let write_cost = self.c_syscall_ns + self.c_pipe_rw_ns;
        let parent = vec![
            // write(p1): the copy, then the wake-up of the child (if it sleeps) inside the syscall.
            k(write_cost),
            Step::Signal {
                chan: P1,
                sync: true,
                wake_cost: self.c_wakeup_ns,
            },
            // read(p2)
            k(self.c_syscall_ns),
            Step::Wait {
                chan: P2,
                block_cost: self.c_block_ns,
                slept: Some(PARENT_SLEEPS),
            },
            k(self.c_pipe_rw_ns),
            Step::Compute {
                dur: dist(self.c_user_ns),
                kernel: false,
            },
            Step::Count {
                counter: ITERATIONS,
            },
            Step::Goto { to: 0, times: None },
        ];
        let child = vec![
            // read(p1)
            k(self.c_syscall_ns),
            Step::Wait {
                chan: P1,
                block_cost: self.c_block_ns,
                slept: Some(CHILD_SLEEPS),
            },
            k(self.c_pipe_rw_ns),
            Step::Compute {
                dur: dist(self.c_user_ns),
                kernel: false,
            },
            // write(p2)
            k(write_cost),
            Step::Signal {
                chan: P2,
                sync: true,
                wake_cost: self.c_wakeup_ns,
            },
            Step::Goto { to: 0, times: None },
        ];
        let task = |name: &str, program| TaskSpec {
            name: format!("{}.{name}", self.name),
            program,
            nice: self.nice,
            policy: Policy::Normal,
            rt_prio: 0,
            times: Default::default(),
            affinity: self.affinity.clone(),
            start: 0,
        };
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::Context1,
            tasks: vec![task("parent", parent), task("child", child)],
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
}
