//! Trace replay (`kind = "replay"`): the tasks of a recorded scheduler trace (`perf sched
//! record`, ftrace `sched_switch`/`sched_wakeup`; the readers are `crate::import::schedtrace`)
//! re-run their recorded CPU bursts and sleeps, so that a real machine's workload can be run
//! again under another scheduler or other parameters (counterfactual replay, issue 14 item 5;
//! docs/replay.md).
//!
//! ```toml
//! [[domain.workload]]
//! kind = "replay"
//! name = "trace"
//! tasks = [
//!   { name = "ping:4242", steps = "c120000 k1 w1 c5000 x" },
//!   { name = "pong:4243", steps = "w0 c80000 k0 x", affinity = [0] },
//! ]
//! ```
//!
//! A task's `steps` is a string of tokens, each a letter and a number, in the task's order:
//!
//! * `c<ns>`: run on the CPU for `ns` (the recorded CPU time up to the next event, preemptions
//!   left to the scheduler);
//! * `s<ns>`: a *timer-like* sleep of `ns`, as long as it was recorded: a sleep woken by nobody
//!   the replay has (an interrupt, the idle task, a task outside the selection);
//! * `w<k>`: a *dependency* sleep: wait until task `k` (its index in `tasks`) reaches its
//!   matching `k<this>` token; the n-th `w<k>` of a task matches the n-th `k<it>` of task `k`;
//! * `k<k>`: wake task `k` (its matching `w`), at this point of this task's CPU time;
//! * `x`: exit (implied at the end).
//!
//! So a wake-up between replayed tasks is replayed as a wake-up: when a scheduler runs the waker
//! later, the wakee runs later; a timer-like sleep lasts its recorded time whatever happened
//! before it (a relative sleep, like `nanosleep`). Each pair (waker, wakee) is a channel of the
//! engine (a token per wake, so a wake that comes before the wait is kept, as a pipe keeps its
//! byte); each task has a counter, its name, bumped at each wake-up (the end of a `s` or `w`),
//! which is its wake count.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Counter, Dist, Step, TaskSpec, WorkloadKind, WorkloadSpec};
use crate::sched::Policy;
use crate::time::{Nanos, MAX_TIME_NS};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    pub name: String,
    pub tasks: Vec<ReplayTask>,
}

/// One recorded task.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayTask {
    /// `comm:pid` as the trace names it.
    pub name: String,
    #[serde(default)]
    pub nice: i32,
    #[serde(default)]
    pub policy: Policy,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rt_priority: u32,
    /// CPUs the task may run on (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Vec<u32>>,
    /// The recorded program (module doc).
    pub steps: String,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// One token of a task's `steps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tok {
    Compute(Nanos),
    Sleep(Nanos),
    WaitFor(u32),
    Wake(u32),
    Exit,
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Compute(n) => write!(f, "c{n}"),
            Tok::Sleep(n) => write!(f, "s{n}"),
            Tok::WaitFor(k) => write!(f, "w{k}"),
            Tok::Wake(k) => write!(f, "k{k}"),
            Tok::Exit => write!(f, "x"),
        }
    }
}

/// `steps` text from tokens (what the importer writes).
pub fn format_steps(toks: &[Tok]) -> String {
    let mut s = String::new();
    for (i, t) in toks.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(&t.to_string());
    }
    s
}

/// The tokens of a `steps` string, or the token that is wrong (field `steps`, message naming
/// the token's position).
pub fn parse_steps(steps: &str, nr_tasks: usize) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    for (i, t) in steps.split_ascii_whitespace().enumerate() {
        let (op, num) = t.split_at(t.char_indices().nth(1).map_or(t.len(), |(p, _)| p));
        let bad = |m: &str| format!("token {i} '{t}': {m}");
        if op == "x" {
            if !num.is_empty() {
                return Err(bad("`x` (exit) takes no number"));
            }
            out.push(Tok::Exit);
            continue;
        }
        let n: u64 = num
            .parse()
            .map_err(|_| bad("expected a letter (c, s, w, k, x) and a number"))?;
        let task = || -> Result<u32, String> {
            if n as usize >= nr_tasks {
                return Err(bad(&format!("task {n} does not exist ({nr_tasks} tasks)")));
            }
            Ok(n as u32)
        };
        out.push(match op {
            "c" | "s" if n > MAX_TIME_NS => {
                return Err(bad(&format!("at most {MAX_TIME_NS} ns")));
            }
            "c" => Tok::Compute(n),
            "s" => Tok::Sleep(n),
            "w" => Tok::WaitFor(task()?),
            "k" => Tok::Wake(task()?),
            _ => return Err(bad("unknown op (c, s, w, k, x)")),
        });
    }
    Ok(out)
}

/// What a task's tokens amount to: its recorded CPU time and wake-ups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    pub cpu_ns: Nanos,
    pub wakes: u64,
}

/// The recorded CPU time and wake count of a token list.
pub fn recorded(toks: &[Tok]) -> Recorded {
    let mut r = Recorded::default();
    for t in toks {
        match t {
            Tok::Compute(n) => r.cpu_ns = r.cpu_ns.saturating_add(*n),
            Tok::Sleep(_) | Tok::WaitFor(_) => r.wakes += 1,
            _ => {}
        }
    }
    r
}

impl ReplayConfig {
    fn all_tokens(&self) -> Result<Vec<Vec<Tok>>, (String, String)> {
        self.tasks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                parse_steps(&t.steps, self.tasks.len()).map_err(|m| (format!("tasks.{i}.steps"), m))
            })
            .collect()
    }

    /// The channels: one per (waker, wakee) pair that has a wake, in pair order.
    fn channels(toks: &[Vec<Tok>]) -> BTreeMap<(u32, u32), u16> {
        let mut pairs = BTreeMap::new();
        for (i, ts) in toks.iter().enumerate() {
            for t in ts {
                if let Tok::Wake(k) = t {
                    pairs.insert((i as u32, *k), 0u16);
                }
            }
        }
        for (n, v) in pairs.values_mut().enumerate() {
            *v = n as u16;
        }
        pairs
    }

    /// Checks the tasks: names unique and not empty, steps that parse, a task waking itself,
    /// every `w` matched by a `k` of its waker (else the wait would never end), policies.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.tasks.is_empty() {
            return Err(("tasks".into(), "a replay needs at least one task".into()));
        }
        for (i, t) in self.tasks.iter().enumerate() {
            if t.name.is_empty() {
                return Err((format!("tasks.{i}.name"), "must not be empty".into()));
            }
            if self.tasks[..i].iter().any(|o| o.name == t.name) {
                return Err((
                    format!("tasks.{i}.name"),
                    format!("the name '{}' is used twice", t.name),
                ));
            }
            super::check_nice(t.nice).map_err(|(f, m)| (format!("tasks.{i}.{f}"), m))?;
            let rt = matches!(t.policy, Policy::Fifo | Policy::Rr);
            if rt != (1..=99).contains(&t.rt_priority) {
                return Err((
                    format!("tasks.{i}.rt_priority"),
                    "a fifo or rr task needs rt_priority in 1..=99; other policies 0".into(),
                ));
            }
            if t.policy == Policy::Deadline {
                return Err((
                    format!("tasks.{i}.policy"),
                    "a replayed task cannot be deadline (no runtime, deadline or period is \
                     recorded)"
                        .into(),
                ));
            }
        }
        let toks = self.all_tokens()?;
        if self.tasks.len() > usize::from(u16::MAX) {
            return Err(("tasks".into(), format!("at most {} tasks", u16::MAX)));
        }
        let mut waits: BTreeMap<(u32, u32), (u64, usize)> = BTreeMap::new();
        let mut wakes: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for (i, ts) in toks.iter().enumerate() {
            for t in ts {
                match *t {
                    Tok::WaitFor(k) | Tok::Wake(k) if k as usize == i => {
                        return Err((
                            format!("tasks.{i}.steps"),
                            format!("task {i} waits for or wakes itself ('{t}')"),
                        ));
                    }
                    Tok::WaitFor(k) => waits.entry((k, i as u32)).or_insert((0, i)).0 += 1,
                    Tok::Wake(k) => *wakes.entry((i as u32, k)).or_default() += 1,
                    _ => {}
                }
            }
        }
        if Self::channels(&toks).len() > usize::from(u16::MAX) {
            return Err((
                "tasks".into(),
                format!("at most {} (waker, wakee) pairs", u16::MAX),
            ));
        }
        for ((waker, wakee), (n, i)) in &waits {
            let k = wakes.get(&(*waker, *wakee)).copied().unwrap_or(0);
            if k < *n {
                return Err((
                    format!("tasks.{i}.steps"),
                    format!(
                        "waits {n} times for task {waker} ('w{waker}'), which wakes it only \
                         {k} times ('k{wakee}' in tasks.{waker}.steps): a wait would never end"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The tasks' programs. Validated first (`validate`).
    pub fn build(&self) -> WorkloadSpec {
        let toks = self.all_tokens().expect("a validated replay workload");
        let chans = Self::channels(&toks);
        let mut tasks = super::task_vec("tasks", self.tasks.len() as u64);
        for (i, (t, ts)) in self.tasks.iter().zip(&toks).enumerate() {
            let counter = i as Counter;
            let mut program = Vec::with_capacity(ts.len() * 2 + 1);
            for tok in ts {
                match *tok {
                    Tok::Compute(n) => program.push(Step::Compute {
                        dur: Dist::Fixed(n),
                        kernel: false,
                    }),
                    Tok::Sleep(n) => {
                        // The recorded sleep already holds the real timer's slack.
                        program.push(Step::Sleep {
                            dur: Dist::Fixed(n),
                            slack: 0,
                        });
                        program.push(Step::Count { counter });
                    }
                    Tok::WaitFor(k) => {
                        program.push(Step::Wait {
                            chan: chans[&(k, i as u32)],
                            block_cost: 0,
                            slept: None,
                        });
                        program.push(Step::Count { counter });
                    }
                    Tok::Wake(k) => program.push(Step::Signal {
                        chan: chans[&(i as u32, k)],
                        sync: false,
                        wake_cost: 0,
                    }),
                    Tok::Exit => break,
                }
            }
            program.push(Step::Exit);
            tasks.push(TaskSpec {
                name: format!("{}.{}", self.name, t.name),
                program,
                nice: t.nice,
                policy: t.policy,
                rt_prio: t.rt_priority,
                times: Default::default(),
                affinity: t.affinity.clone(),
                start: 0,
            });
        }
        WorkloadSpec {
            name: self.name.clone(),
            kind: WorkloadKind::Replay,
            tasks,
            channels: chans.len() as u16,
            counters: self.tasks.iter().map(|t| t.name.clone()).collect(),
            hists: vec![],
            gap_pairs: vec![],
            tokens: vec![],
            hist_buckets: 0,
        }
    }

    /// Each task's recorded CPU time and wake count (what the replay should reproduce).
    pub fn recorded(&self) -> Result<Vec<Recorded>, (String, String)> {
        Ok(self.all_tokens()?.iter().map(|t| recorded(t)).collect())
    }

    /// The total number of steps (for the memory budget).
    pub fn step_count(&self) -> u64 {
        self.tasks
            .iter()
            .map(|t| 2 * t.steps.split_ascii_whitespace().count() as u64 + 1)
            .sum()
    }
}

/// The figure: wake-ups replayed (all tasks) over the run.
pub fn figure(counters: &[u64]) -> super::Figure {
    super::Figure {
        name: "wakeups".into(),
        value: counters.iter().sum::<u64>() as f64,
        unit: "wakeups".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(tasks: &[(&str, &str)]) -> ReplayConfig {
        ReplayConfig {
            name: "r".into(),
            tasks: tasks
                .iter()
                .map(|(n, s)| ReplayTask {
                    name: n.to_string(),
                    nice: 0,
                    policy: Policy::Normal,
                    rt_priority: 0,
                    affinity: None,
                    steps: s.to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn steps_round_trip_and_errors_name_the_token() {
        let t = parse_steps("c10 s5 w1 k1 x", 2).unwrap();
        assert_eq!(
            t,
            vec![
                Tok::Compute(10),
                Tok::Sleep(5),
                Tok::WaitFor(1),
                Tok::Wake(1),
                Tok::Exit
            ]
        );
        assert_eq!(format_steps(&t), "c10 s5 w1 k1 x");
        assert_eq!(
            recorded(&t),
            Recorded {
                cpu_ns: 10,
                wakes: 2
            }
        );
        let e = parse_steps("c10 q3", 2).unwrap_err();
        assert!(e.starts_with("token 1 'q3'"), "{e}");
        let e = parse_steps("w7", 2).unwrap_err();
        assert!(e.contains("task 7 does not exist"), "{e}");
        let e = parse_steps("c", 2).unwrap_err();
        assert!(e.contains("token 0"), "{e}");
    }

    #[test]
    fn validate_refuses_a_wait_nobody_ends() {
        let e = cfg(&[("a", "w1 c5"), ("b", "c5")]).validate().unwrap_err();
        assert_eq!(e.0, "tasks.0.steps");
        assert!(e.1.contains("would never end"), "{e:?}");
        let e = cfg(&[("a", "k0")]).validate().unwrap_err();
        assert!(e.1.contains("itself"), "{e:?}");
        let e = cfg(&[("a", "c1"), ("a", "c1")]).validate().unwrap_err();
        assert_eq!(e.0, "tasks.1.name");
        cfg(&[("a", "w1 c5"), ("b", "c5 k0 c1")])
            .validate()
            .unwrap();
    }

    #[test]
    fn build_gives_one_channel_per_pair_and_counts_wakes() {
        let c = cfg(&[("a", "c5 k1 w1 s3"), ("b", "w0 c2 k0")]);
        c.validate().unwrap();
        let w = c.build();
        assert_eq!(w.channels, 2);
        assert_eq!(w.counters, vec!["a".to_string(), "b".into()]);
        let a = &w.tasks[0];
        assert_eq!(a.name, "r.a");
        // c5, k1 (pair (0,1) = channel 0), w1 (pair (1,0) = channel 1), count, s3, count, exit
        assert!(matches!(a.program[1], Step::Signal { chan: 0, .. }));
        assert!(matches!(a.program[2], Step::Wait { chan: 1, .. }));
        assert!(matches!(a.program[3], Step::Count { counter: 0 }));
        assert!(matches!(
            a.program[4],
            Step::Sleep {
                dur: Dist::Fixed(3),
                slack: 0
            }
        ));
        assert!(matches!(a.program.last(), Some(Step::Exit)));
        assert_eq!(
            c.recorded().unwrap(),
            vec![
                Recorded {
                    cpu_ns: 5,
                    wakes: 2
                },
                Recorded {
                    cpu_ns: 2,
                    wakes: 1
                }
            ]
        );
    }
}
