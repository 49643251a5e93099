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
//! Channels and counters are shared by all copies of the program. A `fork` step starts a child
//! task of the workload (Linux `fork()` + `wake_up_new_task`) in one of `max_tasks`
//! preallocated slots; `exit` ends a task (its entity leaves its scheduler and is `offline`).

use serde::{Deserialize, Serialize};

use super::{Dist, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::{Policy, SchedTimes};
use crate::time::{config_ns, time_ns, Nanos, MAX_EXP_MEAN_NS, NEVER, NS_PER_MS, NS_PER_US};

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
    /// `sched_attr.sched_runtime` (ns): a `deadline` task's runtime per period, or a normal,
    /// batch or idle task's requested slice (EEVDF from Linux 6.12; 0: the default slice).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sched_runtime_ns: u64,
    /// `sched_attr.sched_deadline` (ns): a `deadline` task's relative deadline.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sched_deadline_ns: u64,
    /// `sched_attr.sched_period` (ns): a `deadline` task's period (0: the deadline).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sched_period_ns: u64,
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
    /// The most tasks this workload has over the whole run: the `copies` started at
    /// `start_us` and every child a `fork` step creates (children are never recycled). Slots
    /// are preallocated at build; a fork with none left fails. Required with a `fork` step;
    /// at most [`MAX_TASKS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tasks: Option<u32>,
    pub steps: Vec<StepConfig>,
}

/// `1 << DL_SCALE`: the least runtime of a SCHED_DEADLINE task (Linux `__checkparam_dl`).
pub const DL_MIN_RUNTIME_NS: u64 = 1 << 10;

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The most tasks one program workload may have over a run (`max_tasks`).
pub const MAX_TASKS: u32 = 65_536;

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
        /// Wait with a trappable instruction (arm64 WFE, x86 PAUSE): where the hypervisor traps
        /// it (crate::hv::Spin), the vCPU yields to the host.
        #[serde(default)]
        wfe: bool,
    },
    Yield,
    /// `smp_call_function_many(cpus, f, wait = 1)`: a call-function IPI to each guest CPU of
    /// `cpus` (the sender's own left out), then spin (`csd_lock_wait`) until each has run the
    /// function (sim/pv.rs). With PV sched yield and more than one target, the first preempted
    /// busy target gets the sender's pCPU (KVM_HC_SCHED_YIELD).
    CallFunc {
        cpus: Vec<u16>,
    },
    Count {
        counter: String,
    },
    Loop {
        to: u16,
        times: Option<u32>,
    },
    /// An emulated I/O access of an HVM guest (a port or MMIO access that traps to Xen and is
    /// handed to the device model in the driver domain): the vCPU is blocked in Xen until dom0
    /// completes it (ERRATA X9, docs/io.md); the task goes on after it.
    Ioreq,
    /// `fork()`: a child starts at step `child_at` (default: the next step, as both sides of a
    /// `fork()` go on after it).
    Fork {
        child_at: Option<u16>,
    },
    Exit,
}

fn slack50() -> u64 {
    50_000
}

/// The duration of step `i` from the one unit it is given in, converted with checked arithmetic.
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
            format!("steps.{i}"),
            "give the duration in exactly one of ns, us, ms, exp_us, uniform_us".into(),
        ));
    }
    let f = |unit: &str| format!("steps.{i}.{unit}");
    Ok(if let Some(v) = ns {
        Dist::Fixed(time_ns(&f("ns"), v, 1)?)
    } else if let Some(v) = us {
        Dist::Fixed(time_ns(&f("us"), v, NS_PER_US)?)
    } else if let Some(v) = ms {
        Dist::Fixed(time_ns(&f("ms"), v, NS_PER_MS)?)
    } else if let Some(v) = exp_us {
        Dist::Exp(config_ns(&f("exp_us"), v, NS_PER_US, MAX_EXP_MEAN_NS)?)
    } else {
        let [a, b] = uniform_us.expect("exactly one duration is given");
        if a > b {
            return Err((f("uniform_us"), "needs a ≤ b".into()));
        }
        let (a, b) = (
            time_ns(&f("uniform_us"), a, NS_PER_US)?,
            time_ns(&f("uniform_us"), b, NS_PER_US)?,
        );
        Dist::Uniform(a, b)
    })
}

/// Whether executing the step always lets simulated time pass (almost surely, for a random
/// duration): a compute or sleep that cannot be 0 ns, or a periodic timer. A wait, spin or yield
/// may return at once (a token is there; no other task wants the CPU), so it does not count.
fn takes_time(s: &Step) -> bool {
    let positive = |d: &Dist| match *d {
        Dist::Fixed(v) => v > 0,
        Dist::Uniform(_, hi) => hi > 0,
        Dist::Exp(mean) => mean > 0,
    };
    match s {
        Step::Compute { dur, .. } => positive(dur),
        Step::Sleep { dur, slack } => *slack > 0 || positive(dur),
        Step::Periodic { interval, .. } => *interval > 0,
        // The device model's work is positive (`device_model.emulate_ns` > 0, validated).
        Step::Ioreq => true,
        _ => false,
    }
}

/// The steps that can run after step `i` without time passing in between.
fn zero_time_successors(prog: &[Step], i: usize) -> impl Iterator<Item = usize> + '_ {
    let (a, b) = match prog[i] {
        Step::Exit => (None, None),
        Step::Goto { to, times: None } => (Some(to as usize), None),
        Step::Goto { to, times: Some(_) } => (Some(to as usize), Some(i + 1)),
        Step::LoopFor { to, .. } => (Some(to as usize), Some(i + 1)),
        Step::Branch { to, .. } => (Some(to as usize), Some(i + 1)),
        // The parent goes on; the child starts at `child_at`, possibly at once.
        Step::Fork { child_at } => (Some(i + 1), Some(child_at as usize)),
        _ => (Some(i + 1), None),
    };
    [a, b]
        .into_iter()
        .flatten()
        .filter(move |&j| j < prog.len() && !takes_time(&prog[j]))
}

/// A loop the task could go round without simulated time passing: returns the loop step (a
/// `Goto`) of such a cycle. Iterative depth-first search over the steps that take no time.
fn zero_time_loop(prog: &[Step]) -> Option<usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; prog.len()];
    for root in (0..prog.len()).filter(|&i| !takes_time(&prog[i])) {
        if mark[root] != Mark::New {
            continue;
        }
        // (step, its successors not yet followed)
        let mut stack: Vec<(usize, Vec<usize>)> = Vec::new();
        mark[root] = Mark::Open;
        stack.push((root, zero_time_successors(prog, root).collect()));
        while let Some((u, next)) = stack.last_mut() {
            let u = *u;
            match next.pop() {
                Some(v) if mark[v] == Mark::Open => {
                    // The cycle is the stack from v up to u, closed by u -> v; one of its steps
                    // jumps back.
                    let from = stack.iter().position(|(w, _)| *w == v).unwrap_or(0);
                    let g = stack[from..]
                        .iter()
                        .map(|(w, _)| *w)
                        .find(|&w| matches!(prog[w], Step::Goto { .. }))
                        .unwrap_or(u);
                    return Some(g);
                }
                Some(v) if mark[v] == Mark::New => {
                    mark[v] = Mark::Open;
                    stack.push((v, zero_time_successors(prog, v).collect()));
                }
                Some(_) => {}
                None => {
                    mark[u] = Mark::Done;
                    stack.pop();
                }
            }
        }
    }
    None
}

/// The most steps a program, channel or counter list may have (their indices are u16).
pub const MAX_STEPS: usize = u16::MAX as usize + 1;

impl ProgramConfig {
    fn index(list: &[String], name: &str, what: &str, i: usize) -> Result<u16, (String, String)> {
        list.iter()
            .position(|c| c == name)
            .map(|p| p as u16)
            .ok_or_else(|| {
                (
                    format!("steps.{i}"),
                    format!("unknown {what} '{name}' (declared: {list:?})"),
                )
            })
    }

    /// Compiles the step list, or names the step that is wrong. Refuses what cannot run: a
    /// program a task can run off the end of, and a loop that can repeat without time passing.
    pub fn compile(&self) -> Result<Vec<Step>, (String, String)> {
        if self.steps.is_empty() {
            return Err(("steps".into(), "a program needs at least one step".into()));
        }
        if self.steps.len() > MAX_STEPS {
            return Err((
                "steps".into(),
                format!("at most {MAX_STEPS} steps, got {}", self.steps.len()),
            ));
        }
        let mut out = Vec::with_capacity(self.steps.len());
        for (i, s) in self.steps.iter().enumerate() {
            let ns = |field: &str, v: u64| time_ns(&format!("steps.{i}.{field}"), v, 1);
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
                    ns: n,
                    us,
                    ms,
                    exp_us,
                    uniform_us,
                    slack_ns,
                } => Step::Sleep {
                    dur: dur(i, *n, *us, *ms, *exp_us, *uniform_us)?,
                    slack: ns("slack_ns", *slack_ns)?,
                },
                StepConfig::Wait {
                    chan,
                    block_cost_ns,
                } => Step::Wait {
                    chan: Self::index(&self.channels, chan, "channel", i)?,
                    block_cost: ns("block_cost_ns", *block_cost_ns)?,
                    slept: None,
                },
                StepConfig::Signal {
                    chan,
                    sync,
                    wake_cost_ns,
                } => Step::Signal {
                    chan: Self::index(&self.channels, chan, "channel", i)?,
                    sync: *sync,
                    wake_cost: ns("wake_cost_ns", *wake_cost_ns)?,
                },
                StepConfig::Spin { chan, wfe } => Step::Spin {
                    chan: Self::index(&self.channels, chan, "channel", i)?,
                    wfe: *wfe,
                },
                StepConfig::Yield => Step::Yield,
                StepConfig::CallFunc { cpus } => Step::CallFunc {
                    mask: cpus.iter().fold(0u64, |m, c| m | 1u64 << (*c).min(63)),
                },
                StepConfig::Ioreq => Step::Ioreq,
                StepConfig::Count { counter } => Step::Count {
                    counter: Self::index(&self.counters, counter, "counter", i)?,
                },
                StepConfig::Loop { to, times } => {
                    if *to as usize >= self.steps.len() {
                        return Err((
                            format!("steps.{i}.to"),
                            format!("step {to} does not exist ({} steps)", self.steps.len()),
                        ));
                    }
                    Step::Goto {
                        to: *to,
                        times: *times,
                    }
                }
                StepConfig::Fork { child_at } => {
                    let to = child_at.unwrap_or((i + 1) as u16);
                    if to as usize >= self.steps.len() {
                        return Err((
                            format!("steps.{i}.child_at"),
                            format!("step {to} does not exist ({} steps)", self.steps.len()),
                        ));
                    }
                    Step::Fork { child_at: to }
                }
                StepConfig::Exit => Step::Exit,
            });
        }
        let last = out.len() - 1;
        if !matches!(out[last], Step::Exit | Step::Goto { times: None, .. }) {
            return Err((
                format!("steps.{last}"),
                "a program must end with { op = \"exit\" } or an endless { op = \"loop\" } \
                 (no `times`): a task must not run past its last step"
                    .into(),
            ));
        }
        // Time must pass on every way round every loop, bounded or endless: a task going round
        // a loop of waits on tokens it signals itself, yields with nobody to yield to, or 0 ns
        // computes never lets the clock move.
        if let Some(g) = zero_time_loop(&out) {
            let to = match out[g] {
                Step::Goto { to, .. } => to as usize,
                _ => g,
            };
            return Err((
                format!("steps.{g}"),
                format!(
                    "the loop over steps {to}..={g} can go round without simulated time \
                     passing (wait, spin, yield, signal and count may return at once; a \
                     compute or sleep of 0 ns takes no time): give it a compute or sleep step \
                     that takes time"
                ),
            ));
        }
        Ok(out)
    }

    pub fn validate(&self) -> Result<(), (String, String)> {
        super::check_copies("copies", self.copies)?;
        super::check_nice(self.nice)?;
        match self.policy {
            Policy::Fifo | Policy::Rr if !(1..=99).contains(&self.rt_priority) => {
                return Err((
                    "rt_priority".into(),
                    format!(
                        "a {:?} task needs rt_priority in 1..=99, got {}",
                        self.policy, self.rt_priority
                    )
                    .to_lowercase(),
                ));
            }
            Policy::Normal | Policy::Batch | Policy::Idle if self.rt_priority != 0 => {
                return Err((
                    "rt_priority".into(),
                    format!(
                        "must be 0 unless policy is fifo or rr (got {})",
                        self.rt_priority
                    ),
                ));
            }
            _ => {}
        }
        self.check_sched_times()?;
        for (field, list) in [("channels", &self.channels), ("counters", &self.counters)] {
            if list.len() > MAX_STEPS {
                return Err((field.into(), format!("at most {MAX_STEPS} names")));
            }
            if let Some((k, name)) = list
                .iter()
                .enumerate()
                .find(|(k, n)| list[..*k].contains(n))
            {
                return Err((
                    format!("{field}.{k}"),
                    format!("the name '{name}' is declared twice"),
                ));
            }
        }
        if self.tokens.len() > self.channels.len() {
            return Err((
                "tokens".into(),
                "more initial token counts than channels".into(),
            ));
        }
        self.start_ns()?;
        let prog = self.compile()?;
        let forks = prog.iter().any(|s| matches!(s, Step::Fork { .. }));
        match self.max_tasks {
            None if forks => Err((
                "max_tasks".into(),
                "a program with a fork step needs max_tasks: the most tasks the workload has \
                 over the run (copies + children), preallocated at build"
                    .into(),
            )),
            Some(m) if m < self.copies || m > MAX_TASKS => Err((
                "max_tasks".into(),
                format!("must be copies ({})..={MAX_TASKS}, got {m}", self.copies),
            )),
            _ => Ok(()),
        }
    }

    /// `struct sched_attr`'s times as given.
    pub fn times(&self) -> SchedTimes {
        SchedTimes {
            sched_runtime_ns: self.sched_runtime_ns,
            sched_deadline_ns: self.sched_deadline_ns,
            sched_period_ns: self.sched_period_ns,
        }
    }

    /// The times as `sched_setattr` takes them for the policy: a `deadline` task's as
    /// `__checkparam_dl` (Linux v5.10) checks them, but for the period bounds, which are the
    /// guest's sysctls and checked with its admission control (`vmsched_sched`'s deadline
    /// class); a deadline task may not fork (`sched_fork` refuses a SCHED_DEADLINE parent
    /// with EAGAIN). Other policies: only a normal, batch or idle task's `sched_runtime_ns`
    /// (its slice request) is meaningful; the rest is refused rather than ignored.
    fn check_sched_times(&self) -> Result<(), (String, String)> {
        let err = |f: &str, m: String| Err((f.to_string(), m));
        if self.policy != Policy::Deadline {
            if matches!(self.policy, Policy::Fifo | Policy::Rr) && self.sched_runtime_ns != 0 {
                return err(
                    "sched_runtime_ns",
                    "only a deadline task's runtime or a normal, batch or idle task's slice \
                     request"
                        .into(),
                );
            }
            for (f, v) in [
                ("sched_deadline_ns", self.sched_deadline_ns),
                ("sched_period_ns", self.sched_period_ns),
            ] {
                if v != 0 {
                    return err(f, format!("only for policy = \"deadline\" (got {v})"));
                }
            }
            return Ok(());
        }
        let t = self.times();
        if t.sched_deadline_ns == 0 {
            return err(
                "sched_deadline_ns",
                "a deadline task needs a relative deadline above 0".into(),
            );
        }
        if t.sched_runtime_ns < DL_MIN_RUNTIME_NS {
            return err(
                "sched_runtime_ns",
                format!(
                    "a deadline task needs at least {DL_MIN_RUNTIME_NS} ns (1 << DL_SCALE), got {}",
                    t.sched_runtime_ns
                ),
            );
        }
        for (f, v) in [
            ("sched_deadline_ns", t.sched_deadline_ns),
            ("sched_period_ns", t.sched_period_ns),
        ] {
            if v >= 1 << 63 {
                return err(f, format!("must be below 2^63, got {v}"));
            }
        }
        if t.sched_runtime_ns > t.sched_deadline_ns {
            return err(
                "sched_runtime_ns",
                format!(
                    "must be at most sched_deadline_ns ({}), got {}",
                    t.sched_deadline_ns, t.sched_runtime_ns
                ),
            );
        }
        if t.sched_period_ns != 0 && t.sched_period_ns < t.sched_deadline_ns {
            return err(
                "sched_period_ns",
                format!(
                    "must be at least sched_deadline_ns ({}) or 0 (the deadline), got {}",
                    t.sched_deadline_ns, t.sched_period_ns
                ),
            );
        }
        if self
            .steps
            .iter()
            .any(|s| matches!(s, StepConfig::Fork { .. }))
        {
            return err(
                "policy",
                "a deadline task cannot fork (Linux refuses it with EAGAIN)".into(),
            );
        }
        Ok(())
    }

    /// `start_us` in ns, checked.
    pub fn start_ns(&self) -> Result<Nanos, (String, String)> {
        time_ns("start_us", self.start_us, NS_PER_US)
    }

    pub fn build(&self) -> WorkloadSpec {
        let program = self.compile().expect("validated before build");
        let n = self.max_tasks.unwrap_or(self.copies).max(self.copies);
        let mut tasks = super::task_vec("copies", n.into());
        tasks.extend(
            (0..self.copies)
                .map(|k| TaskSpec {
                    name: format!("{}.{k}", self.name),
                    program: program.clone(),
                    nice: self.nice,
                    policy: self.policy,
                    rt_prio: self.rt_priority,
                    times: self.times(),
                    affinity: self.affinity.clone(),
                    start: self.start_ns().expect("validated before build"),
                })
                .chain(
                    (self.copies..self.max_tasks.unwrap_or(self.copies)).map(|k| TaskSpec {
                        name: format!("{}.{k}", self.name),
                        program: program.clone(),
                        nice: self.nice,
                        policy: self.policy,
                        rt_prio: self.rt_priority,
                        times: self.times(),
                        affinity: self.affinity.clone(),
                        start: NEVER,
                    }),
                ),
        );
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
