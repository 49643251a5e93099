//! cyclictest (rt-tests v0.89; spec/workloads.md §2 with ERRATA W1–W3b).
//!
//! One measurement thread per `threads`, each sleeping on an absolute `clock_nanosleep` timer
//! every `interval_us` and recording `now − expiry` in a one-microsecond histogram; plus the
//! main thread, which wakes every 10 ms even with `-q` (§2.3). A SCHED_OTHER thread's timer has
//! the task's timer slack (50 µs by default; ERRATA W1); a FIFO/RR thread (`priority > 0`, `-p`)
//! has none. The first expiry is one interval after start (W2); missed periods are skipped (W3b).
//! Output in the seed era's `-q -h N` format is produced by the Python layer from the histogram.

use serde::{Deserialize, Serialize};

use super::{Dist, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::Policy;
use crate::time::{time_ns, Nanos, NS_PER_MS, NS_PER_US};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CyclictestConfig {
    pub name: String,
    /// `-t N`
    #[serde(default = "super::one")]
    pub threads: u32,
    /// `-i US`
    #[serde(default = "d_interval")]
    pub interval_us: u64,
    /// `-p PRIO`: 0 = SCHED_OTHER.
    #[serde(default)]
    pub priority: u32,
    /// `-h N`: histogram buckets of 1 µs.
    #[serde(default = "d_hist")]
    pub histogram_us: u32,
    /// Timer slack of SCHED_OTHER threads (`prctl(PR_SET_TIMERSLACK)`; 50 µs by default).
    #[serde(default = "d_slack")]
    pub timer_slack_ns: u64,
    /// Model the main thread's 10 ms `usleep` loop.
    #[serde(default = "yes")]
    pub main_thread: bool,
    #[serde(default)]
    pub affinity: Option<Vec<u32>>,
}

fn yes() -> bool {
    true
}
fn d_interval() -> u64 {
    1000
}
fn d_hist() -> u32 {
    5000
}
fn d_slack() -> u64 {
    50_000
}

impl CyclictestConfig {
    /// `interval_us` in ns, checked.
    pub fn interval_ns(&self) -> Result<Nanos, (String, String)> {
        time_ns("interval_us", self.interval_us, NS_PER_US)
    }

    pub fn validate(&self) -> Result<(), (String, String)> {
        super::check_copies("threads", self.threads)?;
        if self.threads > u16::MAX as u32 + 1 {
            // Histogram indices are u16.
            return Err(("threads".into(), "must be at most 65536".into()));
        }
        if self.interval_us == 0 {
            return Err(("interval_us".into(), "must be positive".into()));
        }
        self.interval_ns()?;
        crate::scenario::check_ns("timer_slack_ns", self.timer_slack_ns)?;
        if self.priority > 99 {
            return Err(("priority".into(), "RT priority must be 0..=99".into()));
        }
        if self.histogram_us == 0 || self.histogram_us > 1_000_000 {
            return Err(("histogram_us".into(), "must be 1..=1000000 buckets".into()));
        }
        Ok(())
    }

    pub fn build(&self) -> WorkloadSpec {
        let rt = self.priority > 0;
        let slack = if rt { 0 } else { self.timer_slack_ns };
        let mut tasks: Vec<TaskSpec> = (0..self.threads)
            .map(|k| TaskSpec {
                name: format!("{}.t{k}", self.name),
                program: vec![
                    Step::Periodic {
                        interval: self.interval_ns().expect("validated before build"),
                        slack,
                        hist: k as u16,
                    },
                    // clock_gettime, the histogram update and the loop: a few hundred ns.
                    Step::Compute {
                        dur: Dist::Fixed(500),
                        kernel: false,
                    },
                    Step::Goto { to: 0, times: None },
                ],
                nice: 0,
                policy: if rt { Policy::Fifo } else { Policy::Normal },
                rt_prio: self.priority,
                times: Default::default(),
                affinity: self.affinity.clone(),
                start: 0,
            })
            .collect();
        if self.main_thread {
            tasks.push(TaskSpec {
                name: format!("{}.main", self.name),
                program: vec![
                    Step::Sleep {
                        dur: Dist::Fixed(10 * NS_PER_MS),
                        slack: self.timer_slack_ns,
                    },
                    Step::Compute {
                        dur: Dist::Fixed(2000),
                        kernel: false,
                    },
                    Step::Goto { to: 0, times: None },
                ],
                nice: 0,
                policy: Policy::Normal,
                rt_prio: 0,
                times: Default::default(),
                affinity: self.affinity.clone(),
                start: 0,
            });
        }
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::Cyclictest,
            tasks,
            channels: 0,
            counters: vec![],
            hists: (0..self.threads).map(|k| format!("latency_t{k}")).collect(),
            gap_pairs: vec![],
            tokens: vec![],
            hist_buckets: self.histogram_us,
        }
    }
}
