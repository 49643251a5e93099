//! User-written step programs (`kind = "program"`): the scenario file spells out the steps.
//!
//! ```toml
//! [[domain.workload]]
//! kind = "program"
//! name = "app"
//! copies = 2
//! channels = ["lock"]
//! counters = ["ops"]
//! steps = [
//!   { op = "compute", us = 100 },
//!   { op = "wait", chan = "lock" },
//!   { op = "compute", exp_us = 50 },
//!   { op = "signal", chan = "lock" },
//!   { op = "count", counter = "ops" },
//!   { op = "sleep", ms = 1 },
//!   { op = "loop", to = 0 },
//! ]
//! ```
//!
//! Channels and counters are shared by all copies of the program.

use serde::{Deserialize, Serialize};

use super::{Dist, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::Policy;
use crate::time::{NS_PER_MS, NS_PER_US};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramConfig {
    pub name: String,
    #[serde(default = "super::one")]
    pub copies: u32,
    #[serde(default)]
    pub nice: i32,
    #[serde(default)]
    pub policy: Policy,
    #[serde(default)]
    pub rt_priority: u32,
    #[serde(default)]
    pub affinity: Option<Vec<u32>>,
    #[serde(default)]
    pub channels: Vec<String>,
    /// Initial tokens per channel (default 0 each).
    #[serde(default)]
    pub tokens: Vec<u32>,
    #[serde(default)]
    pub counters: Vec<String>,
    /// Start time of the tasks.
    #[serde(default)]
    pub start_us: u64,
    pub steps: Vec<StepConfig>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum StepConfig {
    Compute {
        ns: Option<u64>,
        us: Option<u64>,
        ms: Option<u64>,
        exp_us: Option<u64>,
        uniform_us: Option<[u64; 2]>,
        #[serde(default)]
        kernel: bool,
    },
    Sleep {
        ns: Option<u64>,
        us: Option<u64>,
        ms: Option<u64>,
        exp_us: Option<u64>,
        uniform_us: Option<[u64; 2]>,
        #[serde(default = "slack50")]
        slack_ns: u64,
    },
    Wait {
        chan: String,
        #[serde(default)]
        block_cost_ns: u64,
    },
    Signal {
        chan: String,
        #[serde(default)]
        sync: bool,
        #[serde(default)]
        wake_cost_ns: u64,
    },
    Spin {
        chan: String,
        /// Wait with WFE (arm64): a trapped WFE yields the vCPU to the host.
        #[serde(default)]
        wfe: bool,
    },
    Yield,
    Count {
        counter: String,
    },
    Loop {
        to: u16,
        times: Option<u32>,
    },
    Exit,
}

fn slack50() -> u64 {
    50_000
}

fn dur(
    i: usize,
    ns: Option<u64>,
    us: Option<u64>,
    ms: Option<u64>,
    exp_us: Option<u64>,
    uniform_us: Option<[u64; 2]>,
) -> Result<Dist, (String, String)> {
    let given = [
        ns.is_some(),
        us.is_some(),
        ms.is_some(),
        exp_us.is_some(),
        uniform_us.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err((
            format!("steps[{i}]"),
            "give the duration in exactly one of ns, us, ms, exp_us, uniform_us".into(),
        ));
    }
    Ok(if let Some(v) = ns {
        Dist::Fixed(v)
    } else if let Some(v) = us {
        Dist::Fixed(v * NS_PER_US)
    } else if let Some(v) = ms {
        Dist::Fixed(v * NS_PER_MS)
    } else if let Some(v) = exp_us {
        Dist::Exp(v * NS_PER_US)
    } else {
        let [a, b] = uniform_us.unwrap();
        if a > b {
            return Err((format!("steps[{i}].uniform_us"), "needs a ≤ b".into()));
        }
        Dist::Uniform(a * NS_PER_US, b * NS_PER_US)
    })
}

impl ProgramConfig {
    fn index(list: &[String], name: &str, what: &str, i: usize) -> Result<u16, (String, String)> {
        list.iter()
            .position(|c| c == name)
            .map(|p| p as u16)
            .ok_or_else(|| {
                (
                    format!("steps[{i}]"),
                    format!("unknown {what} '{name}' (declared: {list:?})"),
                )
            })
    }

    /// Compiles the step list, or names the step that is wrong.
    pub fn compile(&self) -> Result<Vec<Step>, (String, String)> {
        if self.steps.is_empty() {
            return Err(("steps".into(), "a program needs at least one step".into()));
        }
        let mut out = Vec::with_capacity(self.steps.len());
        for (i, s) in self.steps.iter().enumerate() {
            out.push(match s {
                StepConfig::Compute {
                    ns,
                    us,
                    ms,
                    exp_us,
                    uniform_us,
                    kernel,
                } => Step::Compute {
                    dur: dur(i, *ns, *us, *ms, *exp_us, *uniform_us)?,
                    kernel: *kernel,
                },
                StepConfig::Sleep {
                    ns,
                    us,
                    ms,
                    exp_us,
                    uniform_us,
                    slack_ns,
                } => Step::Sleep {
                    dur: dur(i, *ns, *us, *ms, *exp_us, *uniform_us)?,
                    slack: *slack_ns,
                },
                StepConfig::Wait {
                    chan,
                    block_cost_ns,
                } => Step::Wait {
                    chan: Self::index(&self.channels, chan, "channel", i)?,
                    block_cost: *block_cost_ns,
                    slept: None,
                },
                StepConfig::Signal {
                    chan,
                    sync,
                    wake_cost_ns,
                } => Step::Signal {
                    chan: Self::index(&self.channels, chan, "channel", i)?,
                    sync: *sync,
                    wake_cost: *wake_cost_ns,
                },
                StepConfig::Spin { chan, wfe } => Step::Spin {
                    chan: Self::index(&self.channels, chan, "channel", i)?,
                    wfe: *wfe,
                },
                StepConfig::Yield => Step::Yield,
                StepConfig::Count { counter } => Step::Count {
                    counter: Self::index(&self.counters, counter, "counter", i)?,
                },
                StepConfig::Loop { to, times } => {
                    if *to as usize >= self.steps.len() {
                        return Err((
                            format!("steps[{i}].to"),
                            format!("step {to} does not exist ({} steps)", self.steps.len()),
                        ));
                    }
                    Step::Goto {
                        to: *to,
                        times: *times,
                    }
                }
                StepConfig::Exit => Step::Exit,
            });
        }
        // A program must not spin forever without time passing: every loop needs a step that
        // takes time or blocks.
        let timeless = out.iter().all(|s| {
            matches!(
                s,
                Step::Signal { .. } | Step::Count { .. } | Step::Goto { .. } | Step::Yield
            )
        });
        if timeless
            && out
                .iter()
                .any(|s| matches!(s, Step::Goto { times: None, .. }))
        {
            return Err((
                "steps".into(),
                "an endless loop needs a step that takes time".into(),
            ));
        }
        Ok(out)
    }

    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.tokens.len() > self.channels.len() {
            return Err((
                "tokens".into(),
                "more initial token counts than channels".into(),
            ));
        }
        if self.copies == 0 {
            return Err(("copies".into(), "must be at least 1".into()));
        }
        self.compile().map(|_| ())
    }

    pub fn build(&self) -> WorkloadSpec {
        let program = self.compile().expect("validated before build");
        let tasks = (0..self.copies)
            .map(|k| TaskSpec {
                name: format!("{}.{k}", self.name),
                program: program.clone(),
                nice: self.nice,
                policy: self.policy,
                rt_prio: self.rt_priority,
                affinity: self.affinity.clone(),
                start: self.start_us * NS_PER_US,
            })
            .collect();
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::Program,
            tasks,
            channels: self.channels.len() as u16,
            counters: self.counters.clone(),
            hists: vec![],
            gap_pairs: vec![],
            tokens: self.tokens.clone(),
            hist_buckets: 0,
        }
    }
}
